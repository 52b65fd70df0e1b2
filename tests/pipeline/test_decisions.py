"""The pure rules of project directions (pipeline/decisions.py): ids, the countdown range, the
deadline boundary, weights and tallies, ties and approvals, who may decide, cursors."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.org import DecisionPolicy, Member
from contracts.tools import ToolError
from pipeline import decisions as rules

POLICY = DecisionPolicy(owner_id="ava", min_countdown_seconds=60, max_countdown_seconds=3600)


def snapshot(**over: Any) -> dict[str, Any]:
    return {**rules.policy_snapshot(POLICY, "acme/widgets"), **over}


def vote(member: str, kind: str, option: int) -> dict[str, Any]:
    return rules.vote_doc(
        member_id=member, kind=kind, option=option, reason="", revision=1, now_ms=0
    )


def test_a_direction_id_is_64_hex_and_fixed_by_opener_and_request() -> None:
    a = rules.direction_id("scout", "r1")
    assert len(a) == 64 and int(a, 16) >= 0
    assert a == rules.direction_id("scout", "r1")
    assert a != rules.direction_id("sage", "r1") != rules.direction_id("scout", "r2")


def test_the_countdown_range_is_inclusive_and_named() -> None:
    rules.check_countdown(POLICY, 60)
    rules.check_countdown(POLICY, 3600)
    for bad in (59, 3601):
        with pytest.raises(ToolError) as caught:
            rules.check_countdown(POLICY, bad)
        assert caught.value.field == "countdown_seconds" and "60 to 3600" in caught.value.message


def test_the_policy_defaults_and_validation() -> None:
    assert POLICY.resolver == "ava" and snapshot()["resolverId"] == "ava"
    with pytest.raises(ValueError, match="maxCountdownSeconds"):
        DecisionPolicy(owner_id="ava", min_countdown_seconds=10, max_countdown_seconds=5)


def test_voting_is_open_strictly_before_the_deadline() -> None:
    assert rules.voting_open(1000, None, 999)
    assert not rules.voting_open(1000, None, 1000)
    assert not rules.voting_open(1000, {"state": "decided"}, 10)


def test_weights_a_person_outweighs_one_agent() -> None:
    result = rules.close([vote("a", rules.AGENT, 0), vote("h", rules.HUMAN, 1)], snapshot(), 5)
    assert result["state"] == rules.DECIDED and result["winner"] == 1
    assert [r["weight"] for r in result["tally"]] == [1, 2]
    assert result["closedAtMs"] == 5 and result["winnerLabel"] == "Against"
    two = rules.close(
        [vote("a", rules.AGENT, 0), vote("b", rules.AGENT, 0), vote("h", rules.HUMAN, 1)],
        snapshot(),
        5,
    )
    assert two["state"] == rules.TIED and two["winner"] is None


def test_no_votes_is_a_tie_and_approval_waits() -> None:
    assert rules.close([], snapshot(), 0)["state"] == rules.TIED
    waiting = rules.close([vote("a", rules.AGENT, 0)], snapshot(requiresApproval=True), 0)
    assert waiting["state"] == rules.AWAITING_APPROVAL and waiting["winner"] == 0


def refusal(result: dict[str, Any] | None, **over: Any) -> ToolError | None:
    args: dict[str, Any] = {
        "policy": snapshot(),
        "result": result,
        "revision": 4,
        "deadline_ms": 100,
        "actor": "ava",
        "action": rules.RESOLVE_TIE,
        "option": 0,
        "expected_revision": 4,
        **over,
    }
    return rules.decide_refusal(**args)


def test_who_may_decide_and_when() -> None:
    tied = rules.close([], snapshot(), 100)
    assert refusal(tied) is None
    cases = [
        (refusal(tied, actor="bo"), 403, "not_permitted"),
        (refusal(None), 409, "voting_open"),
        (refusal(tied, expected_revision=3), 409, "revision_conflict"),
        (refusal(tied, option=None), 422, "option_required"),
        (refusal(tied, action=rules.APPROVE, option=1), 422, "option_not_allowed"),
        (refusal(tied, action=rules.APPROVE, option=None), 409, "wrong_state"),
    ]
    for found, status, code in cases:
        assert found is not None and (found.status, found.code) == (status, code)
    bo = refusal(tied, actor="bo")
    assert bo is not None and "ava" in bo.message


def test_tie_resolution_does_not_approve() -> None:
    tied = rules.close([], snapshot(requiresApproval=True), 100)
    resolved = rules.decide(
        tied, actor="ava", action=rules.RESOLVE_TIE, option=1, reason="r", now_ms=200
    )
    assert resolved["state"] == rules.AWAITING_APPROVAL and resolved["winner"] == 1
    approved = rules.decide(
        resolved, actor="ava", action=rules.APPROVE, option=None, reason="ok", now_ms=300
    )
    assert approved["state"] == rules.DECIDED and approved["approval"]["approved"] is True
    rejected = rules.decide(
        resolved, actor="ava", action=rules.REJECT, option=None, reason="no", now_ms=300
    )
    assert rejected["state"] == rules.REJECTED and rejected["winner"] == 1


def test_only_the_owner_ends_voting() -> None:
    assert rules.end_refusal(snapshot(), "ava") is None
    other = rules.end_refusal(snapshot(), "bo")
    assert other is not None and other.status == 403 and "ava" in other.message


def test_a_cursor_is_the_viewers_own() -> None:
    cursor = rules.cursor_of("scout", "ab" * 32)
    assert rules.cursor_after(cursor, "scout") == "ab" * 32
    for viewer, bad in (("sage", cursor), ("scout", "!!"), ("scout", "e30=")):
        with pytest.raises(ToolError):
            rules.cursor_after(bad, viewer)


def test_fingerprints_tell_replays_from_other_input() -> None:
    one = rules.fingerprint("vote", rules.vote_fields("d", 0, "", 0))
    assert one == rules.fingerprint("vote", rules.vote_fields("d", 0, "", 0))
    assert one != rules.fingerprint("vote", rules.vote_fields("d", 1, "", 0))
    assert one != rules.fingerprint("decide", rules.vote_fields("d", 0, "", 0))


# ------------------------------------------------------------------ people, in Slack


@pytest.mark.parametrize(
    ("body", "vote"),
    [
        ("for", (0, "")),
        ("For.", (0, "")),
        ("  AGAINST  ", (1, "")),
        ("against: not before the release", (1, "not before the release")),
        ("against -  too\n risky", (1, "too risky")),
        ("yes", (0, "")),
        ("no, not yet", (1, "not yet")),
        ("+1", (0, "")),
        ("-1", (1, "")),
        (":thumbsdown:", (1, "")),
        ("\U0001f44d", (0, "")),
        ("<@W111> I vote for", (0, "")),
        ("vote against!", (1, "")),
        ("for the record, I have not read it", None),
        ("no-brainer, ship it", None),
        ("No-one objects", None),
        ("for-profit is fine", None),
        ("against - too soon", (1, "too soon")),
        ("\U0001f44d\U0001f3fd", (0, "")),
        ("forward it to Bo", None),
        ("I am against", None),
        ("", None),
        ("<@W111>", None),
        ("0", None),  # an option index is a seat's word; a person says for or against
    ],
)
def test_a_reply_is_a_vote_only_when_it_says_one(body: str, vote: tuple[int, str] | None) -> None:
    assert rules.reply_vote(body) == vote


def test_a_replys_reason_is_bounded_like_the_vote_routes() -> None:
    found = rules.reply_vote("for: " + "x" * 1000)
    assert found is not None and found[1] == "x" * rules.REPLY_REASON_CHARS


def test_who_may_vote_by_replying() -> None:
    members = [
        Member(id="bo", aliases=("U0BO",)),
        Member(id="scout", aliases=("W111",)),
    ]
    assert rules.person_of("u0bo", members, ["scout"]) == ("bo", "")
    assert rules.person_of("bo", members, ["scout"]) == ("bo", "")
    assert rules.person_of("W111", members, ["scout"]) == ("scout", "seat_not_person")
    assert rules.person_of("U0NOBODY", members, ["scout"]) == (None, "not_a_member")
    assert rules.person_of("", members, ["scout"]) == (None, "not_a_member")


def test_a_directions_post_and_its_work_id() -> None:
    policy = rules.policy_snapshot(
        DecisionPolicy(owner_id="ava", requires_approval=True, resolver_id="sage"), "acme/w"
    )
    doc = rules.open_doc(
        opener="scout",
        client_request_id="d1",
        title="Adopt v2",
        body="Billing moves to v2.",
        countdown_seconds=600,
        affected_issues=[],
        policy=policy,
        now_ms=1_800_000_000_000,
    )
    decision = rules.post_decision(doc, "C1")
    assert decision.engage and decision.surface == "existing_channel"
    assert decision.channel_id == "C1" and decision.targets == ()
    assert rules.direction_of(decision.work_id) == doc["id"]
    assert decision.dedupe_key == rules.post_tracking_id(doc["id"])
    assert decision.body is not None and "2027-01-15 08:10 UTC" in decision.body
    assert "needs sage's approval" in decision.body and "ava may end voting" in decision.body
    assert rules.direction_of("billing-migration") is None
    assert rules.direction_of("direction:not-hex") is None
    assert rules.thread_ttl_ms(decision.work_id) == rules.MAX_COUNTDOWN_MS + rules.DAY_MS
    assert rules.thread_ttl_ms("billing-migration") is None
    assert (
        rules.reply_request_id("Ev1")
        == rules.reply_request_id("Ev1")
        != rules.reply_request_id("Ev2")
    )


def test_a_reply_is_written_when_its_slack_ts_says() -> None:
    assert rules.reply_written_ms(1_000, "1718049601.000100", 2_000_000_000_000) == 1718049601000
    assert rules.reply_written_ms(1_000, "1718049601.9", 2_000_000_000_000) == 1718049601900
    assert rules.reply_written_ms(1_000, "1718049601.000100", 5) == 5  # never in the future
    assert rules.reply_written_ms(1_000, "not-a-ts", 2_000) == 1_000
    assert rules.reply_written_ms(3_000, None, 2_000) == 2_000
