"""How the two per-event costs that depend on the org's size grow with it (issue 14): the
directedness stage with 20 / 200 / 2,000 seats, and `decide_engagement` with 1,000 / 10,000 /
100,000 members, rung by rung. The other benches measure one size; this one says whether a
cost is flat in the size or grows with it, before the scale work changes either.

    uv run python -m bench.scale [--seats 20,200,2000] [--members 1000,10000,100000]
        [--events 1000] [--decisions 300] [--redis-url redis://127.0.0.1:6379/14] [--json F]

**The database (default 14) is FLUSHED** for every seat count and at the end.

Directedness, per seat count, in-process on real Redis (no worker: the question is the cost of
one event, and the worker-level ratio at 20 seats is bench.directedness's). The org is
bench/directedness.py's (`write_org`: the same 979 people and 50 channels at every size, only
the seats grow; team channels hold 4 seats, project rooms 2) plus one listed DM channel per
seat with one person. The events are its seeded Slack mix (ambient messages, mentions, a seat
named, a person mentioned, a seat's own message, thread replies) plus 8% DMs to one seat, so
each event concerns a handful of seats whatever their number. Each event is journalled and
published as the ingress's Celery intake does; then, in alternating blocks of 50:

  body     `InboundEnvelope.model_validate` + the `Directedness` handler, timed alone (p50/p99)
  task     the registered stage task through Celery's own in-process trace (`Task.apply`: the
           base class with its start write, the trace, the handler; no broker), and, on the
           same messages, bench/noop_app.py's `noop3` the same way: events/s and the ratio

Memory is the sum of `MEMORY USAGE` over every key of the database (so other databases of the
server do not count): after the intake (`queued`: the journal entry and the waiting task
message, per event) and after the stage has run every event with the queue's list deleted
(`kept`: what an event leaves behind: its closed journal entry, verdicts, inbox items, facts).
`org load` is `OrgSource.open` of the org file, what a worker process pays on start and reload.

Decisions, per member count: `bench.synthetic_org.build_org(members)` (50 channels, 20 seats),
`Directory.of(members)` timed on its own (median of 3, each fresh), then bench/decision.py's
report generators, one rung at a time: an explicit owner, the ownership rung, the ownership
rung with a scope token never seen before (the directory's per-token memo misses and scans),
an escalation path, the expertise rung, the supervisory fallback. Each call is timed alone
after a warm-up, GC on (the pre-built reports frozen), as bench/decision.py does.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.directedness import BenchOrg, Events, inbound_message, write_org

DEFAULT_URL = "redis://127.0.0.1:6379/14"
DM_SHARE = 0.08
BLOCK = 50


# ---------------------------------------------------------------------------- directedness


def add_dms(org: BenchOrg) -> dict[str, tuple[str, str]]:
    """One listed DM channel per seat with one person; returns {seat: (channel, person's
    Slack id)}. Written into the org file."""
    data = json.loads(org.path.read_text())
    people = [m for m in data["members"] if m["aliases"][0] in set(org.people)]
    dms: dict[str, tuple[str, str]] = {}
    for i, seat in enumerate(org.seats):
        person = people[(7 * i) % len(people)]
        channel = f"D0SEAT{i:05d}"
        data["channels"].append(
            {"id": channel, "kind": "DM", "name": "", "memberIds": [person["id"], seat]}
        )
        dms[seat] = (channel, person["aliases"][0])
    org.path.write_text(json.dumps(data))
    return dms


class ScaleEvents(Events):
    """bench/directedness.py's mix, plus a share of DMs from a person to one seat."""

    def __init__(self, org: BenchOrg, seed: int, dms: dict[str, tuple[str, str]]) -> None:
        super().__init__(org, seed)
        self.dms = dms

    def next(self) -> dict[str, Any]:
        if self.rng.random() >= DM_SHARE:
            return super().next()
        seat = self.rng.choice(self.org.seats)
        channel, person = self.dms[seat]
        self.kinds["dm"] += 1
        topic = self.rng.choice(self.topics)
        return self._envelope(f"are you around for the {topic}?", person, channel, "im", None)


def keys_memory(r: Any) -> int:
    """Bytes of every key in the database (`MEMORY USAGE ... SAMPLES 0`: exact)."""
    total = 0
    batch: list[bytes] = []

    def flush() -> int:
        pipe = r.pipeline(transaction=False)
        for k in batch:
            pipe.memory_usage(k, samples=0)
        got = sum(int(x or 0) for x in pipe.execute())
        batch.clear()
        return got

    for key in r.scan_iter(count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            total += flush()
    if batch:
        total += flush()
    return total


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of `values`."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))] if s else float("nan")


def timed_calls(fn: Callable[[Any], Any], items: list[Any]) -> list[float]:
    out = []
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        out.append(time.perf_counter() - t0)
    return out


def directedness_size(n_seats: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from bench import noop_app
    from contracts.messages import InboundEnvelope
    from workers.bootstrap import build_container, now_ms
    from workers.broker import INGRESS_PUBLISH_RETRY, publish
    from workers.celery_app import create_app
    from workers.org import OrgSource
    from workers.queues import Queue, Task
    from workers.settings import Settings
    from workers.stages.directedness import Directedness
    from workers.stores import keys

    here = tmp / f"seats-{n_seats}"
    here.mkdir()
    org = write_org(here, seed=args.seed, seats=n_seats)
    dms = add_dms(org)
    os.environ["SEATWIRE_ORG_FILE"] = str(org.path)
    loads = []
    for _ in range(3):
        t0 = time.perf_counter()
        OrgSource.open(org.path).current()
        loads.append(time.perf_counter() - t0)

    settings = Settings()
    c = build_container(settings, app=create_app(settings, register=False))
    app = create_app(settings, container=c)  # the stage tasks, working with `c`
    task = app.tasks[Task.DIRECTEDNESS.value]
    r = c.redis
    r.flushdb()
    events = ScaleEvents(org, args.seed + n_seats, dms)
    total = args.event_warmup + args.events
    mem0 = keys_memory(r)
    messages: list[dict[str, Any]] = []
    trackings: list[str] = []
    for cand in events.candidates(total):
        at = now_ms()
        tracking, message = inbound_message(cand, at)
        payload = json.dumps(message)
        accepted = c.journal.accept(
            tracking, kind="inbound", seat_id="", payload=payload, now_ms=at, fingerprint=""
        )
        if not accepted.new:
            raise RuntimeError(f"{tracking} was already journalled")
        publish(app, Task.DIRECTEDNESS, tracking, message, retry_policy=INGRESS_PUBLISH_RETRY)
        c.journal.mark_enqueued(tracking, now_ms())
        messages.append(message)
        trackings.append(tracking)
    queued = (keys_memory(r) - mem0) / total
    r.delete(Queue.DIRECTEDNESS.value)  # the stage runs in-process: nobody consumes the list

    def body(message: dict[str, Any]) -> None:
        # workers/stages/directedness.py's task: validate, then the handler.
        Directedness.of(c)(InboundEnvelope.model_validate(message))

    def through_task(message: dict[str, Any]) -> None:
        got = task.apply(args=[message], task_id=f"{message['trackingId']}:directedness")
        if got.failed():
            raise RuntimeError(f"the directedness task failed: {got.result!r}")

    def noop(message: dict[str, Any]) -> None:
        got = noop_app.noop3.apply(args=[message], task_id=f"{message['trackingId']}:noop")
        if got.failed():
            raise RuntimeError(f"the no-op task failed: {got.result!r}")

    warm = messages[: args.event_warmup]
    for i, m in enumerate(warm):  # scripts loaded, connections made, caches filled
        (body if i % 2 else through_task)(m)
        noop(m)
    gc.collect()
    gc.freeze()
    body_s: list[float] = []
    task_s: list[float] = []
    noop_s: list[float] = []
    rest = messages[args.event_warmup :]
    for k in range(0, len(rest), BLOCK):
        block = rest[k : k + BLOCK]
        if (k // BLOCK) % 2 == 0:
            body_s += timed_calls(body, block)
        else:
            task_s += timed_calls(through_task, block)
            noop_s += timed_calls(noop, block)
    gc.unfreeze()
    kept = (keys_memory(r) - mem0) / total

    pipe = r.pipeline(transaction=False)
    for t in trackings:
        pipe.hget(keys.journal(t), "state")
    states = Counter((s or b"missing").decode() for s in pipe.execute())
    if set(states) - {"directed", "ambient"}:
        raise RuntimeError(f"{n_seats} seats: not every event was resolved: {dict(states)}")
    r.flushdb()
    app.close()
    task_per_s = len(task_s) / sum(task_s) if task_s else float("nan")
    noop_per_s = len(noop_s) / sum(noop_s) if noop_s else float("nan")
    return {
        "seats": n_seats,
        "events": args.events,
        "org_load_ms": 1e3 * statistics.median(loads),
        "body_p50_us": 1e6 * pct(body_s, 0.5),
        "body_p99_us": 1e6 * pct(body_s, 0.99),
        "task_per_s": task_per_s,
        "noop_per_s": noop_per_s,
        "ratio": task_per_s / noop_per_s,
        "queued_bytes_per_event": queued,
        "kept_bytes_per_event": kept,
        "directed_share": states["directed"] / total,
        "mix": dict(events.kinds),
    }


# ---------------------------------------------------------------------------- decisions


def decision_size(n_members: int, args: argparse.Namespace) -> dict[str, Any]:
    from bench.decision import Mix, _ctx, outcome_of
    from bench.synthetic_org import build_org
    from contracts import Limits
    from pipeline.engagement import Directory, decide_engagement

    t0 = time.perf_counter()
    so = build_org(n_members, 50, args.seed)
    build_s = time.perf_counter() - t0
    prepare = []
    for _ in range(3):
        t0 = time.perf_counter()
        directory = Directory.of(so.org.members)
        prepare.append(time.perf_counter() - t0)
    mix = Mix(so, args.seed)
    rungs: dict[str, Callable[[], Any]] = {
        "explicit owner": mix.explicit_owner,
        "ownership": mix.ownership_rung,
        "ownership, memo miss": mix.memo_miss,
        "escalation path": mix.escalation_path,
        "expertise": mix.expertise_rung,
        "supervisory": mix.supervisory,
    }
    limits = Limits()
    rows = []
    for name, make in rungs.items():
        cases = [make() for _ in range(args.decision_warmup + args.decisions)]
        ctxs = [_ctx(so, directory, case, limits) for case in cases]
        gc.collect()
        gc.freeze()
        for case, ctx in zip(cases[: args.decision_warmup], ctxs, strict=False):
            decide_engagement(case.work, ctx)
        ns = []
        outcomes: Counter[str] = Counter()
        perf = time.perf_counter_ns
        for case, ctx in zip(
            cases[args.decision_warmup :], ctxs[args.decision_warmup :], strict=True
        ):
            t = perf()
            decision = decide_engagement(case.work, ctx)
            ns.append(perf() - t)
            outcomes[outcome_of(decision).split(" / ")[1]] += 1
        gc.unfreeze()
        rows.append(
            {
                "rung": name,
                "n": len(ns),
                "p50_us": pct([x / 1e3 for x in ns], 0.5),
                "p99_us": pct([x / 1e3 for x in ns], 0.99),
                "per_s": len(ns) / (sum(ns) / 1e9),
                "first_target_rung": outcomes.most_common(1)[0][0],
            }
        )
    return {
        "members": len(so.org.members),
        "org_build_s": build_s,
        "directory_of_ms": 1e3 * statistics.median(prepare),
        "rungs": rows,
    }


# ---------------------------------------------------------------------------- report


def show_directedness(rows: list[dict[str, Any]]) -> None:
    print(
        "\ndirectedness, in-process: body = validate + handler; task/s and noop/s through\n"
        "Task.apply; bytes per event (MEMORY USAGE of every key)\n"
    )
    print(
        f"{'seats':>6}{'org load':>10}{'body p50':>10}{'p99':>9}{'task/s':>8}{'noop/s':>8}"
        f"{'ratio':>6}{'queued B':>9}{'kept B':>9}{'dir.':>5}"
    )
    for x in rows:
        print(
            f"{x['seats']:>6,}{x['org_load_ms']:>7.0f} ms{x['body_p50_us'] / 1e3:>7.2f} ms"
            f"{x['body_p99_us'] / 1e3:>6.1f} ms{x['task_per_s']:>8,.0f}{x['noop_per_s']:>8,.0f}"
            f"{x['ratio']:>6.3f}{x['queued_bytes_per_event']:>9,.0f}"
            f"{x['kept_bytes_per_event']:>9,.0f}{100 * x['directed_share']:>4.0f}%"
        )


def show_decisions(sizes: list[dict[str, Any]]) -> None:
    print("\ndecide_engagement, prepared directory, one rung at a time\n")
    print(f"{'members':>8}  {'rung':<22}{'p50 µs':>9}{'p99 µs':>9}{'decisions/s':>13}  first rung")
    for s in sizes:
        print(
            f"{s['members']:>8,}  Directory.of {s['directory_of_ms']:,.1f} ms "
            f"(org built in {s['org_build_s']:.2f} s)"
        )
        for x in s["rungs"]:
            print(
                f"{'':>8}  {x['rung']:<22}{x['p50_us']:>9.1f}{x['p99_us']:>9.1f}"
                f"{x['per_s']:>13,.0f}  {x['first_target_rung']}"
            )


def sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="seatwire-bench-scale-") as tmp:
        yield Path(tmp)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--redis-url", default=DEFAULT_URL, help="FLUSHED (default: %(default)s)")
    ap.add_argument("--seats", type=sizes, default=[20, 200, 2000], help="seat counts")
    ap.add_argument("--members", type=sizes, default=[1000, 10000, 100000], help="member counts")
    ap.add_argument("--events", type=int, default=1000, help="timed events per seat count")
    ap.add_argument("--event-warmup", type=int, default=100)
    ap.add_argument("--decisions", type=int, default=300, help="timed decisions per rung")
    ap.add_argument("--decision-warmup", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)

    os.environ.update({"SEATWIRE_REDIS_URL": args.redis_url, "SEATWIRE_API_TOKEN": "bench"})
    os.environ.pop("SEATWIRE_BROKER_URL", None)
    print(
        f"bench.scale: seats {args.seats} x {args.events} events, members {args.members} x "
        f"{args.decisions} decisions per rung; {os.cpu_count()} CPUs, Python "
        f"{sys.version.split()[0]}, Redis {args.redis_url} (flushed)",
        flush=True,
    )
    out: dict[str, Any] = {"directedness": [], "decisions": []}
    with scratch() as tmp:
        os.environ["SEATWIRE_OUTBOX_PATH"] = str(tmp / "outbox.jsonl")
        try:
            for n in args.seats:
                out["directedness"].append(directedness_size(n, args, tmp))
                print(f"  {n} seats done", flush=True)
        finally:
            import redis

            redis.Redis.from_url(args.redis_url).flushdb()
    for n in args.members:
        out["decisions"].append(decision_size(n, args))
        print(f"  {n} members done", flush=True)
    if out["directedness"]:
        show_directedness(out["directedness"])
        mix = out["directedness"][-1]["mix"]
        print(f"\nevent mix ({args.seats[-1]} seats): {mix}")
    if out["decisions"]:
        show_decisions(out["decisions"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
