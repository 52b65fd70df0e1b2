"""Directedness (DESIGN.md section 5): is this inbound event spoken to this seat, or ambient?

Pure: a candidate, a seat and the seat's facts in; a `Directedness` with a reason code out.
First matching rule wins, per family. Identity is ALWAYS the seat's whole alias set (member id
plus every alias, trimmed, case-insensitive): a structured mention keyed by a provider id must
reach a seat configured by its slug (seed 003's alias fix). A directed answer on a surface the
seat has switched off becomes `surface_disabled`, never a silent yes.

Accepts the contracts or their camelCase dicts. A `Candidate` is read by attribute, never
dumped: `prepare` normalises what the rules read once per event, from either shape, and the
rules read only that.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from pydantic import BaseModel

from contracts.inbound import (
    BoardPart,
    CalendarPart,
    CallPart,
    Candidate,
    Directedness,
    SeatFacts,
)
from contracts.org import Seat

JSON = Mapping[str, object]
Gate = Callable[[str, Directedness], Directedness]

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


def _seat(seat: Seat | Mapping[str, object]) -> JSON:
    """What the rules read of a seat, camelCase; a `Seat` is read by attribute, not dumped."""
    if type(seat) is dict:
        return seat
    if isinstance(seat, Seat):
        return {
            "memberId": seat.member_id,
            "aliases": seat.aliases,
            "names": seat.names,
            "surfaces": seat.surfaces,
        }
    return _plain(seat)


def _facts(facts: SeatFacts | Mapping[str, object] | None) -> JSON:
    """The seat's facts, camelCase; `SeatFacts` read by attribute, not dumped."""
    if type(facts) is dict:
        return facts
    if isinstance(facts, SeatFacts):
        return {
            "visibleChannelIds": facts.visible_channel_ids,
            "memberChannelIds": facts.member_channel_ids,
            "spokenThreadIds": facts.spoken_thread_ids,
            "namedThreadIds": facts.named_thread_ids,
            "ownedItemIds": facts.owned_item_ids,
            "visibleRepoIds": facts.visible_repo_ids,
        }
    return _plain(facts)


def aliases_of(seat: Seat | Mapping[str, object]) -> frozenset[str]:
    """Every identity a seat answers to: its member id and all of its aliases, normalised."""
    s = _seat(seat)
    aliases = s.get("aliases") or ()
    return _fset([s.get("memberId"), *(aliases if isinstance(aliases, Iterable) else ())])


@lru_cache(maxsize=1024)
def names_pattern(names: tuple[str, ...]) -> re.Pattern[str] | None:
    # Memoised: every event is resolved for every seat, and a seat's names seldom change.
    cleaned = sorted({n.strip() for n in names if n and n.strip()}, key=len, reverse=True)
    if not cleaned:
        return None
    alternatives = "|".join(re.escape(n) for n in cleaned)
    # A whole name, optionally @-prefixed, not part of a longer word, handle, address or path.
    return re.compile(rf"(?<![\w@.-])@?(?:{alternatives})(?![\w@-]|\.\w)", re.IGNORECASE)


@lru_cache(maxsize=512)
def yes(surface: str, reason: str, why: str) -> Directedness:
    # Memoised: verdicts are frozen values, and an event asks the same few of every seat.
    return Directedness(directed=True, surface=surface, reason=reason, why=why)


@lru_cache(maxsize=512)
def no(reason: str, why: str) -> Directedness:
    return Directedness(directed=False, surface=None, reason=reason, why=why)


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


def resolve_directed(
    candidate: Candidate | Mapping[str, object] | Prepared,
    seat: Seat | Mapping[str, object],
    facts: SeatFacts | Mapping[str, object] | None = None,
    *,
    aliases: frozenset[str] | None = None,
) -> Directedness:
    """Decide whether `candidate` is addressed to `seat`, given what is known about the seat.

    `aliases` is `aliases_of(seat)` when the caller holds it prepared (the workers index it once
    per org load); without it, it is worked out here. `candidate` may be `prepare`d once for
    many seats."""
    p = prepare(candidate)
    s = _seat(seat)
    f = _facts(facts)
    me = aliases_of(s) if aliases is None else aliases
    surfaces = _map(s.get("surfaces"))

    def on(surface: str, verdict: Directedness) -> Directedness:
        if verdict.directed and surfaces.get(surface) is False:
            return no(
                "surface_disabled",
                f"would be `{surface}`, but this seat has switched "
                f"that surface off ({verdict.reason})",
            )
        return verdict

    family = p.family
    if family == "messaging":
        return _messaging(p, s, f, me, on)
    if family == "board":
        return _board(p, p.board or BoardView(), f, me, on)
    if family == "calling":
        return _calling(p.call or CallView(), me, on)
    if family == "calendar":
        return _calendar(p.calendar or CalendarView(), me, on)
    return no("unsupported_family", f"no rules for family {family!r}")


def _names(s: JSON) -> tuple[str, ...]:
    names = s.get("names") or ()
    if type(names) is tuple:
        return names  # the workers' seats hold them as a tuple: the memo key as it is
    return tuple(str(n) for n in names) if isinstance(names, Iterable) else ()


def _messaging(p: Prepared, s: JSON, f: JSON, me: frozenset[str], on: Gate) -> Directedness:
    channel = p.channel
    if p.author in me:
        return no("own_echo", "this seat wrote it; answering itself would loop")
    visible = _known(f.get("visibleChannelIds"))
    if visible is not None and channel not in visible:
        return NOT_VISIBLE
    members = _known(f.get("memberChannelIds"))
    if p.kind in DIRECT_KINDS and members is not None and channel in members:
        return on("dm", yes("dm", "dm", "a direct conversation this seat is part of"))
    if p.parent in me:
        return on(
            "thread_reply",
            yes("thread_reply", "reply_to_me", "a reply to a message this seat wrote"),
        )
    mentions = p.mentions
    if mentions & me:
        return on("mention", yes("mention", "mention", "a structured mention of this seat"))
    pattern = names_pattern(_names(s))
    if not mentions and pattern is not None and pattern.search(p.body):
        return on(
            "mention",
            yes("mention", "named", "the seat is named in the text and nobody is mentioned"),
        )
    root = p.root
    if root and root in _set(f.get("spokenThreadIds")) | _set(f.get("namedThreadIds")):
        return on(
            "thread_reply",
            yes(
                "thread_reply",
                "thread_participant",
                "a thread this seat has spoken or been named in",
            ),
        )
    return ambient(p)


NOT_VISIBLE = no("not_visible", "the seat may not read this channel, so it must not act on it")


def ambient(p: Prepared) -> Directedness:
    """The messaging table's last row: a message that addresses the seat in no way."""
    if p.mentions:
        return no("ambient", "the message mentions others, not this seat")
    return no("ambient", "nothing in it addresses this seat")


def _board(p: Prepared, b: BoardView, f: JSON, me: frozenset[str], on: Gate) -> Directedness:
    if b.actor in me:
        return no("own_echo", "this seat made the change")
    repos = _known(f.get("visibleRepoIds"))
    if repos is not None and p.channel not in repos:
        return no("not_visible", "the seat may not read this repository or board")
    if b.action == "assigned" and b.assignees & me:
        return on("assigned", yes("assigned", "assigned", "the item was assigned to this seat"))
    if b.action == "review_requested" and b.reviewers & me:
        return on(
            "review_request",
            yes("review_request", "review_requested", "this seat's review was requested"),
        )
    if b.mentions & me:
        return on("mention", yes("mention", "mention", "a structured @mention of this seat"))
    item = _norm(p.issue_id)
    mine = (item and item in _set(f.get("ownedItemIds"))) or ((b.owners | b.assignees) & me)
    if b.action == "commented" and mine:
        return on(
            "thread_reply",
            yes(
                "thread_reply",
                "item_activity",
                "a comment on an item this seat owns, wrote or is assigned",
            ),
        )
    return no(
        "ambient", f"board activity ({b.action or 'unknown'}) that does not involve this seat"
    )


def _calling(call: CallView, me: frozenset[str], on: Gate) -> Directedness:
    if call.caller in me:
        return no("own_echo", "this seat placed the call")
    if call.callees & me:
        return on("call", yes("call", "callee", "this seat is being called"))
    return no("ambient", "a call to others")


def _calendar(cal: CalendarView, me: frozenset[str], on: Gate) -> Directedness:
    if cal.organizer in me:
        return no("own_echo", "this seat changed its own event")
    if cal.action in ("invite", "update", "cancel") and cal.attendees & me:
        return on(
            "invite",
            yes("invite", "attendee", f"this seat is an attendee of the {cal.action_text}"),
        )
    return no("ambient", "calendar activity that does not involve this seat")
