"""One inbound event resolved for the seats it concerns, at a cost that does not grow with
the seats it does not. Pure.

The directedness stage owes every seat a verdict on every event (docs/architecture.md), but an
event concerns only a few of them. `Roster` indexes the seats once per org load (aliases and
own ids to seats, member ids to seats, the first word of every name to the seats it names), so
`resolve_concerned` finds by lookup the seats an event names, mentions, replies to, is
addressed to (the members of a direct conversation, its delivery's audience), or whose thread
or board item it is in; and the callees of a call, the attendees of an invitation, the
assignees, reviewers and owners of a board item. Only those run `resolve_directed` with their
`facts_for`, as each would alone.

Every other seat's verdict is still an answer, and it is known without running its rules:
`unconcerned_verdict` (the message is not visible to it, or it is ambient, with the family's
reason). The stage stores only the concerned seats' verdicts; the trace derives the rest from
the event and the org version it was decided against (`org_snapshot`). `resolve_all` gives
every seat's verdict, exactly those of the per-seat loop (a property test holds the two
equal on random orgs and events).

A name is found by its first word: a seat's name pattern (pipeline/directedness.py) can only
match where the body has a word equal to the name's first run of word characters, ignoring
case. Lower-casing is exactly the pattern's case-insensitive comparison for ASCII and for
characters without case; a name or a body with other cased characters (`José`, `ſ`) falls
back to running the names pattern of every seat that has names (a regex search each, not the
rules).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from contracts.inbound import Candidate, Directedness
from contracts.org import Channel
from pipeline.cursors import digest
from pipeline.directedness import (
    NOT_VISIBLE,
    ambient,
    names_pattern,
    no,
    resolve_directed,
    unconcerned_of,
)
from pipeline.facts import Known, Learned, Places, can_read, facts_for, learn
from pipeline.prepared import DIRECT_KINDS, Prepared, prepare

JSON = Mapping[str, object]

_NOTHING = Learned()


@dataclass(frozen=True, slots=True)
class RosterSeat:
    """A seat as the directedness rules read it: its member id, its camelCase dict, its
    normalised alias set (`aliases_of`) and the other identities it posts as (`own_ids_of`)."""

    member_id: str
    wire: JSON
    aliases: frozenset[str]
    own: frozenset[str] = frozenset()  # `own_ids_of`: identities that only mark its echo


@dataclass(frozen=True, slots=True)
class Resolved:
    """One seat's verdict on an event and what it taught."""

    seat_id: str
    verdict: Directedness
    learned: Learned = field(default_factory=Learned)


@dataclass(frozen=True)
class Roster:
    """The seats of one org load, indexed to find the few an event can concern."""

    seats: tuple[RosterSeat, ...]
    by_alias: Mapping[str, tuple[int, ...]]  # normalised alias -> the seats answering to it
    by_member: Mapping[str, int]  # member id as stored in the thread facts -> its seat
    named: re.Pattern[str] | None  # matches wherever any one seat's names pattern would
    by_name_word: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    # The seats with a name that has cased non-ASCII characters or no word character: their
    # names pattern is run whenever `named` matches (see the module docstring).
    unindexed_names: tuple[int, ...] = ()
    with_names: tuple[int, ...] = ()  # every seat that has a name, in roster order

    @classmethod
    def of(cls, seats: Iterable[RosterSeat]) -> Roster:
        ordered = tuple(seats)
        by_alias: dict[str, list[int]] = {}
        by_word: dict[str, list[int]] = {}
        unindexed: list[int] = []
        with_names: list[int] = []
        names: list[str] = []
        for i, seat in enumerate(ordered):
            for alias in seat.aliases | seat.own:
                by_alias.setdefault(alias, []).append(i)
            mine = _names_of(seat)
            names += mine
            if any(n.strip() for n in mine):
                with_names.append(i)
            for name in {n.strip() for n in mine if n.strip()}:
                word = _first_word(name)
                if word is None:
                    unindexed.append(i)
                else:
                    by_word.setdefault(word, []).append(i)
        return cls(
            seats=ordered,
            by_alias={alias: tuple(ix) for alias, ix in by_alias.items()},
            by_member={seat.member_id: i for i, seat in enumerate(ordered)},
            # One alternation of every seat's names, built as each seat's pattern is: at any
            # place one seat's pattern matches, one of its alternatives matches too. So when
            # it finds nothing, no seat is named.
            named=names_pattern(tuple(names)),
            by_name_word={w: tuple(dict.fromkeys(ix)) for w, ix in by_word.items()},
            unindexed_names=tuple(dict.fromkeys(unindexed)),
            with_names=tuple(with_names),
        )

    def named_in(self, body: str) -> set[int]:
        """The seats whose own names pattern matches `body` (exactly as their rules read it),
        looked up by the body's words."""
        if self.named is None:
            return set()
        if _foldable(body):
            # Looked up word by word: the one pattern of every name costs what the org's
            # names do, at every place in the body.
            maybe: Iterable[int] = {
                i
                for word in set(_WORD.findall(body.lower()))
                for i in self.by_name_word.get(word, ())
            }
            maybe = {*maybe, *self.unindexed_names}
        elif self.named.search(body) is None:
            return set()
        else:
            maybe = self.with_names
        found = set()
        for i in maybe:
            pattern = names_pattern(_names_of(self.seats[i]))
            if pattern is not None and pattern.search(body):
                found.add(i)
        return found


_WORD = re.compile(r"\w+")


def _names_of(seat: RosterSeat) -> tuple[str, ...]:
    listed = seat.wire.get("names") or ()
    if type(listed) is tuple:
        return listed  # the workers hold them as a tuple: names_pattern's memo key as is
    return tuple(str(n) for n in listed) if isinstance(listed, Iterable) else ()


def _foldable(text: str) -> bool:
    """Whether lower-casing compares `text` as a case-insensitive regex does: every character
    is ASCII or has no case."""
    return text.isascii() or all(c.isascii() or c.lower() == c == c.upper() for c in text)


def _first_word(name: str) -> str | None:
    """The key a name is indexed under: its first run of word characters, lower-cased; None
    when it has none or lower-casing would not compare it as the pattern does."""
    found = _WORD.search(name)
    if found is None or not _foldable(name):
        return None
    return found.group().lower()


def resolve_concerned(
    candidate: Candidate | JSON | Prepared, roster: Roster, known: Known, places: Places
) -> list[Resolved]:
    """The verdicts of the seats `candidate` concerns, in roster order, and what the event
    taught each of them; every other seat's is `unconcerned_verdict`. `candidate` is the
    contract (read by attribute, never dumped) or its camelCase dict."""
    p = prepare(candidate)
    seats = roster.seats
    return [
        _resolve(p, seats[i], known, places) for i in sorted(concerned(p, roster, known, places))
    ]


def resolve_all(
    candidate: Candidate | JSON | Prepared, roster: Roster, known: Known, places: Places
) -> list[Resolved]:
    """Every seat's verdict on one event, in roster order: the concerned seats' from their
    rules, every other seat's derived (`unconcerned_verdict`)."""
    p = prepare(candidate)
    ran = {r.seat_id: r for r in resolve_concerned(p, roster, known, places)}
    listed = known.channel if places.channel_id is not None else None
    return [
        ran.get(seat.member_id)
        or Resolved(seat.member_id, unconcerned_verdict(p, listed, seat.member_id), _NOTHING)
        for seat in roster.seats
    ]


def unconcerned_verdict(
    candidate: Candidate | JSON | Prepared, channel: Channel | None, seat_id: str
) -> Directedness:
    """The verdict of a seat the event does not concern: what its rules would answer, by the
    family's last row. `channel` is the org file's entry for a message's channel (None when it
    does not list it): a seat it does not let read the channel gets `not_visible`."""
    p = prepare(candidate)
    family = p.family
    if family == "messaging":
        return NOT_VISIBLE if can_read(channel, seat_id) is False else ambient(p)
    if family in ("board", "calling", "calendar"):
        return unconcerned_of(p)
    return no("unsupported_family", f"no rules for family {family!r}")


def concerned(p: Prepared, roster: Roster, known: Known, places: Places) -> set[int]:
    """The seats (roster positions) whose rules could answer anything but the family's last
    row: an echo of theirs, or a message that replies to, mentions, names or is addressed to
    them, or is in a thread they are in; a board change they made, are assigned, asked to
    review, own, are mentioned in or follow; a call to them; an invitation of theirs."""
    found: set[int] = set()

    def by_alias(idents: Iterable[str]) -> None:
        for ident in idents:
            if ident:
                found.update(roster.by_alias.get(ident, ()))

    def by_member(members: Iterable[str]) -> None:
        for member in members:
            i = roster.by_member.get(member)
            if i is not None:
                found.add(i)

    family = p.family
    if family == "messaging":
        by_alias((p.author, p.parent, *p.mentions))
        if p.kind in DIRECT_KINDS:
            listed = known.channel if places.channel_id is not None else None
            if listed is not None:
                by_member(listed.member_ids)
            else:
                by_member(known.channel_seats)
                by_alias(p.audience)
        if places.thread_root_id is not None:
            by_member(known.spoke)
            by_member(known.named)
        if not p.mentions:
            found |= roster.named_in(p.body)
    elif family == "board":
        b = p.board
        if b is not None:
            by_alias((b.actor, *b.assignees, *b.reviewers, *b.owners, *b.mentions))
        if places.item_id is not None:
            by_member(known.item_seats)
    elif family == "calling":
        if p.call is not None:
            by_alias((p.call.caller, *p.call.callees))
    elif family == "calendar" and p.calendar is not None:
        by_alias((p.calendar.organizer, *p.calendar.attendees))
    return found


# ------------------------------------------------------------------ the org it was decided against


def org_snapshot(roster: Roster, channels: Iterable[Channel]) -> dict[str, object]:
    """What the trace needs of one org version to derive the verdicts it did not store: the
    seats in roster order, and each listed channel's kind and members."""
    return {
        "seats": [seat.member_id for seat in roster.seats],
        "channels": {
            c.id: {"kind": c.kind.value, "memberIds": list(c.member_ids)} for c in channels
        },
    }


def org_version(snapshot: Mapping[str, object]) -> str:
    """The version of an org snapshot: its digest (the same org, the same version)."""
    return digest(snapshot)[:24]


def snapshot_channel(snapshot: Mapping[str, object], channel_id: str | None) -> Channel | None:
    """The org file's entry for `channel_id` in a snapshot, or None when it did not list it."""
    channels = snapshot.get("channels")
    if channel_id is None or not isinstance(channels, Mapping):
        return None
    entry = channels.get(channel_id)
    if not isinstance(entry, Mapping):
        return None
    return Channel.model_validate({"id": channel_id, **entry})


def _resolve(p: Prepared, seat: RosterSeat, known: Known, places: Places) -> Resolved:
    facts = facts_for(p, seat.member_id, seat.aliases, known, places=places)
    verdict = resolve_directed(p, seat.wire, facts, aliases=seat.aliases, own=seat.own)
    return Resolved(
        seat.member_id, verdict, learn(p, verdict, channel_listed=known.channel is not None)
    )
