"""The engagement stage: plan whether a work report needs a named person (who, where, in what
words), judge that ask once against the ledger's tally, and record the decision (or the
considered 'nobody'). The guardrail stage then reserves its place atomically."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import redis
from celery import Celery

from contracts import EngagementDecision
from contracts.messages import AskContext, DecisionEnvelope, WorkEnvelope
from contracts.send import SendMode
from pipeline.asks import (
    as_escalation,
    asking_of,
    read_record,
    rung_moot,
    rung_unasked,
    withdrawn,
)
from pipeline.engagement import EngagementContext, conclude_engagement, plan_engagement
from pipeline.guardrails import Tally, check_guardrails, dedupe_key_for, judge
from workers.clock import now_ms
from workers.container import Container
from workers.errors import PermanentError
from workers.org import OrgSource
from workers.queues import Task
from workers.stages.base import (
    Deps,
    Onwards,
    StageTask,
    Start,
    hand_off,
    onwards,
    refused,
    register_stage,
)
from workers.stages.rows import ledger_row, nonengagement_row
from workers.stores.asks import AskStore
from workers.stores.journal import Journal
from workers.stores.ledger import Ledger
from workers.telemetry import telemetry

log = logging.getLogger("seatwire.engagement")


@dataclass
class Engagement:
    journal: Journal
    ledger: Ledger
    org: OrgSource
    clock_ms: Callable[[], int] = now_ms
    # The send mode: `off` decides nothing, `shadow` decides and records what it would
    # have sent without sending, `on` sends. Each is written down, never silent.
    mode: SendMode = "on"
    # With a broker that is the stores' Redis, an engaging decision is recorded together with
    # the guardrail stage's message (workers/stores/onward.py); None: the task publishes it.
    onwards: Onwards | None = None
    # The ask record: what was already answered, consented, declined or snoozed, and whether
    # the seat's asks are held (pipeline/asks.py `read_record`). None: not read.
    asks: AskStore | None = None

    @classmethod
    def of(cls, c: Container, onwards: Onwards | None = None) -> Engagement:
        return cls(
            journal=c.journal,
            ledger=c.ledger,
            org=c.org,
            mode=c.settings.send_mode,
            onwards=onwards,
            asks=c.asks,
        )

    def __call__(self, env: WorkEnvelope, start: Start | None = None) -> DecisionEnvelope | None:
        """Decide and record; None when the report engages nobody (or is not decided, in
        mode `off`). With `start` (a first delivery's: workers/stages/base.py `Start`) the
        script that records the decision runs the start first, and nothing is recorded
        unless it is admitted."""
        view, degraded = self.org.current()
        seat = view.seat(env.seat_id)
        if seat is None:
            raise PermanentError(f"seat {env.seat_id} is not in the org file")
        if self.mode == "off":
            self._off(env, seat.member_id, start)
            return None
        ctx = EngagementContext(
            me=seat.member_id,
            directory=view.directory,
            channels=view.rooms,
            supervisor_id=seat.supervisor_id,
            now_ms=self.clock_ms(),
            degraded=tuple(degraded),
            limits=self.ledger.limits,
        )
        plan = plan_engagement(env.report, ctx)
        esc = env.escalation
        if esc is not None and plan.engage:
            key = dedupe_key_for(plan.work_id, "ask_unanswered", plan.targets)
            plan = as_escalation(plan, esc.ask_id, esc.why, key)
        asking = asking_of(env)
        recorded, counted = self._read_record(plan, env, asking, seat.member_id)
        decision = self._judged(recorded, seat.member_id, counted)
        row = (
            None
            if decision.engage
            else nonengagement_row(seat.member_id, decision, env.tracking_id)
        )
        nxt = DecisionEnvelope(
            tracking_id=env.tracking_id,
            seat_id=seat.member_id,
            accepted_at_ms=env.accepted_at_ms,
            decision=decision,
            asking=asking if decision.engage else None,
        )
        onward = (
            self.onwards.message(
                Task.GUARDRAILS, env.tracking_id, nxt.model_dump_json(by_alias=True)
            )
            if self.onwards is not None and decision.engage
            else None
        )
        started, stored = self.journal.record_decision_started(
            env.tracking_id,
            seat_id=seat.member_id,
            decision=decision,
            row=row,
            now_ms=decision.now_ms,
            onward=onward,
            start=None if start is None else start.script_args(),
        )
        if refused(start, started) or stored is None:  # only a start refuses a record
            return None
        _recorded(env, stored)
        self._withdraw(env, plan, stored.now_ms)
        if not stored.engage:
            self._unasked(env, stored)
            return None
        return nxt.model_copy(update={"decision": stored})

    def _read_record(
        self, plan: EngagementDecision, env: WorkEnvelope, asking: AskContext, seat_id: str
    ) -> tuple[EngagementDecision, Tally | None]:
        """An engaging plan against the ask record, before the guardrails count it: an
        answer, consent, decline or snooze already on record, or a held seat, engages
        nobody. A record that cannot be read is said so, and the plan stands. With it, the
        ledger's tally of the plan for `seat_id`, read in the same round trip (None: not
        read here)."""
        if not plan.engage or self.asks is None:
            return plan, None
        counted: Tally | None = None
        try:
            if self.asks.r is self.ledger.r:
                view, counted = self.asks.view_and_tally(
                    plan, env.seat_id, self.ledger, counted_as=seat_id, now_ms=plan.now_ms
                )
            else:
                view = self.asks.view(plan, env.seat_id)
            if env.escalation is not None:
                # The ask may have been answered since the tick raised this rung.
                root = self.asks.get(env.escalation.ask_id)
                plan = rung_moot(plan, root, env.escalation.ask_id)
                if not plan.engage:
                    return plan, counted
        except redis.RedisError as exc:
            failed = f"ask_record_read_failed:{type(exc).__name__}"
            return plan.model_copy(update={"degraded": (*plan.degraded, failed)}), counted
        recorded = read_record(
            plan,
            view,
            revision=asking.revision,
            scope=asking.scope,
            risk_kinds=asking.risk_kinds,
            now_ms=plan.now_ms,
            escalation=env.escalation is not None,
        )
        return recorded, counted

    def _unasked(self, env: WorkEnvelope, stored: EngagementDecision) -> None:
        """A rung that engaged nobody (a guardrail, the record): its ask is told, so it goes
        on up the ladder at the next tick. Best-effort: a failure is logged, and the ask's
        own timeout still moves it on."""
        esc = env.escalation
        if self.asks is None or esc is None:
            return
        code = stored.reason_code or "nobody"
        why = stored.reason or ""
        try:
            self.asks.update(
                esc.ask_id,
                lambda a: rung_unasked(a, esc.level, code, why, now_ms=stored.now_ms),
            )
        except Exception:
            log.exception(
                "could not tell ask %s that its rung %d asked nobody", esc.ask_id, esc.level
            )

    def _withdraw(self, env: WorkEnvelope, plan: EngagementDecision, now: int) -> None:
        """The seat's work moved on: reported done, or its report no longer fires the
        trigger that asked (nothing fired at all). Its open asks of the work close as
        withdrawn, their rungs with them. After the decision is recorded and best-effort:
        a failure is logged and the next report of the work withdraws them."""
        if self.asks is None or env.escalation is not None:
            return
        report = env.report
        if report.state == "done":
            why = f"seat {env.seat_id} reported {report.id} done (revision {report.revision})"
        elif not plan.engage and plan.trigger is None:
            why = (
                f"seat {env.seat_id}'s report of {report.id} (revision {report.revision}) no "
                f"longer asks anybody ({plan.reason_code}: {plan.reason})"
            )
        else:
            return
        try:
            withdraw_asks(self.asks, env, why, now_ms=now)
        except Exception:
            log.exception("could not withdraw seat %s's asks of %s", env.seat_id, report.id)

    def _judged(
        self, plan: EngagementDecision, seat_id: str, counted: Tally | None = None
    ) -> EngagementDecision:
        """An engaging plan judged once, against every seat's counts that bear on this ask
        (the ledger's tally: `counted` when it was read with the record, else read here);
        the guardrail stage then reserves atomically. A plan that engages nobody is final as
        it is."""
        if not plan.engage:
            return plan
        try:
            if counted is None:
                counted = self.ledger.tally(decision=plan, seat_id=seat_id, now_ms=plan.now_ms)
        except redis.RedisError as exc:
            # Judged as if nothing were counted yet (what the limits alone refuse, such as
            # a room when none may be created), and said so; the atomic reservation at the
            # guardrail stage still counts everything.
            failed = f"ledger_read_failed:{type(exc).__name__}"
            verdict = check_guardrails(
                (),
                now_ms=plan.now_ms,
                dedupe_key=plan.dedupe_key or "",
                work_id=plan.work_id,
                seat_id=seat_id,
                targets=plan.targets,
                creates_room=plan.surface == "new_room",
                limits=self.ledger.limits,
            )
            judged = conclude_engagement(plan, verdict)
            return judged.model_copy(update={"degraded": (*judged.degraded, failed)})
        verdict = judge(
            counted,
            now_ms=plan.now_ms,
            work_id=plan.work_id,
            seat_id=seat_id,
            creates_room=plan.surface == "new_room",
            limits=self.ledger.limits,
        )
        return conclude_engagement(plan, verdict)

    def _off(self, env: WorkEnvelope, seat_id: str, start: Start | None) -> None:
        """Send mode `off`: the report is received and written down as not decided."""
        now = self.clock_ms()
        decision = EngagementDecision(
            engage=False,
            reason_code="mode_off",
            reason="Seatwire's send mode is off (SEATWIRE_SEND_MODE=off): nothing is decided",
            work_id=env.report.id,
            now_ms=now,
        )
        row = ledger_row(
            seat_id,
            decision,
            env.tracking_id,
            outcome="off",
            at_ms=now,
            reason_code="mode_off",
            reason=decision.reason,
        )
        started, stored = self.journal.record_decision_started(
            env.tracking_id,
            seat_id=seat_id,
            decision=decision,
            row=row,
            now_ms=now,
            final_state="off",
            start=None if start is None else start.script_args(),
        )
        if refused(start, started) or stored is None:  # only a start refuses a record
            return
        metrics = telemetry()
        metrics.decided("engagement", "off", decision.reason_code)
        metrics.finished("work", "off", accepted_at_ms=env.accepted_at_ms, now_ms=now)


def withdraw_asks(asks: AskStore, env: WorkEnvelope, why: str, *, now_ms: int) -> list[str]:
    """Close the seat's open asks of the report's work as withdrawn (each with its rungs);
    an ask of a later revision, or one this very report made, stays. The ids closed."""
    report = env.report
    closed = []
    for ask in asks.of_work(report.id):
        if (
            ask.seat_id != env.seat_id
            or not ask.is_open
            or ask.escalates is not None
            or ask.revision > report.revision
            or ask.tracking_id == env.tracking_id
        ):
            continue
        ended = asks.update(ask.id, lambda a: withdrawn(a, why, now_ms=now_ms))
        if ended is not None and ended.closed == "withdrawn":
            asks.close_escalations(ended, now_ms=now_ms)
            closed.append(ended.id)
    if closed:
        log.info("withdrew %s: %s", ", ".join(closed), why)
    return closed


def _recorded(env: WorkEnvelope, stored: EngagementDecision) -> None:
    """The decision as stored, in the metrics: its outcome and reason code, a guardrail's
    refusal by its code, and a decision that ends the entry by its accept-to-final time."""
    metrics = telemetry()
    refusal = stored.guardrail
    outcome = "engage" if stored.engage else "nobody" if refusal is None else "refused"
    metrics.decided("engagement", outcome, stored.reason_code)
    if refusal is not None:
        metrics.refused("engagement", refusal.code)
    if not stored.engage:
        metrics.finished("work", outcome, accepted_at_ms=env.accepted_at_ms, now_ms=stored.now_ms)


TASK = Task.ENGAGEMENT  # this module's row of the stage table


def register(app: Celery, deps: Deps) -> None:
    def engagement(task: StageTask, env: WorkEnvelope) -> None:
        container = task.deps()
        atomic = onwards(app, container)
        nxt = Engagement.of(container, atomic)(env, task.start_of_request())
        if nxt is not None and atomic is None:  # else it went out with the decision
            hand_off(app, container, Task.GUARDRAILS, nxt.tracking_id, nxt.to_wire())

    # A first delivery's start runs in the script that records the decision.
    register_stage(app, TASK, deps, engagement, start_in="first")
