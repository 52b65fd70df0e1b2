"""Redis faults with real processes on a redis-server each test starts on a free port (AOF,
`appendfsync everysec`, `noeviction`, its own temp dir): fault tests 8 of docs/reliability.md
(`kill -9 redis-server` under load, restart from the AOF), 10 (half-open Redis: SIGSTOP for
20 s, then SIGCONT) and 14 (`maxmemory 32mb`, flooded). The ingress, two workers and beat (a
1 s sweeper) run as processes; each test counts D, L and G (bench/chaos.py says how) and all
must be 0. Loads are scaled down from the plan's to keep each test under a minute; run with
-s to see the figures."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from bench.chaos import Load, RedisServer, figures, fleet, redis_server, settle
from tests.e2e.cluster import needs_redis_server
from workers.stores import keys

pytestmark = pytest.mark.e2e


def check(fig: dict[str, Any]) -> None:
    print(f"\nfigures: {fig}")
    assert (fig["D"], fig["L"], fig["G"]) == (0, 0, 0), fig
    assert fig["gave_up"] == 0, "a stage gave up on an accepted report (dead-lettered)"
    assert fig["5xx_not_503"] == 0, "the ingress answered a 5xx other than 503"
    assert fig["retry_after_missing"] == 0, "a 503 without Retry-After"
    assert fig["evicted_keys"] == 0


def missing(server: RedisServer, trackings: list[str]) -> int:
    """How many of these accepted reports have no journal entry."""
    client = server.client()
    pipe = client.pipeline(transaction=False)
    for t in trackings:
        pipe.exists(keys.journal(t))
    gone = sum(1 for found in pipe.execute() if not found)
    client.close()
    return gone


def test_8_kill_9_of_redis_under_load_loses_nothing_answered_2xx(
    server: RedisServer, tmp_path: Path
) -> None:
    """15 reports/s for 20 s; redis-server is SIGKILLed twice and restarted from its AOF after
    1 s (the plan's 5 kills at 20/s scaled down): every report answered 202 before a kill is
    in the journal after the restart, the ingress answers 503 (with Retry-After) while Redis is
    down, the workers resume, and at the end D = L = G = 0."""
    lost_at_restart = []
    with fleet(server, tmp_path) as f:
        load = Load(f.base, tokens=f.seat_tokens(), tag="rkill", rate=15)
        sender = load.background(20)
        for _ in range(2):
            time.sleep(5)
            before = list(load.accepted)
            server.kill()
            time.sleep(1)
            server.start()
            lost_at_restart.append(missing(server, before))
        restarted = time.monotonic()
        sender.join()
        load.stop()
        # A send caught `sending` when Redis died is in doubt until its lease lapses (the
        # task time limit + 10 s: 30 s here), then reconciled and finished: settle past it.
        states = settle(server, load, timeout=90)
        fig = figures(server, f, load, states)
    fig["acked_missing_after_restart"] = lost_at_restart
    fig["settled_s_after_last_restart"] = round(time.monotonic() - restarted, 1)
    check(fig)
    assert lost_at_restart == [0, 0]
    assert fig["answers"].get("503", 0) + fig["answers"].get("0", 0) > 0, "Redis was never down?"


def test_10_a_half_open_redis_gets_503s_within_budget_and_the_workers_recover(
    server: RedisServer, tmp_path: Path
) -> None:
    """10 reports/s for 30 s; redis-server is SIGSTOPped for 20 s (no FIN, no RST: the
    GH-9705 shape), then SIGCONT: the ingress answers 503 with Retry-After within its 2.5 s
    budget during the stall (never hangs), the workers come back, and D = L = G = 0."""
    with fleet(server, tmp_path) as f:
        load = Load(f.base, tokens=f.seat_tokens(), tag="stop", rate=10)
        sender = load.background(30)
        time.sleep(4)
        stalled = time.monotonic()
        server.signal(signal.SIGSTOP)
        time.sleep(20)
        server.signal(signal.SIGCONT)
        resumed = time.monotonic()
        sender.join()
        load.stop()
        states = settle(server, load, timeout=120)  # a bound: a loaded machine drains slowly
        fig = figures(server, f, load, states)
    during = sorted(s for t, s, _ in load.timeline if stalled + 1 <= t <= resumed - 3)
    fig["stall_answers"] = len(during)
    fig["stall_p99_s"] = round(during[int(len(during) * 0.99)], 2) if during else None
    check(fig)
    assert during, "nothing was sent during the stall"
    assert fig["stall_p99_s"] <= 3.5, "the ingress hung on a half-open Redis"
    assert fig["answers"].get("503", 0) > 0


def test_14_maxmemory_reached_answers_503_with_retry_after_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """`maxmemory 32mb`, `noeviction`; ballast in another database leaves about 600 kB; 100
    reports/s for 8 s (the plan's flood, shorter): the ingress answers 503 with Retry-After
    (never a 500) once Redis refuses writes; once the ballast is freed every report the
    ingress answered 202 (first try or a retry) ends final, nothing is evicted, D = L = G = 0.
    A Celery worker exits on Redis's OOM error ("Unrecoverable error"); the harness restarts
    it as compose.yaml's `restart: unless-stopped` does, and the figures count the restarts."""
    needs_redis_server()
    with (
        redis_server(tmp_path / "redis", "--maxmemory", "32mb") as server,
        fleet(server, tmp_path) as f,
    ):
        ballast = server.client(db=1)
        chunk = b"x" * (256 * 1024)
        i = 0
        while int(ballast.info("memory")["used_memory"]) < 32 * 1024 * 1024 - 600 * 1024:
            try:
                ballast.set(f"ballast:{i}", chunk)  # db 1: not Seatwire's keyspace
            except redis.ResponseError:
                break
            i += 1
        load = Load(f.base, tokens=f.seat_tokens(), tag="oom", rate=100)
        sender = load.background(8)
        time.sleep(10)  # 503s are retried every second, as a sender would
        oom_503 = load.statuses.get(503, 0)
        ballast.flushdb()
        ballast.close()
        sender.join()
        load.stop()
        states = settle(server, load, timeout=120)  # a bound: a loaded machine drains slowly
        fig = figures(server, f, load, states)
    fig["503_during_flood"] = oom_503
    check(fig)
    assert oom_503 > 0, "Redis never ran out of memory"
    assert fig["accepted"] > 0
