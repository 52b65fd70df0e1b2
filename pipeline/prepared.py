"""The inbound event as the directedness rules read it: `prepare` normalises, once per event,
what every rule reads (from a `Candidate` by attribute, or from its camelCase dict), so the
rules of pipeline/directedness.py read only a `Prepared`, never the event itself. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from pydantic import BaseModel

from contracts.inbound import BoardPart, CalendarPart, CallPart, Candidate

JSON = Mapping[str, object]

EMPTY: JSON = {}
DIRECT_KINDS = ("DM", "GROUP_DM")


def _plain(value: object) -> JSON:
    """A read-only camelCase view: a dict as it is (never copied, never written to), a
    contract dumped, any other mapping copied, anything else empty."""
    if type(value) is dict:
        return value
    if isinstance(value, BaseModel):
        dumped: dict[str, object] = value.model_dump(by_alias=True, mode="json")
        return dumped
    return dict(value) if isinstance(value, Mapping) else EMPTY


def _map(value: object) -> JSON:
    """A nested object of a camelCase dict, or an empty one (`x or {}`)."""
    if type(value) is dict:  # the usual case, without the ABC check
        return value
    return value if isinstance(value, Mapping) else EMPTY


def _norm(value: object) -> str:
    return str(value).strip().casefold() if value is not None else ""


def _set(values: object) -> set[str]:
    if not values or not isinstance(values, list | tuple | set | frozenset):
        return set()
    normed = {_norm(v) for v in values}
    normed.discard("")
    return normed


_NONE: frozenset[str] = frozenset()


def _fset(values: object) -> frozenset[str]:
    """`_set`, frozen; the usual empty list costs nothing."""
    return frozenset(_set(values)) if values else _NONE


def _known(values: object) -> set[str] | None:
    """A fact list, or None when the fact is not known (which never blocks)."""
    return None if values is None else _set(values)


def id_or_none(value: object) -> str | None:
    """An id as given, or None when it is missing or empty (`x or None`)."""
    if type(value) is str:
        return value or None
    if not value:
        return None
    return value if isinstance(value, str) else str(value)


def id_as_is(value: object) -> str | None:
    """An id exactly as given (an empty one stays empty), as text."""
    return value if value is None or isinstance(value, str) else str(value)


@dataclass(frozen=True, slots=True)
class BoardView:
    """A board event's part, normalised (identities trimmed and case-folded)."""

    action: str = ""
    actor: str = ""
    assignees: frozenset[str] = frozenset()
    reviewers: frozenset[str] = frozenset()
    owners: frozenset[str] = frozenset()
    mentions: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class CallView:
    caller: str = ""
    callees: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class CalendarView:
    organizer: str = ""
    action: str = ""  # normalised
    action_text: str = ""  # as given, for the why
    attendees: frozenset[str] = frozenset()


class Prepared(NamedTuple):
    """A candidate with what every seat's verdict reads from it normalised once (the
    directedness stage resolves one event for every seat). Build it with `prepare`.

    The normalised fields feed the rules; the `*_id` fields are the ids as given, for the
    places an event touches and what it teaches. Only the event's own family part is read.
    A named tuple rather than a frozen dataclass: it is built once per event on the hot path,
    and a frozen dataclass's `__init__` costs three times as much for these sixteen fields."""

    family: object  # as given: an unknown family is named in its verdict
    channel: str
    author: str
    parent: str
    mentions: frozenset[str]
    root: str
    kind: str | None  # msg.channelKind
    body: str
    audience: frozenset[str]  # msg.audienceIds, read only for a direct conversation
    channel_id: str | None
    thread_root_id: str | None
    message_id: str | None
    issue_id: str | None
    board: BoardView | None = None
    call: CallView | None = None
    calendar: CalendarView | None = None


def prepare(candidate: Candidate | Mapping[str, object] | Prepared) -> Prepared:
    """`candidate` (a contract or its camelCase dict) prepared for `resolve_directed`."""
    if type(candidate) is dict:
        return _from_wire(candidate)
    if isinstance(candidate, Prepared):
        return candidate
    if isinstance(candidate, Candidate):
        return _from_candidate(candidate)
    return _from_wire(_plain(candidate))


def _audience(kind: str | None, audience: object) -> frozenset[str]:
    # Normalised as `facts_for` always has: each entry as text, trimmed and case-folded.
    if kind not in DIRECT_KINDS or not isinstance(audience, Iterable):
        return _NONE
    return frozenset(str(a).strip().casefold() for a in audience)


def _from_candidate(c: Candidate) -> Prepared:
    ids, msg, family = c.ids, c.msg, c.family
    kind = msg.channel_kind if msg is not None else None
    # Positional, in field order: built once per event, and keywords cost twice as much.
    return Prepared(
        family,
        _norm(ids.channel_id),  # channel
        _norm(msg.author_id) if msg is not None else "",  # author
        _norm(msg.parent_author_id) if msg is not None else "",  # parent
        _fset(msg.mentions) if msg is not None else _NONE,  # mentions
        _norm(ids.thread_root_id),  # root
        kind,
        msg.body if msg is not None else "",  # body
        _audience(kind, msg.audience_ids) if msg is not None else _NONE,  # audience
        ids.channel_id or None,  # channel_id
        ids.thread_root_id or None,  # thread_root_id
        ids.message_id or None,  # message_id
        ids.issue_id,  # issue_id
        _board_part(c.board) if family == "board" else None,
        _call_part(c.call) if family == "calling" else None,
        _calendar_part(c.calendar) if family == "calendar" else None,
    )


def _board_part(b: BoardPart | None) -> BoardView:
    if b is None:
        return BoardView()
    return _board_view(
        b.action, b.actor_id, b.assignee_ids, b.reviewer_ids, b.owner_ids, b.mentions
    )


def _call_part(call: CallPart | None) -> CallView:
    if call is None:
        return CallView()
    return CallView(_norm(call.caller_id), _fset(call.callee_ids))


def _calendar_part(cal: CalendarPart | None) -> CalendarView:
    if cal is None:
        return CalendarView()
    return _calendar_view(cal.organizer_id, cal.action, cal.attendee_ids)


def _from_wire(c: JSON) -> Prepared:
    ids, msg = _map(c.get("ids")), _map(c.get("msg"))
    family = c.get("family")
    raw_kind = msg.get("channelKind")
    kind = raw_kind if type(raw_kind) is str else None
    # Positional, in field order (see `_from_candidate`).
    return Prepared(
        family,
        _norm(ids.get("channelId")),  # channel
        _norm(msg.get("authorId")),  # author
        _norm(msg.get("parentAuthorId")),  # parent
        _fset(msg.get("mentions")),  # mentions
        _norm(ids.get("threadRootId")),  # root
        kind,
        str(msg.get("body") or ""),  # body
        _audience(kind, msg.get("audienceIds") or ()),  # audience
        id_or_none(ids.get("channelId")),  # channel_id
        id_or_none(ids.get("threadRootId")),  # thread_root_id
        id_or_none(ids.get("messageId")),  # message_id
        id_as_is(ids.get("issueId")),  # issue_id
        _wire_board(_map(c.get("board"))) if family == "board" else None,
        _wire_call(_map(c.get("call"))) if family == "calling" else None,
        _wire_calendar(_map(c.get("calendar"))) if family == "calendar" else None,
    )


def _wire_board(b: JSON) -> BoardView:
    return _board_view(
        b.get("action"),
        b.get("actorId"),
        b.get("assigneeIds"),
        b.get("reviewerIds"),
        b.get("ownerIds"),
        b.get("mentions"),
    )


def _wire_call(call: JSON) -> CallView:
    return CallView(_norm(call.get("callerId")), _fset(call.get("calleeIds")))


def _wire_calendar(cal: JSON) -> CalendarView:
    return _calendar_view(cal.get("organizerId"), cal.get("action"), cal.get("attendeeIds"))


def _board_view(
    action: object,
    actor: object,
    assignees: object,
    reviewers: object,
    owners: object,
    mentions: object,
) -> BoardView:
    return BoardView(
        action=_norm(action),
        actor=_norm(actor),
        assignees=_fset(assignees),
        reviewers=_fset(reviewers),
        owners=_fset(owners),
        mentions=_fset(mentions),
    )


def _calendar_view(organizer: object, action: object, attendees: object) -> CalendarView:
    return CalendarView(_norm(organizer), _norm(action), str(action), _fset(attendees))
