"""What the ask routes read and answer (workers/ingress/asks.py), beside the ask record's own
contracts (contracts/asks.py). Pure data."""

from __future__ import annotations

from pydantic import Field

from contracts._base import StrictWire, Wire
from contracts.asks import Ask, ConsentRecord, EscalationStep


class AsksPage(Wire):
    """`GET /v1/asks`: asks newest first, and the cursor of the next page (None: the last)."""

    asks: tuple[Ask, ...]
    count: int
    next: str | None = None


class AskDetail(Wire):
    """`GET /v1/asks/{askId}`: the ask with its history, the rungs it went up, and each of
    those escalations' own asks (whom it asked, and how that ended)."""

    ask: Ask
    escalations: tuple[EscalationStep, ...] = ()
    escalation_asks: tuple[Ask, ...] = ()


class AnswerView(Wire):
    """`GET /v1/asks/{askId}/answer`: the ask an answer link (or the operator) answers, the
    answers its page offers for the ask's trigger (any AnswerRequest answer is read), who may
    give them (a link's people; for the operator, everyone the ask asked) and until when
    the link is honoured (None for the operator's token)."""

    ask: Ask
    answers: tuple[str, ...]
    by: tuple[str, ...]
    expires_at_ms: int | None = None
    # The consent the ask's approval gave, while kept: revoke it with
    # `POST /v1/consents/{id}/revoke` (the same `?token=`, `by` one of `by`).
    consent: ConsentRecord | None = None


class ConsentsPage(Wire):
    """`GET /v1/consents`: consent records, latest expiry first."""

    consents: tuple[ConsentRecord, ...]
    count: int


class ActedBy(StrictWire):
    """The body of an operator's act on the record (revoking a consent, lifting a seat's
    brake): the member of the org it is done for."""

    by: str = Field(min_length=1, max_length=200)
