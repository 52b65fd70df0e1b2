"""The work-controller beat tick over N seats on real Redis (issues 12 and 27, "Benchmark").

    uv run python -m bench.controller [--sizes 100,1000,10000] [--ticks 20] [--active 0.01]
        [--busy-max 10000] [--asks 0] [--redis-url URL] [--profile] [--top 25] [--json FILE]

By default the bench starts a redis-server of its own on a free port (no persistence), so the
server's CPU and the bytes it sends are the tick's alone; `--redis-url` uses an existing
database instead (FLUSHED), where the server figures include whatever else it serves.

For each N (the smaller sizes are the baseline of the larger ones, in the same run): flush the
database, write an org file (a temp dir) with N seats (a member and a seat each, the embedded
`noop` launcher, one operator member), build the container (`build_container`) and a
publish-only Celery app (`create_app(settings, register=False)`, the broker on the SAME
database), `gc.freeze()` what exists then (as a worker's pool process does after building its
container: workers/stages/base.py `ready_pool_process`), then bring every seat to rest: tick
(every seat's `first` turn is published), run each published turn in-process through the turns
stage (`Turns.run`: the noop launcher records `ok`), tick until nothing is due. Above 2,000
seats, only the first seat goes that way, and its record at rest is copied to every other seat
(its id replaced; the due index filled for the org, and empty, as at rest): the same state,
without running 100,000 turns. Then, timed, `ControllerTick(container, app, rng=...)(now_ms=...)`
-- the controller beat task's body -- 1 s apart on the clock it is given:

- **idle**: `--ticks` ticks with every seat at rest: each must decide nobody, write nothing
  and publish nothing.
- **sparse**: before each tick (untimed), `--active` of the seats (1 % by default, at least
  one), drawn at random, get a directed Slack mention in their inbox the way the directedness
  stage puts it there (`Journal.accept` + `InboundStore.record`); the tick (timed) begins
  their turns; then (untimed) each published turn runs through the turns stage and the seat
  acknowledges its inbox, as a seat's runtime would. So each tick decides the seats with news
  and the seats whose turns ended since the last: about twice `--active`.
- **busy** (N <= `--busy-max`): one directed mention per seat, the records DUMPed, then
  `--ticks` times: RESTORE the records and the due index (untimed), tick (timed, with a batch
  of N: every seat begins a turn with reason `notices`, its record is written and one turn
  message per seat goes on the broker's `turns` list through the REAL
  `controller_tick.publish_turns`: one LPUSH of every message Celery would write, the broker
  being the stores' Redis), DEL the broker's `turns` list (untimed).

With `--asks K`, every seat also has K asks of the last hour, already `sent` (the ledger's
per-seat index `g:seat:{seat}` and the ask's `op` hash, written directly): the tick's second
read (the pending deliveries) then has K commands per seat it decides.

Measured per tick: wall time of the whole call (p50/p95/p99/max, and per seat decided), this
process's CPU, the Redis server's CPU (INFO cpu, user + sys) and the bytes it sent (INFO stats
`total_net_output_bytes`, less the INFO replies themselves, measured with no tick between), and
the split observe / decide / commit / publish (`observe`, `settle` and the module's `publish`
wrapped with timers). Redis round trips and commands are counted on the client: a round trip
is one `send_packed_command` of redis-py's connection (`redis.connection.AbstractConnection`,
patched for the whole process, so the broker's kombu publishes count too); a plain command is
one round trip and one command, a pipeline's `execute` is ONE round trip of as many commands
as it queued (`pack_commands`), a Lua script is one of each (EVALSHA; the scripts are loaded
before the first tick, so no NOSCRIPT retry is counted). Round trips and commands made inside
the wrapped `publish` are reported per turn, apart from the tick's own.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

T0 = 1_800_000_000_000  # the clock handed to the ticks (ms)
TICK_MS = 1_000  # ticks are this far apart on that clock
OPERATOR = "ops"
PROFILE_TICKS = 5
REAL_SETUP_MAX = 2_000  # above this, the record at rest is copied (see the docstring)


def seat_id(i: int) -> str:
    return f"seat-{i:06d}"


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


class Server:
    """The Redis server's CPU (s) and bytes sent, read with INFO; `bytes` less the INFO
    replies' own (measured once, with nothing between two reads)."""

    def __init__(self, client: Any) -> None:
        self.r = client
        a, b = self.read(), self.read()
        self.info_bytes = b[1] - a[1]

    def read(self) -> tuple[float, int]:
        cpu = self.r.info("cpu")
        stats = self.r.info("stats")
        return (
            float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
            int(stats["total_net_output_bytes"]),
        )

    def delta(self, before: tuple[float, int]) -> tuple[float, int]:
        after = self.read()
        # Two INFO calls per read: the first read's replies land in this delta.
        return after[0] - before[0], max(0, after[1] - before[1] - self.info_bytes)


@dataclass
class TickRun:
    """One tick's figures."""

    seconds: float
    cpu: float
    server_cpu: float
    server_bytes: int
    trips: int  # the tick's own (publishes excluded)
    commands: int
    publish_trips: int
    publish_commands: int
    published: int
    written: int
    decided: int
    split: dict[str, float]  # seconds by step
    decisions: dict[str, int]
    more: bool = False  # the tick left seats due for a next batch


@dataclass
class Second:
    """One second of the clock in the sparse situation: the ticks that ran in it (the beat's,
    then each next batch at once while the last said more), summed."""

    ticks: int
    cpu: float
    seconds: float
    decided: int


@dataclass
class Series:
    situation: str
    n: int
    asks: int
    ticks: list[TickRun] = field(default_factory=list)
    per_second: list[Second] = field(default_factory=list)

    def pct(self, q: float, name: str = "seconds") -> float:
        v = sorted(getattr(t, name) for t in self.ticks)
        return float(v[min(len(v) - 1, max(0, round(q * len(v)) - 1))])

    def med(self, name: str) -> float:
        return float(statistics.median(getattr(t, name) for t in self.ticks))

    def total(self, name: str) -> int:
        return sum(int(getattr(t, name)) for t in self.ticks)

    def split_ms(self) -> dict[str, float]:
        return {
            k: 1e3 * statistics.median(t.split[k] for t in self.ticks) for k in self.ticks[0].split
        }

    def row(self) -> dict[str, Any]:
        published = self.total("published")
        decided = self.total("decided")
        return {
            "situation": self.situation,
            "seats": self.n,
            "asksPerSeat": self.asks,
            "ticks": len(self.ticks),
            "tickMs": {
                "p50": round(1e3 * self.med("seconds"), 3),
                "p95": round(1e3 * self.pct(0.95), 3),
                "p99": round(1e3 * self.pct(0.99), 3),
                "max": round(1e3 * self.pct(1.0), 3),
            },
            "cpuMsP50": round(1e3 * self.med("cpu"), 3),
            "serverCpuMsP50": round(1e3 * self.med("server_cpu"), 3),
            "serverBytesP50": int(self.med("server_bytes")),
            "decidedP50": int(self.med("decided")),
            "bytesPerSeatDecided": round(self.total("server_bytes") / decided, 1)
            if decided
            else None,
            "cpuUsPerSeatDecided": round(1e6 * sum(t.cpu for t in self.ticks) / decided, 1)
            if decided
            else None,
            "roundTripsP50": int(self.med("trips")),
            "commandsP50": int(self.med("commands")),
            "published": published,
            "publishRoundTripsPerTurn": (
                round(self.total("publish_trips") / published, 3) if published else 0
            ),
            "publishCommandsPerTurn": (
                round(self.total("publish_commands") / published, 3) if published else 0
            ),
            "written": self.total("written"),
            "splitMsP50": {k: round(v, 3) for k, v in self.split_ms().items()},
            "decisions": self.ticks[-1].decisions,
            **self.second_row(),
        }

    def second_row(self) -> dict[str, Any]:
        if not self.per_second:
            return {}
        ps = self.per_second
        wall = sorted(x.seconds for x in ps)
        return {
            "perSecond": {
                "ticksMax": max(x.ticks for x in ps),
                "ticksP50": statistics.median(x.ticks for x in ps),
                "decidedP50": statistics.median(x.decided for x in ps),
                "cpuMsP50": round(1e3 * statistics.median(x.cpu for x in ps), 3),
                "wallMsP50": round(1e3 * statistics.median(wall), 3),
                "wallMsMax": round(1e3 * wall[-1], 3),
            }
        }


# --------------------------------------------------------------------------- one size


class Bench:
    """One size: the org, the container, the app and the tick, on a flushed database."""

    def __init__(
        self, meter: Meter, url: str, n: int, asks: int, tmp: Path, no_gc: bool = False
    ) -> None:
        import workers.stages.controller_tick as controller_tick
        from workers.bootstrap import build_container
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
        self.profile_sort = "tottime"
        self.app = create_app(settings, register=False)
        self.c = build_container(settings, app=self.app)
        self.c.redis.flushdb()
        for name in SCRIPTS:
            if name not in LIBRARIES:  # loaded now: no NOSCRIPT retry inside a tick
                self.c.redis.script_load(source(name))
        self.seats = [s.member_id for s in self.c.org.current()[0].org.seats]
        assert len(self.seats) == n
        self.server = Server(self.c.redis)
        # As a worker's pool process does once it built its container (workers/stages/base.py
        # `ready_pool_process`): what lives as long as the process is hidden from the collector.
        gc.collect()
        gc.freeze()
        self.steps = {k: Step() for k in ("observe", "commit", "publish")}
        self.sent: list[dict[str, Any]] = []
        sent = self.sent

        real = controller_tick.publish_turns

        def real_publish(app: Any, c: Any, turns: list[tuple[str, dict[str, Any]]]) -> None:
            sent.extend(m for _, m in turns)
            real(app, c, turns)

        counted = timed(meter, self.steps["publish"], real_publish)
        controller_tick.publish_turns = counted
        seat_runs = self.c.seat_runs
        seat_runs.observe = timed(meter, self.steps["observe"], seat_runs.observe)  # type: ignore[method-assign]
        seat_runs.settle = timed(meter, self.steps["commit"], seat_runs.settle)  # type: ignore[method-assign]
        self.tick_fn = controller_tick.ControllerTick(self.c, self.app, rng=random.Random(7).random)
        self.clock = T0
        self.rnd = random.Random(11)
        self.mentions = 0
        from workers.queues import Queue

        self.turns_queue = Queue.TURNS.value  # kombu's Redis list for the queue

    @contextmanager
    def batch(self, size: int) -> Iterator[None]:
        """Ticks that decide up to `size` seats (the setting, for this bench's own steps)."""
        settings = self.c.settings
        self.c.settings = settings.model_copy(update={"controller_tick_seats": size})
        try:
            yield
        finally:
            self.c.settings = settings

    # ---- getting to the rest state (untimed)

    def steady(self) -> None:
        if self.asks:
            self._asks()
        big = self.n > REAL_SETUP_MAX
        with self.batch(1 if big else self.n):
            first = self._tick_raw()
            if big:  # only the first seat goes on; the others are copied from it at rest
                self._forget(self.seats[1:])
            if len(first.published) != (1 if big else self.n):
                raise RuntimeError(f"first tick published {len(first.published)} of {self.n}")
            self.run_sent()
            for _ in range(5):
                if self._tick_raw().seats == 0:
                    break
            if big:
                self._copy_rest(self.seats[0])
            again = self._tick_raw()
        if again.seats or again.written or again.published:
            raise RuntimeError(f"not at rest: {again}")

    def _forget(self, seats: list[str]) -> None:
        """Take seats out of the due index (they are at rest, or will be copied so)."""
        from workers.stores import keys

        pipe = self.c.redis.pipeline(transaction=False)
        for i in range(0, len(seats), 5000):
            pipe.zrem(keys.CONTROLLER_DUE, *seats[i : i + 5000])
        pipe.execute()

    def _copy_rest(self, model: str) -> None:
        """Every seat but `model` gets `model`'s record at rest (its id replaced)."""
        from workers.stores import keys
        from workers.stores.scripts import text as as_text

        rev, doc = self.c.redis.hmget(keys.seat_run(model), ["rev", "doc"])
        turns = [as_text(t) for t in self.c.redis.lrange(keys.seat_turns(model), 0, -1)]
        text, at = as_text(doc), as_text(rev)
        pipe = self.c.redis.pipeline(transaction=False)
        for k, seat in enumerate(self.seats):
            if seat != model:
                pipe.hset(
                    keys.seat_run(seat), mapping={"rev": at, "doc": text.replace(model, seat)}
                )
                if turns:
                    pipe.rpush(keys.seat_turns(seat), *(t.replace(model, seat) for t in turns))
            if k % 5000 == 4999:
                pipe.execute()
        pipe.execute()
        self._forget([s for s in self.seats if s != model])

    def run_sent(self) -> None:
        """Run every published turn (noop: ok) and let the seat read its inbox."""
        from contracts.controller import TurnMessage
        from workers.stages.turns import Turns

        turns = Turns.of(self.c, self.app)
        turns.clock_ms = lambda: self.clock + 10
        for m in list(self.sent):
            outcome = turns.run(TurnMessage.model_validate(m))
            if outcome != "ok":
                raise RuntimeError(f"turn {m}: {outcome}")
            page = self.c.inbox.updates(m["seatId"])
            if page.items:
                self.c.inbox.ack(m["seatId"], page.position)
        self.sent.clear()
        self._drain()

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

    def direct(self, seats: list[str]) -> None:
        """One directed mention in each seat's inbox, as the directedness stage records it."""
        from contracts import Candidate, Directedness
        from pipeline.facts import places_of
        from pipeline.fanout import Resolved
        from workers.stores.inbound import inbound_tracking_id

        verdict = Directedness(directed=True, surface="mention", reason="mention", why="named")
        view, _degraded = self.c.org.current()
        for seat in seats:
            self.mentions += 1
            i = self.mentions
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
            pipe.dump(keys.seat_turns(seat))
        pipe.dump(keys.CONTROLLER_DUE)
        return list(pipe.execute())

    def restore(self, dumps: list[bytes]) -> None:
        from workers.stores import keys

        pipe = self.c.redis.pipeline(transaction=False)
        for key, dump in zip(
            [
                *(k for s in self.seats for k in (keys.seat_run(s), keys.seat_turns(s))),
                keys.CONTROLLER_DUE,
            ],
            dumps,
            strict=True,
        ):
            if dump is None:
                pipe.delete(key)
            else:
                pipe.restore(key, 0, dump, replace=True)
        pipe.execute()

    def _drain(self) -> int:
        return int(self.c.redis.delete(self.turns_queue))

    def _tick_raw(self) -> Any:
        self.clock += TICK_MS
        return self.tick_fn(now_ms=self.clock)

    # ---- one measured tick

    def tick(self, advance: int = TICK_MS) -> TickRun:
        for s in self.steps.values():
            s.reset()
        self.sent.clear()
        self.clock += advance
        server0 = self.server.read()
        if self.no_gc:
            gc.disable()
        r0, c0 = self.meter.mark()
        cpu0, t0 = time.process_time(), time.perf_counter()
        report = self.tick_fn(now_ms=self.clock)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        if self.no_gc:
            gc.enable()
        r1, c1 = self.meter.mark()
        server_cpu, server_bytes = self.server.delta(server0)
        pub = self.steps["publish"]
        split = {k: s.seconds for k, s in self.steps.items()}
        split["decide + rest"] = seconds - sum(split.values())
        return TickRun(
            seconds=seconds,
            cpu=cpu,
            server_cpu=server_cpu,
            server_bytes=server_bytes,
            trips=r1 - r0 - pub.trips,
            commands=c1 - c0 - pub.commands,
            publish_trips=pub.trips,
            publish_commands=pub.commands,
            published=len(report.published),
            written=report.written,
            decided=report.seats,
            split=split,
            decisions=dict(report.decisions),
            more=report.more,
        )

    def second(self) -> list[TickRun]:
        """The beat's tick of the next second, then each next batch at once (on a clock that
        moved by the batch's own wall time), while the last said more were due; as
        `workers/stages/controller_tick.py` `register` runs them."""
        runs = [self.tick()]
        while runs[-1].more:
            runs.append(self.tick(advance=max(1, round(1e3 * runs[-1].seconds))))
            if len(runs) > 1000:
                raise RuntimeError("a second of ticks never drained the due seats")
        return runs

    def idle(self, ticks: int) -> Series:
        s = Series("idle", self.n, self.asks)
        for _ in range(ticks):
            t = self.tick()
            if t.written or t.published or t.decided:
                raise RuntimeError(f"idle tick changed something: {t}")
            s.ticks.append(t)
        return s

    def sparse(self, ticks: int, active: float, warmup: int = 3) -> Series:
        s = Series("sparse", self.n, self.asks)
        k = max(1, round(self.n * active))
        for i in range(warmup + ticks):
            self.direct(self.rnd.sample(self.seats, k))
            gc.collect()
            runs = self.second()
            self.run_sent()
            if sum(t.published for t in runs) == 0:
                raise RuntimeError(f"a sparse second began no turn: {runs}")
            if i >= warmup:
                s.ticks.extend(runs)
                s.per_second.append(
                    Second(
                        ticks=len(runs),
                        cpu=sum(t.cpu for t in runs),
                        seconds=sum(t.seconds for t in runs),
                        decided=sum(t.decided for t in runs),
                    )
                )
        for _ in range(5):  # back to rest
            if self._tick_raw().seats == 0:
                break
        return s

    def busy(self, ticks: int, warmup: int = 2) -> Series:
        self.direct(self.seats)
        dumps = self.snapshot()
        s = Series("busy", self.n, self.asks)
        with self.batch(self.n):
            for k in range(warmup + ticks):
                self.restore(dumps)
                gc.collect()
                t = self.tick()
                if self._drain() != 1:
                    raise RuntimeError(f"no {self.turns_queue!r} list after a busy tick")
                if t.written != self.n or t.published != self.n:
                    raise RuntimeError(f"busy tick: {t.written} written, {t.published} published")
                if k >= warmup:
                    s.ticks.append(t)
        self.restore(dumps)
        return s

    def profile(self, situation: str, top: int, active: float) -> str:
        prof = cProfile.Profile()
        k = max(1, round(self.n * active))
        for _ in range(PROFILE_TICKS):
            if situation == "sparse":
                self.direct(self.rnd.sample(self.seats, k))
            self.clock += TICK_MS
            prof.enable()
            self.tick_fn(now_ms=self.clock)
            prof.disable()
            self.run_sent()
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out)
        stats.sort_stats(self.profile_sort).print_stats(top)
        return out.getvalue()


# --------------------------------------------------------------------------- report

HEADER = (
    f"{'situation':<9}{'seats':>7}{'decided':>8}{'p50 ms':>8}{'p99 ms':>8}{'cpu ms':>8}"
    f"{'srv ms':>7}{'srv KB':>8}{'B/seat':>8}{'rt':>5}{'pub':>6}{'rt/pub':>7}"
)


def line(s: Series) -> str:
    r = s.row()
    per = r["bytesPerSeatDecided"]
    return (
        f"{s.situation:<9}{s.n:>7}{r['decidedP50']:>8}{r['tickMs']['p50']:>8.1f}"
        f"{r['tickMs']['p99']:>8.1f}{r['cpuMsP50']:>8.1f}{r['serverCpuMsP50']:>7.1f}"
        f"{r['serverBytesP50'] / 1024:>8.1f}{'-' if per is None else f'{per:.0f}':>8}"
        f"{r['roundTripsP50']:>5}{r['published'] // len(s.ticks):>6}"
        f"{r['publishRoundTripsPerTurn']:>7.2f}"
    )


def split_line(s: Series) -> str:
    r = s.row()
    sp = r["splitMsP50"]
    parts = " / ".join(
        f"{sp[k]:.1f}" for k in ("observe", "decide + rest", "commit", "publish") if k in sp
    )
    out = f"    {s.situation} N={s.n}: observe / decide / commit / publish p50 ms {parts}"
    ps = r.get("perSecond")
    if ps:
        out += (
            f"\n    {s.situation} N={s.n}: a second's ticks p50 {ps['ticksP50']:g} (max "
            f"{ps['ticksMax']}), {ps['decidedP50']:g} seats decided, CPU {ps['cpuMsP50']:.1f} ms"
            f", wall p50 {ps['wallMsP50']:.1f} ms (max {ps['wallMsMax']:.1f})"
        )
    return out


@contextmanager
def database(url: str | None, tmp: Path) -> Iterator[str]:
    """`url`, or a redis-server of the bench's own (no persistence), stopped at the end."""
    if url is not None:
        yield url
        return
    from bench.chaos import redis_server

    with redis_server(tmp / "redis", "--appendonly", "no") as server:
        yield server.url


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--redis-url", default=None, help="an existing database, FLUSHED (default: its own)"
    )
    ap.add_argument("--sizes", default="100,1000,10000", help="seat counts, comma-separated")
    ap.add_argument("--ticks", type=int, default=20, help="timed ticks per situation and size")
    ap.add_argument("--active", type=float, default=0.01, help="sparse: seats with news a tick")
    ap.add_argument("--busy-max", type=int, default=10_000, help="busy only up to this size")
    ap.add_argument("--asks", type=int, default=0, help="recent sent asks per seat (default 0)")
    ap.add_argument(
        "--no-gc", action="store_true", help="gc.disable() around each timed tick (diagnosis)"
    )
    ap.add_argument("--profile", action="store_true", help="cProfile ticks at the largest size")
    ap.add_argument("--top", type=int, default=25, help="cProfile entries to print")
    ap.add_argument(
        "--sort", default="tottime", help="cProfile order: tottime (own time) or cumulative"
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    if not sizes or args.ticks < 1 or not 0 < args.active <= 1:
        ap.error("--sizes and --ticks must be positive, --active in (0, 1]")

    from bench import stop_cleanly_on_sigterm
    from workers.settings import Settings

    stop_cleanly_on_sigterm()
    interval_s = float(Settings.model_fields["controller_interval_s"].default)
    meter = Meter()
    series: list[Series] = []
    profiles: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="seatwire-controller-") as tmp,
        database(args.redis_url, Path(tmp)) as url,
    ):
        print(
            f"bench.controller: ControllerTick over N seats on {url} (FLUSHED"
            f"{'' if args.redis_url else ', its own server'}), {args.ticks} ticks per "
            f"situation, sparse {args.active:.1%} of seats with news a tick, {args.asks} "
            f"recent asks per seat; beat interval {interval_s:g} s; publishes: the real "
            f"publish_turns to the Redis broker on the same database\n"
        )
        print(HEADER)
        last: Bench | None = None
        for n in sizes:
            gc.unfreeze()  # the previous size's container is garbage now
            b = Bench(meter, url, n, args.asks, Path(tmp), args.no_gc)
            b.profile_sort = args.sort
            last = b
            b.steady()
            gc.collect()
            for name in ("idle", "sparse", "busy"):
                if name == "busy" and n > args.busy_max:
                    continue
                if name == "idle":
                    s = b.idle(args.ticks)
                elif name == "sparse":
                    s = b.sparse(args.ticks, args.active)
                else:
                    s = b.busy(args.ticks)
                series.append(s)
                print(line(s), flush=True)
                if args.profile and n == sizes[-1] and name != "busy":
                    profiles.append(f"{name}, N={n}:\n{b.profile(name, args.top, args.active)}")
        if last is not None:
            last.c.redis.flushdb()

    print("\n  per situation, against the smallest size:")
    base = {s.situation: s for s in series if s.n == sizes[0]}
    for s in series:
        b0 = base[s.situation]
        r, r0 = s.row(), b0.row()
        cpu = s.med("cpu") / b0.med("cpu") if b0.med("cpu") else float("nan")
        line_ = f"    {s.situation:<6} N={s.n:<7} tick CPU x{cpu:.2f}"
        for name, what in (("bytesPerSeatDecided", "bytes"), ("cpuUsPerSeatDecided", "CPU")):
            if r[name] and r0[name]:
                line_ += f", {what} per seat decided x{r[name] / r0[name]:.2f}"
        print(line_)
    print()
    for s in series:
        print(split_line(s))
    worst = max(series, key=lambda s: s.pct(0.99))
    print(
        f"\n  slowest p99: {1e3 * worst.pct(0.99):.1f} ms ({worst.situation}, N={worst.n}) = "
        f"{worst.pct(0.99) / interval_s:.3f} of the {interval_s:g} s interval"
    )
    for p in profiles:
        print(f"\n  cProfile, {PROFILE_TICKS} ticks, {p}")
    if args.json:
        args.json.write_text(json.dumps([s.row() for s in series], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
