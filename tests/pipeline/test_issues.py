"""The pure rules of issue coordination (pipeline/issues.py): what a call must carry for its
action, the fingerprint of a replay, what a GitHub webhook says about a number, the notes a
call earns, the participants page and its cursor, and the work report a blocked report is."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.tools import CoordinateIssue
from pipeline import issues


def call(**kw: Any) -> CoordinateIssue:
    base: dict[str, Any] = {"issue_number": 7, "client_request_id": "r1"}
    return CoordinateIssue.model_validate({**base, **kw})


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"action": "claim"}, None),
        ({"action": "claim", "expected_generation": 3}, None),
        ({"action": "release"}, "expected_generation"),
        ({"action": "join", "expected_generation": 2}, None),
        ({"action": "follow", "expected_generation": 2, "blocker": "x"}, "blocker"),
        ({"action": "report", "expected_generation": 2}, "work_state"),
        ({"action": "report", "expected_generation": 2, "work_state": "working"}, None),
        ({"action": "report", "expected_generation": 2, "work_state": "blocked"}, "blocker"),
        (
            {"action": "report", "expected_generation": 2, "work_state": "blocked", "blocker": ""},
            "blocker",
        ),
        (
            {
                "action": "report",
                "expected_generation": 2,
                "work_state": "blocked",
                "blocker": "CI",
            },
            None,
        ),
        (
            {"action": "report", "expected_generation": 2, "work_state": "paused", "blocker": "x"},
            "blocker",
        ),
    ],
)
def test_what_each_action_must_carry(kw: dict[str, Any], field: str | None) -> None:
    found = issues.problem_of(call(**kw))
    assert (found.field if found else None) == field
    if found is not None:
        assert found.message


def test_the_fingerprint_is_the_input_without_the_request_id() -> None:
    a = call(action="claim")
    assert issues.fingerprint(a) == issues.fingerprint(call(action="claim", client_request_id="z"))
    assert issues.fingerprint(a) != issues.fingerprint(call(action="claim", issue_number=8))
    assert issues.fingerprint(a) != issues.fingerprint(call(action="claim", expected_generation=1))
    blocked = {"action": "report", "expected_generation": 2, "work_state": "blocked"}
    assert issues.fingerprint(call(**blocked, blocker=" CI ")) == issues.fingerprint(
        call(**blocked, blocker="CI")
    )


def payload(key: str = "issue", **item: Any) -> dict[str, Any]:
    base = {"number": 7, "state": "open", "title": "T", "updated_at": "2026-01-02T03:04:05Z"}
    return {"repository": {"full_name": "acme/atlas"}, key: {**base, **item}}


def test_an_issue_event_is_observed() -> None:
    obs = issues.observation_of("issues", payload(), repository="ACME/atlas", received_at_ms=9)
    assert obs == issues.Observation(7, "issue", "open", "T", 1_767_323_045_000, 9)


def test_a_comment_on_a_pull_request_observes_a_pull_request() -> None:
    body = payload(pull_request={"url": "x"})
    obs = issues.observation_of("issue_comment", body, repository="acme/atlas", received_at_ms=1)
    assert obs is not None and obs.kind == "pull_request"
    obs = issues.observation_of(
        "pull_request_review", payload("pull_request"), repository="acme/atlas", received_at_ms=1
    )
    assert obs is not None and obs.kind == "pull_request"


@pytest.mark.parametrize(
    ("event", "body", "repository"),
    [
        ("issues", payload(), "acme/other"),  # another repository
        ("issues", payload(), None),  # no repository configured
        ("push", payload(), "acme/atlas"),
        ("issues", payload(number=True), "acme/atlas"),
        ("issues", payload(number=0), "acme/atlas"),
        ("issues", payload(state="merged"), "acme/atlas"),
        ("issues", payload(updated_at="yesterday"), "acme/atlas"),
        ("issues", payload(updated_at="2026-13-02T03:04:05Z"), "acme/atlas"),
        ("issues", {"repository": {"full_name": "acme/atlas"}, "issue": "7"}, "acme/atlas"),
        ("issues", {"issue": {}}, "acme/atlas"),
    ],
)
def test_what_is_not_an_observation(
    event: str, body: dict[str, Any], repository: str | None
) -> None:
    assert issues.observation_of(event, body, repository=repository, received_at_ms=1) is None


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("2000-03-01T00:00:00Z", 951_868_800_000),
        ("2024-02-29T23:59:59.5Z", 1_709_251_199_500),
        ("2026-01-02T03:04:05Z", 1_767_323_045_000),
    ],
)
def test_github_times_are_unix_ms(value: str, ms: int) -> None:
    assert issues.iso_ms(value) == ms


def test_the_wire_observation_and_its_notes() -> None:
    assert issues.observation_wire(None) == {"status": "not_observed"}
    wire = issues.observation_wire(
        {
            "kind": "issue",
            "githubState": "closed",
            "title": "T",
            "sourceUpdatedAtMs": "5",
            "observedAtMs": "6",
            "reconcile": "1",
        }
    )
    assert wire["state"] == "closed" and wire["reconciliationRequired"] is True
    assert len(issues.notes_for("claim", wire)) == 2
    assert issues.notes_for("report", wire) == []
    assert issues.notes_for("join", {"status": "not_observed"}) == []
    pr = {**wire, "kind": "pull_request", "reconciliationRequired": False}
    assert ["pull request" in n for n in issues.notes_for("refresh", pr)] == [True]


def test_participants_in_id_order_with_roles_and_a_cursor() -> None:
    members: dict[str, dict[str, Any]] = {
        f"m{i:02d}": {"follower": True, "sinceMs": i} for i in range(22)
    }
    members["a"] = {"contributor": True, "workState": "blocked", "blocker": "CI"}
    page, last = issues.participants("zed", members, after=None)
    assert len(page) == 20 and page[0]["id"] == "a" and last == page[-1]["id"]
    assert page[0]["roles"] == ["contributor"] and page[0]["workState"]["blocker"] == "CI"
    rest, more = issues.participants("zed", members, after=last)
    assert [p["id"] for p in rest] == ["m19", "m20", "m21", "zed"] and more is None
    assert rest[-1]["roles"] == ["owner"]
    cursor = issues.encode_cursor(7, last or "")
    assert issues.decode_cursor(cursor, 7) == last
    assert issues.decode_cursor(cursor, 8) is None
    assert issues.decode_cursor("not base64!", 7) is None
    assert issues.roles_of("zed", "zed", {"follower": True}) == ["owner", "follower"]


def test_a_blocked_report_is_a_work_report() -> None:
    r = issues.blocked_report(
        repository="acme/atlas", number=7, seat_id="s0", blocker="CI is red", revision=3
    )
    assert r.id == "issue:acme/atlas#7" and r.revision == 3 and r.state == "blocked"
    assert r.blocker is not None and r.blocker.detail == "CI is red"
    assert r.seat_id == "s0" and r.link == "https://github.com/acme/atlas/issues/7"
    bare = issues.blocked_report(repository=None, number=7, seat_id="s0", blocker="x", revision=1)
    assert bare.link is None and bare.id == issues.work_id(None, 7)
