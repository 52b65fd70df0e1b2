"""Inbound events per second through the directedness stage with 20 seats, as a RATIO to a single
no-op Celery task on the same broker, measured in the same run.

    uv run python -m bench.directedness [--n 2000] [--rounds 5]
    uv run python -m bench.directedness --profile 3000     # where one event's time goes

Each round runs both sides, one after the other (which goes first alternates), on a flushed
database, with the same method: a PRE-FILLED QUEUE DRAIN by warm workers.

  1. N items are put on the queue with no worker running, then the queue's list is RENAMEd
     aside (the messages stay as they are).
  2. The worker starts; once it is `ready.`, `--warmup` other items go through it (its pool
     processes fork, import and build what they build on their first task).
  3. The list is RENAMEd back (one command; it wakes the worker's BRPOP) and the clock runs
     until the last of the N items is done.

  baseline   `celery -A bench.noop_app worker -Q bench.noop3 -c 2 -P prefork --without-mingle
             --without-gossip`: noop3 only INCRs a counter; done when it reaches warm-up + N.
             Its app is Seatwire's own (`create_app(settings, register=False)`), its options
             the stage tasks' (bench/noop_app.py). Its messages are the Seatwire side's
             InboundEnvelopes, published with the ingress's retry policy.
  seatwire   `seatwire worker --queues directedness --concurrency 2` with SEATWIRE_ORG_FILE at
             a generated org (below). Items are put there as the ingress's `accept_inbound`
             does through its Celery intake (workers/ingress/accept.py, intake.py): Slack
             `message` envelopes normalised by `normalise_slack`, `Journal.accept(kind=
             "inbound")` of the InboundEnvelope, publish of the directedness task,
             `mark_enqueued`. Done when `sw:j:open` is empty; then every entry must be
             `directed` or `ambient`.

The org: `bench.synthetic_org.build_org` (1,000 members, 15 team channels with 4 seats each, 35
project rooms with 2) with exactly 20 seats, each with a Slack-style user id, its slug and an
email as aliases and a name; members get Slack-style ids too. Written as JSON to a temp dir.

The events (seeded): ~62% ambient top-level messages, 10% mention one seat (`<@U0SEAT..>`), 3%
name a seat in the text, 5% mention a person, 2% are a seat's own message, 18% are thread
replies to an earlier message of the same channel (directed when a seat was mentioned or
named in that thread or wrote its root); 1 in 6 happen in 5 channels the org file does not list.

`--profile N` runs the task body (`InboundEnvelope.model_validate` + the `Directedness` handler)
in-process on real Redis for N events, half timed plainly and half under cProfile, and splits
the time between the org view, the fact read, resolve_all (and the per-seat rules it runs for
the seats an event can concern), the record (verdict JSON, inbox items, the Lua script) and
pydantic.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import random
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import stop_cleanly_on_sigterm
from bench.pipeline import Meter, Workers, running, wait_until

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "pipeline" / "fixtures" / "slack" / "message_channel_mention.json"
TEAM = "T0BENCH001"
STAGED = "bench:staged"  # where the pre-filled queue waits
SEAT_NAMES = (
    "Scout",
    "Tally",
    "Atlas",
    "Beacon",
    "Cipher",
    "Dorian",
    "Ember",
    "Fable",
    "Garnet",
    "Harbor",
    "Iris",
    "Juniper",
    "Kestrel",
    "Lumen",
    "Mosaic",
    "Nimbus",
    "Onyx",
    "Pascal",
    "Quill",
    "Rook",
)
TEXTS = (
    "Heads up: the {topic} change goes out at {hh}:{mm}.",
    "Has anyone seen the alerts on the {topic} this morning?",
    "Notes from today's sync on the {topic} are in the doc.",
    "The {topic} dashboard looks healthy again after the fix.",
    "Reminder: freeze on the {topic} starts tomorrow at {hh}:{mm}.",
    "I pushed a small cleanup to the {topic}; no action needed.",
)


# ---------------------------------------------------------------------------- org


@dataclass(frozen=True)
class BenchOrg:
    path: Path
    seats: tuple[str, ...]  # member ids
    slack_id: dict[str, str]  # seat member id -> its Slack user id
    name: dict[str, str]  # seat member id -> its name
    people: tuple[str, ...]  # Slack user ids of people
    channels: tuple[tuple[str, str, tuple[str, ...]], ...]  # (id, Slack channel_type, seats)


def seat_name(i: int) -> str:
    """Seat i's name: the 20 names, then the same with a number (`Scout2`, `Tally2`, ...)."""
    base = SEAT_NAMES[i % len(SEAT_NAMES)]
    return base if i < len(SEAT_NAMES) else f"{base}{i // len(SEAT_NAMES) + 1}"


def write_org(directory: Path, seed: int = 7, seats: int = 20) -> BenchOrg:
    """The synthetic org with `seats` seats (20: this bench's), every seat and member with a
    Slack user id. More seats are more members: the people and the channels stay the same."""
    from bench.synthetic_org import build_org

    syn = build_org(n_members=1000 + seats - 20, seed=seed, n_seats=seats)
    data = syn.org.to_wire()
    seat_ids = syn.seats
    assert len(seat_ids) == seats
    slack_id = {s: f"U0SEAT{i:04d}" for i, s in enumerate(seat_ids)}
    name = {s: seat_name(i) for i, s in enumerate(seat_ids)}
    people = []
    for i, m in enumerate(data["members"]):
        if m["id"] in slack_id:
            m["aliases"] = [slack_id[m["id"]]]
        else:
            m["aliases"] = [f"U0M{i:06d}"]
            people.append(f"U0M{i:06d}")
    supervisor = {m["id"]: m.get("supervisorId") for m in data["members"]}
    data["seats"] = [
        {
            "memberId": s,
            "aliases": [slack_id[s], s, f"{s}@example.com"],
            "names": [name[s]],
            "supervisorId": supervisor[s],
        }
        for s in seat_ids
    ]
    channels = tuple(
        (
            c["id"],
            "group" if c["kind"] == "PRIVATE" else "channel",
            tuple(x for x in c["memberIds"] if x in slack_id),
        )
        for c in data["channels"]
    )
    path = directory / "org.json"
    path.write_text(json.dumps(data))
    return BenchOrg(path, seat_ids, slack_id, name, tuple(people), channels)


# ---------------------------------------------------------------------------- events


class Events:
    """Slack `message` envelopes in a seeded, realistic mix, each a new event (its own ts)."""

    def __init__(self, org: BenchOrg, seed: int) -> None:
        from bench.synthetic_org import OWNED

        self.org = org
        self.rng = random.Random(seed)
        self.template: dict[str, Any] = json.loads(FIXTURE.read_text())
        self.topics = OWNED
        self.epoch = int(time.time()) - 3600
        self.seq = 0
        self.roots: dict[str, list[tuple[str, str]]] = {}  # channel -> [(ts, author)]
        self.kinds: Counter[str] = Counter()
        none: tuple[str, ...] = ()
        external = [(f"C0EXT{i:05d}", "channel", none) for i in range(5)]
        self.channels = [*org.channels, *external, *external]  # 10 of 60: 1 in 6 unlisted

    def _envelope(
        self,
        text: str,
        user: str,
        channel: str,
        channel_type: str,
        thread: tuple[str, str] | None,
    ) -> dict[str, Any]:
        self.seq += 1
        seq = self.seq
        ts = f"{self.epoch + seq // 1_000_000}.{seq % 1_000_000:06d}"
        parts = text.split(" ", 1)
        section: list[dict[str, Any]] = (
            [{"type": "user", "user_id": parts[0][2:-1]}, {"type": "text", "text": " " + parts[1]}]
            if text.startswith("<@")
            else [{"type": "text", "text": text}]
        )
        envelope: dict[str, Any] = json.loads(json.dumps(self.template))
        event = envelope["event"]
        event.update(
            user=user,
            text=text,
            ts=ts,
            event_ts=ts,
            channel=channel,
            channel_type=channel_type,
            team=TEAM,
            client_msg_id=f"5b1f5c3e-8f0e-4c8f-9d7a-{seq:012x}",
            blocks=[
                {
                    "type": "rich_text",
                    "block_id": "b1",
                    "elements": [{"type": "rich_text_section", "elements": section}],
                }
            ],
        )
        if thread is not None:
            event["thread_ts"], event["parent_user_id"] = thread
        else:
            self.roots.setdefault(channel, []).append((ts, user))
        envelope.update(
            team_id=TEAM,
            context_team_id=TEAM,
            event_id=f"Ev0D{seq:08d}",
            event_time=self.epoch + seq // 1_000_000,
        )
        envelope["authorizations"][0].update(team_id=TEAM, user_id=self.org.slack_id["seat00"])
        return envelope

    def next(self) -> dict[str, Any]:
        rng, org = self.rng, self.org
        channel, ctype, seats_here = rng.choice(self.channels)
        seat = rng.choice(seats_here or org.seats)
        topic = rng.choice(self.topics)
        person = rng.choice(org.people)
        ambient = rng.choice(TEXTS).format(
            topic=topic, hh=f"{rng.randrange(24):02d}", mm=f"{rng.randrange(60):02d}"
        )
        roll = rng.random()
        thread = None
        if roll < 0.10:
            kind, text = "mention_seat", f"<@{org.slack_id[seat]}> can you look at the {topic}?"
        elif roll < 0.13:
            kind, text = "name_seat", f"{org.name[seat]}, could you check the {topic} first?"
        elif roll < 0.18:
            kind, text = "mention_person", f"<@{person}> can you review the {topic}?"
        elif roll < 0.20:
            kind, text, person = "seat_speaks", f"Done: the {topic} is updated.", org.slack_id[seat]
        elif roll < 0.38 and self.roots.get(channel):
            kind, text = "thread_reply", f"+1, same here on the {topic}."
            thread = rng.choice(self.roots[channel][-50:])
        else:
            kind, text = "ambient", ambient
        self.kinds[kind] += 1
        return self._envelope(text, person, channel, ctype, thread)

    def candidates(self, n: int) -> list[Any]:
        from contracts import Candidate
        from pipeline.normalise.slack import normalise_slack

        out = []
        for _ in range(n):
            c = normalise_slack(self.next(), received_at_ms=int(time.time() * 1000))
            if not isinstance(c, Candidate):
                raise RuntimeError(f"not a candidate: {c}")
            out.append(c)
        return out


def inbound_message(candidate: Any, accepted_at: int) -> tuple[str, dict[str, Any]]:
    """The tracking id and the directedness task's message, as `accept_inbound` makes them."""
    from contracts.messages import InboundEnvelope
    from workers.stores.inbound import inbound_tracking_id

    tracking = inbound_tracking_id(candidate.delivery_id)
    message = InboundEnvelope(
        tracking_id=tracking, accepted_at_ms=accepted_at, candidate=candidate
    ).to_wire()
    return tracking, message


# ---------------------------------------------------------------------------- runs


@dataclass
class Result:
    kind: str
    n: int
    seconds: float
    fill_s: float
    worker_cpu_s: float
    redis_cpu_s: float
    bench_cpu_s: float
    other_cpu_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def per_s(self) -> float:
        return self.n / self.seconds


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path, org: BenchOrg) -> None:
        import redis

        from workers.bootstrap import build_container
        from workers.celery_app import create_app
        from workers.settings import Settings

        self.args = args
        self.tmp = tmp
        self.org = org
        self.r = redis.Redis.from_url(args.redis_url)
        self.registry: list[Workers] = []
        self.env = {
            **os.environ,
            "SEATWIRE_REDIS_URL": args.redis_url,
            "SEATWIRE_API_TOKEN": "bench",
            "SEATWIRE_ORG_FILE": str(org.path),
            "SEATWIRE_OUTBOX_PATH": str(tmp / "outbox.jsonl"),
            "PYTHONUNBUFFERED": "1",
        }
        self.env.pop("SEATWIRE_BROKER_URL", None)
        settings = Settings()
        self.app = create_app(settings, register=False)
        self.container = build_container(settings, app=self.app)
        self.events = Events(org, args.seed)

    def _release(self, queue: str) -> None:
        """Put the pre-filled queue back where the worker reads (wakes its BRPOP)."""
        self.r.rename(STAGED, queue)

    def _stage(self, queue: str, n: int) -> None:
        got = int(self.r.llen(queue))
        if got != n:
            raise RuntimeError(f"{queue} holds {got} messages, expected {n}")
        self.r.rename(queue, STAGED)

    def baseline(self, rnd: int) -> Result:
        from bench import noop_app
        from workers.broker import INGRESS_PUBLISH_RETRY

        self.r.flushdb()
        n, w = self.args.n, self.args.warmup
        messages = [inbound_message(c, 0)[1] for c in self.events.candidates(w + n)]
        queue = noop_app.QUEUES[2]

        def put(m: dict[str, Any]) -> None:
            noop_app.publish(2, m, retry_policy=INGRESS_PUBLISH_RETRY, via=self.app)

        t0 = time.perf_counter()
        for m in messages[w:]:
            put(m)
        fill = time.perf_counter() - t0
        self._stage(queue, n)
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "bench.noop_app",
            "worker",
            "-Q",
            queue,
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

        def done(k: int) -> Callable[[], bool]:
            return lambda: int(self.r.get(noop_app.DONE_KEY) or 0) >= k

        log = self.tmp / f"baseline-{rnd}.log"
        with running("baseline", argv, self.env, log, self.registry) as wk:
            for m in messages[:w]:
                put(m)
            if not wait_until(done(w), 60):
                raise RuntimeError(f"baseline warm-up did not finish:\n{wk.tail()}")
            seconds, cpu = self._timed(wk, queue, done(w + n))
        return Result("baseline", n, seconds, fill, *cpu)

    def seatwire(self, rnd: int) -> Result:
        from workers.bootstrap import now_ms
        from workers.broker import INGRESS_PUBLISH_RETRY, publish
        from workers.queues import Task
        from workers.stores import keys

        self.r.flushdb()
        n, w = self.args.n, self.args.warmup
        journal = self.container.journal
        candidates = self.events.candidates(w + n)

        def accept(candidate: Any) -> str:
            # `accept_inbound` through `CeleryIntake` (workers/ingress/), minus the HTTP.
            accepted_at = now_ms()
            tracking, message = inbound_message(candidate, accepted_at)
            result = journal.accept(
                tracking,
                kind="inbound",
                seat_id="",
                payload=json.dumps(message),
                now_ms=accepted_at,
                fingerprint="",
            )
            if not result.new:
                raise RuntimeError(f"{tracking} was already journalled")
            publish(app, Task.DIRECTEDNESS, tracking, message, retry_policy=INGRESS_PUBLISH_RETRY)
            journal.mark_enqueued(tracking, now_ms())
            return tracking

        app = self.app
        queue = "directedness"
        t0 = time.perf_counter()
        trackings = [accept(c) for c in candidates[w:]]
        fill = time.perf_counter() - t0
        self._stage(queue, n)
        seatwire = str(Path(sys.executable).parent / "seatwire")
        argv = [
            seatwire,
            "worker",
            "--queues",
            queue,
            "--concurrency",
            str(self.args.concurrency),
            "--loglevel",
            self.args.loglevel,
        ]

        def open_entries(k: int) -> Callable[[], bool]:
            return lambda: int(self.r.zcard(keys.JOURNAL_OPEN)) <= k

        log = self.tmp / f"seatwire-{rnd}.log"
        with running("seatwire", argv, self.env, log, self.registry) as wk:
            for c in candidates[:w]:
                accept(c)
            if not wait_until(open_entries(n), 60):
                raise RuntimeError(f"seatwire warm-up did not finish:\n{wk.tail()}")
            seconds, cpu = self._timed(wk, queue, open_entries(0))
        return Result("seatwire", n, seconds, fill, *cpu, extra=self._verify(trackings))

    def _timed(
        self, wk: Workers, queue: str, done: Callable[[], bool]
    ) -> tuple[float, tuple[float, float, float, float]]:
        meter = Meter(wk, self.r)
        meter.begin()
        t0 = time.perf_counter()
        self._release(queue)
        if not wait_until(done, self.args.timeout):
            raise RuntimeError(f"{wk.name}: not done after {self.args.timeout}s:\n{wk.tail()}")
        return time.perf_counter() - t0, meter.end()

    def _verify(self, trackings: list[str]) -> dict[str, Any]:
        """Every entry final (directed or ambient); the inbox items the directed ones made."""
        from workers.stores import keys

        pipe = self.r.pipeline(transaction=False)
        for t in trackings:
            pipe.hget(keys.journal(t), "state")
        states = Counter((s or b"missing").decode() for s in pipe.execute())
        pipe = self.r.pipeline(transaction=False)
        for s in self.org.seats:
            pipe.hget(keys.inbox_meta(s), "last")
        items = sum(int(x or 0) for x in pipe.execute())
        if set(states) - {"directed", "ambient"}:
            raise RuntimeError(f"not every event was resolved: {dict(states)}")
        return {"states": dict(states), "inbox_items": items}

    def stop_all(self) -> None:
        for w in list(self.registry):
            w.stop()


# ---------------------------------------------------------------------------- profile

# Functions whose cumulative time is reported (ms per event). They nest; see the notes.
WATCH = [
    ("task body (validate + handler)", "directedness.py", "task_body"),
    ("  InboundEnvelope.model_validate", "main.py", "model_validate"),
    ("  Directedness (the handler)", "stages/directedness.py", "__call__"),
    ("    OrgSource.current", "org.py", "current"),
    ("    candidate.to_wire", "_base.py", "to_wire"),
    ("    InboundStore.known (1 round trip)", "inbound.py", "known"),
    ("    resolve_all (every seat)", "fanout.py", "resolve_all"),
    ("      _concerned (who it can concern)", "fanout.py", "_concerned"),
    ("      resolve_directed (concerned seats)", "directedness.py", "resolve_directed"),
    ("        _plain (dict copies)", "directedness.py", "_plain"),
    ("        names_pattern", "directedness.py", "names_pattern"),
    ("      facts_for (concerned seats)", "facts.py", "facts_for"),
    ("      learn (concerned seats)", "facts.py", "learn"),
    ("    InboundStore.record", "inbound.py", "record"),
    ("      model_dump_json (20 verdicts, items)", "main.py", "model_dump_json"),
    ("      _item_json", "inbound.py", "_item_json"),
    ("      Lua script call (1 round trip)", "commands/core.py", "__call__"),
    ("Redis: reading replies", "connection.py", "read_response"),
    ("Redis: sending commands", "connection.py", "send_packed_command"),
]


def profile(args: argparse.Namespace, org: BenchOrg) -> int:
    from contracts.messages import InboundEnvelope
    from workers.bootstrap import build_container, now_ms
    from workers.broker import INGRESS_PUBLISH_RETRY, publish
    from workers.celery_app import create_app
    from workers.queues import Task
    from workers.settings import Settings
    from workers.stages.directedness import Directedness

    settings = Settings()
    app = create_app(settings, register=False)
    c = build_container(settings, app=app)
    c.redis.flushdb()
    events = Events(org, args.seed)
    n = args.profile
    messages = []
    for cand in events.candidates(n + 200):
        at = now_ms()
        tracking, message = inbound_message(cand, at)
        c.journal.accept(
            tracking,
            kind="inbound",
            seat_id="",
            payload=json.dumps(message),
            now_ms=at,
            fingerprint="",
        )
        publish(app, Task.DIRECTEDNESS, tracking, message, retry_policy=INGRESS_PUBLISH_RETRY)
        c.journal.mark_enqueued(tracking, now_ms())
        messages.append(message)

    def task_body(message: dict[str, Any]) -> str:
        # workers/stages/directedness.py `register`: validate, then the handler.
        return Directedness.of(c)(InboundEnvelope.model_validate(message)).state

    states: Counter[str] = Counter()
    for m in messages[:200]:  # warm-up: scripts loaded, connections made, caches filled
        task_body(m)
    plain, profiled = messages[200 : 200 + n // 2], messages[200 + n // 2 :]
    times = []
    cpu0 = time.process_time()
    for m in plain:
        t0 = time.perf_counter()
        states[task_body(m)] += 1
        times.append(time.perf_counter() - t0)
    cpu = (time.process_time() - cpu0) / len(plain)
    profiler = cProfile.Profile()
    profiler.enable()
    for m in profiled:
        states[task_body(m)] += 1
    profiler.disable()
    c.redis.flushdb()

    times.sort()
    print(
        f"bench.directedness --profile: {n} events, {args.seats} seats, in-process on "
        f"{args.redis_url}; "
        f"states {dict(states)}; mix {dict(events.kinds)}"
    )
    print(
        f"  task body, {len(times)} events timed plainly: mean {1e3 * statistics.fmean(times):.3f}"
        f" ms, p50 {1e3 * times[len(times) // 2]:.3f} ms, p99 "
        f"{1e3 * times[int(0.99 * (len(times) - 1))]:.3f} ms; CPU {1e3 * cpu:.3f} ms/event "
        "(the rest is waiting for Redis)"
    )
    stats = pstats.Stats(profiler)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    k = len(profiled)
    print(
        f"\n  cProfile split, {k} events (ms per event, cumulative; {1e3 * total / k:.3f} ms "
        "profiled in all, profiling overhead included):"
    )
    for label, file, func in WATCH:
        cum = sum(v[3] for (f, _line, name), v in raw.items() if name == func and f.endswith(file))
        print(f"    {label:<40}{1e3 * cum / k:>8.3f}")
    if args.top:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(args.top)
        print(out.getvalue())
    return 0


# ---------------------------------------------------------------------------- report


def line(r: Result) -> str:
    states = ""
    if "states" in r.extra:
        states = f"  {r.extra['states']}, {r.extra['inbox_items']} inbox items"
    return (
        f"{r.kind:<9} {r.per_s:>7.1f}/s  {r.seconds:>6.2f} s for {r.n} (fill {r.fill_s:5.2f} s)"
        f"  CPU ms/event: workers {1e3 * r.worker_cpu_s / r.n:.2f}, redis "
        f"{1e3 * r.redis_cpu_s / r.n:.2f}; other load {r.other_cpu_s / r.seconds:.2f} cores"
        f"{states}"
    )


@contextlib.contextmanager
def scratch(keep: bool) -> Iterator[Path]:
    tmp = Path(tempfile.mkdtemp(prefix="seatwire-bench-directedness-"))
    try:
        yield tmp
    finally:
        if not keep:
            for f in tmp.iterdir():
                f.unlink()
            tmp.rmdir()


def main(argv: list[str] | None = None) -> int:
    stop_cleanly_on_sigterm()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--redis-url",
        default="redis://127.0.0.1:6379/14",
        help="a database of its own: it is FLUSHED before every run",
    )
    ap.add_argument("--n", type=int, default=2000, help="events per run")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=40, help="items before the clock starts")
    ap.add_argument("--concurrency", type=int, default=2, help="worker processes")
    ap.add_argument("--loglevel", default="INFO", help="worker log level (production: INFO)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--seats", type=int, default=20, help="seats in the org (issue 14 measures 2,000)"
    )
    ap.add_argument("--timeout", type=float, default=300, help="seconds per run")
    ap.add_argument("--profile", type=int, metavar="N", help="profile N events in-process")
    ap.add_argument("--top", type=int, default=0, help="with --profile: cProfile's top N")
    ap.add_argument("--keep-logs", action="store_true")
    ap.add_argument("--json", type=Path, help="write every result here as JSON")
    args = ap.parse_args(argv)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with scratch(args.keep_logs) as tmp:
        org = write_org(tmp, seed=args.seed, seats=args.seats)
        os.environ.update(
            {
                "SEATWIRE_REDIS_URL": args.redis_url,
                "SEATWIRE_API_TOKEN": "bench",
                "SEATWIRE_ORG_FILE": str(org.path),
                "SEATWIRE_OUTBOX_PATH": str(tmp / "outbox.jsonl"),
            }
        )
        os.environ.pop("SEATWIRE_BROKER_URL", None)
        if args.profile:
            return profile(args, org)
        return run(args, tmp, org)


def run(args: argparse.Namespace, tmp: Path, org: BenchOrg) -> int:
    bench = Bench(args, tmp, org)
    results: list[tuple[int, Result]] = []
    print(
        f"bench.directedness: {args.rounds} rounds x N={args.n}, {args.seats} seats, "
        f"{args.concurrency} "
        f"worker processes, {os.cpu_count()} CPUs, Redis {args.redis_url} (flushed per run), "
        f"logs in {tmp}",
        flush=True,
    )
    try:
        for rnd in range(1, args.rounds + 1):
            order = [bench.baseline, bench.seatwire]
            if rnd % 2 == 0:
                order.reverse()
            got = {r.kind: r for r in (side(rnd) for side in order)}
            for r in sorted(got.values(), key=lambda r: r.kind):
                results.append((rnd, r))
                print(f"round {rnd}  {line(r)}", flush=True)
            ratio = got["seatwire"].per_s / got["baseline"].per_s
            print(f"round {rnd}  ratio seatwire/baseline {ratio:.3f}", flush=True)
    finally:
        bench.stop_all()
        bench.r.flushdb()
        bench.app.close()

    print(f"\nevent mix, all runs: {dict(bench.events.kinds)}")
    print("medians over rounds:")
    for kind in ("baseline", "seatwire"):
        per_s = statistics.median(r.per_s for _, r in results if r.kind == kind)
        cpu = statistics.median(1e3 * r.worker_cpu_s / r.n for _, r in results if r.kind == kind)
        print(f"  {kind:<9} {per_s:>8.1f}/s   worker CPU {cpu:.2f} ms/event")
    ratios = []
    for rnd in range(1, args.rounds + 1):
        b = next(r for n, r in results if n == rnd and r.kind == "baseline")
        s = next(r for n, r in results if n == rnd and r.kind == "seatwire")
        ratios.append(s.per_s / b.per_s)
    verdict = "MET" if statistics.median(ratios) >= 0.8 else "NOT MET"
    print(
        f"  ratio seatwire/baseline: median {statistics.median(ratios):.3f} "
        f"(rounds: {', '.join(f'{x:.3f}' for x in ratios)}) target >= 0.8: {verdict}"
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
                        "worker_cpu_s": r.worker_cpu_s,
                        "redis_cpu_s": r.redis_cpu_s,
                        "other_cpu_s": r.other_cpu_s,
                        **r.extra,
                    }
                    for n, r in results
                ],
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
