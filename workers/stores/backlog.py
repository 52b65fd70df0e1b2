"""Each seat's backlog (issue 10): what the goal steward dispatches to a seat, and the seat
closing an item when it is done.

A seat has a hash `keys.backlog(seat)` of item id -> the item's JSON (`BacklogEntry`), a
zset `keys.backlog_open(seat)` of the open ids scored by `addedAtMs`, oldest first, and one
such zset per objective (`keys.backlog_open_for(seat, objective)`), so that a steward run
reads an objective's open items at a cost that does not grow with the seat's other work. The seat's
work revision lives in the same hash under the reserved field `REVISION_FIELD` (`:revision`;
an item id never starts with ':', `BacklogEntry` refuses one), so one script bumps it in the
same step that adds the item: it rises by exactly one per newly added item and never on a
duplicate or a close. Two scripts, `backlog_add` and `backlog_done`, each write everything or
nothing.

Every item's seat is in one org-wide hash, `keys.BACKLOG_OWNERS` (item id -> seat id),
written by `backlog_add` in the same step as the item: `find` answers an item by its id
alone (what the claim routes are given) in one lookup plus the read of the item, at any
number of seats, where it read every seat's backlog before (issue 27). The index keeps the
first seat an id was added to, and keeps an item after its close (done items stay on their
backlog and are still answered). Backlogs written before the index existed are indexed by a
migration on read: the first `find` that misses while the org's seat set (`version`) was
never indexed reads every one of those seats' item ids once (sorted by seat, first seat
wins: the order the claim routes used to look in), writes them to the index and marks the
seat set done (`:indexed:<version>`; in the process only, when none of the seats has a
backlog: an org with no backlog yet is left as it was); the ingress does the same as it starts
(`ensure_indexed`), so a request meets it only when the seat set changed while the ingress
ran. After that a miss costs one lookup; a seat set
indexed once is never read again (a seat that joins brings no unindexed items: everything
added since is indexed as it is added).

Idempotent by id, first write wins: the id is the steward's deterministic dispatch id, so a
second add of it is the same dispatch repeated (a rerun after a crash, a second worker), and
it adds nothing. Content that differs under the same id is still `duplicate`, not a conflict:
the planner derives the id from the objective, the candidate and the sample decided on, so a
difference can only be a later run's framing (a reworded reason, a newer claim) of work the
seat already has; replacing it would change an item under the seat's feet, and refusing it
would make the steward's rerun fail on work that is already dispatched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import redis

from contracts.backlog import BacklogAddVerb, BacklogDoneVerb, BacklogEntry, BacklogView
from workers.stores import keys
from workers.stores.scripts import script, text

REVISION_FIELD = ":revision"
INDEXED_FIELD = ":indexed:"  # + a seat set's version, in keys.BACKLOG_OWNERS
MIGRATE_CHUNK = 500  # seats read per round trip by the migration on read


@dataclass(frozen=True)
class Added:
    status: BacklogAddVerb
    revision: int  # the seat's work revision after the add


@dataclass(frozen=True)
class Closed:
    status: BacklogDoneVerb
    entry: BacklogEntry | None  # the stored entry; None when `unknown`


class Backlog:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        # The seat sets this process found indexed, or indexed itself (`ensure_indexed`).
        self._indexed: set[str] = set()
        self._add = script(client, "backlog_add")
        self._done = script(client, "backlog_done")

    def add(self, entry: BacklogEntry) -> Added:
        """Put `entry` on its seat's backlog once, bumping the seat's revision; `duplicate`
        (nothing written) when its id is there already, whatever its content."""
        reply = self._add(
            keys=[
                keys.backlog(entry.seat_id),
                keys.backlog_open(entry.seat_id),
                keys.backlog_open_for(entry.seat_id, entry.objective_key),
                keys.BACKLOG_OWNERS,
                *keys.CONTROLLER_WAKE,
            ],
            args=[
                entry.id,
                entry.model_dump_json(by_alias=True),
                entry.added_at_ms,
                REVISION_FIELD,
                entry.seat_id,
            ],
        )
        verb: BacklogAddVerb = "added" if text(reply[0]) == "added" else "duplicate"
        return Added(verb, int(reply[1]))

    def get(self, seat_id: str, item_id: str) -> BacklogEntry | None:
        """The item `item_id` of the seat, open or done; None when there is none."""
        if item_id.startswith(":"):
            return None
        body = self.r.hget(keys.backlog(seat_id), item_id)
        return None if body is None else BacklogEntry.model_validate_json(body)

    def owner(self, item_id: str) -> str | None:
        """The seat whose backlog holds `item_id`, as the owner index has it (None: not
        indexed: no such item, or one written before the index and not migrated yet)."""
        if item_id.startswith(":"):
            return None
        value = self.r.hget(keys.BACKLOG_OWNERS, item_id)
        return None if value is None else text(value)

    def find(
        self, item_id: str, *, version: str, seats: Callable[[], Iterable[str]]
    ) -> BacklogEntry | None:
        """The item `item_id`, on whichever seat's backlog holds it; None when none does.
        One lookup in the owner index (and the read of the item). `version` names the org's
        seat set and `seats` lists it: only when the index misses and that seat set was never
        indexed are the seats' backlogs read, once (`index_seats`), and the index asked again."""
        if item_id.startswith(":"):
            return None
        seat, indexed = self.r.hmget(keys.BACKLOG_OWNERS, [item_id, INDEXED_FIELD + version])
        if seat is None and indexed is None and version not in self._indexed:
            self.index_seats(seats(), version)
            seat = self.r.hget(keys.BACKLOG_OWNERS, item_id)
        return None if seat is None else self.get(text(seat), item_id)

    def ensure_indexed(self, seat_ids: Iterable[str], version: str) -> int | None:
        """`index_seats` unless the seat set `version` was indexed already (None then:
        nothing written). The ingress runs it as it starts, so that a request's miss (a 404,
        which must write nothing) finds its seat set indexed."""
        if version in self._indexed:
            return None
        if self.r.hexists(keys.BACKLOG_OWNERS, INDEXED_FIELD + version):
            self._indexed.add(version)
            return None
        return self.index_seats(seat_ids, version)

    def index_seats(self, seat_ids: Iterable[str], version: str) -> int:
        """Put every item of these seats' backlogs in the owner index (an id already there
        keeps its seat; the seats in sorted order, so the first seat holding an id wins),
        then mark the seat set `version` indexed: in Redis when any of them has a backlog
        (an org with none writes nothing: a process that finds it so remembers it, and the
        next one to start reads the empty backlogs once again), in this process always.
        Returns how many ids it added. Run again (another process at the same time, a retry
        after a crash before the mark) it adds nothing twice."""
        ordered = sorted(set(seat_ids))
        added = 0
        found_any = False
        for at in range(0, len(ordered), MIGRATE_CHUNK):
            chunk = ordered[at : at + MIGRATE_CHUNK]
            read = self.r.pipeline(transaction=False)
            for seat in chunk:
                read.hkeys(keys.backlog(seat))
            found = read.execute()
            write = self.r.pipeline(transaction=False)
            for seat, ids in zip(chunk, found, strict=True):
                found_any = found_any or bool(ids)
                for raw in ids:
                    item = text(raw)
                    if not item.startswith(":"):
                        write.hsetnx(keys.BACKLOG_OWNERS, item, seat)
            added += sum(int(bool(n)) for n in write.execute())
        if found_any:
            self.r.hset(keys.BACKLOG_OWNERS, INDEXED_FIELD + version, len(ordered))
        self._indexed.add(version)
        return added

    def revision(self, seat_id: str) -> int:
        """The seat's work revision: how many items were ever added to its backlog."""
        value = self.r.hget(keys.backlog(seat_id), REVISION_FIELD)
        return 0 if value is None else int(value)

    def open_items(self, seat_id: str, objective_key: str | None = None) -> list[BacklogEntry]:
        """The seat's open items (for one objective, if named), oldest first (by `addedAtMs`,
        then id)."""
        index = (
            keys.backlog_open(seat_id)
            if objective_key is None
            else keys.backlog_open_for(seat_id, objective_key)
        )
        ids = [text(i) for i in self.r.zrange(index, 0, -1)]
        if not ids:
            return []
        bodies = self.r.hmget(keys.backlog(seat_id), ids)
        return [BacklogEntry.model_validate_json(b) for b in bodies if b is not None]

    def items(self, seat_id: str, view: BacklogView = "all") -> list[BacklogEntry]:
        """The seat's items in `view`, oldest first (by `addedAtMs`, then id)."""
        stored = self.r.hgetall(keys.backlog(seat_id))
        entries = [
            BacklogEntry.model_validate_json(body)
            for field, body in stored.items()
            if text(field) != REVISION_FIELD
        ]
        chosen = [e for e in entries if e.shown_in(view)]
        return sorted(chosen, key=lambda e: (e.added_at_ms, e.id))

    def done(self, seat_id: str, item_id: str, *, by: str, now_ms: int) -> Closed:
        """Close the seat's item once: `done` the first time, `already_done` after (the first
        close's `doneBy` and `doneAtMs` stay), `unknown` for no such item; only `done` writes."""
        entry = self.get(seat_id, item_id)
        if entry is None:
            return Closed("unknown", None)
        if not entry.is_open:
            return Closed("already_done", entry)
        closed = entry.closed(by=by, now_ms=now_ms)
        # An item's content changes only here, and the script's ZREM lets one close through.
        reply = self._done(
            keys=[
                keys.backlog(seat_id),
                keys.backlog_open(seat_id),
                keys.backlog_open_for(seat_id, entry.objective_key),
                *keys.CONTROLLER_WAKE,
            ],
            args=[item_id, closed.model_dump_json(by_alias=True), seat_id],
        )
        verb = text(reply[0])
        if verb == "done":
            return Closed("done", closed)
        if verb == "already_done":
            return Closed("already_done", self.get(seat_id, item_id))
        return Closed("unknown", None)
