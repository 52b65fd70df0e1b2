"""Every answer to an ask goes through here, from any surface (a Slack button, a thread reply,
a GitHub review or comment, the answer route or an answer link): recorded exactly once with
the seat's inbox item (workers/stores/asks.py), shown on the message it answers where the
adapter can change a sent message, counted, and, when it ends an ask badly (declined), the
seat's brake judged.

The nuisance brake: a seat whose last concluded asks are mostly declined or unanswered
(pipeline/asks.py `brake_due`) is held, and its operator (else supervisor) gets one ask to
look at it, through the normal stages; nobody to ask is an `unroutable` row, never silence.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from celery import Celery

from contracts.asks import Ask
from pipeline.asks import AnswerIn, brake_due, brake_report, with_root_consent
from workers.container import Container
from workers.outbound.base import Outbound
from workers.recovery.faults import crash_point
from workers.stages.report_intake import intake_report, record_unroutable
from workers.stores.asks import Answered, AskStore
from workers.telemetry import telemetry

log = logging.getLogger("seatwire.asks")


@dataclass
class Answers:
    c: Container
    app: Celery | None = None

    @property
    def asks(self) -> AskStore:
        return self.c.asks

    @property
    def outbound(self) -> Outbound:
        return self.c.outbound

    def answer(self, ask_id: str, a: AnswerIn, *, now_ms: int, show: bool = True) -> Answered:
        """Record `a` on ask `ask_id` (AskMissing when there is none). With `show`, the
        message it answers is changed in place here; a caller that must answer fast (Slack's
        3 s) passes False and calls `show` after it answered."""
        got = self.asks.answer(ask_id, a, now_ms=now_ms)
        # Recorded with the seat's inbox item, nothing after it done yet: whatever carried
        # the answer (a redelivered reply, Slack's retried click) brings the same answer again.
        crash_point("answers", "after_answer_recorded", f"{a.via}:{ask_id}")
        outcome = got.outcome
        telemetry().ask_answered(a.via, outcome.outcome, outcome.reason_code)
        if outcome.outcome == "answered":
            ask = got.root or outcome.ask
            since = ask.landing.at_ms if ask.landing else ask.created_at_ms
            telemetry().ask_time_to_answer(ask.trigger or "", max(0, now_ms - since))
            if outcome.ask.answer is not None and outcome.ask.answer.answer == "declined":
                self.judge_brake(ask.seat_id, now_ms=now_ms)
        if show and outcome.outcome in ("answered", "snoozed"):
            self.show_everywhere(got.root or outcome.ask, also=ask_id)
        return got

    def show_everywhere(self, ask: Ask, *, also: str | None = None) -> None:
        """The seat's ask on its message, and every message of its escalations (an answer
        closed them), and the message answered (`also`, an escalation's own) when it is
        another."""
        self.show(ask)
        shown = {ask.id}
        climbed = ask.escalates is None and bool(ask.escalations)
        for other in self.asks.escalations_of(ask.id) if climbed else ():
            shown.add(other.id)
            self.show(other)
        if also is not None and also not in shown:
            answered = self.asks.get(also)
            if answered is not None:
                self.show(answered)

    def show(self, ask: Ask) -> bool:
        """The ask's answer on its message, where the adapter can change one; a failure is
        logged (the record holds the answer whatever the message shows)."""
        if ask.landing is None:
            return False
        try:
            if ask.escalates is not None and ask.answer is not None and ask.answer.consent_id:
                # The consent an escalation's answer gave is recorded on the ask it
                # escalates: its message offers (or says it revoked) that one.
                ask = with_root_consent(ask, self.asks.get(ask.escalates))
            return self.outbound.show_answer(ask)
        except Exception:
            log.exception("could not show the answer of ask %s on its message", ask.id)
            return False

    def judge_brake(self, seat_id: str, *, now_ms: int) -> bool:
        """Hold the seat's asks if its recent ones went mostly badly; True when this call
        held them (and raised the one ask to its operator)."""
        brake = brake_due(seat_id, self.asks.concluded(seat_id), now_ms=now_ms)
        if brake is None or not self.asks.hold(brake):
            return False
        telemetry().asks_held(seat_id)
        view, _degraded = self.c.org.current()
        seat = view.seat(seat_id)
        target = None if seat is None else (seat.operator_id or seat.supervisor_id)
        if target is None:
            report = brake_report(brake, operator_id=seat_id)
            intake = record_unroutable(
                self.c.journal,
                seat_id,
                report.model_copy(update={"blocker": None}),
                reason=f"seat {seat_id}'s asks are held ({brake.why}), and the org file names "
                "neither an operatorId nor a supervisorId to tell",
                now_ms=now_ms,
            )
        elif self.app is None:
            log.warning("seat %s's asks are held; no broker here to tell %s", seat_id, target)
            return True
        else:
            intake = intake_report(
                self.c.journal, self.app, seat_id, brake_report(brake, target), now_ms=now_ms
            )
        self.asks.note_hold(seat_id, intake.tracking_id)
        log.warning("seat %s's asks are held: %s (told %s)", seat_id, brake.why, target)
        return True
