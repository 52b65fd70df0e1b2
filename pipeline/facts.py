"""A seat's facts for one inbound event, and what that event teaches about the seat. Pure.

The directedness stage reads, once per event and for every seat at once, what the stores know
about the places the event touches (its channel, its thread, its board item): `Known`. From
that and the org file's entry for the channel, `facts_for` gives each seat the `SeatFacts`
that bear on this event; a fact nobody knows stays `None`, which never blocks (docs/architecture.md,
"Directedness"). `learn` says what the event and its verdict add to the seat's facts, so the next
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

from contracts.inbound import Candidate, Directedness
from contracts.org import Channel, ChannelKind
from pipeline.prepared import DIRECT_KINDS, Prepared, id_as_is, id_or_none, prepare

JSON = Mapping[str, object]
Event = Candidate | Mapping[str, object] | Prepared  # a candidate, its camelCase dict, or prepared

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
    owns_item: bool = False  # the seat follows the event's board item from now on

    def __bool__(self) -> bool:
        return bool(self.spoke_in or self.named_in or self.joined or self.owns_item)


def places_of(candidate: Event) -> Places:
    """The channel, thread and board item of a candidate: the contract (read by attribute),
    its camelCase dict, or the candidate `prepare`d."""
    if isinstance(candidate, Candidate):
        ids = candidate.ids
        board = candidate.family == "board"
        return Places(
            ids.channel_id or None, ids.thread_root_id or None, ids.issue_id if board else None
        )
    if isinstance(candidate, Prepared):
        board = candidate.family == "board"
        return Places(
            candidate.channel_id, candidate.thread_root_id, candidate.issue_id if board else None
        )
    # A dict is read directly: the stage calls this before `prepare`, once per event.
    raw = candidate.get("ids")
    wire_ids = raw if isinstance(raw, Mapping) else {}
    board = candidate.get("family") == "board"
    return Places(
        channel_id=id_or_none(wire_ids.get("channelId")),
        thread_root_id=id_or_none(wire_ids.get("threadRootId")),
        item_id=id_as_is(wire_ids.get("issueId")) if board else None,
    )


def can_read(channel: Channel | None, seat_id: str) -> bool | None:
    """Whether the org file lets a seat read a channel it lists (`channel`): a public one
    anybody, a private one or a DM its members. None for a channel it does not list: unknown,
    which never blocks."""
    if channel is None:
        return None
    return seat_id in channel.member_ids or channel.kind not in PRIVATE_KINDS


def reads_membership(candidate: Event, channel: Channel | None) -> bool:
    """Whether learned channel membership can bear on this event. It decides one thing the
    rules read, that a direct conversation is the seat's own, and only for a conversation the
    org file does not list (`channel` is its entry, or None)."""
    if channel is not None:
        return False
    if isinstance(candidate, Candidate):
        msg = candidate.msg
        kind = msg.channel_kind if msg is not None else None
        return candidate.family == "messaging" and kind in DIRECT_KINDS
    if isinstance(candidate, Prepared):
        return candidate.family == "messaging" and candidate.kind in DIRECT_KINDS
    wire_msg = candidate.get("msg")
    wire_kind = wire_msg.get("channelKind") if isinstance(wire_msg, Mapping) else None
    return candidate.get("family") == "messaging" and wire_kind in DIRECT_KINDS


def facts_for(
    candidate: Event,
    seat_id: str,
    aliases: frozenset[str],
    known: Known,
    *,
    places: Places | None = None,
) -> dict[str, list[str]]:
    """The facts (camelCase, as `SeatFacts`) that bear on this event for one seat.

    `aliases` is the seat's normalised alias set (`directedness.aliases_of`); `places` is
    `places_of(candidate)` when the caller already holds it (one event, every seat), and
    `candidate` may be `prepare`d once for every seat."""
    p = prepare(candidate)
    place = places if places is not None else places_of(p)
    channel_id = place.channel_id
    facts: dict[str, list[str]] = {}
    listed = known.channel
    if channel_id is not None and listed is not None:
        member = seat_id in listed.member_ids
        facts["visibleChannelIds"] = [channel_id] if can_read(listed, seat_id) else []
        facts["memberChannelIds"] = [channel_id] if member else []
    elif channel_id is not None:
        member = seat_id in known.channel_seats
        if not member and p.kind in DIRECT_KINDS:
            member = bool(p.audience & aliases)
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
_TEACHING = frozenset(
    {"own_echo", "reply_to_me", "mention", "named", "dm", "assigned", "review_requested"}
)
# A board item a seat acted on, was assigned, was asked to review or was @mentioned in is one
# it follows from then on (as a Slack thread it spoke or was named in): its later comments,
# review comments and reviews reach it as `thread_reply`, until the fact fades (FACT_TTL_MS
# after the seat's last such involvement).
_FOLLOWING = frozenset({"own_echo", "assigned", "review_requested", "mention"})


def learn(candidate: Event, verdict: Directedness, *, channel_listed: bool) -> Learned:
    """What this event and the seat's verdict on it add to the seat's facts."""
    if verdict.reason not in _TEACHING:
        return _NOTHING
    p = prepare(candidate)
    root = p.thread_root_id or p.message_id
    if p.family == "messaging":
        if verdict.reason == "own_echo":
            # The seat's own message: its thread (or the thread its message may start).
            return Learned(spoke_in=root)
        if verdict.reason == "reply_to_me":
            return Learned(spoke_in=p.thread_root_id)
        if verdict.directed and verdict.reason in ("mention", "named"):
            return Learned(named_in=root)
        if verdict.directed and verdict.reason == "dm" and not channel_listed:
            return Learned(joined=True)
        return _NOTHING
    following = verdict.directed or verdict.reason == "own_echo"
    if p.family == "board" and verdict.reason in _FOLLOWING and following:
        return Learned(owns_item=True)
    return _NOTHING


def learn_from_send(thread_root_id: str | None, message_id: str | None) -> Learned:
    """What a seat's own sent message teaches: it belongs to the channel and has spoken in
    the thread (its message starts one when it was not a reply)."""
    return Learned(spoke_in=thread_root_id or message_id, joined=True)
