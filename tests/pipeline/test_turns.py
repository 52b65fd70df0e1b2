"""A seat's turns over the controller (issue 12 points 3-6, pipeline/turns.py). Pure.

One tick for one seat (begin a turn, settle a lost one, republish a queued one, escalate a
stopped seat), settling an outcome (streak, escalation, clearing), the escalation's report,
the session a command launch addresses, and an operator's controls.
"""

from __future__ import annotations

import itertools

import pytest

from contracts.controller import SeatRun, SessionRecord, TurnOutcome
from contracts.org import ControllerOptions, Seat
from pipeline.launches import iso
from pipeline.turns import (
    EscalationPlan,
    Observed,
    TurnNotActive,
    after_launch,
    apply_control,
    escalation_report,
    plan_launch,
    settle_turn,
    start_turn,
    status_of,
    tick_seat,
)

T = 1_800_000_000_000
OPTS = ControllerOptions()
IDLE = Observed()


def half() -> float:
    return 0.5


def ids() -> itertools.count[int]:
    return itertools.count(1)


def tick(run: SeatRun, seen: Observed = IDLE, at: int = T):  # type: ignore[no-untyped-def]
    return tick_seat(run, seen, options=OPTS, now_ms=at, rng=half, republish_after_ms=30_000)


def started(run: SeatRun, at: int = T) -> SeatRun:
    assert run.active is not None
    out = start_turn(run, run.active.turn_id, now_ms=at, lease_ms=60_000)
    assert out is not None
    return out


def failed(sig: str = "session-id:never-beaten:3", detail: str = "it broke") -> TurnOutcome:
    return TurnOutcome(kind="failed", signature=sig, detail=detail)


def settle(run: SeatRun, outcome: TurnOutcome, at: int = T):  # type: ignore[no-untyped-def]
    assert run.active is not None
    return settle_turn(run, run.active.turn_id, outcome, options=OPTS, now_ms=at, rng=half)


def test_a_new_seat_begins_its_first_turn() -> None:
    """The first tick begins turn 1 with reason `first`, to be published."""
    t = tick(SeatRun(seat_id="scout"))
    assert (t.decision.action, t.decision.reason) == ("run", "first")
    assert t.publish is not None and t.publish.turn_id == "scout:turn:1"
    assert t.run.active == t.publish and t.run.seq == 1
    assert t.run.controller.active is True


def test_a_queued_turn_waits_and_is_republished_after_the_delay() -> None:
    """While its turn is queued the seat waits (`active`); past the delay it is published
    again, same id."""
    run = tick(SeatRun(seat_id="s")).run
    again = tick(run, at=T + 29_999)
    assert again.publish is None and again.decision.reason == "active"
    late = tick(run, at=T + 30_000)
    assert late.publish is not None and late.publish.turn_id == "s:turn:1"


def test_a_steady_idle_seat_changes_nothing() -> None:
    """After its first turn a seat with no news waits idle, and its record does not change
    from tick to tick (nothing to write)."""
    run = settle(started(tick(SeatRun(seat_id="s")).run), TurnOutcome(kind="ok")).run
    once = tick(run, at=T + 1).run
    assert once.last_decision is not None and once.last_decision.reason == "idle"
    assert tick(once, at=T + 2).run == once


def test_notices_since_the_last_turn_run_a_turn() -> None:
    """Directed events counted since the last turn began run one, reason `notices`."""
    run = settle(started(tick(SeatRun(seat_id="s")).run), TurnOutcome(kind="ok")).run
    t = tick(run, Observed(notices=1, inbox_last=1, inbox_acked=1), at=T + 1)
    assert t.decision.reason == "notices" and t.run.notices_at_turn == 1


def test_a_lost_turn_is_settled_failed_when_its_lease_runs_out() -> None:
    """A running turn past its lease is settled as failed (`turn:lost`) on the tick."""
    run = started(tick(SeatRun(seat_id="s")).run)
    assert tick(run, at=T + 60_000).settled is None
    t = tick(run, at=T + 60_001)
    assert t.settled is not None and t.settled.record.outcome.signature == "turn:lost"
    assert t.run.active is None and t.decision.reason == "retry_backoff"


def test_the_streak_counts_identical_failures_and_escalates_at_three() -> None:
    """Identical signatures extend the streak; the third escalates (fresh); a different
    signature restarts it; a success clears streak and escalation."""
    run = SeatRun(seat_id="s")
    plans: list[EscalationPlan | None] = []
    for i in range(3):
        t = tick(run, at=T + i * 100_000)
        s = settle(started(t.run, T + i * 100_000), failed(), at=T + i * 100_000)
        run, plans = s.run, [*plans, s.escalate]
    assert plans[:2] == [None, None]
    plan = plans[2]
    assert plan is not None and plan.fresh and plan.streak == 3 and plan.revision == 1
    assert plan.hint.startswith("3× in a row, identically — retries are not fixing it")
    assert run.streak is not None and run.streak.escalated_at == iso(T + 200_000)
    assert run.escalation is not None and run.escalations == 1
    report = escalation_report(plan, target_id="ava")
    assert report.headline == plan.hint and report.commitment is not None
    assert report.commitment.to_member_id == "ava" and report.state == "failed"
    ctl = apply_control(run, "run-now", OPTS)
    t = tick(ctl, at=T + 400_000)
    assert t.decision.reason == "steering"
    ok = settle(started(t.run, T + 400_000), TurnOutcome(kind="ok"), at=T + 400_000)
    assert ok.run.streak is None and ok.run.escalation is None
    assert ok.cleared is not None and ok.cleared.signature == plan.signature


def test_different_failures_stop_the_seat_and_still_reach_a_person() -> None:
    """Three different failures block the controller without an identical streak: the seat
    escalates once that it stopped, naming the last failure."""
    run = SeatRun(seat_id="s")
    for i, sig in enumerate(("a:x", "b:y", "c:z")):
        t = tick(run, at=T + i * 100_000)
        s = settle(started(t.run, T + i * 100_000), failed(sig, f"fault {i}"), T + i * 100_000)
        run = s.run
    assert s.escalate is not None and s.escalate.signature == "controller:failure_limit"
    assert s.escalate.hint.startswith("3 turns in a row have failed")
    assert "fault 2" in s.escalate.hint
    assert tick(run, at=T + 400_000).escalate is None  # once: the escalation is open


def test_an_outcome_for_a_turn_not_running_is_refused() -> None:
    """Only the running turn settles: a queued, unknown or finished one is TurnNotActive."""
    run = tick(SeatRun(seat_id="s")).run
    with pytest.raises(TurnNotActive):
        settle_turn(run, "s:turn:1", TurnOutcome(kind="ok"), options=OPTS, now_ms=T, rng=half)
    done = settle(started(run), TurnOutcome(kind="ok")).run
    with pytest.raises(TurnNotActive) as caught:
        settle_turn(done, "s:turn:1", TurnOutcome(kind="ok"), options=OPTS, now_ms=T, rng=half)
    assert caught.value.known
    assert start_turn(done, "s:turn:1", now_ms=T, lease_ms=1) is None


def test_pause_holds_the_seat_and_resume_lets_it_run() -> None:
    """A paused seat waits `paused`; resumed, it runs."""
    paused = apply_control(SeatRun(seat_id="s"), "pause", OPTS)
    t = tick(paused)
    assert (t.decision.reason, t.decision.interrupt) == ("paused", False)
    assert tick(apply_control(t.run, "resume", OPTS)).decision.reason == "first"


def test_a_fresh_session_is_started_then_resumed() -> None:
    """No record: a fresh id in `session-id` mode; once launched, `resume` (resumes + 1)."""
    uuids = iter(["id-1", "id-2"])
    first = plan_launch(None, target_missing=False, now_ms=T, uuid=lambda: next(uuids))
    assert (first.mode, first.session.session_id, first.rotated) == ("session-id", "id-1", None)
    again = plan_launch(first.session, target_missing=False, now_ms=T + 1, uuid=lambda: "x")
    assert (again.mode, again.session.resumes) == ("resume", 1)


def test_a_resume_target_proven_missing_rotates_before_launching() -> None:
    """The preflight's `missing` rotates to a fresh id first, outside the hourly budget."""
    spent = SessionRecord(session_id="old", last_launch_at=iso(T), rotations=(iso(T - 1000),) * 3)
    plan = plan_launch(spent, target_missing=True, now_ms=T, uuid=lambda: "new")
    assert plan.mode == "session-id" and plan.session.session_id == "new"
    assert plan.session.rotated_from == "old"
    assert plan.rotated and "does not exist on this machine" in plan.rotated


def test_after_a_launch_the_named_fault_rotates_and_a_clean_exit_relaunches() -> None:
    """The post-mortem: resume-target-missing rotates at once; exit 0 keeps the session."""
    session = SessionRecord(session_id="old", last_launch_at=iso(T))
    common = {
        "mode": "resume",
        "started_ms": T,
        "ended_ms": T + 2000,
        "beat_seen": None,
        "streak_at_limit": False,
        "self_stopped": False,
        "now_ms": T + 2000,
    }
    rotated = after_launch(
        session,
        exit_code=1,
        resume_target_missing=True,
        uuid=lambda: "new",
        **common,  # type: ignore[arg-type]
    )
    assert rotated.action == "rotate" and rotated.session.session_id == "new"
    kept = after_launch(
        session,
        exit_code=0,
        resume_target_missing=False,
        uuid=lambda: "new",
        **common,  # type: ignore[arg-type]
    )
    assert kept.action == "relaunch" and kept.session == session


def test_status_shows_the_decision_streak_and_turns_newest_first() -> None:
    """The status carries the last decision, the streak and the turns, newest first."""
    run = SeatRun(seat_id="s")
    for i in range(2):
        t = tick(run, at=T + i * 100_000)
        run = settle(started(t.run, T + i * 100_000), failed(), at=T + i * 100_000).run
    run = tick(run, at=T + 200_001).run
    s = status_of(Seat(member_id="s", operator_id="ava"), run)
    assert s["operatorId"] == "ava" and s["launcher"] == "noop"
    assert s["streak"]["streak"] == 2 and s["streak"]["signature"] == failed().signature
    assert [t["turnId"] for t in s["turns"]] == ["s:turn:2", "s:turn:1"]
    assert s["lastDecision"]["reason"] in {"retry", "retry_backoff"}


def test_every_launch_past_the_limit_escalates_again_not_fresh() -> None:
    """With room for more failures, the fourth identical one escalates again (not fresh,
    the next report revision): the guardrails, not a second counter, keep it quiet."""
    opts = ControllerOptions(max_failures=10)
    run = SeatRun(seat_id="s")
    plans: list[EscalationPlan | None] = []
    for i in range(4):
        at = T + i * 100_000
        t = tick_seat(run, IDLE, options=opts, now_ms=at, rng=half, republish_after_ms=1)
        s = settle_turn(
            started(t.run, at), f"s:turn:{i + 1}", failed(), options=opts, now_ms=at, rng=half
        )
        run, plans = s.run, [*plans, s.escalate]
    third, fourth = plans[2], plans[3]
    assert third is not None and fourth is not None
    assert (third.fresh, third.revision) == (True, 1)
    assert (fourth.fresh, fourth.revision, fourth.streak) == (False, 2, 4)
    assert run.escalation is not None and run.escalation.count == 2
    assert escalation_report(fourth, target_id="ava").revision == 2
