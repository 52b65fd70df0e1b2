"""pipeline/work_items.py, pure: a GitHub webhook read into work summaries (Issues, pull
requests, milestones, removals; only the project's repository), the filters a find_work call
means with its cursor, and the page (20 items or 24 KiB, at least one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contracts.tools import FindWork, ToolError
from pipeline.work_items import (
    PAGE_BYTES,
    Filters,
    decode_cursor,
    encode_cursor,
    filters_of,
    page_of,
    size_of,
    summaries_of,
)

REALWORLD = Path(__file__).resolve().parents[1] / "data" / "realworld" / "github"
REPO = "Codertocat/Hello-World"


def real(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((REALWORLD / name).read_text())
    return body


def read(event: str, payload: dict[str, Any], repository: str = REPO) -> list[Any]:
    return summaries_of(event, payload, repository=repository, received_at_ms=77)


def test_an_issue_and_its_embedded_milestone() -> None:
    issue, milestone = read("issues", real("issues.opened.json"))
    assert (issue.kind, issue.number, issue.state, issue.labels) == ("issue", 1, "open", ("bug",))
    assert issue.milestone == 1 and issue.draft is None and issue.merged is None
    assert issue.source_updated_at_ms == 1557933618000 and issue.observed_at_ms == 77
    assert issue.url == "https://github.com/Codertocat/Hello-World/issues/1"
    assert (milestone.kind, milestone.number, milestone.state) == ("milestone", 1, "closed")
    assert (milestone.open_issues, milestone.closed_issues) == (1, 0)
    assert "labels" not in milestone.doc() and milestone.doc()["openIssues"] == 1


def test_pull_requests_draft_and_merged() -> None:
    (pr,) = read("pull_request", real("pull_request.converted_to_draft.json"))
    assert (pr.kind, pr.number, pr.draft, pr.merged) == ("pull_request", 2, True, False)
    (closed,) = read("pull_request", real("pull_request.closed.json"))
    assert closed.state == "closed" and closed.merged is False
    # A review comment's pull request has no `draft` (unknown, not false); `merged_at` null
    # says it is not merged.
    (seen,) = read("pull_request_review_comment", real("pull_request_review_comment.created.json"))
    assert seen.kind == "pull_request" and seen.draft is None and seen.merged is False
    comment = real("issue_comment.created.json")
    comment["issue"]["pull_request"] = {"url": "u"}  # an issue view of a PR without merged_at
    (viewed, _milestone) = read("issue_comment", comment)
    assert viewed.kind == "pull_request" and viewed.merged is None
    # An issues event about a pull request's number (it carries `pull_request`) is the PR.
    found = read("issues", real("issues.milestoned.json"))
    assert [(s.kind, s.number) for s in found] == [("pull_request", 2), ("milestone", 1)]


def test_removals_other_repositories_and_other_events() -> None:
    (gone, _ms) = read("issues", real("issues.deleted.json"))
    assert gone.removed and gone.number == 1 and gone.doc()["removed"] is True
    (moved,) = read("issues", real("issues.transferred.json"), repository="octo-org/octo-repo")
    assert moved.removed
    assert read("issues", real("issues.opened.json"), repository="acme/atlas") == []
    assert read("issues", real("issues.opened.json"), repository="") == []
    assert read("push", real("push.payload.json")) == []
    assert read("issues", real("issues.pinned.json")) == []  # no state in that payload


def test_a_milestone_event_and_bad_payloads() -> None:
    body: dict[str, Any] = {
        "action": "deleted",
        "repository": {"full_name": "acme/atlas"},
        "milestone": {
            "number": 4,
            "title": "v2",
            "state": "open",
            "open_issues": 3,
            "closed_issues": 9,
            "updated_at": "2026-01-02T03:04:05Z",
        },
    }
    (ms,) = read("milestone", body, repository="ACME/atlas")
    assert (ms.kind, ms.number, ms.removed, ms.open_issues, ms.closed_issues) == (
        "milestone",
        4,
        True,
        3,
        9,
    )
    for broken in (
        {**body["milestone"], "number": True},
        {**body["milestone"], "number": 0},
        {**body["milestone"], "state": "merged"},
        {**body["milestone"], "updated_at": "yesterday"},
    ):
        assert read("milestone", {**body, "milestone": broken}, repository="acme/atlas") == []
    assert read("milestone", {"repository": None}, repository="acme/atlas") == []


def test_labels_are_exact_deduplicated_and_bounded() -> None:
    labels = [{"name": "Bug"}, {"name": "bug"}, {"name": "bug"}, {"name": "x" * 101}, {}, "z"]
    payload = {
        "repository": {"full_name": REPO},
        "issue": {
            "number": 5,
            "state": "open",
            "title": "t" * 900,
            "updated_at": "2026-01-02T03:04:05.123Z",
            "labels": labels,
            "html_url": "http://insecure/5",
        },
    }
    (issue,) = read("issues", payload)
    assert issue.labels == ("Bug", "bug") and len(issue.title) == 500 and issue.url is None
    assert issue.source_updated_at_ms % 1000 == 123


def test_the_fingerprint_ignores_only_when_it_was_observed() -> None:
    payload: dict[str, Any] = {
        "repository": {"full_name": REPO},
        "issue": {"number": 5, "state": "open", "updated_at": "2026-01-02T03:04:05Z"},
    }
    (a,) = summaries_of("issues", payload, repository=REPO, received_at_ms=1)
    (b,) = summaries_of("issues", payload, repository=REPO, received_at_ms=2)
    assert a.fingerprint() == b.fingerprint()
    payload["issue"]["title"] = "other"
    (c,) = summaries_of("issues", payload, repository=REPO, received_at_ms=1)
    assert c.fingerprint() != a.fingerprint()


def test_filters_and_cursors() -> None:
    first = filters_of(FindWork(kind="pull_request", label="bug"))
    assert (first.kind, first.state, first.label, first.milestone) == (
        "pull_request",
        "open",
        "bug",
        None,
    )
    cursor = encode_cursor(first, 42)
    assert decode_cursor(cursor) == Filters("pull_request", "open", "bug", None, 42)
    # With a cursor, its filters hold; the same ones repeated are fine, others are named.
    assert filters_of(FindWork(cursor=cursor)).after == 42
    assert filters_of(FindWork(cursor=cursor, kind="pull_request", label="bug")).after == 42
    for other, field in (({"kind": "issue"}, "kind"), ({"label": "docs"}, "label")):
        with pytest.raises(ToolError) as err:
            filters_of(FindWork(cursor=cursor, **other))
        assert err.value.field == field and err.value.code == "cursor_mismatch"
    for bad in ("!!", "bm90IGpzb24", encode_cursor(first, 1)[:-3], "WzIsImlzc3VlIl0"):
        with pytest.raises(ToolError) as err:
            filters_of(FindWork(cursor=bad))
        assert err.value.field == "cursor" and err.value.status == 422


@pytest.mark.parametrize("field", ["label", "milestone"])
def test_milestones_take_no_label_or_milestone_filter(field: str) -> None:
    args = FindWork.model_validate({"kind": "milestone", field: "x" if field == "label" else 3})
    with pytest.raises(ToolError) as err:
        filters_of(args)
    assert err.value.field == field and "kind milestone" in err.value.message


def test_a_page_is_20_items_or_24_kib_but_at_least_one() -> None:
    small = [{"number": i} for i in range(1, 30)]
    page, more = page_of(small)
    assert len(page) == 20 and more
    page, more = page_of(small[:20])
    assert len(page) == 20 and not more
    big: list[dict[str, Any]] = [
        {"number": i, "title": "é" * 5000} for i in range(1, 6)
    ]  # ~10 KB each
    page, more = page_of(big)
    assert len(page) == 2 and more and sum(size_of(p) for p in page) <= PAGE_BYTES
    huge: list[dict[str, Any]] = [{"number": 1, "title": "x" * 30_000}, {"number": 2}]
    page, more = page_of(huge)
    assert page == huge[:1] and more
    assert page_of([]) == ([], False)
