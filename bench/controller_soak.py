"""The event-driven work controller's soak (issue 27, "Targets"): N seats, news for a share of
them every second, turns by the `noop` launcher, for a long while, with real processes.

    uv run python -m bench.controller_soak [--seats 10000] [--minutes 30] [--rate 0.01]
        [--turn-workers 1] [--turn-concurrency 2] [--republish-after-s 30] [--window-s 120]
        [--max-backlog N] [--keep DIR] [--json FILE]

What runs: a redis-server of the bench's own on a free port (bench/chaos.py `redis_server`:
AOF on, `appendfsync everysec`, as a deployment keeps it, `noeviction`, its own temp dir);
an org file of `--seats` seats (noop launcher, one operator member: bench/controller.py
`write_org`); and, as processes in groups of their own, `seatwire beat` (the controller's
interval its default, 1 s, so beat sends a tick only when the due index says a seat is due),
`seatwire worker --queues controller,steward --concurrency 1` (the tick, and the steward's
five-minute tick over no objectives, so its queue does not fill) and `--turn-workers` times
`seatwire worker --queues turns --concurrency {--turn-concurrency}`. Everything is stopped by
its group's id at the end, also on Ctrl-C or SIGTERM.

Warm-up: the first tick fills the due index and every seat runs its `first` turn; the soak
starts once every seat has one and none is due or in flight.

The feeder (a thread of this process), once a second for `--minutes`: `--rate` x N seats
drawn at random each get one directed Slack mention in their inbox the way the directedness
stage puts it there (`Journal.accept` + `InboundStore.record`, as bench/controller.py's
`direct`), and the seat's inbox is acknowledged at once up to the new item (`Inbox.ack`): a
seat's runtime that reads its inbox as soon as it can, so the noop turns leave no inbox
unacknowledged; the controller still owes the seat a turn for the new notice (reason
`notices`). Before placing it, the feeder reads the seat's turns begun (`seq`); after, its
notice count. The news' own keys (the journal entry, the verdicts, the org version's snapshot,
the ledger rows) are kept `--window-s` seconds instead of days (bench/capacity.py
`shortened`), so that the memory they take levels off within the run.

The checks, on the seats' records (`keys.seat_run(seat)` field `doc` and the list
`keys.seat_turns(seat)`, a `SeatRun`: `seq` the turns begun, `active` the turn in flight,
`turns` the last 10 finished, `noticesAtTurn`
the notice count the last turn began with), read every second for the seats with news not yet
handed to a turn and every `--sample-s` seconds for every seat:

- no turn twice: every finished turn's record, by turn id, is the same whenever it is read,
  appears once in a history and is never in flight again; the turns worker's log names each
  turn id finished exactly once (`turn <id> of <seat>: ok`), and the turns it names are as
  many as the seats' `seq` less those in flight;
- none at once for a seat: a seat's finished turns, in `seq` order, each start after the
  previous ended; and each was queued after the previous ended, but for the tick's own
  clock (a tick's time is taken as it starts, before it reads the seats: a turn that ended
  while the tick ran may end after the next one's `queuedAtMs`), so only a gap longer than
  the longest tick counts as a failure;
- no wake-up lost: every news is handed to a turn: a record read after it shows
  `noticesAtTurn` at or above the seat's notice count once it was placed (exact: the turn
  that begins takes the count it observes). News not handed on once the feeder stopped and
  the fleet settled (up to `--quiesce-s`) is lost: the failure. News not handed on 60 s after
  it was placed is counted and listed as late (a figure, with the seat's state then). The
  latency news -> turn queued is the `queuedAtMs` of the turn that took it: the one turn
  begun between the last read that did not show it handed on and the first that did
  (`exact`), else the earliest of them queued after the news (`ambiguous`, counted apart).
  A negative one is a tick whose clock was taken just before the news came and whose read
  of the seat came just after;
- Redis memory flat: INFO `used_memory` every `--memory-s` seconds: first, last, max and
  the slope over the second half; every key's bytes by family (`MEMORY USAGE`, as
  bench/capacity.py's `survey`, the broker's keys too) at the start, the middle and the end
  of the feed.

Also: the controller ticks run (the controller worker's log: Celery's `succeeded in` lines,
with their durations) and the turns they published (`controller tick: published [...]`); CPU
of each process group (/proc/<pid>/stat: its live processes' utime + stime, and what its
leader reaped) and of the Redis server (INFO cpu) over the feed; load averages.

The fleet's turn republish time (`SEATWIRE_TURN_REPUBLISH_AFTER_MS`) is the setting's
default unless `--republish-after-s` says otherwise. A queued turn not started that long after
it was published is published again, each later copy twice as long after the one before
(pipeline/turns.py `republish_at`), so turns that wait behind a busy queue gain a few copies,
not one a period. When the turns queue holds more than the news of the republish time + 30 s
(`--max-backlog`), the run measures an overload of the turns workers, not the controller: the
feed stops and the run is reported INCOMPLETE.

Exit status 1 when a check fails (the report lists the first failures: seat, turn ids,
times) or the run is incomplete. `--json FILE` writes the figures; `--keep DIR` copies the
processes' logs there.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import random
import re
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis

from bench.capacity import Family, family
from bench.chaos import Fleet, RedisServer, redis_server
from bench.controller import OPERATOR, write_org
from contracts.controller import SeatRun
from pipeline.turns import HISTORY
from workers.stores.seat_runs import read_record

# A queued turn not started this long after it was published is published again (the
# setting's default): past it, a backlog on the turns queue gains a copy of each waiting turn
# per period (tests/workers/test_controller_republish.py).
REPUBLISH_S = 30.0
LATE_S = 60.0  # news not handed to a turn this long after it was placed is listed as late
PENDING_EVERY_S = 1.0  # the seats with news not yet handed on are read this often
MIB = 1024 * 1024
TOKEN = "soak-token"
TURN_DONE = re.compile(r"\] turn (\S+) of (\S+): (\w+)\s*$")
NOT_QUEUED = re.compile(r"\] turn (\S+) is not queued")
TICK_DONE = re.compile(r"Task seatwire\.controller\.tick\[[^\]]+\] succeeded in ([0-9.eE-]+)s")
PUBLISHED = re.compile(r"controller tick: published \[([^\]]*)\], (\d+) conflict")
QUOTED = re.compile(r"'([^']+)'")


def now_ms() -> int:
    return int(time.time() * 1000)


def seq_of(turn_id: str) -> int:
    return int(turn_id.rsplit(":", 1)[1])


# --------------------------------------------------------------------------- the fleet


def fleet_env(
    server: RedisServer, tmp: Path, org: Path, interval_s: float, republish_s: float
) -> dict[str, str]:
    env = {
        **os.environ,
        "SEATWIRE_REDIS_URL": server.url,
        "SEATWIRE_API_TOKEN": TOKEN,
        "SEATWIRE_ORG_FILE": str(org),
        "SEATWIRE_OUTBOX_PATH": str(tmp / "outbox.jsonl"),
        "SEATWIRE_OUTBOX_FSYNC": "false",
        "SEATWIRE_CONTROLLER_INTERVAL_S": f"{interval_s:g}",
        "SEATWIRE_TURN_REPUBLISH_AFTER_MS": str(int(republish_s * 1000)),
    }
    env.pop("SEATWIRE_BROKER_URL", None)
    return env


def group_cpu_s(pgid: int) -> float:
    """CPU seconds of a process group: its live members' utime + stime, and what its leader
    has reaped of children that ended (a pool child replaced after its task quota)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) != pgid:  # fields[0] is the state: pgrp is the stat's 5th field
            continue
        total += int(fields[11]) + int(fields[12])
        if int(entry) == pgid:
            total += int(fields[13]) + int(fields[14])
    return total / tick


def redis_cpu_s(r: redis.Redis) -> float:
    cpu = r.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def own_cpu_s() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def load() -> float:
    return os.getloadavg()[0]


# --------------------------------------------------------------------------- the news


@dataclass(slots=True)
class News:
    """One directed mention placed in a seat's inbox."""

    seat: str
    at_ms: int  # just before it was placed
    notices: int  # the seat's notice count once it was placed
    seq_lo: int  # turns begun that cannot have taken it (raised by reads that show it pending)
    turn: str | None = None  # the turn that took it
    queued_ms: int | None = None  # that turn's queuedAtMs
    ended_ms: int | None = None
    exact: bool = True
    late: bool = False


class Feeder(threading.Thread):
    """Once a second, `k` seats drawn at random each get one directed mention, acknowledged at
    once; every news goes to `out`."""

    def __init__(
        self,
        c: Any,
        seats: list[str],
        k: int,
        seconds: float,
        out: queue.SimpleQueue[News],
        seed: int,
    ) -> None:
        super().__init__(name="feeder", daemon=True)
        self.c, self.seats, self.k, self.seconds, self.out = c, seats, k, seconds, out
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.placed = 0
        self.lag_s: list[float] = []  # how long after its second each second's news was all in
        self.error: BaseException | None = None
        self.i = 0

    def run(self) -> None:
        try:
            start = time.monotonic()
            second = 0
            while second < self.seconds and not self.stop.is_set():
                due = start + second
                if self.stop.wait(max(0.0, due - time.monotonic())):
                    break
                for seat in self.rng.sample(self.seats, self.k):
                    self.place(seat)
                self.lag_s.append(time.monotonic() - due)
                second += 1
        except BaseException as exc:  # the main loop reports it
            self.error = exc

    def place(self, seat: str) -> None:
        from contracts import Candidate, Directedness
        from pipeline.facts import places_of
        from pipeline.fanout import Resolved
        from workers.stores import keys
        from workers.stores.inbound import inbound_tracking_id

        c = self.c
        doc = c.redis.hget(keys.seat_run(seat), "doc")
        seq_before = int(json.loads(doc).get("seq", 0)) if doc is not None else 0
        self.i += 1
        at = now_ms()
        verdict = Directedness(directed=True, surface="mention", reason="mention", why="named")
        view, _degraded = c.org.current()
        cand = Candidate.model_validate(
            {
                "family": "messaging",
                "source": "slack",
                "deliveryId": f"soak-{self.i}",
                "ids": {"channelId": "C1", "messageId": f"{self.i}.0"},
                "msg": {"authorId": OPERATOR, "body": "look", "mentions": [seat]},
                "atMs": at,
            }
        )
        tracking = inbound_tracking_id(cand.delivery_id)
        c.journal.accept(
            tracking, kind="inbound", seat_id="", payload="{}", now_ms=at, fingerprint=""
        )
        recorded = c.inbound.record(
            tracking,
            cand,
            [Resolved(seat, verdict)],
            places_of(cand.to_wire()),
            now_ms=at,
            org=view.snapshot,
            seats=len(view.roster.seats),
        )
        position = recorded.positions.get(seat)
        if position is None:
            raise RuntimeError(f"news {tracking} was not put in {seat}'s inbox: {recorded}")
        notices = c.inbound.notices(seat)
        c.inbox.ack(seat, position)
        self.placed += 1
        self.out.put(News(seat, at, notices, seq_before))


# --------------------------------------------------------------------------- the checks


@dataclass(slots=True)
class Seen:
    """A finished turn as first read."""

    queued: int
    started: int | None
    ended: int
    digest: int
    kind: str
    reason: str


TWICE, AT_ONCE, LOST = "no turn twice", "none at once", "no wake-up lost"


@dataclass
class Failure:
    check: str  # TWICE, AT_ONCE or LOST
    what: str
    seat: str
    detail: str


@dataclass
class Checker:
    """Every read of a seat's record goes through `look`: the finished turns it shows are
    kept by turn id (and compared with what was read before), the seat's news not yet handed
    on is matched against its `noticesAtTurn`."""

    r: redis.Redis
    turns: dict[str, dict[int, Seen]] = field(default_factory=dict)
    pending: dict[str, list[News]] = field(default_factory=dict)
    handed: list[News] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    seq: dict[str, int] = field(default_factory=dict)
    active: dict[str, str] = field(default_factory=dict)  # seat -> turn in flight, last read
    reads: int = 0
    revs: dict[str, bytes | None] = field(default_factory=dict)  # seat -> revision looked at
    history: dict[str, int] = field(default_factory=dict)  # seat -> finished turns it keeps
    # News still not handed on LATE_S after it was placed, as the seat stood then: a figure
    # (a late hand-on is latency); news never handed on is the failure.
    late: list[str] = field(default_factory=list)

    def fail(self, check: str, what: str, seat: str, detail: str) -> None:
        self.failures.append(Failure(check, what, seat, detail))

    def passed(self, check: str) -> bool:
        return not any(f.check == check for f in self.failures)

    def add(self, news: News) -> None:
        self.pending.setdefault(news.seat, []).append(news)

    def read(self, seats: Iterable[str]) -> None:
        """Read and look at `seats`' records (pipelined, 1,000 a round trip)."""
        from workers.stores import keys

        batch = list(seats)
        for i in range(0, len(batch), 1000):
            chunk = batch[i : i + 1000]
            # MULTI/EXEC: each record with its turns list as of one moment (a turn's outcome
            # written between the two reads would show it both in flight and finished).
            pipe = self.r.pipeline(transaction=True)
            for seat in chunk:
                pipe.hmget(keys.seat_run(seat), ["rev", "doc"])
                pipe.lrange(keys.seat_turns(seat), 0, -1)
            docs = pipe.execute()
            at = now_ms()
            for seat, (rev, doc), turns in zip(chunk, docs[::2], docs[1::2], strict=True):
                # A record at the revision last looked at is the record looked at: parsed again
                # only while the seat has news to match.
                if rev is not None and rev == self.revs.get(seat) and seat not in self.pending:
                    continue
                self.revs[seat] = rev
                self.look(seat, read_record(seat, rev, doc, turns).run, at)

    def look(self, seat: str, run: SeatRun, at: int) -> None:
        self.reads += 1
        self.history[seat] = len(run.turns)
        known = self.turns.setdefault(seat, {})
        in_history: set[str] = set()
        for t in run.turns:
            if t.turn_id in in_history:
                self.fail(TWICE, "turn twice in one history", seat, t.turn_id)
            in_history.add(t.turn_id)
            seq = seq_of(t.turn_id)
            digest = hash(t.model_dump_json())
            before = known.get(seq)
            if before is None:
                known[seq] = Seen(
                    t.queued_at_ms, t.started_at_ms, t.ended_at_ms, digest, t.outcome.kind, t.reason
                )
            elif before.digest != digest:
                self.fail(
                    TWICE, "finished turn changed", seat, f"{t.turn_id} {t.model_dump_json()}"
                )
            if seq > run.seq:
                self.fail(TWICE, "finished turn beyond seq", seat, f"{t.turn_id} seq {run.seq}")
        if run.active is not None:
            a = run.active
            if seq_of(a.turn_id) in known:
                self.fail(TWICE, "finished turn in flight again", seat, a.turn_id)
            if seq_of(a.turn_id) != run.seq:
                self.fail(
                    TWICE, "turn in flight not the last begun", seat, f"{a.turn_id} seq {run.seq}"
                )
            self.active[seat] = a.turn_id
        else:
            self.active.pop(seat, None)
        if run.seq < self.seq.get(seat, 0):
            self.fail(TWICE, "seq went back", seat, f"{self.seq[seat]} -> {run.seq}")
        self.seq[seat] = run.seq
        waiting = self.pending.get(seat)
        if not waiting:
            return
        still = []
        for news in waiting:
            if run.notices_at_turn >= news.notices:
                self.hand_on(news, run, known)
            else:
                news.seq_lo = max(news.seq_lo, run.seq)
                if not news.late and at - news.at_ms > LATE_S * 1000:
                    news.late = True
                    self.late.append(
                        f"{seat}: placed at {news.at_ms} (notice {news.notices}), not handed to "
                        f"a turn {(at - news.at_ms) / 1000:.0f} s later: seq {run.seq}, "
                        f"noticesAtTurn {run.notices_at_turn}, active "
                        f"{run.active.turn_id if run.active else None}, last decision "
                        f"{run.last_decision.reason if run.last_decision else None}",
                    )
                still.append(news)
        if still:
            self.pending[seat] = still
        else:
            del self.pending[seat]

    def hand_on(self, news: News, run: SeatRun, known: dict[int, Seen]) -> None:
        """`news` was taken by one of the turns begun after `seq_lo`, up to `run.seq`."""
        candidates: list[tuple[int, int, int | None]] = []
        for seq in range(news.seq_lo + 1, run.seq + 1):
            if run.active is not None and seq_of(run.active.turn_id) == seq:
                candidates.append((seq, run.active.queued_at_ms, None))
            elif seq in known:
                candidates.append((seq, known[seq].queued, known[seq].ended))
        if not candidates:
            self.fail(
                LOST,
                "news handed on, no turn found",
                news.seat,
                f"placed at {news.at_ms}, turns {news.seq_lo + 1}..{run.seq} not seen",
            )
            return
        news.exact = len(candidates) == 1 and run.seq == news.seq_lo + 1
        after = [c for c in candidates if c[1] >= news.at_ms]
        seq, queued, ended = candidates[0] if news.exact or not after else after[0]
        news.turn = f"{news.seat}:turn:{seq}"
        news.queued_ms, news.ended_ms = queued, ended
        self.handed.append(news)

    def complete(self) -> None:
        """The end times of turns that were in flight when their news was handed on."""
        for news in self.handed:
            if news.ended_ms is None and news.turn is not None:
                seen = self.turns.get(news.seat, {}).get(seq_of(news.turn))
                if seen is not None:
                    news.ended_ms = seen.ended

    def orders(self, longest_tick_ms: int) -> dict[str, Any]:
        """Per seat, in seq order: each turn started after the previous ended; and queued
        after it (but for the tick's clock); within a turn, queued <= started <= ended."""
        overlaps = early = unseen = 0
        worst_early = 0
        for seat, known in self.turns.items():
            last = self.seq.get(seat, 0)
            in_flight = seat in self.active
            for seq in range(1, last + 1):
                if seq not in known and not (in_flight and seq == last):
                    unseen += 1
            for seq, t in known.items():
                if t.started is None or not t.queued <= t.started <= t.ended:
                    self.fail(AT_ONCE, "turn times out of order", seat, f"{seat}:turn:{seq} {t}")
                prev = known.get(seq - 1)
                if prev is None:
                    continue
                if t.started is not None and t.started < prev.ended:
                    overlaps += 1
                    self.fail(
                        AT_ONCE,
                        "two turns at once",
                        seat,
                        f"{seat}:turn:{seq - 1} ran {prev.started}..{prev.ended}, "
                        f"{seat}:turn:{seq} started {t.started}",
                    )
                if t.queued < prev.ended:
                    early += 1
                    gap = prev.ended - t.queued
                    worst_early = max(worst_early, gap)
                    if gap > longest_tick_ms:
                        self.fail(
                            AT_ONCE,
                            "turn queued before the previous ended",
                            seat,
                            f"{seat}:turn:{seq} queued {t.queued}, {seat}:turn:{seq - 1} ended "
                            f"{prev.ended} ({gap} ms, longest tick {longest_tick_ms} ms)",
                        )
        return {
            "overlaps": overlaps,
            "queuedBeforePreviousEnded": early,
            "queuedBeforePreviousEndedMaxMs": worst_early,
            "unseenTurns": unseen,
        }


# --------------------------------------------------------------------------- the logs


@dataclass
class Logs:
    finished: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    not_queued: int = 0
    tick_ms: list[float] = field(default_factory=list)
    published: Counter[str] = field(default_factory=Counter)
    conflicts: int = 0  # seats whose tick write lost to another writer (decided again)

    @classmethod
    def read(cls, turn_logs: list[Path], controller_logs: list[Path]) -> Logs:
        out = cls()
        for path in turn_logs:
            with path.open(errors="replace") as fh:
                for line in fh:
                    m = TURN_DONE.search(line)
                    if m:
                        out.finished[m.group(1)] += 1
                        out.outcomes[m.group(3)] += 1
                    elif NOT_QUEUED.search(line):
                        out.not_queued += 1
        for path in controller_logs:
            with path.open(errors="replace") as fh:
                for line in fh:
                    m = TICK_DONE.search(line)
                    if m:
                        out.tick_ms.append(1000 * float(m.group(1)))
                        continue
                    m = PUBLISHED.search(line)
                    if m:
                        out.published.update(QUOTED.findall(m.group(1)))
                        out.conflicts += int(m.group(2))
        return out


# --------------------------------------------------------------------------- figures


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(q * len(v)) - 1))]


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per minute."""
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def family_of(key: str) -> str:
    """bench/capacity.py's `family` for Seatwire's keys; a broker key keeps its name, but for
    the ids in it."""
    return family(key) if key.startswith("sw:") else re.sub(r"[0-9a-f-]{16,}", "*", key)


def families(r: redis.Redis) -> dict[str, Family]:
    """Every key's bytes (`MEMORY USAGE ... SAMPLES 0`) and TTL, by family
    (bench/capacity.py's `survey`, over the broker's keys too)."""
    out: dict[str, Family] = {}
    batch: list[bytes] = []

    def flush() -> None:
        pipe = r.pipeline(transaction=False)
        for key in batch:
            pipe.memory_usage(key, samples=0)
            pipe.pttl(key)
        got = pipe.execute()
        for i, key in enumerate(batch):
            f = out.setdefault(family_of(key.decode(errors="replace")), Family())
            f.keys += 1
            f.bytes += int(got[2 * i] or 0)
            f.max_ttl_ms = max(f.max_ttl_ms, int(got[2 * i + 1]))
        batch.clear()

    for key in r.scan_iter(count=1000):
        batch.append(key)
        if len(batch) >= 500:
            flush()
    if batch:
        flush()
    return out


def family_rows(after: dict[str, Family], before: dict[str, Family]) -> list[dict[str, Any]]:
    rows = []
    for name in sorted(set(after) | set(before)):
        a, b = after.get(name, Family()), before.get(name, Family())
        rows.append(
            {
                "family": name,
                "keys": a.keys,
                "bytes": a.bytes,
                "keysDelta": a.keys - b.keys,
                "bytesDelta": a.bytes - b.bytes,
                "maxTtlMs": a.max_ttl_ms,
            }
        )
    return sorted(rows, key=lambda x: -abs(x["bytesDelta"]))


@dataclass
class Sample:
    t: float  # seconds since the feed began
    used_memory: int
    keys: int
    placed: int
    pending: int
    load1: float
    turns_queued: int  # messages on the broker's `turns` list
    due: int  # seats in the controller's due index (due now or later)


# --------------------------------------------------------------------------- the run


class Soak:
    def __init__(self, args: argparse.Namespace, tmp: Path, server: RedisServer) -> None:
        from bench.capacity import shortened
        from workers.bootstrap import build_container
        from workers.celery_app import create_app
        from workers.settings import Settings

        self.args, self.tmp, self.server = args, tmp, server
        self.org = tmp / "org.json"
        write_org(self.org, args.seats)
        self.env = fleet_env(server, tmp, self.org, args.interval_s, args.republish_after_s)
        self.fleet = Fleet(redis=server, workdir=tmp, env=self.env)
        settings = Settings(
            redis_url=server.url,
            broker_url=server.url,
            api_token=TOKEN,
            org_file=self.org,
            outbox_path=tmp / "outbox.jsonl",
        )
        app = create_app(settings, register=False)
        self.c = shortened(build_container(settings, app=app), int(args.window_s * 1000))
        self.r = server.client(timeout=30)
        self.seats = [s.member_id for s in self.c.org.current()[0].org.seats]
        self.checker = Checker(self.r)
        self.samples: list[Sample] = []
        self.figures: dict[str, Any] = {}

    # ---- processes

    def start(self) -> None:
        a = self.args
        self.fleet.spawn("beat", ["beat"])
        self.fleet.spawn(
            "controller", ["worker", "--queues", "controller,steward", "--concurrency", "1"]
        )
        for i in range(a.turn_workers):
            self.fleet.spawn(
                f"turns-{i}",
                ["worker", "--queues", "turns", "--concurrency", str(a.turn_concurrency)],
            )

    def alive(self) -> None:
        for p in self.fleet.procs.values():
            if p.popen.poll() is not None:
                tail = p.log.read_text(errors="replace").splitlines()[-20:]
                raise RuntimeError(
                    f"{p.name} exited with {p.popen.returncode}:\n" + "\n".join(tail)
                )

    def cpu(self) -> dict[str, float]:
        out = {name: group_cpu_s(p.popen.pid) for name, p in self.fleet.procs.items()}
        out["redis"] = redis_cpu_s(self.r)
        out["bench"] = own_cpu_s()
        return out

    def logs(self) -> Logs:
        procs = self.fleet.procs.values()
        return Logs.read(
            [p.log for p in procs if p.name.startswith("turns")],
            [p.log for p in procs if p.name == "controller"],
        )

    # ---- phases

    def at_rest(self) -> tuple[bool, str]:
        """Every seat has begun a turn, none is in flight, none is due, no turn is queued."""
        from workers.queues import Queue
        from workers.stores import keys

        self.checker.read(self.seats)
        begun = sum(1 for s in self.seats if self.checker.seq.get(s, 0) >= 1)
        flying = len(self.checker.active)
        due = self.r.zcount(keys.CONTROLLER_DUE, "-inf", now_ms())
        queued = self.r.llen(Queue.TURNS.value)
        state = f"{begun}/{len(self.seats)} begun, {flying} in flight, {due} due, {queued} queued"
        return begun == len(self.seats) and flying == 0 and due == 0 and queued == 0, state

    def warm_up(self) -> float:
        started = time.monotonic()
        deadline = started + self.args.warmup_timeout_s
        state = ""
        while time.monotonic() < deadline:
            self.alive()
            done, state = self.at_rest()
            if done:
                return time.monotonic() - started
            time.sleep(2)
        raise TimeoutError(f"the seats never came to rest: {state}")

    def feed(self) -> None:
        from workers.queues import Queue

        a = self.args
        k = max(1, round(a.rate * len(self.seats)))
        news: queue.SimpleQueue[News] = queue.SimpleQueue()
        seconds = a.minutes * 60
        feeder = Feeder(self.c, self.seats, k, seconds, news, a.seed)
        self.k = k
        before = self.logs()
        self.ticks_before, self.published_before = len(before.tick_ms), before.published
        self.conflicts_before = before.conflicts
        families_start = families(self.r)
        cpu0, load0, redis0 = self.cpu(), load(), self.r.info("memory")["used_memory"]
        t0 = time.monotonic()
        feeder.start()
        next_sample = next_memory = t0
        families_mid: dict[str, Family] | None = None
        cpu_mid: dict[str, float] | None = None
        load_mid = float("nan")
        self.backlog_max, self.overload = 0, ""
        while feeder.is_alive():
            tick = time.monotonic()
            backlog = int(self.r.llen(Queue.TURNS.value))
            self.backlog_max = max(self.backlog_max, backlog)
            if backlog > a.max_backlog and not self.overload:
                # The turns wait 30 s longer than the republish time: the tick publishes every
                # waiting turn again, each copy is more to drain, and the run measures an
                # overload, not the controller.
                self.overload = (
                    f"the feed stopped after {tick - t0:.0f} s: {backlog} messages on the turns "
                    f"queue (more than --max-backlog {a.max_backlog}), load {load():.1f}"
                )
                feeder.stop.set()
            self.drain(news)
            self.checker.read(list(self.checker.pending))
            if tick >= next_sample:
                self.checker.read(self.seats)
                next_sample += a.sample_s
            if tick >= next_memory:
                self.alive()
                self.memory(t0, feeder.placed)
                next_memory += a.memory_s
            if families_mid is None and tick - t0 >= seconds / 2:
                families_mid, cpu_mid, load_mid = families(self.r), self.cpu(), load()
            if feeder.error is not None:
                break
            time.sleep(max(0.0, PENDING_EVERY_S - (time.monotonic() - tick)))
        feeder.join()
        if feeder.error is not None:
            raise RuntimeError(f"the feeder failed: {feeder.error!r}") from feeder.error
        fed_s = time.monotonic() - t0
        cpu1, load1 = self.cpu(), load()
        self.memory(t0, feeder.placed)
        # Settle: every news handed on, nothing in flight or due (bounded).
        settle_start = time.monotonic()
        rested, state = False, ""
        while time.monotonic() - settle_start < a.quiesce_s:
            self.drain(news)
            self.checker.read(list(self.checker.pending))
            if not self.checker.pending:
                rested, state = self.at_rest()
                if rested:
                    break
            time.sleep(1)
        settled_s = time.monotonic() - settle_start
        self.checker.read(self.seats)
        self.memory(t0, feeder.placed)
        families_end = families(self.r)
        self.figures.update(
            k=k,
            fed_s=fed_s,
            placed=feeder.placed,
            lag=feeder.lag_s,
            cpu0=cpu0,
            cpu_mid=cpu_mid or cpu1,
            cpu1=cpu1,
            loads=(load0, load_mid, load1),
            redis0=redis0,
            families=(families_start, families_mid or families_end, families_end),
            rested=rested,
            rest_state=state,
            settled_s=settled_s,
        )

    def drain(self, news: queue.SimpleQueue[News]) -> None:
        while True:
            try:
                self.checker.add(news.get_nowait())
            except queue.Empty:
                return

    def memory(self, t0: float, placed: int) -> None:
        from workers.queues import Queue
        from workers.stores import keys

        mem = self.r.info("memory")
        sample = Sample(
            t=time.monotonic() - t0,
            used_memory=int(mem["used_memory"]),
            keys=int(self.r.dbsize()),
            placed=placed,
            pending=sum(len(v) for v in self.checker.pending.values()),
            load1=load(),
            turns_queued=int(self.r.llen(Queue.TURNS.value)),
            due=int(self.r.zcard(keys.CONTROLLER_DUE)),
        )
        self.samples.append(sample)
        print(  # progress, on stderr: the report is stdout's
            f"  {sample.t:6.0f} s: {placed} news placed, {sample.pending} not handed on yet, "
            f"{sample.turns_queued} turn messages queued, {sample.due} seats in the due index, "
            f"used_memory {sample.used_memory / MIB:.1f} MiB, {sample.keys} keys, load "
            f"{sample.load1:.2f}",
            file=sys.stderr,
            flush=True,
        )

    # ---- the report

    def report(self, warmup_s: float) -> tuple[dict[str, Any], list[str], bool]:
        from workers.stores import keys

        a, f, ck = self.args, self.figures, self.checker
        logs = self.logs()
        ck.complete()
        fed_ticks = logs.tick_ms[self.ticks_before :]
        fed_published = logs.published - self.published_before
        longest_tick = int(max(logs.tick_ms, default=0.0)) + 1
        orders = ck.orders(longest_tick)
        # no turn twice: the records' turn ids against the log's
        twice = {t: n for t, n in logs.finished.items() if n > 1}
        for turn_id, n in sorted(twice.items())[:50]:
            ck.fail(
                TWICE,
                "turn finished twice in the log",
                turn_id.split(":turn:")[0],
                f"{turn_id} x{n}",
            )
        in_records = {f"{s}:turn:{q}" for s, known in ck.turns.items() for q in known}
        only_log = set(logs.finished) - in_records
        only_records = in_records - set(logs.finished)
        for turn_id in sorted(only_records)[:20]:
            ck.fail(
                TWICE, "finished turn missing from the log", turn_id.split(":turn:")[0], turn_id
            )
        begun = sum(ck.seq.values())
        in_flight = len(ck.active)
        finished_records = len(in_records)
        if begun != len(logs.finished) + in_flight:
            ck.fail(
                TWICE,
                "turns begun != finished + in flight",
                "*",
                f"sum(seq) {begun}, finished in the log {len(logs.finished)}, in flight "
                f"{in_flight}",
            )
        # no wake-up lost: news not handed on when the run ended is lost unless its seat has a
        # turn in flight (whose end wakes it) or is in the due index (a tick will decide it)
        pending = [n for ns in ck.pending.values() for n in ns]
        behind = [n for n in pending if n.seat in ck.active]
        due = [
            n
            for n in pending
            if n.seat not in ck.active and self.r.zscore(keys.CONTROLLER_DUE, n.seat) is not None
        ]
        lost = [n for n in pending if n not in behind and n not in due]
        for news in lost[:20]:
            ck.fail(
                LOST,
                "news never handed to a turn, the seat idle and not due",
                news.seat,
                f"placed at {news.at_ms} (notice {news.notices}, turns begun before it "
                f"{news.seq_lo}); the seat's seq {ck.seq.get(news.seat)}",
            )
        if len(lost) > 20:
            ck.fail(LOST, "news never handed to a turn", "*", f"... {len(lost) - 20} more")
        lat = [float(n.queued_ms - n.at_ms) for n in ck.handed if n.queued_ms is not None]
        done = [float(n.ended_ms - n.at_ms) for n in ck.handed if n.ended_ms is not None]
        exact = sum(1 for n in ck.handed if n.exact)
        late = sum(1 for n in ck.handed if n.late) + sum(1 for n in pending if n.late)
        # memory
        half = f["fed_s"] / 2
        second_half = [
            (s.t, float(s.used_memory)) for s in self.samples if half <= s.t <= f["fed_s"] + 1
        ]
        mems = [s.used_memory for s in self.samples]
        fam0, fam_mid, fam1 = f["families"]
        # CPU over the feed
        cpu0, cpu1 = f["cpu0"], f["cpu1"]
        cores = {k: (cpu1[k] - cpu0[k]) / f["fed_s"] for k in cpu1}
        turns_fed = sum(1 for n in ck.handed if n.turn is not None)
        turn_cpu = sum(cpu1[k] - cpu0[k] for k in cpu1 if k.startswith("turns"))
        published_twice = sum(1 for n in logs.published.values() if n > 1)
        fed_twice = sum(1 for n in fed_published.values() if n > 1)
        figures: dict[str, Any] = {
            "seats": a.seats,
            "minutes": a.minutes,
            "rate": a.rate,
            "newsPerSecond": f["k"],
            "turnWorkers": a.turn_workers,
            "turnConcurrency": a.turn_concurrency,
            "redis": "own redis-server, AOF appendfsync everysec",
            "warmupS": round(warmup_s, 1),
            "fedS": round(f["fed_s"], 1),
            "settledS": round(f["settled_s"], 1),
            "rested": f["rested"],
            "overload": self.overload,
            "turnsQueueMax": self.backlog_max,
            "load1": [None if math.isnan(x) else round(x, 2) for x in f["loads"]],
            "news": {
                "placed": f["placed"],
                "handedOn": len(ck.handed),
                "exact": exact,
                "ambiguous": len(ck.handed) - exact,
                "late": late,
                "lost": len(lost),
                "unsettledBehindATurnInFlight": len(behind),
                "unsettledDue": len(due),
                "feederLagS": {
                    "p50": round(pct(f["lag"], 0.5), 3),
                    "max": round(max(f["lag"], default=0.0), 3),
                },
                "toTurnQueuedMs": {
                    "min": min(lat, default=float("nan")),
                    "p50": pct(lat, 0.5),
                    "p99": pct(lat, 0.99),
                    "max": max(lat, default=float("nan")),
                    "negative": sum(1 for x in lat if x < 0),
                },
                "toTurnEndedMs": {
                    "p50": pct(done, 0.5),
                    "p99": pct(done, 0.99),
                    "max": max(done, default=float("nan")),
                },
            },
            "turns": {
                "begun": begun,
                "finishedInLog": len(logs.finished),
                "finishedInRecords": finished_records,
                "inFlight": in_flight,
                "twiceInLog": len(twice),
                "onlyInLog": len(only_log),
                "onlyInRecords": len(only_records),
                "notQueuedCopies": logs.not_queued,
                "outcomes": dict(logs.outcomes),
                "reasons": dict(
                    Counter(t.reason for known in ck.turns.values() for t in known.values())
                ),
                "takenByFeed": turns_fed,
                **orders,
            },
            "ticks": {
                "warmupRun": self.ticks_before,
                "warmupMaxMs": round(max(logs.tick_ms[: self.ticks_before], default=0.0), 1),
                "run": len(fed_ticks),
                "p50Ms": round(pct(fed_ticks, 0.5), 1),
                "p99Ms": round(pct(fed_ticks, 0.99), 1),
                "maxMs": round(max(fed_ticks, default=float("nan")), 1),
                "published": sum(fed_published.values()),
                "turnsPublishedMoreThanOnce": published_twice,
                "turnsPublishedMoreThanOnceInFeed": fed_twice,
                "conflicts": logs.conflicts - self.conflicts_before,
            },
            "cpuCores": {k: round(v, 3) for k, v in cores.items()},
            "cpuMsPerTurnFed": {
                "turnWorkers": round(1000 * turn_cpu / max(1, turns_fed), 2),
                "controller": round(
                    1000 * (cpu1["controller"] - cpu0["controller"]) / max(1, turns_fed), 2
                ),
                "redis": round(1000 * (cpu1["redis"] - cpu0["redis"]) / max(1, turns_fed), 2),
                "beat": round(1000 * (cpu1["beat"] - cpu0["beat"]) / max(1, turns_fed), 2),
            },
            "memory": {
                "firstBytes": mems[0] if mems else None,
                "lastBytes": mems[-1] if mems else None,
                "maxBytes": max(mems, default=None),
                "secondHalfSlopeBytesPerMin": round(slope_per_min(second_half)),
                "samples": [asdict(s) for s in self.samples],
                "familiesStartToMid": family_rows(fam_mid, fam0),
                "familiesMidToEnd": family_rows(fam1, fam_mid),
            },
            "recordReads": ck.reads,
            "historiesAtCap": sum(1 for v in ck.history.values() if v >= HISTORY),
            "lateNews": ck.late[:100],
            "failures": [asdict(x) for x in ck.failures],
        }
        complete = not self.overload and f["rested"]
        return figures, self.lines(figures), complete and not ck.failures

    def lines(self, g: dict[str, Any]) -> list[str]:
        n, t, k, m = g["news"], g["turns"], g["ticks"], g["memory"]
        lq, ld = n["toTurnQueuedMs"], n["toTurnEndedMs"]
        mib = {x: m[x] / MIB for x in ("firstBytes", "lastBytes", "maxBytes")}
        text = [
            f"bench.controller_soak: {g['seats']} seats, {g['minutes']:g} min, "
            f"{g['newsPerSecond']} seats with news a second ({g['rate']:.2%}); "
            f"{g['redis']}; beat (controller interval {self.args.interval_s:g} s), a "
            f"controller worker (1), {g['turnWorkers']} turns worker(s) x concurrency "
            f"{g['turnConcurrency']}; noop launcher",
            "  load (1 min) at the start / middle / end of the feed: "
            + " / ".join("-" if x is None else f"{x:.2f}" for x in g["load1"]),
            f"warm-up: every seat's first turn, at rest after {g['warmupS']:.0f} s",
            f"feed: {n['placed']} news in {g['fedS']:.0f} s (each second's news all placed "
            f"p50 {n['feederLagS']['p50']:.2f} s, max {n['feederLagS']['max']:.2f} s into "
            f"it); the turns queue held at most {g['turnsQueueMax']} messages; "
            + (
                f"settled after it in {g['settledS']:.0f} s"
                if g["rested"]
                else f"NOT settled {g['settledS']:.0f} s after it: {self.figures['rest_state']}"
            ),
            *([f"OVERLOAD: {g['overload']}"] if g["overload"] else []),
            "",
            "checks",
            f"  {TWICE:<18}{self.verdict(TWICE)}",
            f"    {t['finishedInLog']} turns finished, each once in the turns workers' log; "
            f"the records agree ({t['finishedInRecords']} read, {t['onlyInLog']} only in the "
            f"log, {t['unseenTurns']} never read); begun (sum of seq) {t['begun']} = finished "
            f"{t['finishedInLog']} + in flight {t['inFlight']}",
            f"  {AT_ONCE:<18}{self.verdict(AT_ONCE)}",
            f"    {t['overlaps']} overlaps; queued before the previous ended by the tick's "
            f"clock: {t['queuedBeforePreviousEnded']} (max {t['queuedBeforePreviousEndedMaxMs']}"
            f" ms; the longest tick {max(k['maxMs'], k['warmupMaxMs']):.0f} ms)",
            f"  {LOST:<18}{self.verdict(LOST)}",
            f"    {n['handedOn']} of {n['placed']} news handed to a turn; late (> {LATE_S:.0f} "
            f"s) {n['late']}, lost {n['lost']}; not handed on when the run ended, behind a turn "
            f"in flight {n['unsettledBehindATurnInFlight']}, due {n['unsettledDue']}",
            f"    news -> turn queued: p50 {lq['p50'] / 1000:.2f} s, p99 {lq['p99'] / 1000:.2f}"
            f" s, max {lq['max'] / 1000:.2f} s, min {lq['min'] / 1000:.3f} s ({n['exact']} "
            f"exact, {n['ambiguous']} ambiguous, {lq['negative']} negative by the tick's clock)",
            f"    news -> turn ended: p50 {ld['p50'] / 1000:.2f} s, p99 {ld['p99'] / 1000:.2f} "
            f"s, max {ld['max'] / 1000:.2f} s",
            "  Redis memory",
            f"    used_memory first {mib['firstBytes']:.1f} MiB, last {mib['lastBytes']:.1f} "
            f"MiB, max {mib['maxBytes']:.1f} MiB; slope over the second half "
            f"{m['secondHalfSlopeBytesPerMin'] / MIB:+.3f} MiB/min; seats whose record keeps "
            f"its cap of {HISTORY} finished turns: {g['historiesAtCap']} of {g['seats']}",
            "",
            f"turns: outcomes {t['outcomes']}, reasons {t['reasons']}; copies that started "
            f"nothing {t['notQueuedCopies']}",
            f"controller ticks during the feed: {k['run']} run, p50 {k['p50Ms']:.0f} ms, p99 "
            f"{k['p99Ms']:.0f} ms, max {k['maxMs']:.0f} ms; turns published "
            f"{k['published']}; published more than once {k['turnsPublishedMoreThanOnce']} "
            f"(warm-up: {k['warmupRun']} ticks, the longest {k['warmupMaxMs']:.0f} ms); "
            f"seats whose write lost to another writer (decided again) {k['conflicts']}",
            "CPU over the feed, cores: "
            + ", ".join(f"{name} {v:.3f}" for name, v in g["cpuCores"].items()),
            "  ms per turn the feed caused: "
            + ", ".join(f"{name} {v:.2f}" for name, v in g["cpuMsPerTurnFed"].items()),
            "",
            "Redis memory by key family at the start / middle / end of the feed (bytes):",
        ]
        out = [line for chunk in text for line in wrap80(chunk)]
        mid = {r["family"]: r for r in m["familiesStartToMid"]}
        end = {r["family"]: r for r in m["familiesMidToEnd"]}
        out.append(f"  {'family':<28}{'keys':>8}{'start':>13}{'middle':>13}{'end':>13}")
        for name in sorted(end, key=lambda x: -end[x]["bytes"])[: self.args.top]:
            e, md = end[name], mid.get(name, {"bytes": 0, "bytesDelta": 0})
            start = md["bytes"] - md["bytesDelta"]
            out.append(
                f"  {name[:28]:<28}{e['keys']:>8}{start:>13,}{md['bytes']:>13,}{e['bytes']:>13,}"
            )
        grown = [r for r in m["familiesMidToEnd"] if r["bytesDelta"] > 0][:5]
        if grown:
            out += wrap80(
                "  grew in the second half: "
                + ", ".join(f"{r['family']} {r['bytesDelta'] / 1024:+,.0f} KiB" for r in grown)
            )
        if g["lateNews"]:
            out.append(f"news late (> {LATE_S:.0f} s, handed on later or lost), the first:")
            for note in g["lateNews"][:5]:
                out += wrap80(f"  {note}")
        failures = g["failures"]
        out.append("")
        if failures:
            out.append(f"FAIL: {len(failures)} failure(s); the first:")
            for x in failures[:15]:
                out += wrap80(f"  [{x['check']}] {x['what']}: {x['seat']}: {x['detail']}")
        elif g["overload"] or not g["rested"]:
            out += wrap80(
                "INCOMPLETE: no failure seen, but the fleet "
                + ("fell behind (above)" if g["overload"] else "did not settle")
            )
        else:
            out.append("PASS: no turn twice, none at once for a seat, no wake-up lost")
        return out

    def verdict(self, check: str) -> str:
        return "PASS" if self.checker.passed(check) else "FAIL"


def wrap80(line: str) -> list[str]:
    """`line` in lines of at most 80 columns, each after the first indented two more."""
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    out, rest = [], line
    while len(rest) > 80:
        cut = rest.rfind(" ", len(indent) + 1, 81)
        cut = 80 if cut < 0 else cut
        out.append(rest[:cut])
        rest = indent + rest[cut:].lstrip()
    return [*out, rest]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seats", type=int, default=10_000)
    ap.add_argument("--minutes", type=float, default=30.0, help="how long the feed runs")
    ap.add_argument("--rate", type=float, default=0.01, help="share of seats with news a second")
    ap.add_argument(
        "--turn-workers", type=int, default=1, help="`seatwire worker -Q turns` processes"
    )
    ap.add_argument("--turn-concurrency", type=int, default=2, help="each one's pool")
    ap.add_argument("--interval-s", type=float, default=1.0, help="SEATWIRE_CONTROLLER_INTERVAL_S")
    ap.add_argument("--window-s", type=float, default=120.0, help="the news' keys kept this long")
    ap.add_argument(
        "--sample-s", type=float, default=20.0, help="every seat's record read this often"
    )
    ap.add_argument("--memory-s", type=float, default=30.0, help="INFO memory this often")
    ap.add_argument(
        "--republish-after-s",
        type=float,
        default=REPUBLISH_S,
        help="SEATWIRE_TURN_REPUBLISH_AFTER_MS, in s (default: the setting's)",
    )
    ap.add_argument(
        "--max-backlog",
        type=int,
        help="stop the feed when the turns queue holds more messages (default: the news of "
        "the republish time + 30 s)",
    )
    ap.add_argument(
        "--quiesce-s", type=float, default=120.0, help="settling after the feed, at most"
    )
    ap.add_argument("--warmup-timeout-s", type=float, default=1800.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--top", type=int, default=12, help="key families listed")
    ap.add_argument("--keep", type=Path, help="copy the processes' logs here")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.seats < 1 or args.minutes <= 0 or not 0 < args.rate <= 1:
        ap.error("--seats and --minutes must be positive, --rate in (0, 1]")
    if args.max_backlog is None:
        args.max_backlog = int(
            (args.republish_after_s + 30) * max(1, round(args.rate * args.seats))
        )
    if args.turn_workers < 1 or args.turn_concurrency < 1:
        ap.error("--turn-workers and --turn-concurrency must be at least 1")

    from bench import stop_cleanly_on_sigterm

    stop_cleanly_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="seatwire-soak-") as tmp_name:
        tmp = Path(tmp_name)
        with redis_server(tmp / "redis") as server:
            soak = Soak(args, tmp, server)
            try:
                soak.start()
                warmup_s = soak.warm_up()
                soak.feed()
            finally:
                soak.fleet.stop()
                if args.keep is not None:
                    args.keep.mkdir(parents=True, exist_ok=True)
                    for p in soak.fleet.procs.values():
                        (args.keep / p.log.name).write_bytes(p.log.read_bytes())
            figures, lines, ok = soak.report(warmup_s)
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
