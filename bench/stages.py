"""Where a work report's time goes, stage by stage: the task bodies run in-process on real Redis.

    uv run python -m bench.stages [--n 2000] [--fsync on|off] [--profile]

No Celery worker: for each report this does what the ingress and the three tasks do, in order
(journal accept + publish + mark enqueued; then per stage: validate the message, call the
handler, publish the next message), timing each step, counting Redis round trips per stage,
and (with --profile) running the whole loop under cProfile to split the time into Redis I/O,
pydantic, the decision, the ledger read, the outbox write and the publish. Publishes go to the
real broker (the same Redis database) and are never consumed; the database is flushed at the
start and at the end. Items are processed one after another, so each report sees the ledger
its predecessors left, as in the pipeline benchmark.

The Celery part a worker adds on top of a task body (fetch, hand to the pool process, late
ack) is what `bench.pipeline`'s baseline measures: three no-op tasks.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.pipeline import HIGH, envelope, make_items

STEPS = ("ingress", "engagement", "guardrails", "send")


class RoundTrips:
    """Counts what redis-py sends (one send = one round trip; a pipeline is one)."""

    def __init__(self) -> None:
        import redis.connection

        self.n = 0
        # redis-py leaves send_packed_command unannotated; this is its signature.
        original: Callable[[Any, Any, bool], None] = (
            redis.connection.AbstractConnection.send_packed_command
        )

        def counting(conn: Any, command: Any, check_health: bool = True) -> None:
            self.n += 1
            original(conn, command, check_health)

        redis.connection.AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    from workers.settings import BUNDLED_ORG

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/14", help="FLUSHED")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--fsync", choices=["on", "off"], default="on")
    ap.add_argument("--org-file", type=Path, default=BUNDLED_ORG)
    ap.add_argument("--profile", action="store_true", help="run under cProfile and split it")
    ap.add_argument("--top", type=int, default=0, help="also print cProfile's top N functions")
    args = ap.parse_args(argv)
    if args.n < 2:
        ap.error(f"--n must be at least 2 (one report to warm up, one to measure), not {args.n}")

    import tempfile

    outbox = Path(tempfile.mkdtemp(prefix="seatwire-stages-")) / "outbox.jsonl"
    os.environ.update(
        {
            "SEATWIRE_REDIS_URL": args.redis_url,
            "SEATWIRE_API_TOKEN": "bench",
            "SEATWIRE_ORG_FILE": str(args.org_file),
            "SEATWIRE_OUTBOX_PATH": str(outbox),
            "SEATWIRE_OUTBOX_FSYNC": "true" if args.fsync == "on" else "false",
            "SEATWIRE_LIMITS__PER_TARGET_PER_DAY": str(HIGH),
            "SEATWIRE_LIMITS__PER_SEAT_PER_HOUR": str(HIGH),
            "SEATWIRE_LIMITS__PER_WORK_PER_DAY": str(HIGH),
        }
    )
    os.environ.pop("SEATWIRE_BROKER_URL", None)

    from workers.bootstrap import build_container
    from workers.celery_app import create_app
    from workers.settings import Settings

    trips = RoundTrips()
    settings = Settings()
    app = create_app(settings, register=False)
    c = build_container(settings, app=app)
    c.redis.flushdb()
    items = make_items(args.n, "stages", args.org_file)

    funcs = steps(c, app)
    times: dict[str, list[float]] = {s: [] for s in STEPS}
    # This process's CPU per step: the wall time less the waits on Redis and the disk.
    cpu: dict[str, list[float]] = {s: [] for s in STEPS}
    rtts: dict[str, int] = dict.fromkeys(STEPS, 0)

    def one(item: Any) -> None:
        value: Any = item
        for step in STEPS:
            before = trips.n
            t0, c0 = time.perf_counter(), time.thread_time()
            value = funcs[step](value)
            times[step].append(time.perf_counter() - t0)
            cpu[step].append(time.thread_time() - c0)
            rtts[step] += trips.n - before
            if value is None:
                raise RuntimeError(f"{step} stopped the report: not engaged")

    # Warm-up (script loading, first connections, imports): 20 reports, or half of a small run.
    warm = min(20, len(items) // 2)
    for item in items[:warm]:
        one(item)
    for v in (*times.values(), *cpu.values()):
        v.clear()
    rtts = dict.fromkeys(STEPS, 0)
    profiler = cProfile.Profile() if args.profile else None
    t0 = time.perf_counter()
    if profiler:
        profiler.enable()
    for item in items[warm:]:
        one(item)
    if profiler:
        profiler.disable()
    wall = time.perf_counter() - t0
    n = len(items) - warm

    print(
        f"bench.stages: {n} reports, one after another, in-process on {args.redis_url}, "
        f"fsync {args.fsync}, org {args.org_file}{' (under cProfile)' if profiler else ''}"
    )
    print(f"  {n / wall:.0f} reports/s in one process ({1e3 * wall / n:.2f} ms per report)\n")
    tenth = max(1, n // 10)
    print(
        f"  {'step':<12}{'mean ms':>9}{'p50 ms':>9}{'first 10%':>11}{'last 10%':>10}"
        f"{'CPU ms':>8}{'round trips':>13}"
    )
    for step in STEPS:
        v = times[step]
        first, last = statistics.fmean(v[:tenth]), statistics.fmean(v[-tenth:])
        print(
            f"  {step:<12}{1e3 * statistics.fmean(v):>9.2f}{1e3 * statistics.median(v):>9.2f}"
            f"{1e3 * first:>11.2f}{1e3 * last:>10.2f}{1e3 * statistics.fmean(cpu[step]):>8.2f}"
            f"{rtts[step] / n:>13.1f}"
        )
    print(
        "  (CPU ms: this process's own CPU time in the step, thread_time; the rest of the mean"
        " is\n  the wait on Redis and the disk)"
    )

    if profiler:
        split(profiler, n, args.top)
    c.redis.flushdb()
    outbox.unlink(missing_ok=True)
    outbox.parent.rmdir()
    return 0


def steps(c: Any, app: Any) -> dict[str, Callable[[Any], Any]]:
    """What the ingress and the three stage tasks do for one report, in order, in-process:
    each step takes what the one before returned (a bench item, then the stage messages),
    and the send returns its outcome; None from a stage means the report stopped there."""
    import json

    from contracts.messages import DecisionEnvelope, ReservedEnvelope, WorkEnvelope
    from workers.bootstrap import now_ms
    from workers.broker import INGRESS_PUBLISH_RETRY, publish
    from workers.queues import Task
    from workers.stages.base import hand_off, onwards
    from workers.stages.engagement import Engagement
    from workers.stages.guardrails import Guardrails
    from workers.stages.send import Send

    def ingress(item: Any) -> dict[str, Any]:
        accepted = now_ms()
        tracking, fingerprint, message = envelope(item, accepted)
        c.journal.accept(
            tracking,
            kind="work",
            seat_id=item.seat,
            payload=json.dumps(message),
            now_ms=accepted,
            fingerprint=fingerprint,
        )
        publish(app, Task.ENGAGEMENT, tracking, message, retry_policy=INGRESS_PUBLISH_RETRY)
        c.journal.mark_enqueued(tracking, now_ms())
        return message

    def engagement(message: dict[str, Any]) -> dict[str, Any] | None:
        # The stage tasks' bodies (workers/stages/*.py `register`): the handler built from
        # the container for each message, then called, then the hand-off (in the handler's
        # own script when the broker is the stores' Redis).
        atomic = onwards(app, c)
        nxt = Engagement.of(c, atomic)(WorkEnvelope.model_validate(message))
        if nxt is None:
            return None
        wire = nxt.to_wire()
        if atomic is None:
            hand_off(app, c, Task.GUARDRAILS, nxt.tracking_id, wire)
        return wire

    def guardrails(message: dict[str, Any]) -> dict[str, Any] | None:
        atomic = onwards(app, c)
        nxt = Guardrails.of(c, atomic)(DecisionEnvelope.model_validate(message))
        if nxt is None:
            return None
        wire = nxt.to_wire()
        if atomic is None:
            hand_off(app, c, Task.SEND, nxt.tracking_id, wire)
        return wire

    def send(message: dict[str, Any]) -> str:
        return Send.of(c).send(ReservedEnvelope.model_validate(message))

    return {
        "ingress": ingress,
        "engagement": engagement,
        "guardrails": guardrails,
        "send": send,
    }


# Functions whose cumulative time is reported (ms per report). They nest; see the notes.
WATCH = [
    ("engagement stage handler", "stages/engagement.py", "__call__"),
    ("  plan_engagement", "engagement/decide.py", "plan_engagement"),
    ("  Ledger.tally", "stores/ledger.py", "tally"),
    ("  Journal.record_decision", "stores/journal.py", "record_decision"),
    ("guardrails stage handler", "stages/guardrails.py", "__call__"),
    ("  Ledger.reserve", "stores/ledger.py", "reserve"),
    ("send stage handler", "stages/send.py", "send"),
    ("  FileOutbox.send", "outbound/file.py", "send"),
    ("    os.fsync", "~", "<built-in method posix.fsync>"),
    ("  Ledger.begin_send", "stores/ledger.py", "begin_send"),
    ("  Ledger.finish", "stores/ledger.py", "finish"),
    ("publish (kombu send_task)", "workers/broker.py", "publish"),
    ("Redis: reading replies", "connection.py", "read_response"),
    ("Redis: sending commands", "connection.py", "send_packed_command"),
    ("pydantic model_validate", "main.py", "model_validate"),
    ("pydantic model_validate_json", "main.py", "model_validate_json"),
    ("pydantic __init__ (contracts built)", "main.py", "__init__"),
    ("pydantic model_dump (+to_wire)", "main.py", "model_dump"),
    ("pydantic model_dump_json", "main.py", "model_dump_json"),
]


def split(profiler: cProfile.Profile, n: int, top: int) -> None:
    stats = pstats.Stats(profiler)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())  # tottime over everything
    print(
        f"\n  cProfile split (ms per report, cumulative; {1e3 * total / n:.2f} ms profiled in "
        "all, profiling overhead included):"
    )
    for label, file, func in WATCH:
        cum = sum(
            v[3]
            for (f, _line, name), v in raw.items()
            if name == func and (file == "~" or f.endswith(file))
        )
        print(f"    {label:<38}{1e3 * cum / n:>8.2f}")
    if top:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
        print(out.getvalue())


if __name__ == "__main__":
    raise SystemExit(main())
