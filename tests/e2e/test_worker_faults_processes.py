"""Worker faults with real processes on a redis-server of the test's own (fault tests 2 and 3 of
docs/reliability.md): SIGKILL of a worker's main process and rolling SIGTERM restarts, under load,
with the ingress, two workers and beat (a 1 s sweeper). Each counts D (an ask written to the outbox
twice), L (a report answered 202 with no final record) and G (a person asked more often than
perTargetPerDay); all must be 0. Loads are scaled down from the plan's (see each test) to keep a
test under a minute; run with -s to see the figures."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.chaos import (
    Fleet,
    Load,
    RedisServer,
    figures,
    fleet,
    settle,
)

pytestmark = pytest.mark.e2e


def check(fig: dict[str, object]) -> None:
    print(f"\nfigures: {fig}")
    assert (fig["D"], fig["L"], fig["G"]) == (0, 0, 0), fig
    assert fig["gave_up"] == 0, "a stage gave up on an accepted report (dead-lettered)"
    assert fig["5xx_not_503"] == 0
    assert fig["dead_letters"] == 0


def test_2_sigkill_of_a_workers_main_process_under_load_loses_and_duplicates_nothing(
    server: RedisServer, tmp_path: Path
) -> None:
    """10 reports/s for 24 s; a worker's MAIN process is SIGKILLed every 6 s (3 cycles,
    restarted after 2 s; the plan's 4 cycles at 90 s scaled down): every accepted report
    ends final, no ask is sent twice, no person is asked past the limit, and no pool child
    outlives its killed parent unnoticed (counted, then killed)."""
    with fleet(server, tmp_path) as f:
        load = Load(f.base, tokens=f.seat_tokens(), tag="kill9", rate=10)
        sender = load.background(24)
        kills = run_faults(f, cycles=3, every=6, fault=lambda: _kill(f))
        sender.join()
        states = settle_all(server, load)
        fig = figures(server, f, load, states)
    fig["kills"] = kills
    check(fig)
    assert fig["answers"] == {"202": fig["accepted"]}, "the ingress answered other than 202"


def _kill(f: Fleet) -> None:
    name = "worker-0" if f.starts["worker-0"] <= f.starts["worker-1"] else "worker-1"
    f.kill_main(name)
    time.sleep(2)
    f.restart(name)


def run_faults(f: Fleet, *, cycles: int, every: float, fault: Callable[[], None]) -> int:
    done = 0
    for _ in range(cycles):
        time.sleep(every)
        fault()
        done += 1
    return done


def settle_all(server: RedisServer, load: Load) -> dict[str, str]:
    load.stop()
    return settle(server, load, timeout=120)  # a bound: a loaded machine drains slowly


def test_3_rolling_sigterm_restarts_under_load_lose_and_duplicate_nothing(
    server: RedisServer, tmp_path: Path
) -> None:
    """15 reports/s for 24 s; the two workers are warm-restarted in turn (SIGTERM, wait for
    the exit, start again) every 3 s, 8 restarts (the plan's 20 at 20/s scaled down): every
    accepted report ends final (the sweeper may be what saves one), nothing is sent twice,
    nobody is asked past the limit."""
    durations: list[float] = []

    def restart() -> None:
        name = f"worker-{len(durations) % 2}"
        durations.append(f.term(name))
        f.restart(name)

    with fleet(server, tmp_path) as f:
        load = Load(f.base, tokens=f.seat_tokens(), tag="term", rate=15)
        sender = load.background(24)
        run_faults(f, cycles=8, every=2.5, fault=restart)
        sender.join()
        states = settle_all(server, load)
        fig = figures(server, f, load, states)
    fig["restarts"] = len(durations)
    fig["restart_s_max"] = round(max(durations), 2)
    check(fig)
    assert fig["answers"] == {"202": fig["accepted"]}
