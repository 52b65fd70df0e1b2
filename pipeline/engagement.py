"""The engagement decision (seed 000): whether a named person must act, who, where, in what words.

Pure: work and context in, an `EngagementDecision` out. No clock (``nowMs`` is required in
the context), no I/O. Every function accepts the seed's camelCase dicts as well as the
contracts, because seats written against the seed send exactly those shapes.

The threshold: engage only when a specific, named person's action or consent is a
precondition for the work, and the seat cannot supply it itself. Anything below it is an
explicit "nobody" with a reason code, never a silent branch.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from contracts.engagement import EngagementDecision, GuardrailSummary, Mention, Target
from contracts.guardrails import GuardrailVerdict, Limits
from pipeline.guardrails import DEFAULT_LIMITS, check_guardrails, dedupe_key_for

TRIGGERS = (
    "irreversible_or_external",
    "blocked_on_other",
    "mandatory_review",
    "commitment_at_risk",
)
# Ordered by what it costs NOT to engage: an unsafe act that cannot be undone, then work
# stopped dead, then an artefact that cannot land, then someone acting on stale news.
TRIGGER_RANK = {name: rank for rank, name in enumerate(TRIGGERS)}

# Blockers that belong to someone else by definition. `capacity` is deliberately absent:
# being busy is the seat's own queue, unless the blocker names an explicit owner.
OTHER_OWNED_BLOCKERS = frozenset({"decision", "access", "information", "approval"})

SURFACES = ("reply_in_place", "dm", "existing_channel", "new_room")
MAX_TARGETS = 3
RISK_KINDS = ("irreversible", "external", "financial")
ENGAGEABLE_STATUSES = frozenset({"active", "online", "busy"})

_STOPWORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "from",
        "that",
        "this",
        "into",
        "our",
        "are",
        "was",
        "who",
        "what",
        "when",
        "how",
        "why",
        "can",
        "not",
        "but",
        "all",
        "any",
        "its",
    ]
)
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_BLANK_RUNS = re.compile(r"\n{3,}")

JSON = dict[str, Any]


# --------------------------------------------------------------------------- helpers


def _plain(value: Any) -> Any:
    """A contract as the seed's camelCase dict; anything else unchanged."""
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, mode="json")
    return value


def _lc(value: Any) -> str:
    return "" if value is None else str(value).lower()


def _obj(value: Any) -> JSON:
    """A nested object of the work, or an empty one (the seed's `x || {}`)."""
    value = _plain(value)
    return dict(value) if isinstance(value, Mapping) and value else {}


def _given(value: Any) -> bool:
    """JavaScript truthiness (the seed's `x || null`): an empty object still counts as given."""
    value = _plain(value)
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int | float):
        return value == value and value != 0
    if isinstance(value, str):
        return value != ""
    return True


def tokens(text: str) -> list[str]:
    """Meaningful words of a scope phrase: lowercase, at least 3 characters, no stopwords."""
    seen: dict[str, None] = {}
    for tok in _NON_ALNUM.split(text.lower()):
        if len(tok) >= 3 and tok not in _STOPWORDS:
            seen.setdefault(tok, None)
    return list(seen)


def _member_id(m: Mapping[str, Any]) -> str:
    return str(m.get("id") or m.get("memberId") or m.get("slug") or "")


def _member_name(m: Mapping[str, Any]) -> str:
    return str(m.get("displayName") or m.get("name") or m.get("slug") or m.get("id") or "")


# --------------------------------------------------------------------------- directory


@dataclass(frozen=True, slots=True)
class _Entry:
    id: str
    member: Mapping[str, Any]
    status: str
    status_ok: bool
    owns: tuple[str, ...]
    escalation_path: str
    expertise: frozenset[str]


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


_MEMO_LIMIT = 4096  # unique tokens (ticket numbers...) must not grow the memo forever


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
    def of(cls, members: Iterable[Any] | Directory | None) -> Directory:
        if isinstance(members, Directory):
            return members
        by_id: dict[str, _Entry] = {}
        for raw in members or ():
            m = _plain(raw)
            if not isinstance(m, Mapping):
                continue
            mid = _member_id(m)
            if not mid:
                continue
            status = _lc(m.get("status"))
            owns = m.get("owns")
            expertise_text = " ".join(
                str(m[k]) for k in ("roleTitle", "title", "tagline", "teamName") if m.get(k)
            )
            # A later entry with the same id replaces the earlier one, in the earlier's place
            # (the seed builds a Map by id, which keeps first insertion order).
            by_id[mid] = _Entry(
                id=mid,
                member=m,
                status=status,
                status_ok=not status or status in ENGAGEABLE_STATUSES,
                owns=tuple(_lc(o) for o in owns) if isinstance(owns, list | tuple) else (),
                escalation_path=_lc(m.get("escalationPath")),
                expertise=frozenset(tokens(expertise_text)),
            )
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


# --------------------------------------------------------------------------- 1. whether


def evaluate_triggers(work: Any = None) -> JSON:
    """Every trigger checked against the work: what fired, and what nearly fired and why not.

    Returns ``{"fired": [...], "suppressed": [...]}``, fired sorted by trigger rank.
    """
    w = _obj(work)
    fired: list[JSON] = []
    suppressed: list[JSON] = []
    state = _lc(w.get("state")) or "in_progress"
    risk = _obj(w.get("risk"))
    # The seed's `work.blocker || null`: an empty blocker object is still a named blocker (of
    # unknown kind, so the seat's own), not an unnamed one; the contract path agrees.
    blocker = _obj(w.get("blocker")) if _given(w.get("blocker")) else None
    review = _obj(w.get("review")) or None
    commitment = _obj(w.get("commitment")) or None
    title = w.get("title") or ""

    if any(risk.get(k) for k in RISK_KINDS):
        if state == "done":
            # Consent is only meaningful before the act; afterwards it belongs in the record.
            suppressed.append(
                {
                    "trigger": "irreversible_or_external",
                    "code": "act_already_taken",
                    "detail": "the risky step has already happened; asking for consent now would "
                    "be for show, so it goes on the record instead of into anyone's messages",
                }
            )
        else:
            kinds = [k for k in RISK_KINDS if risk.get(k)]
            fired.append(
                {
                    "trigger": "irreversible_or_external",
                    "code": "consent_required:" + "+".join(kinds),
                    "scope": w.get("scope") or (blocker or {}).get("scope") or title,
                    "detail": f"the next step is {' and '.join(kinds)} and there is no undoing it",
                }
            )

    if state in ("blocked", "failed"):
        if blocker is None:
            suppressed.append(
                {
                    "trigger": "blocked_on_other",
                    "code": "blocker_unnamed",
                    "detail": "the work says it is blocked but does not say on what, and nobody "
                    "can be asked for something unnamed",
                }
            )
        else:
            kind = _lc(blocker.get("kind"))
            other_owned = kind in OTHER_OWNED_BLOCKERS or bool(blocker.get("ownerId"))
            if not other_owned:
                suppressed.append(
                    {
                        "trigger": "blocked_on_other",
                        "code": "blocker_is_mine",
                        "detail": f'a "{kind or "unknown"}" blocker is the seat\'s own to clear; '
                        "handing it to a person would be handing them the seat's work",
                    }
                )
            elif w.get("selfServeExhausted") is not True:
                # Only an explicit `true` passes: a missing flag means "has not tried yet".
                suppressed.append(
                    {
                        "trigger": "blocked_on_other",
                        "code": "self_serve_available",
                        "detail": "the seat has not yet used up what it can do on its own; asking "
                        "now would give a person the seat's own next step",
                    }
                )
            else:
                fired.append(
                    {
                        "trigger": "blocked_on_other",
                        "code": f"blocked:{kind or 'unspecified'}",
                        "scope": blocker.get("scope") or w.get("scope") or title,
                        "detail": blocker.get("detail")
                        or f"blocked on a {kind} that only another party can give",
                        "ownerId": blocker.get("ownerId") or None,
                    }
                )

    if review and review.get("required"):
        fired.append(
            {
                "trigger": "mandatory_review",
                "code": f"review_required:{_lc(review.get('kind')) or 'unspecified'}",
                "scope": review.get("scope") or w.get("scope") or title,
                "detail": review.get("detail") or "a second reviewer is required before this lands",
                "ownerId": review.get("reviewerId") or None,
            }
        )
    elif review and review.get("requested"):
        suppressed.append(
            {
                "trigger": "mandatory_review",
                "code": "review_optional",
                "detail": "a review would be welcome but is not required, so the work can land "
                "without one",
            }
        )

    if commitment and commitment.get("toMemberId"):
        if commitment.get("atRisk") or state == "failed":
            failed = state == "failed"
            fired.append(
                {
                    "trigger": "commitment_at_risk",
                    "code": "commitment_failed" if failed else "commitment_slipping",
                    "scope": w.get("scope") or title,
                    "detail": "the run failed while the person who asked is still waiting for it"
                    if failed
                    else "a promise made to a named person is going to be missed",
                    "ownerId": commitment.get("toMemberId"),
                }
            )
        else:
            suppressed.append(
                {
                    "trigger": "commitment_at_risk",
                    "code": "commitment_on_track",
                    "detail": "the commitment is on track; an unrequested progress ping is noise",
                }
            )

    fired.sort(key=lambda f: TRIGGER_RANK.get(f["trigger"], 9))
    return {"fired": fired, "suppressed": suppressed}


# --------------------------------------------------------------------------- 2. who


def resolve_targets(
    work: Any = None,
    trigger: Mapping[str, Any] | None = None,
    directory: Any = None,
    me: str = "",
    *,
    supervisor_id: str | None = None,
    max_targets: int | None = None,
) -> JSON:
    """Who to engage, by a four-rung ladder (explicit, ownership, expertise, supervisory).

    First rung with a hit wins and every target records its rung, so "the work named them"
    never looks like "two keywords matched a job title". Returns ``{"targets", "why"}``;
    no targets means unroutable, never a broadcast.
    """
    w = _obj(work)
    trig = dict(trigger or {})
    d = Directory.of(directory)
    me = str(me or "")
    # The seed's `Number.isFinite(maxTargets)`: a finite number, and a bool is not one.
    cap: float = (
        max_targets
        if isinstance(max_targets, int | float)
        and not isinstance(max_targets, bool)
        and math.isfinite(max_targets)
        else MAX_TARGETS
    )
    why: list[str] = []
    picked: dict[str, Target] = {}

    def add(ident: Any, rung: str, reason: str) -> bool:
        key = str(ident or "").strip()
        if not key or key in picked or len(picked) >= cap:
            return False
        entry = d.by_id.get(key)
        if entry is not None and not d.engageable(entry, me):
            why.append(
                f"skipped {key}: not an engageable seat (status={entry.status or 'unknown'})"
            )
            return False
        if entry is None and key == me:
            return False
        m = entry.member if entry is not None else {}
        picked[key] = Target.model_validate(
            {
                "memberId": key,
                "name": _member_name(m) if entry is not None else key,
                "role": str(m.get("roleTitle") or m.get("title") or ""),
                "team": str(m.get("teamName") or ""),
                "rung": rung,
                "why": reason,
            }
        )
        why.append(f"{key} ({rung}): {reason}")
        return True

    def result() -> JSON:
        return {"targets": list(picked.values()), "why": why}

    # Rung 1: the work names them.
    state = _lc(w.get("state"))
    blocker, review, commitment = (
        _obj(w.get("blocker")),
        _obj(w.get("review")),
        _obj(w.get("commitment")),
    )
    origin = _obj(w.get("origin"))
    explicit: list[tuple[Any, str]] = []
    if trig.get("ownerId"):
        explicit.append((trig["ownerId"], "the work names them as the one who must act"))
    if blocker.get("ownerId"):
        explicit.append((blocker["ownerId"], "named as the owner of the blocker"))
    if review.get("reviewerId"):
        explicit.append((review["reviewerId"], "named as the required reviewer"))
    if w.get("approverId"):
        explicit.append((w["approverId"], "named as the approver for this kind of step"))
    if commitment.get("toMemberId") and (commitment.get("atRisk") or state == "failed"):
        explicit.append(
            (
                commitment["toMemberId"],
                "they are waiting on this and it will not arrive as promised",
            )
        )
    # The requester is explicit only for a trigger they are party to; copying them onto an
    # unrelated internal blocker is carbon-copy culture.
    if origin.get("requesterId") and (
        trig.get("trigger") == "commitment_at_risk" or state == "failed"
    ):
        explicit.append((origin["requesterId"], "they asked for this and are owed the outcome"))
    for ident, reason in explicit:
        add(ident, "explicit", reason)
    if picked:
        return result()

    scope_text = str(trig.get("scope") or w.get("scope") or w.get("title") or "")
    scope_tokens = tokens(scope_text)

    # Rung 2: the directory says they own the scope (substring of `owns`, or escalation path).
    if scope_tokens:
        hits: set[int] = set()
        for tok in scope_tokens:
            hits |= d.owners_of(tok)
            hits |= d.paths_naming(tok)
        for i in sorted(hits):
            if len(picked) >= cap:
                break  # `add` would refuse silently from here on: nothing left to record
            entry = d.entries[i]
            if not d.engageable(entry, me):
                continue
            owned = next((o for o in entry.owns if any(t in o for t in scope_tokens)), None)
            if owned is not None:
                add(entry.id, "ownership", f'the directory records them as owning "{owned}"')
                continue
            add(entry.id, "ownership", "their escalation path names this scope")
    if picked:
        return result()

    # Rung 3: role, tagline or team overlaps the scope on two tokens, or one of 5+ characters.
    # A single short word ("api", "ops") matching a title is coincidence, not a reason.
    if scope_tokens:
        scored: list[tuple[int, _Entry, list[str]]] = []
        for i in d.with_expertise(scope_tokens):
            entry = d.entries[i]
            if not d.engageable(entry, me):
                continue
            matched = [t for t in scope_tokens if t in entry.expertise]
            strong = any(len(t) >= 5 for t in matched)
            if len(matched) >= 2 or strong:
                scored.append((len(matched) + (1 if strong else 0), entry, matched))
        scored.sort(key=lambda s: -s[0])  # stable: directory order breaks ties
        for _score, entry, matched in scored:
            on = ", ".join(f'"{t}"' for t in matched)
            add(entry.id, "expertise", f"their role/team matches this scope on {on}")
    if picked:
        return result()

    # Rung 4: up the line. Reached also when an explicitly named person is not reachable.
    own = d.by_id.get(me)
    supervisor = (own.member.get("supervisorId") if own is not None else None) or supervisor_id
    if supervisor:
        add(
            supervisor,
            "supervisory",
            "nobody reachable in the directory owns this scope, so it "
            "goes up the line instead of sideways to a guess",
        )
    if not picked:
        why.append(
            f"no target: none of the {len(d)} directory entries owns "
            f'"{str(trig.get("scope") or w.get("title") or "")[:80]}", and this seat has no '
            "supervisor"
        )
    return result()


# --------------------------------------------------------------------------- 3. where


@dataclass(frozen=True, slots=True)
class _Room:
    id: str
    kind: str
    name: str
    members: frozenset[str]


_PRIVATE_KINDS = frozenset({"PRIVATE", "GROUP_DM", "DM"})


@dataclass(frozen=True)
class Rooms:
    """The org's channels with their member sets built once (see `Directory`)."""

    rooms: tuple[_Room, ...]

    @classmethod
    def of(cls, channels: Any) -> Rooms:
        return channels if isinstance(channels, Rooms) else cls(tuple(_rooms(channels)))


def _rooms(channels: Any) -> list[_Room]:
    if isinstance(channels, Rooms):
        return list(channels.rooms)
    rooms: list[_Room] = []
    for raw in channels if isinstance(channels, list | tuple) else ():
        c = _plain(raw)
        if not isinstance(c, Mapping):
            continue
        listed = c.get("memberIds") if c.get("memberIds") is not None else c.get("members")
        members = frozenset(
            x
            if isinstance(x, str)
            else (str(x.get("memberId") or x.get("id")) if isinstance(x, Mapping) else str(x))
            for x in (listed if isinstance(listed, list | tuple) else ())
        )
        rooms.append(
            _Room(
                id=str(c.get("id") or c.get("channelId") or ""),
                kind=str(c.get("kind") or c.get("channelKind") or "").upper(),
                name=str(c.get("name") or c.get("slug") or ""),
                members=members,
            )
        )
    return rooms


def choose_surface(
    work: Any = None, targets: Sequence[Any] = (), channels: Any = (), me: str = ""
) -> JSON:
    """The cheapest surface that reaches everyone who must act.

    Cost order: reply in place (nothing new), a DM (one person's attention), the smallest
    existing room that holds them all, and last a new room (a permanent object for everyone).
    """
    w = _obj(work)
    ids = [str(_plain(t)["memberId"]) for t in targets]
    origin = _obj(w.get("origin"))
    rooms = _rooms(channels)

    def holds_all(room: _Room) -> bool:
        return all(i in room.members for i in ids)

    def place(surface: str, why: str, **extra: Any) -> JSON:
        out: JSON = {
            "surface": surface,
            "channelId": None,
            "threadRootId": None,
            "roomName": None,
            "memberIds": ids,
            "why": why,
        }
        out.update(extra)
        return out

    if origin.get("channelId"):
        origin_id = str(origin["channelId"])
        room = next((r for r in rooms if r.id == origin_id), None)
        if room is not None and room.members and holds_all(room):
            return place(
                "reply_in_place",
                f"everyone who must act is already in the room this came from "
                f"({room.name or room.id}); moving elsewhere would strip the context",
                channelId=origin_id,
                threadRootId=origin.get("threadRootId") or None,
            )
        # An unreadable roster counts as holding them only when the one target is the
        # requester: that is a reply by definition.
        unknown_roster = room is None or not room.members
        sole_requester = len(ids) == 1 and ids[0] == str(origin.get("requesterId") or "")
        if unknown_roster and sole_requester:
            return place(
                "reply_in_place",
                "the only person who must act is the one who asked, in the thread they asked in",
                channelId=origin_id,
                threadRootId=origin.get("threadRootId") or None,
            )

    if len(ids) == 1:
        return place(
            "dm",
            "one person must act and nobody else needs to watch; a 1:1 costs "
            "exactly one person's attention",
        )

    fits = sorted(
        (r for r in rooms if r.id and r.members and holds_all(r) and (not me or me in r.members)),
        # The seed's comment: smallest wins (fewest bystanders), and a tie prefers a private or
        # group room over a public one. Its code sorts by size only; this implements the comment.
        key=lambda r: (len(r.members), r.kind not in _PRIVATE_KINDS),
    )
    if fits:
        room = fits[0]
        return place(
            "existing_channel",
            f"{room.name or room.id} already holds all {len(ids)} of them ({len(room.members)} "
            "members, the smallest room that does), so nothing new is created",
            channelId=room.id,
            roomName=room.name or None,
        )

    durable = w.get("durable") is True
    return place(
        "new_room",
        f"{len(ids)} people must act together and no room holds them all"
        + ("; the work is durable, so a named channel, not an ad-hoc group" if durable else ""),
        roomName=str(w.get("title") or "")[:100] or "Needs a decision",
        durableChannel=durable,
    )


# --------------------------------------------------------------------------- 4. what it says

_HEADS = {
    "blocked_on_other": "**Blocked:** {title}",
    "irreversible_or_external": "**Needs your go-ahead:** {title}",
    "mandatory_review": "**Ready for review:** {title}",
    "commitment_at_risk": "**Heads-up on {title}**",
}
_ASKS = {
    "blocked_on_other": "I can't clear this myself.",
    "irreversible_or_external": "I'm not taking this step without a yes — it can't be undone.",
    "mandatory_review": "It needs your sign-off before it lands.",
    "commitment_at_risk": "You asked for this and it isn't going to land as promised, so "
    "you're hearing it from me rather than finding out.",
}


def compose_ask(
    work: Any = None,
    trigger: Mapping[str, Any] | None = None,
    targets: Sequence[Any] = (),
    surface: str | None = None,
) -> str:
    """The ask, from a fixed template: a template cannot time out, cost money or invent a name.

    Order: headline, summary, where it stopped, what was tried (at most 5), the ask line,
    then the single question (with options when there are at least two) and the link last.
    """
    w = _obj(work)
    trig = dict(trigger or {})
    kind = trig.get("trigger")
    title = str(w.get("title") or w.get("id") or "this piece of work").strip()
    lines: list[str] = []
    head = _HEADS.get(kind or "")
    lines.append(head.format(title=title) if head else f"**{title}**")
    lines.append("")
    if w.get("summary"):
        lines.append(str(w["summary"]).strip())
    if trig.get("detail"):
        lines.append(f"Where it stopped: {str(trig['detail']).strip()}")
    tried = w.get("tried")
    if isinstance(tried, list | tuple) and tried:
        lines += ["", "What I've already tried:"]
        lines += [f"- {str(t).strip()}" for t in tried[:5]]
    lines += ["", _ASKS.get(kind or "", "")]
    question = str(w.get("question") or "").strip()
    raw_options = w.get("options")
    options = [
        str(o).strip() for o in (raw_options if isinstance(raw_options, list | tuple) else ())
    ]
    options = [o for o in options if o]
    if question:
        lines += ["", question]
        if len(options) >= 2:
            lines += [f"- {o}" for o in options[:5]]
    elif targets:
        names = [str(_plain(t).get("name") or "") for t in targets]
        lines += ["", "@" + " @".join(names) + " — what would you like me to do?"]
    if w.get("link"):
        lines += ["", str(w["link"])]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


# --------------------------------------------------------------------------- 5. the decision


def _ctx_get(ctx: Any, camel: str, snake: str) -> Any:
    if isinstance(ctx, Mapping):
        return ctx.get(camel, ctx.get(snake))
    return getattr(ctx, snake, None)


def decide_engagement(work: Any, ctx: Any) -> EngagementDecision:
    """Decide whether to engage anyone, whom and where, or record why nobody.

    ``ctx`` (dict or object): me, directory, channels, ledger (rows; when given, the
    guardrails apply exactly as in the seed), nowMs (required: this function has no clock),
    limits, supervisorId, maxTargets, degraded.
    """
    now_ms = _ctx_get(ctx, "nowMs", "now_ms")
    if not isinstance(now_ms, int) or isinstance(now_ms, bool):
        raise ValueError("decide_engagement needs ctx.nowMs as an integer: it has no clock")
    w = _obj(work)
    me = str(_ctx_get(ctx, "me", "me") or "")
    work_id = str(w.get("id") or w.get("key") or "").strip()
    why: list[str] = []
    degraded = list(_ctx_get(ctx, "degraded", "degraded") or [])
    base: JSON = {"workId": work_id, "nowMs": now_ms}

    def decision(**fields: Any) -> EngagementDecision:
        return EngagementDecision.model_validate(
            {**base, "why": why, "degraded": degraded, **fields}
        )

    verdict = evaluate_triggers(w)
    fired, suppressed = verdict["fired"], verdict["suppressed"]
    for s in suppressed:
        why.append(f"trigger {s['trigger']} did not fire: {s['code']}: {s['detail']}")

    # The FYI class, named: considered and declined is a stronger statement than not thought of.
    parties = w.get("interestedParties")
    fyi = [str(p) for p in (parties if isinstance(parties, list | tuple) else ()) if p]
    if fyi:
        base["consideredNotEngaged"] = fyi
        plural = "party" if len(fyi) == 1 else "parties"
        why.append(
            f"{len(fyi)} interested {plural} ({', '.join(fyi)}) considered and not messaged: "
            "nothing they must do depends on this, so it belongs where they can pull it"
        )

    if not fired:
        code = suppressed[0]["code"] if suppressed else "self_contained"
        if not suppressed:
            # Say what was examined, so the row proves the threshold was applied.
            risk = _obj(w.get("risk"))
            blocker = _obj(w.get("blocker"))
            named = _given(w.get("blocker"))
            review = _obj(w.get("review"))
            commitment = _obj(w.get("commitment"))
            why.append(
                f"no trigger fired: state={_lc(w.get('state')) or 'in_progress'}, "
                f"blocker={(_lc(blocker.get('kind')) or 'unspecified') if named else 'none'}, "
                f"risk={'+'.join(k for k in RISK_KINDS if risk.get(k)) or 'none'}, "
                f"review={'required' if review.get('required') else 'none'}, "
                f"commitment={'at risk' if commitment.get('atRisk') else 'none'}; nobody's "
                "action or consent is a precondition, so nobody is interrupted"
            )
        reason = (
            "nobody's action is a precondition here; the work goes on by itself"
            if code == "self_contained"
            else suppressed[0]["detail"]
        )
        return decision(reasonCode=code, reason=reason)

    trigger = fired[0]
    base["trigger"] = trigger["trigger"]
    why.append(f"trigger {trigger['trigger']} ({trigger['code']}): {trigger['detail']}")
    why.extend(f"also firing: {f['trigger']} ({f['code']})" for f in fired[1:])

    resolved = resolve_targets(
        w,
        trigger,
        _ctx_get(ctx, "directory", "directory"),
        me,
        supervisor_id=_ctx_get(ctx, "supervisorId", "supervisor_id"),
        max_targets=_ctx_get(ctx, "maxTargets", "max_targets"),
    )
    why.extend(resolved["why"])
    targets: list[Target] = resolved["targets"]
    if not targets:
        # Loud: a blocked piece of work with nobody to ask is a provisioning gap.
        degraded.append("engagement_unroutable")
        return decision(
            reasonCode="unroutable",
            reason=f"{trigger['trigger']} fired but nobody in the directory owns this and the "
            "seat has no supervisor: the ask has no addressee, an org gap rather than a quiet no",
        )

    place = choose_surface(w, targets, _ctx_get(ctx, "channels", "channels") or [], me)
    why.append(f"surface {place['surface']}: {place['why']}")
    dedupe_key = dedupe_key_for(work_id, trigger["code"], targets)

    raw_limits = _ctx_get(ctx, "limits", "limits")
    limits = (
        raw_limits
        if isinstance(raw_limits, Limits)
        else (Limits.model_validate(raw_limits) if raw_limits else DEFAULT_LIMITS)
    )
    guard = check_guardrails(
        _ctx_get(ctx, "ledger", "ledger") or [],
        now_ms=now_ms,
        dedupe_key=dedupe_key,
        work_id=work_id,
        seat_id=me,
        targets=targets,
        creates_room=place["surface"] == "new_room",
        limits=limits,
    )
    engaged = decision(
        engage=True,
        reasonCode=trigger["code"],
        reason=trigger["detail"],
        targets=targets,
        surface=place["surface"],
        channelId=place["channelId"],
        threadRootId=place["threadRootId"],
        roomName=place["roomName"],
        durableChannel=place.get("durableChannel") is True,
        memberIds=place["memberIds"],
        # Everyone who must act is tagged: an unmentioned name in a busy room is not an ask.
        mentions=[Mention(member_id=t.member_id) for t in targets],
        body=compose_ask(w, trigger, targets, place["surface"]),
        dedupeKey=dedupe_key,
    )
    return apply_guardrail(engaged, guard)


def apply_guardrail(decision: EngagementDecision, guard: GuardrailVerdict) -> EngagementDecision:
    """An engaging decision after the guardrails: with its attempt when allowed; when refused,
    a non-engagement that still names the targets, surface and dedupe key it would have used.

    `decide_engagement` ends here; so does the shell when it judges a tally read from Redis
    instead of rows, so both paths give the same decision.
    """
    if not decision.engage:
        return decision
    if guard.allowed:
        # The dedupe key is timeless; the attempt ordinal is what lets a re-ask after the
        # re-engage window reach the wire instead of colliding with the first ask's id.
        return decision.model_copy(update={"attempt": guard.attempt})
    return EngagementDecision(
        trigger=decision.trigger,
        reason_code=guard.code,
        reason=guard.detail,
        targets=decision.targets,
        surface=decision.surface,
        work_id=decision.work_id,
        dedupe_key=decision.dedupe_key,
        guardrail=GuardrailSummary(code=guard.code or "", detail=guard.detail, counts=guard.counts),
        why=(*decision.why, f"guardrail {guard.code}: {guard.detail}"),
        degraded=decision.degraded,
        considered_not_engaged=decision.considered_not_engaged,
        now_ms=decision.now_ms,
    )
