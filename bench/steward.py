"""One goal-steward tick over N objectives on real Redis (issue 10, "Benchmark").

    uv run python -m bench.steward [--sizes 100,250,500] [--candidates 20]
        [--prefill-rows 100000] [--redis-url redis://127.0.0.1:6379/9] [--json FILE]

For each N: flush the database, write an org file (a temp dir) with the bundled org's members,
channels and seats plus N active objectives of `--candidates` distinct-titled playbook
candidates each, build the container (`build_container`) and a publish-only Celery app
(`create_app(settings, register=False)`, the broker on the same database), post two samples
per objective through `Samples.record` (off target, so work is created) and a cost frame on a
third of them through `Costs.record`, then run `StewardRun.of(container, app)(now_ms=...)`,
the steward beat task's body, three times, 300 s (the default `SEATWIRE_STEWARD_INTERVAL_S`)
apart on the clock it is given:

- **tick 1** creates work: per objective up to two admitted candidates (the per-run cap),
  classified SELF / COLLABORATE / NEEDS_REVIEW / HANDOFF by the objective's shape, the rest
  refused by dedupe (near-duplicate titles), provenance (no `why.reason`), budget (an estimate
  over the envelope), wip (the new-per-run cap) or honesty (an `llm` sample on every tenth);
- **tick 2** sees that work in flight: a flat or worsening trend escalates to the owner (one
  engagement each), an improving one logs; every candidate is refused (dedupe / trend);
- **tick 3** is the steady state: it decides what tick 2 decided, so nothing new is audited
  (same run ids) or dispatched (same dispatch ids: `duplicate`).

Then, at the largest N, the audit is pre-filled through the product path until it holds at
least `--prefill-rows` lines: ticks that each follow one new sample per objective (a new sample
is a new run id, so each writes a full audit again), after which a "new sample" tick and a
steady tick are measured as ticks 2 and 3 were.

Measured per objective: wall time from the lease SET NX to the lease release (both included),
and Redis round trips. A round trip is one `send_packed_command` of redis-py's connection
(`redis.connection.AbstractConnection`, patched for the whole process, so the broker's
kombu publishes count too): a plain command is one, a pipeline or a MULTI/EXEC transaction
is one (redis-py sends the whole buffer in one write), each WATCH or read made while watching
is one, an UNWATCH at a pipeline's reset is one, a health-check PING is one, a Lua script is
one (EVALSHA; the scripts are loaded before the first tick, so no NOSCRIPT retry is counted).
Round trips are also split by store call (the container's store methods, the broker publish,
the lease take and release, wrapped). The tick time is the whole `StewardRun.__call__`.

The database is FLUSHED at the start of every size and at the end. Nothing here is imported by
`workers/`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_URL = "redis://127.0.0.1:6379/9"
TICKS = ("tick 1 (creates)", "tick 2 (in flight)", "tick 3 (steady)")
INTERVAL_MS = 300_000  # ticks are this far apart on the clock handed to the run
HOUR_MS = 3_600_000
DAY_MS = 86_400_000

# Distinct words for candidate titles: candidate j of an objective uses WORDS[3j:3j+3], so two
# candidates share no word (title similarity 0) unless one is built as a near-duplicate.
WORD_TEXT = (
    "nudge reviewers waiting cache deploy dependencies approve second window call stalled "
    "trials chase invoice approvers trim flaky suites split monolith pipeline rotate oncall "
    "pager document runbook steps automate release notes archive stale branches retire legacy "
    "dashboards measure queue latency profile slow endpoints batch nightly exports tighten "
    "alert thresholds pair junior engineers audit access grants refresh onboarding guide "
    "shorten standup meetings publish weekly digest label triage backlog prune unused flags "
    "benchmark storage tier"
)
WORDS = tuple(WORD_TEXT.split())
OWNERS = ("gus", "ava", "devi", "emil", "hana")


# --------------------------------------------------------------------------- the org


def candidate(i: int, j: int, shape: int) -> dict[str, Any]:
    """Candidate j of objective i: j=1 near-duplicates j=0 and j=7 near-duplicates j=4
    (dedupe), j=2 has no reason (provenance), j=3 costs more than the budget (budget)."""
    base = 3 * (4 if j == 7 else 0 if j == 1 else j)
    words = WORDS[base : base + 3]
    title = " ".join(words).capitalize()
    if j in (1, 7):
        title += f" again {WORDS[3 * j]}"
    c: dict[str, Any] = {
        "title": title,
        "advances": [f"kpi-{i:04d}"],
        "why": {"reason": f"reason {j} for kpi-{i:04d}"},
        "estMicros": 6_000_000 if j == 3 else 100_000,
    }
    if j == 2:
        c["why"] = {}
    if shape == 3 and j == 0:
        c["ownerMemberId"] = "gus"  # another member owns it: HANDOFF (an engagement)
    if shape == 1 and j == 4:
        c["collaborators"] = [{"memberId": "devi", "role": "approver"}]  # NEEDS_REVIEW
    return c


def objective(i: int, candidates: int) -> dict[str, Any]:
    """Objective i: its shape (i % 4) picks the dispositions, i % 5 the steward."""
    shape = i % 4
    obj: dict[str, Any] = {
        "key": f"kpi-{i:04d}",
        "state": "active",
        "ownerId": OWNERS[i % len(OWNERS)],
        "metric": f"metric {i}",
        "target": 24,
        "direction": "down",
        "tolerance": 4,
        "cadence": "daily" if i % 7 == 0 else "weekly",
        "budgetMicros": 5_000_000,
        "playbook": [candidate(i, j, shape) for j in range(candidates)],
    }
    if i % 5 == 4:
        obj["adoptedBy"] = "ava"  # no seatId: the adopting member stewards it
    else:
        obj["seatId"] = "scout" if i % 5 < 2 else "tally"
    if shape == 1:
        obj["collaborators"] = [{"memberId": "ben", "role": "contributor"}]  # COLLABORATE
    if shape == 2:
        obj["reviewBy"] = "chloe"  # NEEDS_REVIEW
    return obj


def write_org(path: Path, n: int, candidates: int) -> None:
    from workers.settings import BUNDLED_ORG

    base = yaml.safe_load(BUNDLED_ORG.read_text())
    org = {
        "members": base["members"],
        "channels": base.get("channels", []),
        "seats": base["seats"],
        "objectives": [objective(i, candidates) for i in range(n)],
    }
    path.write_text(yaml.safe_dump(org, sort_keys=False))


def sample_plan(i: int, now_ms: int) -> list[tuple[int, float, str]]:
    """(atMs, value, source) of objective i's two samples: the latest an hour ago, 40 against
    a target of 24 (off by 16, tolerance 4), and one two periods before it; its trend cycles
    worsening / flat / improving; every tenth's latest is `llm` (honesty refuses), every
    25th is within tolerance."""
    period = DAY_MS if i % 7 == 0 else 7 * DAY_MS
    latest_at = now_ms - HOUR_MS
    latest = 26.0 if i % 25 == 12 else 40.0
    earlier = (30.0, 40.0, 50.0)[i % 3]
    source = "llm" if i % 10 == 9 else ("human" if i % 2 else "method")
    return [(latest_at - 2 * period - HOUR_MS, earlier, "method"), (latest_at, latest, source)]


# --------------------------------------------------------------------------- measuring


class Meter:
    """Counts redis-py round trips (one `send_packed_command` each), in all and by step."""

    def __init__(self) -> None:
        import redis.connection

        self.n = 0
        self.by_step: Counter[str] = Counter()
        cls = redis.connection.AbstractConnection
        original: Callable[..., None] = cls.send_packed_command

        def counting(conn: Any, command: Any, check_health: bool = True) -> None:
            self.n += 1
            original(conn, command, check_health)

        cls.send_packed_command = counting  # type: ignore[method-assign]

    def wrap(self, owner: object, name: str, step: str) -> None:
        """Count the round trips of `owner.name` under `step` (an instance or module attr)."""
        inner: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(inner)
        def counted(*args: Any, **kwargs: Any) -> Any:
            before = self.n
            try:
                return inner(*args, **kwargs)
            finally:
                self.by_step[step] += self.n - before

        setattr(owner, name, counted)


@dataclass
class Tick:
    label: str
    n: int
    audit_rows: int  # per-objective audit lines stored before the tick
    seconds: float
    per_ms: list[float]
    trips: list[int]
    cpu_ms: float  # this process's CPU per objective, mean
    dispatches: int
    audited: int
    by_step: dict[str, int] = field(default_factory=dict)
    gates: dict[str, int] = field(default_factory=dict)
    dispositions: dict[str, int] = field(default_factory=dict)
    actions: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)

    def pct(self, q: float) -> float:
        v = sorted(self.per_ms)
        return v[min(len(v) - 1, max(0, round(q * len(v)) - 1))]

    def row(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "objectives": self.n,
            "auditRowsBefore": self.audit_rows,
            "tickS": round(self.seconds, 3),
            "tickOverInterval": round(self.seconds / (INTERVAL_MS / 1000), 5),
            "perObjectiveMs": {
                "p50": round(statistics.median(self.per_ms), 3),
                "p99": round(self.pct(0.99), 3),
                "max": round(max(self.per_ms), 3),
                "cpuMean": round(self.cpu_ms, 3),
            },
            "roundTripsPerObjective": {
                "mean": round(statistics.fmean(self.trips), 3),
                "min": min(self.trips),
                "max": max(self.trips),
            },
            "dispatches": self.dispatches,
            "auditLinesWritten": self.audited,
            "roundTripsByStep": {k: round(v / self.n, 3) for k, v in self.by_step.items()},
            "gates": self.gates,
            "dispositions": self.dispositions,
            "gapActions": self.actions,
            "dispatchOutcomes": self.outcomes,
        }


class Bench:
    """One size: the org, the container, the app and the run, on a flushed database."""

    def __init__(self, meter: Meter, url: str, n: int, candidates: int, tmp: Path) -> None:
        org_file = tmp / f"org-{n}.yaml"
        write_org(org_file, n, candidates)
        os.environ["SEATWIRE_ORG_FILE"] = str(org_file)

        import workers.stages.steward_run as steward_run
        from workers.bootstrap import build_container
        from workers.celery_app import create_app
        from workers.settings import Settings
        from workers.stores.scripts import LIBRARIES, SCRIPTS, source

        self.meter, self.n = meter, n
        settings = Settings()
        self.app = create_app(settings, register=False)
        self.c = build_container(settings, app=self.app)
        self.c.redis.flushdb()
        self.keys = [o.key for o in self.c.org.current()[0].objectives]
        self.run = steward_run.StewardRun.of(self.c, self.app)
        for name in SCRIPTS:
            if name not in LIBRARIES:  # loaded now: no NOSCRIPT retry inside a tick
                self.c.redis.script_load(source(name))
        for owner, name, step in (
            (self.c.samples, "for_gap", "samples.for_gap"),
            (self.c.backlog, "open_items", "backlog.open_items"),
            (self.c.costs, "spend", "costs.spend"),
            (self.c.overrides, "active", "overrides.active"),
            (self.c.overrides, "consume", "overrides.consume"),
            (self.c.audit, "record", "audit.record"),
            (self.c.backlog, "add", "backlog.add"),
            (self.c.journal, "accept", "journal.accept"),
            (self.c.journal, "get", "journal.get"),
            (self.c.journal, "mark_enqueued", "journal.mark_enqueued"),
            (self.c.claims, "take", "claims.take"),
        ):
            meter.wrap(owner, name, step)
        self._timing()

    def _timing(self) -> None:
        """Per objective: from the lease SET NX to the lease release, and its round trips."""
        take, release = self.run._take, self.run._release
        self.marks: list[tuple[float, float, int]] = []
        self.per: list[tuple[float, int]] = []
        self.cpu: list[float] = []
        meter = self.meter

        def timed_take(objective_key: str) -> str | None:
            self.marks.append((time.perf_counter(), time.process_time(), meter.n))
            before = meter.n
            try:
                return take(objective_key)
            finally:
                meter.by_step["lease take"] += meter.n - before

        def timed_release(objective_key: str, token: str) -> None:
            before = meter.n
            try:
                release(objective_key, token)
            finally:
                meter.by_step["lease release"] += meter.n - before
                t0, c0, n0 = self.marks.pop()
                self.per.append((time.perf_counter() - t0, meter.n - n0))
                self.cpu.append(time.process_time() - c0)

        self.run._take = timed_take  # type: ignore[method-assign]
        self.run._release = timed_release  # type: ignore[method-assign]

    def seed(self, now_ms: int) -> None:
        from contracts.goals import Sample
        from contracts.money import CostFrame

        for i, key in enumerate(self.keys):
            for at, value, src in sample_plan(i, now_ms):
                sample = Sample.model_validate({"value": value, "source": src, "atMs": at})
                self.c.samples.record(key, sample)
            if i % 3 == 0:
                frame = CostFrame.model_validate(
                    {
                        "costMicros": 1_000_000,
                        "enforcement": "on",
                        "objective": key,
                        "atMs": now_ms - HOUR_MS,
                        "turnId": f"bench-{key}",
                    }
                )
                self.c.costs.record("scout" if i % 2 else "tally", frame, now_ms=now_ms)
        self.c.redis.ping()
        from workers.broker import publish
        from workers.queues import FIRST_TASK

        publish(self.app, FIRST_TASK["work"], "bench-warmup", {"warmup": True})  # connect

    def new_samples(self, now_ms: int) -> None:
        from contracts.goals import Sample

        for i, key in enumerate(self.keys):
            _at, value, src = sample_plan(i, now_ms)[1]
            sample = Sample.model_validate({"value": value, "source": src, "atMs": now_ms - 60_000})
            self.c.samples.record(key, sample)

    def audit_rows(self) -> int:
        from workers.stores import keys

        with self.c.redis.pipeline(transaction=False) as pipe:
            for key in self.keys:
                pipe.xlen(keys.steward_audit(key))
            return sum(int(x) for x in pipe.execute())

    def tick(self, label: str, now_ms: int) -> Tick:
        rows = self.audit_rows()
        self.per.clear()
        self.cpu.clear()
        self.meter.by_step.clear()
        t0 = time.perf_counter()
        before = self.meter.n
        result = self.run(now_ms=now_ms)
        seconds = time.perf_counter() - t0
        outside = self.meter.n - before - sum(n for _t, n in self.per)
        if len(self.per) != self.n or result.skipped:
            raise RuntimeError(f"{label}: ran {len(self.per)} of {self.n} ({result.skipped})")
        by_step = dict(self.meter.by_step)
        inside = sum(n for _t, n in self.per)
        by_step["other, inside the objectives"] = inside - sum(by_step.values())
        by_step["outside the objectives"] = outside
        gates: Counter[str] = Counter()
        dispositions: Counter[str] = Counter()
        actions: Counter[str] = Counter()
        for outcome in result.plan.outcomes:
            for e in outcome.audit:
                if e.kind == "candidate":
                    gates["admitted" if e.admitted else str(e.gate)] += 1
                    if e.disposition:
                        dispositions[e.disposition] += 1
                elif e.kind == "gap_decision" and e.action:
                    actions[e.action] += 1
        return Tick(
            label=label,
            n=self.n,
            audit_rows=rows,
            seconds=seconds,
            per_ms=[1e3 * t for t, _n in self.per],
            cpu_ms=1e3 * statistics.fmean(self.cpu),
            trips=[n for _t, n in self.per],
            dispatches=sum(len(o.dispatches) for o in result.plan.outcomes),
            audited=result.audited,
            by_step=by_step,
            gates=dict(gates),
            dispositions=dict(dispositions),
            actions=dict(actions),
            outcomes=dict(Counter(result.dispatched.values())),
        )


# --------------------------------------------------------------------------- report

HEADER = (
    f"{'tick':<22}{'N':>5}{'audit rows':>11}{'tick s':>8}{'/300 s':>8}{'p50 ms':>8}"
    f"{'p99 ms':>8}{'max ms':>8}{'cpu ms':>8}{'rt mean':>8}{'rt min':>7}{'rt max':>7}"
    f"{'disp':>6}{'audit':>7}"
)


def line(t: Tick) -> str:
    return (
        f"{t.label:<22}{t.n:>5}{t.audit_rows:>11}{t.seconds:>8.2f}"
        f"{t.seconds / (INTERVAL_MS / 1000):>8.4f}{statistics.median(t.per_ms):>8.2f}"
        f"{t.pct(0.99):>8.2f}{max(t.per_ms):>8.2f}{t.cpu_ms:>8.2f}{statistics.fmean(t.trips):>8.2f}"
        f"{min(t.trips):>7}{max(t.trips):>7}{t.dispatches:>6}{t.audited:>7}"
    )


def details(t: Tick) -> str:
    steps = ", ".join(f"{k} {v / t.n:.2f}" for k, v in sorted(t.by_step.items()) if v)
    return (
        f"    {t.label} @ N={t.n}: gap {t.actions}; candidates {t.gates}; dispositions "
        f"{t.dispositions}; dispatch outcomes {t.outcomes}\n"
        f"      round trips per objective by step: {steps}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--redis-url", default=DEFAULT_URL, help="FLUSHED (default: %(default)s)")
    ap.add_argument("--sizes", default="100,250,500", help="objective counts, comma-separated")
    ap.add_argument("--candidates", type=int, default=20, help="playbook candidates each")
    ap.add_argument(
        "--prefill-rows",
        type=int,
        default=100_000,
        help="audit lines to reach at the largest size before the last two ticks (0: skip)",
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.candidates < 8:
        ap.error("--candidates must be 8 or more (the gate mix needs them)")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    os.environ.update(
        {
            "SEATWIRE_REDIS_URL": args.redis_url,
            "SEATWIRE_BROKER_URL": args.redis_url,
            "SEATWIRE_API_TOKEN": "bench",
        }
    )
    for var in ("SEATWIRE_PROPOSER_URL", "SEATWIRE_STEWARD_LEASE_MS"):
        os.environ.pop(var, None)
    from workers.clock import now_ms
    from workers.settings import Settings

    interval_s = float(Settings.model_fields["steward_interval_s"].default)
    if interval_s * 1000 != INTERVAL_MS:
        raise SystemExit(f"the default steward interval is {interval_s} s, not 300 s: update")
    # A steward run's engagements are journalled and published by the report intake, the
    # ingress's own path: its module's `publish` is what goes to the broker.
    import workers.stages.report_intake as report_intake

    meter = Meter()
    meter.wrap(report_intake, "publish", "broker publish")  # once: a module attribute
    ticks: list[Tick] = []
    print(
        f"bench.steward: one StewardRun tick on {args.redis_url}, {args.candidates} candidates "
        f"per objective, no proposer; tick interval {interval_s:g} s "
        f"(SEATWIRE_STEWARD_INTERVAL_S default)\n"
    )
    print(HEADER)
    last: Bench | None = None
    with tempfile.TemporaryDirectory(prefix="seatwire-steward-") as tmp:
        for n in sizes:
            b = Bench(meter, args.redis_url, n, args.candidates, Path(tmp))
            last = b
            start = now_ms()
            b.seed(start)
            for k, label in enumerate(TICKS):
                t = b.tick(label, start + k * INTERVAL_MS)
                ticks.append(t)
                print(line(t), flush=True)
            if n == max(sizes) and args.prefill_rows > 0:
                clock = start + 2 * INTERVAL_MS
                filled = 0
                t0 = time.perf_counter()
                while b.audit_rows() < args.prefill_rows:
                    clock += INTERVAL_MS
                    b.new_samples(clock)
                    b.run(now_ms=clock)
                    filled += 1
                print(
                    f"  (audit pre-filled: {filled} ticks on new samples, "
                    f"{b.audit_rows()} per-objective audit lines, "
                    f"{time.perf_counter() - t0:.0f} s)"
                )
                clock += INTERVAL_MS
                b.new_samples(clock)
                t = b.tick("new sample, big audit", clock)
                ticks.append(t)
                print(line(t), flush=True)
                t = b.tick("steady, big audit", clock + INTERVAL_MS)
                ticks.append(t)
                print(line(t), flush=True)
        print("\n  what the ticks decided, and where the round trips went:")
        for t in ticks:
            print(details(t))
        if last is not None:
            last.c.redis.flushdb()
    worst = max(ticks, key=lambda t: t.seconds)
    print(
        f"\n  slowest tick: {worst.seconds:.2f} s ({worst.label}, N={worst.n}) = "
        f"{worst.seconds / interval_s:.4f} of the {interval_s:g} s interval"
    )
    if args.json:
        args.json.write_text(json.dumps([t.row() for t in ticks], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
