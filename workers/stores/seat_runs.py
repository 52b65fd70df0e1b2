"""The work controller's records, one per seat (issue 12 point 3, DESIGN.md section 10): the
controller state, the turn in flight, the launch-failure streak, the session record, the last
turns, and the operator's pause and steering, as ONE value per seat, `keys.seat_run(seat)`
(`rev`, `doc`).

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

from contracts.controller import SeatRun
from contracts.org import ControllerOptions
from pipeline.turns import Control, Observed, apply_control
from workers.stores import keys
from workers.stores.backlog import REVISION_FIELD
from workers.stores.intents import RUNNABLE_FIELD, WORK_FIELD
from workers.stores.scripts import script, text

DELIVERY_WINDOW_MS = 3_600_000  # a seat's asks this recent may still be on their way
DELIVERY_SCAN = 100  # at most this many of a seat's recent asks are looked at
CAS_ATTEMPTS = 20


class Conflict(Exception):
    """A compare-and-set that kept losing to other writers."""


@dataclass(frozen=True)
class Read:
    """A seat's record as read, with the revision its write must match."""

    rev: int
    run: SeatRun


@dataclass(frozen=True)
class Taken:
    """What a tick took from the due index: the seats, oldest-due first; the reconciliation
    pass's cursor when its step is due (else None); the claim they hold."""

    seats: tuple[str, ...]
    reconcile: int | None
    claim_ms: int


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
        rev, doc = self.r.hmget(keys.seat_run(seat_id), ["rev", "doc"])
        return _read(seat_id, rev, doc)

    def commit(self, writes: Sequence[tuple[str, int, SeatRun]]) -> list[bool]:
        """Write each (seat, revision read at, record) whose revision is unchanged, waking each
        seat written for the controller; True for each one written."""
        if not writes:
            return []
        args: list[str | int] = []
        for seat, rev, run in writes:
            args += [rev, run.model_dump_json(by_alias=True), seat]
        flags = self._commit(
            keys=[*(keys.seat_run(s) for s, _, _ in writes), *keys.CONTROLLER_WAKE], args=args
        )
        return [int(f) == 1 for f in flags]

    # ------------------------------------------------------------------ the due index

    def take(self, *, now_ms: int, limit: int, claim_until_ms: int, org: str) -> Taken | None:
        """The seats due by `now_ms`, oldest-due first, at most `limit`, each claimed until
        `claim_until_ms`; None when the index was filled for another org than `org` (nothing
        taken: `fill` it)."""
        reply = self._take(
            keys=[keys.CONTROLLER_DUE, keys.CONTROLLER_CLOCK, keys.CONTROLLER_STATE],
            args=[now_ms, limit, claim_until_ms, org],
        )
        if text(reply[0]) == "org":
            return None
        cursor = text(reply[1])
        return Taken(
            seats=tuple(text(s) for s in reply[2:]),
            reconcile=int(cursor) if cursor else None,
            claim_ms=claim_until_ms,
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
        writes: Sequence[tuple[str, int, SeatRun]],
        due: Sequence[tuple[str, int | None]],
        *,
        claim_ms: int,
        reconcile: tuple[int, int] | None = None,
    ) -> list[bool]:
        """A tick's commit: each (seat, revision read at, record) written if its revision is
        unchanged (True for each one written), and each decided (seat, next due ms or None)
        put back in the index; `reconcile` is the pass's (next step ms, cursor)."""
        args: list[str | int] = [claim_ms, len(writes), *(reconcile or ("", ""))]
        for _seat, rev, run in writes:
            args += [rev, run.model_dump_json(by_alias=True)]
        for seat, at in due:
            args += [seat, "" if at is None else at]
        flags = self._settle(
            keys=[
                keys.CONTROLLER_DUE,
                keys.CONTROLLER_STATE,
                *(keys.seat_run(s) for s, _, _ in writes),
            ],
            args=args,
        )
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
        pass's step, or an index filled for another org. One round trip."""
        pipe = self.r.pipeline(transaction=False)
        pipe.zrangebyscore(keys.CONTROLLER_DUE, "-inf", now_ms, start=0, num=1)
        pipe.hmget(keys.CONTROLLER_STATE, ["org", "next"])
        seats, (filled, step) = pipe.execute()
        if seats or filled is None or text(filled) != org:
            return True
        return step is not None and int(text(step)) <= now_ms

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
            if self.commit([(seat_id, read.rev, after)])[0]:
                return read.run, after
        raise Conflict(f"seat {seat_id}: {CAS_ATTEMPTS} writers in a row beat this one")

    def control(self, seat_id: str, what: Control, *, options: ControllerOptions) -> SeatRun:
        """An operator's control on the seat (pipeline/turns.py `apply_control`)."""
        updated = self.update(seat_id, lambda run: apply_control(run, what, options))
        assert updated is not None  # a control always writes
        return updated[1]

    def observe(self, seat_ids: Sequence[str], *, now_ms: int) -> list[tuple[Read, Observed]]:
        """Every seat's record and news inputs, in one script (`controller_observe.lua`)."""
        names = [keys.PROJECT]
        for seat in seat_ids:
            names += [
                keys.seat_run(seat),
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
            (rev, doc, last, acked, since, end, notices, revision, open_items, runnable, work,
             flying) = reply[3 + 12 * i : 15 + 12 * i]  # fmt: skip
            out.append(
                (
                    _read(seat, rev or None, doc or None),
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


def _read(seat_id: str, rev: object, doc: object) -> Read:
    if doc is None:
        return Read(0, SeatRun(seat_id=seat_id))
    return Read(int(text(rev)), SeatRun.model_validate_json(text(doc)))


def _int(value: object) -> int:
    """A number the script read; a missing one (Lua's false, nil from a pipeline) is 0."""
    return 0 if value is None or value is False or value == 0 else int(text(value))


def _flag(value: object, default: bool) -> bool:
    return default if value is None or value is False else text(value) == "1"
