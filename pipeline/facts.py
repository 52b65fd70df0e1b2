"""A seat's facts for one inbound event, and what that event teaches about the seat. Pure.

The directedness stage reads, once per event and for every seat at once, what the stores know
about the places the event touches (its channel, its thread, its board item): `Known`. From
that and the org file's entry for the channel, `facts_for` gives each seat the `SeatFacts`
that bear on this event; a fact nobody knows stays `None`, which never blocks (DESIGN.md
section 5). `learn` says what the event and its verdict add to the seat's facts, so the next
reply in the thread finds the seat.

Where membership comes from:
- the org file, for a channel it lists, and only the org file: the channel is visible to a
  seat when it is public or the seat is a member, and the seat belongs to it when the file
  says so. Removing a seat from a private channel there takes effect at once, whatever the
  seat did in it before;
- for a channel the file does not list, what Seatwire learned: the channels a seat sent to,
  and direct conversations a provider delivered to the seat's own user (Slack's
  `authorizations`, `msg.audienceIds`);
- otherwise unknown: a channel neither knows is neither hidden from a seat nor counted as
  one it belongs to, so a DM there reaches a seat only by a mention, by name, or in a
  thread the seat is in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contracts.inbound import Directedness
from contracts.org import Channel, ChannelKind

JSON = Mapping[str, Any]

PRIVATE_KINDS = frozenset({ChannelKind.PRIVATE, ChannelKind.DM, ChannelKind.GROUP_DM})


@dataclass(frozen=True, slots=True)
class Places:
    """The places one event touches, whose stored facts the stage reads."""

    channel_id: str | None
    thread_root_id: str | None
    item_id: str | None


@dataclass(frozen=True, slots=True)
class Known:
    """What is known about an event's places, for every seat (sets of seat member ids)."""

    channel: Channel | None = None
    channel_seats: frozenset[str] = frozenset()
    spoke: frozenset[str] = frozenset()
    named: frozenset[str] = frozenset()
    item_seats: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Learned:
    """What one event teaches about one seat; all empty when it teaches nothing."""

    spoke_in: str | None = None  # a thread root the seat has now spoken in
    named_in: str | None = None  # a thread root the seat has now been named in
    joined: bool = False  # the seat belongs to the event's channel
    owns_item: bool = False  # the event's board item is now the seat's

    def __bool__(self) -> bool:
        return bool(self.spoke_in or self.named_in or self.joined or self.owns_item)


def places_of(candidate: JSON) -> Places:
    """The channel, thread and board item of a candidate (camelCase dict)."""
    ids = candidate.get("ids") or {}
    return Places(
        channel_id=ids.get("channelId") or None,
        thread_root_id=ids.get("threadRootId") or None,
        item_id=ids.get("issueId") if candidate.get("family") == "board" else None,
    )


def can_read(channel: Channel | None, seat_id: str) -> bool | None:
    """Whether the org file lets a seat read a channel it lists (`channel`): a public one
    anybody, a private one or a DM its members. None for a channel it does not list: unknown,
    which never blocks."""
    if channel is None:
        return None
    return seat_id in channel.member_ids or channel.kind not in PRIVATE_KINDS


def reads_membership(candidate: JSON, channel: Channel | None) -> bool:
    """Whether learned channel membership can bear on this event. It decides one thing the
    rules read, that a direct conversation is the seat's own, and only for a conversation the
    org file does not list (`channel` is its entry, or None)."""
    if channel is not None or candidate.get("family") != "messaging":
        return False
    msg = candidate.get("msg") or {}
    return msg.get("channelKind") in ("DM", "GROUP_DM")


def facts_for(
    candidate: JSON,
    seat_id: str,
    aliases: frozenset[str],
    known: Known,
    *,
    places: Places | None = None,
) -> JSON:
    """The facts (camelCase, as `SeatFacts`) that bear on this event for one seat.

    `aliases` is the seat's normalised alias set (`directedness.aliases_of`); `places` is
    `places_of(candidate)` when the caller already holds it (one event, every seat)."""
    place = places if places is not None else places_of(candidate)
    channel_id = place.channel_id
    facts: dict[str, Any] = {}
    listed = known.channel
    if channel_id is not None and listed is not None:
        member = seat_id in listed.member_ids
        facts["visibleChannelIds"] = [channel_id] if can_read(listed, seat_id) else []
        facts["memberChannelIds"] = [channel_id] if member else []
    elif channel_id is not None:
        member = seat_id in known.channel_seats
        msg = candidate.get("msg") or {}
        if not member and msg.get("channelKind") in ("DM", "GROUP_DM"):
            audience = {str(a).strip().casefold() for a in msg.get("audienceIds") or ()}
            member = bool(audience & aliases)
        if member:
            facts["memberChannelIds"] = [channel_id]
    if place.thread_root_id is not None:
        facts["spokenThreadIds"] = [place.thread_root_id] if seat_id in known.spoke else []
        facts["namedThreadIds"] = [place.thread_root_id] if seat_id in known.named else []
    if place.item_id is not None and seat_id in known.item_seats:
        facts["ownedItemIds"] = [place.item_id]
    return facts


_NOTHING = Learned()
# The only verdict reasons that teach anything; every other verdict (most of them) is answered
# before the candidate is read.
_TEACHING = frozenset({"own_echo", "reply_to_me", "mention", "named", "dm", "assigned"})


def learn(candidate: JSON, verdict: Directedness, *, channel_listed: bool) -> Learned:
    """What this event and the seat's verdict on it add to the seat's facts."""
    if verdict.reason not in _TEACHING:
        return _NOTHING
    family = candidate.get("family")
    ids = candidate.get("ids") or {}
    root = ids.get("threadRootId") or ids.get("messageId") or None
    if family == "messaging":
        if verdict.reason == "own_echo":
            # The seat's own message: its thread (or the thread its message may start).
            return Learned(spoke_in=root)
        if verdict.reason == "reply_to_me":
            return Learned(spoke_in=ids.get("threadRootId") or None)
        if verdict.directed and verdict.reason in ("mention", "named"):
            return Learned(named_in=root)
        if verdict.directed and verdict.reason == "dm" and not channel_listed:
            return Learned(joined=True)
        return _NOTHING
    if family == "board" and verdict.directed and verdict.reason == "assigned":
        return Learned(owns_item=True)
    return _NOTHING


def learn_from_send(thread_root_id: str | None, message_id: str | None) -> Learned:
    """What a seat's own sent message teaches: it belongs to the channel and has spoken in
    the thread (its message starts one when it was not a reply)."""
    return Learned(spoke_in=thread_root_id or message_id, joined=True)
