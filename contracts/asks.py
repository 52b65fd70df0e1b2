"""The ask record: what became of an ask after it was sent. Pure data.

An engaged decision becomes an ask before the send stage posts anything. The record says
where the ask landed, whether and how it was answered, when it times out, whom it escalated
to, and how it ended; every change is an event in its history with a reason code and a why.
Consent given in an answer is kept as a `ConsentRecord`, a refusal as a `DeclineRecord`; a
seat whose asks keep going unanswered or declined is held (`AskBrake`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts._base import StrictWire, Wire
from contracts.engagement import Target

# pending: recorded, not yet on the wire (the send is in flight).
# open: sent, waiting for an answer until its deadline.
# snoozed: a target asked to be reminded later; open again when the snooze ends.
# escalated: its timeout passed unanswered and it was asked one rung up; still answerable.
# answered: final, with its answer.
# closed: final without an answer (see `AskClose`).
AskState = Literal["pending", "open", "snoozed", "escalated", "answered", "closed"]
OPEN_STATES: frozenset[str] = frozenset({"pending", "open", "snoozed", "escalated"})
FINAL_STATES: frozenset[str] = frozenset({"answered", "closed"})

AnswerKind = Literal["approved", "declined", "replied", "done"]
AnswerVerb = Literal["approved", "declined", "replied", "done", "snoozed"]
AnswerVia = Literal[
    "slack_button", "slack_thread", "github_comment", "github_review", "api", "link"
]

# Why an ask ended without an answer.
AskClose = Literal[
    "expired",  # unanswered at the top of the escalation ladder, or nobody to escalate to
    "withdrawn",  # the seat's work moved on (done, or asked anew under another key)
    "send_failed",  # the send failed for good: nobody was asked
    "send_blocked",  # the send gate refused it: nobody was asked
    "shadowed",  # shadow mode: recorded as what would have been sent; nothing was sent
    "answered_elsewhere",  # an escalation step whose ask was answered at another rung
]

# What a request to revoke a consent did (pipeline/asks.py `revoke_consent`).
RevokeOutcome = Literal["revoked", "refused"]

MAX_ANSWER_TEXT = 2_000  # characters of an answer's text that are kept
MAX_BODY = 3_000  # characters of an ask's words its record keeps
MAX_HISTORY = 40  # events a record keeps (the first and the latest)


class AskLanding(Wire):
    """Where the ask landed: a Slack channel and message (ts), or a webhook's message id."""

    adapter: str
    channel_id: str | None = None
    message_id: str | None = None
    thread_root_id: str | None = None
    at_ms: int


class AskAnswer(Wire):
    """The answer that closed an ask (the first valid one)."""

    answer: AnswerKind
    by: str
    text: str = Field(default="", max_length=MAX_ANSWER_TEXT)
    via: AnswerVia
    at_ms: int
    # What carried it (a Slack click's action, an inbound event's delivery id): the same
    # event delivered again is the same answer, not a late one.
    key: str | None = None
    # An approved consent's record and until when it holds.
    consent_id: str | None = None
    consent_expires_at_ms: int | None = None
    # Written with the consent record's revocation (the answer itself stands: it was given),
    # so the message and a later decision read from the ask alone that it no longer holds.
    consent_revoked_at_ms: int | None = None
    consent_revoked_by: str | None = None


class AskEvent(Wire):
    """One change of an ask (or one answer that changed nothing), written down."""

    at_ms: int
    event: Literal[
        "created",
        "sent",
        "answered",
        "snoozed",
        "woke",
        "escalated",
        "rung_unasked",
        "closed",
        "late_answer",
        "revoked",  # the consent an approval gave was revoked (the answer is kept)
    ]
    reason_code: str
    why: str
    by: str | None = None


class EscalationStep(Wire):
    """One rung an unanswered ask went up: whom it asked, and the journal entry of that ask."""

    level: int = Field(ge=1)
    target_id: str
    rung: Literal["target_supervisor", "seat_supervisor", "seat_operator"]
    at_ms: int
    tracking_id: str


class Ask(Wire):
    """One ask, from its decision to its answer or its end."""

    id: str
    seat_id: str
    work_id: str
    revision: int = 1
    trigger: str | None = None
    reason_code: str | None = None
    reason: str | None = None
    # The ask's words as sent (cut to MAX_BODY characters): what a console, the CLI and a
    # message changed in place to show its answer repeat.
    body: str = Field(default="", max_length=MAX_BODY)
    scope: str | None = None
    risk_kinds: tuple[str, ...] = ()
    # The GitHub issue or pull request the ask is about (`owner/repo#N`, lowercased): a
    # comment or review there by a person asked answers it.
    item_id: str | None = None
    targets: tuple[Target, ...] = ()
    surface: str = "none"
    dedupe_key: str
    attempt: int = 1
    tracking_id: str
    created_at_ms: int
    state: AskState = "pending"
    landing: AskLanding | None = None
    timeout_ms: int = 0
    deadline_ms: int | None = None  # when it is next due: its timeout, or its snooze's end
    snooze_until_ms: int | None = None
    answer: AskAnswer | None = None
    closed: AskClose | None = None
    # The escalation ladder: 0 for an ask as the seat's decision made it; an escalation's
    # own ask names the ask it escalates (`escalates`) and its level.
    level: int = 0
    escalates: str | None = None
    escalations: tuple[EscalationStep, ...] = ()
    history: tuple[AskEvent, ...] = ()
    version: int = 0

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    @property
    def is_consent(self) -> bool:
        return self.trigger == "irreversible_or_external"

    def asked_ids(self) -> tuple[str, ...]:
        """Everyone this ask has asked: its targets and each escalation's."""
        ids = [t.member_id for t in self.targets] + [e.target_id for e in self.escalations]
        return tuple(dict.fromkeys(ids))


class ConsentRecord(Wire):
    """An approved consent: who approved what, when, and until when it holds."""

    id: str
    work_id: str
    scope: str | None = None
    risk_kinds: tuple[str, ...] = ()
    seat_id: str
    ask_id: str
    by: str
    at_ms: int
    expires_at_ms: int
    revoked_at_ms: int | None = None
    revoked_by: str | None = None

    def holds_at(self, now_ms: int) -> bool:
        return self.revoked_at_ms is None and self.expires_at_ms > now_ms


class DeclineRecord(Wire):
    """A declined consent: not asked again for this work and scope until the work changes
    (a later revision)."""

    work_id: str
    scope: str | None = None
    revision: int
    seat_id: str
    ask_id: str
    by: str
    at_ms: int
    text: str = ""


class AskBrake(Wire):
    """A seat whose asks are held: most of its recent asks were declined or went unanswered."""

    seat_id: str
    held: bool
    since_ms: int
    why: str
    ask_ids: tuple[str, ...] = ()
    tracking_id: str | None = None  # the operator's ask to look at the seat
    lifted_at_ms: int | None = None
    lifted_by: str | None = None


class AnswerRequest(StrictWire):
    """`POST /v1/asks/{askId}/answer`."""

    answer: AnswerVerb
    by: str = Field(min_length=1, max_length=200)
    text: str | None = Field(default=None, max_length=MAX_ANSWER_TEXT)
    snooze_until_ms: int | None = Field(default=None, ge=0)
    # An approval's consent may hold longer than the default: "for a day" / "for a week".
    consent_ttl_ms: int | None = Field(default=None, ge=60_000, le=30 * 24 * 3_600_000)


class AnswerOutcome(Wire):
    """What an answer did: `answered` / `snoozed` changed the ask; `late_answer` was recorded
    and changed nothing; a refusal changed nothing and says why."""

    outcome: Literal["answered", "snoozed", "late_answer", "refused"]
    reason_code: str
    why: str
    ask: Ask
    consent: ConsentRecord | None = None
