"""The pure parts of an ask's ladder and replies (pipeline/asks.py): which GitHub item a report
is about, what a GitHub event says to an ask, whose reply counts, an escalation's own ask
keeping no time of its own, a rung that lands late, and the brake's own ask not held by it."""

from __future__ import annotations

import pytest

from contracts.asks import Ask, AskBrake, EscalationStep
from contracts.engagement import EngagementDecision, Target
from pipeline.asks import (
    AskRecordView,
    Ladder,
    brake_report_id,
    escalated,
    github_answer,
    item_of,
    on_due,
    read_record,
    reply_refusal,
    rung_landed,
)

NOW = 1_800_000_000_000
HOUR = 3_600_000


def _ask(**more: object) -> Ask:
    base: dict[str, object] = {
        "id": "ask-k-1",
        "seatId": "scout",
        "workId": "w",
        "dedupeKey": "k",
        "trackingId": "t",
        "createdAtMs": NOW,
        "state": "open",
        "timeoutMs": 4 * HOUR,
        "deadlineMs": NOW + 4 * HOUR,
        "targets": [{"memberId": "ben", "rung": "ownership"}],
        "landing": {"adapter": "fake", "channelId": "C1", "messageId": "m-1", "atMs": NOW},
    }
    return Ask.model_validate({**base, **more})


@pytest.mark.parametrize(
    ("link", "work_id", "item"),
    [
        ("https://github.com/Acme/Platform/pull/42", "w", "acme/platform#42"),
        ("https://github.com/acme/platform/issues/7#issuecomment-1", "w", "acme/platform#7"),
        ("https://github.com/acme/platform/pull/42/files", None, "acme/platform#42"),
        (None, "acme/platform#9", "acme/platform#9"),
        ("https://example.com/acme/platform/pull/42", "billing", None),
        ("https://github.com/acme/platform", "w", None),
    ],
)
def test_the_github_item_a_report_is_about(
    link: str | None, work_id: str | None, item: str | None
) -> None:
    assert item_of(link, work_id) == item


def test_what_a_github_event_says_to_an_ask() -> None:
    assert github_answer("commented", None) == ("replied", "github_comment")
    assert github_answer("reviewed", "APPROVED") == ("approved", "github_review")
    assert github_answer("reviewed", "changes_requested") == ("declined", "github_review")
    assert github_answer("reviewed", "commented") == ("replied", "github_review")
    assert github_answer("reviewed", "dismissed") is None
    assert github_answer("edited", None) is None
    assert github_answer("opened", None) is None


def test_only_a_person_asked_replying_after_the_ask_answers_it() -> None:
    ask = _ask()
    assert reply_refusal(ask, "ben", written_ms=NOW + 1, landed_ms=NOW) is None
    assert reply_refusal(ask, "jo", written_ms=NOW + 1, landed_ms=NOW) == "not_asked"
    assert reply_refusal(ask, None, written_ms=NOW + 1, landed_ms=NOW) == "not_a_member"
    assert reply_refusal(ask, "ben", written_ms=NOW - 1, landed_ms=NOW) == "before_the_ask"
    up = ask.model_copy(
        update={
            "escalations": (
                EscalationStep(
                    level=1, target_id="ava", rung="target_supervisor", at_ms=NOW, tracking_id="x"
                ),
            )
        }
    )
    assert reply_refusal(up, "ava", written_ms=NOW + 1, landed_ms=NOW) is None
    pending = ask.model_copy(update={"landing": None, "state": "pending"})
    assert reply_refusal(pending, "ben", written_ms=NOW + 1, landed_ms=NOW) == "not_landed"


def test_an_escalations_own_ask_keeps_no_time_of_its_own() -> None:
    ladder = Ladder(supervisors={"ava": None}, seat_supervisor="gus")
    rung = _ask(
        id="ask-r-1",
        escalates="ask-k-1",
        level=1,
        targets=[{"memberId": "ava", "rung": "supervisory"}],
    )
    assert on_due(rung, ladder, now_ms=NOW + 10 * HOUR).kind == "not_due"
    snoozed = rung.model_copy(
        update={"state": "snoozed", "snooze_until_ms": NOW + HOUR, "deadline_ms": NOW + HOUR}
    )
    woke = on_due(snoozed, ladder, now_ms=NOW + HOUR + 1)
    assert woke.kind == "wake" and woke.ask.deadline_ms is None and woke.ask.state == "open"


def test_a_rung_that_lands_late_gets_its_whole_timeout() -> None:
    ask = _ask()
    step = EscalationStep(
        level=1, target_id="ava", rung="target_supervisor", at_ms=NOW, tracking_id="x"
    )
    up = escalated(ask, step, "no answer", now_ms=NOW + 4 * HOUR)
    assert up.deadline_ms == NOW + 8 * HOUR
    later = NOW + 12 * HOUR  # the gate held it through its person's night
    moved = rung_landed(up, 1, now_ms=later)
    assert moved is not None and moved.deadline_ms == later + 4 * HOUR
    assert rung_landed(up, 2, now_ms=later) is None  # another rung's landing
    assert rung_landed(up, 1, now_ms=NOW + 4 * HOUR) is None  # no later than it was


def test_the_brakes_own_ask_is_not_held_by_it() -> None:
    brake = AskBrake(seat_id="scout", held=True, since_ms=NOW, why="3 of 5 declined")
    target = Target.model_validate({"memberId": "gus", "rung": "supervisory"})

    def plan(work_id: str) -> EngagementDecision:
        return EngagementDecision(
            engage=True,
            trigger="blocked_on_other",
            reason_code="blocked:decision",
            work_id=work_id,
            targets=(target,),
            dedupe_key=f"key-{work_id}",
            now_ms=NOW,
        )

    view = AskRecordView(brake=brake)
    own = read_record(
        plan(brake_report_id(brake)), view, revision=1, scope=None, risk_kinds=(), now_ms=NOW
    )
    assert own.engage
    other = read_record(plan("w2"), view, revision=1, scope=None, risk_kinds=(), now_ms=NOW)
    assert not other.engage and other.reason_code == "asks_held"
