"""Every shape that crosses a boundary (HTTP, queue, Redis). Pure data: no I/O."""

from contracts.engagement import EngagementDecision, GuardrailSummary, Mention, Target
from contracts.guardrails import GuardrailVerdict, LedgerRow, Limits
from contracts.org import Channel, ChannelKind, LauncherSpec, Member, Org, Seat
from contracts.work import Blocker, Commitment, Origin, Review, Risk, WorkReport

__all__ = [
    "Blocker",
    "Channel",
    "ChannelKind",
    "Commitment",
    "EngagementDecision",
    "GuardrailSummary",
    "GuardrailVerdict",
    "LauncherSpec",
    "LedgerRow",
    "Limits",
    "Member",
    "Mention",
    "Org",
    "Origin",
    "Review",
    "Risk",
    "Seat",
    "Target",
    "WorkReport",
]
