"""A seat's turns over the controller (issue 12 points 3-6, pipeline/turns.py). Pure.

One tick for one seat (begin a turn, settle a lost one, republish a queued one, escalate a
stopped seat), settling an outcome (streak, escalation, clearing), the escalation's report,
the session a command launch addresses, and an operator's controls.
"""

from __future__ import annotations

import itertools

import pytest

from contracts.controller import AgentProcess, Escalation, SeatRun, SessionRecord, TurnOutcome
from contracts.org import ControllerOptions, Seat
from pipeline.engagement import decide_engagement
from pipeline.launches import iso
from pipeline.turns import (
    ESCALATION_RETRY_MS,
    EscalationPlan,
    Observed,
    TurnNotActive,
    after_launch,
    agent_started,
    apply_control,
    clearance,
    escalation_report,
    hold_turn,
    pending_escalation,
    plan_launch,
    released,
    settle_turn,
    start_turn,
    status_of,
    stuck_on_agent,
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
    assert report.headline == plan.hint and report.blocker is not None
    assert report.blocker.owner_id == "ava" and report.state == "failed"
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
    assert run.escalation is not None
    noted = run.model_copy(
        update={"escalation": run.escalation.model_copy(update={"tracking_id": "t-1"})}
    )
    assert tick(noted, at=T + 400_000).escalate is None  # once: the escalation is open


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


# ---------------------------------------------------------------------- the agent processes


def lost_with_agent(host: str = "h1") -> SeatRun:
    """A seat whose command turn started on `host` (group 4242) and was settled as lost."""
    run = tick(SeatRun(seat_id="s")).run
    assert run.active is not None
    run = start_turn(run, run.active.turn_id, now_ms=T, lease_ms=60_000, host=host)
    assert run is not None
    run = agent_started(run, "s:turn:1", pgid=4242, leader_start=77)
    assert run is not None
    t = tick(run, at=T + 60_001)
    assert t.settled is not None and t.settled.record.outcome.signature == "turn:lost"
    lost: SeatRun = t.run
    return lost


def test_a_started_command_turn_names_its_host_and_group() -> None:
    """A command turn's start writes the host and, once started, the agent's group; its
    `untilMs` is the turn's lease."""
    run = tick(SeatRun(seat_id="s")).run
    started_run = start_turn(run, "s:turn:1", now_ms=T, lease_ms=60_000, host="h1")
    assert started_run is not None and started_run.active is not None
    agent = started_run.active.agent
    assert agent == AgentProcess(turn_id="s:turn:1", host="h1", until_ms=T + 60_000)
    with_group = agent_started(started_run, "s:turn:1", pgid=9, leader_start=5)
    assert with_group is not None and with_group.active is not None
    assert with_group.active.agent is not None and with_group.active.agent.pgid == 9
    assert agent_started(started_run, "s:turn:2", pgid=9, leader_start=5) is None


def test_a_turn_settled_by_its_worker_leaves_no_agent_behind() -> None:
    """A turn its own worker settles was reaped there: nothing lingers."""
    run = tick(SeatRun(seat_id="s")).run
    run = start_turn(run, "s:turn:1", now_ms=T, lease_ms=60_000, host="h1")
    assert run is not None
    assert settle(run, TurnOutcome(kind="ok")).run.lingering is None


def test_a_lost_turns_agent_lingers_and_blocks_the_next_start() -> None:
    """A turn settled as lost leaves its agent `lingering`; the next turn does not start
    without a clearance of that very agent."""
    run = lost_with_agent()
    assert run.lingering is not None and run.lingering.pgid == 4242
    nxt = tick(run, at=T + 200_000)
    assert nxt.publish is not None
    assert start_turn(nxt.run, nxt.publish.turn_id, now_ms=T + 200_000, lease_ms=60_000) is None
    ok = clearance(
        run.lingering, here=True, verdict="gone", seen="no process", killed=False, now_ms=T
    )
    started_run = start_turn(
        nxt.run, nxt.publish.turn_id, now_ms=T + 200_000, lease_ms=60_000, cleared=ok
    )
    assert started_run is not None and started_run.lingering is None
    assert started_run.active is not None and started_run.active.cleared == ok.why
    record = settle(started_run, TurnOutcome(kind="ok"), at=T + 200_001).record
    assert record.cleared == ok.why


@pytest.mark.parametrize(
    ("here", "verdict", "killed", "at", "action", "reason"),
    [
        (True, "gone", False, T, "start", "agent_gone"),
        (True, "gone", True, T, "start", "agent_killed"),
        (True, "ours", True, T, "wait", "agent_alive"),
        (True, "unproven", False, T + 64_999, "wait", "agent_unproven"),
        (True, "unproven", False, T + 65_000, "start", "agent_lease_passed"),
        (False, None, False, T + 64_999, "wait", "agent_unproven"),
        (False, None, False, T + 65_000, "start", "agent_lease_passed"),
    ],
)
def test_the_clearance_of_a_lingering_agent(
    here: bool, verdict: str | None, killed: bool, at: int, action: str, reason: str
) -> None:
    """Proven gone (or killed) on this host starts; still there after a kill waits; where it
    cannot be looked at, only its lease having passed (and 5 s for clocks that disagree)
    starts, and the wait says until when."""
    agent = AgentProcess(turn_id="s:turn:1", host="h1", until_ms=T + 60_000, pgid=4242)
    c = clearance(agent, here=here, verdict=verdict, seen="seen", killed=killed, now_ms=at)  # type: ignore[arg-type]
    assert (c.action, c.reason) == (action, reason)
    assert c.why and "s:turn:1" in c.why
    if action == "wait":
        assert c.until_ms > at


def test_a_held_turn_says_why_once() -> None:
    """A held turn carries the clearance's reason; the same hold again writes nothing."""
    run = lost_with_agent()
    nxt = tick(run, at=T + 200_000)
    assert run.lingering is not None and nxt.publish is not None
    wait = clearance(run.lingering, here=False, verdict=None, seen="", killed=False, now_ms=T + 1)
    held = hold_turn(nxt.run, nxt.publish.turn_id, wait, now_ms=T + 200_000)
    assert held is not None and held.active is not None and held.active.held is not None
    assert held.active.held.reason == "agent_unproven" and held.active.state == "queued"
    assert hold_turn(held, nxt.publish.turn_id, wait, now_ms=T + 200_001) is None


def test_a_worker_that_reaped_a_lost_turns_agent_releases_it() -> None:
    """The worker of a turn settled as lost that reaped its agent takes it off the record;
    another turn's release changes nothing."""
    run = lost_with_agent()
    assert released(run, "s:turn:9") is None
    after = released(run, "s:turn:1")
    assert after is not None and after.lingering is None


# ---------------------------------------------------------------------- the escalation


def test_the_escalation_says_what_happened_and_what_to_do() -> None:
    """The escalation is a blocked ask to the operator: the verdict first, then that the seat
    stopped after N identical failures, then the three commands the operator has; it never
    uses the words of a commitment the operator did not make."""
    plan = EscalationPlan(
        seat_id="relay",
        revision=1,
        signature="session-id:binary-missing",
        streak=3,
        hint="3× in a row, identically — retries are not fixing it and this needs a person.",
        reason="three identical failures",
        fresh=True,
        stopped=True,
    )
    report = escalation_report(plan, target_id="ava")
    assert report.summary is not None
    assert "Seat relay stopped after 3 identical failures" in report.summary
    assert [o.split(": ")[-1] for o in report.options] == [
        "seatwire seat status relay",
        "seatwire seat run-now relay",
        "seatwire seat resume relay",
    ]
    members = [{"id": "ava", "displayName": "Ava", "status": "active"}]
    ctx = {
        "me": {"id": "relay", "supervisorId": "ava"},
        "directory": {"members": members},
        "nowMs": T,
    }
    decision = decide_engagement(report, ctx)
    assert decision.engage is True and decision.reason_code == "blocked:decision"
    body = str(decision.body)
    assert body.splitlines()[0] == f"**{plan.hint}**"
    assert "You asked for this" not in body and "seatwire seat run-now relay" in body


def test_an_escalation_that_never_reached_the_journal_is_raised_again() -> None:
    """An escalation on the record with no tracking id is raised again by a tick once
    `ESCALATION_RETRY_MS` passed (the same report: same revision and words), then not again
    until the next interval; one with a tracking id never."""
    run = SeatRun(seat_id="s")
    for i in range(3):
        t = tick(run, at=T + i * 100_000)
        run = settle(started(t.run, T + i * 100_000), failed(), at=T + i * 100_000).run
    assert run.escalation is not None and run.escalation.tracking_id is None
    first = run.escalation.at_ms
    assert pending_escalation(run, now_ms=first + ESCALATION_RETRY_MS - 1) is None
    again = pending_escalation(run, now_ms=first + ESCALATION_RETRY_MS)
    assert again is not None
    tried, plan = again
    assert (plan.revision, plan.signature, plan.streak) == (1, run.escalation.signature, 3)
    assert escalation_report(plan, target_id="ava") == escalation_report(
        EscalationPlan(
            seat_id="s",
            revision=1,
            signature=run.escalation.signature,
            streak=3,
            hint=run.escalation.hint,
            reason=run.escalation.reason,
            fresh=True,
            stopped=run.escalation.stopped,
        ),
        target_id="ava",
    )
    assert pending_escalation(tried, now_ms=first + ESCALATION_RETRY_MS + 1) is None
    t = tick(run, at=first + ESCALATION_RETRY_MS)
    assert t.escalate is not None and t.run.escalation is not None
    assert t.run.escalation.tried_at_ms == first + ESCALATION_RETRY_MS
    done = run.model_copy(
        update={
            "escalation": Escalation.model_validate({**run.escalation.to_wire(), "trackingId": "x"})
        }
    )
    assert pending_escalation(done, now_ms=first + 10 * ESCALATION_RETRY_MS) is None


def test_a_turn_held_too_long_by_an_agent_that_will_not_die_escalates_once() -> None:
    """A retry held (`agent_alive`) for as long as a lease by a lost turn's agent that is
    still running after SIGKILL escalates once, saying what happened; a shorter hold, or a
    hold for another reason, does not."""
    run = lost_with_agent()
    nxt = tick(run, at=T + 200_000)
    assert run.lingering is not None and nxt.publish is not None
    alive_c = clearance(
        run.lingering, here=True, verdict="ours", seen="1 process", killed=True, now_ms=T
    )
    held = hold_turn(nxt.run, nxt.publish.turn_id, alive_c, now_ms=T + 200_000)
    assert held is not None and held.active is not None and held.active.held is not None
    assert held.active.held.since_ms == T + 200_000
    assert stuck_on_agent(held, now_ms=T + 259_999, after_ms=60_000) is None
    stuck = stuck_on_agent(held, now_ms=T + 260_000, after_ms=60_000)
    assert stuck is not None
    after, plan = stuck
    assert plan.signature == "turn:agent_unkillable" and after.escalation is not None
    assert stuck_on_agent(after, now_ms=T + 900_000, after_ms=60_000) is None
    report = escalation_report(plan, target_id="ava")
    assert report.summary is not None and "still running after SIGKILL" in report.summary
    waiting = clearance(run.lingering, here=False, verdict=None, seen="", killed=False, now_ms=T)
    other = hold_turn(nxt.run, nxt.publish.turn_id, waiting, now_ms=T + 200_000)
    assert other is not None
    assert stuck_on_agent(other, now_ms=T + 900_000, after_ms=60_000) is None
