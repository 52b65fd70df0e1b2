"""Directedness: is this inbound event spoken to this seat, or ambient? (docs/architecture.md)

Pure: a candidate, a seat and the seat's facts in; a `Directedness` with a reason code out.
First matching rule wins, per family. Identity is ALWAYS the seat's whole alias set (member id
plus every alias, trimmed, case-insensitive): a structured mention keyed by a provider id must
reach a seat configured by its slug (the alias-set rule). A directed answer on a surface the
seat has switched off becomes `surface_disabled`, never a silent yes.

Accepts the contracts or their camelCase dicts. A `Candidate` is read by attribute, never
dumped: `prepare` (pipeline/prepared.py) normalises what the rules read once per event, from
either shape, and the rules read only that.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache

from contracts.inbound import (
    Candidate,
    Directedness,
    SeatFacts,
)
from contracts.org import Seat
from pipeline.prepared import (
    DIRECT_KINDS,
    JSON,
    BoardView,
    CalendarView,
    CallView,
    Prepared,
    _fset,
    _known,
    _map,
    _norm,
    _plain,
    _set,
    prepare,
)

__all__ = [
    "NOT_VISIBLE",
    "Prepared",
    "aliases_of",
    "ambient",
    "names_pattern",
    "no",
    "own_ids_of",
    "prepare",
    "resolve_directed",
    "unconcerned_of",
    "yes",
]

Gate = Callable[[str, Directedness], Directedness]


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
            "ownIds": seat.own_identities,
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


def own_ids_of(seat: Seat | Mapping[str, object]) -> frozenset[str]:
    """The identities a seat's app posts as besides its aliases (`ownIds`: a Slack app's
    `bot_id`, or a bot user the whole org's seats share). They only ever mark an echo:
    nobody mentions a bot_id, and a shared bot's mention addresses no one seat."""
    own = _seat(seat).get("ownIds") or ()
    return _fset(own) if isinstance(own, Iterable) and not isinstance(own, str) else _NO_IDS


_NO_IDS: frozenset[str] = frozenset()


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


def resolve_directed(
    candidate: Candidate | Mapping[str, object] | Prepared,
    seat: Seat | Mapping[str, object],
    facts: SeatFacts | Mapping[str, object] | None = None,
    *,
    aliases: frozenset[str] | None = None,
    own: frozenset[str] | None = None,
) -> Directedness:
    """Decide whether `candidate` is addressed to `seat`, given what is known about the seat.

    `aliases` is `aliases_of(seat)` and `own` is `own_ids_of(seat)` when the caller holds them
    prepared (the workers index them once per org load); without them, they are worked out
    here. `candidate` may be `prepare`d once for many seats. Whatever identity of the seat
    authored the event, it is `own_echo` before any other rule is asked."""
    p = prepare(candidate)
    s = _seat(seat)
    f = _facts(facts)
    me = aliases_of(s) if aliases is None else aliases
    mine = own_ids_of(s) if own is None else own
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
    author = _author(p)
    if author and (author in me or author in mine):
        return _OWN_ECHO.get(str(family), _OWN_ECHO["messaging"])
    if family == "messaging":
        return _messaging(p, s, f, me, on)
    if family == "board":
        return _board(p, p.board or BoardView(), f, me, on)
    if family == "calling":
        return _calling(p.call or CallView(), me, on)
    if family == "calendar":
        return _calendar(p.calendar or CalendarView(), me, on)
    return no("unsupported_family", f"no rules for family {family!r}")


_OWN_ECHO = {
    "messaging": no("own_echo", "this seat wrote it; answering itself would loop"),
    "board": no("own_echo", "this seat made the change"),
    "calling": no("own_echo", "this seat placed the call"),
    "calendar": no("own_echo", "this seat changed its own event"),
}


def _author(p: Prepared) -> str:
    """Who made the event, in its family's terms (normalised; '' when nobody is named)."""
    if p.family == "messaging":
        return p.author
    if p.family == "board":
        return p.board.actor if p.board is not None else ""
    if p.family == "calling":
        return p.call.caller if p.call is not None else ""
    if p.family == "calendar":
        return p.calendar.organizer if p.calendar is not None else ""
    return ""


def _names(s: JSON) -> tuple[str, ...]:
    names = s.get("names") or ()
    if type(names) is tuple:
        return names  # the workers' seats hold them as a tuple: the memo key as it is
    return tuple(str(n) for n in names) if isinstance(names, Iterable) else ()


def _messaging(p: Prepared, s: JSON, f: JSON, me: frozenset[str], on: Gate) -> Directedness:
    channel = p.channel
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
    if b.action == "review_request_removed" and b.reviewers & me:
        return on(
            "review_request",
            yes(
                "review_request",
                "review_request_removed",
                "the earlier request for this seat's review was withdrawn",
            ),
        )
    if b.mentions & me:
        return on("mention", yes("mention", "mention", "a structured @mention of this seat"))
    involved = bool((b.owners | b.assignees) & me)
    if b.action == "reviewed" and involved:
        return on(
            "review",
            yes(
                "review",
                "review_submitted",
                "a review of a pull request this seat opened or is assigned",
            ),
        )
    item = _norm(p.issue_id)
    follows = involved or bool(item and item in _set(f.get("ownedItemIds")))
    if b.action in FOLLOWED_ACTIONS and follows:
        return on(
            "thread_reply",
            yes(
                "thread_reply",
                "item_activity",
                "activity on an item this seat opened, is assigned, was asked to review, "
                "was mentioned in or commented on",
            ),
        )
    return _board_ambient(b.action)


def _board_ambient(action: str) -> Directedness:
    return no("ambient", f"board activity ({action or 'unknown'}) that does not involve this seat")


# What reaches a seat that follows an item: its later comments, review comments and reviews.
FOLLOWED_ACTIONS = frozenset({"commented", "reviewed"})


CALL_TO_OTHERS = no("ambient", "a call to others")
CALENDAR_OF_OTHERS = no("ambient", "calendar activity that does not involve this seat")


def unconcerned_of(p: Prepared) -> Directedness:
    """The last row of the board, call and calendar tables: activity that involves the seat
    in no way (what a seat it does not concern answers; pipeline/fanout.py)."""
    if p.family == "board":
        return _board_ambient(p.board.action if p.board is not None else "")
    return CALL_TO_OTHERS if p.family == "calling" else CALENDAR_OF_OTHERS


def _calling(call: CallView, me: frozenset[str], on: Gate) -> Directedness:
    if call.callees & me:
        return on("call", yes("call", "callee", "this seat is being called"))
    return CALL_TO_OTHERS


def _calendar(cal: CalendarView, me: frozenset[str], on: Gate) -> Directedness:
    if cal.action in ("invite", "update", "cancel") and cal.attendees & me:
        return on(
            "invite",
            yes("invite", "attendee", f"this seat is an attendee of the {cal.action_text}"),
        )
    return CALENDAR_OF_OTHERS
