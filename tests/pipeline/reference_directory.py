"""A frozen copy of the engagement ladder as it was before the expertise index (issue 14).

The differential test (`test_directory_index.py`) checks the indexed `Directory` and ladder
against this copy, decision for decision. Do not "fix" or speed up anything here: its value is
that it is the old behaviour, verbatim (the `Directory`, the four rungs, `decide_engagement`).
The steps the change did not touch (triggers, surface, ask, guardrails) are imported.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from contracts.engagement import EngagementDecision, Mention, Rung, Target
from contracts.guardrails import GuardrailVerdict
from contracts.org import Member
from pipeline.engagement.ask import compose
from pipeline.engagement.context import EngagementContext, seed_degraded, seed_now_ms
from pipeline.engagement.decide import _nobody, _opening, conclude_engagement
from pipeline.engagement.surface import place
from pipeline.engagement.triggers import Fired, Triggered, triggered
from pipeline.engagement.values import lc, plain, text
from pipeline.engagement.work import Work
from pipeline.guardrails import check_guardrails, dedupe_key_for

ENGAGEABLE_STATUSES = frozenset({"active", "online", "busy"})

_STOPWORD_TEXT = (
    "the and for with from that this into our are was who what when how why can not but all any its"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_MEMO_LIMIT = 4096  # unique tokens (ticket numbers...) must not grow the memo forever
_EXPERTISE_KEYS = ("roleTitle", "title", "tagline", "teamName")


def tokens(text: str) -> list[str]:
    """Meaningful words of a scope phrase: lowercase, at least 3 characters, no stopwords."""
    seen: dict[str, None] = {}
    for tok in _NON_ALNUM.split(text.lower()):
        if len(tok) >= 3 and tok not in _STOPWORDS:
            seen.setdefault(tok, None)
    return list(seen)


@dataclass(frozen=True, slots=True)
class _Entry:
    """One member as the ladder reads it, normalised when the directory is built."""

    id: str
    name: str
    role: str
    team: str
    supervisor_id: str
    status: str
    status_ok: bool
    owns: tuple[str, ...]
    escalation_path: str
    expertise: frozenset[str]


def _entry(
    mid: str,
    *,
    name: str,
    role: str,
    team: str,
    supervisor_id: str,
    status: str,
    owns: tuple[str, ...],
    escalation_path: str,
    expertise_text: str,
) -> _Entry:
    return _Entry(
        id=mid,
        name=name,
        role=role,
        team=team,
        supervisor_id=supervisor_id,
        status=status,
        status_ok=not status or status in ENGAGEABLE_STATUSES,
        owns=owns,
        escalation_path=escalation_path,
        expertise=frozenset(tokens(expertise_text)),
    )


def _from_member(m: Member) -> _Entry:
    # Read by attribute: what the camelCase dump of the contract would give, without the dump.
    return _entry(
        m.id,
        name=m.display_name or m.slug or m.id,
        role=m.role_title,
        team=m.team_name,
        supervisor_id=m.supervisor_id or "",
        status=m.status.lower(),
        owns=tuple(o.lower() for o in m.owns),
        escalation_path=m.escalation_path.lower(),
        expertise_text=" ".join(x for x in (m.role_title, m.tagline, m.team_name) if x),
    )


def _from_mapping(m: Mapping[str, object]) -> _Entry | None:
    mid = text(m.get("id")) or text(m.get("memberId")) or text(m.get("slug"))
    if not mid:
        return None
    owns = m.get("owns")
    return _entry(
        mid,
        name=text(m.get("displayName"))
        or text(m.get("name"))
        or text(m.get("slug"))
        # The name falls back to `id`, not `memberId`: an entry keyed only by
        # memberId has an empty name.
        or text(m.get("id")),
        role=text(m.get("roleTitle")) or text(m.get("title")),
        team=text(m.get("teamName")),
        supervisor_id=text(m.get("supervisorId")),
        status=lc(m.get("status")),
        owns=tuple(lc(o) for o in owns) if isinstance(owns, list | tuple) else (),
        escalation_path=lc(m.get("escalationPath")),
        expertise_text=" ".join(str(m[k]) for k in _EXPERTISE_KEYS if m.get(k)),
    )


def _read(raw: object) -> _Entry | None:
    if isinstance(raw, Member):
        return _from_member(raw)
    m = plain(raw)
    return _from_mapping(m) if isinstance(m, Mapping) else None


@dataclass(frozen=True, slots=True)
class _Haystack:
    """Many short strings joined into one, so a substring search runs in C over all of them.

    Scope tokens are alphanumeric, so they never match across the NUL separators.
    """

    text: str
    starts: tuple[int, ...]
    owners: tuple[int, ...]

    @classmethod
    def of(cls, pieces: Iterable[tuple[int, str]]) -> _Haystack:
        parts: list[str] = []
        starts: list[int] = []
        owners: list[int] = []
        pos = 0
        for owner, piece in pieces:
            if piece:
                starts.append(pos)
                owners.append(owner)
                parts.append(piece)
                pos += len(piece) + 1
        return cls("\x00".join(parts), tuple(starts), tuple(owners))

    def owners_containing(self, tok: str) -> frozenset[int]:
        found: set[int] = set()
        find, starts, end = self.text.find, self.starts, len(self.text)
        pos = find(tok)
        while pos >= 0:
            seg = bisect_right(starts, pos) - 1
            found.add(self.owners[seg])
            pos = find(tok, starts[seg + 1]) if seg + 1 < len(starts) else -1
            if pos >= end:
                break
        return frozenset(found)


@dataclass(frozen=True)
class Directory:
    """The org's members, indexed once so a decision does not re-read the whole org.

    Build it with `Directory.of(members)` when the org is loaded; `decide_engagement` also
    accepts a plain list and indexes it on the spot (correct, only slower).
    """

    entries: tuple[_Entry, ...]
    by_id: Mapping[str, _Entry]
    _owns: _Haystack
    _paths: _Haystack
    _expertise: Mapping[str, tuple[int, ...]]
    _owns_memo: dict[str, frozenset[int]] = field(default_factory=dict, compare=False)
    _path_memo: dict[str, frozenset[int]] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, members: Iterable[object] | Directory | None) -> Directory:
        if isinstance(members, Directory):
            return members
        by_id: dict[str, _Entry] = {}
        for raw in members or ():
            entry = _read(raw)
            if entry is not None:
                # A later entry with the same id replaces the earlier one, in the earlier's
                # place, as a map keyed by id keeps its first insertion order.
                by_id[entry.id] = entry
        entries = tuple(by_id.values())
        expertise: dict[str, list[int]] = {}
        for i, e in enumerate(entries):
            for tok in e.expertise:
                expertise.setdefault(tok, []).append(i)
        return cls(
            entries=entries,
            by_id=by_id,
            _owns=_Haystack.of((i, o) for i, e in enumerate(entries) for o in e.owns),
            _paths=_Haystack.of((i, e.escalation_path) for i, e in enumerate(entries)),
            _expertise={tok: tuple(ix) for tok, ix in expertise.items()},
        )

    def __len__(self) -> int:
        return len(self.entries)

    def engageable(self, entry: _Entry, me: str) -> bool:
        """Active, real, and not the seat itself: an ask to an archived seat reaches nobody."""
        return entry.status_ok and bool(entry.id) and entry.id != me

    @staticmethod
    def _memoised(memo: dict[str, frozenset[int]], tok: str, hay: _Haystack) -> frozenset[int]:
        hit = memo.get(tok)
        if hit is None:
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            hit = memo[tok] = hay.owners_containing(tok)
        return hit

    def owners_of(self, tok: str) -> frozenset[int]:
        """Indexes of members whose `owns` contains `tok` as a substring."""
        return self._memoised(self._owns_memo, tok, self._owns)

    def paths_naming(self, tok: str) -> frozenset[int]:
        """Indexes of members whose escalation path contains `tok`."""
        return self._memoised(self._path_memo, tok, self._paths)

    def with_expertise(self, scope_tokens: Iterable[str]) -> list[int]:
        """Indexes, in directory order, of members whose role/team words include any token."""
        hits: set[int] = set()
        for tok in scope_tokens:
            hits.update(self._expertise.get(tok, ()))
        return sorted(hits)


EMPTY_DIRECTORY = Directory.of(())


MAX_TARGETS = 3


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
    hits: set[int] = set()
    for tok in scope_tokens:
        hits |= d.owners_of(tok)
        hits |= d.paths_naming(tok)
    for i in sorted(hits):
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

    A single short word ("api", "ops") matching a title is coincidence, not a reason."""
    d = picks.d
    scored: list[tuple[int, _Entry, list[str]]] = []
    for i in d.with_expertise(scope_tokens):
        entry = d.entries[i]
        if not d.engageable(entry, picks.me):
            continue
        matched = [t for t in scope_tokens if t in entry.expertise]
        strong = any(len(t) >= 5 for t in matched)
        if len(matched) >= 2 or strong:
            scored.append((len(matched) + (1 if strong else 0), entry, matched))
    scored.sort(key=lambda s: -s[0])  # stable: directory order breaks ties
    for _score, entry, matched in scored:
        on = ", ".join(f'"{t}"' for t in matched)
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


def directory_of(members: object) -> Directory:
    """A context's `directory`: a prepared `Directory`, a member list, or nothing (empty)."""
    if isinstance(members, Directory):
        return members
    if isinstance(members, Iterable):
        return Directory.of(members)
    if not members:
        return EMPTY_DIRECTORY
    raise TypeError(f"the directory must be a list of members, not {type(members).__name__}")


def decide_engagement(work: object, ctx: Mapping[str, object]) -> EngagementDecision:
    """Decide whether to engage anyone, whom and where, or record why nobody.

    (Reference: ``ctx`` is a camelCase mapping whose ``directory`` is a member list, indexed
    here by this module's `Directory`; the rest of the context is read by the live code.)

    ``ctx`` (`EngagementContext`, dict or object): me, directory, channels, ledger (rows; the
    guardrails judge them, an absent ledger as an empty one), nowMs
    (required: this function has no clock), limits, supervisorId, maxTargets, degraded.
    """
    now_ms = seed_now_ms(ctx)
    w = Work.of(work)
    found = triggered(w)
    if not found.fired:
        # Only a decision that routes reads the org, so a plain member list is indexed (and
        # the rest of the context read) for those alone.
        return _nobody(w, found, now_ms=now_ms, degraded=seed_degraded(ctx))
    directory = directory_of(ctx.get("directory"))
    context = EngagementContext.of({**ctx, "directory": None})
    plan = _engaging(w, found, context, directory)
    return conclude_engagement(plan, _judge_rows(plan, context)) if plan.engage else plan


def _judge_rows(plan: EngagementDecision, ctx: EngagementContext) -> GuardrailVerdict:
    """The guardrails' verdict on an engaging plan from the context's ledger rows."""
    return check_guardrails(
        ctx.ledger or (),
        now_ms=ctx.now_ms,
        dedupe_key=plan.dedupe_key or "",
        work_id=plan.work_id,
        seat_id=ctx.me,
        targets=plan.targets,
        creates_room=plan.surface == "new_room",
        limits=ctx.limits,
    )


def _engaging(
    w: Work, found: Triggered, ctx: EngagementContext, directory: Directory
) -> EngagementDecision:
    """A trigger fired: who, where and what, or a loud `unroutable` when nobody can be asked."""
    why, common = _opening(w, found)
    trigger = found.fired[0]
    why.append(f"trigger {trigger.trigger} ({trigger.code}): {trigger.detail}")
    why.extend(f"also firing: {f.trigger} ({f.code})" for f in found.fired[1:])
    routed = route(
        w, trigger, directory, ctx.me, supervisor_id=ctx.supervisor_id, cap=ctx.max_targets
    )
    why.extend(routed.why)
    targets = routed.targets
    if not targets:
        # Loud: a blocked piece of work with nobody to ask is a provisioning gap.
        return EngagementDecision(
            **common,
            now_ms=ctx.now_ms,
            trigger=trigger.trigger,
            why=tuple(why),
            degraded=(*ctx.degraded, "engagement_unroutable"),
            reason_code="unroutable",
            reason=f"{trigger.trigger} fired but nobody in the directory owns this and the "
            "seat has no supervisor: the ask has no addressee, an org gap rather than a quiet no",
        )
    placed = place(w, [t.member_id for t in targets], ctx.channels, ctx.me)
    why.append(f"surface {placed.surface}: {placed.why}")
    return EngagementDecision(
        **common,
        now_ms=ctx.now_ms,
        trigger=trigger.trigger,
        why=tuple(why),
        degraded=ctx.degraded,
        engage=True,
        reason_code=trigger.code,
        reason=trigger.detail,
        targets=targets,
        surface=placed.surface,
        channel_id=placed.channel_id,
        thread_root_id=placed.thread_root_id,
        room_name=placed.room_name,
        durable_channel=placed.durable_channel is True,
        member_ids=placed.member_ids,
        # Everyone who must act is tagged: an unmentioned name in a busy room is not an ask.
        mentions=tuple(Mention(member_id=t.member_id) for t in targets),
        body=compose(w, trigger.trigger, trigger.detail, [t.name for t in targets]),
        dedupe_key=dedupe_key_for(w.id, trigger.code, targets),
    )
