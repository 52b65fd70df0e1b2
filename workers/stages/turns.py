"""The turns stage: one seat's turn, launched (issue 12 points 5 and 6; docs/architecture.md).

A turn message names a seat and the turn the work controller began for it. The turn starts
only if it is still the seat's queued turn (a compare-and-set on the seat's record: a copy of
the message, a republished one, or a redelivery after a crash finds it running or gone and
does nothing), then runs the seat's launcher and settles the outcome into the controller, the
launch-failure streak and the session record, again as one compare-and-set. A launcher that
raises is a failed outcome; a worker that dies mid-turn leaves the turn running until its
lease runs out, and the next controller tick settles it as failed (`turn:lost`).

A seat never has two agents at once, and that holds for the processes, not only for the
records. A `command` turn's agent runs under a keeper that ends it by the turn's lease, even
when this worker is gone (workers/outbound/keeper.py); the record names the host and the
process group it runs in. A turn settled as lost leaves that agent `lingering` on the seat's
record, and the next turn starts only once it is proven gone: on the same host, looked at (and
SIGKILLed if it is still there); elsewhere, by its lease having passed. Until then the turn
stays queued with the reason on its record (`held`), and the tick publishes it again.

Settling has effects beyond the record (`apply_effects`, shared with the tick and the outcome
route): an escalation becomes a work report to the seat's operator (else its supervisor)
through the engagement, guardrail and send stages, or an `unroutable` ledger row when the seat
has neither; a turn's cost becomes a cost frame (spend only under `enforcement: on`). Each
effect is tried on its own: one that raises is logged and dead-lettered with its reason
(`settle:<effect>:<error>`), and the others still run. An escalation written on the record
whose report never reached the journal is raised again by the tick (`pending_escalation`).

Retries: the settlement's own write rides out a Redis outage in place, with tenacity
(`SETTLE_RETRYING`), because a Celery retry of the turn's message could not settle anything:
its turn is running, so a new delivery starts nothing. Celery's retry stays the tool for a
turn that did not start (a Redis error before `start_turn` wrote it): that delivery, run
again, starts it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import redis
from celery import Celery
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from contracts import Seat
from contracts.controller import SeatRun, TurnMessage, TurnOutcome
from contracts.org import CommandLauncher
from pipeline.controller import Rng
from pipeline.turn_cost import cost_frame_of
from pipeline.turns import (
    Clearance,
    EscalationPlan,
    Settled,
    TurnNotActive,
    agent_started,
    clearance,
    escalation_report,
    hold_turn,
    news_of,
    released,
    settle_turn,
    start_turn,
    stuck_on_agent,
)
from workers.clock import now_ms
from workers.container import Container
from workers.outbound import agents
from workers.outbound.launchers import Brief, Launched, Launchers
from workers.queues import Queue, Task
from workers.stages.base import RETRYABLE, Deps, StageTask, register_stage
from workers.stages.report_intake import intake_report, record_unroutable
from workers.stores.costs import FrameConflict, FrameExpired
from workers.telemetry import telemetry

log = logging.getLogger("seatwire.turns")

# A settle that meets a Redis outage tries again in place (0.5, 1, 2, 4 s), then leaves the
# turn to its lease. In place, not as a Celery retry: a new delivery of the turn's message
# finds the turn running and starts nothing, so only this try can still settle its outcome.
SETTLE_RETRYING = Retrying(
    retry=retry_if_exception_type((redis.ConnectionError, redis.TimeoutError)),
    stop=stop_after_attempt(5),
    wait=wait_exponential(multiplier=0.5, max=4),
    reraise=True,
)


@dataclass
class Turns:
    container: Container
    app: Celery
    launchers: Launchers
    clock_ms: Callable[[], int] = now_ms
    rng: Rng = field(default_factory=lambda: random.Random().random)

    @classmethod
    def of(cls, c: Container, app: Celery) -> Turns:
        launchers = Launchers(
            time_limit_s=c.settings.turn_time_limit_s, mcp_url=f"{c.settings.ingress_url}/mcp"
        )
        return cls(c, app, launchers)

    @property
    def lease_ms(self) -> int:
        s = self.container.settings
        return s.turn_time_limit_s * 1000 + s.turn_lease_grace_ms

    def run(self, message: TurnMessage) -> str:
        """Start the turn if it is still queued, launch it, settle it; what happened."""
        c = self.container
        if message.outcome is not None:  # an agent runtime's report of a running turn
            active = c.seat_runs.get(message.seat_id).run.active
            local = active is not None and active.agent is not None
            # A report from outside does not end a local agent: it stays on the record as
            # lingering until the next turn proves it gone (the route refuses these).
            self.finish(message.seat_id, message.turn_id, message.outcome, reaped=not local)
            return message.outcome.kind
        seat = c.org.current()[0].seat(message.seat_id)
        cleared = self._clearance(message)
        if cleared is not None and cleared.action == "wait":
            return self._hold(message, cleared)
        local = seat is not None and isinstance(seat.launcher, CommandLauncher)
        started = c.seat_runs.update(
            message.seat_id,
            lambda run: start_turn(
                run,
                message.turn_id,
                now_ms=self.clock_ms(),
                lease_ms=self.lease_ms,
                host=agents.host_id() if local else None,
                cleared=cleared,
            ),
        )
        if started is None:
            log.info(
                "turn %s is not queued (a copy, or done), or the seat's lingering agent changed "
                "since it was looked at: not run",
                message.turn_id,
            )
            return "not_queued"
        if cleared is not None:
            log.warning("turn %s of %s starts: %s", message.turn_id, message.seat_id, cleared.why)
            telemetry().decided("turns", "start", cleared.reason)
        run = started[1]
        if seat is None:
            outcome = TurnOutcome(
                kind="failed",
                retryable=False,
                detail=f"seat {message.seat_id} is no longer in the org file",
                failure_kind="no_seat",
                signature="turn:no_seat",
            )
            self.finish(message.seat_id, message.turn_id, outcome)
            return "failed"
        launched = self._launch(seat, run, message)
        if launched.outcome is None:
            log.info(
                "turn %s accepted by the agent runtime: its outcome comes later", message.turn_id
            )
            return "accepted"
        try:
            self.finish(message.seat_id, message.turn_id, launched.outcome, launched=launched)
        except TurnNotActive:
            # Settled as lost while it ran (this worker was stopped past the lease): its agent
            # was reaped here all the same, so it no longer lingers.
            c.seat_runs.update(message.seat_id, lambda r: released(r, message.turn_id))
            raise
        return launched.outcome.kind

    def _clearance(self, message: TurnMessage) -> Clearance | None:
        """Whether the agent of the seat's previous turn, if one lingers, lets this turn
        start: looked at (and killed, if it is still there) when it ran on this host."""
        run = self.container.seat_runs.get(message.seat_id).run
        agent = run.lingering
        active = run.active
        # A turn that is not this queued one is refused by `start_turn` whatever is found.
        if agent is None or active is None or active.turn_id != message.turn_id:
            return None
        here = agent.host == agents.host_id() and agent.pgid is not None
        verdict, seen, killed = None, "", False
        if here:
            found = agents.look(agent)
            if found.verdict == "ours":
                found, killed = agents.kill(agent), True
            verdict, seen = found.verdict, found.why
        return clearance(
            agent, here=here, verdict=verdict, seen=seen, killed=killed, now_ms=self.clock_ms()
        )

    def _hold(self, message: TurnMessage, cleared: Clearance) -> str:
        """Leave the turn queued, its record saying why; the tick publishes it again."""
        c = self.container
        now = self.clock_ms()
        escalate: list[EscalationPlan] = []

        def change(run: SeatRun) -> SeatRun | None:
            held = hold_turn(run, message.turn_id, cleared, now_ms=now)
            stuck = stuck_on_agent(held or run, now_ms=now, after_ms=self.lease_ms)
            escalate[:] = [] if stuck is None else [stuck[1]]
            return held if stuck is None else stuck[0]

        c.seat_runs.update(message.seat_id, change)
        telemetry().decided("turns", "wait", cleared.reason)
        log.warning("turn %s of %s waits: %s", message.turn_id, message.seat_id, cleared.why)
        if escalate:
            seat = c.org.current()[0].seat(message.seat_id)
            apply_effects(c, self.app, seat, escalate=escalate[0], now_ms=now)
        return "held"

    def _launch(self, seat: Seat, run: SeatRun, message: TurnMessage) -> Launched:
        c = self.container
        active = run.active
        brief = Brief(
            seat_id=message.seat_id,
            turn_id=message.turn_id,
            reason=active.reason if active else "",
            inbox=c.inbox.updates(message.seat_id),
            backlog=tuple(c.backlog.open_items(message.seat_id)),
            session=run.session,
            streak=run.streak,
            lease_until_ms=active.lease_until_ms if active else None,
        )

        def interrupted() -> bool:
            active = c.seat_runs.get(message.seat_id).run.active
            return bool(active and active.turn_id == message.turn_id and active.interrupt_requested)

        def started(pgid: int) -> None:
            # Written before the turn goes on: a worker that dies from here leaves a group
            # that the next turn's worker can find and prove gone.
            leader = agents.start_ticks(pgid)
            c.seat_runs.update(
                message.seat_id,
                lambda r: agent_started(r, message.turn_id, pgid=pgid, leader_start=leader),
            )

        try:
            return self.launchers.launch(
                seat.launcher, brief, should_stop=interrupted, on_started=started
            )
        except Exception as exc:  # a launcher bug is a failed turn, written down, never a loss
            log.exception("the launcher of %s raised", message.seat_id)
            return Launched(
                TurnOutcome(
                    kind="failed",
                    detail=f"the launcher raised {type(exc).__name__}: {exc}"[:2000],
                    failure_kind="launcher_error",
                    signature=f"launcher:{type(exc).__name__}",
                )
            )

    def finish(
        self,
        seat_id: str,
        turn_id: str,
        outcome: TurnOutcome,
        *,
        launched: Launched | None = None,
        reaped: bool = True,
    ) -> Settled:
        """Settle the outcome of the seat's turn in flight (`TurnNotActive` when `turn_id` is
        not it), then its effects. A Redis outage is ridden out a few times; past that the
        turn stays running and its lease settles it."""
        c = self.container
        seat = c.org.current()[0].seat(seat_id)
        settled, now = SETTLE_RETRYING(
            self._settle_once, seat_id, turn_id, outcome, seat, launched, reaped
        )
        apply_effects(c, self.app, seat, settled=settled, now_ms=now)
        telemetry().turn_ended(outcome.kind)
        log.info("turn %s of %s: %s", turn_id, seat_id, outcome.kind)
        return settled

    def _settle_once(
        self,
        seat_id: str,
        turn_id: str,
        outcome: TurnOutcome,
        seat: Seat | None,
        launched: Launched | None,
        reaped: bool = True,
    ) -> tuple[Settled, int]:
        c = self.container
        options = seat.controller if seat is not None else Seat(member_id=seat_id).controller
        now = self.clock_ms()
        ((_read, seen),) = c.seat_runs.observe([seat_id], now_ms=now)
        news = news_of(seat_id, seen, at_ms=now)
        done: list[Settled] = []

        def change(run: SeatRun) -> SeatRun:
            settled = settle_turn(
                run,
                turn_id,
                outcome,
                options=options,
                now_ms=now,
                rng=self.rng,
                news=news,
                session=launched.session if launched is not None else None,
                reaped=reaped,
            )
            done[:] = [settled]
            return settled.run

        c.seat_runs.update(seat_id, change)
        return done[0], now


def apply_effects(
    c: Container,
    app: Celery,
    seat: Seat | None,
    *,
    settled: Settled | None = None,
    escalate: EscalationPlan | None = None,
    now_ms: int,
) -> list[str]:
    """What a settled turn (or a stopped seat) means beyond its record: the escalation ask,
    the cost frame, and a line in the log when a success cleared an escalation. Each is tried
    on its own; one that fails is dead-lettered with its reason and the others still run.
    Returns the effects that failed."""
    plan = escalate or (settled.escalate if settled is not None else None)
    seat_id = plan.seat_id if plan is not None else settled.run.seat_id if settled else ""
    # A tick's escalation belongs to no turn: its letter is named by its revision, so one
    # that keeps failing stays one letter.
    turn_id = (
        settled.record.turn_id
        if settled is not None
        else f"escalation-{plan.revision}"
        if plan is not None
        else ""
    )
    failed: list[str] = []
    if settled is not None:
        if not _effect(c, "cost", seat_id, turn_id, lambda: _cost(c, settled), now_ms=now_ms):
            failed.append("cost")
        if settled.cleared is not None:
            log.info(
                "seat %s: escalation %s cleared by a successful turn",
                settled.run.seat_id,
                settled.cleared.signature,
            )
    if plan is not None:
        escalation = partial(raise_escalation, c, app, seat, plan, now_ms=now_ms)
        if not _effect(c, "escalation", seat_id, turn_id, escalation, now_ms=now_ms):
            failed.append("escalation")
    return failed


def _effect(
    c: Container,
    name: str,
    seat_id: str,
    turn_id: str,
    do: Callable[[], object],
    *,
    now_ms: int,
) -> bool:
    """Run one effect of a settlement; on any error, log it and dead-letter it with its
    reason (the message names the seat and turn), rather than let it end the settlement."""
    try:
        do()
        return True
    except Exception as exc:
        log.exception("seat %s: the %s of turn %s failed", seat_id, name, turn_id or "(none)")
        dead_letter(c, name, seat_id, turn_id, exc, now_ms=now_ms)
        return False


def dead_letter(
    c: Container, name: str, seat_id: str, turn_id: str, exc: BaseException, *, now_ms: int
) -> None:
    """Write down, as a dead letter an operator lists with `seatwire dlq list`, that step
    `name` of a turn gave up (reason `settle:<name>:<error type>`)."""
    telemetry().decided("turns", "gave_up", name)
    letter = f"settle:{seat_id}:{turn_id or now_ms}:{name}"
    try:
        c.dead_letters.give_up(
            letter,
            queue=Queue.TURNS,
            reason=f"settle:{name}:{type(exc).__name__}",
            error=f"{type(exc).__name__}: {exc}",
            message={"seatId": seat_id, "turnId": turn_id, "effect": name},
            now_ms=now_ms,
            task=TASK,
        )
    except Exception:  # Redis itself is down: the log is all that can be written
        log.exception("could not dead-letter the %s of turn %s", name, turn_id)


def raise_escalation(
    c: Container, app: Celery, seat: Seat | None, plan: EscalationPlan, *, now_ms: int
) -> str:
    """The escalation's work report, to the operator (else the supervisor) through the
    normal stages; `unroutable` in the ledger when there is neither. Its tracking id and
    target are written on the seat's record."""
    target = None if seat is None else (seat.operator_id or seat.supervisor_id)
    report = escalation_report(plan, target_id=target)
    if target is None:
        intake = record_unroutable(
            c.journal,
            plan.seat_id,
            report,
            reason=f"{plan.hint} Nobody can be asked: seat {plan.seat_id} names neither an "
            "operatorId nor a supervisorId in the org file.",
            now_ms=now_ms,
        )
    else:
        intake = intake_report(c.journal, app, plan.seat_id, report, now_ms=now_ms)

    def noted(run: SeatRun) -> SeatRun | None:
        e = run.escalation
        if e is None or e.signature != plan.signature:
            return None
        update = {"tracking_id": intake.tracking_id, "target_id": target}
        return run.model_copy(update={"escalation": e.model_copy(update=update)})

    c.seat_runs.update(plan.seat_id, noted)
    telemetry().escalated("unroutable" if target is None else intake.status)
    log.warning(
        "seat %s escalates (%s, %s) to %s: %s",
        plan.seat_id,
        plan.signature,
        intake.status,
        target or "nobody (unroutable)",
        plan.hint,
    )
    return intake.status


def _cost(c: Container, settled: Settled) -> None:
    record = settled.record
    frame = cost_frame_of(record.outcome, at_ms=record.ended_at_ms, turn_id=record.turn_id)
    if frame is None:
        return
    try:
        c.costs.record(settled.run.seat_id, frame, now_ms=record.ended_at_ms)
    except (FrameConflict, FrameExpired) as exc:
        log.warning("turn %s: its cost frame was not recorded: %s", record.turn_id, exc)


TASK = Task.TURN  # this module's row of the stage table


def register(app: Celery, deps: Deps) -> None:
    def turn(task: StageTask, message: TurnMessage) -> None:
        try:
            Turns.of(task.deps(), app).run(message)
        except TurnNotActive as exc:  # settled meanwhile (its lease ran out): nothing to do
            log.warning("%s", exc)
        except RETRYABLE:
            raise  # tried again by Celery; past its retries the lease settles the turn
        except Exception as exc:
            # A turn message carries no journal entry for the stage's own dead-lettering:
            # the turn's give-up is written here, with the seat and turn it was about.
            dead_letter(task.deps(), "turn", message.seat_id, message.turn_id, exc, now_ms=now_ms())
            raise

    register_stage(app, TASK, deps, turn)
