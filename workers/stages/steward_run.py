"""One goal-steward run (issue 10 points 2 and 3): the shell around `plan_run`. Not pure.

For each objective of the org view (or the one asked for), under a per-objective lease in
Redis: load its samples, the steward seat's open backlog items for it, its spend over the
budget window and, with `SEATWIRE_PROPOSER_URL` set, the proposer's candidates (its failures
are audited and the playbook, which the planner draws itself, is still used), call
`plan_run`, write the audit, then carry out each dispatch:

- backlog routes (SELF, COLLABORATE, NEEDS_REVIEW, drift) -> `Backlog.add` under the dispatch
  id, on the steward seat's backlog (idempotent by id); COLLABORATE also takes the item's
  exclusive claim for the steward seat (`Claims.take`: `renewed` on a rerun, `held` if a
  collaborator took it over meanwhile) in the one claim system (workers/stores/claims.py):
  on the repository issue the candidate names (`issueNumber`), so the steward seat is that
  issue's owner in get_issue_coordination (or `held` when a seat already claimed the issue
  there), else on the item itself;
- an operator's override that let a candidate through is used up by its dispatch
  (`Overrides.consume`, after the dispatch: a rerun finds it unused and plans the same);
- engagement routes (HANDOFF, escalate) -> a blocked work report of the steward seat whose
  blocker names the target as its owner, journalled and enqueued to the engagement stage as
  the ingress does (work id = dispatch id, revision 1: a repeat is a journal `duplicate`).

The audit is written first (write-ahead), and with it the run's dispatches as pending; each
is taken off once done. A run that dies in its dispatches leaves the rest pending, and the
next run of the objective does them (each at most once by its id) before it plans again,
so nothing admitted is lost and nothing is done twice. A done dispatch's id is remembered
(`StewardAudit.dispatched`) and handed to the planner: work closed since, or a handoff the
journal has long forgotten, is not planned again on the same sample. An objective whose run
fails (a Redis error, a bug) is `Skipped` with the error, and the tick goes on.

The run id is per (objective, sample decided on, what was decided): a later run on the same
sample that decides something new (an escalation once its own item is in flight) is a new
run id and is audited; one that decides the same is not written again.

The stage module of the steward's beat row: beat schedules `seatwire.steward.tick` on the
`steward` queue every `SEATWIRE_STEWARD_INTERVAL_S`, and a steward worker runs one run over
every objective. Two beats (two ticks) or several workers at once are safe: an objective
held by another run is skipped (`Skipped`), and what was planned is done at most once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import redis
from celery import Celery
from redis.client import Pipeline

from contracts import WorkReport
from contracts.backlog import BacklogEntry, BacklogRoute
from contracts.goals import Objective, Sample
from contracts.steward import Dispatch, ObjectiveOutcome, ObjectiveProposals, RunPlan, RunTotals
from contracts.work import BlockerKind
from pipeline.goals.kpi import gap_for
from pipeline.goals.steward import plan_run, possible_dispatch_ids
from pipeline.money import budget_window
from workers import clock
from workers.container import Container
from workers.org import OrgSource
from workers.outbound.proposer import CandidateProposer, Proposer
from workers.queues import Task
from workers.recovery.faults import crash_point
from workers.settings import Settings
from workers.stages.base import Deps, StageTask, register_beat
from workers.stages.report_intake import intake_report
from workers.stores import keys
from workers.stores.audit import StewardAudit
from workers.stores.backlog import Backlog
from workers.stores.claims import Claims
from workers.stores.costs import Costs
from workers.stores.journal import Journal
from workers.stores.overrides import Overrides
from workers.stores.samples import Samples
from workers.stores.scripts import text
from workers.telemetry import telemetry

TASK = Task.STEWARD  # this module's row of the stage table
# A work report's bounds (contracts/work.py), which an engagement dispatch is clipped to.
TITLE_MAX, SUMMARY_MAX, SCOPE_MAX, DETAIL_MAX = 500, 8000, 500, 2000

log = logging.getLogger("seatwire.steward")

LEASE_MS = 60_000
# What the blocker of an engagement dispatch is, by route: the owner's decision, or the
# handoff target's part of the work (what the seat cannot get on its own).
BLOCKER_KIND: dict[str, BlockerKind] = {"escalate": "decision", "HANDOFF": "information"}


def run_id_for(outcome: ObjectiveOutcome) -> str:
    """The id a run's audit is recorded under: the objective, the sample decided on, and what
    was decided (the gap action, and per audit line its kind, candidate, gate and dispatch).
    A run repeated after a crash decides the same and records nothing twice; a later run on
    the same sample that decides otherwise (work now in flight: `escalate`) is audited too."""
    ref = outcome.latest_sample
    decided = [
        [e.kind, e.action, e.candidate_key, e.admitted, e.gate, e.dispatch_id]
        for e in outcome.audit
    ]
    material = json.dumps(
        [outcome.objective_key, f"{ref.at_ms}:{ref.source}" if ref else None, decided],
        sort_keys=True,
    )
    return "stwrun_" + hashlib.sha256(material.encode()).hexdigest()[:24]


_PROPOSERS: dict[tuple[int, str | None, float], Proposer | None] = {}


def proposer_for(settings: Settings) -> Proposer | None:
    """This process's proposer client for the configured endpoint (None without one): one
    per process and endpoint, kept across ticks rather than opened anew (and never closed)
    each tick. Keyed by pid too: a forked pool process builds its own."""
    key = (os.getpid(), settings.proposer_url, settings.proposer_timeout_s)
    if key not in _PROPOSERS:
        _PROPOSERS[key] = Proposer.from_settings(settings)
    return _PROPOSERS[key]


def clipped(text: str, limit: int) -> str:
    """`text` within `limit` characters, an ellipsis marking what was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def work_report_of(dispatch: Dispatch) -> WorkReport:
    """An engagement dispatch as the steward seat's blocked work, naming the target. A work
    report bounds its fields (a title of 500 characters, say) where a candidate's title or an
    objective key has no bound, so they are clipped to fit: a long title never makes the
    dispatch impossible."""
    return WorkReport.model_validate(
        {
            "id": dispatch.id,
            "revision": 1,
            "title": clipped(dispatch.title, TITLE_MAX),
            "summary": clipped(dispatch.reason, SUMMARY_MAX),
            "scope": clipped(dispatch.objective_key, SCOPE_MAX),
            "state": "blocked",
            "selfServeExhausted": True,
            "blocker": {
                "kind": BLOCKER_KIND[dispatch.route],
                "ownerId": dispatch.target_id,
                "scope": clipped(dispatch.title, SCOPE_MAX),
                "detail": clipped(dispatch.reason, DETAIL_MAX),
            },
        }
    )


@dataclass(frozen=True)
class Skipped:
    """An objective this run did not plan, and why (its lease is held, it is unknown)."""

    objective_key: str
    reason: str


@dataclass(frozen=True)
class StewardResult:
    """A run: the plan of the objectives it ran, those it skipped, what each dispatch did
    (`added`/`duplicate` on the backlog; `new`/`requeued`/`duplicate`/`conflict` in the
    journal) and how many audit lines it wrote (0 for a repeat)."""

    plan: RunPlan
    skipped: tuple[Skipped, ...] = ()
    dispatched: Mapping[str, str] = field(default_factory=dict)
    audited: int = 0
    pending: tuple[Dispatch, ...] = ()  # a preview's: what a real run would finish first


@dataclass
class StewardRun:
    client: redis.Redis
    org: OrgSource
    samples: Samples
    backlog: Backlog
    costs: Costs
    audit: StewardAudit
    journal: Journal
    overrides: Overrides
    claims: Claims
    app: Celery
    claim_lease_ms: int = 86_400_000
    proposer: CandidateProposer | None = None
    lease_ms: int = LEASE_MS
    new_token: Callable[[], str] = lambda: secrets.token_hex(8)

    @classmethod
    def of(cls, c: Container, app: Celery | None = None) -> StewardRun:
        celery = app if app is not None else c.app
        if celery is None:
            raise ValueError("a steward run enqueues engagements: it needs a Celery app")
        return cls(
            client=c.redis,
            org=c.org,
            samples=c.samples,
            backlog=c.backlog,
            costs=c.costs,
            audit=c.audit,
            journal=c.journal,
            overrides=c.overrides,
            claims=c.claims,
            app=celery,
            claim_lease_ms=c.settings.claim_lease_ms,
            proposer=proposer_for(c.settings),
            lease_ms=c.settings.steward_lease_ms,
        )

    def __call__(self, objective_key: str | None = None, *, now_ms: int) -> StewardResult:
        """Run every objective (or the one named) once, each under its lease."""
        objectives, skipped = self._objectives(objective_key)
        outcomes: list[ObjectiveOutcome] = []
        dispatched: dict[str, str] = {}
        audited = 0
        for obj in objectives:
            token = self._take(obj.key)
            if token is None:
                skipped.append(Skipped(obj.key, "another steward run holds its lease"))
                continue
            try:
                outcome, written = self._run_one(obj, token, now_ms, dispatched)
            except Exception as exc:
                # Written down, never silent; the objective's next run finishes what its
                # audit left pending. The other objectives of this tick still run.
                log.exception("steward run of %s failed", obj.key)
                skipped.append(Skipped(obj.key, f"its run failed: {type(exc).__name__}: {exc}"))
                continue
            finally:
                self._release(obj.key, token)
            outcomes.append(outcome)
            audited += written
        plan = RunPlan(now_ms=now_ms, outcomes=tuple(outcomes), totals=RunTotals.of(outcomes))
        return StewardResult(plan, tuple(skipped), dispatched, audited)

    def _run_one(
        self, obj: Objective, token: str, now_ms: int, dispatched: dict[str, str]
    ) -> tuple[ObjectiveOutcome, int]:
        """One objective under its lease: what a run that died part-way planned and did not
        do first (the plan is written ahead, so nothing it admitted is lost), then its plan,
        audit and dispatches."""
        started = time.monotonic()
        for d in self.audit.pending(obj.key):
            dispatched[d.id] = self._carry_out(d, now_ms)
        outcome, written = self._plan_and_audit(obj, now_ms)
        crash_point("steward", "after_audit", obj.key)
        if outcome.dispatches and time.monotonic() - started > self.lease_ms / 3000:
            self._renew(obj.key, token)  # a slow proposer: keep the lease for the dispatches
        for d in outcome.dispatches:
            dispatched[d.id] = self._carry_out(d, now_ms)
            crash_point("steward", "after_dispatch", f"{obj.key}:{d.id}")
        return outcome, written

    def preview(self, objective_key: str | None = None, *, now_ms: int) -> StewardResult:
        """What a run would decide now, planned from the same inputs, and nothing written: no
        lease, no audit, no dispatch (`seatwire steward run --dry-run`). The dispatches a run
        that died part-way left pending are listed (`pending`): a real run does them first,
        and then plans with them done, which this preview cannot show without doing them."""
        objectives, skipped = self._objectives(objective_key)
        outcomes = [self._plan(obj, now_ms) for obj in objectives]
        pending = tuple(d for obj in objectives for d in self.audit.pending(obj.key))
        plan = RunPlan(now_ms=now_ms, outcomes=tuple(outcomes), totals=RunTotals.of(outcomes))
        return StewardResult(plan, tuple(skipped), pending=pending)

    def _objectives(self, objective_key: str | None) -> tuple[list[Objective], list[Skipped]]:
        view, _degraded = self.org.current()
        if objective_key is None:
            return list(view.objectives), []
        found = view.objective(objective_key)
        if found is None:
            return [], [Skipped(objective_key, "no such objective in the org file")]
        return [found], []

    # ------------------------------------------------------------------ one objective

    def _plan(self, obj: Objective, now_ms: int) -> ObjectiveOutcome:
        """Load the objective's inputs (samples over the trend's lookback, the steward seat's
        open items for it, spend over its budget window, a proposer's candidates) and plan it."""
        samples: list[Sample] = self.samples.for_objective(obj)
        seat = obj.steward_seat
        entries = self.backlog.open_items(seat, obj.key) if seat else []
        items = [e.as_item() for e in entries]
        since, until = budget_window(obj.cadence, now_ms)
        spend = {obj.key: self.costs.spend(obj.key, since_ms=since, until_ms=until)}
        proposals: dict[str, ObjectiveProposals] = {}
        if self.proposer is not None and obj.is_active and seat:
            gap = gap_for(obj, samples, now_ms)
            proposals[obj.key] = self.proposer.propose(obj, gap, now_ms=now_ms)
        overrides = self.overrides.active(obj.key)
        possible = possible_dispatch_ids(obj, samples, proposals.get(obj.key))
        done = self.audit.dispatched(obj.key, possible)
        plan = plan_run(
            [obj],
            {obj.key: samples},
            items,
            spend,
            now_ms,
            proposals,
            overrides=overrides,
            dispatched=done,
        )
        return plan.outcomes[0]

    def _plan_and_audit(self, obj: Objective, now_ms: int) -> tuple[ObjectiveOutcome, int]:
        """Plan the objective and write its audit and its dispatches (as pending) once per
        run id, ahead of any dispatch."""
        outcome = self._plan(obj, now_ms)
        written = self.audit.record(
            run_id_for(outcome), outcome.audit, now_ms=now_ms, pending=outcome.dispatches
        )
        return outcome, written

    def _carry_out(self, d: Dispatch, now_ms: int) -> str:
        """Do one dispatch (at most once by its id), use up the override that let it through,
        and take it off the pending ones."""
        status = self._dispatch(d, now_ms)
        if d.override is not None:
            self.overrides.consume(d.objective_key, d.override.candidate_key, d.id, now_ms=now_ms)
        self.audit.done(d, now_ms=now_ms)
        return status

    def _dispatch(self, d: Dispatch, now_ms: int) -> str:
        if d.kind == "engagement":
            return self._engage(d, now_ms)
        route: BacklogRoute = d.route  # type: ignore[assignment]  # a backlog kind's route
        entry = BacklogEntry(
            id=d.id,
            seat_id=d.seat_id,
            objective_key=d.objective_key,
            title=d.title,
            route=route,
            added_at_ms=now_ms,
            review=d.review,
            claim=d.claim,
            candidate=d.candidate,
            for_member_id=d.target_id,
        )
        added = self.backlog.add(entry).status
        if d.claim is None:
            return added
        # COLLABORATE: the steward seat's exclusive claim, taken once the item is open. On a
        # rerun it is `renewed`, or `held` when a collaborator has taken it over meanwhile.
        claimed = self.claims.take(
            d.id,
            d.claim.holder_id,
            owner_id=d.seat_id,
            now_ms=now_ms,
            lease_ms=self.claim_lease_ms,
            issue_number=d.claim.issue_number,
        )
        return f"{added}, claim {claimed.status}"

    def _engage(self, d: Dispatch, now_ms: int) -> str:
        """The HANDOFF's work report into the pipeline, as the ingress takes a seat's."""
        report = work_report_of(d)
        return intake_report(self.journal, self.app, d.seat_id, report, now_ms=now_ms).status

    # ------------------------------------------------------------------ the lease

    def _take(self, objective_key: str) -> str | None:
        """This run's token on the objective's lease, or None when another run holds it."""
        token = self.new_token()
        taken = self.client.set(keys.steward_lease(objective_key), token, nx=True, px=self.lease_ms)
        return token if taken else None

    def _renew(self, objective_key: str, token: str) -> None:
        """Extend the lease while it is still ours; one that lapsed and was taken over is
        left alone (the dispatch ids keep the work single)."""
        self._while_ours(objective_key, token, lambda pipe, key: pipe.pexpire(key, self.lease_ms))

    def _release(self, objective_key: str, token: str) -> None:
        """Delete the lease only while it is still ours. A lease that lapsed and was taken
        over is left to its new holder; if Redis fails here the lease simply expires."""
        self._while_ours(objective_key, token, lambda pipe, key: pipe.delete(key))

    def _while_ours(
        self, objective_key: str, token: str, change: Callable[[Pipeline, str], object]
    ) -> None:
        """`change` the lease in one MULTI if it still holds `token` (compare-and-set under
        WATCH; no Lua, which lives in the scripts registry only); else, or if it changed hands
        meanwhile (WatchError) or Redis failed, nothing."""
        key = keys.steward_lease(objective_key)
        with self.client.pipeline() as pipe:
            try:
                pipe.watch(key)  # type: ignore[no-untyped-call]
                held = pipe.get(key)
                if held is None or text(held) != token:
                    return
                pipe.multi()
                change(pipe, key)
                pipe.execute()
            except redis.RedisError:
                return


def counted(result: StewardResult) -> None:
    """A run in the metrics: each candidate by its gate (as `RunTotals` counts it: one not
    judged, its objective not run, is rejected), each dispatch done by its route."""
    metrics = telemetry()
    for outcome in result.plan.outcomes:
        for e in outcome.audit:
            if e.kind == "candidate":
                gate = None if e.admitted else e.gate or "not_judged"
                metrics.judged(admitted=bool(e.admitted), gate=gate)
        for d in outcome.dispatches:
            if d.id in result.dispatched:
                metrics.dispatched(d.route)


def register(app: Celery, deps: Deps) -> None:
    def tick(task: StageTask, fence: int | None) -> None:
        # A deposed leader's tick never gets here (register_beat refuses it); the run's own
        # writes are not fenced further: each objective's run lease and the dispatch ids keep
        # two runs at once safe, as above.
        result = StewardRun.of(task.deps(), app)(now_ms=clock.now_ms())
        counted(result)
        totals = result.plan.totals
        log.info(
            "steward tick: %d objectives run, %d skipped, %d admitted, %d rejected, "
            "%d dispatches, %d audit lines",
            totals.run,
            len(result.skipped),
            totals.admitted,
            totals.rejected,
            totals.dispatches,
            result.audited,
        )

    register_beat(app, TASK, deps, tick)
