"""The Redis guardrail path agrees with the pure specification (docs/architecture.md, "Guardrails").

(a) A differential property test: random ledgers are loaded into a REAL Redis exactly as the
    scripts would have left them, one more ask is reserved through `Ledger.reserve`, and the
    verdict must equal `check_guardrails` on the same rows.
(b) A `RuleBasedStateMachine` (fault test 23) drives the real scripts through
    reserve, replay, send, failure, ambiguity and the passage of time against a Python model.

Example counts scale with SEATWIRE_HYPOTHESIS_SCALE (default 1: 300 and 100 examples).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar, cast

import redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from redis.typing import EncodableT

from contracts import EngagementDecision, GuardrailVerdict, LedgerRow, Limits
from contracts.guardrails import COUNTED_OUTCOMES, DAY_MS, HOUR_MS
from contracts.journal import OpFinalState
from pipeline.guardrails import check_guardrails
from workers.stores import keys
from workers.stores.ledger import Ledger

NOW = 1_700_000_000_000
SCALE = max(1, int(os.environ.get("SEATWIRE_HYPOTHESIS_SCALE", "1")))
DIFFERENTIAL_EXAMPLES = 300 * SCALE
MACHINE_EXAMPLES = 100 * SCALE

SEATS = ("s1", "s2", "s3")
WORKS = ("w1", "w2", "w3")
PEOPLE = ("ana", "bo", "cy", "dd")
KEYS = ("k1", "k2", "k3")
OUTCOMES = ("engaged", "reserved", "sending", "unknown", "send_failed", "none")


def decision(work: str, key: str, targets: list[str], room: bool) -> EngagementDecision:
    return EngagementDecision.model_validate(
        {
            "engage": True,
            "workId": work,
            "dedupeKey": key,
            "targets": [{"memberId": t} for t in targets],
            "surface": "new_room" if room else "dm",
        }
    )


def pure(
    rows: list[LedgerRow], d: EngagementDecision, seat: str, now: int, limits: Limits
) -> GuardrailVerdict:
    return check_guardrails(
        rows,
        now_ms=now,
        dedupe_key=d.dedupe_key or "",
        work_id=d.work_id,
        seat_id=seat,
        targets=list(d.targets),
        creates_room=d.surface == "new_room",
        limits=limits,
    )


def index_keys(row: LedgerRow) -> list[str]:
    """The indexes guard_reserve.lua puts an allowed op in, in the script's order."""
    out = [
        keys.by_dedupe_key(row.dedupe_key or ""),
        keys.by_work(row.work_id),
        keys.by_seat(row.seat_id),
    ]
    out += [keys.by_target(t) for t in dict.fromkeys(x.member_id for x in row.targets)]
    if row.room_created:
        out.append(keys.rooms_of(row.seat_id))
    return out


def load(client: redis.Redis, rows: list[LedgerRow], ttl_ms: int) -> None:
    """Write `rows` as the scripts leave them: indexed while they hold (or held) a place.

    A reservation stays indexed and pending after its expiry until a script sweeps it, so an
    expired reservation is loaded too: the script under test must stop counting it itself.
    A released (send_failed) or never-engaged row is in no index.
    """
    pipe = client.pipeline(transaction=False)
    for i, row in enumerate(rows):
        if row.outcome == "none":
            continue  # a considered 'nobody' is only a ledger stream row
        op_id = f"old{i}"
        idx = index_keys(row)
        fields: dict[EncodableT, EncodableT] = {
            "seatId": row.seat_id,
            "workId": row.work_id,
            "dedupeKey": row.dedupe_key or "",
            "targets": json.dumps(list(dict.fromkeys(t.member_id for t in row.targets))),
            "trackingId": op_id,
            "atMs": row.at_ms,
            "roomCreated": "1" if row.room_created else "0",
            "indexes": json.dumps(idx),
            "state": row.outcome,
        }
        if row.outcome == "reserved":
            assert row.expires_at_ms is not None
            fields["expiresAtMs"] = row.expires_at_ms
            pipe.zadd(keys.PENDING, {op_id: row.expires_at_ms})
        else:
            fields["expiresAtMs"] = row.at_ms + ttl_ms
        if row.outcome in ("sending", "unknown"):
            fields |= {"token": f"tok{i}", "leaseUntilMs": 0}
        pipe.hset(keys.op(op_id), mapping=fields)
        if row.outcome in COUNTED_OUTCOMES:
            for k in idx:
                pipe.zadd(k, {op_id: row.at_ms})
    pipe.execute()


# --------------------------------------------------------------------------- (a) differential


CHECK_ORDER = ("reengage", "ask", "target", "work", "seat", "rooms")


@st.composite
def limits_st(draw: st.DrawFn) -> Limits:
    """Small limits, with the checks before a drawn one loose, so every check gets to decide."""
    first = CHECK_ORDER.index(draw(st.sampled_from(CHECK_ORDER)))

    def pick(check: str, tight: st.SearchStrategy[int], loose: int) -> int:
        if CHECK_ORDER.index(check) < first:
            return loose
        return draw(st.one_of(tight, st.just(loose)))

    return Limits(
        reengage_after_ms=pick(
            "reengage", st.sampled_from([60_000, HOUR_MS, 6 * HOUR_MS, 20 * HOUR_MS]), 0
        ),
        max_attempts_per_ask=pick("ask", st.integers(1, 4), 100),
        per_target_per_day=pick("target", st.integers(1, 4), 100),
        per_work_per_day=pick("work", st.integers(1, 4), 100),
        per_seat_per_hour=pick("seat", st.integers(1, 3), 100),
        rooms_per_day=pick("rooms", st.integers(0, 3), 100),
    )


@dataclass(frozen=True)
class Case:
    limits: Limits
    rows: list[LedgerRow]
    seat: str
    ask: EngagementDecision
    ttl_ms: int


@st.composite
def cases(draw: st.DrawFn) -> Case:
    limits = draw(limits_st())
    edges = [
        NOW,
        NOW - 1,
        NOW - DAY_MS,
        NOW - DAY_MS + 1,
        NOW - HOUR_MS,
        NOW - HOUR_MS + 1,
        NOW - limits.reengage_after_ms,
        NOW - limits.reengage_after_ms + 1,
    ]
    at_ms = st.one_of(
        st.sampled_from(edges),
        st.integers(NOW - 30 * HOUR_MS, NOW),
        st.integers(NOW - 2 * HOUR_MS, NOW),
    )
    expiry_delta = st.one_of(st.sampled_from([0, -1, 1]), st.integers(-HOUR_MS, HOUR_MS))
    people = st.lists(st.sampled_from(PEOPLE), min_size=1, max_size=3)
    rows = []
    for _ in range(draw(st.integers(0, 14))):
        outcome = draw(st.sampled_from(OUTCOMES))
        at = draw(at_ms)
        room = draw(st.booleans())
        rows.append(
            LedgerRow.model_validate(
                {
                    "atMs": at,
                    "seatId": draw(st.sampled_from(SEATS[:2])),
                    "workId": draw(st.sampled_from(WORKS)),
                    "dedupeKey": draw(st.sampled_from(KEYS)),
                    "outcome": outcome,
                    "engaged": outcome == "engaged",
                    "roomCreated": room,
                    "surface": "new_room" if room else "dm",
                    "targets": [{"memberId": t} for t in draw(people)],
                    "expiresAtMs": NOW + draw(expiry_delta) if outcome == "reserved" else None,
                }
            )
        )
    # The ask may be about a dedupe key or a person no row mentions.
    ask = decision(
        draw(st.sampled_from(WORKS)),
        draw(st.sampled_from([*KEYS, "k-fresh"])),
        draw(st.lists(st.sampled_from([*PEOPLE, "ed"]), min_size=1, max_size=3)),
        draw(st.booleans()),
    )
    return Case(
        limits, rows, draw(st.sampled_from(SEATS)), ask, draw(st.sampled_from([60_000, 1_800_000]))
    )


def _row(
    at: int,
    *,
    seat: str = "s1",
    work: str = "w2",
    key: str = "k2",
    people: tuple[str, ...] = ("bo",),
    outcome: str = "engaged",
    room: bool = False,
    expires: int | None = None,
) -> LedgerRow:
    return LedgerRow.model_validate(
        {
            "atMs": at,
            "seatId": seat,
            "workId": work,
            "dedupeKey": key,
            "outcome": outcome,
            "engaged": outcome == "engaged",
            "roomCreated": room,
            "targets": [{"memberId": p} for p in people],
            "expiresAtMs": expires,
        }
    )


LOOSE = Limits(
    reengage_after_ms=0,
    max_attempts_per_ask=100,
    per_target_per_day=100,
    per_work_per_day=100,
    per_seat_per_hour=100,
    rooms_per_day=100,
)
ASK = decision("w1", "k1", ["ana"], False)
# One ledger per verdict, each at a window edge: the generator need not find them by luck.
PINNED = [
    Case(Limits(), [_row(NOW - 6 * HOUR_MS + 1, key="k1")], "s2", ASK, 60_000),
    Case(
        LOOSE.model_copy(update={"max_attempts_per_ask": 1}),
        [_row(NOW - DAY_MS, key="k1")],
        "s2",
        ASK,
        60_000,
    ),
    Case(
        LOOSE.model_copy(update={"per_target_per_day": 1}),
        [_row(NOW - DAY_MS + 1, people=("ana",))],
        "s2",
        ASK,
        60_000,
    ),
    Case(
        LOOSE.model_copy(update={"per_work_per_day": 1}),
        [_row(NOW - DAY_MS + 1, work="w1")],
        "s2",
        ASK,
        60_000,
    ),
    Case(
        LOOSE.model_copy(update={"per_seat_per_hour": 1}),
        [_row(NOW - HOUR_MS + 1, seat="s1")],
        "s1",
        ASK,
        60_000,
    ),
    Case(
        LOOSE.model_copy(update={"rooms_per_day": 1}),
        [_row(NOW - DAY_MS + 1, room=True)],
        "s1",
        decision("w1", "k1", ["ana"], True),
        60_000,
    ),
    # Allowed: the only row is a reservation that lapses exactly now, and the edges are open.
    Case(
        Limits(per_target_per_day=1, per_work_per_day=1, per_seat_per_hour=1),
        [
            _row(NOW - 1, people=("ana",), outcome="reserved", expires=NOW),
            _row(NOW - DAY_MS, work="w1", people=("ana",)),
            _row(NOW - HOUR_MS, seat="s2", key="k3"),
        ],
        "s2",
        ASK,
        60_000,
    ),
]


def test_guard_reserve_agrees_with_check_guardrails_on_random_ledgers(
    redis_client: redis.Redis,
) -> None:
    """On random ledgers the Lua reservation gives exactly the pure verdict, and holds a place
    only when it allows."""
    seen: Counter[str] = Counter()

    @settings(
        max_examples=DIFFERENTIAL_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(case=cases())
    def check(case: Case) -> None:
        redis_client.flushdb()
        load(redis_client, case.rows, case.ttl_ms)
        expected = pure(case.rows, case.ask, case.seat, NOW, case.limits)
        lg = Ledger(redis_client, limits=case.limits, reservation_ttl_ms=case.ttl_ms)

        got = lg.reserve(
            "ask", decision=case.ask, seat_id=case.seat, tracking_id="t-ask", now_ms=NOW
        )
        assert (got.allowed, got.code, got.attempt) == (
            expected.allowed,
            expected.code,
            expected.attempt,
        )
        assert got.counts == expected.counts
        assert got == expected
        seen[got.code or "allowed"] += 1

        # The place is held in every index exactly when allowed, at NOW.
        raw = cast("dict[bytes, bytes]", redis_client.hgetall(keys.op("ask")))
        op = {k.decode(): v.decode() for k, v in raw.items()}
        ask_row = LedgerRow(
            at_ms=NOW,
            seat_id=case.seat,
            work_id=case.ask.work_id,
            dedupe_key=case.ask.dedupe_key,
            targets=case.ask.targets,
            room_created=case.ask.surface == "new_room",
        )
        for k in index_keys(ask_row):
            assert redis_client.zscore(k, "ask") == (NOW if got.allowed else None), k
        assert op["state"] == ("reserved" if got.allowed else "refused")
        # Expired reservations were swept out of every index; nothing else moved.
        for i, row in enumerate(case.rows):
            for k in index_keys(row):
                indexed = redis_client.zscore(k, f"old{i}") is not None
                assert indexed == row.counts_at(NOW), (i, k, row)
        # A replay (a re-sent EVALSHA) answers the same and reserves nothing more.
        sizes = [redis_client.zcard(k) for k in index_keys(ask_row)]
        again = lg.reserve(
            "ask", decision=case.ask, seat_id=case.seat, tracking_id="t-ask", now_ms=NOW
        )
        assert again == got
        assert [redis_client.zcard(k) for k in index_keys(ask_row)] == sizes

    for case in PINNED:
        check = example(case=case)(check)
    check()
    # Every verdict was reached (the pinned ledgers guarantee it; the generator adds more).
    assert set(seen) == {
        "allowed",
        "already_engaged",
        "rate_limited_ask",
        "rate_limited_target",
        "rate_limited_work",
        "rate_limited_seat",
        "rate_limited_rooms",
    }, seen


# --------------------------------------------------------------------------- (b) state machine

FINAL = frozenset({"engaged", "send_failed", "send_blocked", "refused"})
TTL = 20 * 60_000
LEASE = 90_000


@dataclass
class ModelOp:
    decision: EngagementDecision
    seat: str
    state: str  # reserved | sending | unknown | engaged | send_failed | refused | expired
    verdict: GuardrailVerdict
    at: int = 0
    expires: int = 0
    lease_until: int = 0
    token: str = ""
    logged: bool = False

    def counts_at(self, now: int) -> bool:
        if self.state == "reserved":
            return self.expires > now
        return self.state in COUNTED_OUTCOMES

    def row(self) -> LedgerRow:
        return LedgerRow(
            at_ms=self.at,
            seat_id=self.seat,
            work_id=self.decision.work_id,
            dedupe_key=self.decision.dedupe_key,
            outcome=self.state if self.state in COUNTED_OUTCOMES else "none",
            engaged=self.state == "engaged",
            room_created=self.decision.surface == "new_room",
            targets=self.decision.targets,
            expires_at_ms=self.expires if self.state == "reserved" else None,
        )


ask_st = st.builds(
    decision,
    st.sampled_from(WORKS),
    st.sampled_from(KEYS),
    st.lists(st.sampled_from(PEOPLE[:3]), min_size=1, max_size=2),
    st.booleans(),
)
step_st = st.one_of(
    st.integers(1, 10 * 60_000),
    st.sampled_from([TTL - 1, TTL, LEASE, HOUR_MS, 6 * HOUR_MS, DAY_MS, DAY_MS + 1]),
    st.integers(1, 30 * HOUR_MS),
)


@st.composite
def machine_limits_st(draw: st.DrawFn) -> Limits:
    """A tight per-person limit (the invariant under test); the others tight or loose."""
    return Limits(
        reengage_after_ms=draw(st.sampled_from([0, 10 * 60_000, HOUR_MS, 6 * HOUR_MS])),
        max_attempts_per_ask=draw(st.sampled_from([1, 2, 3, 100])),
        per_target_per_day=draw(st.integers(1, 3)),
        per_work_per_day=draw(st.sampled_from([1, 2, 4, 100])),
        per_seat_per_hour=draw(st.sampled_from([1, 3, 100])),
        rooms_per_day=draw(st.sampled_from([0, 1, 100])),
    )


class GuardMachine(RuleBasedStateMachine):
    """The real scripts on a real Redis, step by step beside a model of what they must do."""

    url: ClassVar[str] = ""
    seen: ClassVar[Counter[str]] = Counter()  # what the runs reached, across examples

    def __init__(self) -> None:
        super().__init__()
        self.r = redis.Redis.from_url(self.url)
        self.r.flushdb()
        self.now = NOW
        self.ops: dict[str, ModelOp] = {}
        self.seq = 0
        self.lg: Ledger | None = None
        self.limits = Limits()

    def teardown(self) -> None:
        self.r.flushdb()
        self.r.close()

    # -- helpers

    def _next(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}{self.seq}"

    @property
    def ledger(self) -> Ledger:
        assert self.lg is not None
        return self.lg

    def _expected_fresh(self, d: EngagementDecision, seat: str) -> GuardrailVerdict:
        rows = [op.row() for op in self.ops.values() if op.counts_at(self.now)]
        return pure(rows, d, seat, self.now, self.limits)

    def _sweep(self) -> None:
        """guard_reserve.lua first marks every lapsed reservation expired."""
        for op in self.ops.values():
            if op.state == "reserved" and op.expires <= self.now:
                op.state = "expired"

    def _reserve(self, op_id: str, op: ModelOp | None, d: EngagementDecision, seat: str) -> None:
        self._sweep()
        if op is not None and op.state != "expired":
            expected = op.verdict
        else:
            expected = self._expected_fresh(d, seat)
        got = self.ledger.reserve(
            op_id, decision=d, seat_id=seat, tracking_id=f"t-{op_id}", now_ms=self.now
        )
        assert got == expected
        replay = op is not None and op.state != "expired"
        self.seen[f"reserve {'replay' if replay else 'fresh'}: {got.code or 'allowed'}"] += 1
        if op is not None and op.state != "expired":
            return  # a replay changes nothing
        if op is None:
            op = self.ops[op_id] = ModelOp(d, seat, "refused", got)
        op.verdict = got
        if got.allowed:
            op.state, op.at, op.expires = "reserved", self.now, self.now + TTL
        else:
            op.state, op.at = "refused", self.now
            if not op.logged:  # the guardrail stage writes the refusal down once
                row = op.row().model_copy(update={"outcome": got.code, "tracking_id": op_id})
                verb = self.ledger.finish(
                    op_id, outcome="refused", row=row, tracking_id=f"t-{op_id}", now_ms=self.now
                ).verb
                assert verb == "ok"
                op.logged = True

    def _begin(self, op_id: str) -> str:
        """begin_send, checked against the model; returns the verb."""
        op = self.ops[op_id]
        token = self._next("tok")
        if op.state == "reserved" and op.expires > self.now:
            expected = ("go", str(op.at))
        elif op.state in ("reserved", "expired"):
            expected = ("expired", "")
        elif op.state == "sending" and op.lease_until > self.now:
            expected = ("busy", str(op.lease_until))
        elif op.state in ("sending", "unknown"):
            expected = ("reconcile", str(op.at))
        else:
            expected = ("done", op.state)
        start = self.ledger.begin_send(
            op_id,
            tracking_id=f"t-{op_id}",
            token=token,
            lease_ms=LEASE,
            now_ms=self.now,
        )
        assert (start.verb, start.info) == expected
        self.seen[f"begin_send: {start.verb}"] += 1
        if start.verb == "expired":
            op.state = "expired"
        elif start.verb in ("go", "reconcile"):
            op.state, op.token, op.lease_until = "sending", token, self.now + LEASE
        return start.verb

    def _finish(self, op_id: str, outcome: str) -> None:
        op = self.ops[op_id]
        row = op.row().model_copy(update={"outcome": outcome, "tracking_id": op_id})
        verb = self.ledger.finish(
            op_id,
            outcome=cast(OpFinalState, outcome),  # the rules draw final states only
            row=row,
            tracking_id=f"t-{op_id}",
            token=op.token,
            now_ms=self.now,
        ).verb
        assert verb == "ok"
        op.state, op.logged = outcome, True

    def _pick(self, i: int) -> str:
        """Mostly an op that is not final yet (a final one only ever answers `done`)."""
        open_ops = sorted(o for o, op in self.ops.items() if op.state not in FINAL)
        pool = open_ops if open_ops and i % 4 else sorted(self.ops)
        return pool[(i // 4) % len(pool)]

    # -- rules

    @initialize(limits=machine_limits_st())
    def start(self, limits: Limits) -> None:
        self.limits = limits
        self.lg = Ledger(self.r, limits=limits, reservation_ttl_ms=TTL)

    @rule(d=ask_st, seat=st.sampled_from(SEATS[:2]))
    def reserve_new(self, d: EngagementDecision, seat: str) -> None:
        self._reserve(self._next("op"), None, d, seat)

    @precondition(lambda self: self.ops)
    @rule(i=st.integers(0, 10_000))
    def reserve_duplicate(self, i: int) -> None:
        op_id = self._pick(i)
        op = self.ops[op_id]
        self._reserve(op_id, op, op.decision, op.seat)

    @precondition(lambda self: self.ops)
    @rule(i=st.integers(0, 10_000))
    def send_engaged(self, i: int) -> None:
        op_id = self._pick(i)
        if self._begin(op_id) in ("go", "reconcile"):
            self._finish(op_id, "engaged")

    @precondition(lambda self: self.ops)
    @rule(i=st.integers(0, 10_000), outcome=st.sampled_from(["engaged", "send_blocked"]))
    def finish_without_a_lease(self, i: int, outcome: str) -> None:
        live = sorted(
            o for o, op in self.ops.items() if op.state == "reserved" and op.expires > self.now
        )
        if live:  # op_finish without a token: straight from a live reservation
            op_id = live[i % len(live)]
            self.ops[op_id].token = ""
            self._finish(op_id, outcome)
            self.seen[f"finish without a lease: {outcome}"] += 1

    @precondition(lambda self: self.ops)
    @rule(i=st.integers(0, 10_000), outcome=st.sampled_from(["send_failed", "send_blocked"]))
    def send_fails(self, i: int, outcome: str) -> None:
        op_id = self._pick(i)
        if self._begin(op_id) in ("go", "reconcile"):
            self._finish(op_id, outcome)

    @precondition(lambda self: self.ops)
    @rule(i=st.integers(0, 10_000))
    def send_ambiguous(self, i: int) -> None:
        op_id = self._pick(i)
        if self._begin(op_id) in ("go", "reconcile"):
            assert self.ledger.abandon(op_id, self.ops[op_id].token) is True
            self.ops[op_id].state = "unknown"
            self.ops[op_id].lease_until = 0

    @precondition(lambda self: self.ops)
    @rule(i=st.integers(0, 10_000), redelivered=st.booleans())
    def worker_dies_mid_send(self, i: int, redelivered: bool) -> None:
        op_id = self._pick(i)
        if self._begin(op_id) in ("go", "reconcile") and redelivered:
            # The task is redelivered to another worker at once: the lease makes it wait.
            assert self._begin(op_id) == "busy"

    @precondition(lambda self: self.ops)
    @rule(i=st.integers(0, 10_000), late_ms=st.sampled_from([0, 1, LEASE]))
    def worker_stalls_past_the_ttl(self, i: int, late_ms: int) -> None:
        live = sorted(o for o, op in self.ops.items() if op.state == "reserved")
        if live:  # the clock reaches the reservation's expiry before its send begins
            op_id = live[i % len(live)]
            self.now = max(self.now, self.ops[op_id].expires + late_ms)
            assert self._begin(op_id) == "expired"

    @rule(ms=step_st)
    def advance_time(self, ms: int) -> None:
        self.now += ms

    # -- invariants

    @invariant()
    def redis_agrees_with_the_model(self) -> None:
        """One round trip: every op's state and time, the per-person indexes, the ledger rows."""
        if self.lg is None:
            return
        op_ids = sorted(self.ops)
        pipe = self.r.pipeline(transaction=False)
        for op_id in op_ids:
            pipe.hmget(keys.op(op_id), "state", "atMs")
        for person in PEOPLE[:3]:
            pipe.zrange(keys.by_target(person), 0, -1, withscores=True)
        for seat in SEATS[:2]:
            pipe.xrange(keys.ledger_stream(seat))
        replies = pipe.execute()
        states, indexes, streams = replies[: len(op_ids)], replies[len(op_ids) : -2], replies[-2:]

        # Each op is in the state the model says, reserved at the time the model says.
        for op_id, (state, at) in zip(op_ids, states, strict=True):
            op = self.ops[op_id]
            assert state is not None and state.decode() == op.state, (op_id, state, op.state)
            if op.state in COUNTED_OUTCOMES:
                assert int(at) == op.at, (op_id, at, op.at)

        # Each person's index holds each op that holds a place once, at its time, and only
        # those (a lapsed reservation lingers until the next script sweeps it).
        for person, members in zip(PEOPLE[:3], indexes, strict=True):
            scores = {m.decode(): score for m, score in members}
            for op_id, score in scores.items():
                assert self.ops[op_id].state in COUNTED_OUTCOMES, (person, op_id)
                assert score == self.ops[op_id].at, (person, op_id)
            window = {o for o, score in scores.items() if score > self.now - DAY_MS}
            counted = {
                op_id
                for op_id, op in self.ops.items()
                if op.counts_at(self.now)
                and op.at > self.now - DAY_MS
                and any(t.member_id == person for t in op.decision.targets)
            }
            assert counted <= window, (person, counted, window)
            assert all(not self.ops[o].counts_at(self.now) for o in window - counted)

        # Each op is written down at most once, and exactly the finished ones are.
        written: Counter[str] = Counter(
            json.loads(fields[b"row"])["trackingId"] for entries in streams for _, fields in entries
        )
        assert all(n == 1 for n in written.values()), written
        assert set(written) == {op_id for op_id, op in self.ops.items() if op.logged}

    @invariant()
    def no_person_is_asked_more_than_the_limit_in_any_24h(self) -> None:
        if self.lg is None:
            return
        for person in PEOPLE[:3]:
            times = sorted(
                op.at
                for op in self.ops.values()
                if op.counts_at(self.now)
                and any(t.member_id == person for t in op.decision.targets)
            )
            for i, end in enumerate(times):
                in_window = sum(1 for t in times[: i + 1] if t > end - DAY_MS)
                # Ops reserved at the same instant as `end` share its window too.
                in_window += sum(1 for t in times[i + 1 :] if t == end)
                assert in_window <= self.limits.per_target_per_day, (person, times)


def test_guard_scripts_follow_the_model(redis_url: str) -> None:
    """Reserve, replay, send, fail, abandon and time passing keep the scripts on the model."""
    GuardMachine.url = redis_url
    GuardMachine.seen = Counter()
    run_state_machine_as_test(
        GuardMachine,
        settings=settings(
            max_examples=MACHINE_EXAMPLES,
            stateful_step_count=50,
            report_multiple_bugs=False,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    seen = GuardMachine.seen
    reached = {k.split(": ")[1] for k in seen if k.startswith("begin_send")}
    assert reached == {"go", "busy", "reconcile", "expired", "done"}, seen
    assert seen["reserve fresh: allowed"] and seen["reserve replay: allowed"], seen
    assert any(k.startswith("reserve fresh: rate_limited_target") for k in seen), seen
    assert any(k.startswith("reserve replay: ") and not k.endswith("allowed") for k in seen), seen
