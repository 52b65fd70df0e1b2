"""Directedness (DESIGN.md section 5): is this inbound event spoken to this seat, or ambient?

Pure: a candidate, a seat and the seat's facts in; a `Directedness` with a reason code out.
First matching rule wins, per family. Identity is ALWAYS the seat's whole alias set (member id
plus every alias, trimmed, case-insensitive): a structured mention keyed by a provider id must
reach a seat configured by its slug (seed 003's alias fix). A directed answer on a surface the
seat has switched off becomes `surface_disabled`, never a silent yes.

Accepts the contracts or their camelCase dicts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from contracts.inbound import Candidate, Directedness, SeatFacts
from contracts.org import Seat

JSON = Mapping[str, Any]
Gate = Callable[[str, Directedness], Directedness]


def _plain(value: Any) -> JSON:
    """A read-only camelCase view: a dict as it is (never copied, never written to), a
    contract dumped, any other mapping copied, anything else empty."""
    if type(value) is dict:
        return value
    if isinstance(value, BaseModel):
        dumped: dict[str, Any] = value.model_dump(by_alias=True, mode="json")
        return dumped
    return dict(value) if isinstance(value, Mapping) else {}


def _norm(value: Any) -> str:
    return str(value).strip().casefold() if value is not None else ""


def _set(values: Any) -> set[str]:
    if not values or not isinstance(values, list | tuple | set | frozenset):
        return set()
    normed = {_norm(v) for v in values}
    normed.discard("")
    return normed


def _known(values: Any) -> set[str] | None:
    """A fact list, or None when the fact is not known (which never blocks)."""
    return None if values is None else _set(values)


def aliases_of(seat: Any) -> frozenset[str]:
    """Every identity a seat answers to: its member id and all of its aliases, normalised."""
    s = _plain(seat)
    return frozenset(_set([s.get("memberId"), *(s.get("aliases") or [])]))


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
class Prepared:
    """A candidate with what every seat's verdict reads from it normalised once (the
    directedness stage resolves one event for every seat). Build it with `prepare`."""

    c: JSON
    channel: str
    author: str
    parent: str
    mentions: frozenset[str]
    root: str
    kind: Any
    body: str


def prepare(candidate: Candidate | Mapping[str, Any] | Prepared) -> Prepared:
    """`candidate` (a contract or its camelCase dict) prepared for `resolve_directed`."""
    if isinstance(candidate, Prepared):
        return candidate
    c = _plain(candidate)
    ids = c.get("ids") or {}
    msg = c.get("msg") or {}
    return Prepared(
        c=c,
        channel=_norm(ids.get("channelId")),
        author=_norm(msg.get("authorId")),
        parent=_norm(msg.get("parentAuthorId")),
        mentions=frozenset(_set(msg.get("mentions"))),
        root=_norm(ids.get("threadRootId")),
        kind=msg.get("channelKind"),
        body=str(msg.get("body") or ""),
    )


def resolve_directed(
    candidate: Candidate | Mapping[str, Any] | Prepared,
    seat: Seat | Mapping[str, Any],
    facts: SeatFacts | Mapping[str, Any] | None = None,
    *,
    aliases: frozenset[str] | None = None,
) -> Directedness:
    """Decide whether `candidate` is addressed to `seat`, given what is known about the seat.

    `aliases` is `aliases_of(seat)` when the caller holds it prepared (the workers index it once
    per org load); without it, it is worked out here. `candidate` may be `prepare`d once for
    many seats."""
    p = prepare(candidate)
    c = p.c
    s = _plain(seat)
    f = _plain(facts)
    me = aliases_of(s) if aliases is None else aliases
    surfaces = s.get("surfaces") or {}

    def on(surface: str, verdict: Directedness) -> Directedness:
        if verdict.directed and surfaces.get(surface) is False:
            return no(
                "surface_disabled",
                f"would be `{surface}`, but this seat has switched "
                f"that surface off ({verdict.reason})",
            )
        return verdict

    family = c.get("family")
    if family == "messaging":
        return _messaging(p, s, f, me, on)
    if family == "board":
        return _board(c, f, me, on)
    if family == "calling":
        return _calling(c, me, on)
    if family == "calendar":
        return _calendar(c, me, on)
    return no("unsupported_family", f"no rules for family {family!r}")


def _messaging(p: Prepared, s: JSON, f: JSON, me: frozenset[str], on: Gate) -> Directedness:
    channel = p.channel
    if p.author in me:
        return no("own_echo", "this seat wrote it; answering itself would loop")
    visible = _known(f.get("visibleChannelIds"))
    if visible is not None and channel not in visible:
        return NOT_VISIBLE
    members = _known(f.get("memberChannelIds"))
    if p.kind in ("DM", "GROUP_DM") and members is not None and channel in members:
        return on("dm", yes("dm", "dm", "a direct conversation this seat is part of"))
    if p.parent in me:
        return on(
            "thread_reply",
            yes("thread_reply", "reply_to_me", "a reply to a message this seat wrote"),
        )
    mentions = p.mentions
    if mentions & me:
        return on("mention", yes("mention", "mention", "a structured mention of this seat"))
    names = s.get("names") or ()
    pattern = names_pattern(names if type(names) is tuple else tuple(str(n) for n in names))
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


def _board(c: JSON, f: JSON, me: frozenset[str], on: Gate) -> Directedness:
    ids = c.get("ids") or {}
    board = c.get("board") or {}
    action = _norm(board.get("action"))
    if _norm(board.get("actorId")) in me:
        return no("own_echo", "this seat made the change")
    repos = _known(f.get("visibleRepoIds"))
    if repos is not None and _norm(ids.get("channelId")) not in repos:
        return no("not_visible", "the seat may not read this repository or board")
    assignees = _set(board.get("assigneeIds"))
    if action == "assigned" and assignees & me:
        return on("assigned", yes("assigned", "assigned", "the item was assigned to this seat"))
    if action == "review_requested" and _set(board.get("reviewerIds")) & me:
        return on(
            "review_request",
            yes("review_request", "review_requested", "this seat's review was requested"),
        )
    if _set(board.get("mentions")) & me:
        return on("mention", yes("mention", "mention", "a structured @mention of this seat"))
    item = _norm(ids.get("issueId"))
    mine = (item and item in _set(f.get("ownedItemIds"))) or (
        (_set(board.get("ownerIds")) | assignees) & me
    )
    if action == "commented" and mine:
        return on(
            "thread_reply",
            yes(
                "thread_reply",
                "item_activity",
                "a comment on an item this seat owns, wrote or is assigned",
            ),
        )
    return no("ambient", f"board activity ({action or 'unknown'}) that does not involve this seat")


def _calling(c: JSON, me: frozenset[str], on: Gate) -> Directedness:
    call = c.get("call") or {}
    if _norm(call.get("callerId")) in me:
        return no("own_echo", "this seat placed the call")
    if _set(call.get("calleeIds")) & me:
        return on("call", yes("call", "callee", "this seat is being called"))
    return no("ambient", "a call to others")


def _calendar(c: JSON, me: frozenset[str], on: Gate) -> Directedness:
    cal = c.get("calendar") or {}
    if _norm(cal.get("organizerId")) in me:
        return no("own_echo", "this seat changed its own event")
    if _norm(cal.get("action")) in ("invite", "update", "cancel") and (
        _set(cal.get("attendeeIds")) & me
    ):
        return on(
            "invite",
            yes("invite", "attendee", f"this seat is an attendee of the {cal.get('action')}"),
        )
    return no("ambient", "calendar activity that does not involve this seat")
