"""Work reports per second through engagement -> guardrails -> send, on real Redis, as a RATIO
to a chain of three no-op Celery tasks on the same broker, measured in the same run.

    uv run python -m bench.pipeline [--n 2000] [--rounds 3] [--redis-url redis://127.0.0.1:6379/14]

Each round runs, one after the other on a flushed database:

  baseline      `celery -A bench.noop_app worker -c 2` (prefork), N chains noop1->noop2->noop3
  seatwire      `uv run seatwire worker --queues engagement,guardrails,send --concurrency 2`
                with SEATWIRE_OUTBOX_FSYNC=true, then again with false (`--fsync`)

each fed both ways (`--feed`), the baseline and Seatwire alike, and each Seatwire run is
compared with the baseline fed the same way:

  script        one Redis call per item that writes its first message: for Seatwire the
                ingress's own intake on this deployment, where the broker is the stores'
                Redis (`RedisIntake`, workers/ingress/intake.py: journal_enqueue.lua writes
                the journal entry and the engagement task's message); for the baseline an
                LPUSH of the same Celery protocol-2 message for noop1
  celery        Celery's publish: for Seatwire the ingress's intake for any other broker
                (`CeleryIntake`: journal accept, publish, mark enqueued), for the baseline
                `send_task`

Workers are started fresh for every run (in their own process group, always killed at the end),
warmed up with a few items, and then timed from the first enqueue of N items until the last
one is done: for the baseline, a counter INCRed by noop3 reaches N; for Seatwire, every journal
entry has left `sw:j:open` and the outbox has N lines. Each report is a distinct piece of
work blocked on a decision with a named owner, so it engages one person by DM; the owners
rotate over the org's members and the limits are set very high: this measures throughput, not
refusals.

The figure is reports/s for Seatwire over chains/s for the baseline, per round and as medians.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench import stop_cleanly_on_sigterm

REPO = Path(__file__).resolve().parent.parent
HIGH = 1_000_000_000
# Issue 14: Seatwire's three stages at least 0.9 of a 3-hop no-op chain's throughput.
TARGET_RATIO = 0.9
Feed = Literal["script", "celery"]  # how items are fed in: the module's docstring
FEEDS: dict[str, list[Feed]] = {
    "both": ["script", "celery"],
    "script": ["script"],
    "celery": ["celery"],
}
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------- processes


@dataclass
class Workers:
    """A worker command running in its own session; `stop` kills the whole group."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, name: str, argv: list[str], env: dict[str, str], log: Path) -> Workers:
        fh = log.open("wb")
        proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        fh.close()
        return cls(name, proc, log)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} workers exited early:\n{self.tail()}")
            if b" ready." in self.log.read_bytes():
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} workers not ready after {timeout}s:\n{self.tail()}")

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def cpu_s(self) -> float:
        """CPU seconds used so far by every process of the group (reaped children included)."""
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                parts = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # fields after the comm: state ppid pgrp ... utime(14) stime(15) cutime(16) cstime(17)
            if int(parts[2]) == self.proc.pid:
                total += sum(int(x) for x in parts[11:15])
        return total / CLK_TCK

    def consumer_cpu_s(self) -> float:
        """CPU seconds of the worker's main process alone (Celery's consumer: it fetches,
        hands each message to a pool process and acks it), without its children's: the
        group's first process that is not `uv run`'s own."""
        procs: dict[int, tuple[str, int, float]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                raw = stat.read_text()
            except OSError:
                continue
            comm = raw[raw.index("(") + 1 : raw.rindex(")")]
            parts = raw.rsplit(")", 1)[1].split()
            if int(parts[2]) == self.proc.pid:
                own = (int(parts[11]) + int(parts[12])) / CLK_TCK
                procs[int(stat.parent.name)] = (comm, int(parts[1]), own)
        for comm, ppid, own in procs.values():
            parent = procs.get(ppid)
            if comm != "uv" and (parent is None or parent[0] == "uv"):
                return own
        return 0.0

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=20)
        # The group may outlive its leader (uv exits when its child does): kill what is left.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


@contextlib.contextmanager
def running(
    name: str, argv: list[str], env: dict[str, str], log: Path, registry: list[Workers]
) -> Iterator[Workers]:
    w = Workers.start(name, argv, env, log)
    registry.append(w)
    try:
        w.wait_ready()
        yield w
    finally:
        w.stop()
        registry.remove(w)


def redis_cpu_s(r: Any) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def busy_cpu_s() -> float:
    """CPU seconds the whole machine has been busy (every core, every process)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK  # minus idle and iowait


def self_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


@dataclass
class Meter:
    """CPU used during a run by the workers, Redis, this process and everything else."""

    workers: Workers
    r: Any
    start: tuple[float, float, float, float] = (0, 0, 0, 0)

    def read(self) -> tuple[float, float, float, float]:
        return (self.workers.cpu_s(), redis_cpu_s(self.r), self_cpu_s(), busy_cpu_s())

    def begin(self) -> None:
        self.start = self.read()

    def end(self) -> tuple[float, float, float, float]:
        w, r, me, busy = (b - a for a, b in zip(self.start, self.read(), strict=True))
        return w, r, me, busy - w - r - me


def wait_until(done: Callable[[], bool], timeout: float) -> bool:
    """Poll `done`; every 5 ms at first, then at most 0.2% of the time waited (<= 50 ms)."""
    start = time.monotonic()
    deadline = start + timeout
    while (now := time.monotonic()) < deadline:
        if done():
            return True
        time.sleep(min(0.05, max(0.005, (now - start) / 500)))
    return done()


# ---------------------------------------------------------------------------- work


@dataclass
class Item:
    seat: str
    report: Any  # contracts.WorkReport


def make_items(n: int, tag: str, org_file: Path) -> list[Item]:
    """N distinct reports, each blocked on a decision owned by one named, engageable member."""
    from contracts import WorkReport
    from workers.org import load_org

    org = load_org(org_file)
    seats = [s.member_id for s in org.seats]
    people = [m.id for m in org.members if m.engageable_status and m.id not in seats]
    items = []
    for i in range(n):
        seat = seats[i % len(seats)]
        owner = people[(i // len(seats)) % len(people)]
        report = WorkReport.model_validate(
            {
                "id": f"bench-{tag}-{i}",
                "title": f"Nightly export {i}",
                "summary": "The export is ready; the last step needs someone else's decision.",
                "scope": "billing database",
                "state": "blocked",
                "blocker": {
                    "kind": "decision",
                    "scope": "billing database",
                    "ownerId": owner,
                    "detail": "which retention window applies",
                },
                "selfServeExhausted": True,
                "tried": ["read the runbook", "asked in #platform"],
                "question": "Keep 30 or 90 days?",
                "options": ["30 days", "90 days"],
            }
        )
        items.append(Item(seat, report))
    return items


def envelope(item: Item, now_ms: int) -> tuple[str, str, dict[str, Any]]:
    """What `journal_and_enqueue` computes: tracking id, fingerprint, message."""
    from contracts.messages import WorkEnvelope
    from workers.ingress.app import tracking_id_for

    report = item.report
    tracking = tracking_id_for(item.seat, report.id, report.revision)
    fingerprint = hashlib.sha256(report.model_dump_json(by_alias=True).encode()).hexdigest()
    env = WorkEnvelope(
        tracking_id=tracking, seat_id=item.seat, accepted_at_ms=now_ms, report=report
    )
    return tracking, fingerprint, env.to_wire()


# ---------------------------------------------------------------------------- runs


@dataclass
class Result:
    kind: str
    n: int
    seconds: float
    enqueue_s: float
    worker_cpu_s: float
    redis_cpu_s: float
    bench_cpu_s: float
    other_cpu_s: float  # everything else on the machine (other users' jobs): noise
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def per_s(self) -> float:
        return self.n / self.seconds


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        import redis

        self.args = args
        self.tmp = tmp
        self.url = args.redis_url
        self.r = redis.Redis.from_url(self.url)
        self.registry: list[Workers] = []
        self.base_env = {
            **os.environ,
            "SEATWIRE_REDIS_URL": self.url,
            "SEATWIRE_API_TOKEN": "bench",
            "SEATWIRE_ORG_FILE": str(args.org_file),
            "SEATWIRE_LIMITS__PER_TARGET_PER_DAY": str(HIGH),
            "SEATWIRE_LIMITS__PER_SEAT_PER_HOUR": str(HIGH),
            "SEATWIRE_LIMITS__PER_WORK_PER_DAY": str(HIGH),
            "PYTHONUNBUFFERED": "1",
        }
        self.base_env.pop("SEATWIRE_BROKER_URL", None)
        self.uv = ["uv", "run", "--no-sync"] if args.uv else []

    def flush(self) -> None:
        self.r.flushdb()

    def _env(self, **extra: str) -> dict[str, str]:
        return {**self.base_env, **extra}

    def _apply_env(self, env: dict[str, str]) -> None:
        for k, v in env.items():
            if k.startswith("SEATWIRE_"):
                os.environ[k] = v

    # ------------------------------------------------------------------ baseline

    def baseline(self, rnd: int, feed: Feed = "script") -> Result:
        from bench import noop_app
        from workers.broker import INGRESS_PUBLISH_RETRY, foreign_message
        from workers.celery_app import create_app
        from workers.settings import Settings

        self.flush()
        env = self._env()
        self._apply_env(env)
        argv = [
            *self.uv,
            *([] if self.uv else [sys.executable, "-m"]),
            "celery",
            "-A",
            "bench.noop_app",
            "worker",
            "-Q",
            ",".join(noop_app.QUEUES),
            "-c",
            str(self.args.concurrency),
            "-P",
            "prefork",
            "--loglevel",
            self.args.loglevel,
            "-n",
            f"noop-{rnd}@%h",
            "--without-mingle",
            "--without-gossip",
        ]
        app = create_app(Settings(), register=False)
        warm = make_items(self.args.warmup, f"warm-b{rnd}", self.args.org_file)
        items = make_items(self.args.n, f"b{rnd}", self.args.org_file)
        messages = [envelope(it, 0)[2] for it in [*warm, *items]]
        queue = noop_app.QUEUES[0]

        def feed_one(m: dict[str, Any]) -> None:
            if feed == "celery":
                noop_app.publish(0, m, retry_policy=INGRESS_PUBLISH_RETRY, via=app)
            else:
                tid = f"{m['trackingId']}:{queue}"
                self.r.lpush(queue, foreign_message(noop_app.TASKS[0], queue, tid, json.dumps(m)))

        def done(k: int) -> Callable[[], bool]:
            return lambda: int(self.r.get(noop_app.DONE_KEY) or 0) >= k

        try:
            with running(
                "baseline", argv, env, self.tmp / f"baseline-{rnd}.log", self.registry
            ) as w:
                for m in messages[: len(warm)]:
                    feed_one(m)
                if not wait_until(done(len(warm)), 60):
                    raise RuntimeError(f"baseline warm-up did not finish:\n{w.tail()}")
                meter = Meter(w, self.r)
                meter.begin()
                consumer0 = w.consumer_cpu_s()
                t0 = time.perf_counter()
                for m in messages[len(warm) :]:
                    feed_one(m)
                t_enq = time.perf_counter() - t0
                fed_done = int(self.r.get(noop_app.DONE_KEY) or 0) - len(warm)
                if not wait_until(done(len(messages)), self.args.timeout):
                    got = int(self.r.get(noop_app.DONE_KEY) or 0)
                    raise RuntimeError(
                        f"baseline: {got} of {len(messages)} done after "
                        f"{self.args.timeout}s:\n{w.tail()}"
                    )
                elapsed = time.perf_counter() - t0
                cpu = meter.end()
                consumer = w.consumer_cpu_s() - consumer0
        finally:
            app.close()
        return Result(
            f"baseline feed={feed}",
            len(items),
            elapsed,
            t_enq,
            *cpu,
            {"consumer_cpu_s": consumer, "done_while_feeding": fed_done},
        )

    # ------------------------------------------------------------------ seatwire

    def seatwire(
        self,
        rnd: int,
        fsync: bool,
        *,
        extra_env: dict[str, str] | None = None,
        delivered: Callable[[], int] | None = None,
        kind: str | None = None,
        feed: Feed = "script",
    ) -> Result:
        """Seatwire's three stages; `extra_env` and `delivered` (asks delivered so far) swap
        the file outbox for another adapter (bench/outbound.py). `feed` is how the reports
        are journalled and enqueued (FEEDS)."""
        from workers.bootstrap import build_container, now_ms
        from workers.broker import INGRESS_PUBLISH_RETRY, publish, shares_broker
        from workers.celery_app import create_app
        from workers.ingress.intake import Arrival, RedisIntake
        from workers.queues import Task
        from workers.settings import Settings
        from workers.stores import keys
        from workers.stores.scripts import script, text

        self.flush()
        outbox = self.tmp / f"outbox-{rnd}-{'fsync' if fsync else 'nofsync'}-{feed}.jsonl"
        env = self._env(
            SEATWIRE_OUTBOX_PATH=str(outbox),
            SEATWIRE_OUTBOX_FSYNC="true" if fsync else "false",
            **(extra_env or {}),
        )
        self._apply_env(env)
        seatwire = ["seatwire"] if self.uv else [str(Path(sys.executable).parent / "seatwire")]
        argv = [
            *self.uv,
            *seatwire,
            "worker",
            "--queues",
            "engagement,guardrails,send",
            "--concurrency",
            str(self.args.concurrency),
            "--loglevel",
            self.args.loglevel,
        ]
        settings = Settings()
        app = create_app(settings, register=False)
        container = build_container(settings, app=app)
        journal = container.journal
        if feed == "script" and not shares_broker(settings):
            raise RuntimeError("the script feed needs the broker to be the stores' Redis")
        # The script feed's call: the ingress's own arguments, run here without its event loop.
        intake = RedisIntake(str(settings.redis_url), deadline_ms=settings.journal_deadline_ms)
        enqueue = script(container.redis, "journal_enqueue")
        tag = f"s{rnd}{'f' if fsync else 'n'}{feed[0]}"
        warm = make_items(self.args.warmup, f"warm-{tag}", self.args.org_file)
        items = make_items(self.args.n, tag, self.args.org_file)

        def journal_and_enqueue(item: Item) -> str:
            accepted_at = now_ms()
            tracking, fingerprint, message = envelope(item, accepted_at)
            if feed == "script":
                # The ingress's `RedisIntake` (workers/ingress/intake.py), minus the HTTP and
                # the event loop: one journal_enqueue.lua call.
                k, a = intake.script_call(
                    Arrival(
                        task=Task.ENGAGEMENT,
                        tracking_id=tracking,
                        kind="work",
                        seat_id=item.seat,
                        payload=json.dumps(message),
                        fingerprint=fingerprint,
                        now_ms=accepted_at,
                    )
                )
                verb = text(enqueue(keys=k, args=a)[0])
                if verb != "new":
                    raise RuntimeError(f"{tracking} was already journalled ({verb})")
                return tracking
            # The ingress's `CeleryIntake`, minus the HTTP: journal, publish, mark enqueued.
            result = journal.accept(
                tracking,
                kind="work",
                seat_id=item.seat,
                payload=json.dumps(message),
                now_ms=accepted_at,
                fingerprint=fingerprint,
            )
            if not result.new:
                raise RuntimeError(f"{tracking} was already journalled")
            publish(app, Task.ENGAGEMENT, tracking, message, retry_policy=INGRESS_PUBLISH_RETRY)
            journal.mark_enqueued(tracking, now_ms())
            return tracking

        def drained() -> bool:
            return int(self.r.zcard(keys.JOURNAL_OPEN)) == 0

        def outbox_lines() -> int:
            try:
                with outbox.open("rb") as fh:
                    return sum(1 for _ in fh)
            except FileNotFoundError:
                return 0

        lines = delivered or outbox_lines

        try:
            with running(
                f"seatwire(fsync={fsync})",
                argv,
                env,
                self.tmp / f"seatwire-{rnd}-{int(fsync)}-{feed}.log",
                self.registry,
            ) as w:
                for it in warm:
                    journal_and_enqueue(it)
                if not wait_until(drained, 60):
                    raise RuntimeError(f"seatwire warm-up did not finish:\n{w.tail()}")
                meter = Meter(w, self.r)
                meter.begin()
                consumer0 = w.consumer_cpu_s()
                t0 = time.perf_counter()
                trackings = [journal_and_enqueue(it) for it in items]
                t_enq = time.perf_counter() - t0
                fed_done = len(items) - int(self.r.zcard(keys.JOURNAL_OPEN))
                if not wait_until(drained, self.args.timeout):
                    raise RuntimeError(
                        f"seatwire: {self.r.zcard(keys.JOURNAL_OPEN)} entries still open after "
                        f"{self.args.timeout}s:\n{w.tail()}"
                    )
                expected = len(warm) + len(items)
                wait_until(lambda: lines() >= expected, 10)
                elapsed = time.perf_counter() - t0
                cpu = meter.end()
                consumer = w.consumer_cpu_s() - consumer0
        finally:
            app.close()
            container.redis.close()
        extra = {
            "consumer_cpu_s": consumer,
            "done_while_feeding": fed_done,
            **self._verify(trackings, outbox, expected, lines()),
        }
        kind = kind or f"seatwire fsync={'on' if fsync else 'off'} feed={feed}"
        return Result(kind, len(items), elapsed, t_enq, *cpu, extra)

    def _verify(
        self, trackings: list[str], outbox: Path, expected: int, n_lines: int
    ) -> dict[str, Any]:
        """Every entry final and engaged, N outbox lines; hop latencies from the timestamps."""
        from workers.stores import keys

        pipe = self.r.pipeline(transaction=False)
        for t in trackings:
            pipe.hmget(keys.journal(t), "state", "enqueuedAtMs", "decision", "finalAtMs")
            pipe.hmget(keys.op(t), "atMs", "sendingAtMs", "finalAtMs")
        replies = pipe.execute()
        states: Counter[str] = Counter()
        hops: dict[str, list[int]] = {
            "enqueued->decided": [],
            "decided->reserved": [],
            "reserved->sending": [],
            "sending->final": [],
            "enqueued->final": [],
        }
        for entry, op in zip(replies[::2], replies[1::2], strict=True):
            state, enq, decision, final = (x.decode() if x else None for x in entry)
            states[state or "missing"] += 1
            if not (enq and decision and final and all(op)):
                continue
            decided = json.loads(decision)["nowMs"]
            reserved, sending, op_final = (int(x) for x in op)
            hops["enqueued->decided"].append(decided - int(enq))
            hops["decided->reserved"].append(reserved - decided)
            hops["reserved->sending"].append(sending - reserved)
            hops["sending->final"].append(op_final - sending)
            hops["enqueued->final"].append(int(final) - int(enq))
        if states.get("engaged", 0) != len(trackings) or n_lines != expected:
            raise RuntimeError(
                f"not every report was engaged exactly once: states={dict(states)}"
                f", outbox lines={n_lines} (expected {expected})"
            )
        return {
            "states": dict(states),
            "outbox_lines": n_lines,
            "hop_ms_median": {k: statistics.median(v) for k, v in hops.items() if v},
            "hop_ms_p90": {k: sorted(v)[int(0.9 * (len(v) - 1))] for k, v in hops.items() if v},
        }

    def stop_all(self) -> None:
        for w in list(self.registry):
            w.stop()


# ---------------------------------------------------------------------------- report


def rates(r: Result) -> str:
    """Items done per second while the bench was still feeding, and after (a feed that takes
    CPU from the workers shows as a slower first phase)."""
    fed = r.extra.get("done_while_feeding")
    if fed is None or r.seconds <= r.enqueue_s:
        return ""
    during = fed / r.enqueue_s if r.enqueue_s > 0 else 0.0
    after = (r.n - fed) / (r.seconds - r.enqueue_s)
    return f"  done/s while feeding {during:.0f}, after {after:.0f}"


def line(r: Result) -> str:
    consumer = ""
    if "consumer_cpu_s" in r.extra:
        main = 1e3 * r.extra["consumer_cpu_s"] / r.n
        consumer = f" (consumer {main:.2f}, pool {1e3 * r.worker_cpu_s / r.n - main:.2f})"
    return (
        f"{r.kind:<30} {r.per_s:>7.1f}/s  {r.seconds:>7.2f} s for {r.n} "
        f"(enqueue {r.enqueue_s:5.2f} s)  CPU ms/item: workers {1e3 * r.worker_cpu_s / r.n:.2f}"
        f"{consumer}, redis {1e3 * r.redis_cpu_s / r.n:.2f}, bench {1e3 * r.bench_cpu_s / r.n:.2f}"
        f"; other load {r.other_cpu_s / r.seconds:.2f} cores{rates(r)}"
    )


def main(argv: list[str] | None = None) -> int:
    stop_cleanly_on_sigterm()
    from workers.settings import BUNDLED_ORG

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--redis-url",
        default="redis://127.0.0.1:6379/14",
        help="a database of its own: it is FLUSHED before every run",
    )
    ap.add_argument("--n", type=int, default=2000, help="items per run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=40, help="items before the clock starts")
    ap.add_argument("--concurrency", type=int, default=2, help="worker processes")
    ap.add_argument("--fsync", choices=["both", "on", "off"], default="both")
    ap.add_argument(
        "--feed",
        choices=list(FEEDS),
        default="both",
        help="how Seatwire's reports are journalled and enqueued (the module's docstring)",
    )
    ap.add_argument("--loglevel", default="INFO", help="worker log level (production: INFO)")
    ap.add_argument("--org-file", type=Path, default=BUNDLED_ORG)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per run")
    ap.add_argument(
        "--no-uv",
        dest="uv",
        action="store_false",
        help="start workers with this interpreter instead of `uv run`",
    )
    ap.add_argument("--keep-logs", action="store_true")
    ap.add_argument("--json", type=Path, help="write every result here as JSON")
    args = ap.parse_args(argv)

    # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the finally below stops the workers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    variants = {"both": [True, False], "on": [True], "off": [False]}[args.fsync]
    tmp = Path(tempfile.mkdtemp(prefix="seatwire-bench-"))
    bench = Bench(args, tmp)
    results: list[tuple[int, Result]] = []
    print(
        f"bench.pipeline: {args.rounds} rounds x N={args.n}, {args.concurrency} worker "
        f"processes, {os.cpu_count()} CPUs, Redis {args.redis_url} (flushed per run), "
        f"org {args.org_file}, logs in {tmp}",
        flush=True,
    )
    try:
        for rnd in range(1, args.rounds + 1):
            # Odd rounds run the baseline first and the feeds in their order, even rounds the
            # other way round: whatever drifts on the machine within a round (another job
            # starting, the disk's queue, the page cache) lands on both sides in turn.
            odd = rnd % 2 == 1
            feeds = FEEDS[args.feed] if odd else FEEDS[args.feed][::-1]
            for feed in feeds:
                runs: list[bool | None] = [None, *variants]  # None: the baseline
                base: Result | None = None
                done: list[Result] = []
                for fsync in runs if odd else runs[::-1]:
                    if fsync is None:
                        base = bench.baseline(rnd, feed)
                        results.append((rnd, base))
                        print(f"round {rnd}  {line(base)}", flush=True)
                        continue
                    sw = bench.seatwire(rnd, fsync, feed=feed)
                    results.append((rnd, sw))
                    done.append(sw)
                    print(f"round {rnd}  {line(sw)}", flush=True)
                    hops = "  ".join(f"{k} {v:.0f}" for k, v in sw.extra["hop_ms_median"].items())
                    print(
                        f"          hop latency medians, ms (queue wait included): {hops}",
                        flush=True,
                    )
                assert base is not None
                for sw in done:
                    print(
                        f"round {rnd}  ratio {sw.kind} / {base.kind}: {sw.per_s / base.per_s:.3f}",
                        flush=True,
                    )
    finally:
        bench.stop_all()
        bench.flush()

    print("\nmedians over rounds:")
    kinds = list(dict.fromkeys(r.kind for _, r in results))
    med = {k: statistics.median(r.per_s for _, r in results if r.kind == k) for k in kinds}
    for k in kinds:
        cpu = statistics.median(1e3 * r.worker_cpu_s / r.n for _, r in results if r.kind == k)
        print(f"  {k:<30} {med[k]:>8.0f}/s   worker CPU {cpu:.2f} ms/item")
    for k in (k for k in kinds if k.startswith("seatwire")):
        against = f"baseline feed={k.rsplit('feed=', 1)[1]}"  # fed the same way
        ratios = []
        for rnd in range(1, args.rounds + 1):
            b = next(r for n, r in results if n == rnd and r.kind == against)
            s = next(r for n, r in results if n == rnd and r.kind == k)
            ratios.append(s.per_s / b.per_s)
        verdict = "MET" if statistics.median(ratios) >= TARGET_RATIO else "NOT MET"
        print(
            f"  ratio {k}/{against}: median {statistics.median(ratios):.3f} "
            f"(rounds: {', '.join(f'{x:.3f}' for x in ratios)}) target >= {TARGET_RATIO}: {verdict}"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "round": n,
                        "kind": r.kind,
                        "n": r.n,
                        "seconds": r.seconds,
                        "per_s": r.per_s,
                        "enqueue_s": r.enqueue_s,
                        "worker_cpu_s": r.worker_cpu_s,
                        "redis_cpu_s": r.redis_cpu_s,
                        "bench_cpu_s": r.bench_cpu_s,
                        "other_cpu_s": r.other_cpu_s,
                        **r.extra,
                    }
                    for n, r in results
                ],
                indent=2,
            )
        )
    if not args.keep_logs:
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
