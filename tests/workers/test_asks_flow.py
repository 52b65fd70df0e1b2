"""The ask record through the real stages on a real Redis: written before the send, landed
with where it went, answered exactly once (the seat's inbox told once), and read by the next
decision (already answered, consent on record, declined on record, snoozed)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from contracts import WorkReport
from contracts.messages import DecisionEnvelope, ReservedEnvelope, WorkEnvelope
from pipeline.asks import AnswerIn
from tests.fakes import BLOCKED_REPORT, Clock, FakeOutbound, stages_on
from workers.stages import Stages
from workers.stores.asks import AskStore

NOW = 1_800_000_000_000
CONSENT: dict[str, Any] = {
    "id": "drop-legacy-table",
    "title": "Drop the legacy invoices table",
    "scope": "billing database",
    "risk": {"irreversible": True},
    "approverId": "ben",
}


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW)


@pytest.fixture
def outbound() -> FakeOutbound:
    return FakeOutbound()


@pytest.fixture
def stages(redis_client: redis.Redis, clock: Clock, outbound: FakeOutbound) -> Stages:
    return stages_on(redis_client, clock, outbound)


def _asks(stages: Stages) -> AskStore:
    assert stages.asks is not None
    return stages.asks


def _report(stages: Stages, report: dict[str, Any], tracking: str) -> DecisionEnvelope | None:
    stages.journal.accept(
        tracking, kind="work", seat_id="scout", payload="{}", now_ms=NOW, fingerprint="f"
    )
    env = WorkEnvelope(
        tracking_id=tracking,
        seat_id="scout",
        accepted_at_ms=NOW,
        report=WorkReport.model_validate(report),
    )
    return stages.engagement(env)


def _sent(stages: Stages, report: dict[str, Any], tracking: str = "t-1") -> str:
    decided = _report(stages, report, tracking)
    assert isinstance(decided, DecisionEnvelope)
    reserved = stages.guardrails(decided)
    assert isinstance(reserved, ReservedEnvelope)
    assert stages.send(reserved) == "engaged"
    [ask] = _asks(stages).of_work(report["id"])
    return ask.id


def test_an_engaged_ask_is_recorded_and_lands_open(stages: Stages, clock: Clock) -> None:
    ask_id = _sent(stages, dict(BLOCKED_REPORT))
    ask = _asks(stages).get(ask_id)
    assert ask is not None
    assert ask.state == "open" and ask.landing is not None
    assert ask.deadline_ms == ask.landing.at_ms + ask.timeout_ms
    assert [e.event for e in ask.history] == ["created", "sent"]
    assert [t.member_id for t in ask.targets] == ["ben"]
    assert _asks(stages).by_message(ask.landing.channel_id or "", ask.landing.message_id or "")


def test_the_first_answer_wins_and_the_seat_hears_once(stages: Stages, clock: Clock) -> None:
    ask_id = _sent(stages, dict(BLOCKED_REPORT))
    asks = _asks(stages)
    first = asks.answer(ask_id, AnswerIn("done", "ben", "api", text="granted"), now_ms=NOW + 5)
    second = asks.answer(ask_id, AnswerIn("declined", "ben", "slack_button"), now_ms=NOW + 6)
    assert first.outcome.outcome == "answered" and first.position == 1
    assert second.outcome.outcome == "late_answer" and second.position == 0
    page = stages.ledger.r  # the inbox, read the way a seat reads it
    from workers.stores.inbox import Inbox

    items = Inbox(page).updates("scout").items
    assert [(i.kind, i.ask.answer if i.ask else None) for i in items] == [("ask_answered", "done")]
    stored = asks.get(ask_id)
    assert stored is not None and stored.state == "answered"
    assert stored.answer is not None and stored.answer.text == "granted"
    assert stored.history[-1].event == "late_answer"


def test_an_answered_ask_is_not_asked_again(stages: Stages, clock: Clock) -> None:
    ask_id = _sent(stages, dict(BLOCKED_REPORT))
    _asks(stages).answer(ask_id, AnswerIn("done", "ben", "api"), now_ms=NOW + 5)
    clock.ms = NOW + 7 * 3_600_000  # past the re-engage window
    again = _report(stages, dict(BLOCKED_REPORT), "t-2")
    assert again is None
    [row] = [r for r in stages.ledger.read() if r.tracking_id == "t-2"]
    assert row.reason_code == "already_answered"


def test_an_approved_consent_is_on_record_for_a_later_report(stages: Stages) -> None:
    ask_id = _sent(stages, CONSENT)
    got = _asks(stages).answer(ask_id, AnswerIn("approved", "ben", "slack_button"), now_ms=NOW + 9)
    assert got.outcome.consent is not None
    assert _report(stages, {**CONSENT, "revision": 2}, "t-2") is None
    [row] = [r for r in stages.ledger.read() if r.tracking_id == "t-2"]
    assert row.reason_code == "consent_on_record"
    assert got.outcome.consent.id in (row.reason or "")


def test_a_consent_counts_only_from_its_target(stages: Stages) -> None:
    ask_id = _sent(stages, CONSENT)
    got = _asks(stages).answer(ask_id, AnswerIn("approved", "jo", "slack_button"), now_ms=NOW + 9)
    assert got.outcome.outcome == "refused" and got.outcome.reason_code == "not_a_target"
    stored = _asks(stages).get(ask_id)
    assert stored is not None and stored.state == "open"


def test_a_declined_consent_is_not_asked_again_until_the_work_changes(stages: Stages) -> None:
    ask_id = _sent(stages, CONSENT)
    _asks(stages).answer(ask_id, AnswerIn("declined", "ben", "api"), now_ms=NOW + 9)
    assert _report(stages, CONSENT, "t-2") is None
    [row] = [r for r in stages.ledger.read() if r.tracking_id == "t-2"]
    assert row.reason_code == "declined_on_record"
    assert isinstance(_report(stages, {**CONSENT, "revision": 2}, "t-3"), DecisionEnvelope)


def test_a_snoozed_ask_is_not_asked_again_before_its_snooze_ends(
    stages: Stages, clock: Clock
) -> None:
    ask_id = _sent(stages, dict(BLOCKED_REPORT))
    until = NOW + 10 * 3_600_000
    _asks(stages).answer(
        ask_id, AnswerIn("snoozed", "ben", "api", snooze_until_ms=until), now_ms=NOW + 5
    )
    clock.ms = NOW + 7 * 3_600_000
    assert _report(stages, dict(BLOCKED_REPORT), "t-2") is None
    [row] = [r for r in stages.ledger.read() if r.tracking_id == "t-2"]
    assert row.reason_code == "snoozed"


def test_an_answer_given_while_the_send_is_in_flight_is_kept(
    stages: Stages, outbound: FakeOutbound, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record exists before the post: an answer that arrives while the post is on the
    wire stands, and the landing only adds where it went."""
    real_send = outbound.send

    def send_and_answer(ask: Any, ctx: Any) -> Any:
        assert ask.ask_id is not None
        got = _asks(stages).answer(ask.ask_id, AnswerIn("done", "ben", "api"), now_ms=NOW + 1)
        assert got.outcome.outcome == "answered"
        return real_send(ask, ctx)

    monkeypatch.setattr(outbound, "send", send_and_answer)
    ask_id = _sent(stages, dict(BLOCKED_REPORT))
    ask = _asks(stages).get(ask_id)
    assert ask is not None and ask.state == "answered" and ask.landing is not None
    assert ask.deadline_ms is None  # nothing left to time out


def test_a_send_that_fails_for_good_closes_its_ask(stages: Stages, outbound: FakeOutbound) -> None:
    decided = _report(stages, dict(BLOCKED_REPORT), "t-1")
    assert isinstance(decided, DecisionEnvelope)
    reserved = stages.guardrails(decided)
    assert isinstance(reserved, ReservedEnvelope)
    outbound.script = ["permanent"]
    assert stages.send(reserved) == "send_failed"
    [ask] = _asks(stages).of_work("billing-migration")
    assert (ask.state, ask.closed) == ("closed", "send_failed")
    assert not ask.is_open and _asks(stages).due(NOW + 10 * 86_400_000) == []


def test_in_shadow_mode_the_ask_is_closed_as_shadowed(
    redis_client: redis.Redis, clock: Clock, outbound: FakeOutbound
) -> None:
    stages = stages_on(redis_client, clock, outbound)
    stages.mode = "shadow"
    decided = _report(stages, dict(BLOCKED_REPORT), "t-1")
    assert isinstance(decided, DecisionEnvelope)
    reserved = stages.guardrails(decided)
    assert isinstance(reserved, ReservedEnvelope)
    assert stages.send(reserved) == "shadowed"
    [ask] = _asks(stages).of_work("billing-migration")
    assert (ask.state, ask.closed) == ("closed", "shadowed") and outbound.applied == []
