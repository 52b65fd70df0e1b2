"""Every shape that crosses a boundary (HTTP, queue, Redis). Pure data: no I/O."""

from contracts.engagement import EngagementDecision, GuardrailSummary, Mention, Target
from contracts.guardrails import GuardrailVerdict, LedgerRow, Limits
from contracts.inbound import (
    BoardPart,
    CalendarPart,
    CallPart,
    Candidate,
    CandidateIds,
    Directedness,
    InboxItem,
    MessagePart,
    SeatFacts,
    SeatVerdict,
    Trace,
    Truncation,
    UpdatesPage,
)
from contracts.org import Channel, ChannelKind, LauncherSpec, Member, Org, Seat
from contracts.send_gate import QuietHours, SendGateVerdict, SendPolicy
from contracts.work import Blocker, Commitment, Origin, Review, Risk, WorkReport

__all__ = [
    "Blocker",
    "BoardPart",
    "CalendarPart",
    "CallPart",
    "Candidate",
    "CandidateIds",
    "Channel",
    "ChannelKind",
    "Commitment",
    "Directedness",
    "EngagementDecision",
    "GuardrailSummary",
    "GuardrailVerdict",
    "InboxItem",
    "LauncherSpec",
    "LedgerRow",
    "Limits",
    "Member",
    "Mention",
    "MessagePart",
    "Org",
    "Origin",
    "QuietHours",
    "Review",
    "Risk",
    "Seat",
    "SeatFacts",
    "SeatVerdict",
    "SendGateVerdict",
    "SendPolicy",
    "Target",
    "Trace",
    "Truncation",
    "UpdatesPage",
    "WorkReport",
]
