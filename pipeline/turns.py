"""A seat's turns over the work controller: one tick's decision for one seat, how a turn's
outcome settles, when that becomes an escalation to a person, and which session a command
launch addresses (docs/architecture.md, "The work controller"). Pure: time, randomness and new
ids arrive as arguments.

- `tick_seat`: what a beat tick does for a seat. A running turn whose lease ran out is settled
  as failed (its worker died: nothing is ever dropped, and that holds for turns too), a
  queued turn nobody started is published again, then the controller decides; a `run` begins
  the seat's one turn and gives its id. A seat the controller has stopped for its failures
  escalates once, if its failures had not already escalated.
- `settle_turn`: a turn's outcome applied to the controller, to the launch-failure
  streak (identical signatures only) and to the session record. On the launch that reaches
  the streak limit, and on every one after it, it escalates (the guardrails keep that from
  flooding); the next success clears it.
- `start_turn` / `clearance`: a queued turn starts only once the agent of the seat's previous
  turn is proven gone. A turn settled by its own worker was reaped there; one settled as lost
  leaves its agent `lingering` on the record, and the next turn's worker looks at it first
  (on the same host: gone, or killed; elsewhere: its keeper has ended it by its lease). Until
  then the turn waits, and its record says why (`held`).
- `plan_launch` / `after_launch`: the resume preflight and post-mortem for a command launch
  with sessions: start a fresh conversation or resume the recorded one, rotate to a fresh id
  when the resume target is proven missing (outside the hourly budget) or by the window
  heuristic (inside it).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Literal

from contracts.controller import (
    ActiveTurn,
    AgentProcess,
    ControllerDecision,
    Escalation,
    LastDecision,
    LaunchStreak,
    SeatRun,
    SessionRecord,
    TurnHold,
    TurnOutcome,
    TurnRecord,
)
from contracts.org import ControllerOptions, Seat, SessionMode
from contracts.work import Blocker, WorkReport
from pipeline.controller import Rng, WorkController
from pipeline.launches import (
    IDENTICAL_FAILURE_LIMIT,
    escalation_decision,
    escalation_hint,
    iso,
    launch_failure_streak,
    new_main_session,
    rotate_main_session,
    rotation_decision,
)

HISTORY = 10  # finished turns kept per seat for `seatwire seat status`
# An escalation whose report did not reach the journal is raised again this long after its
# last try (a tick finds it: `pending_escalation`).
ESCALATION_RETRY_MS = 30_000
STOP_ESCALATES = frozenset({"failure_limit", "unacknowledged_inbox"})
LOST = TurnOutcome(
    kind="failed",
    detail="the worker running this turn stopped answering before it reported an outcome "
    "(its lease ran out)",
    failure_kind="lost",
    signature="turn:lost",
)


class TurnNotActive(Exception):
    """An outcome for a turn that is not the seat's turn in flight (unknown, or finished)."""

    def __init__(self, seat_id: str, turn_id: str, known: bool) -> None:
        state = "has already finished" if known else "is not a turn of this seat"
        super().__init__(f"turn {turn_id} of seat {seat_id} {state}")
        self.known = known


@dataclass(frozen=True)
class Observed:
    """What one tick read about one seat."""

    inbox_last: int = 0
    inbox_acked: int = 0
    notices: int = 0
    backlog_revision: int = 0
    backlog_open: int = 0
    intents_runnable: int = 0  # the seat's runnable work intents (workers/stores/intents.py)
    intents_revision: int = 0  # rises on every write that leaves an intent runnable
    pending_deliveries: int = 0
    project: Mapping[str, object] | None = None
    # The run of project-wide items at the end of the inbox (first and last position; 0, 0
    # for none): the news is project-only when every unacknowledged item is in it.
    project_run: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class EscalationPlan:
    """An ask to raise: to whom is the worker's business (operator, else supervisor)."""

    seat_id: str
    revision: int
    signature: str
    streak: int
    hint: str
    reason: str
    fresh: bool
    stopped: bool = False  # the controller has stopped the seat (it will not retry alone)


@dataclass(frozen=True)
class Settled:
    run: SeatRun
    record: TurnRecord
    escalate: EscalationPlan | None
    cleared: Escalation | None


@dataclass(frozen=True)
class Ticked:
    run: SeatRun
    decision: ControllerDecision
    publish: ActiveTurn | None  # a turn to put on the turns queue (new, or published again)
    settled: Settled | None  # a lost turn settled as failed on this tick
    escalate: EscalationPlan | None  # a seat newly stopped by its failures


DEFAULT_PROJECT: Mapping[str, object] = {"started": True, "paused": False}


def news_of(seat_id: str, seen: Observed, *, at_ms: int) -> dict[str, Any]:
    """The controller's news: each tick's reading is a new observation. The
    seat's durable work is its open backlog and its runnable work intents; its revision, the
    sum of two counters that only rise, rises with every item added and every write that
    leaves an intent runnable, so a turn that ended ok handles exactly what it began with."""
    work = {
        "runnable": seen.backlog_open > 0 or seen.intents_runnable > 0,
        "revision": seen.backlog_revision + seen.intents_revision,
    }
    pending = max(0, seen.inbox_last - seen.inbox_acked)
    since, end = seen.project_run
    project_only = pending > 0 and end == seen.inbox_last and seen.inbox_acked >= since - 1
    return {
        "observationId": f"{seat_id}@{at_ms}",
        "project": dict(DEFAULT_PROJECT if seen.project is None else seen.project),
        "work": work,
        "pending": pending,
        "acknowledged": seen.inbox_acked,
        "project_only": project_only,
    }


def controller_of(run: SeatRun, options: ControllerOptions) -> WorkController:
    return WorkController.from_state(run.controller, **_options(options))


@lru_cache(maxsize=1024)
def _options(options: ControllerOptions) -> dict[str, Any]:
    """A seat's options as the controller's keywords, worked out once per options value (a
    tick decides thousands of seats with a handful of distinct options). The caller's
    `from_state` gets a copy of the mapping, so the cached one is never changed."""
    return options.model_dump()


def tick_seat(
    run: SeatRun,
    seen: Observed,
    *,
    options: ControllerOptions,
    now_ms: int,
    rng: Rng,
    republish_after_ms: int,
) -> Ticked:
    """One beat tick for one seat."""
    settled: Settled | None = None
    publish: ActiveTurn | None = None
    active = run.active
    if active is not None and active.state == "running" and (active.lease_until_ms or 0) < now_ms:
        settled = settle_turn(
            run, active.turn_id, LOST, options=options, now_ms=now_ms, rng=rng, reaped=False
        )
        run = settled.run
    elif (
        active is not None
        and active.state == "queued"
        and now_ms >= republish_at(active, republish_after_ms)
    ):
        again = {"published_at_ms": now_ms, "publishes": active.publishes + 1}
        publish = active.model_copy(update=again)
        run = run.model_copy(update={"active": publish})
    news = news_of(run.seat_id, seen, at_ms=now_ms)
    ctl = controller_of(run, options)
    decision = ctl.decide(
        news,
        pending_deliveries=seen.pending_deliveries,
        notices=max(0, seen.notices - run.notices_at_turn),
        steering=run.steering,
        paused=run.paused,
        now_ms=now_ms,
        rng=rng,
    )
    update: dict[str, Any] = {}
    if decision.interrupt and run.active is not None and not run.active.interrupt_requested:
        update["active"] = run.active.model_copy(update={"interrupt_requested": True})
    if decision.action == "run":
        ctl.begin_turn(news)
        seq = run.seq + 1
        publish = ActiveTurn(
            turn_id=f"{run.seat_id}:turn:{seq}",
            reason=decision.reason,
            queued_at_ms=now_ms,
            published_at_ms=now_ms,
            inbox_position=seen.inbox_last,
        )
        update = {"seq": seq, "active": publish, "steering": False, "notices_at_turn": seen.notices}
    before = run.last_decision
    retry_at = decision.retry_at_ms
    if before is None or (before.action, before.reason, before.retry_at_ms) != (
        decision.action,
        decision.reason,
        retry_at,
    ):
        update["last_decision"] = LastDecision(
            action=decision.action, reason=decision.reason, at_ms=now_ms, retry_at_ms=retry_at
        )
    state = ctl.to_state()
    if update or state is not run.controller:
        run = run.model_copy(update={"controller": state, **update})
    # else the record is left as it came: a caller tells "unchanged" by identity
    escalate = None
    if decision.action == "stop" and decision.reason in STOP_ESCALATES and run.escalation is None:
        run, escalate = _stopped_escalation(run, decision.reason, now_ms)
    elif (settled is None or settled.escalate is None) and (
        pending := pending_escalation(run, now_ms=now_ms)
    ) is not None:
        run, escalate = pending
    return Ticked(run, decision, publish, settled, escalate)


REPUBLISH_DOUBLINGS = 6  # a queued turn's republish wait doubles up to 64 times the first


def republish_at(active: ActiveTurn, republish_after_ms: int) -> int:
    """When a queued turn is published again: `republish_after_ms` after its last publish,
    doubled for each copy already sent (at most `REPUBLISH_DOUBLINGS` times). The republish is
    for a message lost between the tick's commit and its publish; the tick cannot tell such a
    turn from one whose message waits behind others on a busy queue, and a copy per period of
    every waiting turn would feed that queue (issue 27's soak). So the copies of one waiting
    turn grow with the logarithm of its wait. A turn a worker held (`held`: its message was
    taken, and it waits for the previous turn's agent) is looked at again every period."""
    published = active.published_at_ms or active.queued_at_ms
    if active.held is not None:
        return published + republish_after_ms
    doublings: int = min(active.publishes - 1, REPUBLISH_DOUBLINGS)
    return published + republish_after_ms * (1 << doublings)


def next_due_ms(
    run: SeatRun,
    seen: Observed,
    *,
    options: ControllerOptions,
    now_ms: int,
    republish_after_ms: int,
    changed: bool,
) -> int | None:
    """When `tick_seat` could next decide this seat differently if no news came (None: only
    news can), given the record `run` the tick at `now_ms` left and whether that tick
    `changed` it: the next tick when the record it wrote is not yet at rest, else the
    earliest of the times, after `now_ms`, at which one of its comparisons with the clock
    turns.

    A tick that changed nothing left a fixed point of `tick_seat`. One that changed the
    record (it began a turn, settled one, consumed an awaited acknowledgement, wrote a new
    decision) made new input for the next. A turn it began is followed by `wait: active` at
    the next tick; any other change is tried once more here, on the same news a millisecond
    later (with a fixed draw: nothing of it is kept), and when that would change the record
    again, the seat is due at the next tick.

    With the record and the news fixed, a tick's outcome depends on the clock only through
    comparisons of `now_ms` with times the record holds: a retry's backoff, an announcement's
    delay and the quiet interval (the controller's state), a running turn's lease, a queued
    turn's republish time and a pending escalation's next try. Each comparison turns once, at
    its time, and a time already past has turned for good. So a tick that decides the seat at
    the earliest time still to come, and at every news, decides exactly what a tick every
    second would, where it would decide anything new. Asks still on their way are news whose
    end is not written as a wake-up (their sends end in many places), so while any is, the
    seat is looked at again on the next tick."""
    active = run.active
    begun = active is not None and active.state == "queued" and active.queued_at_ms == now_ms
    if changed and begun:
        return now_ms + 1  # the next decision is `wait: active`
    if changed:
        again = tick_seat(
            run,
            seen,
            options=options,
            now_ms=now_ms + 1,
            rng=lambda: 0.5,
            republish_after_ms=republish_after_ms,
        )
        if again.run is not run and again.run != run:
            return now_ms + 1
    times: list[float] = []
    ctl = run.controller
    times += [t for t in (ctl.retry_at, ctl.announcement_at, ctl.quiet_at) if t is not None]
    if active is not None and active.state == "running" and active.lease_until_ms is not None:
        times.append(active.lease_until_ms + 1)  # settled as lost once the lease is behind
    if active is not None and active.state == "queued":
        times.append(republish_at(active, republish_after_ms))
    e = run.escalation
    if e is not None and e.tracking_id is None:
        times.append((e.tried_at_ms or e.at_ms) + ESCALATION_RETRY_MS)
    if seen.pending_deliveries > 0:
        times.append(now_ms + 1)
    future = [math.ceil(t) for t in times if t > now_ms]
    return min(future) if future else None


def index_fingerprint(seats: Sequence[Seat], card: Mapping[str, object]) -> str:
    """What the controller's due index was filled for: the seats (their ids and controller
    options, what `next_due_ms` and `tick_seat` read of the org) and the project card. Any
    other change of the org file leaves it, so the index is not refilled for it."""
    canonical = json.dumps(
        {
            "seats": [[s.member_id, s.controller.model_dump(mode="json")] for s in seats],
            "card": card,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def start_turn(
    run: SeatRun,
    turn_id: str,
    *,
    now_ms: int,
    lease_ms: int,
    host: str | None = None,
    cleared: Clearance | None = None,
) -> SeatRun | None:
    """The seat's queued turn `turn_id`, now running until `now + lease`; None when it is
    not the queued turn (a duplicate delivery, or a turn already running or finished), or
    when the seat has a lingering agent that `cleared` is not the clearance of.

    `host` names where a local agent process is about to start (a `command` launcher), so a
    later turn can look for it there; `cleared` is the clearance of the previous turn's
    lingering agent, which the start takes off the record."""
    active = run.active
    if active is None or active.turn_id != turn_id or active.state != "queued":
        return None
    if run.lingering is not None and (cleared is None or cleared.agent != run.lingering):
        return None
    lease_until = now_ms + lease_ms
    update: dict[str, Any] = {
        "state": "running",
        "started_at_ms": now_ms,
        "lease_until_ms": lease_until,
        "held": None,
        "cleared": cleared.why if cleared is not None else None,
        "agent": None
        if host is None
        else AgentProcess(turn_id=turn_id, host=host, until_ms=lease_until),
    }
    return run.model_copy(update={"active": active.model_copy(update=update), "lingering": None})


def agent_started(
    run: SeatRun, turn_id: str, *, pgid: int, leader_start: int | None
) -> SeatRun | None:
    """The running turn's agent, now with its process group; None when `turn_id` is not the
    seat's running turn with a local agent."""
    active = run.active
    if active is None or active.turn_id != turn_id or active.state != "running":
        return None
    if active.agent is None:
        return None
    agent = active.agent.model_copy(update={"pgid": pgid, "leader_start": leader_start})
    return run.model_copy(update={"active": active.model_copy(update={"agent": agent})})


@dataclass(frozen=True)
class Clearance:
    """Whether a turn may start while the seat's previous agent lingers: `start` (proven
    gone, killed, or past the lease its keeper ends it by) or `wait` (look again by
    `until_ms`), with a reason code and why."""

    agent: AgentProcess
    action: Literal["start", "wait"]
    reason: str
    why: str
    until_ms: int


RECHECK_MS = 5_000  # a group still alive after its SIGKILL is looked at again no sooner
# How far two hosts' clocks may disagree (NTP keeps them within milliseconds): a turn on
# another host waits this long past the lost turn's lease before it counts as passed.
CLOCK_SKEW_MS = 5_000


def clearance(
    agent: AgentProcess,
    *,
    here: bool,
    verdict: Literal["gone", "ours", "unproven"] | None,
    seen: str,
    killed: bool,
    now_ms: int,
) -> Clearance:
    """ "Never two turns of a seat at once", for the processes: may a turn start while
    `agent` (of a turn settled without its worker) may still run?

    `here`: it ran on this host, and `verdict` / `seen` are what its process group is now
    (after a SIGKILL when `killed`). Elsewhere, or where the group cannot be told apart from
    another's, only its lease proves it: its keeper has ended it by then."""
    who = f"the agent of {agent.turn_id}"
    if here and verdict == "gone":
        if killed:
            return Clearance(
                agent,
                "start",
                "agent_killed",
                f"{who} outlived its turn's lease; killed: {seen}",
                now_ms,
            )
        return Clearance(agent, "start", "agent_gone", f"{who} is gone: {seen}", now_ms)
    if here and verdict == "ours":
        return Clearance(
            agent,
            "wait",
            "agent_alive",
            f"{who} is still running after a SIGKILL ({seen}); looked at again when the "
            "turn is next published",
            now_ms + RECHECK_MS,
        )
    if not here:
        where = f"it ran on {agent.host}, not here"
    else:
        where = seen or "its process group was never written down"
    settled_by = agent.until_ms + CLOCK_SKEW_MS
    if now_ms >= settled_by:
        return Clearance(
            agent,
            "start",
            "agent_lease_passed",
            f"{who} cannot be looked at ({where}); its keeper was to end it by its lease at "
            f"{iso(agent.until_ms)}, and that has passed",
            now_ms,
        )
    return Clearance(
        agent,
        "wait",
        "agent_unproven",
        f"{who} cannot be looked at ({where}) and its lease runs until "
        f"{iso(agent.until_ms)}: the turn waits until {iso(settled_by)}",
        settled_by,
    )


def hold_turn(run: SeatRun, turn_id: str, c: Clearance, *, now_ms: int) -> SeatRun | None:
    """The queued turn `turn_id`, held with the clearance's reason; None when it is not the
    seat's queued turn or already holds for the same reason."""
    active = run.active
    if active is None or active.turn_id != turn_id or active.state != "queued":
        return None
    since = active.held.since_ms or active.held.at_ms if active.held is not None else now_ms
    hold = TurnHold(reason=c.reason, why=c.why, at_ms=now_ms, until_ms=c.until_ms, since_ms=since)
    if active.held is not None and (active.held.reason, active.held.why) == (c.reason, c.why):
        return None
    return run.model_copy(update={"active": active.model_copy(update={"held": hold})})


UNKILLABLE = "turn:agent_unkillable"


def stuck_on_agent(
    run: SeatRun, *, now_ms: int, after_ms: int
) -> tuple[SeatRun, EscalationPlan] | None:
    """A seat whose next turn has waited `after_ms` for a lost turn's agent that is still
    running after its SIGKILL (another user's process, one stuck in the kernel) cannot turn
    again without a person: it escalates, once for that agent."""
    active = run.active
    held = active.held if active is not None else None
    if held is None or held.reason != "agent_alive" or run.lingering is None:
        return None
    if now_ms - (held.since_ms or held.at_ms) < after_ms:
        return None
    if run.escalation is not None and run.escalation.signature == UNKILLABLE:
        return None
    verdict = (
        f"The agent of {run.lingering.turn_id} is still running after SIGKILL, so {run.seat_id} "
        "cannot start another turn — this needs a person."
    )
    plan = EscalationPlan(
        seat_id=run.seat_id,
        revision=run.escalations + 1,
        signature=UNKILLABLE,
        streak=1,
        hint=f"{verdict} {held.why}"[:500],
        reason="the agent of the seat's lost turn cannot be ended",
        fresh=True,
        stopped=True,
    )
    return run.model_copy(update=_raised(run, plan, now_ms)), plan


def released(run: SeatRun, turn_id: str) -> SeatRun | None:
    """The seat's record once the worker of `turn_id` reaped its agent after the turn was
    settled as lost: the lingering agent is proven gone. None when it is not that turn's."""
    if run.lingering is None or run.lingering.turn_id != turn_id:
        return None
    return run.model_copy(update={"lingering": None})


def settle_turn(
    run: SeatRun,
    turn_id: str,
    outcome: TurnOutcome,
    *,
    options: ControllerOptions,
    now_ms: int,
    rng: Rng,
    news: Mapping[str, object] | None = None,
    session: SessionRecord | None = None,
    limit: int = IDENTICAL_FAILURE_LIMIT,
    reaped: bool = True,
) -> Settled:
    """Apply the outcome of the seat's turn in flight. `reaped`: the agent process of the
    turn (if it had one) is known gone; otherwise it stays on the record as `lingering`."""
    active = run.active
    if active is None or active.turn_id != turn_id or active.state != "running":
        raise TurnNotActive(run.seat_id, turn_id, any(t.turn_id == turn_id for t in run.turns))
    ctl = controller_of(run, options)
    ctl.record_outcome(
        outcome.kind,
        continuation=outcome.continuation,
        news=news,
        retryable=outcome.retryable,
        now_ms=now_ms,
        rng=rng,
    )
    record = TurnRecord(
        turn_id=turn_id,
        reason=active.reason,
        queued_at_ms=active.queued_at_ms,
        started_at_ms=active.started_at_ms,
        ended_at_ms=now_ms,
        outcome=outcome,
        cleared=active.cleared,
    )
    update: dict[str, Any] = {
        "controller": ctl.to_state(),
        "active": None,
        "turns": (*run.turns, record)[-HISTORY:],
        "lingering": None if reaped else active.agent,
    }
    if session is not None:
        update["session"] = session
    escalate: EscalationPlan | None = None
    cleared: Escalation | None = None
    if outcome.kind == "failed":
        streak, escalate = _failed(run, outcome, limit=limit, now_ms=now_ms)
        update["streak"] = streak
        if escalate is None and ctl.status()["blocked"] and run.escalation is None:
            stopped = run.model_copy(update=update)
            settled_run, escalate = _stopped_escalation(stopped, "failure_limit", now_ms)
            return Settled(settled_run, record, escalate, None)
        if escalate is not None:
            escalate = replace(escalate, stopped=bool(ctl.status()["blocked"]))
            update.update(_raised(run, escalate, now_ms))
    elif outcome.kind != "interrupted":
        update["streak"] = None  # evidence of work: the streak resets
        cleared = run.escalation
        update["escalation"] = None
    return Settled(run.model_copy(update=update), record, escalate, cleared)


def _failed(
    run: SeatRun, outcome: TurnOutcome, *, limit: int, now_ms: int
) -> tuple[LaunchStreak, EscalationPlan | None]:
    signature = outcome.signature or f"turn:{outcome.failure_kind or 'failed'}"
    prior = run.streak.to_wire() if run.streak is not None else None
    raw = launch_failure_streak(prior, {"signature": signature, "at": iso(now_ms)})
    if raw is None:  # cannot happen for a non-empty signature; never silently drop the count
        raise ValueError(f"the launch-failure streak of {signature!r} came back empty")
    decision = escalation_decision(
        {"streak": raw["streak"], "limit": limit, "escalatedAt": raw["escalatedAt"]}
    )
    if not decision["escalate"]:
        return LaunchStreak.model_validate(raw), None
    hint = escalation_hint(
        {
            "signature": signature,
            "streak": raw["streak"],
            "limit": limit,
            "detail": outcome.detail,
            "sessionId": outcome.session_id or (run.session.session_id if run.session else ""),
        }
    )
    raw = {**raw, "escalatedAt": raw["escalatedAt"] or iso(now_ms)}
    plan = EscalationPlan(
        seat_id=run.seat_id,
        revision=run.escalations + 1,
        signature=signature,
        streak=int(str(raw["streak"])),
        hint=hint,
        reason=str(decision["reason"]),
        fresh=bool(decision["fresh"]),
    )
    return LaunchStreak.model_validate(raw), plan


def _raised(run: SeatRun, plan: EscalationPlan, now_ms: int) -> dict[str, Any]:
    prior = run.escalation
    count = prior.count + 1 if prior is not None and prior.signature == plan.signature else 1
    return {
        "escalations": plan.revision,
        "escalation": Escalation(
            signature=plan.signature,
            streak=plan.streak,
            hint=plan.hint,
            at_ms=now_ms,
            target_id=None,
            count=count,
            reason=plan.reason,
            stopped=plan.stopped,
        ),
    }


def _stopped_escalation(run: SeatRun, reason: str, now_ms: int) -> tuple[SeatRun, EscalationPlan]:
    """A seat the controller stopped whose failures were not one repeated fault: still a
    person must hear of it, or it would stop in silence."""
    failures = run.controller.failures
    last = run.turns[-1].outcome.detail if run.turns else ""
    if reason == "unacknowledged_inbox":
        verdict = (
            f"{failures} turns in a row ended without acknowledging the inbox — the seat has "
            "stopped and this needs a person."
        )
    else:
        verdict = (
            f"{failures} turns in a row have failed — the seat has stopped retrying and this "
            "needs a person."
        )
    hint = f"{verdict} {last.strip()}".strip() if last.strip() else verdict
    plan = EscalationPlan(
        seat_id=run.seat_id,
        revision=run.escalations + 1,
        signature=f"controller:{reason}",
        streak=failures,
        hint=hint,
        reason=f"the work controller stopped the seat ({reason})",
        fresh=True,
        stopped=True,
    )
    return run.model_copy(update=_raised(run, plan, now_ms)), plan


def escalation_report(plan: EscalationPlan, *, target_id: str | None) -> WorkReport:
    """The work report an escalation goes through the pipeline as: the seat is blocked on a
    person (its operator, `target_id`), who is told first the verdict (the 200-character
    rule), then what happened and what they can do about it. Built from the plan alone, so a
    report raised again after a crash is the same report (one tracking id, one ask)."""
    seat = plan.seat_id
    if plan.signature == UNKILLABLE:
        happened = (
            f"Seat {seat} cannot start its next turn: the agent of its lost turn is still "
            "running after SIGKILL (another user's process, or one stuck in the kernel). "
            "End it by hand; the seat then runs again on its own."
        )
    elif plan.signature.startswith("controller:"):
        happened = f"Seat {seat} stopped after {plan.streak} failed turns in a row."
    else:
        state = "stopped" if plan.stopped else "keeps failing"
        happened = (
            f"Seat {seat} {state} after {plan.streak} identical failures in a row "
            f"(failure signature {plan.signature})."
        )
    blocker = None
    if target_id is not None:
        blocker = Blocker(
            kind="decision",
            owner_id=target_id,
            scope=f"{seat} turns",
            detail="the seat does not run again on its own until someone looks at the fault"
            if plan.stopped
            else "the seat keeps retrying, and the retries keep failing the same way",
        )
    return WorkReport(
        id=f"seat-turns:{seat}",
        revision=plan.revision,
        title=f"{seat} has stopped: its turns keep failing"
        if plan.stopped
        else f"{seat}: its turns keep failing",
        headline=plan.hint[:500],
        summary=f"{happened} Why it escalates: {plan.reason}.",
        scope=f"{seat} turns",
        state="failed",
        blocker=blocker,
        self_serve_exhausted=True,
        question="What you can do:",
        options=(
            f"see its last turns and their faults: seatwire seat status {seat}",
            f"after fixing the fault, run it again now: seatwire seat run-now {seat}",
            f"if it was paused, let it run again: seatwire seat resume {seat}",
        ),
        seat_id=seat,
    )


def pending_escalation(run: SeatRun, *, now_ms: int) -> tuple[SeatRun, EscalationPlan] | None:
    """An escalation written on the record whose report never reached the journal (its
    worker died, or raising it failed), due to be raised again: every `ESCALATION_RETRY_MS`
    until it has a tracking id. The plan is rebuilt from the record, so the report is the
    same one and the journal keeps it once."""
    e = run.escalation
    if e is None or e.tracking_id is not None:
        return None
    if now_ms - (e.tried_at_ms or e.at_ms) < ESCALATION_RETRY_MS:
        return None
    plan = EscalationPlan(
        seat_id=run.seat_id,
        revision=run.escalations,
        signature=e.signature,
        streak=e.streak,
        hint=e.hint,
        reason=e.reason,
        fresh=False,
        stopped=e.stopped,
    )
    tried = e.model_copy(update={"tried_at_ms": now_ms})
    return run.model_copy(update={"escalation": tried}), plan


# ---------------------------------------------------------------------- sessions


LaunchMode = SessionMode  # the two ways a launch addresses its session


@dataclass(frozen=True)
class LaunchPlan:
    mode: LaunchMode
    session: SessionRecord  # the record as this launch leaves it (launched, maybe rotated)
    rotated: str | None  # why the record was rotated before the launch, if it was


def plan_launch(
    session: SessionRecord | None,
    *,
    target_missing: bool,
    now_ms: int,
    uuid: Callable[[], str],
) -> LaunchPlan:
    """The session this launch addresses: a fresh one (`session-id`) when none was ever
    launched, else `resume`; a resume whose target is proven missing rotates first."""
    rotated: str | None = None
    if session is None:
        session = SessionRecord.model_validate(new_main_session({"now": now_ms, "uuid": uuid}))
    elif session.last_launch_at is not None and target_missing:
        decision = rotation_decision(
            {
                "record": session.to_wire(),
                "mode": "resume",
                "resumeTargetMissing": True,
                "now": now_ms,
            }
        )
        rotated = str(decision.get("why", ""))
        session = _rotated(session, now_ms=now_ms, uuid=uuid, reason=rotated)
    mode: LaunchMode = "session-id" if session.last_launch_at is None else "resume"
    resumes = session.resumes + (1 if mode == "resume" else 0)
    launched = session.model_copy(update={"last_launch_at": iso(now_ms), "resumes": resumes})
    return LaunchPlan(mode, launched, rotated)


@dataclass(frozen=True)
class AfterLaunch:
    session: SessionRecord
    action: str  # rotation_decision's: relaunch, rotate or backoff
    why: str


def after_launch(
    session: SessionRecord,
    *,
    mode: LaunchMode,
    exit_code: int | None,
    started_ms: int,
    ended_ms: int,
    resume_target_missing: bool,
    beat_seen: bool | None,
    streak_at_limit: bool,
    self_stopped: bool,
    now_ms: int,
    uuid: Callable[[], str],
) -> AfterLaunch:
    """The launch post-mortem: rotate to a fresh id when the decision says so."""
    args: dict[str, object] = {
        "record": session.to_wire(),
        "mode": mode,
        "exitCode": exit_code,
        "startedAt": started_ms,
        "endedAt": ended_ms,
        "resumeTargetMissing": resume_target_missing,
        "streakAtLimit": streak_at_limit,
        "selfStopped": self_stopped,
        "now": now_ms,
    }
    if beat_seen is not None:
        args["beatSeen"] = beat_seen
    decision = rotation_decision(args)
    action = str(decision["action"])
    if action == "rotate":
        why = str(decision.get("why", ""))
        return AfterLaunch(_rotated(session, now_ms=now_ms, uuid=uuid, reason=why), action, why)
    if action == "backoff":
        why = f"the rotation budget for this hour is spent: backing off {decision['sleepMs']} ms"
        return AfterLaunch(session, action, why)
    return AfterLaunch(session, action, "")


def _rotated(
    session: SessionRecord, *, now_ms: int, uuid: Callable[[], str], reason: str
) -> SessionRecord:
    fresh = rotate_main_session(session.to_wire(), {"now": now_ms, "uuid": uuid, "reason": reason})
    return SessionRecord.model_validate(fresh)


# ---------------------------------------------------------------------- operator controls

Control = Literal["pause", "resume", "run-now"]
CONTROLS: tuple[Control, ...] = ("pause", "resume", "run-now")


def apply_control(run: SeatRun, what: Control, options: ControllerOptions) -> SeatRun:
    """An operator's control on the seat's record. `run-now` asks the controller for a
    continuation (it clears a stop for failures) plus steering (a turn on the next
    tick even without news), unless the seat or the project is paused."""
    if what == "pause":
        return run.model_copy(update={"paused": True})
    if what == "resume":
        return run.model_copy(update={"paused": False})
    ctl = controller_of(run, options)
    ctl.request_continuation()
    return run.model_copy(update={"controller": ctl.to_state(), "steering": True})


def status_of(seat: Seat, run: SeatRun) -> dict[str, Any]:
    """A seat's status as `GET /v1/seats/{seat}/status` and `seatwire seat status` show it:
    the last decision and its reason, the controller, the streak and its signature, the
    session record, the next retry, the turn in flight (with why it waits, if it does), the
    agent of a lost turn not yet proven gone, the last turns (newest first), the open
    escalation."""
    ctl = controller_of(run, seat.controller).status()
    wire = run.to_wire()
    return {
        "seatId": seat.member_id,
        "launcher": seat.launcher.kind,
        "operatorId": seat.operator_id or seat.supervisor_id,
        "paused": run.paused,
        "steering": run.steering,
        "lastDecision": wire["lastDecision"],
        "controller": ctl,
        "nextRetryAtMs": ctl["retryAt"],
        "activeTurn": wire["active"],
        "streak": wire["streak"],
        "session": wire["session"],
        "escalation": wire["escalation"],
        "lingering": wire["lingering"],
        "turns": list(reversed(wire["turns"])),
    }


def summary_of(seat: Seat, run: SeatRun, seen: Observed) -> dict[str, Any]:
    """One row of `seatwire seats`."""
    last = run.turns[-1] if run.turns else None
    return {
        "seatId": seat.member_id,
        "launcher": seat.launcher.kind,
        "paused": run.paused,
        "lastDecision": run.last_decision.to_wire() if run.last_decision else None,
        "activeTurn": run.active.to_wire() if run.active else None,
        "lastTurn": last.to_wire() if last else None,
        "streak": run.streak.to_wire() if run.streak else None,
        "escalated": run.escalation is not None,
        "unacknowledged": max(0, seen.inbox_last - seen.inbox_acked),
        "nextRetryAtMs": run.controller.retry_at,
    }
