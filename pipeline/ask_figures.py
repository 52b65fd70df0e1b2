"""The ask record's figures for an operator's metrics: asks by state, and per seat and per
person how the concluded asks went (unanswered, declined). Pure: the asks and `now_ms` in.

What counts, and why:

- by state: every ask still waiting (pending, open, snoozed, escalated) is counted whatever
  its age, since each is live work somebody owes; an ended ask (answered, closed) is counted
  when it was created within the window (`since_ms`), so the figure says how the recent asks
  ended rather than growing with the record's retention.
- per seat: the seat's own asks (an escalation's own ask is the same ask one rung up, not
  another ask of the seat) that concluded within the window: answered, declined, or expired
  unanswered at the top of the ladder (pipeline/asks.py `concluded_as`, what the nuisance
  brake counts too). A withdrawn ask or one whose send failed asked nobody's patience and is
  not counted.
- per person: every ask put to the person (the seat's own asks and escalations' asks, each
  by its targets) that concluded within the window, by how the ask concluded: declined (a
  refusal, whoever of its targets gave it), or expired unanswered (nobody answered, this
  person included). An escalation step closed because the ask was answered at another rung
  is not counted against the person it went to.

A ratio is of the concluded asks; with none concluded there is no ratio (None), never 0.

The labels are bounded (`bounded`): only seats and members the org names, at most `cap` of
each (the most concluded first), the rest summed under `_other`, as the process's own metrics
do past their cap (workers/telemetry `OTHER`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from contracts.asks import Ask
from pipeline.asks import concluded_as

OTHER = "_other"
MAX_LABELS = 200
STATES = ("pending", "open", "snoozed", "escalated", "answered", "closed")


@dataclass(frozen=True)
class Tally:
    concluded: int = 0
    unanswered: int = 0
    declined: int = 0

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            self.concluded + other.concluded,
            self.unanswered + other.unanswered,
            self.declined + other.declined,
        )

    @property
    def unanswered_ratio(self) -> float | None:
        return None if not self.concluded else self.unanswered / self.concluded

    @property
    def declined_ratio(self) -> float | None:
        return None if not self.concluded else self.declined / self.concluded


@dataclass(frozen=True)
class AskFigures:
    by_state: Mapping[str, int]
    seats: Mapping[str, Tally] = field(default_factory=dict)
    persons: Mapping[str, Tally] = field(default_factory=dict)


def _person_outcome(ask: Ask) -> Tally | None:
    """How an ask counts for the people it was put to (None: not concluded for them)."""
    if ask.state == "answered" and ask.answer is not None:
        declined = int(ask.answer.answer == "declined")
        return Tally(concluded=1, declined=declined)
    if ask.state == "closed" and ask.closed == "expired":
        return Tally(concluded=1, unanswered=1)
    return None


def figures(asks: Iterable[Ask], *, since_ms: int) -> AskFigures:
    """The figures of `asks` (each once), the window starting at `since_ms`."""
    by_state = dict.fromkeys(STATES, 0)
    seats: dict[str, Tally] = {}
    persons: dict[str, Tally] = {}
    seen: set[str] = set()
    for ask in asks:
        if ask.id in seen:
            continue
        seen.add(ask.id)
        recent = ask.created_at_ms >= since_ms
        if ask.is_open or recent:
            by_state[ask.state] = by_state.get(ask.state, 0) + 1
        if not recent:
            continue
        how = concluded_as(ask)
        if how is not None:
            one = Tally(1, int(how == "expired"), int(how == "declined"))
            seats[ask.seat_id] = seats.get(ask.seat_id, Tally()) + one
        outcome = _person_outcome(ask)
        if outcome is not None:
            for person in dict.fromkeys(t.member_id for t in ask.targets):
                persons[person] = persons.get(person, Tally()) + outcome
    return AskFigures(by_state=by_state, seats=seats, persons=persons)


def bounded(
    tallies: Mapping[str, Tally], known: Iterable[str], cap: int = MAX_LABELS
) -> dict[str, Tally]:
    """At most `cap` labels of the names in `known` (the most concluded first, then by name);
    every other name's tally summed under OTHER."""
    names = set(known)
    ranked = sorted(
        ((n, t) for n, t in tallies.items() if n in names), key=lambda nt: (-nt[1].concluded, nt[0])
    )
    kept = dict(ranked[:cap])
    rest = [t for n, t in tallies.items() if n not in kept]
    if rest:
        total = Tally()
        for t in rest:
            total = total + t
        kept[OTHER] = total
    return kept
