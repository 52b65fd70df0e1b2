"""The ledger rows the stages write: one for every engagement, refusal and considered
'nobody'. Built here once, so every stage words an outcome the same way."""

from __future__ import annotations

from contracts import EngagementDecision, GuardrailVerdict, LedgerRow
from contracts.guardrails import Outcome
from contracts.messages import OutboundAsk, SendResult


def ledger_row(
    seat_id: str,
    decision: EngagementDecision,
    tracking_id: str,
    *,
    outcome: Outcome,
    at_ms: int,
    reason_code: str | None,
    reason: str | None,
    attempt: int | None = None,
    extra_why: str | None = None,
    ask: OutboundAsk | None = None,
    result: SendResult | None = None,
) -> LedgerRow:
    """The ledger row of one outcome of one decision."""
    return LedgerRow(
        at_ms=at_ms,
        seat_id=seat_id,
        work_id=decision.work_id,
        trigger=decision.trigger,
        reason_code=reason_code,
        reason=reason,
        dedupe_key=decision.dedupe_key,
        attempt=attempt,
        engaged=outcome == "engaged",
        outcome=outcome,
        surface=decision.surface,
        channel_id=result.channel_id if result else decision.channel_id,
        message_id=result.message_id if result else None,
        room_created=bool(result and result.room_created),
        targets=decision.targets,
        why=(*decision.why, *([extra_why] if extra_why else [])),
        idempotency_id=ask.idempotency_id if ask else None,
        tracking_id=tracking_id,
    )


def nonengagement_row(seat_id: str, decision: EngagementDecision, tracking_id: str) -> LedgerRow:
    """A considered 'nobody', written down with the code that says why."""
    outcome: Outcome
    if decision.guardrail is not None:
        outcome = decision.guardrail.code  # type: ignore[assignment]  # a guardrail's code
    elif decision.reason_code == "unroutable":
        outcome = "unroutable"
    else:
        outcome = "none"
    return ledger_row(
        seat_id,
        decision,
        tracking_id,
        outcome=outcome,
        at_ms=decision.now_ms,
        reason_code=decision.reason_code,
        reason=decision.reason,
    )


def stage_row(
    seat_id: str,
    decision: EngagementDecision,
    verdict: GuardrailVerdict,
    tracking_id: str,
    *,
    outcome: Outcome,
    at_ms: int,
    reason: str | None,
    extra_why: str | None = None,
    ask: OutboundAsk | None = None,
    result: SendResult | None = None,
) -> LedgerRow:
    """A row of the guardrail or send stage: the decision's code when engaged, else the outcome."""
    return ledger_row(
        seat_id,
        decision,
        tracking_id,
        outcome=outcome,
        at_ms=at_ms,
        reason_code=decision.reason_code if outcome == "engaged" else outcome,
        reason=reason,
        attempt=verdict.attempt,
        extra_why=extra_why,
        ask=ask,
        result=result,
    )
