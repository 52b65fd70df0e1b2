"""Inbound events, normalised: the `Candidate` every source becomes, the facts a seat is judged
with, and the directedness verdict. Pure data.

Provider payloads (Slack, GitHub) are parsed leniently by the normalisers; a `Candidate` posted
directly to the API is strict, because a typo there would silently change who is addressed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts._base import StrictWire, Wire

Family = Literal["messaging", "calling", "board", "calendar"]


class CandidateIds(StrictWire):
    """Where the event happened. For a board event `channelId` is the repository or board."""

    channel_id: str | None = None
    message_id: str | None = None
    thread_root_id: str | None = None
    issue_id: str | None = None
    call_id: str | None = None
    event_id: str | None = None


class MessagePart(StrictWire):
    author_id: str | None = None
    body: str = Field(default="", max_length=100_000)
    mentions: tuple[str, ...] = ()
    channel_kind: Literal["DM", "GROUP_DM", "PUBLIC", "PRIVATE"] | None = None
    parent_author_id: str | None = None
    audience_ids: tuple[str, ...] = Field(
        default=(),
        description="the provider users this delivery was made for (Slack's `authorizations`):"
        " how a direct conversation the org file does not list is known to include a seat",
    )


class BoardPart(StrictWire):
    """A board event. `action` is what happened (assigned, review_requested,
    review_request_removed, opened, edited, commented, reviewed); `mentions` are only the
    @mentions that are news in it (an edit's new ones, not the ones already read)."""

    action: str = ""
    actor_id: str | None = None
    assignee_ids: tuple[str, ...] = ()
    reviewer_ids: tuple[str, ...] = ()
    owner_ids: tuple[str, ...] = ()
    body: str = Field(default="", max_length=100_000)
    mentions: tuple[str, ...] = ()
    review_state: str | None = Field(
        default=None,
        max_length=64,
        description="a submitted review's state (approved, changes_requested, commented)",
    )


class CallPart(StrictWire):
    action: str = ""
    caller_id: str | None = None
    callee_ids: tuple[str, ...] = ()


class CalendarPart(StrictWire):
    action: Literal["invite", "update", "cancel"] | str = ""
    organizer_id: str | None = None
    attendee_ids: tuple[str, ...] = ()
    starts_at_ms: int | None = None


class Candidate(StrictWire):
    """One inbound event from any source, in one shape, before any seat has been considered."""

    family: Family
    source: str = Field(min_length=1, max_length=100)
    delivery_id: str = Field(min_length=1, max_length=200)
    ids: CandidateIds = Field(default_factory=CandidateIds)
    msg: MessagePart | None = None
    board: BoardPart | None = None
    call: CallPart | None = None
    calendar: CalendarPart | None = None
    at_ms: int = Field(ge=0)


class SeatFacts(Wire):
    """What is known about a seat's place in the conversation. `None` means not known, which
    never blocks; an empty list means known to be none."""

    visible_channel_ids: tuple[str, ...] | None = None
    member_channel_ids: tuple[str, ...] | None = None
    spoken_thread_ids: tuple[str, ...] = ()
    named_thread_ids: tuple[str, ...] = ()
    owned_item_ids: tuple[str, ...] = ()
    visible_repo_ids: tuple[str, ...] | None = None


class Directedness(Wire):
    """Whether an event is spoken to this seat, on which surface, and why (or why not)."""

    directed: bool
    surface: str | None = None
    reason: str
    why: str


class Truncation(Wire):
    """How an item too large for a page on its own (an inbox item, a thread's message) was cut
    so that its page keeps its byte cap: the longest fields first, each to the same size, so
    that short ones (ids) are cut only when they are themselves huge. A text keeps its
    first characters, a list its first elements; nothing is added to what is kept. The item
    stays whole where it is stored; only the page's copy of it is cut."""

    reason: Literal["item_over_page_bytes"] = "item_over_page_bytes"
    fields: tuple[str, ...] = Field(
        min_length=1,
        description="each cut field, as the dotted path of its key in the item's JSON "
        "(`candidate.msg.body`), in the item's order",
    )
    original_chars: dict[str, int] = Field(
        default_factory=dict,
        description="a cut text's length before the cut, in characters (code points), by path",
    )
    original_items: dict[str, int] = Field(
        default_factory=dict, description="a cut list's length before the cut, by path"
    )


class AskNote(Wire):
    """What an `ask_answered` item says: which of the seat's asks was answered, how, by whom."""

    ask_id: str
    work_id: str
    answer: Literal["approved", "declined", "replied", "done", "snoozed"]
    by: str
    text: str = ""
    at_ms: int
    snooze_until_ms: int | None = None
    consent_id: str | None = None
    consent_expires_at_ms: int | None = None


class ConsentNote(Wire):
    """What a `consent_revoked` item says: a consent given on the seat's ask was taken back,
    by whom and when; a later step needing it asks again."""

    consent_id: str
    ask_id: str
    work_id: str
    scope: str | None = None
    approved_by: str
    approved_at_ms: int
    revoked_by: str
    at_ms: int


class InboxItem(Wire):
    """A directed event in a seat's inbox, at its position."""

    position: int = Field(ge=1)
    delivery_id: str
    family: Family
    source: str
    surface: str | None
    reason: str
    why: str
    at_ms: int
    candidate: Candidate
    # Left out of the JSON when the item is whole: a stored item never carries it, and a
    # page's usual items are not made longer by it.
    truncated: Truncation | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="present only on an item cut to fit its page (it was larger than a page "
        "on its own): which fields were cut and how long they were",
    )
    # Only on an item that is not an inbound event: `ask_answered` (with `ask`),
    # `consent_revoked` (with `consent`).
    kind: str | None = Field(default=None, exclude_if=lambda v: v is None)
    ask: AskNote | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="on an `ask_answered` item: the ask, its answer, who gave it and the text",
    )
    consent: ConsentNote | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="on a `consent_revoked` item: the consent taken back, who gave it, who "
        "revoked it and when",
    )


class UpdatesPage(Wire):
    """One read of the inbox: unacknowledged items oldest first, and where to acknowledge."""

    items: tuple[InboxItem, ...]
    position: int = Field(ge=0, description="acknowledge this once the items are handled")
    acknowledged: int = Field(ge=0)
    has_more: bool
    overflowed: int = Field(
        default=0,
        ge=0,
        description="items directed to the seat but not put in its inbox because it held its "
        "cap of unread items, since the last acknowledgement; each is a ledger row "
        "(reason code inbox_full) naming its delivery",
    )


class SeatVerdict(Wire):
    """One seat's directedness verdict on one event, as recorded (the audit row). `position` is
    the event's place in the seat's inbox when it was directed there."""

    seat_id: str
    directed: bool
    surface: str | None = None
    reason: str
    why: str
    position: int | None = None
    inbox_full: bool = Field(
        default=False,
        description="directed, but not put in the seat's inbox: it held its cap of unread "
        "items (the seat's ledger has the row)",
    )
    derived: bool = Field(
        default=False,
        description="true for a seat the event did not concern: its verdict was not stored "
        "but derived on read from the event and the org version it was decided against",
    )


class Trace(Wire):
    """Everything decided about one inbound event: accepted, skipped or resolved, and per seat
    whether it was directed there and why (or why not)."""

    delivery_id: str
    tracking_id: str
    state: str = Field(description="accepted, directed, ambient, skipped or failed")
    source: str | None = None
    family: str | None = None
    accepted_at_ms: int
    resolved_at_ms: int | None = None
    deliveries: int = Field(ge=1, description="how many times the event was received")
    reason: str | None = Field(default=None, description="why a skipped event was not resolved")
    detail: str | None = None
    failed_stage: str | None = None
    error: str | None = None
    org_version: str | None = Field(
        default=None, description="the org version the event was decided against"
    )
    seats: tuple[SeatVerdict, ...] = ()
