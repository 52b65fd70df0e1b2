"""`decide_engagement` decisions per second and latency percentiles on a 1,000-member directory.

    uv run python -m bench.decision [--members 1000] [--channels 50] [--decisions 20000]

The context holds what the engagement stage (workers/stages/engagement.py) puts in its
`EngagementContext`: the org's `Member`/`Channel` contracts, the seat's supervisor, `Limits`,
and the work as a validated `WorkReport`. Two runs, reported separately:

  prepared  `Directory.of(members)` built once (what the workers do: `OrgView.directory`)
  plain     the plain member list, so every call indexes the whole directory again

Every call is timed alone with `time.perf_counter_ns` after a warm-up, with the garbage
collector on (the benchmark's own pre-built reports are `gc.freeze()`d so a full collection
does not walk them; collections caused by the decisions' own garbage are measured). The mix
of reports hits every path of the decision (see `Mix.generator`); a share of the scopes carry
a token seen nowhere before, so the directory's per-token memo both hits and misses, and the
misses are reported separately.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.synthetic_org import EXPERTISE_SCOPES, NOBODY_WORDS, OWNED, SyntheticOrg, build_org
from contracts import LedgerRow, Limits, Target, WorkReport
from pipeline import engagement
from pipeline.engagement import Directory, Rooms, decide_engagement
from pipeline.guardrails import dedupe_key_for

NOW_MS = 1_760_000_000_000
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class Case:
    category: str
    me: str
    work: WorkReport
    ledger: tuple[LedgerRow, ...] = ()


def _extras(rng: random.Random, work: dict[str, Any]) -> dict[str, Any]:
    """Optional parts of a report: summary, tried, question/options, link, FYI parties."""
    if rng.random() < 0.7:
        work["summary"] = "Migrating the nightly export; the last step needs someone else."
    if rng.random() < 0.5:
        n = rng.randint(1, 7)
        work["tried"] = [f"attempt {k}: retried with a smaller batch" for k in range(n)]
    if rng.random() < 0.5:
        work["question"] = "Which option should I take?"
        work["options"] = ["roll forward", "roll back", "wait for the window"][: rng.randint(1, 3)]
    if rng.random() < 0.5:
        work["link"] = f"https://tracker.example.com/T-{rng.randrange(100000)}"
    if rng.random() < 0.2:
        work["interestedParties"] = [f"m{rng.randrange(900):04d}" for _ in range(rng.randint(1, 3))]
    return work


class Mix:
    """Generates the benchmark's reports, one category at a time (deterministic per seed)."""

    def __init__(self, so: SyntheticOrg, seed: int) -> None:
        self.so = so
        self.rng = random.Random(seed)
        self.serial = 0
        channels = so.org.channels
        self.small_rooms = [c for c in channels if len(c.member_ids) <= 16]
        engageable = set(so.engageable)
        self.engageable_in = {c.id: [m for m in c.member_ids if m in engageable] for c in channels}
        # (seat, small room holding it and at least 1 or 2 engageable people)
        self.seat_rooms_1 = [
            (s, c)
            for c in self.small_rooms
            for s in c.member_ids
            if s in so.seats and self.engageable_in[c.id]
        ]
        self.seat_rooms_2 = [
            (s, c) for s, c in self.seat_rooms_1 if len(self.engageable_in[c.id]) >= 2
        ]
        self.member_rooms: dict[str, set[str]] = {}
        for c in channels:
            for m in c.member_ids:
                self.member_rooms.setdefault(m, set()).add(c.id)

    # -------------------------------------------------------------- helpers
    def _id(self, cat: str) -> str:
        self.serial += 1
        return f"w-{cat}-{self.serial}"

    def _seat(self) -> str:
        return self.rng.choice(self.so.seats)

    def _person(self) -> str:
        return self.rng.choice(self.so.engageable)

    def _blocked(
        self, cat: str, owner: str | None, scope: str, kind: str = "decision"
    ) -> dict[str, Any]:
        blocker: dict[str, Any] = {"kind": kind, "scope": scope, "detail": "needs a call"}
        if owner:
            blocker["ownerId"] = owner
        return {
            "id": self._id(cat),
            "title": f"Ship {scope}",
            "state": "blocked",
            "blocker": blocker,
            "selfServeExhausted": True,
        }

    def _case(
        self,
        cat: str,
        work: dict[str, Any],
        me: str | None = None,
        ledger: tuple[LedgerRow, ...] = (),
    ) -> Case:
        report = WorkReport.model_validate(_extras(self.rng, work))
        return Case(cat, me or self._seat(), report, ledger)

    # -------------------------------------------------------------- categories
    def explicit_owner(self) -> Case:
        return self._case(
            "explicit_owner", self._blocked("eo", self._person(), self.rng.choice(OWNED))
        )

    def explicit_reviewer(self) -> Case:
        w = {
            "id": self._id("rv"),
            "title": "Release 4.2",
            "state": "in_progress",
            "review": {"required": True, "kind": "security", "reviewerId": self._person()},
        }
        return self._case("explicit_reviewer", w)

    def commitment_at_risk(self) -> Case:
        w = {
            "id": self._id("cm"),
            "title": "Quarterly numbers",
            "state": "in_progress",
            "commitment": {"toMemberId": self._person(), "atRisk": True},
        }
        return self._case("commitment_at_risk", w)

    def risk_approver(self) -> Case:
        w = {
            "id": self._id("rk"),
            "title": "Drop the legacy table",
            "state": "in_progress",
            "risk": {"irreversible": True, "external": self.rng.random() < 0.5},
            "approverId": self._person(),
            "scope": self.rng.choice(OWNED),
        }
        return self._case("risk_approver", w)

    def ownership_rung(self) -> Case:
        scope = f"{self.rng.choice(OWNED)} {self.rng.choice(['rollout', 'cutover', 'quota'])}"
        return self._case("ownership_rung", self._blocked("ow", None, scope, kind="approval"))

    def escalation_path(self) -> Case:
        scope = self.rng.choice(["security incidents", "payroll questions", "gdpr requests"])
        return self._case("escalation_path", self._blocked("ep", None, scope, kind="access"))

    def expertise_rung(self) -> Case:
        scope = self.rng.choice(EXPERTISE_SCOPES)
        return self._case("expertise_rung", self._blocked("ex", None, scope, kind="information"))

    def supervisory(self) -> Case:
        return self._case("supervisory", self._blocked("sv", None, self.rng.choice(NOBODY_WORDS)))

    def archived_owner(self) -> Case:
        # The named owner is archived: skipped, then the ladder carries on down.
        w = self._blocked("ar", self.rng.choice(self.so.archived), self.rng.choice(NOBODY_WORDS))
        return self._case("archived_owner", w)

    def unroutable(self) -> Case:
        w = self._blocked("un", None, self.rng.choice(NOBODY_WORDS))
        return self._case("unroutable", w, me=self.so.orphan_seat)

    def self_contained(self) -> Case:
        w = {"id": self._id("sc"), "title": "Refactor the exporter", "state": "in_progress"}
        return self._case("self_contained", w)

    def suppressed(self) -> Case:
        pick = self.rng.randrange(5)
        wid = self._id("su")
        w: dict[str, Any]
        if pick == 0:
            w = {
                "id": wid,
                "title": "Batch job",
                "state": "blocked",
                "blocker": {"kind": "capacity", "scope": "batch"},
            }
        elif pick == 1:
            w = self._blocked("su", self._person(), "billing api")
            w["selfServeExhausted"] = False
        elif pick == 2:
            w = {
                "id": wid,
                "title": "Purged backups",
                "state": "done",
                "risk": {"irreversible": True},
            }
        elif pick == 3:
            w = {"id": wid, "title": "Docs", "review": {"requested": True}}
        else:
            w = {"id": wid, "title": "Report", "commitment": {"toMemberId": self._person()}}
        return self._case("suppressed", w)

    def reply_in_place(self) -> Case:
        me, room = self.rng.choice(self.seat_rooms_1)
        owner = self.rng.choice(self.engageable_in[room.id])
        w = self._blocked("rp", owner, self.rng.choice(OWNED))
        w["origin"] = {"channelId": room.id, "threadRootId": f"t-{self.serial}"}
        return self._case("reply_in_place", w, me=me)

    def existing_channel(self) -> Case:
        me, room = self.rng.choice(self.seat_rooms_2)
        a, b = self.rng.sample(self.engageable_in[room.id], 2)
        w = self._blocked("xc", a, self.rng.choice(OWNED))
        w["review"] = {"required": True, "reviewerId": b}
        return self._case("existing_channel", w, me=me)

    def new_room(self) -> Case:
        while True:
            a, b = self._person(), self._person()
            if a != b and not (self.member_rooms.get(a, set()) & self.member_rooms.get(b, set())):
                break
        w = self._blocked("nr", a, self.rng.choice(OWNED))
        w["review"] = {"required": True, "reviewerId": b}
        w["durable"] = self.rng.random() < 0.5
        return self._case("new_room", w)

    def memo_miss(self) -> Case:
        # A token no report used before: the owner and path memos miss and scan the directory.
        scope = f"{self.rng.choice(OWNED)} ticket{self.serial}x{self.rng.randrange(10**6)}"
        return self._case("memo_miss", self._blocked("mm", None, scope, kind="approval"))

    def guardrail_refused(self) -> Case:
        # A second decision on work already asked about, judged against the ledger rows in the
        # context: this ask went out 1 h ago (already_engaged), among unrelated rows of the
        # same seat and targets.
        me, owner = self._seat(), self._person()
        w = self._blocked("gr", owner, self.rng.choice(OWNED))
        key = dedupe_key_for(w["id"], "blocked:decision", [owner])
        rows = [
            LedgerRow(
                at_ms=NOW_MS - HOUR_MS,
                seat_id=me,
                work_id=w["id"],
                dedupe_key=key,
                outcome="engaged",
                engaged=True,
                targets=(Target(member_id=owner),),
            )
        ]
        for k in range(self.rng.randint(2, 20)):
            rows.append(
                LedgerRow(
                    at_ms=NOW_MS - k * 60_000,
                    seat_id=me,
                    work_id=f"other-{k}",
                    dedupe_key=f"k{k}",
                    outcome="engaged",
                    engaged=True,
                    targets=(Target(member_id=owner),),
                )
            )
        return self._case("guardrail_refused", w, me=me, ledger=tuple(rows))

    def generator(self) -> Callable[[], Case]:
        weighted: list[tuple[Callable[[], Case], int]] = [
            (self.explicit_owner, 10),
            (self.explicit_reviewer, 6),
            (self.commitment_at_risk, 5),
            (self.risk_approver, 5),
            (self.ownership_rung, 10),
            (self.escalation_path, 4),
            (self.expertise_rung, 8),
            (self.supervisory, 6),
            (self.archived_owner, 3),
            (self.unroutable, 3),
            (self.self_contained, 8),
            (self.suppressed, 8),
            (self.reply_in_place, 6),
            (self.existing_channel, 5),
            (self.new_room, 5),
            (self.memo_miss, 8),
            (self.guardrail_refused, 4),
        ]
        funcs = [f for f, _ in weighted]
        weights = [w for _, w in weighted]
        return lambda: self.rng.choices(funcs, weights)[0]()


_ROOMS: dict[int, Rooms] = {}


def _rooms_of(so: SyntheticOrg) -> Rooms:
    rooms = _ROOMS.get(id(so))
    if rooms is None:  # built once per org (a `setdefault` would build it on every call)
        rooms = _ROOMS[id(so)] = Rooms.of(so.org.channels)
    return rooms


def _ctx(so: SyntheticOrg, directory: Any, case: Case, limits: Limits) -> dict[str, Any]:
    """What the engagement stage passes (the seat's supervisor comes from its org entry).

    Prepared run: the directory and the rooms indexed once, as `OrgView` holds them. Plain run:
    the member and channel lists as they come, indexed again on every call.
    """
    prepared = isinstance(directory, Directory)
    ctx: dict[str, Any] = {
        "me": case.me,
        "directory": directory,
        "channels": _rooms_of(so) if prepared else so.org.channels,
        "supervisorId": None,  # the seats' supervisors are on their member entries
        "nowMs": NOW_MS,
        "degraded": [],
        "limits": limits,
    }
    if case.ledger:
        ctx["ledger"] = list(case.ledger)
    return ctx


def outcome_of(decision: Any) -> str:
    rung = decision.targets[0].rung if decision.targets else "-"
    return (
        f"{decision.reason_code.split(':')[0] if decision.reason_code else '-'}"
        f" / {rung} / {decision.surface}"
    )


def pct(sorted_ns: list[int], q: float) -> float:
    """The q-quantile (nearest rank) in microseconds."""
    if not sorted_ns:
        return float("nan")
    k = min(len(sorted_ns) - 1, max(0, round(q * len(sorted_ns) + 0.5) - 1))
    return sorted_ns[k] / 1000


def run(
    so: SyntheticOrg, cases: list[Case], directory: Any, warmup: int, memo: Directory | None
) -> dict[str, Any]:
    limits = Limits()
    ctxs = [_ctx(so, directory, c, limits) for c in cases]
    # The ~20k pre-built reports are the benchmark's, not a worker's: keep the collector from
    # walking them on every full collection (GC caused by the decisions themselves still counts).
    gc.collect()
    gc.freeze()
    for i in range(warmup):
        decide_engagement(cases[i].work, ctxs[i])
    lat: list[int] = []
    by_cat: dict[str, list[int]] = {}
    miss_lat: list[int] = []
    outcomes: Counter[str] = Counter()
    perf = time.perf_counter_ns
    wall0 = perf()
    for i in range(warmup, len(cases)):
        case, ctx = cases[i], ctxs[i]
        before = len(memo._owns_memo) if memo is not None else 0
        t0 = perf()
        decision = decide_engagement(case.work, ctx)
        dt = perf() - t0
        lat.append(dt)
        by_cat.setdefault(case.category, []).append(dt)
        if memo is not None and len(memo._owns_memo) != before:
            miss_lat.append(dt)
        outcomes[outcome_of(decision)] += 1
    wall = perf() - wall0
    gc.unfreeze()
    lat_sorted = sorted(lat)
    return {
        "decisions": len(lat),
        "per_s_decide": len(lat) / (sum(lat) / 1e9),
        "per_s_wall": len(lat) / (wall / 1e9),
        "p50_us": pct(lat_sorted, 0.50),
        "p90_us": pct(lat_sorted, 0.90),
        "p99_us": pct(lat_sorted, 0.99),
        "p999_us": pct(lat_sorted, 0.999),
        "max_us": lat_sorted[-1] / 1000,
        "mean_us": statistics.fmean(lat) / 1000,
        "by_category": {
            cat: {
                "n": len(v),
                "p50_us": pct(sorted(v), 0.5),
                "p99_us": pct(sorted(v), 0.99),
                "max_us": max(v) / 1000,
            }
            for cat, v in sorted(by_cat.items())
        },
        "memo_misses": {
            "n": len(miss_lat),
            "p50_us": pct(sorted(miss_lat), 0.5),
            "p99_us": pct(sorted(miss_lat), 0.99),
        }
        if memo is not None
        else None,
        "outcomes": dict(outcomes.most_common()),
    }


def show(name: str, r: dict[str, Any]) -> None:
    print(f"\n== {name}: {r['decisions']} decisions")
    print(
        f"  decisions/s: {r['per_s_decide']:,.0f} (sum of per-call times), "
        f"{r['per_s_wall']:,.0f} (loop wall clock)"
    )
    print(
        f"  latency us: p50 {r['p50_us']:.1f}  p90 {r['p90_us']:.1f}  p99 {r['p99_us']:.1f}  "
        f"p99.9 {r['p999_us']:.1f}  max {r['max_us']:.1f}  mean {r['mean_us']:.1f}"
    )
    if r["memo_misses"]:
        m = r["memo_misses"]
        print(
            f"  memo misses: {m['n']} calls, p50 {m['p50_us']:.1f} us, p99 {m['p99_us']:.1f} us"
            f" (the rest hit the per-token memo)"
        )
    print(f"  {'category':<20}{'n':>7}{'p50 us':>10}{'p99 us':>10}{'max us':>10}")
    for cat, v in r["by_category"].items():
        print(f"  {cat:<20}{v['n']:>7}{v['p50_us']:>10.1f}{v['p99_us']:>10.1f}{v['max_us']:>10.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--channels", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--decisions", type=int, default=20000, help="timed, prepared directory")
    ap.add_argument("--warmup", type=int, default=3000)
    ap.add_argument("--plain-decisions", type=int, default=600, help="timed, plain list")
    ap.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = ap.parse_args(argv)

    so = build_org(args.members, args.channels, args.seed)
    mix = Mix(so, args.seed)
    gen = mix.generator()
    cases = [gen() for _ in range(args.warmup + args.decisions)]
    print(
        f"bench.decision  python {platform.python_version()}  {platform.machine()}  "
        f"seed {args.seed}: {len(so.org.members)} members, {len(so.org.channels)} channels, "
        f"{len(so.seats) + 1} seats"
    )

    prepared = Directory.of(so.org.members)
    res_prepared = run(so, cases, prepared, args.warmup, memo=prepared)
    show("prepared Directory.of(members)", res_prepared)
    print("  outcomes (reason code / first target's rung / surface):")
    for k, n in res_prepared["outcomes"].items():
        print(f"    {n:>6}  {k}")

    plain_n = min(args.plain_decisions, args.decisions)
    plain_cases = cases[: min(200, args.warmup)] + cases[args.warmup : args.warmup + plain_n]
    res_plain = run(so, plain_cases, list(so.org.members), min(200, args.warmup), memo=None)
    show("plain member list (indexed on every call)", res_plain)

    rooms = getattr(engagement, "_rooms", None)  # private; absent if the module changes
    if rooms is not None:
        ns = []
        for _ in range(2000):
            t0 = time.perf_counter_ns()
            rooms(so.org.channels)
            ns.append(time.perf_counter_ns() - t0)
        ns.sort()
        held = sum(len(c.member_ids) for c in so.org.channels)
        print(
            f"\nbreakdown: re-reading the {len(so.org.channels)} channels ({held} memberships) "
            f"that choose_surface does on every call (pipeline.engagement._rooms): "
            f"p50 {pct(ns, 0.5):.1f} us, p99 {pct(ns, 0.99):.1f} us"
        )

    ok = res_prepared["p99_us"] < 1000
    print(
        f"\ntarget p99 < 1 ms with the prepared directory: "
        f"{'MET' if ok else 'NOT MET'} (p99 {res_prepared['p99_us']:.1f} us)"
    )
    if args.json:
        print(json.dumps({"prepared": res_prepared, "plain": res_plain}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
