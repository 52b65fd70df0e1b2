"""One inbound event resolved for every seat of the org at once. Pure.

The directedness stage owes every seat a verdict on every event (DESIGN.md section 5), but an
event can concern only a few of them: the seats it names (author, parent author, mentions,
names in the text) and the seats in its thread. `Roster` indexes the seats once per org load
so those are found by lookup; every other seat's verdict on a message is known without running
its rules — the message is not visible to it, or it is ambient. A seat the event might
concern, and every seat for a direct conversation or a family other than messaging, goes
through `resolve_directed` with its `facts_for`, as it would alone.

`resolve_all` therefore gives exactly the verdicts of the per-seat loop (a property test holds
the two equal); what it saves is the per-seat cost on the events that concern nobody, which
grows with the number of seats.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from contracts.inbound import Candidate, Directedness
from pipeline.directedness import NOT_VISIBLE, ambient, names_pattern, resolve_directed
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

    @classmethod
    def of(cls, seats: Iterable[RosterSeat]) -> Roster:
        ordered = tuple(seats)
        by_alias: dict[str, list[int]] = {}
        names: list[str] = []
        for i, seat in enumerate(ordered):
            for alias in seat.aliases | seat.own:
                by_alias.setdefault(alias, []).append(i)
            listed = seat.wire.get("names") or ()
            names += [str(n) for n in listed] if isinstance(listed, Iterable) else []
        return cls(
            seats=ordered,
            by_alias={alias: tuple(ix) for alias, ix in by_alias.items()},
            by_member={seat.member_id: i for i, seat in enumerate(ordered)},
            # One alternation of every seat's names, built as each seat's pattern is: at any
            # place one seat's pattern matches, one of its alternatives matches too. So when
            # it finds nothing, no seat is named.
            named=names_pattern(tuple(names)),
        )


def resolve_all(
    candidate: Candidate | JSON | Prepared, roster: Roster, known: Known, places: Places
) -> list[Resolved]:
    """Every seat's verdict on one event, in roster order, and what the event taught each of
    them. `candidate` is the contract (read by attribute, never dumped) or its camelCase dict."""
    p = prepare(candidate)
    seats = roster.seats
    if p.family != "messaging" or p.kind in DIRECT_KINDS:
        # A direct conversation can be any seat's own through its membership or the
        # delivery's audience; other families have their own tables. Every seat's rules run.
        return [_resolve(p, seat, known, places) for seat in seats]
    concerned = _concerned(p, roster, known, places)
    listed = known.channel if places.channel_id is not None else None
    out: list[Resolved] = []
    unaddressed = ambient(p)
    for i, seat in enumerate(seats):
        if i in concerned:
            out.append(_resolve(p, seat, known, places))
        elif can_read(listed, seat.member_id) is False:
            out.append(Resolved(seat.member_id, NOT_VISIBLE, _NOTHING))
        else:
            out.append(Resolved(seat.member_id, unaddressed, _NOTHING))
    return out


def _concerned(p: Prepared, roster: Roster, known: Known, places: Places) -> set[int]:
    """The seats a message could be addressed to, by the messaging table's rows: it is theirs
    (an echo), a reply to them, mentions them, names them, or is in a thread they are in."""
    if not p.mentions and roster.named is not None and roster.named.search(p.body):
        return set(range(len(roster.seats)))  # somebody is named: every seat's own pattern runs
    found: set[int] = set()
    for ident in (p.author, p.parent, *p.mentions):
        found.update(roster.by_alias.get(ident, ()))
    if places.thread_root_id is not None:
        for member in (*known.spoke, *known.named):
            i = roster.by_member.get(member)
            if i is not None:
                found.add(i)
    return found


def _resolve(p: Prepared, seat: RosterSeat, known: Known, places: Places) -> Resolved:
    facts = facts_for(p, seat.member_id, seat.aliases, known, places=places)
    verdict = resolve_directed(p, seat.wire, facts, aliases=seat.aliases, own=seat.own)
    return Resolved(
        seat.member_id, verdict, learn(p, verdict, channel_listed=known.channel is not None)
    )
