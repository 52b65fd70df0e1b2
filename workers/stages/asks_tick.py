"""The asks tick (beat): every ask whose deadline came does what pipeline/asks.py `on_due`
says, and nothing is left waiting forever.

Each run, fenced by beat's leader lease like every beat tick (workers/stages/base.py
`register_beat`), and run in process by `seatwire up` and `seatwire demo`:

- a due ask wakes from its snooze, goes one rung up, or expires:
  - one rung up is a work report raised through the normal stages (engagement, guardrails,
    the send gate, send), its envelope naming the ask, the rung and why, so the decision is
    `ask_unanswered` and the person's quiet hours hold as for any ask. The report is built
    from the record alone (as of the ask's deadline), so raising it again after a crash is
    the same report under the same tracking id: the journal takes it once. Only once it is
    raised is the step written on the ask (`escalated` refuses a second step of one rung);
    a raise that fails writes nothing and the next tick tries again;
  - expiry closes the ask, writes an `unroutable` ledger row with reason code
    `ask_unanswered` under the ask's work (who was asked, when, that nobody answered),
    closes the asks of its rungs, and judges the seat's nuisance brake;
- an ask still `pending` longer than a send lease (its send ended but the try that ended it
  died before writing it) is settled from the send's op;
- the indexes drop asks Redis expired, at most once an hour.

Two ticks at once (a deposed beat's last one, an embedded thread next to a worker's) decide
the same: the raise is one journal entry, and the step one compare-and-set.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from celery import Celery

from contracts.asks import Ask, EscalationStep
from contracts.messages import AskEscalation
from contracts.work import WorkReport
from pipeline.asks import Ladder, escalated, escalation_report, on_due, withdrawn
from workers.clock import now_ms
from workers.container import Container
from workers.queues import Task
from workers.stages.answers import Answers
from workers.stages.base import Deps, StageTask, register_beat
from workers.stages.report_intake import intake_report, record_unroutable
from workers.stages.send_ask import settle_from_op
from workers.telemetry import telemetry

log = logging.getLogger("seatwire.asks")

BATCH = 200  # due asks one tick takes at most (the oldest deadlines first)
# How long a rung whose send the gate holds (its person's quiet hours, a weekend's included)
# keeps the ask from going further up; past it the ask goes on without that rung.
RUNG_WAIT_MS = 3 * 86_400_000
# How soon an ask waiting on such a rung is looked at again.
RECHECK_MS = 5 * 60_000


@dataclass
class AsksTickReport:
    """What one tick did, by what each due ask did."""

    woke: list[str] = field(default_factory=list)
    escalated: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    trimmed: int | None = None  # index entries dropped, when this tick trimmed

    def summary(self) -> str:
        """What the tick did, in words: `2 escalated, 1 woke` (or `nothing due`)."""
        parts = [
            f"{len(ids)} {name}"
            for name, ids in (
                ("escalated", self.escalated),
                ("woke", self.woke),
                ("expired", self.expired),
                ("settled", self.settled),
                ("failed", self.failed),
            )
            if ids
        ]
        return ", ".join(parts) or "nothing due"


@dataclass
class AsksTick:
    container: Container
    app: Celery | None
    clock_ms: Callable[[], int] = now_ms
    batch: int = BATCH
    # How long a send may hold its op: an ask pending longer than this is settled from it.
    send_lease_ms: int | None = None

    @classmethod
    def of(cls, c: Container, app: Celery | None) -> AsksTick:
        return cls(c, app, send_lease_ms=(c.settings.task_time_limit_s + 10) * 1000)

    def __call__(self, *, now_ms: int | None = None) -> AsksTickReport:
        now = self.clock_ms() if now_ms is None else now_ms
        report = AsksTickReport()
        ladder = self._ladders()
        for ask_id in self.container.asks.due(now, self.batch):
            try:
                done = self._due(ask_id, ladder, now)
            except Exception:
                log.exception("due ask %s could not be moved on; the next tick tries", ask_id)
                report.failed.append(ask_id)
                continue
            if done == "woke":
                report.woke.append(ask_id)
            elif done == "escalated":
                report.escalated.append(ask_id)
            elif done == "expired":
                report.expired.append(ask_id)
        report.settled = self._settle_pending(now)
        if self.container.asks.trim_due(now):
            report.trimmed = self.container.asks.trim(now)
        if report.escalated or report.expired or report.failed or report.settled:
            log.info(
                "asks tick: escalated %s, expired %s, settled %s, failed %s",
                report.escalated,
                report.expired,
                report.settled,
                report.failed,
            )
        return report

    # ------------------------------------------------------------------ one due ask

    def _ladders(self) -> Callable[[str], Ladder]:
        """Each seat's ladder from the org file as it is now: every member's supervisor, and
        the seat's own supervisor and operator."""
        view, _degraded = self.container.org.current()
        supervisors = {m.id: m.supervisor_id for m in view.org.members}

        def of(seat_id: str) -> Ladder:
            seat = view.seat(seat_id)
            return Ladder(
                supervisors=supervisors,
                seat_supervisor=None if seat is None else seat.supervisor_id,
                seat_operator=None if seat is None else seat.operator_id,
            )

        return of

    def _due(self, ask_id: str, ladder: Callable[[str], Ladder], now: int) -> str:
        asks = self.container.asks
        ask = asks.get(ask_id)
        if ask is None:
            return "gone"
        due = on_due(ask, ladder(ask.seat_id), now_ms=now)
        if due.kind == "wake":

            def wake(a: Ask) -> Ask | None:
                again = on_due(a, ladder(a.seat_id), now_ms=now)
                return again.ask if again.kind == "wake" else None

            mine = Mine(wake)
            asks.update(ask.id, mine)
            if not mine.wrote:
                return "not_due"
            telemetry().ask_timed_out("woke")
            return "woke"
        if due.kind in ("escalate", "expire") and self._rung_in_flight(ask, now):
            # Not past a rung that has asked nobody yet (nor expired before its top rung
            # is sent): looked at again in a while, behind the others.
            asks.postpone(ask.id, now + RECHECK_MS)
            return "not_due"
        if due.kind == "escalate":
            return self._escalate(ask, due.target, due.why, now)
        if due.kind == "expire":
            return self._expire(ask, ladder, due.why, now)
        return "not_due"

    def _rung_in_flight(self, ask: Ask, now: int) -> bool:
        """Whether the last rung's own ask is still waiting to be sent (the send gate holds
        it in its person's quiet hours): the ask does not go past a rung that has not asked
        anybody yet. It waits from when the rung lands (`rung_landed`)."""
        if not ask.escalations:
            return False
        level = ask.escalations[-1].level
        return any(
            rung.level == level
            and rung.state == "pending"
            and now - rung.created_at_ms < RUNG_WAIT_MS
            for rung in self.container.asks.escalations_of(ask.id)
        )

    def _escalate(self, ask: Ask, target: tuple[str, str] | None, why: str, now: int) -> str:
        """Raise the next rung through the normal stages, then write the step on the ask."""
        assert target is not None  # on_due names whom an escalation goes to
        if self.app is None:
            raise RuntimeError("no broker here to raise an escalation on")
        target_id, rung = target
        level = len(ask.escalations) + 1
        # As of the deadline, not of this tick: a raise repeated after a crash is the same
        # report, which the journal takes once.
        as_of = ask.deadline_ms if ask.deadline_ms is not None else now
        intake = intake_report(
            self.container.journal,
            self.app,
            ask.seat_id,
            escalation_report(ask, target_id, level, now_ms=as_of),
            now_ms=now,
            escalation=AskEscalation(ask_id=ask.id, level=level, target_id=target_id, why=why),
        )
        # `conflict`: this rung was raised before from an older deadline (a step whose write
        # was lost, then a snooze): that report is the rung's, and is on its way.
        step = EscalationStep.model_validate(
            {
                "level": level,
                "targetId": target_id,
                "rung": rung,
                "atMs": now,
                "trackingId": intake.tracking_id,
            }
        )

        def stepped(a: Ask) -> Ask | None:
            if not a.is_open or any(e.level == level for e in a.escalations):
                return None  # answered or ended meanwhile (its rung engages nobody), or done
            up = escalated(a, step, why, now_ms=now)
            if a.state == "snoozed":  # a snooze given meanwhile stands; the rung is asked
                up = up.model_copy(update={"state": "snoozed", "deadline_ms": a.deadline_ms})
            return up

        mine = Mine(stepped)
        self.container.asks.update(ask.id, mine)
        if not mine.wrote:
            return "not_due"  # another tick wrote this rung, or the ask ended
        telemetry().ask_timed_out("escalated")
        log.info("ask %s went up to %s (%s, rung %d): %s", ask.id, target_id, rung, level, why)
        return "escalated"

    def _expire(self, ask: Ask, ladder: Callable[[str], Ladder], why: str, now: int) -> str:
        """Close the ask unanswered, write it in the ledger under its work, close its rungs,
        and judge its seat's brake."""
        asks = self.container.asks

        def expire(a: Ask) -> Ask | None:
            # Decided again on the ask as stored: an answer that came first stands.
            again = on_due(a, ladder(a.seat_id), now_ms=now)
            return again.ask if again.kind == "expire" else None

        mine = Mine(expire)
        stored = asks.update(ask.id, mine)
        if stored is None or not mine.wrote:
            return "not_due"  # answered meanwhile, or another tick expired it
        telemetry().ask_timed_out("expired")
        # `why` names who was asked, since when, and until when nobody answered.
        reason = f"ask {ask.id} about {ask.work_id} expired, nobody answered: {why}"
        report = WorkReport(
            id=f"{ask.id}:expired"[:200],
            title=f"unanswered: {ask.work_id}"[:500],
            headline=f"Nobody answered seat {ask.seat_id}'s ask about {ask.work_id}."[:500],
            summary=reason[:8000],
            scope=(ask.scope or ask.work_id)[:500],
            seat_id=ask.seat_id,
        )
        record_unroutable(
            self.container.journal,
            ask.seat_id,
            report,
            reason=reason,
            now_ms=now,
            reason_code="ask_unanswered",
            trigger=ask.trigger or "commitment_at_risk",
            work_id=ask.work_id,
        )
        asks.close_escalations(stored, now_ms=now)
        Answers(self.container, self.app).judge_brake(ask.seat_id, now_ms=now)
        log.warning("ask %s expired unanswered: %s", ask.id, why)
        return "expired"

    # ------------------------------------------------------------------ pending asks

    def _settle_pending(self, now: int) -> list[str]:
        """Asks still pending a send lease after they were recorded: settled from their op
        when it ended (a send still deferred or retrying is left to finish)."""
        lease = self.send_lease_ms or (self.container.settings.task_time_limit_s + 10) * 1000
        settled = []
        for ask in self.container.asks.pending_since(now - lease, self.batch):
            try:
                op = self.container.ledger.op_state(ask.tracking_id)
                moved = int(op.get("attempt") or 0)
                if moved != ask.attempt:
                    # The op moved on to another attempt, whose own ask is the one sent.
                    why = f"its send moved on to attempt {moved}: that attempt's ask is the one"
                    self.container.asks.update(ask.id, partial(withdrawn, why=why, now_ms=now))
                    settled.append(ask.id)
                    continue
                entry = self.container.journal.get(ask.tracking_id) or {}
                decision = entry.get("decision")
                root = decision.get("threadRootId") if isinstance(decision, dict) else None
                after = settle_from_op(
                    self.container.asks,
                    ask.id,
                    op,
                    adapter=self.container.outbound.name,
                    now_ms=now,
                    thread_root_id=root if isinstance(root, str) else None,
                )
            except Exception:
                log.exception("could not settle pending ask %s from its send", ask.id)
                continue
            if after is not None and after.state != "pending":
                settled.append(ask.id)
            else:
                # Still in flight (deferred to someone's morning, retrying): looked at again
                # after the others, so a few long waits never hide the rest.
                self.container.asks.recheck_pending(ask.id, now)
        return settled


class Mine:
    """A change for `AskStore.update` that remembers whether its last call changed the ask:
    after `update` returns, True only when this caller's change is the one written (a
    concurrent tick that got there first leaves nothing for this one to change)."""

    def __init__(self, change: Callable[[Ask], Ask | None]) -> None:
        self.change = change
        self.wrote = False

    def __call__(self, ask: Ask) -> Ask | None:
        after = self.change(ask)
        self.wrote = after is not None and after != ask
        return after


TASK = Task.ASKS  # this module's row of the stage table


def register(app: Celery, deps: Deps) -> None:
    def tick(task: StageTask, fence: int | None) -> None:
        AsksTick.of(task.deps(), app)()

    register_beat(app, TASK, deps, tick)
