"""The org's members, indexed for the target ladder (`Directory`). Pure.

The shell builds one `Directory` per org version (`OrgView`) and hands it to every decision;
a plain member list (camelCase dicts or `Member` contracts) is indexed on the spot,
which is correct, only slower.

Building one reads every member once (equal role/tagline/team texts are tokenised once). The
indexes the ownership and expertise rungs search are built the first time a rung needs them
and kept on the `Directory`, so a process pays for each once per org version, and a 100,000
member org loads fast:

- ownership matches a scope token as a substring of `owns` phrases and escalation paths. A
  token is alphanumeric, so it can only occur inside one alphanumeric word of a phrase: the
  index lists the members per distinct word, and a token is searched for in the vocabulary of
  distinct words instead of in every member's text.
- expertise matches whole words, and members with the same words share a profile: a scope is
  scored once per profile it touches (and remembered), not once per member.

Both hand the ladder its candidates lazily and in exactly the order it visited them before
(directory order for ownership; best score, then directory order, for expertise), so a rung
stops at its cap instead of collecting and sorting everyone who shares a word.
"""

from __future__ import annotations

import heapq
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import islice
from typing import NamedTuple

from contracts.org import Member
from pipeline.engagement.values import lc, plain, text

ENGAGEABLE_STATUSES = frozenset({"active", "online", "busy"})

_STOPWORD_TEXT = (
    "the and for with from that this into our are was who what when how why can not but all any its"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_MEMO_LIMIT = 4096  # unique tokens (ticket numbers...) must not grow the memo forever
_RANK_MEMO_LIMIT = 1024  # distinct scopes whose expertise ranking is remembered
_LEVEL_HEAD = 16  # candidates of a score level merged ahead; past them, merged when read
_EXPERTISE_KEYS = ("roleTitle", "title", "tagline", "teamName")


def tokens(text: str) -> list[str]:
    """Meaningful words of a scope phrase: lowercase, at least 3 characters, no stopwords."""
    seen: dict[str, None] = {}
    for tok in _NON_ALNUM.split(text.lower()):
        if len(tok) >= 3 and tok not in _STOPWORDS:
            seen.setdefault(tok, None)
    return list(seen)


class _Entry(NamedTuple):
    """One member as the ladder reads it, normalised when the directory is built.

    A named tuple rather than a frozen dataclass: as immutable, and several times cheaper to
    build, which is most of what loading a 100,000-member org costs."""

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


# The expertise words of each role/tagline/team seen while building one directory: an org has
# far fewer distinct texts than members, and tokenising is the costly part of reading one.
_Words = dict[str | tuple[str, str, str], frozenset[str]]


def _expertise(
    words: _Words, key: str | tuple[str, str, str], expertise_text: str
) -> frozenset[str]:
    hit = words.get(key)
    if hit is None:
        hit = words[key] = frozenset(tokens(expertise_text))
    return hit


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
    expertise: frozenset[str],
) -> _Entry:
    status_ok = not status or status in ENGAGEABLE_STATUSES
    return _Entry(
        mid, name, role, team, supervisor_id, status, status_ok, owns, escalation_path, expertise
    )


def _from_member(m: Member, words: _Words) -> _Entry:
    # Read by attribute: what the camelCase dump of the contract would give, without the dump.
    role, tagline, team = m.role_title, m.tagline, m.team_name
    key = (role, tagline, team)
    expertise = words.get(key)
    if expertise is None:
        expertise = _expertise(words, key, " ".join(x for x in key if x))
    owns, status = m.owns, m.status.lower()
    # Positional and inline: this runs once per member of the org on every load.
    return _Entry(
        m.id,
        m.display_name or m.slug or m.id,
        role,
        team,
        m.supervisor_id or "",
        status,
        not status or status in ENGAGEABLE_STATUSES,
        tuple([o.lower() for o in owns]) if owns else (),
        m.escalation_path.lower(),
        expertise,
    )


def _from_mapping(m: Mapping[str, object], words: _Words) -> _Entry | None:
    mid = text(m.get("id")) or text(m.get("memberId")) or text(m.get("slug"))
    if not mid:
        return None
    owns = m.get("owns")
    expertise_text = " ".join(str(m[k]) for k in _EXPERTISE_KEYS if m.get(k))
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
        expertise=_expertise(words, expertise_text, expertise_text),
    )


def _read(raw: object, words: _Words) -> _Entry | None:
    """One member as an entry; `words` remembers the expertise words of each text seen."""
    if isinstance(raw, Member):
        return _from_member(raw, words)
    m = plain(raw)
    return _from_mapping(m, words) if isinstance(m, Mapping) else None


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


@dataclass(frozen=True, slots=True)
class _WordIndex:
    """Members by the alphanumeric words of one text field (`owns` phrases, escalation paths).

    `t in phrase` for an alphanumeric token `t` holds exactly when `t` is inside one of the
    phrase's alphanumeric words, so the members whose phrases contain `t` are the union of
    the members of the vocabulary words containing `t`.
    """

    vocabulary: _Haystack  # the distinct words; a piece's owner is its word's number
    members: tuple[tuple[int, ...], ...]  # per word: the members using it, in directory order

    @classmethod
    def of(cls, texts: Iterable[tuple[int, str]]) -> _WordIndex:
        # Phrases repeat across members far more than members do, so each distinct phrase is
        # split once and its members are added to its words' lists in bulk.
        by_phrase: dict[str, list[int]] = {}
        for i, phrase in texts:
            if phrase:
                ids = by_phrase.setdefault(phrase, [])
                if not ids or ids[-1] != i:
                    ids.append(i)
        by_word: dict[str, list[list[int]]] = {}
        for phrase, ids in by_phrase.items():
            for word in dict.fromkeys(_NON_ALNUM.split(phrase)):
                if len(word) >= 3:  # a shorter word holds no token
                    by_word.setdefault(word, []).append(ids)
        return cls(
            _Haystack.of(enumerate(by_word)),
            tuple(
                tuple(lists[0]) if len(lists) == 1 else tuple(sorted(set().union(*lists)))
                for lists in by_word.values()
            ),
        )

    def containing(self, tok: str) -> tuple[tuple[int, ...], ...]:
        """Per vocabulary word containing `tok`: its members, in directory order."""
        return tuple(self.members[w] for w in sorted(self.vocabulary.owners_containing(tok)))


@dataclass(frozen=True, slots=True)
class _Profiles:
    """Members grouped by their exact set of expertise words, each word naming its profiles."""

    words: tuple[frozenset[str], ...]
    members: tuple[tuple[int, ...], ...]  # per profile, in directory order
    by_token: Mapping[str, tuple[int, ...]]

    @classmethod
    def of(cls, entries: Sequence[_Entry]) -> _Profiles:
        groups: dict[frozenset[str], list[int]] = {}
        for i, e in enumerate(entries):
            if e.expertise:
                groups.setdefault(e.expertise, []).append(i)
        by_token: dict[str, list[int]] = {}
        for pid, words in enumerate(groups):
            for tok in words:
                by_token.setdefault(tok, []).append(pid)
        return cls(
            tuple(groups),
            tuple(tuple(ids) for ids in groups.values()),
            {tok: tuple(pids) for tok, pids in by_token.items()},
        )

    def ranked(self, scope_tokens: Sequence[str]) -> tuple[_Level, ...]:
        """The expertise rung's candidates as score levels, best first. Scored as the rung
        scores one member: two matched words, or one of five characters, else nobody; a
        strong word adds one."""
        touched: set[int] = set()
        for tok in scope_tokens:
            touched.update(self.by_token.get(tok, ()))
        by_score: dict[int, list[tuple[int, ...]]] = {}
        for pid in touched:
            words = self.words[pid]
            matched = [t for t in scope_tokens if t in words]
            strong = any(len(t) >= 5 for t in matched)
            if len(matched) >= 2 or strong:
                score = len(matched) + (1 if strong else 0)
                by_score.setdefault(score, []).append(self.members[pid])
        return tuple(_Level.of(by_score[s]) for s in sorted(by_score, reverse=True))


@dataclass(frozen=True, slots=True)
class _Level:
    """The members of one expertise score, in directory order: the first few merged once
    (a rung rarely reads further), the rest merged from the profiles' lists only if read."""

    head: tuple[int, ...]
    lists: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, lists: Sequence[tuple[int, ...]]) -> _Level:
        return cls(tuple(islice(_in_order(lists), _LEVEL_HEAD)), tuple(lists))

    def __iter__(self) -> Iterator[int]:
        yield from self.head
        if len(self.head) == _LEVEL_HEAD:
            last = self.head[-1]
            yield from _in_order([ids[bisect_right(ids, last) :] for ids in self.lists])


def _in_order(lists: Sequence[tuple[int, ...]]) -> Iterator[int]:
    """The union of sorted lists, sorted, each index once, produced only as far as read."""
    if len(lists) == 1:
        yield from lists[0]
        return
    last = -1
    for i in heapq.merge(*lists):
        if i != last:
            yield i
            last = i


@dataclass(frozen=True)
class Directory:
    """The org's members, read once, with the ladder's indexes built on first use.

    Build it with `Directory.of(members)` when the org is loaded and keep it for the org
    version: its indexes and memos live on it, so every decision of the process shares them.
    `decide_engagement` also accepts a plain list and indexes it on the spot (correct, only
    slower). The memos are bounded. The entries are immutable, so two threads that race to
    build an index build equal ones, and keeping either is right.
    """

    entries: tuple[_Entry, ...]
    by_id: Mapping[str, _Entry]
    _owns_memo: dict[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict, compare=False)
    _path_memo: dict[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict, compare=False)
    _rank_memo: dict[tuple[str, ...], tuple[_Level, ...]] = field(
        default_factory=dict, compare=False
    )

    @classmethod
    def of(cls, members: Iterable[object] | Directory | None) -> Directory:
        if isinstance(members, Directory):
            return members
        by_id: dict[str, _Entry] = {}
        words: _Words = {}
        for raw in members or ():
            entry = _read(raw, words)
            if entry is not None:
                # A later entry with the same id replaces the earlier one, in the earlier's
                # place, as a map keyed by id keeps its first insertion order.
                by_id[entry.id] = entry
        return cls(entries=tuple(by_id.values()), by_id=by_id)

    def __len__(self) -> int:
        return len(self.entries)

    def engageable(self, entry: _Entry, me: str) -> bool:
        """Active, real, and not the seat itself: an ask to an archived seat reaches nobody."""
        return entry.status_ok and bool(entry.id) and entry.id != me

    @cached_property
    def _owns(self) -> _WordIndex:
        return _WordIndex.of((i, o) for i, e in enumerate(self.entries) for o in e.owns)

    @cached_property
    def _paths(self) -> _WordIndex:
        return _WordIndex.of((i, e.escalation_path) for i, e in enumerate(self.entries))

    @cached_property
    def _profiles(self) -> _Profiles:
        return _Profiles.of(self.entries)

    @staticmethod
    def _memoised(
        memo: dict[str, tuple[tuple[int, ...], ...]], tok: str, index: _WordIndex
    ) -> tuple[tuple[int, ...], ...]:
        hit = memo.get(tok)
        if hit is None:
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            hit = memo[tok] = index.containing(tok)
        return hit

    def _owning_lists(self, tok: str) -> tuple[tuple[int, ...], ...]:
        return self._memoised(self._owns_memo, tok, self._owns)

    def _path_lists(self, tok: str) -> tuple[tuple[int, ...], ...]:
        return self._memoised(self._path_memo, tok, self._paths)

    def owners_of(self, tok: str) -> frozenset[int]:
        """Indexes of members whose `owns` contains `tok` (a scope token, see `tokens`)."""
        return frozenset(i for ids in self._owning_lists(tok) for i in ids)

    def paths_naming(self, tok: str) -> frozenset[int]:
        """Indexes of members whose escalation path contains `tok` (a scope token)."""
        return frozenset(i for ids in self._path_lists(tok) for i in ids)

    def owning(self, scope_tokens: Iterable[str]) -> Iterator[int]:
        """Indexes, in directory order and each once, of members whose `owns` or escalation
        path contains any token: the ownership rung's candidates, produced as far as read."""
        lists = [
            ids
            for tok in scope_tokens
            for ids in (*self._owning_lists(tok), *self._path_lists(tok))
        ]
        return _in_order(lists)

    def experts(self, scope_tokens: Sequence[str]) -> Iterator[int]:
        """Indexes of the expertise rung's candidates in its order: best score first, then
        directory order (the old stable sort), produced only as far as the rung reads."""
        key = tuple(scope_tokens)
        levels = self._rank_memo.get(key)
        if levels is None:
            if len(self._rank_memo) >= _RANK_MEMO_LIMIT:
                self._rank_memo.clear()
            levels = self._rank_memo[key] = self._profiles.ranked(key)
        for level in levels:
            yield from level

    def with_expertise(self, scope_tokens: Iterable[str]) -> list[int]:
        """Indexes, in directory order, of members whose role/team words include any token."""
        profiles = self._profiles
        touched: set[int] = set()
        for tok in scope_tokens:
            touched.update(profiles.by_token.get(tok, ()))
        return sorted(i for pid in touched for i in profiles.members[pid])


EMPTY_DIRECTORY = Directory.of(())
