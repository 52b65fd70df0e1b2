"""The guardrail race (fault test 23): worker PROCESSES reserve at once on a REAL Redis.

Each process opens its own Redis client and its own `Ledger`, waits at a barrier, then fires
its share of asks; the clock is Redis TIME, as in production. The per-person limit must hold
exactly (not "about"), and one op id reserved from every process at once is reserved once.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
from typing import Any, cast

import pytest
import redis

from contracts import EngagementDecision, Limits
from workers.stores import keys
from workers.stores.ledger import Ledger

pytestmark = pytest.mark.e2e  # spawns worker processes

PROCESSES = 4
ASKS = 500
PERSON = "pat"
SEATS = ("seat-a", "seat-b", "seat-c", "seat-d", "seat-e")
# Only the per-person limit may refuse: every other limit is out of reach.
LIMITS = Limits(per_seat_per_hour=10_000, per_work_per_day=10_000, rooms_per_day=10_000)
JOIN_TIMEOUT_S = 60

Ask = tuple[str, str, str, str]  # op id, seat id, work id, dedupe key


def _decision(work_id: str, dedupe_key: str) -> EngagementDecision:
    return EngagementDecision.model_validate(
        {
            "engage": True,
            "workId": work_id,
            "dedupeKey": dedupe_key,
            "targets": [{"memberId": PERSON}],
            "surface": "dm",
        }
    )


def _worker(url: str, asks: list[Ask], repeat: int, barrier: Any, results: Any) -> None:
    """One worker process: its own client and Ledger; reserve every ask `repeat` times."""
    client = redis.Redis.from_url(url)
    try:
        ledger = Ledger(client, limits=LIMITS)
        decisions = {op: _decision(work, key) for op, _seat, work, key in asks}
        client.ping()  # connect before the barrier, so the burst is a burst
        barrier.wait(timeout=JOIN_TIMEOUT_S)
        out = []
        for _ in range(repeat):
            for op, seat, _work, _key in asks:
                v = ledger.reserve(op, decision=decisions[op], seat_id=seat, tracking_id=op)
                out.append((op, v.model_dump_json()))
        results.put(("ok", out))
    except BaseException as exc:  # report, never hang the parent
        results.put(("error", repr(exc)))
    finally:
        client.close()


def _race(url: str, shares: list[list[Ask]], repeat: int = 1) -> list[tuple[str, dict[str, Any]]]:
    """Run one worker process per share, all released together; every verdict, in no order."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(shares))
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(url, share, repeat, barrier, results), daemon=True)
        for share in shares
    ]
    for p in procs:
        p.start()
    try:
        collected = [results.get(timeout=JOIN_TIMEOUT_S) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    errors = [detail for status, detail in collected if status != "ok"]
    assert not errors, errors
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    return [(op, json.loads(v)) for _status, out in collected for op, v in out]


def test_four_processes_racing_500_asks_engage_one_person_exactly_four_times(
    redis_client: redis.Redis, redis_url: str
) -> None:
    """500 concurrent asks about different work items for one person reserve exactly 4 places."""
    asks = [(f"op{i}", SEATS[i % len(SEATS)], f"work{i}", f"dk{i}") for i in range(ASKS)]
    shares = [asks[i::PROCESSES] for i in range(PROCESSES)]

    verdicts = _race(redis_url, shares)

    assert len(verdicts) == ASKS
    allowed = sorted(op for op, v in verdicts if v["allowed"])
    refused = [v for _op, v in verdicts if not v["allowed"]]
    assert len(allowed) == LIMITS.per_target_per_day == 4
    assert {v["code"] for v in refused} == {"rate_limited_target"}
    assert all(v["counts"]["targets"] == {PERSON: 4} for v in refused)
    # Serialized: the allowed asks saw 0, 1, 2 and 3 earlier places, one each.
    seen_before = sorted(v["counts"]["targets"][PERSON] for _op, v in verdicts if v["allowed"])
    assert seen_before == [0, 1, 2, 3]

    held = sorted(
        m.decode() for m in cast("list[bytes]", redis_client.zrange(keys.by_target(PERSON), 0, -1))
    )
    assert redis_client.zcard(keys.by_target(PERSON)) == 4
    assert held == allowed
    pending = cast("list[bytes]", redis_client.zrange(keys.PENDING, 0, -1))
    assert sorted(m.decode() for m in pending) == allowed
    states = [redis_client.hget(keys.op(op), "state") for op, *_ in asks]
    assert states.count(b"reserved") == 4 and states.count(b"refused") == ASKS - 4

    # The burst really was concurrent: the processes' script runs (Redis TIME) overlapped.
    spans = sorted(
        (min(times), max(times))
        for times in (
            [int(redis_client.hget(keys.op(op), "checkedAtMs") or 0) for op, *_ in share]
            for share in shares
        )
    )
    assert any(later[0] <= earlier[1] for earlier, later in itertools.pairwise(spans)), spans


def test_one_op_id_reserved_from_four_processes_at_once_is_reserved_once(
    redis_client: redis.Redis, redis_url: str
) -> None:
    """The same op id reserved concurrently (and repeatedly) from 4 processes holds one place."""
    ask = ("op-same", "seat-a", "work-same", "dk-same")
    verdicts = _race(redis_url, [[ask] for _ in range(PROCESSES)], repeat=25)

    assert len(verdicts) == PROCESSES * 25
    first = verdicts[0][1]
    assert first["allowed"] and first["attempt"] == 1
    assert first["counts"]["targets"] == {PERSON: 0}
    assert all(v == first for _op, v in verdicts)
    assert redis_client.zrange(keys.by_target(PERSON), 0, -1) == [b"op-same"]
    assert redis_client.zcard(keys.by_dedupe_key("dk-same")) == 1
    assert redis_client.zcard(keys.by_work("work-same")) == 1
    assert redis_client.zcard(keys.by_seat("seat-a")) == 1
    assert redis_client.zcard(keys.PENDING) == 1
    assert redis_client.hget(keys.op("op-same"), "state") == b"reserved"
