"""One work-controller beat tick over N seats on real Redis (issue 12, "Benchmark").

    uv run python -m bench.controller [--sizes 10,100,1000] [--ticks 20] [--asks 0]
        [--redis-url redis://127.0.0.1:6379/12] [--profile] [--top 25] [--json FILE]

For each N (the smaller sizes are the baseline of the larger ones, in the same run): flush the
database, write an org file (a temp dir) with N seats (a member and a seat each, the embedded
`noop` launcher, one operator member), build the container (`build_container`) and a
publish-only Celery app (`create_app(settings, register=False)`, the broker on the SAME
database), `gc.freeze()` what exists then (as a worker's pool process does after building its
container: workers/stages/base.py `ready_pool_process`), then bring every seat to the steady
state: tick once (every seat's `first` turn is published), run each published turn in-process
through the turns stage (`Turns.run`: the noop launcher records `ok`), tick twice more (the
seats now wait `idle`; the second of these writes nothing). Then, timed, `ControllerTick(
container, app, rng=...)(now_ms=...)` -- the controller beat task's body -- 1 s apart on the
clock it is given:

- **idle**: `--ticks` steady ticks; each must decide `wait:idle` for every seat, write nothing
  and publish nothing.
- **busy**: one directed Slack mention per seat is put in its inbox the way the directedness
  stage does (`Journal.accept` + `InboundStore.record`, as tests/fakes.py `place`), the seats'
  records are DUMPed, then `--ticks` times: RESTORE the records (untimed), tick (timed: every
  seat begins a turn with reason `notices`, its record is written and one turn message is
  published per seat through the REAL `workers.broker.publish`, i.e. Celery's `send_task` on
  the Redis broker), DEL the broker's `turns` list (untimed). Each tick must publish N turns
  and write N records.

With `--asks K`, every seat also has K asks of the last hour, already `sent` (the ledger's
per-seat index `g:seat:{seat}` and the ask's `op` hash, written directly): the tick's second
read (the pending deliveries) then has K x N commands.

Measured per tick: wall time of the whole call (p50/p95, and per seat), this process's CPU,
and the split observe / decide (`tick_seat` per seat, the org view) / commit / publish
(`observe`, `commit` and the module's `publish` wrapped with timers). Redis round trips and
commands are counted on the client: a round trip is one `send_packed_command` of redis-py's
connection (`redis.connection.AbstractConnection`, patched for the whole process, so the
broker's kombu publishes count too); a plain command is one round trip and one command, a
pipeline's `execute` is ONE round trip of as many commands as it queued (`pack_commands`), a
Lua script is one of each (EVALSHA; the scripts are loaded before the first tick, so no NOSCRIPT
retry is counted). Round trips and commands made inside the wrapped `publish` are reported per
turn, apart from the tick's own. As a cross-check, the server's `INFO commandstats` delta over
each tick is printed too: it counts the commands Lua runs (`seat_run_commit`'s per seat) and
anything another client of the same server did meanwhile.

`--no-gc` turns the cyclic collector off around each timed tick (a diagnosis: how much of a
tick is the collector). `--profile` runs, at the largest N, a few extra ticks of each situation
under cProfile and prints the top `--top` entries by own time. The database is FLUSHED at
the start of every size and at the end. Nothing here is imported by `workers/`.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_URL = "redis://127.0.0.1:6379/12"
T0 = 1_800_000_000_000  # the clock handed to the ticks (ms)
TICK_MS = 1_000  # ticks are this far apart on that clock
OPERATOR = "ops"
PROFILE_TICKS = 5


def seat_id(i: int) -> str:
    return f"seat-{i:05d}"


def write_org(path: Path, n: int) -> None:
    """N seats (noop launcher, the embedded default) and the operator they escalate to."""
    members: list[dict[str, Any]] = [{"id": OPERATOR, "displayName": "Ops"}]
    members += [{"id": seat_id(i), "displayName": f"Seat {i}"} for i in range(n)]
    seats = [
        {"memberId": seat_id(i), "operatorId": OPERATOR, "launcher": {"kind": "noop"}}
        for i in range(n)
    ]
    path.write_text(json.dumps({"members": members, "seats": seats}))


# --------------------------------------------------------------------------- measuring


class Meter:
    """Counts what redis-py sends: round trips (`send_packed_command`) and commands
    (`send_command` one, `pack_commands` as many as it packs), in all and inside steps."""

    def __init__(self) -> None:
        import redis.connection

        self.trips = 0
        self.commands = 0
        cls = redis.connection.AbstractConnection
        send: Callable[..., None] = cls.send_packed_command
        one: Callable[..., None] = cls.send_command
        many: Callable[..., list[bytes]] = cls.pack_commands

        def counting_send(conn: Any, command: Any, check_health: bool = True) -> None:
            self.trips += 1
            send(conn, command, check_health)

        def counting_one(conn: Any, *args: Any, **kwargs: Any) -> None:
            self.commands += 1
            one(conn, *args, **kwargs)

        def counting_many(conn: Any, commands: Any) -> list[bytes]:
            commands = list(commands)
            self.commands += len(commands)
            return many(conn, commands)

        cls.send_packed_command = counting_send  # type: ignore[method-assign]
        cls.send_command = counting_one  # type: ignore[method-assign,assignment]
        cls.pack_commands = counting_many  # type: ignore[method-assign]

    def mark(self) -> tuple[int, int]:
        return self.trips, self.commands


@dataclass
class Step:
    """Time, round trips and commands spent inside one wrapped callable during a tick."""

    seconds: float = 0.0
    trips: int = 0
    commands: int = 0
    calls: int = 0

    def reset(self) -> None:
        self.seconds, self.trips, self.commands, self.calls = 0.0, 0, 0, 0


def timed(meter: Meter, step: Step, inner: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0, (r0, c0) = time.perf_counter(), meter.mark()
        try:
            return inner(*args, **kwargs)
        finally:
            r1, c1 = meter.mark()
            step.seconds += time.perf_counter() - t0
            step.trips += r1 - r0
            step.commands += c1 - c0
            step.calls += 1

    return wrapper


@dataclass
class TickRun:
    """One tick's figures."""

    seconds: float
    cpu: float
    trips: int  # the tick's own (publishes excluded)
    commands: int
    publish_trips: int
    publish_commands: int
    published: int
    written: int
    server_commands: int  # INFO commandstats delta (Lua's inner commands included)
    split: dict[str, float]  # seconds by step
    decisions: dict[str, int]


@dataclass
class Series:
    situation: str
    n: int
    asks: int
    ticks: list[TickRun] = field(default_factory=list)

    def pct(self, q: float) -> float:
        v = sorted(t.seconds for t in self.ticks)
        return v[min(len(v) - 1, max(0, round(q * len(v)) - 1))]

    def max(self) -> float:
        return max(t.seconds for t in self.ticks)

    def one(self, name: str) -> int:
        """A count that must be the same on every tick."""
        values = {int(getattr(t, name)) for t in self.ticks}
        if len(values) != 1:
            raise RuntimeError(f"{self.situation} N={self.n}: {name} varied: {sorted(values)}")
        return values.pop()

    def spread(self, name: str) -> tuple[int, int]:
        values = [getattr(t, name) for t in self.ticks]
        return min(values), max(values)

    def split_ms(self) -> dict[str, float]:
        return {
            k: 1e3 * statistics.median(t.split[k] for t in self.ticks) for k in self.ticks[0].split
        }

    def row(self) -> dict[str, Any]:
        p50 = statistics.median(t.seconds for t in self.ticks)
        published = self.one("published")
        return {
            "situation": self.situation,
            "seats": self.n,
            "asksPerSeat": self.asks,
            "ticks": len(self.ticks),
            "tickMs": {
                "p50": round(1e3 * p50, 3),
                "p95": round(1e3 * self.pct(0.95), 3),
                "max": round(1e3 * self.max(), 3),
            },
            "perSeatUs": round(1e6 * p50 / self.n, 2),
            "cpuMsP50": round(1e3 * statistics.median(t.cpu for t in self.ticks), 3),
            "roundTripsPerTick": self.one("trips"),
            "commandsPerTick": self.one("commands"),
            "published": published,
            "publishRoundTripsPerTurn": (
                round(self.one("publish_trips") / published, 3) if published else 0
            ),
            "publishCommandsPerTurn": (
                round(self.one("publish_commands") / published, 3) if published else 0
            ),
            "written": self.one("written"),
            "serverCommandsPerTick": list(self.spread("server_commands")),
            "splitMsP50": {k: round(v, 3) for k, v in self.split_ms().items()},
            "decisions": self.ticks[0].decisions,
        }


def commandstats(client: Any) -> int:
    stats: dict[str, dict[str, int]] = client.info("commandstats")
    total = 0
    for name, v in stats.items():
        if name != "cmdstat_info":
            total += int(v["calls"])
    return total


# --------------------------------------------------------------------------- one size


class Bench:
    """One size: the org, the container, the app and the tick, on a flushed database."""

    def __init__(
        self, meter: Meter, url: str, n: int, asks: int, tmp: Path, no_gc: bool = False
    ) -> None:
        import workers.stages.controller_tick as controller_tick
        from workers.bootstrap import build_container
        from workers.broker import publish
        from workers.celery_app import create_app
        from workers.settings import Settings
        from workers.stores.scripts import LIBRARIES, SCRIPTS, source

        org_file = tmp / f"org-{n}.json"
        write_org(org_file, n)
        settings = Settings(
            redis_url=url,
            broker_url=url,
            api_token="bench",
            org_file=org_file,
            outbox_path=tmp / "outbox.jsonl",
        )
        self.meter, self.n, self.asks, self.no_gc = meter, n, asks, no_gc
        self.app = create_app(settings, register=False)
        self.c = build_container(settings, app=self.app)
        self.c.redis.flushdb()
        for name in SCRIPTS:
            if name not in LIBRARIES:  # loaded now: no NOSCRIPT retry inside a tick
                self.c.redis.script_load(source(name))
        self.seats = [s.member_id for s in self.c.org.current()[0].org.seats]
        assert len(self.seats) == n
        # As a worker's pool process does once it built its container (workers/stages/base.py
        # `ready_pool_process`): what lives as long as the process is hidden from the collector.
        gc.collect()
        gc.freeze()
        self.steps = {k: Step() for k in ("observe", "commit", "publish")}
        self.sent: list[dict[str, Any]] = []
        sent = self.sent

        def real_publish(app: Any, task: Any, tracking: str, message: dict[str, Any]) -> None:
            sent.append(message)
            publish(app, task, tracking, message)

        counted = timed(meter, self.steps["publish"], real_publish)
        controller_tick.publish = counted  # type: ignore[attr-defined]
        seat_runs = self.c.seat_runs
        seat_runs.observe = timed(meter, self.steps["observe"], seat_runs.observe)  # type: ignore[method-assign]
        seat_runs.commit = timed(meter, self.steps["commit"], seat_runs.commit)  # type: ignore[method-assign]
        self.tick_fn = controller_tick.ControllerTick(self.c, self.app, rng=random.Random(7).random)
        self.clock = T0
        from workers.queues import Queue

        self.turns_queue = Queue.TURNS.value  # kombu's Redis list for the queue

    # ---- getting to the steady state (untimed)

    def steady(self) -> None:
        from contracts.controller import TurnMessage
        from workers.stages.turns import Turns

        if self.asks:
            self._asks()
        first = self._tick_raw()
        if len(first.published) != self.n:
            raise RuntimeError(f"first tick published {len(first.published)} of {self.n}")
        turns = Turns.of(self.c, self.app)
        turns.clock_ms = lambda: self.clock + 10
        for m in list(self.sent):
            outcome = turns.run(TurnMessage.model_validate(m))
            if outcome != "ok":
                raise RuntimeError(f"turn {m}: {outcome}")
        self.sent.clear()
        self._drain()
        self._tick_raw()  # writes `last_decision: idle`
        again = self._tick_raw()
        if again.written or again.published or again.decisions != {"wait:idle": self.n}:
            raise RuntimeError(f"not steady: {again}")

    def _asks(self) -> None:
        """K asks of the last hour per seat, already sent (the ledger's keys, directly)."""
        from workers.stores import keys

        pipe = self.c.redis.pipeline(transaction=False)
        for seat in self.seats:
            for k in range(self.asks):
                op_id = f"bench-{seat}-{k}"
                at = T0 - 60_000 - k
                pipe.zadd(keys.by_seat(seat), {op_id: at})
                pipe.hset(keys.op(op_id), mapping={"state": "sent", "atMs": at})
        pipe.execute()

    def direct_everyone(self) -> None:
        """One directed mention per seat in its inbox, as the directedness stage records it."""
        from contracts import Candidate, Directedness
        from pipeline.facts import places_of
        from pipeline.fanout import Resolved
        from workers.stores.inbound import inbound_tracking_id

        verdict = Directedness(directed=True, surface="mention", reason="mention", why="named")
        view, _degraded = self.c.org.current()
        for i, seat in enumerate(self.seats):
            cand = Candidate.model_validate(
                {
                    "family": "messaging",
                    "source": "slack",
                    "deliveryId": f"bench-{i}",
                    "ids": {"channelId": "C1", "messageId": f"{i}.0"},
                    "msg": {"authorId": OPERATOR, "body": "look", "mentions": [seat]},
                    "atMs": self.clock,
                }
            )
            tracking = inbound_tracking_id(cand.delivery_id)
            self.c.journal.accept(
                tracking, kind="inbound", seat_id="", payload="{}", now_ms=1, fingerprint=""
            )
            self.c.inbound.record(
                tracking,
                cand,
                [Resolved(seat, verdict)],
                places_of(cand.to_wire()),
                now_ms=1,
                org=view.snapshot,
                seats=len(view.roster.seats),
            )

    def snapshot(self) -> list[bytes]:
        from workers.stores import keys

        pipe = self.c.redis.pipeline(transaction=False)
        for seat in self.seats:
            pipe.dump(keys.seat_run(seat))
        return list(pipe.execute())

    def restore(self, dumps: list[bytes]) -> None:
        from workers.stores import keys

        pipe = self.c.redis.pipeline(transaction=False)
        for seat, dump in zip(self.seats, dumps, strict=True):
            pipe.restore(keys.seat_run(seat), 0, dump, replace=True)
        pipe.execute()

    def _drain(self) -> int:
        return int(self.c.redis.delete(self.turns_queue))

    def _tick_raw(self) -> Any:
        self.clock += TICK_MS
        return self.tick_fn(now_ms=self.clock)

    # ---- one measured tick

    def tick(self) -> TickRun:
        for s in self.steps.values():
            s.reset()
        self.sent.clear()
        server0 = commandstats(self.c.redis)
        self.clock += TICK_MS
        if self.no_gc:
            gc.disable()
        r0, c0 = self.meter.mark()
        cpu0, t0 = time.process_time(), time.perf_counter()
        report = self.tick_fn(now_ms=self.clock)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        if self.no_gc:
            gc.enable()
        r1, c1 = self.meter.mark()
        server = commandstats(self.c.redis) - server0
        pub = self.steps["publish"]
        split = {k: s.seconds for k, s in self.steps.items()}
        split["decide + rest"] = seconds - sum(split.values())
        return TickRun(
            seconds=seconds,
            cpu=cpu,
            trips=r1 - r0 - pub.trips,
            commands=c1 - c0 - pub.commands,
            publish_trips=pub.trips,
            publish_commands=pub.commands,
            published=len(report.published),
            written=report.written,
            server_commands=server,
            split=split,
            decisions=dict(report.decisions),
        )

    def idle(self, ticks: int) -> Series:
        s = Series("idle", self.n, self.asks)
        for _ in range(ticks):
            t = self.tick()
            if t.written or t.published or t.decisions != {"wait:idle": self.n}:
                raise RuntimeError(f"idle tick changed something: {t}")
            s.ticks.append(t)
        return s

    def busy(self, ticks: int, warmup: int = 2) -> Series:
        dumps = self.snapshot()
        s = Series("busy", self.n, self.asks)
        for k in range(warmup + ticks):
            self.restore(dumps)
            t = self.tick()
            if self._drain() != 1:
                raise RuntimeError(f"no {self.turns_queue!r} list after a busy tick")
            if t.written != self.n or t.published != self.n:
                raise RuntimeError(f"busy tick: {t.written} written, {t.published} published")
            if k >= warmup:
                s.ticks.append(t)
        self.restore(dumps)
        return s

    def profile(self, situation: str, top: int) -> str:
        dumps = self.snapshot() if situation == "busy" else []
        prof = cProfile.Profile()
        for _ in range(PROFILE_TICKS):
            if dumps:
                self.restore(dumps)
            self.clock += TICK_MS
            prof.enable()
            self.tick_fn(now_ms=self.clock)
            prof.disable()
            self._drain()
        if dumps:
            self.restore(dumps)
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out)
        stats.sort_stats("tottime").print_stats(top)
        return out.getvalue()


# --------------------------------------------------------------------------- report

HEADER = (
    f"{'situation':<10}{'asks':>5}{'seats':>7}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}"
    f"{'µs/seat':>9}"
    f"{'cpu ms':>8}{'rt/tick':>8}{'cmd/tick':>9}{'srv cmd':>13}{'pub':>6}{'rt/pub':>7}"
    f"{'cmd/pub':>8}  split p50 ms (observe / decide / commit / publish)"
)


def line(s: Series) -> str:
    r = s.row()
    lo, hi = r["serverCommandsPerTick"]
    srv = f"{lo}" if lo == hi else f"{lo}-{hi}"
    sp = r["splitMsP50"]
    split = " / ".join(
        f"{sp[k]:.1f}" for k in ("observe", "decide + rest", "commit", "publish") if k in sp
    )
    return (
        f"{s.situation:<10}{s.asks:>5}{s.n:>7}{r['tickMs']['p50']:>9.2f}{r['tickMs']['p95']:>9.2f}"
        f"{r['tickMs']['max']:>9.2f}"
        f"{r['perSeatUs']:>9.1f}{r['cpuMsP50']:>8.1f}{r['roundTripsPerTick']:>8}"
        f"{r['commandsPerTick']:>9}{srv:>13}{r['published']:>6}"
        f"{r['publishRoundTripsPerTurn']:>7.2f}{r['publishCommandsPerTurn']:>8.2f}  {split}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--redis-url", default=DEFAULT_URL, help="FLUSHED (default: %(default)s)")
    ap.add_argument("--sizes", default="10,100,1000", help="seat counts, comma-separated")
    ap.add_argument("--ticks", type=int, default=20, help="timed ticks per situation and size")
    ap.add_argument("--asks", type=int, default=0, help="recent sent asks per seat (default 0)")
    ap.add_argument(
        "--no-gc", action="store_true", help="gc.disable() around each timed tick (diagnosis)"
    )
    ap.add_argument("--profile", action="store_true", help="cProfile ticks at the largest size")
    ap.add_argument("--top", type=int, default=25, help="cProfile entries to print")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    if not sizes or args.ticks < 1:
        ap.error("--sizes and --ticks must be positive")

    from workers.settings import Settings

    interval_s = float(Settings.model_fields["controller_interval_s"].default)
    meter = Meter()
    series: list[Series] = []
    profiles: list[str] = []
    print(
        f"bench.controller: one ControllerTick over N seats on {args.redis_url} (FLUSHED), "
        f"{args.ticks} ticks per situation, {args.asks} recent asks per seat; beat interval "
        f"{interval_s:g} s (SEATWIRE_CONTROLLER_INTERVAL_S default); publishes: the real "
        f"Celery send_task to the Redis broker on the same database\n"
    )
    print(HEADER)
    last: Bench | None = None
    with tempfile.TemporaryDirectory(prefix="seatwire-controller-") as tmp:
        for n in sizes:
            gc.unfreeze()  # the previous size's container is garbage now
            b = Bench(meter, args.redis_url, n, args.asks, Path(tmp), args.no_gc)
            last = b
            b.steady()
            gc.collect()
            s = b.idle(args.ticks)
            series.append(s)
            print(line(s), flush=True)
            if args.profile and n == sizes[-1]:
                profiles.append(f"idle, N={n}:\n{b.profile('idle', args.top)}")
            b.direct_everyone()
            gc.collect()
            s = b.busy(args.ticks)
            series.append(s)
            print(line(s), flush=True)
            if args.profile and n == sizes[-1]:
                profiles.append(f"busy, N={n}:\n{b.profile('busy', args.top)}")
        if last is not None:
            last.c.redis.flushdb()

    print("\n  ratios to the smallest size (time per seat; round trips per tick):")
    base = {s.situation: s for s in series if s.n == sizes[0]}
    for s in series:
        b0 = base[s.situation]
        per = statistics.median(t.seconds for t in s.ticks) / s.n
        per0 = statistics.median(t.seconds for t in b0.ticks) / b0.n
        print(
            f"    {s.situation:<5} N={s.n:<6} per seat x{per / per0:.2f}, round trips "
            f"{s.one('trips')} vs {b0.one('trips')}, commands {s.one('commands')} vs "
            f"{b0.one('commands')}; decisions {s.ticks[0].decisions}"
        )
    worst = max(series, key=lambda s: s.pct(0.95))
    print(
        f"\n  slowest p95: {1e3 * worst.pct(0.95):.1f} ms ({worst.situation}, N={worst.n}) = "
        f"{worst.pct(0.95) / interval_s:.3f} of the {interval_s:g} s interval"
    )
    for p in profiles:
        print(f"\n  cProfile, {PROFILE_TICKS} ticks, {p}")
    if args.json:
        args.json.write_text(json.dumps([s.row() for s in series], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
