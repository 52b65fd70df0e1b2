"""The org's members, indexed once for the target ladder (`Directory`). Pure.

The shell builds one `Directory` per org load and hands it to every decision; the seed's plain
member list (camelCase dicts or `Member` contracts) is indexed on the spot, which is correct,
only slower.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from contracts.org import Member
from pipeline.engagement.values import lc, plain, text

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
        # The seed's name falls back to `id`, not `memberId`: an entry keyed only by
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
                # place (the seed builds a Map by id, which keeps first insertion order).
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
