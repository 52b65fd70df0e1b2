"""Guardrail limits, verdicts and ledger rows (docs/architecture.md, "Guardrails"). Pure data."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from contracts._base import Wire
from contracts.engagement import Target
from contracts.journal import LedgerOutcome

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

# Outcomes that hold a place against the limits. A live reservation counts so that N
# concurrent workers can never all pass the same check; `sending` and `unknown` count
# because the ask may already be in someone's DMs; `shadowed` because shadow mode must count
# what it would have sent exactly as `on` would.
COUNTED_OUTCOMES = frozenset({"engaged", "reserved", "sending", "unknown", "shadowed"})

# Every outcome a ledger row can carry, named once with the other states and verbs.
Outcome = LedgerOutcome


class Limits(Wire):
    """Every guardrail limit; each can be overridden in configuration."""

    reengage_after_ms: int = Field(default=6 * HOUR_MS, ge=0)
    max_attempts_per_ask: int = Field(default=3, ge=1)
    per_target_per_day: int = Field(default=4, ge=1)
    per_work_per_day: int = Field(default=3, ge=1)
    per_seat_per_hour: int = Field(default=10, ge=1)
    rooms_per_day: int = Field(default=2, ge=0)


class GuardrailVerdict(Wire):
    allowed: bool
    code: str | None = None
    detail: str = ""
    counts: dict[str, Any] = Field(default_factory=dict)
    attempt: int = 1


class LedgerRow(Wire):
    """One written-down outcome: an engagement, a refusal, or a considered 'nobody'.

    `expires_at_ms` is set only on a live reservation; past it the reservation no longer counts.
    """

    at_ms: int
    seat_id: str
    work_id: str
    trigger: str | None = None
    reason_code: str | None = None
    reason: str | None = None
    dedupe_key: str | None = None
    attempt: int | None = None
    engaged: bool = False
    outcome: Outcome = "none"
    surface: str = "none"
    channel_id: str | None = None
    message_id: str | None = None
    room_created: bool = False
    targets: tuple[Target, ...] = ()
    why: tuple[str, ...] = ()
    idempotency_id: str | None = None
    expires_at_ms: int | None = None
    tracking_id: str | None = None

    def counts_at(self, now_ms: int) -> bool:
        """Whether this row holds a place against the limits at `now_ms`."""
        if self.outcome not in COUNTED_OUTCOMES:
            return False
        if self.outcome == "reserved" and self.expires_at_ms is not None:
            return self.expires_at_ms > now_ms
        return True
