"""What one stage hands the next over the broker, and what an outbound adapter sends. Pure data.

Each message carries the journal's tracking id; the Celery task id is derived from it and the
stage, so a redelivered message is recognised as the same work.
"""

from __future__ import annotations

from contracts._base import Wire
from contracts.engagement import EngagementDecision, Mention, Target
from contracts.guardrails import GuardrailVerdict
from contracts.inbound import Candidate
from contracts.work import WorkReport


class InboundEnvelope(Wire):
    """An accepted inbound event on its way to the directedness stage."""

    tracking_id: str
    accepted_at_ms: int
    candidate: Candidate


class AskEscalation(Wire):
    """A report raised because an ask went unanswered: the ask, the rung, and why."""

    ask_id: str
    level: int
    target_id: str
    why: str


class AskContext(Wire):
    """What the ask record keeps of the report an engaged decision came from."""

    revision: int = 1
    scope: str | None = None
    risk_kinds: tuple[str, ...] = ()
    escalates: str | None = None  # an escalation's ask: the ask it escalates
    level: int = 0
    # The GitHub issue or pull request the work is about (`owner/repo#N`, as the GitHub
    # normaliser names `ids.issueId`): a comment or review there by a person asked answers it.
    item_id: str | None = None


class WorkEnvelope(Wire):
    tracking_id: str
    seat_id: str
    accepted_at_ms: int
    report: WorkReport
    escalation: AskEscalation | None = None


class DecisionEnvelope(Wire):
    tracking_id: str
    seat_id: str
    # When the ingress accepted the work, carried on for the accept-to-final latency;
    # None on a message that predates it.
    accepted_at_ms: int | None = None
    decision: EngagementDecision
    asking: AskContext | None = None


class ReservedEnvelope(Wire):
    tracking_id: str
    seat_id: str
    accepted_at_ms: int | None = None
    decision: EngagementDecision
    asking: AskContext | None = None
    verdict: GuardrailVerdict  # last: guard_reserve.lua writes its attempt in at the end


class OutboundAsk(Wire):
    """One ask, ready for the wire, with the idempotency id that makes it exactly-once."""

    idempotency_id: str
    tracking_id: str
    seat_id: str
    work_id: str
    attempt: int
    surface: str
    channel_id: str | None = None
    thread_root_id: str | None = None
    room_name: str | None = None
    durable_channel: bool = False
    member_ids: tuple[str, ...] = ()
    mentions: tuple[Mention, ...] = ()
    targets: tuple[Target, ...] = ()
    body: str
    reason_code: str | None = None
    # The ask record this send is (pipeline/asks.py), its trigger (which answers its buttons
    # offer), and a signed link that answers it from anywhere (None: none is offered).
    ask_id: str | None = None
    trigger: str | None = None
    answer_url: str | None = None


class SendResult(Wire):
    channel_id: str
    message_id: str
    room_created: bool = False
