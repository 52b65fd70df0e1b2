"""The ask's state machine, timeout ladder, decision reads and brake (pipeline/asks.py). Pure:
every case is a record and a time in, a record and an outcome out."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contracts.asks import Ask, AskLanding, ConsentRecord, DeclineRecord, EscalationStep
from contracts.engagement import EngagementDecision, Target
from pipeline.asks import (
    BRAKE_BAD,
    DEFAULT_TIMEOUTS_MS,
    MAX_LEVEL,
    AnswerIn,
    AskRecordView,
    Concluded,
    Ladder,
    answer_ask,
    answered_item,
    brake_due,
    consent_covers,
    decline_of,
    escalated,
    escalation_report,
    landed,
    new_ask,
    next_rung,
    on_due,
    read_record,
    rung_unasked,
    send_ended,
    when,
    withdrawn,
)

NOW = 1_800_000_000_000
HOUR = 3_600_000


def _decision(
    trigger: str = "blocked_on_other", targets: tuple[str, ...] = ("ben",)
) -> EngagementDecision:
    return EngagementDecision(
        engage=True,
        trigger=trigger,
        reason_code="blocked:access" if trigger == "blocked_on_other" else "consent:irreversible",
        reason="needs access",
        targets=tuple(Target(member_id=t) for t in targets),
        surface="dm",
        work_id="w-1",
        dedupe_key="k1",
        attempt=1,
        body="Can you grant access?",
        now_ms=NOW,
    )


def _ask(trigger: str = "blocked_on_other", **kw: object) -> Ask:
    return new_ask(
        _decision(trigger),
        seat_id="scout",
        tracking_id="t-1",
        attempt=1,
        now_ms=NOW,
        timeouts=DEFAULT_TIMEOUTS_MS,
        scope="billing database",
        risk_kinds=("irreversible",) if trigger == "irreversible_or_external" else (),
        **kw,  # type: ignore[arg-type]
    )


def _open(trigger: str = "blocked_on_other") -> Ask:
    landing = AskLanding(adapter="slack", channel_id="D1", message_id="1.1", at_ms=NOW + 10)
    return landed(_ask(trigger), landing, now_ms=NOW + 10)


LADDER = Ladder(supervisors={"ben": "ava", "ava": None}, seat_supervisor="gus", seat_operator="gus")


def test_a_new_ask_is_pending_until_it_lands_then_open_until_its_deadline() -> None:
    ask = _ask()
    assert ask.state == "pending" and ask.deadline_ms is None
    assert ask.id == "ask-k1-1" and ask.body == "Can you grant access?"
    opened = _open()
    assert opened.state == "open"
    assert opened.deadline_ms == NOW + 10 + DEFAULT_TIMEOUTS_MS["blocked_on_other"]
    assert landed(opened, opened.landing, now_ms=NOW + 99) == opened  # type: ignore[arg-type]


def test_an_answer_while_the_send_is_in_flight_is_kept_when_it_lands() -> None:
    got = answer_ask(_ask(), AnswerIn("done", "ben", "api"), now_ms=NOW + 5)
    assert got.outcome == "answered"
    landing = AskLanding(adapter="file", message_id="m", at_ms=NOW + 9)
    after = landed(got.ask, landing, now_ms=NOW + 9)
    assert after.state == "answered" and after.landing == landing and after.deadline_ms is None


def test_a_send_that_ends_without_asking_closes_the_ask() -> None:
    closed = send_ended(_ask(), "send_failed", "slack said channel_not_found", now_ms=NOW + 1)
    assert (closed.state, closed.closed) == ("closed", "send_failed")
    assert send_ended(_open(), "send_failed", "x", now_ms=NOW) == _open()


def test_the_first_answer_wins_and_a_later_one_is_written_down_as_late() -> None:
    first = answer_ask(_open(), AnswerIn("done", "ben", "slack_button"), now_ms=NOW + 20)
    late = answer_ask(first.ask, AnswerIn("declined", "ava", "api"), now_ms=NOW + 21)
    assert late.outcome == "late_answer" and late.reason_code == "late_answer"
    assert late.ask.answer == first.ask.answer and late.ask.state == "answered"
    assert late.ask.history[-1].event == "late_answer" and "ben" in late.why


def test_a_closed_ask_refuses_an_answer_and_is_unchanged() -> None:
    closed = withdrawn(_open(), "work done", now_ms=NOW + 30)
    got = answer_ask(closed, AnswerIn("done", "ben", "api"), now_ms=NOW + 31)
    assert got.outcome == "refused" and got.reason_code == "ask_closed" and got.ask == closed


def test_a_consent_counts_only_from_someone_it_asked_and_becomes_a_record() -> None:
    ask = _open("irreversible_or_external")
    refused = answer_ask(ask, AnswerIn("approved", "jo", "slack_button"), now_ms=NOW + 20)
    assert refused.reason_code == "not_a_target" and refused.ask == ask
    got = answer_ask(
        ask,
        AnswerIn("approved", "ben", "slack_button", consent_ttl_ms=7 * 24 * HOUR),
        now_ms=NOW + 20,
    )
    assert got.consent is not None
    assert got.consent.expires_at_ms == NOW + 20 + 7 * 24 * HOUR
    assert got.consent.risk_kinds == ("irreversible",) and got.consent.scope == "billing database"
    assert got.ask.answer is not None and got.ask.answer.consent_id == got.consent.id
    declined = answer_ask(ask, AnswerIn("declined", "ben", "api"), now_ms=NOW + 20)
    record = decline_of(declined.ask)
    assert record is not None and record.revision == 1 and decline_of(got.ask) is None


def test_a_snooze_is_bounded_and_wakes_the_ask_with_a_new_timeout() -> None:
    ask = _open()
    assert (
        answer_ask(
            ask, AnswerIn("snoozed", "ben", "api", snooze_until_ms=NOW), now_ms=NOW + 20
        ).reason_code
        == "snooze_in_past"
    )
    assert (
        answer_ask(
            ask, AnswerIn("snoozed", "ben", "api", snooze_until_ms=NOW + 30 * 24 * HOUR), now_ms=NOW
        ).reason_code
        == "snooze_too_long"
    )
    snoozed = answer_ask(ask, AnswerIn("snoozed", "ben", "api"), now_ms=NOW + 20).ask
    assert snoozed.state == "snoozed" and snoozed.deadline_ms == snoozed.snooze_until_ms
    assert on_due(snoozed, LADDER, now_ms=NOW + 21).kind == "not_due"
    woke = on_due(snoozed, LADDER, now_ms=snoozed.deadline_ms or 0)
    assert woke.kind == "wake" and woke.ask.state == "open"
    assert woke.ask.deadline_ms == (snoozed.deadline_ms or 0) + snoozed.timeout_ms


def test_an_unanswered_ask_climbs_the_ladder_then_expires_never_looping() -> None:
    ask = _open()
    now = ask.deadline_ms or 0
    seen: list[str] = []
    for level in range(1, MAX_LEVEL + 1):
        due = on_due(ask, LADDER, now_ms=now)
        assert due.kind == "escalate" and due.target is not None
        seen.append(due.target[0])
        step = EscalationStep(
            level=level,
            target_id=due.target[0],
            rung=due.target[1],
            at_ms=now,
            tracking_id=f"t{level}",
        )
        ask = escalated(ask, step, due.why, now_ms=now)
        assert escalated(ask, step, due.why, now_ms=now) == ask  # one step per rung
        now = ask.deadline_ms or 0
    assert seen == ["ava", "gus"]  # ben's supervisor, then (ava has none) the seat's
    end = on_due(ask, LADDER, now_ms=now)
    assert end.kind == "expire" and end.ask.state == "closed" and end.ask.closed == "expired"
    assert end.ask.history[-1].reason_code == "ask_expired"
    assert on_due(end.ask, LADDER, now_ms=now + HOUR).kind == "not_due"


def test_with_nobody_above_an_unanswered_ask_expires_as_unroutable() -> None:
    alone = Ladder(supervisors={})
    due = on_due(_open(), alone, now_ms=NOW + 10 * 24 * HOUR)
    assert due.kind == "expire" and due.ask.history[-1].reason_code == "unroutable"


def test_next_rung_never_asks_the_seat_or_someone_already_asked() -> None:
    ask = _open()
    assert next_rung(ask, Ladder(supervisors={"ben": "scout"}, seat_supervisor="ben")) is None
    assert next_rung(ask, Ladder(supervisors={}, seat_operator="gus")) == ("gus", "seat_operator")


def test_an_escalation_report_keeps_a_consent_a_consent() -> None:
    report = escalation_report(_open("irreversible_or_external"), "ava", 1, now_ms=NOW + 5 * HOUR)
    assert report.approver_id == "ava" and report.risk is not None and report.risk.irreversible
    assert report.id == "ask-k1-1:up1" and "ben" in (report.headline or "")
    blocked = escalation_report(_open(), "ava", 2, now_ms=NOW + 5 * HOUR)
    assert blocked.blocker is not None and blocked.blocker.owner_id == "ava"


def _view(**kw: object) -> AskRecordView:
    return AskRecordView(**kw)  # type: ignore[arg-type]


def test_the_record_answers_a_plan_before_it_is_asked_again() -> None:
    plan = _decision()
    answered = answer_ask(_open(), AnswerIn("done", "ben", "api"), now_ms=NOW + 20).ask
    got = read_record(
        plan, _view(latest=answered), revision=1, scope=None, risk_kinds=(), now_ms=NOW
    )
    assert not got.engage and got.reason_code == "already_answered" and got.body is None
    newer = read_record(
        plan, _view(latest=answered), revision=2, scope=None, risk_kinds=(), now_ms=NOW
    )
    assert newer.reason_code == "already_answered"  # new facts are another key, not a revision
    declined = answer_ask(_open(), AnswerIn("declined", "ben", "api"), now_ms=NOW + 20).ask
    redo = read_record(
        plan, _view(latest=declined), revision=2, scope=None, risk_kinds=(), now_ms=NOW
    )
    assert redo.engage  # changes asked for: the later revision is asked again
    still = read_record(
        plan, _view(latest=_open()), revision=1, scope=None, risk_kinds=(), now_ms=NOW
    )
    assert still.reason_code == "already_engaged" and still.guardrail is not None


def test_a_consent_on_record_covers_its_scope_and_kinds_until_it_expires() -> None:
    c = ConsentRecord(
        id="consent-1",
        work_id="w-1",
        scope="Billing  database",
        risk_kinds=("irreversible",),
        seat_id="tally",
        ask_id="ask-1",
        by="ben",
        at_ms=NOW,
        expires_at_ms=NOW + HOUR,
    )
    covers = {"work_id": "w-1", "scope": "billing database", "now_ms": NOW + 1}
    assert consent_covers(c, risk_kinds=("irreversible",), **covers)  # type: ignore[arg-type]
    assert not consent_covers(c, risk_kinds=("financial",), **covers)  # type: ignore[arg-type]
    assert not consent_covers(c, work_id="w-1", scope="other", risk_kinds=(), now_ms=NOW + 1)
    assert not consent_covers(
        c, work_id="w-1", scope="billing database", risk_kinds=(), now_ms=NOW + HOUR
    )
    plan = _decision("irreversible_or_external")
    got = read_record(
        plan,
        _view(consents=[c]),
        revision=1,
        scope="billing database",
        risk_kinds=("irreversible",),
        now_ms=NOW + 1,
    )
    assert got.reason_code == "consent_on_record" and "consent-1" in (got.reason or "")


def test_a_decline_holds_until_the_work_changes() -> None:
    d = DeclineRecord(
        work_id="w-1",
        scope="billing database",
        revision=2,
        seat_id="scout",
        ask_id="a",
        by="ben",
        at_ms=NOW,
    )
    plan = _decision("irreversible_or_external")
    args = {"scope": "billing database", "risk_kinds": ("irreversible",), "now_ms": NOW}
    assert read_record(plan, _view(declines=[d]), revision=2, **args).reason_code == (  # type: ignore[arg-type]
        "declined_on_record"
    )
    assert read_record(plan, _view(declines=[d]), revision=3, **args).engage  # type: ignore[arg-type]


def test_the_brake_holds_a_seat_at_three_bad_of_its_last_five() -> None:
    good: list[tuple[str, Concluded]] = [("a1", "answered"), ("a2", "answered")]
    bad: list[tuple[str, Concluded]] = [("b1", "declined"), ("b2", "expired"), ("b3", "declined")]
    assert brake_due("scout", [*bad[:2], *good], now_ms=NOW) is None
    held = brake_due("scout", [*bad, *good], now_ms=NOW)
    assert held is not None and held.held and len(held.ask_ids) == BRAKE_BAD
    # only the last five count
    assert brake_due("scout", [*good, *good, *bad], now_ms=NOW) is None
    plan = _decision()
    got = read_record(plan, _view(brake=held), revision=1, scope=None, risk_kinds=(), now_ms=NOW)
    assert got.reason_code == "asks_held"


def test_the_seat_hears_of_an_answer_and_of_a_snooze_but_not_of_a_late_one() -> None:
    got = answer_ask(
        _open(), AnswerIn("replied", "ben", "slack_thread", text="on it"), now_ms=NOW + 9
    )
    item = answered_item(got)
    assert item is not None and item.kind == "ask_answered" and item.reason == "ask_answered"
    assert item.ask is not None and (item.ask.ask_id, item.ask.answer, item.ask.text) == (
        "ask-k1-1",
        "replied",
        "on it",
    )
    late = answer_ask(got.ask, AnswerIn("done", "ben", "api"), now_ms=NOW + 10)
    assert answered_item(late) is None


VERBS = st.sampled_from(["approved", "declined", "replied", "done", "snoozed"])
PEOPLE = st.sampled_from(["ben", "jo", "ava"])


@given(
    trigger=st.sampled_from(["irreversible_or_external", "blocked_on_other"]),
    answers=st.lists(st.tuples(VERBS, PEOPLE), min_size=1, max_size=8),
)
def test_however_answers_arrive_at_most_one_answer_stands_and_every_one_is_accounted(
    trigger: str, answers: list[tuple[str, str]]
) -> None:
    ask = _open(trigger)
    winner = None
    for i, (verb, by) in enumerate(answers):
        got = answer_ask(ask, AnswerIn(verb, by, "api"), now_ms=NOW + 100 + i)  # type: ignore[arg-type]
        if got.outcome == "refused":
            assert got.ask == ask
            continue
        if winner is not None:
            assert got.outcome == "late_answer" and got.ask.answer == winner
        elif got.outcome == "answered":
            winner = got.ask.answer
        ask = got.ask
    assert (ask.state == "answered") == (winner is not None)
    answered = [e for e in ask.history if e.event == "answered"]
    assert len(answered) == (1 if winner else 0)


def test_the_same_event_delivered_again_is_the_same_answer_not_a_late_one() -> None:
    first = answer_ask(_open(), AnswerIn("done", "ben", "slack_thread", key="ev-1"), now_ms=NOW + 9)
    again = answer_ask(
        first.ask, AnswerIn("done", "ben", "slack_thread", key="ev-1"), now_ms=NOW + 99
    )
    assert again.outcome == "answered" and again.ask == first.ask
    other = answer_ask(
        first.ask, AnswerIn("done", "ben", "slack_thread", key="ev-2"), now_ms=NOW + 99
    )
    assert other.outcome == "late_answer"


@given(st.integers(min_value=0, max_value=253_402_300_799_000))
def test_when_reads_an_epoch_time_as_the_calendar_does(ms: int) -> None:
    import datetime as dt

    expected = dt.datetime.fromtimestamp(ms // 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert when(ms) == expected


def test_a_rung_that_asked_nobody_makes_its_ask_due_at_once() -> None:
    ask = _open()
    now = ask.deadline_ms or 0
    due = on_due(ask, LADDER, now_ms=now)
    assert due.target is not None
    step = EscalationStep(
        level=1, target_id=due.target[0], rung=due.target[1], at_ms=now, tracking_id="t1"
    )
    climbed = escalated(ask, step, due.why, now_ms=now)
    told = rung_unasked(climbed, 1, "rate_limited_target", "ava had her day's asks", now_ms=now + 5)
    assert told is not None and told.deadline_ms == now + 5
    assert told.history[-1].event == "rung_unasked"
    again = on_due(told, LADDER, now_ms=now + 5)
    assert again.kind == "escalate" and again.target == ("gus", "seat_supervisor")
    ended = answer_ask(told, AnswerIn("done", "ben", "api"), now_ms=now + 6).ask
    assert rung_unasked(ended, 1, "x", "y", now_ms=now + 7) is None
