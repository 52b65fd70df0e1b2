"""2. Who: the four-rung target ladder (explicit, ownership, expertise, supervisory). Pure.

First rung with a hit wins and every target records its rung, so "the work named them" never
looks like "two keywords matched a job title". No targets means unroutable, never a broadcast.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from contracts.engagement import Rung, Target
from contracts.work import WorkReport
from pipeline.engagement.directory import EMPTY_DIRECTORY, Directory, tokens
from pipeline.engagement.triggers import Fired
from pipeline.engagement.work import Work

MAX_TARGETS = 3


class Routing(TypedDict):
    """`resolve_targets`'s answer as a camelCase dict."""

    targets: list[Target]
    why: list[str]


@dataclass(frozen=True, slots=True)
class Routed:
    targets: tuple[Target, ...]
    why: tuple[str, ...]


def target_cap(max_targets: object) -> int:
    """`maxTargets` when it is a finite number, else 3; a bool is not a number.

    A fractional cap admits as many as its ceiling (the ladder stops at `picked >= cap`)."""
    if (
        isinstance(max_targets, int | float)
        and not isinstance(max_targets, bool)
        and math.isfinite(max_targets)
    ):
        return math.ceil(max_targets)
    return MAX_TARGETS


@dataclass
class _Picks:
    """The targets picked so far, in order, with a why line for each pick or skip."""

    d: Directory
    me: str
    cap: int
    picked: dict[str, Target] = field(default_factory=dict)
    why: list[str] = field(default_factory=list)

    def full(self) -> bool:
        return len(self.picked) >= self.cap

    def add(self, ident: str, rung: Rung, reason: str) -> bool:
        key = ident.strip()
        if not key or key in self.picked or self.full():
            return False
        entry = self.d.by_id.get(key)
        if entry is not None and not self.d.engageable(entry, self.me):
            status = entry.status or "unknown"
            self.why.append(f"skipped {key}: not an engageable seat (status={status})")
            return False
        if entry is None and key == self.me:
            return False
        self.picked[key] = (
            Target(member_id=key, name=key, rung=rung, why=reason)
            if entry is None
            else Target(
                member_id=key,
                name=entry.name,
                role=entry.role,
                team=entry.team,
                rung=rung,
                why=reason,
            )
        )
        self.why.append(f"{key} ({rung}): {reason}")
        return True


def route(
    w: Work,
    trigger: Fired,
    d: Directory,
    me: str,
    *,
    supervisor_id: str | None = None,
    cap: int = MAX_TARGETS,
) -> Routed:
    """Who to engage for the fired trigger, by the ladder; empty when nobody can be asked."""
    picks = _Picks(d, me, cap)
    for ident, reason in _named(w, trigger):
        picks.add(ident, "explicit", reason)
    scope_tokens = tokens(trigger.scope or w.scope or w.title)
    if not picks.picked:
        _owners(picks, scope_tokens)
    if not picks.picked:
        _experts(picks, scope_tokens)
    if not picks.picked:
        _up_the_line(picks, supervisor_id)
    if not picks.picked:
        picks.why.append(
            f"no target: none of the {len(d)} directory entries owns "
            f'"{(trigger.scope or w.title)[:80]}", and this seat has no supervisor'
        )
    return Routed(tuple(picks.picked.values()), tuple(picks.why))


def _named(w: Work, trigger: Fired) -> list[tuple[str, str]]:
    """Rung 1: everyone the work names as the one who must act, in the order the work names
    them."""
    named: list[tuple[str, str]] = []
    if trigger.owner_id:
        named.append((trigger.owner_id, "the work names them as the one who must act"))
    if w.blocker is not None and w.blocker.owner_id:
        named.append((w.blocker.owner_id, "named as the owner of the blocker"))
    if w.review is not None and w.review.reviewer_id:
        named.append((w.review.reviewer_id, "named as the required reviewer"))
    if w.approver_id:
        named.append((w.approver_id, "named as the approver for this kind of step"))
    c = w.commitment
    if c is not None and c.to_member_id and (c.at_risk or w.state == "failed"):
        reason = "they are waiting on this and it will not arrive as promised"
        named.append((c.to_member_id, reason))
    # The requester is explicit only for a trigger they are party to; copying them onto an
    # unrelated internal blocker is carbon-copy culture.
    requester = w.origin.requester_id
    if requester and (trigger.trigger == "commitment_at_risk" or w.state == "failed"):
        named.append((requester, "they asked for this and are owed the outcome"))
    return named


def _owners(picks: _Picks, scope_tokens: list[str]) -> None:
    """Rung 2: the directory says they own the scope (substring of `owns`, or escalation path)."""
    d = picks.d
    for i in d.owning(scope_tokens):
        if picks.full():
            break  # `add` would refuse silently from here on: nothing left to record
        entry = d.entries[i]
        if not d.engageable(entry, picks.me):
            continue
        owned = next((o for o in entry.owns if any(t in o for t in scope_tokens)), None)
        if owned is not None:
            picks.add(entry.id, "ownership", f'the directory records them as owning "{owned}"')
        else:
            picks.add(entry.id, "ownership", "their escalation path names this scope")


def _experts(picks: _Picks, scope_tokens: list[str]) -> None:
    """Rung 3: role, tagline or team overlaps the scope on two tokens, or one of 5+ characters.

    A single short word ("api", "ops") matching a title is coincidence, not a reason. The
    directory hands over the candidates best score first, directory order breaking ties (a
    stable sort), so the rung reads only as far as its cap."""
    d = picks.d
    for i in d.experts(scope_tokens):
        if picks.full():
            break  # `add` would refuse silently from here on: nothing left to record
        entry = d.entries[i]
        if not d.engageable(entry, picks.me):
            continue
        on = ", ".join(f'"{t}"' for t in scope_tokens if t in entry.expertise)
        picks.add(entry.id, "expertise", f"their role/team matches this scope on {on}")


def _up_the_line(picks: _Picks, supervisor_id: str | None) -> None:
    """Rung 4: the seat's supervisor. Reached also when a named person is not reachable."""
    own = picks.d.by_id.get(picks.me)
    supervisor = (own.supervisor_id if own is not None else "") or supervisor_id or ""
    if supervisor:
        picks.add(
            supervisor,
            "supervisory",
            "nobody reachable in the directory owns this scope, so it "
            "goes up the line instead of sideways to a guess",
        )


def resolve_targets(
    work: WorkReport | Mapping[str, object] | object = None,
    trigger: Mapping[str, object] | None = None,
    directory: object = None,
    me: str = "",
    *,
    supervisor_id: str | None = None,
    max_targets: float | None = None,
) -> Routing:
    """Who to engage, by a four-rung ladder (explicit, ownership, expertise, supervisory).

    First rung with a hit wins and every target records its rung, so "the work named them"
    never looks like "two keywords matched a job title". Returns ``{"targets", "why"}``;
    no targets means unroutable, never a broadcast.
    """
    routed = route(
        Work.of(work),
        Fired.of(trigger),
        directory_of(directory),
        str(me or ""),
        supervisor_id=str(supervisor_id) if supervisor_id else None,
        cap=target_cap(max_targets),
    )
    return {"targets": list(routed.targets), "why": list(routed.why)}


def directory_of(members: object) -> Directory:
    """A context's `directory`: a prepared `Directory`, a member list, or nothing (empty)."""
    if isinstance(members, Directory):
        return members
    if isinstance(members, Iterable):
        return Directory.of(members)
    if not members:
        return EMPTY_DIRECTORY
    raise TypeError(f"the directory must be a list of members, not {type(members).__name__}")
