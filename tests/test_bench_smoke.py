"""Every benchmark in bench/ runs, end to end, at a tiny size: a bench that cannot run fails CI.

The benches are run by hand and their figures written down (bench/README.md), so nothing
else notices when a change elsewhere breaks one: the no-op baseline of bench.pipeline and
bench.directedness waited for its timeout, unnoticed, after the stage base class changed
under it, and bench.steward died on a function that had moved. Each is run here as its own
process (`python -m bench.<name>`: its real entry point and argument parsing) and must exit
0 and print its figures. No figure is judged: at these sizes, on a shared machine, they mean
nothing.

The benches on a database flush it, so no two share one. Three lanes run at once (the
machine has 2 cores; most of a bench's wall time at this size is processes starting and
stopping): the suite's Redis database (`redis_url`: a failure in CI without Redis, a visible
skip locally), one bench after another, in the tests themselves; a redis-server the module
starts on a free port (tests/e2e's convention, bench/chaos.py's `redis_server`), in the
background, for two of the slowest (bench.outbound, bench.ingress); and the benches that start
their own redis-servers (bench.fsync, bench.chaos, bench.controller_soak), in the background
too. Every process is started in its own group and stopped by its pid's group. A module of
bench/ with a `__main__` block and no entry here fails `test_every_bench_is_smoked`.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from bench.chaos import redis_server, redis_server_path
from tests.e2e.cluster import needs_redis_server

pytestmark = [pytest.mark.redis, pytest.mark.e2e]

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"


# suite: on the suite's Redis, in the test; server: on a redis-server this module starts, in
# the background; own: the bench starts its own redis-servers, in the background.
Lane = Literal["suite", "server", "own"]


@dataclass(frozen=True)
class Smoke:
    """One bench at a tiny size, and what its output must contain."""

    args: str  # `{url}` is the suite's Redis database
    expect: tuple[str, ...]
    lane: Lane = "suite"
    env: tuple[tuple[str, str], ...] = ()


SMOKES: dict[str, Smoke] = {
    "decision": Smoke(
        "--members 1000 --decisions 200 --warmup 50 --plain-decisions 20",
        ("decisions/s", "target p99 < 1 ms"),
    ),
    "stages": Smoke("--redis-url {url} --n 6", ("reports/s in one process",)),
    "asks": Smoke("--redis-url {url} --asks 12", ("B per ask kept", "round trips per answer")),
    "controller": Smoke(
        "--redis-url {url} --sizes 3 --ticks 2", ("idle", "sparse", "busy", "slowest p99")
    ),
    "steward": Smoke(
        "--redis-url {url} --sizes 3 --candidates 8 --prefill-rows 0",
        ("tick 1 (creates)", "slowest tick"),
    ),
    "pipeline": Smoke(
        "--redis-url {url} --n 10 --rounds 1 --warmup 3 --fsync on --no-uv --timeout 60",
        (
            "round 1  baseline feed=script",
            "round 1  seatwire fsync=on feed=script",
            "round 1  baseline feed=celery",
            "round 1  seatwire fsync=on feed=celery",
            "(consumer ",
            "round 1  ratio seatwire fsync=on feed=celery / baseline feed=celery: ",
            "ratio seatwire fsync=on feed=script/baseline feed=script: median",
            "ratio seatwire fsync=on feed=celery/baseline feed=celery: median",
        ),
    ),
    "directedness": Smoke(
        "--redis-url {url} --n 10 --rounds 1 --warmup 3 --timeout 60",
        ("round 1  baseline", "round 1  seatwire", "ratio seatwire/baseline: median"),
    ),
    "directedness --profile": Smoke(
        "--redis-url {url} --profile 40", ("task body", "cProfile split")
    ),
    "outbound": Smoke(
        "--redis-url {url} --n 4 --rounds 1 --warmup 2 --no-uv --timeout 60",
        ("slack", "ambiguous", "reconciliation"),
        # A send in doubt is looked up after twice the call timeout: 2 s here, not 20.
        lane="server",
        env=(("SEATWIRE_SEND_TIMEOUT_S", "1"),),
    ),
    "ingress": Smoke(
        "--redis-url {url} --rounds 1 --seconds 0.4 --slice 0.2 --warmup 0.2 --concurrency 4"
        " --open-rounds 1 --open-seconds 0.4 --open-connections 4 --rate 40",
        ("round 1", "ratio seatwire/baseline: median", "open 1"),
        lane="server",
    ),
    "scale": Smoke(
        "--redis-url {url} --seats 20,40 --members 1000,2000 --events 60 --event-warmup 10"
        " --decisions 10 --decision-warmup 5",
        ("directedness, in-process", "decide_engagement", "Directory.of", "expertise"),
    ),
    "lookups": Smoke(
        "--redis-url {url} --sizes 20,40 --requests 3 --warmup 1 --calls 4 --tokens 5"
        " --load-repeats 1 --scan-samples 1",
        ("claim routes", "find_agents", "token lookup", "org load per worker", "ratio 40"),
    ),
    "console": Smoke(
        "--redis-url {url} --seats 20 --rows 400 --asks 30 --letters 3 --repeat 2 --warmup 1",
        ("ledger, one person", "ledger, older", "my asks", "p50 ms"),
    ),
    "capacity": Smoke(
        "--redis-url {url} --reports 30 --events 30",
        ("Per work report", "Per inbound event", "Per seat", "Sizing"),
    ),
    "capacity --soak": Smoke(
        "--redis-url {url} --soak-minutes 0.05 --window-s 2 --rate 5", ("soak:", "used_memory")
    ),
    "fsync": Smoke(
        "--rounds 1 --seconds 0.3 --concurrency 4 --per-slice 300",
        ("everysec", "always"),
        lane="own",
    ),
    "controller_soak": Smoke(
        # 20 seats, 2 with news a second for 12 s: the fleet, the warm-up, the feed, the
        # checks (correctness, not figures) and the report.
        "--seats 20 --minutes 0.2 --rate 0.1",
        ("PASS: no turn twice, none at once for a seat, no wake-up lost", "news -> turn queued"),
        lane="own",
    ),
    "chaos": Smoke(
        # No fault within the run (mean gap far beyond it): the fleet, the load, the settle
        # and the figures; the faults themselves are tests/e2e's, on the same harness.
        "--minutes 0.05 --rate 2 --mean-gap 100000",
        ("PASS: D = L = G = 0",),
        lane="own",
    ),
}
TIMEOUT_S = 180


def module_of(name: str) -> str:
    return f"bench.{name.split()[0]}"


def in_lane(lane: Lane) -> list[str]:
    return [n for n, s in SMOKES.items() if s.lane == lane]


@dataclass
class Running:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def finish(self) -> tuple[int, str]:
        try:
            self.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.stop()
        return self.proc.returncode, self.log.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM to the group (the bench stops what it started), SIGKILL after 30 s."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class Runner:
    """Starts benches as processes, each in its own session, and stops any still running."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[Running] = []
        self.lock = threading.Lock()

    def start(self, name: str, redis_url: str) -> Running:
        smoke = SMOKES[name]
        log = self.logs / f"{name.replace(' ', '_')}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **dict(smoke.env)}
        env.pop("SEATWIRE_BROKER_URL", None)
        with log.open("wb") as fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", module_of(name), *smoke.args.format(url=redis_url).split()],
                cwd=REPO,
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        running = Running(name, proc, log)
        with self.lock:
            self.started.append(running)
        return running

    def run(self, name: str, redis_url: str) -> tuple[int, str]:
        return self.start(name, redis_url).finish()

    def stop_all(self) -> None:
        for running in self.started:
            running.stop()


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    with tempfile.TemporaryDirectory(prefix="seatwire-bench-smoke-") as tmp:
        r = Runner(Path(tmp))
        try:
            yield r
        finally:
            r.stop_all()


@pytest.fixture(scope="module")
def background(runner: Runner) -> Iterator[dict[str, Future[tuple[int, str]]]]:
    """The `server` and `own` lanes, started once and run while the tests run the `suite`
    lane (none without a `redis-server` binary: their tests then skip, or fail in CI)."""
    if redis_server_path() is None:
        yield {}
        return
    with ExitStack() as stack:
        own = stack.enter_context(ThreadPoolExecutor(max_workers=len(in_lane("own"))))
        futures = {n: own.submit(runner.run, n, "") for n in in_lane("own")}
        server = stack.enter_context(redis_server(runner.logs / "redis"))
        lane = stack.enter_context(ThreadPoolExecutor(max_workers=1))  # one at a time: flushes
        futures |= {n: lane.submit(runner.run, n, server.url) for n in in_lane("server")}
        try:
            yield futures
        finally:
            runner.stop_all()  # on an early end; then the pools join and the server stops


def check(name: str, rc: int, out: str) -> None:
    tail = "\n".join(out.splitlines()[-40:])
    assert rc == 0, f"{module_of(name)} exited {rc}:\n{tail}"
    for text in SMOKES[name].expect:
        assert text in out, f"{module_of(name)} did not print {text!r}:\n{tail}"


def test_every_bench_is_smoked() -> None:
    """Every module of bench/ that can be run has a smoke entry here."""
    runnable = {
        p.stem
        for p in BENCH.glob("*.py")
        if re.search(r"^if __name__ == .__main__.:", p.read_text(), re.MULTILINE)
    }
    assert runnable == {module_of(n).removeprefix("bench.") for n in SMOKES}


@pytest.mark.parametrize("name", in_lane("suite"))
def test_bench_runs(
    name: str, redis_url: str, runner: Runner, background: dict[str, Future[tuple[int, str]]]
) -> None:
    """The bench runs at a tiny size on the suite's Redis and prints its figures."""
    check(name, *runner.run(name, redis_url))


@pytest.mark.parametrize("name", [*in_lane("server"), *in_lane("own")])
def test_bench_in_the_background_runs(
    name: str, background: dict[str, Future[tuple[int, str]]]
) -> None:
    """The bench runs at a tiny size on a redis-server of its own (started by this module or
    by the bench) and prints its figures."""
    needs_redis_server()
    check(name, *background[name].result())
