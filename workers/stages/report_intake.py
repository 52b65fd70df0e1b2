"""A work report raised from inside Seatwire (the goal steward's HANDOFF, the work
controller's escalation) enters the pipeline as one from a seat does at the ingress: journalled
under its deterministic tracking id, its engagement task published, marked enqueued. It then
meets the same engagement, guardrail and send stages as any other report.

A repeat of the same (seat, report id, revision) is `duplicate` and publishes nothing, unless
the first try was journalled but never enqueued (`requeued`); the same tracking id with other
content is a `conflict`, and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Literal

from celery import Celery

from contracts import EngagementDecision, WorkReport
from contracts.messages import AskEscalation, WorkEnvelope
from workers.broker import publish
from workers.queues import FIRST_TASK, tracking_id_for
from workers.stages.rows import ledger_row
from workers.stores.journal import Accepted, Journal

IntakeStatus = Literal["new", "requeued", "duplicate", "conflict"]


@dataclass(frozen=True)
class Intake:
    status: IntakeStatus
    tracking_id: str


def intake_report(
    journal: Journal,
    app: Celery,
    seat_id: str,
    report: WorkReport,
    *,
    now_ms: int,
    escalation: AskEscalation | None = None,
) -> Intake:
    """Journal `report` as seat `seat_id`'s and publish its engagement task. With
    `escalation`, the report is an unanswered ask raised one rung up (the asks tick): its
    envelope carries which ask, rung and why, and the engagement stage decides it as
    `ask_unanswered`."""
    tracking, payload, fingerprint, result = _journalled(
        journal, seat_id, report, now_ms, escalation
    )
    if not result.new and result.fingerprint not in ("", fingerprint):
        return Intake("conflict", tracking)
    if not result.new and not (result.state == "accepted" and not result.enqueued):
        return Intake("duplicate", tracking)
    message = json.loads(payload)
    if not result.new:
        stored = journal.get(tracking)
        message = stored["payload"] if stored else message
    publish(app, FIRST_TASK["work"], tracking, message)
    journal.mark_enqueued(tracking, now_ms)
    return Intake("new" if result.new else "requeued", tracking)


def record_unroutable(
    journal: Journal,
    seat_id: str,
    report: WorkReport,
    *,
    reason: str,
    now_ms: int,
    reason_code: str = "unroutable",
    trigger: str = "commitment_at_risk",
    work_id: str | None = None,
) -> Intake:
    """A report that must reach a person but names nobody who could be asked: journalled and
    closed at once with an `unroutable` ledger row that says why, never dropped. The row's
    reason code and trigger say which (`ask_unanswered` for an ask that expired unanswered),
    and its work id is `work_id` (by default the report's), so the work's rows show it.

    A repeat finds the entry decided and writes nothing; one whose first try was journalled
    but died before its decision records the decision now."""
    tracking, _payload, _fingerprint, result = _journalled(journal, seat_id, report, now_ms)
    if not result.new and result.state != "accepted":
        return Intake("duplicate", tracking)
    decision = EngagementDecision(
        engage=False,
        trigger=trigger,
        reason_code=reason_code,
        reason=reason,
        work_id=work_id or report.id,
        degraded=("engagement_unroutable",),
        why=(f"{reason_code}: {reason}",),
        now_ms=now_ms,
    )
    row = ledger_row(
        seat_id,
        decision,
        tracking,
        outcome="unroutable",
        at_ms=now_ms,
        reason_code=reason_code,
        reason=reason,
    )
    journal.record_decision(tracking, seat_id=seat_id, decision=decision, row=row, now_ms=now_ms)
    return Intake("new" if result.new else "requeued", tracking)


def _journalled(
    journal: Journal,
    seat_id: str,
    report: WorkReport,
    now_ms: int,
    escalation: AskEscalation | None = None,
) -> tuple[str, str, str, Accepted]:
    """The report journalled under its tracking id: (tracking id, payload, fingerprint, what
    the journal answered)."""
    tracking = tracking_id_for(seat_id, report.id, report.revision)
    payload = WorkEnvelope(
        tracking_id=tracking,
        seat_id=seat_id,
        accepted_at_ms=now_ms,
        report=report,
        escalation=escalation,
    ).model_dump_json(by_alias=True)
    fingerprint = hashlib.sha256(report.model_dump_json(by_alias=True).encode()).hexdigest()
    result = journal.accept(
        tracking,
        kind="work",
        seat_id=seat_id,
        payload=payload,
        now_ms=now_ms,
        fingerprint=fingerprint,
    )
    return tracking, payload, fingerprint, result
