"""The work controller's records, one per seat (issue 12 point 3; docs/architecture.md): the
controller state, the turn in flight, the launch-failure streak, the session record, the last
turns, and the operator's pause and steering, as ONE value per seat, `keys.seat_run(seat)`
(`rev`, `doc`), with its last finished turns in a list beside it (`keys.seat_turns(seat)`).
The turns are kept out of the doc because the controller reads and parses the doc of every
seat it decides, and the turns, which almost no decision needs, were most of its bytes (a
record with ten turns is ~4.5 KB and ~34 us to parse; without them ~0.6 KB and ~6 us). A
write pushes the turns its record gained (`seat_run_write.lua`), under the same
compare-and-set; `get` reads them all, the controller's `observe` only the last one (an
escalation quotes its detail). A record written before the split keeps its turns in the doc
until its next write moves them to the list.

Every write is a compare-and-set on `rev` (`seat_run_commit.lua`), so two writers racing on a
seat (two ticks, a tick and a turn's outcome, an operator's pause) never both win: the loser
reads again and decides again. That is what makes "never two turns at once" hold with two
beats, a redelivered tick or a worker killed between decide and enqueue: beginning a turn is
a write of the seat's record, and only one such write can follow a given read.

`observe` reads what a tick needs of many seats in one round trip, whatever the number of
seats (`controller_observe.lua`): the records and every news input (the inbox, the notices,
the backlog, the work intents' counters, and the seat's recent asks still on their way).

The due index (issue 27): the controller decides only the seats that can have something to
decide. `keys.CONTROLLER_DUE` scores each such seat by when it is next due (`pipeline/turns.py`
`next_due_ms`: a retry, the quiet interval, an announcement's delay, a lease's end, a
republish time); every script that makes a seat's news wakes it in the same step
(`controller_wake.lua`: an inbox item, a backlog or work-intent write, any write of its record
but the tick's own). A tick `take`s what is due, oldest first and at most a batch, claiming
each until a time; its `settle` writes the records it changed and puts each seat back at its
next due time, or takes it out. A claim a dead tick left runs out, and the seat is due again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

from contracts.controller import SeatRun, TurnRecord
from contracts.org import ControllerOptions
from pipeline.turns import HISTORY, Control, Observed, apply_control
from workers.stores import keys
from workers.stores.backlog import REVISION_FIELD
from workers.stores.intents import RUNNABLE_FIELD, WORK_FIELD
from workers.stores.scripts import script, text

DELIVERY_WINDOW_MS = 3_600_000  # a seat's asks this recent may still be on their way
DELIVERY_SCAN = 100  # at most this many of a seat's recent asks are looked at
# A chain of ticks (a batch left seats due, and the next tick follows at once) counts as
# running this long after its last take: beat sends no tick beside it meanwhile, and sends
# again once a chain whose next tick was lost has run out (a worker died, or a new beat
# leader refused the old one's tick).
CHAIN_MS = 5_000
CAS_ATTEMPTS = 20


class Conflict(Exception):
    """A compare-and-set that kept losing to other writers."""


@dataclass(frozen=True)
class Read:
    """A seat's record as read, with the revision its write must match and the ids of the
    finished turns already in its list (a write pushes the record's other turns)."""

    rev: int
    run: SeatRun
    listed: frozenset[str] = frozenset()

    def write(self, after: SeatRun) -> list[str | int]:
        """What seat_run_write.lua reads to write `after` over this read: the revision, the
        doc without its turns, and the turns it gained."""
        listed = self.listed
        new = [t.model_dump_json(by_alias=True) for t in after.turns if t.turn_id not in listed]
        return [self.rev, after.model_dump_json(by_alias=True, exclude=_TURNS), len(new), *new]


@dataclass(frozen=True)
class Taken:
    """What a tick took from the due index: the seats, oldest-due first; the reconciliation
    pass's cursor when its step is due (else None); the claim they hold; whether seats due
    by then were left for a next batch."""

    seats: tuple[str, ...]
    reconcile: int | None
    claim_ms: int
    more: bool = False


@dataclass(frozen=True)
class IndexState:
    size: int  # seats in the due index
    soonest_ms: int | None
    org: str | None  # the fingerprint of the org it was filled for
    cursor: int
    next_step_ms: int | None


class SeatRuns:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._commit = script(client, "seat_run_commit")
        self._take = script(client, "controller_take")
        self._settle = script(client, "controller_commit")
        self._observe = script(client, "controller_observe")

    def get(self, seat_id: str) -> Read:
        """The seat's record with all its finished turns (one round trip)."""
        pipe = self.r.pipeline(transaction=True)  # the record and its turns of one moment
        pipe.hmget(keys.seat_run(seat_id), ["rev", "doc"])
        pipe.lrange(keys.seat_turns(seat_id), 0, -1)
        (rev, doc), turns = pipe.execute()
        return read_record(seat_id, rev, doc, turns)

    def commit(self, writes: Sequence[tuple[Read, SeatRun]]) -> list[bool]:
        """Write each (read, record) whose revision is unchanged since the read, waking each
        seat written for the controller; True for each one written."""
        if not writes:
            return []
        args: list[str | int] = [HISTORY]
        names: list[str] = []
        for read, run in writes:
            args += [run.seat_id, *read.write(run)]
            names += [keys.seat_run(run.seat_id), keys.seat_turns(run.seat_id)]
        flags = self._commit(keys=[*names, *keys.CONTROLLER_WAKE], args=args)
        return [int(f) == 1 for f in flags]

    # ------------------------------------------------------------------ the due index

    def take(
        self,
        *,
        now_ms: int,
        limit: int,
        claim_until_ms: int,
        org: str,
        step: int = 0,
        chain_until_ms: int | None = None,
    ) -> Taken | None:
        """The seats due by `now_ms`, oldest-due first, at most `limit` (less `step` when the
        reconciliation pass's step of that many seats is due), each claimed until
        `claim_until_ms`; None when the index was filled for another org than `org`
        (nothing taken: `fill` it). When seats due are left (`more`), a chain of ticks is
        marked running until `chain_until_ms` (`due_now` says nothing is due meanwhile);
        the chain's last take clears the mark."""
        chain = now_ms + CHAIN_MS if chain_until_ms is None else chain_until_ms
        reply = self._take(
            keys=[keys.CONTROLLER_DUE, keys.CONTROLLER_CLOCK, keys.CONTROLLER_STATE],
            args=[now_ms, limit, claim_until_ms, org, step, chain],
        )
        kind = text(reply[0])
        if kind == "org":
            return None
        cursor = text(reply[1])
        return Taken(
            seats=tuple(text(s) for s in reply[2:]),
            reconcile=int(cursor) if cursor else None,
            claim_ms=claim_until_ms,
            more=kind == "more",
        )

    def claim(self, seat_ids: Sequence[str], *, claim_until_ms: int) -> None:
        """Claim seats the tick decides though they were not due (a reconciliation step)."""
        pipe = self.r.pipeline(transaction=False)
        for chunk in _chunks(seat_ids, 1000):
            pipe.zadd(keys.CONTROLLER_DUE, dict.fromkeys(chunk, claim_until_ms))
        pipe.execute()

    def fill(self, seat_ids: Sequence[str], *, org: str, now_ms: int, next_step_ms: int) -> None:
        """Wake every seat of the org `org` (the index was filled for another, or never):
        each is decided again, and the reconciliation pass starts over from the first seat
        at `next_step_ms` (every seat is looked at now)."""
        pipe = self.r.pipeline(transaction=False)
        for chunk in _chunks(seat_ids, 1000):
            pipe.zadd(keys.CONTROLLER_DUE, dict.fromkeys(chunk, now_ms), lt=True)
        pipe.hset(keys.CONTROLLER_STATE, "org", org)
        pipe.hset(keys.CONTROLLER_STATE, "cursor", 0)
        pipe.hset(keys.CONTROLLER_STATE, "next", next_step_ms)
        pipe.execute()

    def settle(
        self,
        writes: Sequence[tuple[Read, SeatRun]],
        due: Sequence[tuple[str, int | None]],
        *,
        claim_ms: int,
        reconcile: tuple[int, int] | None = None,
    ) -> list[bool]:
        """A tick's commit: each (read, record) written if its revision is unchanged since
        the read (True for each one written), and each decided (seat, next due ms or None)
        put back in the index; `reconcile` is the pass's (next step ms, cursor)."""
        args: list[str | int] = [claim_ms, len(writes), *(reconcile or ("", "")), HISTORY]
        names = [keys.CONTROLLER_DUE, keys.CONTROLLER_STATE]
        for read, run in writes:
            args += read.write(run)
            names += [keys.seat_run(run.seat_id), keys.seat_turns(run.seat_id)]
        for seat, at in due:
            args += [seat, "" if at is None else at]
        flags = self._settle(keys=names, args=args)
        return [int(f) == 1 for f in flags]

    def wake(self, seat_ids: Sequence[str]) -> None:
        """Wake seats whose news was made outside a script (the controller decides them on
        its next tick)."""
        pipe = self.r.pipeline(transaction=False)
        clock = self.r.get(keys.CONTROLLER_CLOCK)
        at = 0 if clock is None else int(text(clock))
        for chunk in _chunks(seat_ids, 1000):
            pipe.zadd(keys.CONTROLLER_DUE, dict.fromkeys(chunk, at), lt=True)
        pipe.execute()

    def refill(self) -> None:
        """Forget which org the index was filled for: the next tick wakes every seat."""
        self.r.hdel(keys.CONTROLLER_STATE, "org")

    def due_now(self, *, now_ms: int, org: str) -> bool:
        """Whether a tick at `now_ms` has anything to do: a seat due, the reconciliation
        pass's step, or an index filled for another org; but not while a chain of ticks
        runs (it takes what is due). One round trip."""
        pipe = self.r.pipeline(transaction=False)
        pipe.zrangebyscore(keys.CONTROLLER_DUE, "-inf", now_ms, start=0, num=1)
        pipe.hmget(keys.CONTROLLER_STATE, ["org", "next", "chain"])
        seats, (filled, step, chain) = pipe.execute()
        if filled is None or text(filled) != org:
            return True
        if chain is not None and int(text(chain)) > now_ms:
            return False
        return bool(seats) or (step is not None and int(text(step)) <= now_ms)

    def index(self) -> IndexState:
        """The due index as it stands: its size, the soonest due, and the pass's cursor."""
        pipe = self.r.pipeline(transaction=False)
        pipe.zcard(keys.CONTROLLER_DUE)
        pipe.zrange(keys.CONTROLLER_DUE, 0, 0, withscores=True)
        pipe.hmget(keys.CONTROLLER_STATE, ["org", "cursor", "next"])
        size, first, (org, cursor, step) = pipe.execute()
        return IndexState(
            size=int(size),
            soonest_ms=int(first[0][1]) if first else None,
            org=None if org is None else text(org),
            cursor=_int(cursor),
            next_step_ms=None if step is None else int(text(step)),
        )

    def update(
        self, seat_id: str, change: Callable[[SeatRun], SeatRun | None]
    ) -> tuple[SeatRun, SeatRun] | None:
        """Read, change, write back, again on a conflict: `(before, after)`, or None when
        `change` returned None (nothing to write)."""
        for _ in range(CAS_ATTEMPTS):
            read = self.get(seat_id)
            after = change(read.run)
            if after is None:
                return None
            if self.commit([(read, after)])[0]:
                return read.run, after
        raise Conflict(f"seat {seat_id}: {CAS_ATTEMPTS} writers in a row beat this one")

    def control(self, seat_id: str, what: Control, *, options: ControllerOptions) -> SeatRun:
        """An operator's control on the seat (pipeline/turns.py `apply_control`)."""
        updated = self.update(seat_id, lambda run: apply_control(run, what, options))
        assert updated is not None  # a control always writes
        return updated[1]

    def observe(self, seat_ids: Sequence[str], *, now_ms: int) -> list[tuple[Read, Observed]]:
        """Every seat's record (with its last finished turn only) and news inputs, in one
        script (`controller_observe.lua`)."""
        names = [keys.PROJECT]
        for seat in seat_ids:
            names += [
                keys.seat_run(seat),
                keys.seat_turns(seat),
                keys.inbox_meta(seat),
                keys.seat_state(seat),
                keys.backlog(seat),
                keys.backlog_open(seat),
                keys.intent_meta(seat),
                keys.by_seat(seat),
            ]
        reply = self._observe(
            keys=names,
            args=[
                now_ms - DELIVERY_WINDOW_MS,
                DELIVERY_SCAN,
                REVISION_FIELD,
                RUNNABLE_FIELD,
                WORK_FIELD,
                keys.OP_PREFIX,
            ],
        )
        started, paused, card = reply[0:3]
        project: dict[str, object] = {
            "started": _flag(started, True),
            "paused": _flag(paused, False),
        }
        if card:
            project["card"] = text(card)
        out: list[tuple[Read, Observed]] = []
        for i, seat in enumerate(seat_ids):
            (rev, doc, turn, last, acked, since, end, notices, revision, open_items, runnable,
             work, flying) = reply[3 + 13 * i : 16 + 13 * i]  # fmt: skip
            out.append(
                (
                    read_record(seat, rev or None, doc or None, [turn] if turn else None),
                    Observed(
                        inbox_last=_int(last),
                        inbox_acked=_int(acked),
                        project_run=(_int(since), _int(end)),
                        notices=_int(notices),
                        backlog_revision=_int(revision),
                        backlog_open=int(open_items),
                        intents_runnable=_int(runnable),
                        intents_revision=_int(work),
                        pending_deliveries=int(flying),
                        project=project,
                    ),
                )
            )
        return out

    def set_project(self, *, started: bool | None = None, paused: bool | None = None) -> None:
        fields: dict[str | bytes, str | bytes] = {
            k: "1" if v else "0"
            for k, v in (("started", started), ("paused", paused))
            if v is not None
        }
        if fields:
            self.r.hset(keys.PROJECT, mapping=fields)  # type: ignore[arg-type]
            self.refill()  # every seat's news changed


def _chunks(items: Sequence[str], size: int) -> list[Sequence[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def read_record(seat_id: str, rev: object, doc: object, turns: Sequence[object] | None) -> Read:
    """A record as read: its doc, with the turns of its list (all, or the last); a doc of
    before the split keeps its own turns when the list is empty (its next write lists them)."""
    if doc is None:
        run, at = SeatRun(seat_id=seat_id), 0
    else:
        body, at = text(doc), int(text(rev))
        if turns and '"turns":' not in body:
            # The turns spliced into the doc: one parse of one document, not one per turn
            # and a copy (the controller reads thousands of records a tick).
            body = f'{body[:-1]},"turns":[{",".join(text(t) for t in turns)}]}}'
            run = SeatRun.model_validate_json(body)
            return Read(at, run, frozenset(t.turn_id for t in run.turns))
        run = SeatRun.model_validate_json(body)
    if not turns:
        return Read(at, run)
    listed = tuple(TurnRecord.model_validate_json(text(t)) for t in turns)
    ids = frozenset(t.turn_id for t in listed)
    # A doc with turns of its own beside a list (a process of before the split wrote it after
    # one of now): its turns are the newer; the next write lists them.
    merged = (*listed, *(t for t in run.turns if t.turn_id not in ids))[-HISTORY:]
    return Read(at, run.model_copy(update={"turns": merged}), ids)


_TURNS = {"turns"}


def _int(value: object) -> int:
    """A number the script read; a missing one (Lua's false, nil from a pipeline) is 0."""
    return 0 if value is None or value is False or value == 0 else int(text(value))


def _flag(value: object, default: bool) -> bool:
    return default if value is None or value is False else text(value) == "1"
