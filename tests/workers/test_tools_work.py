"""`find_work` over the tool route on a real Redis (issue 13): GitHub webhooks of the project's
repository, posted signed to /webhooks/github, become work summaries (Issues, pull requests,
milestones); a state change moves an item between the state and label indexes; an older
redelivery never overwrites a newer version; filters by kind, state, exact label and
milestone; pages of 20 items or 24 KiB with a cursor; another repository ignored; bad inputs
named; the store bounded (closed items dropped in time, caps)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any, cast

import pytest
import redis
from fastapi.testclient import TestClient

from pipeline.signatures import github_headers
from pipeline.work_items import PAGE_BYTES, WorkSummary, size_of, summaries_of
from tests.auth import seat_auth
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.ingress.app import create_ingress
from workers.settings import Settings
from workers.stores import keys
from workers.stores.work import WorkItems

pytestmark = pytest.mark.redis

TOKEN = "test-token"
SECRET = "gh-secret"
REPO = "acme/atlas"
ORG = (
    f"project: {{name: Atlas, repository: {REPO}}}\n"
    "members:\n  - {id: s0, displayName: Seat s0}\n"
    "seats:\n  - {memberId: s0}\n"
)
REALWORLD = Path(__file__).resolve().parents[1] / "data" / "realworld" / "github"
DELIVERIES = count(1)


@pytest.fixture
def built(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> Iterator[tuple[TestClient, Container, dict[str, str]]]:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url,
        api_token=TOKEN,
        org_file=org,
        outbox_path=tmp_path / "o.jsonl",
        github_webhook_secret=SECRET,
    )
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    with TestClient(create_ingress(container, app)) as c:
        yield c, container, seat_auth(redis_client, "s0")


def real(name: str, repo: str = REPO, **changes: Any) -> dict[str, Any]:
    """A realworld payload moved to `repo`, with its item's fields changed."""
    body: dict[str, Any] = json.loads((REALWORLD / name).read_text())
    body["repository"]["full_name"] = repo
    item = body.get("pull_request") or body.get("issue") or body.get("milestone")
    assert item is not None, f"{name} carries no item"
    item.update(changes)
    return body


def post(client: TestClient, event: str, body: dict[str, Any]) -> None:
    raw = json.dumps(body).encode()
    delivery = f"d-{next(DELIVERIES)}"
    headers = github_headers(raw, secret=SECRET, event=event, delivery_id=delivery)
    resp = client.post("/webhooks/github", content=raw, headers=headers)
    assert resp.status_code == 200, resp.text


def find(built: Any, expect: int = 200, **args: Any) -> dict[str, Any]:
    client, _container, auth = built
    resp = client.post("/v1/seats/s0/tools/find_work", headers=auth, json=args)
    assert resp.status_code == expect, resp.text
    body: dict[str, Any] = resp.json()
    return body


def numbers(body: dict[str, Any]) -> list[int]:
    return [item["number"] for item in body["items"]]


def test_an_opened_issue_is_found_with_its_milestone(built: Any) -> None:
    """issues.opened of the project's repository: the Issue (open, label bug, milestone 1)
    and the milestone it embeds (closed, its counts); the coverage note says partial."""
    post(built[0], "issues", real("issues.opened.json"))
    body = find(built)
    assert body["items"] == [
        {
            "kind": "issue",
            "number": 1,
            "title": "Spelling error in the README file",
            "state": "open",
            "labels": ["bug"],
            "milestone": 1,
            "url": "https://github.com/Codertocat/Hello-World/issues/1",
            "sourceUpdatedAt": 1557933618000,
            "observedAt": body["items"][0]["observedAt"],
        }
    ]
    assert body["next"] is None and body["repository"] == REPO
    assert body["coverage"]["partial"] is True
    note = body["coverage"]["note"]
    assert "empty page does not prove" in note and "not accepted progress" in note
    assert body["filters"] == {"kind": "issue", "state": "open", "label": None, "milestone": None}
    (ms,) = find(built, kind="milestone", state="closed")["items"]
    assert (ms["number"], ms["openIssues"], ms["closedIssues"]) == (1, 1, 0)
    assert "labels" not in ms and "draft" not in ms
    assert find(built, kind="milestone")["items"] == []


def test_a_state_change_moves_the_item_and_a_stale_redelivery_changes_nothing(
    built: Any, redis_client: redis.Redis
) -> None:
    client = built[0]
    post(client, "issues", real("issues.opened.json"))
    post(
        client,
        "issues",
        real("issues.opened.json", state="closed", updated_at="2026-01-01T00:00:00Z"),
    )
    assert find(built)["items"] == [] and find(built, label="bug")["items"] == []
    assert numbers(find(built, state="closed")) == [1]
    assert numbers(find(built, state="closed", label="bug", milestone=1)) == [1]
    assert redis_client.zcard(keys.work_index("issue", "open")) == 0
    assert not redis_client.exists(keys.work_label("issue", "open", "bug"))
    # The older `opened` redelivered (a new delivery id): still closed.
    post(client, "issues", real("issues.opened.json"))
    assert find(built)["items"] == [] and numbers(find(built, state="closed")) == [1]
    # Reopened later: open again, and out of the closed indexes and the expiry.
    post(client, "issues", real("issues.reopened.json", updated_at="2026-02-01T00:00:00Z"))
    assert numbers(find(built)) == [1] and find(built, state="closed")["items"] == []
    assert redis_client.zcard(keys.work_expiry("issue")) == 0


def test_the_same_second_later_content_wins_but_a_redelivery_is_a_duplicate(
    built: Any,
) -> None:
    container: Container = built[1]
    at = "2026-03-01T00:00:00Z"
    post(built[0], "issues", real("issues.labeled.json", updated_at=at))
    both = [{"name": "bug"}, {"name": "help wanted"}]
    post(built[0], "issues", real("issues.labeled.json", updated_at=at, labels=both))
    assert numbers(find(built, label="help wanted")) == [1]
    (again, _ms) = summaries_of(
        "issues",
        real("issues.labeled.json", updated_at=at, labels=both),
        repository=REPO,
        received_at_ms=1,
    )
    assert container.work.observe(again) == "duplicate"


def test_pull_requests_draft_merged_and_labels(built: Any) -> None:
    client = built[0]
    post(client, "pull_request", real("pull_request.opened.json"))
    (pr,) = find(built, kind="pull_request")["items"]
    assert (pr["number"], pr["draft"], pr["merged"], pr["labels"]) == (2, False, False, ["bug"])
    post(client, "pull_request", real("pull_request.converted_to_draft.json"))
    assert find(built, kind="pull_request")["items"][0]["draft"] is True
    # A review comment's PR has no `draft`: the known draft stays.
    post(
        client,
        "pull_request_review_comment",
        real("pull_request_review_comment.created.json", updated_at="2026-01-01T00:00:00Z"),
    )
    assert find(built, kind="pull_request")["items"][0]["draft"] is True
    post(
        client,
        "pull_request",
        real(
            "pull_request.closed.json",
            updated_at="2026-01-02T00:00:00Z",
            merged=True,
            draft=False,
            labels=[{"name": "shipped"}],
        ),
    )
    assert find(built, kind="pull_request")["items"] == []
    (done,) = find(built, kind="pull_request", state="closed", label="shipped")["items"]
    assert (done["merged"], done["draft"]) == (True, False)
    assert find(built, kind="pull_request", state="closed", label="bug")["items"] == []
    assert find(built, kind="issue", state="closed")["items"] == []  # a PR is not an Issue


def test_milestone_events_and_deletion(built: Any) -> None:
    client = built[0]

    def milestone(action: str, state: str, at: str, **extra: Any) -> dict[str, Any]:
        return {
            "action": action,
            "repository": {"full_name": REPO},
            "sender": {"login": "ava"},
            "milestone": {
                "number": 3,
                "title": "v3",
                "state": state,
                "open_issues": 2,
                "closed_issues": 5,
                "updated_at": at,
                "html_url": "https://github.com/acme/atlas/milestone/3",
                **extra,
            },
        }

    post(client, "milestone", milestone("created", "open", "2026-01-01T00:00:00Z"))
    (ms,) = find(built, kind="milestone")["items"]
    assert (ms["title"], ms["openIssues"], ms["closedIssues"]) == ("v3", 2, 5)
    post(client, "milestone", milestone("closed", "closed", "2026-01-02T00:00:00Z"))
    assert find(built, kind="milestone")["items"] == []
    assert numbers(find(built, kind="milestone", state="closed")) == [3]
    post(client, "milestone", milestone("deleted", "closed", "2026-01-03T00:00:00Z"))
    assert find(built, kind="milestone", state="closed")["items"] == []
    # The tombstone keeps an older redelivery from bringing it back.
    post(client, "milestone", milestone("created", "open", "2026-01-01T00:00:00Z"))
    assert find(built, kind="milestone")["items"] == []


def test_another_repository_and_a_deleted_issue(built: Any) -> None:
    client = built[0]
    post(client, "issues", real("issues.opened.json", repo="other/repo"))
    assert find(built)["items"] == []
    assert find(built, kind="milestone", state="closed")["items"] == []
    post(client, "issues", real("issues.opened.json"))
    post(client, "issues", real("issues.deleted.json"))
    assert find(built)["items"] == [] and find(built, state="closed")["items"] == []
    post(client, "issues", real("issues.opened.json"))
    assert find(built)["items"] == []


def summary(number: int, **fields: Any) -> WorkSummary:
    base: dict[str, Any] = {
        "kind": "issue",
        "number": number,
        "state": "open",
        "title": f"Issue {number}",
        "source_updated_at_ms": 1_000,
        "observed_at_ms": 2_000,
    }
    return WorkSummary(**{**base, **fields})


def test_filters_by_label_and_milestone(built: Any) -> None:
    store: WorkItems = built[1].work
    store.observe(summary(1, labels=("bug",), milestone=7))
    store.observe(summary(2, labels=("Bug",), milestone=7))
    store.observe(summary(3, labels=("bug", "docs")))
    store.observe(summary(4, kind="pull_request", labels=("bug",), milestone=7))
    assert numbers(find(built, label="bug")) == [1, 3]  # exact: not "Bug"
    assert numbers(find(built, milestone=7)) == [1, 2]
    assert numbers(find(built, label="bug", milestone=7)) == [1]
    assert numbers(find(built, kind="pull_request", milestone=7)) == [4]
    assert numbers(find(built, label="nope")) == []


def test_pages_of_20_with_a_cursor(built: Any) -> None:
    store: WorkItems = built[1].work
    for n in range(1, 46):
        store.observe(summary(n, labels=("bug",) if n % 2 else ()))
    seen: list[int] = []
    body = find(built)
    pages = 0
    while True:
        pages += 1
        assert len(body["items"]) <= 20
        seen += numbers(body)
        if body["next"] is None:
            break
        body = find(built, cursor=body["next"])
    assert seen == list(range(1, 46)) and pages == 3
    first = find(built, label="bug")
    assert numbers(first) == list(range(1, 40, 2))
    rest = find(built, cursor=first["next"], label="bug")  # the same filter again is fine
    assert numbers(rest) == [41, 43, 45] and rest["next"] is None
    # A cursor continues its own filters; another one given with it is named.
    got = find(built, 422, cursor=first["next"], state="closed")
    assert got["field"] == "state" and got["error"] == "cursor_mismatch"


def test_pages_of_24_kib(built: Any) -> None:
    store: WorkItems = built[1].work
    for n in range(1, 31):
        labels = tuple(f"label-{i:02d}-" + "é" * 40 for i in range(20))
        store.observe(summary(n, title="ü" * 500, labels=labels))
    seen: list[int] = []
    body = find(built)
    while True:
        assert 1 <= len(body["items"]) < 20
        assert sum(size_of(i) for i in body["items"]) <= PAGE_BYTES
        seen += numbers(body)
        if body["next"] is None:
            break
        body = find(built, cursor=body["next"])
    assert seen == list(range(1, 31))


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"kind": "epic"}, "kind"),
        ({"state": "merged"}, "state"),
        ({"label": ""}, "label"),
        ({"label": "x" * 101}, "label"),
        ({"label": 5}, "label"),
        ({"milestone": 0}, "milestone"),
        ({"milestone": "3"}, "milestone"),
        ({"milestone": 1.5}, "milestone"),
        ({"cursor": "x" * 1001}, "cursor"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"kind": "milestone", "label": "bug"}, "label"),
        ({"kind": "milestone", "milestone": 2}, "milestone"),
    ],
)
def test_bad_inputs_are_named(built: Any, args: dict[str, Any], field: str) -> None:
    got = find(built, 422, **args)
    assert got["field"] == field, got
    assert field in got["message"]


def test_the_store_is_bounded(redis_client: redis.Redis) -> None:
    """Closed items go at their drop time (swept by later observations); beyond the caps the
    earliest to drop and the lowest open numbers go; the indexes never keep a dropped item."""
    store = WorkItems(redis_client, closed_retention_ms=1_000, closed_cap=2, open_cap=3)
    store.observe(summary(1, state="closed", labels=("bug",), observed_at_ms=0))
    assert store.get("issue", 1) is not None
    store.observe(summary(2, observed_at_ms=5_000))  # sweeps #1 (due at 1,000)
    assert store.get("issue", 1) is None
    assert not redis_client.exists(keys.work_label("issue", "closed", "bug"))
    for n in (3, 4, 5):
        store.observe(summary(n, state="closed", observed_at_ms=5_000 + n))
    assert [store.get("issue", n) is None for n in (3, 4, 5)] == [True, False, False]
    for n in (6, 7, 8):
        store.observe(summary(n, observed_at_ms=6_000))
    open_now = cast(
        "list[tuple[bytes, float]]",
        redis_client.zrange(keys.work_index("issue", "open"), 0, -1, withscores=True),
    )
    assert [int(s) for _m, s in open_now] == [6, 7, 8]
    store.observe(summary(1, observed_at_ms=6_000))  # the lowest number, but the new one
    open_now = cast(
        "list[tuple[bytes, float]]",
        redis_client.zrange(keys.work_index("issue", "open"), 0, -1, withscores=True),
    )
    assert [int(s) for _m, s in open_now] == [1, 7, 8]
    assert store.get("issue", 6) is None


def test_an_unobserved_project_answers_an_empty_partial_page(built: Any) -> None:
    body = find(built, kind="pull_request", state="closed")
    assert body["items"] == [] and body["next"] is None and body["coverage"]["partial"]
