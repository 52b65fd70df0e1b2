"""3. Where: the cheapest surface that reaches everyone who must act. Pure.

Cost order: reply in place (nothing new), a DM (one person's attention), the smallest existing
room that holds them all, and last a new room (a permanent object for everyone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from contracts.engagement import Surface, Target
from contracts.org import Channel
from contracts.work import WorkReport
from pipeline.engagement.values import plain, text
from pipeline.engagement.work import Work

SURFACES = ("reply_in_place", "dm", "existing_channel", "new_room")

_PRIVATE_KINDS = frozenset({"PRIVATE", "GROUP_DM", "DM"})


@dataclass(frozen=True, slots=True)
class _Room:
    id: str
    kind: str
    name: str
    members: frozenset[str]


def _room_member(x: object) -> str:
    if isinstance(x, str):
        return x
    if isinstance(x, Mapping):
        return str(x.get("memberId") or x.get("id"))
    return str(x)


def _room(raw: object) -> _Room | None:
    if isinstance(raw, Channel):
        return _Room(raw.id, str(raw.kind).upper(), raw.name, frozenset(raw.member_ids))
    c = plain(raw)
    if not isinstance(c, Mapping):
        return None
    listed = c.get("memberIds") if c.get("memberIds") is not None else c.get("members")
    return _Room(
        id=text(c.get("id")) or text(c.get("channelId")),
        kind=(text(c.get("kind")) or text(c.get("channelKind"))).upper(),
        name=text(c.get("name")) or text(c.get("slug")),
        members=frozenset(
            _room_member(x) for x in (listed if isinstance(listed, list | tuple) else ())
        ),
    )


def _rooms(channels: object) -> list[_Room]:
    """The channels (`Channel` contracts or camelCase dicts) as rooms with member sets."""
    if isinstance(channels, Rooms):
        return list(channels.rooms)
    found = (_room(raw) for raw in (channels if isinstance(channels, list | tuple) else ()))
    return [r for r in found if r is not None]


@dataclass(frozen=True)
class Rooms:
    """The org's channels with their member sets built once (see `Directory`)."""

    rooms: tuple[_Room, ...]

    @classmethod
    def of(cls, channels: object) -> Rooms:
        return channels if isinstance(channels, Rooms) else cls(tuple(_rooms(channels)))


EMPTY_ROOMS = Rooms(())


class PlacementSeed(TypedDict):
    """`choose_surface`'s answer as a camelCase dict."""

    surface: str
    channelId: str | None
    threadRootId: str | None
    roomName: str | None
    memberIds: list[str]
    why: str
    durableChannel: NotRequired[bool]


@dataclass(frozen=True, slots=True)
class Placement:
    surface: Surface
    why: str
    member_ids: tuple[str, ...]
    channel_id: str | None = None
    thread_root_id: str | None = None
    room_name: str | None = None
    durable_channel: bool | None = None  # said only of a new room

    def seed(self) -> PlacementSeed:
        out = PlacementSeed(
            surface=self.surface,
            channelId=self.channel_id,
            threadRootId=self.thread_root_id,
            roomName=self.room_name,
            memberIds=list(self.member_ids),
            why=self.why,
        )
        if self.durable_channel is not None:
            out["durableChannel"] = self.durable_channel
        return out


def place(w: Work, member_ids: Sequence[str], rooms: Rooms, me: str) -> Placement:
    """The cheapest surface that holds `member_ids` (the targets, in order)."""
    ids = tuple(member_ids)
    in_place = _in_place(w, ids, rooms)
    if in_place is not None:
        return in_place
    if len(ids) == 1:
        return Placement(
            "dm",
            "one person must act and nobody else needs to watch; a 1:1 costs "
            "exactly one person's attention",
            ids,
        )
    fits = sorted(
        (
            r
            for r in rooms.rooms
            if r.id and r.members and r.members.issuperset(ids) and (not me or me in r.members)
        ),
        # The smallest room wins (fewest bystanders), and a tie prefers a private or group
        # room over a public one (the JavaScript original sorted by size only).
        key=lambda r: (len(r.members), r.kind not in _PRIVATE_KINDS),
    )
    if fits:
        room = fits[0]
        return Placement(
            "existing_channel",
            f"{room.name or room.id} already holds {_all_of(len(ids))} ({len(room.members)} "
            "members, the smallest room that does), so nothing new is created",
            ids,
            channel_id=room.id,
            room_name=room.name or None,
        )
    return Placement(
        "new_room",
        f"{len(ids)} people must act together and no room holds them all"
        + ("; the work is durable, so a named channel, not an ad-hoc group" if w.durable else ""),
        ids,
        room_name=w.title[:100] or "Needs a decision",
        durable_channel=w.durable,
    )


def _all_of(n: int) -> str:
    return "both of them" if n == 2 else f"all {n} of them"


def _in_place(w: Work, ids: tuple[str, ...], rooms: Rooms) -> Placement | None:
    """A reply where the work came from, when that room already holds everyone who must act."""
    origin = w.origin
    if not origin.channel_id:
        return None
    room = next((r for r in rooms.rooms if r.id == origin.channel_id), None)
    if room is not None and room.members and room.members.issuperset(ids):
        return Placement(
            "reply_in_place",
            f"everyone who must act is already in the room this came from "
            f"({room.name or room.id}); moving elsewhere would strip the context",
            ids,
            channel_id=origin.channel_id,
            thread_root_id=origin.thread_root_id,
        )
    # An unreadable roster counts as holding them only when the one target is the requester:
    # that is a reply by definition.
    unknown_roster = room is None or not room.members
    if unknown_roster and len(ids) == 1 and ids[0] == origin.requester_id:
        return Placement(
            "reply_in_place",
            "the only person who must act is the one who asked, in the thread they asked in",
            ids,
            channel_id=origin.channel_id,
            thread_root_id=origin.thread_root_id,
        )
    return None


def _target_id(t: Target | Mapping[str, object] | object) -> str:
    if isinstance(t, Target):
        return t.member_id
    m = plain(t)
    if not isinstance(m, Mapping):
        raise TypeError(f"a target is a Target or a mapping with memberId, not {m!r}")
    return str(m["memberId"])


def choose_surface(
    work: WorkReport | Mapping[str, object] | object = None,
    targets: Sequence[Target | Mapping[str, object]] = (),
    channels: object = (),
    me: str = "",
) -> PlacementSeed:
    """The cheapest surface that reaches everyone who must act.

    Cost order: reply in place (nothing new), a DM (one person's attention), the smallest
    existing room that holds them all, and last a new room (a permanent object for everyone).
    """
    ids = [_target_id(t) for t in targets]
    return place(Work.of(work), ids, Rooms.of(channels), me).seed()
