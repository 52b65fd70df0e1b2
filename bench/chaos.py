"""A bounded chaos soak (fault test 32, docs/reliability.md), and the harness the process-level
fault tests share (tests/e2e/test_redis_faults_processes.py,
tests/e2e/test_worker_faults_processes.py).

    uv run python -m bench.chaos --minutes 3 [--rate 10] [--mean-gap 20] [--seed 1]

Starts its own redis-server on a free port (AOF on, `appendfsync everysec`, `noeviction`, its
own temp dir), `seatwire ingress`, two `seatwire worker` processes and `seatwire beat` (a fast
sweeper), sends blocked work reports at `--rate` a second for `--minutes`, and meanwhile, at
Poisson intervals (mean `--mean-gap` s), injects one fault picked at random:

  worker_kill   SIGKILL a worker's MAIN process (its pool children are orphaned), restart it
  worker_term   SIGTERM a worker (warm shutdown) and restart it
  redis_kill    SIGKILL redis-server, restart it from its AOF after 1 s
  redis_stop    SIGSTOP redis-server for 10 s (half-open), then SIGCONT
  redis_full    `maxmemory` just above what is used, for 8 s, then lifted

Then it waits for every accepted report to be final and prints the standard figures as JSON:
D (idempotency ids written to the outbox more than once), L (reports answered 2xx with no
terminal journal state; a stage's give-up, dead-lettered, is terminal and counted apart as
`gave_up`), G (guardrail overshoot: max over people of sends - perTargetPerDay), the
answers by status, the faults injected, orphaned pool children, dead letters.

Every process is started here and stopped here by its pid (process group), never by name.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis

from bench import stop_cleanly_on_sigterm
from contracts.journal import CLOSED_STATES
from workers.embedded import free_port
from workers.outbound.file import read_outbox
from workers.queues import FINAL_STATES, tracking_id_for
from workers.settings import REPO_ROOT
from workers.stores import keys
from workers.stores.tokens import Tokens

TOKEN = "chaos-token"
LOAD_SEATS = ("tally", "scout")  # the seats a Load reports as (odd: scout)
TERMINAL = FINAL_STATES | CLOSED_STATES
SEATWIRE = str(Path(sys.executable).parent / "seatwire")
# The people of examples/org.yaml asks go to, and their per-day limit in these runs: loads
# are sized so that most people are asked more often than this (G tests the guardrail).
PEOPLE = ["ben", "ava", "chloe", "devi", "emil", "faye", "gus", "hana", "ivan", "jo", "lea"]
PER_TARGET_PER_DAY = 20
STAGE_QUEUES = "engagement,guardrails,send"  # the queues a fleet's workers consume by default
WORKER = ["worker", "--queues", STAGE_QUEUES, "--concurrency", "1"]


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


class RedisServer:
    """A redis-server of our own: AOF `everysec` (unless told), noeviction, its own dir."""

    def __init__(self, workdir: Path, *, extra: tuple[str, ...] = ()) -> None:
        binary = redis_server_path()
        if binary is None:
            raise RuntimeError("redis-server is not on the PATH")
        self.binary = binary
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def args(self) -> list[str]:
        return [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
            "--maxmemory-policy",
            "noeviction",
            "--logfile",
            "redis.log",
            *self.extra,
        ]

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(self.args(), start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                client = self.client(timeout=0.5)
                client.ping()
                # Loading the AOF answers LOADING; wait until it is done.
                if client.info("persistence").get("loading", 0) == 0:
                    client.close()
                    return self
            except redis.RedisError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            time.sleep(0.05)
        raise TimeoutError("redis-server never answered")

    def client(self, db: int = 0, timeout: float = 5) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            db=db,
            socket_timeout=timeout,
            socket_connect_timeout=1,
        )

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL, as a crash: the AOF is what the next start loads."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGCONT)  # a stopped server cannot act on TERM
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@contextmanager
def redis_server(workdir: Path, *extra: str) -> Iterator[RedisServer]:
    server = RedisServer(workdir, extra=extra).start()
    try:
        yield server
    finally:
        server.stop()


# Every process of a fleet imports Celery, FastAPI and the MCP SDK (3-5 s of CPU each, more
# the first time a fresh environment compiles them): nine at once on two cores take a while.
READY_TIMEOUT_S = 120.0


def wait_ingress(
    base: str, procs: list[subprocess.Popen[bytes]], *, timeout: float = READY_TIMEOUT_S
) -> None:
    """Wait until the ingress at `base` answers /readyz 200; a process that exits first, or
    a wait past `timeout`, is an error naming it."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{p.args!r} exited with {p.returncode}")  # args: a list
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"the ingress at {base} never became ready in {timeout:.0f} s")


@dataclass
class Proc:
    name: str
    args: list[str]
    popen: subprocess.Popen[bytes]
    log: Path


@dataclass
class Fleet:
    """Seatwire's processes, each in its own process group, stopped by pid."""

    redis: RedisServer
    workdir: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    procs: dict[str, Proc] = field(default_factory=dict)
    starts: Counter[str] = field(default_factory=Counter)
    orphans: int = 0
    # compose.yaml's `restart: unless-stopped`: a process that exits on its own is started
    # again after a second (counted here); one this harness stops is left to the harness.
    revived: Counter[str] = field(default_factory=Counter)
    held: set[str] = field(default_factory=set)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _closing: threading.Event = field(default_factory=threading.Event)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def seat_tokens(self, seats: tuple[str, ...] = LOAD_SEATS) -> dict[str, str]:
        """A token of each of `seats`, issued into this fleet's Redis through the store: a
        work report goes with its seat's own token (issue 13), never the operator's."""
        client = redis.Redis.from_url(self.redis.url)
        try:
            store = Tokens(client)
            now = int(time.time() * 1000)
            return {s: store.issue("seat", seat_id=s, label="load", now_ms=now)[0] for s in seats}
        finally:
            client.close()

    @property
    def outbox(self) -> Path:
        return self.workdir / "outbox.jsonl"

    def spawn(self, name: str, args: list[str]) -> Proc:
        self.starts[name] += 1
        log = self.workdir / f"{name}-{self.starts[name]}.log"
        with log.open("wb") as fh:
            popen = subprocess.Popen(
                [SEATWIRE, *args],
                env=self.env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = self.procs[name] = Proc(name, args, popen, log)
        return proc

    def restart(self, name: str) -> Proc:
        with self._lock:
            self.held.discard(name)
            return self.spawn(name, self.procs[name].args)

    def supervise(self) -> threading.Thread:
        def watch() -> None:
            while not self._closing.wait(0.5):
                with self._lock:
                    for name, proc in list(self.procs.items()):
                        if name not in self.held and proc.popen.poll() is not None:
                            _kill_group(proc.popen.pid)
                            self.revived[name] += 1
                            self.spawn(name, proc.args)

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        return thread

    def kill_main(self, name: str) -> None:
        """SIGKILL only the main process; its pool children, if any outlive it after 3 s,
        are counted as orphans and killed by pid."""
        with self._lock:
            self.held.add(name)
            proc = self.procs[name]
        children = _children_of(proc.popen.pid)
        os.kill(proc.popen.pid, signal.SIGKILL)
        proc.popen.wait()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and any(_alive(c) for c in children):
            time.sleep(0.1)
        for child in children:
            if _alive(child):
                self.orphans += 1
                os.kill(child, signal.SIGKILL)

    def term(self, name: str, timeout: float = 30) -> float:
        """SIGTERM the main process (a warm shutdown) and wait for the group; seconds taken."""
        with self._lock:
            self.held.add(name)
            proc = self.procs[name]
        started = time.monotonic()
        os.kill(proc.popen.pid, signal.SIGTERM)
        try:
            proc.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.popen.pid, signal.SIGKILL)
            proc.popen.wait()
        _kill_group(proc.popen.pid)
        return time.monotonic() - started

    def stop(self) -> None:
        self._closing.set()
        with self._lock:
            self.held.update(self.procs)
        for proc in self.procs.values():
            if proc.popen.poll() is None:
                os.killpg(proc.popen.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.popen.pid, signal.SIGKILL)
                proc.popen.wait()
            _kill_group(proc.popen.pid)

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        wait_ingress(self.base, [p.popen for p in self.procs.values()], timeout=timeout)


def _children_of(pid: int) -> list[int]:
    try:
        out = subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, check=False
        ).stdout
    except OSError:
        return []
    return [int(p) for p in out.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _kill_group(pgid: int) -> None:
    """Whatever is left in a stopped process's group (a pool child), by the group's id."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def fleet_env(server: RedisServer, workdir: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "SEATWIRE_REDIS_URL": server.url,
        "SEATWIRE_API_TOKEN": TOKEN,
        "SEATWIRE_ORG_FILE": str(REPO_ROOT / "examples" / "org.yaml"),
        "SEATWIRE_OUTBOX_PATH": str(workdir / "outbox.jsonl"),
        "SEATWIRE_OUTBOX_FSYNC": "false",
        "SEATWIRE_SWEEP_INTERVAL_S": "1",
        "SEATWIRE_JOURNAL_DEADLINE_MS": "8000",
        # The send lease is the task time limit + 10 s: a send whose worker lost Redis while
        # `sending` is in doubt until then, and only then reconciled and finished. 20 s keeps
        # that inside a fault test's settling time (the tasks take milliseconds) and leaves
        # the soft limit (15 s less) at 5 s, well above a stage riding out a Redis stall.
        "SEATWIRE_TASK_TIME_LIMIT_S": "20",
        "SEATWIRE_LIMITS__PER_TARGET_PER_DAY": str(PER_TARGET_PER_DAY),
        "SEATWIRE_LIMITS__PER_SEAT_PER_HOUR": "1000000",
        "SEATWIRE_LIMITS__PER_WORK_PER_DAY": "1000000",
        **extra,
    }
    env.pop("SEATWIRE_BROKER_URL", None)
    return env


@contextmanager
def fleet(
    server: RedisServer,
    workdir: Path,
    *,
    workers: int = 2,
    beat: bool = True,
    queues: str = STAGE_QUEUES,
    **env: str,
) -> Iterator[Fleet]:
    """The ingress, `workers` worker processes (each consuming `queues`, comma-separated) and
    (unless told) beat, on `server`."""
    f = Fleet(redis=server, workdir=workdir, env=fleet_env(server, workdir, **env))
    try:
        f.spawn("ingress", ["ingress", "--host", "127.0.0.1", "--port", str(f.port)])
        for i in range(workers):
            f.spawn(f"worker-{i}", ["worker", "--queues", queues, "--concurrency", "1"])
        if beat:
            f.spawn("beat", ["beat"])
        f.wait_ready()
        f.supervise()
        yield f
    finally:
        f.stop()


@dataclass
class Load:
    """Blocked work reports, each naming one person, sent at a steady rate from a thread
    pool. A 503 (or no answer) is retried after a second, as a sender would; `accepted` is
    the ground truth of what was answered 2xx."""

    base: str
    tag: str
    rate: float
    tokens: dict[str, str]  # seat -> its own token (Fleet.seat_tokens)
    retries: int = 20
    accepted: dict[str, str] = field(default_factory=dict)  # tracking id -> report id
    statuses: Counter[int] = field(default_factory=Counter)
    missing_retry_after: int = 0
    latencies: list[float] = field(default_factory=list)
    timeline: list[tuple[float, float, int]] = field(default_factory=list)  # start, s, status
    sent: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def report(self, i: int) -> tuple[str, dict[str, Any]]:
        seat = LOAD_SEATS[i % 2]
        body = {
            "id": f"{self.tag}-{i}",
            "title": f"Unblock {self.tag} {i}",
            "state": "blocked",
            "blocker": {"kind": "access", "ownerId": PEOPLE[i % len(PEOPLE)]},
            "selfServeExhausted": True,
        }
        return seat, body

    def post_one(self, http: httpx.Client, i: int) -> None:
        seat, body = self.report(i)
        for _ in range(self.retries):
            started = time.monotonic()
            try:
                auth = {"Authorization": f"Bearer {self.tokens[seat]}"}
                resp = http.post(f"/v1/seats/{seat}/work", json=body, headers=auth)
                status = resp.status_code
            except httpx.HTTPError:
                status = 0
                resp = None
            with self._lock:
                self.latencies.append(time.monotonic() - started)
                self.timeline.append((started, time.monotonic() - started, status))
                self.statuses[status] += 1
                if status in (429, 503) and resp is not None and "retry-after" not in resp.headers:
                    self.missing_retry_after += 1
            if status == 202:
                with self._lock:
                    self.accepted[tracking_id_for(seat, body["id"], 1)] = body["id"]
                return
            if status not in (0, 429, 503):
                return  # anything else is an answer not to retry (counted above)
            if self._stop.wait(1.0):
                return

    def run(self, seconds: float, concurrency: int = 16) -> None:
        """Send for `seconds` (blocking); reports already started finish their retries."""
        with (
            httpx.Client(base_url=self.base, timeout=10) as http,
            ThreadPoolExecutor(concurrency) as pool,
        ):
            started = time.monotonic()
            n = int(seconds * self.rate)
            for i in range(n):
                due = started + i / self.rate
                time.sleep(max(0.0, due - time.monotonic()))
                pool.submit(self.post_one, http, self.sent)
                self.sent += 1

    def stop(self) -> None:
        """No more retries: a report still being retried gives up (it was never accepted)."""
        self._stop.set()

    def background(self, seconds: float) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(seconds,), daemon=True)
        thread.start()
        return thread


def states_of(client: redis.Redis, trackings: list[str]) -> dict[str, str]:
    pipe = client.pipeline(transaction=False)
    for t in trackings:
        pipe.hget(keys.journal(t), "state")
    return {t: (s or b"").decode() for t, s in zip(trackings, pipe.execute(), strict=True)}


def settle(server: RedisServer, load: Load, timeout: float) -> dict[str, str]:
    """Wait until every accepted report is final (or the timeout); tracking id -> state."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while True:
        try:
            client = server.client()
            states = states_of(client, list(load.accepted))
            client.close()
        except redis.RedisError:
            pass
        done = states and all(s in TERMINAL for s in states.values())
        if done or time.monotonic() > deadline:
            return states
        time.sleep(0.3)


def figures(
    server: RedisServer, fleet_: Fleet, load: Load, states: dict[str, str]
) -> dict[str, Any]:
    """The standard figures: D, L, G, and what explains them."""
    lines = read_outbox(fleet_.outbox) if fleet_.outbox.exists() else []
    by_id = Counter(line["idempotencyId"] for line in lines)
    per_person: Counter[str] = Counter()
    for line in lines:
        members = line["memberIds"]
        if isinstance(members, list):
            per_person.update(str(m) for m in members)
    client = server.client()
    info = client.info()
    dlq = client.zcard(keys.DLQ)
    client.close()
    lat = sorted(load.latencies)
    return {
        "accepted": len(load.accepted),
        "D": sum(1 for c in by_id.values() if c > 1),
        # L: no terminal record at all. A stage's give-up (`failed`, `dead`: dead-lettered
        # with its reason) is terminal, yet a loss to whoever waits for it: counted apart.
        "L": sum(1 for t in load.accepted if states.get(t, "") not in TERMINAL),
        "gave_up": sum(1 for t in load.accepted if states.get(t, "") in CLOSED_STATES),
        "G": max([0, *(c - PER_TARGET_PER_DAY for c in per_person.values())]),
        "sends": len(lines),
        "outcomes": dict(Counter(states.values())),
        "answers": {str(k): v for k, v in sorted(load.statuses.items())},
        "5xx_not_503": sum(v for k, v in load.statuses.items() if k >= 500 and k != 503),
        "retry_after_missing": load.missing_retry_after,
        "answer_p99_s": round(lat[int(len(lat) * 0.99)] if lat else 0.0, 3),
        "dead_letters": dlq,
        "orphaned_pool_children": fleet_.orphans,
        "restarted_by_supervisor": dict(fleet_.revived),
        "evicted_keys": info.get("evicted_keys", 0),
        "aof_delayed_fsync": info.get("aof_delayed_fsync", 0),
    }


# ---------------------------------------------------------------------------- the soak


def fault_worker_kill(f: Fleet, rng: random.Random) -> None:
    name = rng.choice([n for n in f.procs if n.startswith("worker-")])
    f.kill_main(name)
    time.sleep(2)
    f.restart(name)


def fault_worker_term(f: Fleet, rng: random.Random) -> None:
    name = rng.choice([n for n in f.procs if n.startswith("worker-")])
    f.term(name)
    f.restart(name)


def fault_redis_kill(f: Fleet, _rng: random.Random) -> None:
    f.redis.kill()
    time.sleep(1)
    f.redis.start()


def fault_redis_stop(f: Fleet, _rng: random.Random) -> None:
    f.redis.signal(signal.SIGSTOP)
    time.sleep(10)
    f.redis.signal(signal.SIGCONT)


def fault_redis_full(f: Fleet, _rng: random.Random) -> None:
    client = f.redis.client()
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", str(used + 512 * 1024))
    time.sleep(8)
    client.config_set("maxmemory", "0")
    client.close()


FAULTS: dict[str, Callable[[Fleet, random.Random], None]] = {
    "worker_kill": fault_worker_kill,
    "worker_term": fault_worker_term,
    "redis_kill": fault_redis_kill,
    "redis_stop": fault_redis_stop,
    "redis_full": fault_redis_full,
}


def soak(minutes: float, rate: float, mean_gap: float, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    injected: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="seatwire-chaos-") as tmp:
        workdir = Path(tmp)
        with redis_server(workdir / "redis") as server, fleet(server, workdir) as f:
            load = Load(f.base, tokens=f.seat_tokens(), tag=f"chaos{seed}", rate=rate)
            sender = load.background(minutes * 60)
            end = time.monotonic() + minutes * 60
            while True:
                gap = rng.expovariate(1 / mean_gap)
                if time.monotonic() + gap >= end:
                    break
                time.sleep(gap)
                name = rng.choice(sorted(FAULTS))
                print(f"{time.strftime('%H:%M:%S')} fault {name}", flush=True)
                FAULTS[name](f, rng)
                injected[name] += 1
            sender.join()
            load.stop()
            states = settle(server, load, timeout=120)
            fig = figures(server, f, load, states)
    fig["faults"] = dict(injected)
    fig["minutes"] = minutes
    fig["rate_per_s"] = rate
    return fig


def main() -> None:
    stop_cleanly_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--rate", type=float, default=10.0, help="reports a second")
    parser.add_argument("--mean-gap", type=float, default=20.0, help="mean seconds between faults")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    fig = soak(args.minutes, args.rate, args.mean_gap, args.seed)
    print(json.dumps(fig, indent=2))
    ok = fig["D"] == 0 and fig["L"] == 0 and fig["G"] == 0 and fig["gave_up"] == 0
    print("PASS: D = L = G = 0, nothing given up" if ok else "FAIL", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
