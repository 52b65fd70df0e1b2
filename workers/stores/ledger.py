"""The engagement ledger: a row for every outcome, the guardrail indexes that count them, and
each ask's send op (its reservation, lease, fencing token and outcome).

Every multi-key change is one Lua script, and every script is idempotent for its operation
id, because redis-py may re-send a command whose reply was lost.
"""

from __future__ import annotations

import functools
import heapq
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import redis

from contracts import EngagementDecision, GuardrailVerdict, LedgerRow, Limits, Target
from contracts.guardrails import DAY_MS
from contracts.journal import OP_LIVE_STATES, OpFinalState, ReleaseCounter
from contracts.send import SendStart
from pipeline.guardrails import Tally, judge, target_ids
from workers.errors import PermanentError
from workers.stores import keys
from workers.stores.dlq import Delivery, delivery
from workers.stores.journal import LEDGER_RETENTION_MS, LEDGER_STREAM_CAP, RETENTION_MS
from workers.stores.onward import NO_ONWARD, Onward
from workers.stores.scripts import script, text

# How long the windowed indexes the limits count in (by target, work, seat, rooms) keep an
# entry: the longest window (a day) and as much again for clock skew. Counting reads only
# these, never the ledger rows. Shorter only for a soak that cannot wait days (bench/capacity).
WINDOW_KEEP_MS = 2 * DAY_MS

# The ops `rows_for` reads back as rows: the live ones and the engaged (what the limits count
# of an op that has no ledger row yet, or whose row is elsewhere).
ROWS_OF_OPS = frozenset({*OP_LIVE_STATES, "engaged"})


# How many rows one ledger search looks at, at most, before it answers with where it stopped.
SEARCH_BUDGET = 20_000
CLOCK_SLACK_MS = 60_000


class LedgerCursor(NamedTuple):
    """Where a ledger search stands: the entry id and the seat of the last row it looked at
    (ids are per stream, so two seats' rows may share one; the seat breaks the tie)."""

    entry_id: str
    seat: str

    def key(self) -> tuple[int, int, str]:
        return (*_id(self.entry_id), self.seat)

    def text(self) -> str:
        return f"{self.entry_id}~{self.seat}"

    @classmethod
    def parse(cls, value: str) -> LedgerCursor:
        """A cursor from `text()`; ValueError when it is not one."""
        entry_id, sep, seat = value.partition("~")
        if not sep or not seat:
            raise ValueError(f"not a ledger cursor: {value!r}")
        _id(entry_id)
        return cls(entry_id, seat)


@dataclass(frozen=True)
class Searched:
    """A ledger search's answer: the rows that matched, newest first, as (seat, entry id,
    row); where the next (older) page starts (None: nothing older is left to look at); how
    many rows were looked at; `complete`: the page is full or the search reached the end, so
    no matching row newer than `next` was left out."""

    rows: list[tuple[str, str, LedgerRow]]
    next: LedgerCursor | None
    scanned: int
    complete: bool


def _id(entry_id: str) -> tuple[int, int]:
    """A stream entry id (`ms-seq`) as numbers; ValueError when it is not one."""
    ms, sep, seq = entry_id.partition("-")
    if not sep:
        raise ValueError(f"not a stream entry id: {entry_id!r}")
    return int(ms), int(seq)


class _Heads:
    """The streams of a ledger search, merged newest first: each stream read in chunks (the
    next chunk twice the last, to 1,000) from where it stands, one round trip a refill."""

    def __init__(
        self, r: redis.Redis, seats: list[str], before: LedgerCursor | None, floor: str
    ) -> None:
        self.r = r
        self.floor = floor
        self.before = before
        self.heap: list[tuple[tuple[int, int, _Desc], int]] = []
        self.buffers: list[list[tuple[str, bytes]]] = [[] for _ in seats]
        self.seats = seats
        self.tops = [before.entry_id if before is not None else "+" for _ in seats]
        self.chunks = [0 for _ in seats]
        self.more = [True for _ in seats]

    def fill(self, chunk: int) -> None:
        """The first chunk of every stream; again for a stream whose chunk was all on or
        before the cursor, until each has a row or is read to its end."""
        which = list(range(len(self.seats)))
        chunks = [chunk] * len(which)
        while which:
            self._read(which, chunks)
            which = [i for i in which if not self.buffers[i] and self.more[i]]
            chunks = [min(1_000, self.chunks[i] * 2) for i in which]

    def _read(self, which: list[int], chunks: list[int]) -> None:
        """Read the next chunk of each stream in `which`, in one round trip, behind what its
        buffer holds."""
        pipe = self.r.pipeline(transaction=False)
        for i, chunk in zip(which, chunks, strict=True):
            pipe.xrevrange(keys.ledger_stream(self.seats[i]), self.tops[i], self.floor, count=chunk)
        for i, chunk, entries in zip(which, chunks, pipe.execute(), strict=True):
            self._took(i, entries or [], chunk)

    def _took(self, i: int, entries: list[Any], chunk: int) -> None:
        self.chunks[i] = chunk
        self.more[i] = len(entries) == chunk
        seat = self.seats[i]
        fresh = []
        for entry_id, fields in entries:
            eid = text(entry_id)
            key = (*_id(eid), seat)
            if self.before is not None and key >= self.before.key():
                continue  # on this page's cursor or newer: shown already
            fresh.append((eid, fields[b"row"] if b"row" in fields else fields["row"]))
        if entries:
            self.tops[i] = "(" + text(entries[-1][0])
        was_empty = not self.buffers[i]
        self.buffers[i] = fresh[::-1] + self.buffers[i]  # oldest first: the newest pops last
        if was_empty and self.buffers[i]:
            eid = self.buffers[i][-1][0]
            heapq.heappush(self.heap, (_neg((*_id(eid), seat)), i))

    def _refill(self, i: int) -> None:
        """Stream `i` ran dry: read on, and in the same round trip every other stream about to
        run dry (the streams are drained in time order, so they run dry together)."""
        while not self.buffers[i] and self.more[i]:
            which = [i] + [
                j
                for j in range(len(self.seats))
                if j != i and self.more[j] and len(self.buffers[j]) * 2 <= self.chunks[j]
            ]
            self._read(which, [min(1_000, self.chunks[j] * 2) for j in which])

    def done(self) -> bool:
        """Whether every stream is read to its end (or to the floor)."""
        return not self.heap

    def pop(self) -> tuple[str, str, bytes] | None:
        """The newest row left: (seat, entry id, its JSON); None when every stream is done."""
        if not self.heap:
            return None
        _key, i = heapq.heappop(self.heap)
        entry_id, raw = self.buffers[i].pop()
        if self.buffers[i]:
            nxt = self.buffers[i][-1][0]
            heapq.heappush(self.heap, (_neg((*_id(nxt), self.seats[i])), i))
        elif self.more[i]:
            self._refill(i)
        return self.seats[i], entry_id, raw


@functools.total_ordering
class _Desc:
    """A string that sorts backwards (a heap pops the larger seat first on a tie of ids)."""

    __slots__ = ("s",)

    def __init__(self, s: str) -> None:
        self.s = s

    def __lt__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.s > other.s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.s == other.s

    def __hash__(self) -> int:
        return hash(self.s)


def _neg(key: tuple[int, int, str]) -> tuple[int, int, _Desc]:
    """A heap key that pops the newest (largest) id first, the larger seat first on a tie:
    exactly the descending order of `LedgerCursor.key`."""
    ms, seq, seat = key
    return (-ms, -seq, _Desc(seat))


class Finished(NamedTuple):
    """`Ledger.finish`'s answer: ok, done (already final) or stale; and the verb of the ask's
    commit written with it (ask_commit_common.lua's), None when none was given or it did not
    run (stale)."""

    verb: str
    committed: str | None = None


class Ledger:
    """The engagement ledger: a stream of rows per seat plus the indexes the limits count."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        limits: Limits,
        reservation_ttl_ms: int = 1_800_000,
        retention_ms: int = RETENTION_MS,
        ledger_retention_ms: int = LEDGER_RETENTION_MS,
        window_keep_ms: int = WINDOW_KEEP_MS,
    ) -> None:
        self.r = client
        self.limits = limits
        self.window_keep_ms = window_keep_ms
        self.reservation_ttl_ms = reservation_ttl_ms
        self.retention_ms = retention_ms
        self.ledger_retention_ms = ledger_retention_ms
        self._reserve = script(client, "guard_reserve")
        self._tally = script(client, "guard_tally")
        self._begin = script(client, "send_begin")
        self._begin_ask = script(client, "send_begin_ask")
        self._finish = script(client, "op_finish")
        self._finish_ask = script(client, "op_finish_ask")
        self._abandon = script(client, "send_abandon")
        self._release = script(client, "send_release")
        self._renew = script(client, "send_renew")
        self._note = script(client, "send_note")

    # ---------------------------------------------------------------- guardrails

    def reserve(
        self,
        op_id: str,
        *,
        decision: EngagementDecision,
        seat_id: str,
        tracking_id: str,
        now_ms: int | None = None,
        onward: Onward | None = None,
    ) -> GuardrailVerdict:
        """Check every limit and, if allowed, hold a place, in one atomic step; a place held
        now pushes `onward` (the send stage's message, the attempt written in) in the same
        step, one found held pushes nothing (workers/stores/onward.py)."""
        _, verdict = self.reserve_started(
            op_id,
            decision=decision,
            seat_id=seat_id,
            tracking_id=tracking_id,
            now_ms=now_ms,
            onward=onward,
        )
        assert verdict is not None  # no start to refuse it
        return verdict

    def reserve_started(
        self,
        op_id: str,
        *,
        decision: EngagementDecision,
        seat_id: str,
        tracking_id: str,
        now_ms: int | None = None,
        onward: Onward | None = None,
        start: tuple[list[str], list[str]] | None = None,
    ) -> tuple[Delivery | None, GuardrailVerdict | None]:
        """`reserve`, with the guardrail stage's start run first in the same script (`start`,
        its keys and arguments: workers/stores/dlq.py `start_of`): the start's answer, and
        the verdict when the start was admitted (None, nothing reserved, when it was not)."""
        ids = target_ids(decision.targets)
        reply = self._reserve(
            keys=[
                *self._reserve_keys(op_id, decision, seat_id, tracking_id, ids),
                *([] if start is None else start[0]),
                *([] if onward is None else [onward.queue]),
                *keys.CONTROLLER_WAKE,
            ],
            args=self._reserve_args(
                op_id, decision, seat_id, tracking_id, ids, now_ms, onward, start
            ),
        )
        if text(reply[0]) == "start":
            return delivery(reply[1:]), None
        if start is None:
            return None, self._verdict(op_id, decision, seat_id, ids, reply)
        admitted = Delivery("run", deliveries=int(reply[-1]))
        return admitted, self._verdict(op_id, decision, seat_id, ids, reply[:-1])

    def _verdict(
        self, op_id: str, decision: EngagementDecision, seat_id: str, ids: list[str], reply: Any
    ) -> GuardrailVerdict:
        allowed, code = int(reply[0]), text(reply[1])
        last = int(reply[4])
        counted = Tally(
            same_key=int(reply[3]),
            last_same_at_ms=None if last < 0 else last,
            per_target={t: int(n) for t, n in zip(ids, reply[10:], strict=True)},
            work=int(reply[5]),
            seat=int(reply[6]),
            rooms=int(reply[7]),
        )
        verdict = judge(
            counted,
            now_ms=int(reply[8]),
            work_id=decision.work_id,
            seat_id=seat_id,
            creates_room=decision.surface == "new_room",
            limits=self.limits,
        )
        # The script decided atomically; the pure judge must agree on the same tally.
        if verdict.allowed != bool(allowed) or (verdict.code or "") != code:
            raise PermanentError(
                f"guardrail script and judge disagree for {op_id}: script={code or 'allowed'} "
                f"judge={verdict.code or 'allowed'}"
            )
        return verdict

    @staticmethod
    def _reserve_keys(
        op_id: str, decision: EngagementDecision, seat_id: str, tracking_id: str, ids: list[str]
    ) -> list[str]:
        return [
            keys.op(op_id),
            keys.PENDING,
            keys.by_dedupe_key(decision.dedupe_key or ""),
            keys.by_work(decision.work_id),
            keys.by_seat(seat_id),
            keys.rooms_of(seat_id),
            keys.journal(tracking_id),
            *(keys.by_target(t) for t in ids),
        ]

    def _reserve_args(
        self,
        op_id: str,
        decision: EngagementDecision,
        seat_id: str,
        tracking_id: str,
        ids: list[str],
        now_ms: int | None,
        onward: Onward | None,
        start: tuple[list[str], list[str]] | None,
    ) -> list[str | int]:
        lim = self.limits
        fields = {
            "seatId": seat_id,  # first: the script wakes this seat (guard_reserve.lua)
            "workId": decision.work_id,
            "dedupeKey": decision.dedupe_key or "",
            "targets": json.dumps(ids),
            "trackingId": tracking_id,
        }
        return [
            op_id,
            "" if now_ms is None else now_ms,
            lim.reengage_after_ms,
            lim.max_attempts_per_ask,
            lim.per_target_per_day,
            lim.per_work_per_day,
            lim.per_seat_per_hour,
            lim.rooms_per_day,
            "1" if decision.surface == "new_room" else "0",
            self.reservation_ttl_ms,
            keys.OP_PREFIX,
            self.retention_ms,
            len(ids),
            self.window_keep_ms,
            *(NO_ONWARD if onward is None else onward.args()),
            "" if start is None else json.dumps(start[1]),
            *ids,
            *(x for kv in fields.items() for x in kv),
        ]

    def tally(self, *, decision: EngagementDecision, seat_id: str, now_ms: int) -> Tally:
        """The counts `reserve` would judge, read in one round trip without reserving
        (guard_tally.lua). Read-only, so expired reservations are not purged here: they are
        left out of the counts instead."""
        ids, named = self.tally_keys(decision, seat_id)
        return self.tally_of(ids, self._tally(keys=named, args=[now_ms, len(ids)]))

    @staticmethod
    def tally_keys(decision: EngagementDecision, seat_id: str) -> tuple[list[str], list[str]]:
        """The targets a tally counts, and its keys (guard_count.lua's, in order)."""
        ids = target_ids(decision.targets)
        named = [
            keys.by_dedupe_key(decision.dedupe_key or ""),
            keys.by_work(decision.work_id),
            keys.by_seat(seat_id),
            keys.rooms_of(seat_id),
            keys.PENDING,
            *(keys.by_target(t) for t in ids),
        ]
        return ids, named

    @staticmethod
    def tally_of(ids: Sequence[str], reply: Sequence[Any]) -> Tally:
        """A tally from guard_count.lua's reply."""
        same, last, work, seat, rooms, *per_target = (int(x) for x in reply)
        return Tally(
            same_key=same,
            last_same_at_ms=None if last < 0 else last,
            per_target=dict(zip(ids, per_target, strict=True)),
            work=work,
            seat=seat,
            rooms=rooms,
        )

    def begin_send(
        self,
        op_id: str,
        *,
        tracking_id: str,
        token: str,
        lease_ms: int,
        now_ms: int | None = None,
    ) -> SendStart:
        """Record the intent to send (under a lease) before anything goes on the wire."""
        _, begun = self.begin_send_started(
            op_id, tracking_id=tracking_id, token=token, lease_ms=lease_ms, now_ms=now_ms
        )
        assert begun is not None  # no start to refuse it
        return begun

    def begin_send_started(
        self,
        op_id: str,
        *,
        tracking_id: str,
        token: str,
        lease_ms: int,
        now_ms: int | None = None,
        start: tuple[list[str], list[str]] | None = None,
    ) -> tuple[Delivery | None, SendStart | None]:
        """`begin_send`, with the send stage's start run first in the same script (`start`,
        its keys and arguments: workers/stores/dlq.py `start_of`): the start's answer (None
        without one) and how the op began, None when the start was not admitted (the op
        untouched)."""
        named, args = self._begin_call(op_id, tracking_id, token, lease_ms, now_ms, start)
        started, begun, _rest = self._begun(self._begin(keys=named, args=args), start)
        return started, begun

    def begin_send_asking(
        self,
        op_id: str,
        *,
        tracking_id: str,
        token: str,
        lease_ms: int,
        attempt: int,
        create: tuple[list[str], list[Any]],
        now_ms: int | None = None,
        start: tuple[list[str], list[str]] | None = None,
    ) -> tuple[Delivery | None, SendStart | None, list[Any] | None]:
        """`begin_send_started`, recording an ask in the same step when the op begins (`go`
        or `reconcile`) at `attempt` (send_begin_ask.lua): `create` is the ask store's call
        (workers/stores/asks.py `create_call`). Also the create's reply, None when no ask was
        recorded."""
        named, args = self._begin_call(op_id, tracking_id, token, lease_ms, now_ms, start)
        if start is None:
            args.append("")
        reply = self._begin_ask(keys=[*named, *create[0]], args=[*args, attempt, *create[1]])
        return self._begun(reply, start)

    @staticmethod
    def _begin_call(
        op_id: str,
        tracking_id: str,
        token: str,
        lease_ms: int,
        now_ms: int | None,
        start: tuple[list[str], list[str]] | None,
    ) -> tuple[list[str], list[Any]]:
        """send_begin_common.lua's keys and arguments."""
        named = [
            keys.op(op_id),
            keys.PENDING,
            keys.journal(tracking_id),
            *([] if start is None else start[0]),
        ]
        args: list[Any] = [
            "" if now_ms is None else now_ms,
            token,
            lease_ms,
            op_id,
            *([] if start is None else [json.dumps(start[1])]),
        ]
        return named, args

    @staticmethod
    def _begun(
        reply: Sequence[Any], start: tuple[list[str], list[str]] | None
    ) -> tuple[Delivery | None, SendStart | None, list[Any] | None]:
        """A begin's reply read: the start's answer, how the op began, and whatever the
        script answered after the begin's three values (None: nothing)."""
        verb, info, attempt, *rest = reply
        if text(verb) == "start":
            return delivery(reply[1:]), None, None
        stored = text(attempt)
        begun = SendStart(
            verb=text(verb),  # a SendBeginVerb: pydantic refuses any other
            info=text(info),
            attempt=int(stored) if stored else None,
        )
        return (None if start is None else Delivery("run")), begun, (rest or None)

    def finish(
        self,
        op_id: str,
        *,
        outcome: OpFinalState,
        row: LedgerRow,
        tracking_id: str,
        token: str = "",
        now_ms: int,
        message_id: str = "",
        channel_id: str = "",
        idempotency_id: str = "",
        work_id: str = "",
        sent_ttl_ms: int | None = None,
        facts: Sequence[str] = (),
        fact_ttl_ms: int = 0,
        commit: tuple[list[str], list[Any]] | None = None,
    ) -> Finished:
        """Record the final outcome once: ok, done (already final) or stale. An engaged
        send's message is indexed by its place (`keys.sent_message`) for `sent_ttl_ms` (by
        default the retention of its op), naming `work_id`; the seat joins the fact sets
        `facts` (what the send taught, kept `fact_ttl_ms`) in the same step. With `commit`
        (the ask store's `commit_call` for the send's ask), that change of the ask is
        written in the same step too, when the outcome is ok or done (op_finish_ask.lua)."""
        named = [
            keys.op(op_id),
            keys.journal(tracking_id),
            keys.JOURNAL_OPEN,
            keys.ledger_stream(row.seat_id),
            keys.LEDGER_SEATS,
            keys.sent_message(channel_id, message_id),
            *facts,
        ]
        args: list[Any] = [
            outcome,
            row.model_dump_json(by_alias=True),
            token,
            now_ms,
            tracking_id,
            row.seat_id,
            op_id,
            message_id,
            channel_id,
            idempotency_id or row.idempotency_id or "",
            self.retention_ms,
            LEDGER_STREAM_CAP,
            work_id,
            self.retention_ms if sent_ttl_ms is None else sent_ttl_ms,
            self.ledger_retention_ms,
            fact_ttl_ms,
        ]
        if commit is None:
            verb, _state = self._finish(keys=named, args=args)
            return Finished(text(verb))
        reply = self._finish_ask(keys=[*named, *commit[0]], args=[len(named), *args, *commit[1]])
        return Finished(text(reply[0]), text(reply[2]) if len(reply) > 2 else None)

    def sent_at(self, channel_id: str, message_id: str) -> dict[str, str] | None:
        """What an engaged send put at (`channel_id`, `message_id`): its work id, tracking
        id, seat and op; None when nothing Seatwire sent is there (or its index lapsed)."""
        raw = self.r.hgetall(keys.sent_message(channel_id, message_id))
        return {text(k): text(v) for k, v in raw.items()} or None

    def abandon(self, op_id: str, token: str) -> bool:
        """Mark an interrupted send `unknown`, so the next try reconciles before posting."""
        return bool(self._abandon(keys=[keys.op(op_id)], args=[token]))

    def release(self, op_id: str, token: str, reason: str, *, kind: ReleaseCounter) -> int:
        """Give a send that provably never reached the provider back to `reserved`; returns
        how many times the op was given back for this `kind` (rateLimited, notSent or
        deferred); 0 when the token no longer holds the op."""
        return int(self._release(keys=[keys.op(op_id)], args=[token, reason, kind]))

    def renew(self, op_id: str, token: str, lease_ms: int) -> bool:
        """Prove the try still holds the op and extend its lease (before a late wire call)."""
        return bool(self._renew(keys=[keys.op(op_id)], args=[token, lease_ms]))

    def note(self, op_id: str, token: str, **fields: str) -> bool:
        """Write down a step of the send in flight (fenced by its token)."""
        pairs = [x for item in fields.items() for x in item]
        return bool(self._note(keys=[keys.op(op_id)], args=[token, *pairs]))

    def op_state(self, op_id: str) -> dict[str, str]:
        return {text(k): text(v) for k, v in self.r.hgetall(keys.op(op_id)).items()}

    # ---------------------------------------------------------------- reading

    def rows_for(
        self, *, dedupe_key: str, targets: list[Target], work_id: str, seat_id: str
    ) -> list[LedgerRow]:
        """The counted rows (every seat's) that bear on one ask, one by one. Decisions use
        `tally` (counts in one round trip); this is the row-level view for audits and tests."""
        index_keys = [
            keys.by_dedupe_key(dedupe_key),
            keys.by_work(work_id),
            keys.by_seat(seat_id),
            keys.rooms_of(seat_id),
            *(keys.by_target(t) for t in target_ids(targets)),
        ]
        pipe = self.r.pipeline(transaction=False)
        for k in index_keys:
            pipe.zrange(k, 0, -1)
        op_ids = sorted({text(m) for members in pipe.execute() for m in members})
        if not op_ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        for op_id in op_ids:
            pipe.hgetall(keys.op(op_id))
        rows = []
        for raw in pipe.execute():
            op = {text(k): text(v) for k, v in raw.items()}
            if op.get("state") not in ROWS_OF_OPS:
                continue
            rows.append(
                LedgerRow(
                    at_ms=int(op["atMs"]),
                    seat_id=op.get("seatId", ""),
                    work_id=op.get("workId", ""),
                    dedupe_key=op.get("dedupeKey"),
                    outcome=op["state"],
                    engaged=op["state"] == "engaged",
                    room_created=op.get("roomCreated") == "1",
                    targets=tuple(Target(member_id=t) for t in json.loads(op.get("targets", "[]"))),
                    expires_at_ms=int(op["expiresAtMs"]) if op["state"] == "reserved" else None,
                    tracking_id=op.get("trackingId"),
                )
            )
        return rows

    def read(
        self, *, seat_ids: list[str] | None = None, work_id: str | None = None, limit: int = 100
    ) -> list[LedgerRow]:
        """Recent ledger rows, newest first, across the given seats (default: every seat)."""
        return [row for _, _, row in self.entries(seat_ids=seat_ids, work_id=work_id, limit=limit)]

    def entries(
        self, *, seat_ids: list[str] | None = None, work_id: str | None = None, limit: int = 100
    ) -> list[tuple[str, str, LedgerRow]]:
        """`read`'s rows with where each is kept: (seat id, stream entry id, row), newest
        first (the console opens one row by its seat and entry id)."""
        seats = seat_ids if seat_ids is not None else self.ledger_seats()
        pipe = self.r.pipeline(transaction=False)
        for seat in seats:
            pipe.xrevrange(keys.ledger_stream(seat), count=limit if work_id is None else None)
        rows: list[tuple[str, str, LedgerRow]] = []
        for seat, entries in zip(seats, pipe.execute(), strict=True):
            for entry_id, fields in entries:
                row = _row(fields)
                if work_id is None or row.work_id == work_id:
                    rows.append((seat, text(entry_id), row))
        rows.sort(key=lambda found: (found[2].at_ms, found[1]), reverse=True)
        return rows[:limit]

    def search(
        self,
        match: Callable[[LedgerRow], bool],
        *,
        seat_ids: list[str] | None = None,
        before: LedgerCursor | None = None,
        since_ms: int | None = None,
        hint: bytes | None = None,
        limit: int = 50,
        budget: int = SEARCH_BUDGET,
    ) -> Searched:
        """The newest rows that `match`, across the seats' streams in the order they were
        recorded (entry ids, newest first), older than `before`: a merge of the streams, each
        read in chunks from where it stands, so a page reads about what it shows at any size
        of the ledger. A row recorded before `since_ms` is never newer than it (a row is
        written at or after its time), so the search stops there. `hint`: bytes a row must
        contain to match, tried before the row is parsed. At most `budget` rows are looked at
        per call: a search that stops there says where, and the next call goes on from it."""
        seats = seat_ids if seat_ids is not None else self.ledger_seats()
        # A row's time is taken a little before Redis records it, on another clock: a minute's
        # slack keeps a row of the window's first minute in it.
        floor = f"{max(0, since_ms - CLOCK_SLACK_MS)}-0" if since_ms is not None else "-"
        heads = _Heads(self.r, seats, before, floor)
        heads.fill(max(2, (limit * 2) // max(1, len(seats)) + 2))
        found: list[tuple[str, str, LedgerRow]] = []
        scanned = 0
        last: LedgerCursor | None = None
        while scanned < budget and len(found) < limit:
            head = heads.pop()
            if head is None:
                return Searched(found, None, scanned, complete=True)
            seat, entry_id, raw = head
            scanned += 1
            last = LedgerCursor(entry_id, seat)
            if hint is not None and hint not in raw:
                continue
            row = LedgerRow.model_validate_json(raw)
            if match(row):
                found.append((seat, entry_id, row))
        if len(found) == limit and heads.done():
            return Searched(found, None, scanned, complete=True)
        return Searched(found, last, scanned, complete=len(found) == limit)

    def attention_today(self, member_ids: Sequence[str], *, now_ms: int) -> dict[str, int]:
        """How many asks each member was sent or has on its way in the last 24 hours, as the
        per-person daily limit counts them (a lapsed reservation left out, as guard_count.lua
        leaves it out); members with none are left out. Two round trips."""
        since = now_ms - DAY_MS
        pipe = self.r.pipeline(transaction=False)
        pipe.zrangebyscore(keys.PENDING, "-inf", now_ms)
        for m in member_ids:
            pipe.zcount(keys.by_target(m), f"({since}", "+inf")
        lapsed, *counts = pipe.execute()
        used = dict(zip(member_ids, (int(c) for c in counts), strict=True))
        busy = [m for m in member_ids if used[m]]
        if lapsed and busy:
            pipe = self.r.pipeline(transaction=False)
            for m in busy:
                pipe.zmscore(keys.by_target(m), lapsed)
            for m, scores in zip(busy, pipe.execute(), strict=True):
                used[m] -= sum(1 for sc in scores if sc is not None and sc > since)
        return {m: n for m, n in used.items() if n > 0}

    def ledger_seats(self) -> list[str]:
        """Every seat with a ledger stream."""
        return sorted(text(s) for s in self.r.smembers(keys.LEDGER_SEATS))

    def entry(self, seat_id: str, entry_id: str) -> LedgerRow | None:
        """One ledger row, by its seat and stream entry id; None when there is none."""
        found = self.r.xrange(keys.ledger_stream(seat_id), entry_id, entry_id, count=1)
        return _row(found[0][1]) if found else None


def _row(fields: Any) -> LedgerRow:
    return LedgerRow.model_validate_json(fields[b"row"] if b"row" in fields else fields["row"])
