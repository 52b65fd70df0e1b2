"""The org file (YAML or JSON): members, channels, seats and objectives, validated at start.

`OrgSource` re-reads the file when it changes. A re-read that fails keeps the last good org
and says so in `degraded` — a directory we could not read must never look like an empty org,
which would route every ask to `unroutable`.
"""

from __future__ import annotations

import bisect
import difflib
import gc
import hashlib
import io
import json
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from contracts import Channel, Member, Org, Seat
from contracts.goals import Objective
from pipeline.directedness import aliases_of, own_ids_of
from pipeline.engagement import Directory, Rooms
from pipeline.fanout import Roster, RosterSeat, org_snapshot, org_version
from workers.errors import ConfigError

Loc = tuple[str | int, ...]


# libyaml's loader where PyYAML was built with it (its wheels are): the pure-Python one took
# ~35 ms to read the bundled org file, paid by every process that loads it, a prefork pool
# child each time it is recycled included. The two build the same data from a YAML file.
_YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Lines:
    """Where each field of the org file is written (1-based lines), for errors that name the
    line as well as the field. YAML only: a JSON org file's errors name the field alone. The
    file is composed again for its lines only when an error asks for one."""

    def __init__(self, text: str, path: Path) -> None:
        self.text = text
        self.yaml = path.suffix != ".json"
        self._root: yaml.Node | None = None
        self._composed = False

    @property
    def root(self) -> yaml.Node | None:
        if not self._composed:
            self._composed = True
            if self.yaml:
                try:
                    self._root = yaml.compose(self.text, Loader=yaml.SafeLoader)
                except yaml.YAMLError:
                    self._root = None
        return self._root

    def of(self, loc: Loc) -> int | None:
        node = self.root
        line = None if node is None else node.start_mark.line + 1
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                node = next(
                    (
                        v
                        for k, v in node.value
                        if isinstance(k, yaml.ScalarNode) and k.value == part
                    ),
                    None,
                )
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                node = node.value[part] if 0 <= part < len(node.value) else None
            else:
                node = None
            if node is None:
                break
            line = node.start_mark.line + 1
        return line


def _where(path: Path, lines: Lines, loc: Loc) -> str:
    line = lines.of(loc)
    field = ".".join(str(p) for p in loc) or "(top level)"
    return f"{path}:{line}: {field}" if line is not None else f"{path}: {field}"


def _describe(exc: ValidationError, path: Path, lines: Lines) -> str:
    found = [f"{path}: the org file is invalid"]
    for err in exc.errors():
        found.append(f"  {_where(path, lines, tuple(err['loc']))}: {err['msg']}")
    return "\n".join(found)


def parse_org(text: str, path: Path) -> Org:
    try:
        data: Any = json.loads(text) if path.suffix == ".json" else yaml.load(text, _YAML_LOADER)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot parse the org file: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the org file must be a mapping with members, channels, seats")
    lines = Lines(text, path)
    try:
        org = Org.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, path, lines)) from exc
    problems = reference_problems(org)
    if problems:
        raise ConfigError(
            "\n".join(f"{_where(path, lines, loc)}: {problem}" for loc, problem in problems)
        )
    return org


def reference_problems(org: Org) -> list[tuple[Loc, str]]:
    """Every id the org file names that it does not define, each at its field, in file order:
    a typo in a `supervisorId` or an objective's `ownerId` would otherwise send escalations to
    nobody, a channel member nobody knows would make the channel's audience wrong."""
    problems: list[tuple[Loc, str]] = []
    member_ids = {m.id for m in org.members}
    seat_ids = {s.member_id for s in org.seats}
    channel_ids = {c.id for c in org.channels}
    not_member = "is not a member of the org"

    def member(loc: Loc, value: str | None) -> None:
        if value is not None and value not in member_ids:
            close = difflib.get_close_matches(value, member_ids, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append((loc, f"{value!r} {not_member}{hint}"))

    dupes = {mid for mid, n in Counter(m.id for m in org.members).items() if n > 1}
    if dupes:
        problems.append((("members",), f"duplicate id(s) {sorted(dupes)}"))
    for i, m in enumerate(org.members):
        member(("members", i, "supervisorId"), m.supervisor_id)
    for i, c in enumerate(org.channels):
        for j, mid in enumerate(c.member_ids):
            member(("channels", i, "memberIds", j), mid)
    for i, seat in enumerate(org.seats):
        member(("seats", i, "memberId"), seat.member_id)
        member(("seats", i, "supervisorId"), seat.supervisor_id)
        member(("seats", i, "operatorId"), seat.operator_id)
    keys = {k for k, n in Counter(o.key for o in org.objectives).items() if n > 1}
    if keys:
        problems.append((("objectives",), f"duplicate key(s) {sorted(keys)}"))
    for i, objective in enumerate(org.objectives):
        member(("objectives", i, "ownerId"), objective.owner_id)
        member(("objectives", i, "reviewBy"), objective.review_by)
        member(("objectives", i, "adoptedBy"), objective.adopted_by)
        if objective.seat_id is not None and objective.seat_id not in seat_ids:
            problems.append(
                (("objectives", i, "seatId"), f"{objective.seat_id!r} is not a seat of the org")
            )
    policy = org.decisions
    if policy is not None:
        member(("decisions", "ownerId"), policy.owner_id)
        member(("decisions", "resolverId"), policy.resolver_id)
        if policy.channel_id and policy.channel_id not in channel_ids:
            problems.append(
                (
                    ("decisions", "channelId"),
                    f"{policy.channel_id!r} is not a channel the org file lists; add it under "
                    "channels (with its kind and members) or remove channelId",
                )
            )
    return problems


def load_org(path: Path) -> Org:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the org file {path}: {exc}") from exc
    return parse_org(text, path)


# ------------------------------------------------------------ one load per version, shared
#
# A worker at 10,000 seats spent 1.4 s loading the org file (issue 27), on start and each time
# a prefork pool process was recycled (every 1,000 tasks). Where it went (bench.lookups,
# 10,000 seats, JSON): parsing ~50 ms, pydantic's validation ~110-210 ms, the reference
# check ~15 ms, `OrgView.of` ~200-350 ms, and on top of them the cyclic collector, which the
# hundreds of thousands of objects a load allocates set off again and again, each time
# walking everything the process holds: 0.8 s of the 1.1 s measured in a process that held
# an org already. A YAML file of that size takes ~1.7 s to parse with libyaml alone.
#
# So a load is paid once per version of the file and process tree: `shared_view` keeps the
# last view built from each file with the SHA-256 of its bytes, and answers it again for the
# same bytes (a read and a digest: ~3 ms for the 4 MB of a 10,000-seat file) to every
# OrgSource of the process; a process forked from one that loaded it (a prefork pool
# process, from the worker's main process: workers/celery_app.py `SharedOrg`, which also
# keeps the main process's copy fresh) inherits it. A build runs with the collector paused.

_SHARED_LOCK = threading.Lock()
# The file's resolved path -> (the SHA-256 of the bytes it was built from, the view).
_SHARED: dict[str, tuple[str, OrgView]] = {}


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off while a load allocates its objects (none of them is garbage
    before the load ends, so a collection could free nothing of them), back as it was after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def shared_view(path: Path) -> OrgView:
    """The org file at `path`, loaded and indexed (no learned identities), built once per
    version of its bytes in this process (and inherited by a process forked after it); a
    ConfigError for a file that cannot be read or is invalid (nothing kept then)."""
    try:
        raw = path.read_bytes()
        key = str(path.resolve())
    except OSError as exc:
        raise ConfigError(f"cannot read the org file {path}: {exc}") from exc
    digest = hashlib.sha256(raw).hexdigest()
    with _SHARED_LOCK:  # one build of a version, whichever thread asks first
        kept = _SHARED.get(key)
        if kept is not None and kept[0] == digest:
            return kept[1]
        # As `Path.read_text` reads it: the locale's encoding, universal newlines.
        text = io.TextIOWrapper(io.BytesIO(raw)).read()
        with collector_paused():
            view = OrgView.of(parse_org(text, path))
        _SHARED[key] = (digest, view)
        return view


GITHUB_ALIAS = "github:"
PREFIXES_KEPT = 64  # `SeatsByName`: the name prefixes whose matches it keeps sorted


def seat_name(member: Member | None, member_id: str) -> str:
    """What a seat is called: its member's display name, else its member id."""
    return (member.display_name if member is not None else "") or member_id


class SeatsByName:
    """The org's seats in name order, `(name, member id)`, indexed once per org version so
    that a page of them (`find_agents`) costs the same at any number of seats: a bisection
    to the cursor, then the page. A name prefix is matched case-insensitively (casefolded)
    while the order stays the names' own, so the seats a prefix matches are not one run of
    that order: they are found by a bisection of the casefolded names, sorted once and kept
    for the `PREFIXES_KEPT` prefixes used last (each later page of the same prefix, and
    every other caller's, is a bisection again)."""

    def __init__(self, seats: Iterable[Seat], members: Mapping[str, Member]) -> None:
        named = [(seat_name(members.get(s.member_id), s.member_id), s.member_id, s) for s in seats]
        named.sort(key=lambda e: (e[0], e[1]))
        self.entries: tuple[tuple[str, str, Seat], ...] = tuple(named)
        self._keys = [(name, sid) for name, sid, _seat in named]
        self._folded = sorted((name.casefold(), rank) for rank, (name, _s, _e) in enumerate(named))
        self._folded_names = [f for f, _rank in self._folded]
        self._matching = lru_cache(maxsize=PREFIXES_KEPT)(self._ranks)

    def _ranks(self, prefix: str) -> tuple[int, ...]:
        """The positions in name order of the seats whose casefolded name starts with
        `prefix` (itself casefolded), ascending."""
        found = []
        for at in range(bisect.bisect_left(self._folded_names, prefix), len(self._folded)):
            folded, rank = self._folded[at]
            if not folded.startswith(prefix):
                break
            found.append(rank)
        return tuple(sorted(found))

    def page(
        self, prefix: str, after: tuple[str, str] | None, size: int
    ) -> tuple[list[tuple[str, str, Seat]], bool]:
        """Up to `size` seats whose casefolded name starts with `prefix` (casefolded), in
        name order, each after `after` (a `(name, member id)` cursor, None from the start),
        and whether more follow."""
        start = 0 if after is None else bisect.bisect_right(self._keys, after)
        if not prefix:
            chosen = self.entries[start : start + size + 1]
            return list(chosen[:size]), len(chosen) > size
        ranks = self._matching(prefix)
        at = bisect.bisect_left(ranks, start)
        chosen_ranks = ranks[at : at + size + 1]
        return [self.entries[r] for r in chosen_ranks[:size]], len(chosen_ranks) > size


@dataclass
class OrgView:
    """One loaded org, indexed for decisions."""

    org: Org
    directory: Directory
    channels: tuple[Channel, ...]
    rooms: Rooms
    seats: dict[str, Seat]
    roster: Roster  # the seats, indexed for resolving an event for all of them
    channel_by_id: dict[str, Channel]
    github_logins: dict[str, str]
    objective_by_key: dict[str, Objective] = field(default_factory=dict)
    # Every member by id, built once per org version (a look-up per send or request must not
    # walk a 100,000-member org).
    member_by_id: dict[str, Member] = field(default_factory=dict)
    # The identities learned at start the roster was built with (`of`, `with_learned`).
    learned: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        org: Org,
        learned: Mapping[str, tuple[str, ...]] | None = None,
        *,
        directory: Directory | None = None,
    ) -> OrgView:
        """The org indexed; `learned` adds, per seat, identities its app posts as that were
        learned at start (`learn_slack_identity`) rather than written in the file.

        `directory` is this same org's `Directory` when one was built already: it is built
        once per org version, and the indexes it builds on first use are kept with it."""
        members = {m.id: m for m in org.members}
        learned = learned or {}
        seats: dict[str, Seat] = {}
        entries: list[RosterSeat] = []
        for seat in org.seats:
            # A seat answers to its own aliases AND its member's (a Slack id written on the
            # member only must still make `<@U…>` a mention and the seat's message an echo).
            member = members.get(seat.member_id)
            wire = seat.to_wire()
            # Its app's bot user is the seat too (a `<@U…>` of it is a mention); the app's
            # `bot_id` only ever authors posts, so it marks an echo and nothing else.
            bot_user = (seat.slack_bot_user_id,) if seat.slack_bot_user_id else ()
            wire["aliases"] = [*seat.aliases, *(member.aliases if member else ()), *bot_user]
            wire["names"] = tuple(str(n) for n in wire.get("names") or ())  # a memo key as is
            own = [seat.slack_bot_id, *learned.get(seat.member_id, ())]
            wire["ownIds"] = [i for i in own if i]
            entry = RosterSeat(seat.member_id, wire, aliases_of(wire), own_ids_of(wire))
            entries.append(entry)
            for ident in entry.aliases:
                seats.setdefault(ident, seat)
        # A member alias `github:<login>` maps that GitHub login to the member.
        logins = {
            alias.strip()[len(GITHUB_ALIAS) :].lower(): member.id
            for member in org.members
            for alias in member.aliases
            if alias.strip().lower().startswith(GITHUB_ALIAS)
        }
        return cls(
            org=org,
            directory=directory if directory is not None else Directory.of(org.members),
            channels=org.channels,
            rooms=Rooms.of(org.channels),
            seats=seats,
            roster=Roster.of(entries),
            channel_by_id={c.id: c for c in org.channels},
            github_logins=logins,
            objective_by_key={o.key: o for o in org.objectives},
            member_by_id=members,
            learned=dict(learned),
        )

    def with_learned(self, learned: Mapping[str, tuple[str, ...]]) -> OrgView:
        """This org with `learned` as the seats' learned identities, as `of(self.org,
        learned, directory=self.directory)` builds it, at the cost of the seats whose learned
        identities differ from this view's (a pool process learns its Slack bot as it
        starts: one seat, where `of` built all 10,000 again). Only the roster changes: the
        identities a seat posts as are its `own` ids, in `by_alias`, nowhere else."""
        changed = {
            sid
            for sid in {*self.learned, *learned}
            if tuple(self.learned.get(sid, ())) != tuple(learned.get(sid, ()))
        }
        if not changed:
            return replace(self, learned=dict(learned))
        entries = list(self.roster.seats)
        dropped: dict[str, set[int]] = {}
        added: dict[str, set[int]] = {}
        for i, (seat, entry) in enumerate(zip(self.org.seats, entries, strict=True)):
            if seat.member_id not in changed:
                continue
            wire = dict(entry.wire)
            own = [seat.slack_bot_id, *learned.get(seat.member_id, ())]
            wire["ownIds"] = [x for x in own if x]
            new = RosterSeat(seat.member_id, wire, entry.aliases, own_ids_of(wire))
            entries[i] = new
            before, after = entry.aliases | entry.own, new.aliases | new.own
            for alias in before - after:
                dropped.setdefault(alias, set()).add(i)
            for alias in after - before:
                added.setdefault(alias, set()).add(i)
        by_alias = dict(self.roster.by_alias)
        for alias in {*dropped, *added}:
            kept = (set(by_alias.get(alias, ())) - dropped.get(alias, set())) | added.get(
                alias, set()
            )
            if kept:
                by_alias[alias] = tuple(sorted(kept))
            else:
                by_alias.pop(alias, None)
        roster = replace(self.roster, seats=tuple(entries), by_alias=by_alias)
        return replace(self, roster=roster, learned=dict(learned))

    @cached_property
    def people(self) -> dict[str, tuple[tuple[str, ...], str]]:
        """Every member's aliases and display name by id (what the Slack adapter addresses
        people by), built once per org version."""
        return {m.id: (m.aliases, m.display_name) for m in self.org.members}

    def member(self, member_id: str) -> Member | None:
        """A member by exact id."""
        return self.member_by_id.get(member_id)

    @cached_property
    def member_by_alias(self) -> dict[str, str]:
        """Every member's aliases (a Slack user id, an email, `github:<login>`), trimmed and
        case-folded, to the member's id, built once per org version; an alias two members
        share goes to the first in the file."""
        found: dict[str, str] = {}
        for m in self.org.members:
            for alias in m.aliases:
                found.setdefault(alias.strip().casefold(), m.id)
        return found

    def member_of(self, ident: str) -> str | None:
        """The member an identity is: a member id, a member's alias, or a seat's alias (its
        member); None when nobody in the org answers to it."""
        if ident in self.member_by_id:
            return ident
        key = ident.strip().casefold()
        found = self.member_by_alias.get(key)
        if found is not None:
            return found
        seat = self.seats.get(key)
        return seat.member_id if seat is not None else None

    @cached_property
    def snapshot(self) -> tuple[str, str]:
        """(version, JSON) of what a trace needs of this org to derive the verdicts the
        directedness stage did not store: the seats and the listed channels."""
        snap = org_snapshot(self.roster, self.channels)
        return org_version(snap), json.dumps(snap, separators=(",", ":"), sort_keys=True)

    @cached_property
    def seats_by_name(self) -> SeatsByName:
        """The seats in name order, indexed for paging (`find_agents`), once per org version."""
        return SeatsByName(self.org.seats, self.member_by_id)

    @cached_property
    def seat_ids(self) -> tuple[str, ...]:
        """Every seat's member id, sorted, once per org version."""
        return tuple(sorted({s.member_id for s in self.org.seats}))

    @cached_property
    def seat_set_version(self) -> str:
        """A digest of the seat set (`seat_ids`): what changes when a seat joins or leaves,
        and nothing else does (the backlog's owner index is migrated once per seat set)."""
        return hashlib.sha256("\n".join(self.seat_ids).encode()).hexdigest()[:16]

    @property
    def objectives(self) -> tuple[Objective, ...]:
        """Every objective in the org file, in file order."""
        return self.org.objectives

    def objective(self, key: str) -> Objective | None:
        """An objective by its exact key."""
        return self.objective_by_key.get(key)

    def seat(self, ident: str) -> Seat | None:
        """A seat by member id or any of its or its member's aliases (case-insensitive)."""
        return self.seats.get(ident.strip().casefold())


@dataclass
class OrgSource:
    path: Path
    _view: OrgView | None = None
    # What the file was (mtime ns, size, inode) when last loaded or found invalid: another
    # read waits for the file to change. `_loaded`: when the view held was loaded.
    _stamp: tuple[int, int, int] | None = None
    _loaded: tuple[int, int, int] | None = None
    degraded: list[str] = field(default_factory=list)
    # seat -> identities its app posts as, learned at start; kept across re-reads of the file
    learned: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path) -> OrgSource:
        """Load the org now; a bad file is a ConfigError at start, not at the first report.
        The same file already loaded in this process (or in the one this was forked from)
        is not loaded again (`shared_view`)."""
        src = cls(path)
        stamp = _stamp(path)
        src._view = shared_view(path)
        src._stamp = src._loaded = stamp
        return src

    def current(self) -> tuple[OrgView, list[str]]:
        """The org to decide with, and what is degraded about it. A changed file is loaded
        again (once per version per process: `shared_view`); one that fails keeps the last
        good org, degraded, until the file changes again."""
        assert self._view is not None
        try:
            stamp = _stamp(self.path)
        except OSError as exc:
            self._degrade(exc)
            return self._view, list(self.degraded)
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._view = self._learned_on(shared_view(self.path))
                self._loaded = stamp
                self.degraded = []
            except ConfigError as exc:
                self._degrade(exc)
        elif self.degraded and stamp == self._loaded:  # the file loaded is back (moved away)
            self.degraded = []
        return self._view, list(self.degraded)

    def _degrade(self, exc: Exception) -> None:
        first = str(exc).splitlines()[0]
        self.degraded = [f"directory_read_failed:{first}; using the org loaded before"]

    def _learned_on(self, view: OrgView) -> OrgView:
        # Same org, same members: only the seats' identities change (`with_learned`).
        return view.with_learned(self.learned) if self.learned or view.learned else view

    def learn_identities(self, seat_id: str, identities: tuple[str, ...]) -> None:
        """Add identities a seat's app posts as (its posts are then its own echo)."""
        self.learn_many({seat_id: identities})

    def learn_many(self, learned: Mapping[str, tuple[str, ...]]) -> None:
        """`learn_identities` for several seats at once: the view is built again once."""
        assert self._view is not None
        for seat_id, identities in learned.items():
            known = self.learned.get(seat_id, ())
            self.learned[seat_id] = tuple(dict.fromkeys((*known, *(i for i in identities if i))))
        self._view = self._learned_on(self._view)


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size, st.st_ino


def learn_slack_identity(source: OrgSource, auth_test: Mapping[str, object]) -> str:
    """Make what Slack's `auth.test` says the configured bot is (`user_id`, `bot_id`) a
    seat's own identity, so a post by it, even one carrying only the `bot_id` (a
    response_url or incoming-webhook post), is `own_echo` and never lands in an inbox.

    The seat whose aliases hold the bot user gets the `bot_id`. When no seat answers to the
    bot user, the app posts for every seat (one token for the whole org): both ids become
    every seat's own, as identities that mark an echo and are never a mention. Returns
    what was learned, for the start-up line. Call it after `auth.test` succeeds, in every
    process that runs the directedness stage (`seatwire up`, `seatwire worker`)."""
    user_id = str(auth_test.get("user_id") or "").strip()
    bot_id = str(auth_test.get("bot_id") or "").strip()
    if not user_id and not bot_id:
        return "auth.test named no bot user and no bot_id: no Slack identity learned"
    view, _ = source.current()
    seat = view.seat(user_id) if user_id else None
    if seat is not None:
        source.learn_identities(seat.member_id, (bot_id,))
        return f"seat {seat.member_id} posts on Slack as {user_id} ({bot_id or 'no bot_id'})"
    seats = [s.member_id for s in view.org.seats]
    source.learn_many({seat_id: (user_id, bot_id) for seat_id in seats})
    return (
        f"the Slack bot {user_id or '?'} ({bot_id or 'no bot_id'}) is no seat's alias: its "
        f"posts count as the own echo of every seat ({', '.join(seats) or 'none'})"
    )
