"""One goal-steward run, planned: `plan_run`. Pure: no I/O, no clock, no randomness.

The shell loads objectives, samples, open backlog, spend and candidates, calls `plan_run`,
then acts on the plan and writes its audit. Per objective, in input order:

- Not `active`, or no steward seat (`seatId`, else `adoptedBy`): not run; the outcome says
  why and each of its candidates is audited as not judged. Nothing is dropped silently.
- Else `gap_for`, then `decide_for_gap` with the open items as coverage (a drift item, which
  asks for the sensor back, is no work on the number and not counted): `escalate` is an
  engagement asking the owner; `drift` one "restore the measurement" backlog item for the
  owner, unless one is already open for the objective, whether it was opened for no
  measurement or for a stale one (one restore item per objective while it is open). Each
  candidate goes through `admit` in order, carrying `admittedItems` / `admittedThisRun`
  forward (caps are per objective per run); the admitted are classified: SELF -> backlog,
  COLLABORATE -> backlog + claim, HANDOFF -> engagement naming the target, NEEDS_REVIEW ->
  backlog + review requirement.

Overrides: an operator's active `Override` (usedBy None) of (objective key, candidate key) is
taken by the FIRST candidate of the run with that key, which is admitted with its gates
overridden (`admit(..., overridden=...)`: wip, trend, budget, never the others). If admitted
and dispatched, its audit line carries the override (who, why, the gates it pushed past)
and its dispatch an `OverrideRef` the shell consumes once it is done, so an override is used
once. Refused anyway (say by honesty), or admitted without a dispatch, the override is left
active and the audit line's note says why. It counts toward `admittedThisRun` like any
admission; an override for an objective not in the run, or already used, is ignored.

Already done: `dispatched` names the dispatch ids the shell has carried out (it asks which
of `possible_dispatch_ids` are); a candidate or gap dispatch under one of them is audited as
already dispatched and not judged again, so closed work neither returns nor holds a place
under the per-run cap, and no override is used on it.

Candidates: the objective's `playbook`, then its proposals; playbook-tagged proposals stand
for the playbook (a shell expanding templates itself). A proposer failure is audited and the
playbook still used. The freshness gate reads `RunPolicy.mandateStaleness` (the mandate
cache); the gap's own staleness is `drift`. The envelope is `budgetMicros` minus spend; a
cents-only estimate is judged against it in whole cents, rounded down.

A dispatch id is `stw_` + 16 hex of sha256 over the objective key, a subject and the sample
decided on (`atMs`, `source`; none without one). The subject is `candidate:<candidate_key>`
(`#n` for the n-th repeat of a key in the run), or `gap:escalate` / `gap:drift`. So a rerun
after a crash yields the same ids and the shell does each at most once; a new sample is a new
decision. The disposition is not in the id: work reclassified on a rerun is not redone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from contracts.goals import Classification, GapDecision, Gate, Objective, Sample, WorkCandidate
from contracts.steward import (
    AuditEntry,
    BacklogItem,
    Claim,
    Dispatch,
    ObjectiveOutcome,
    ObjectiveProposals,
    Override,
    OverrideNote,
    OverrideRef,
    Proposal,
    ProposerFailure,
    ReviewRequirement,
    RunInputs,
    RunPlan,
    RunPolicy,
    RunTotals,
    SampleRef,
)
from pipeline.goals.admission import (
    MAX_NEW_PER_RUN,
    MAX_OPEN_PER_OBJECTIVE,
    AdmissionContext,
    admit,
    decide_for_gap,
    overridden_gates,
)
from pipeline.goals.classify import ClassifyContext, classify_work_item
from pipeline.goals.dispatch_ids import (
    candidate_dispatch_id,
    candidate_key,
    gap_dispatch_id,
)
from pipeline.goals.kpi import gap_for

MICROS_PER_CENT = 10_000
_NO_PROPOSALS = ObjectiveProposals()

Loose = Mapping[str, object]


@dataclass(frozen=True, slots=True)
class _Run:
    inputs: RunInputs
    max_open: int
    max_new: int
    open_items: Mapping[str, tuple[BacklogItem, ...]]  # the open ones, by objective key
    overrides: Mapping[str, Mapping[str, Override]]  # active: objective key -> candidate key


@dataclass(frozen=True, slots=True)
class _Scope:
    """One active objective being run: its steward seat and the sample it is decided on."""

    obj: Objective
    seat: str
    ref: SampleRef | None
    dispatched: frozenset[str]  # dispatch ids the shell has already carried out


def plan_run(
    objectives: Iterable[Objective | Loose],
    samples: Mapping[str, Iterable[Sample | Loose]],
    open_items: Iterable[BacklogItem | Loose],
    spend: Mapping[str, int | str],
    now_ms: int,
    proposals: Mapping[str, ObjectiveProposals | Loose] | None = None,
    *,
    policy: RunPolicy | Loose | None = None,
    overrides: Iterable[Override | Loose] = (),
    dispatched: Iterable[str] = (),
) -> RunPlan:
    """Plan one steward run over every objective: decisions, audit lines and dispatches.

    `samples`, `spend` and `proposals` are keyed by objective key (missing: none); open items
    and overrides carry their objective key (only active overrides are used, the first one
    of a candidate key if several are given). Inputs are contracts or their camelCase
    mappings, validated as one `RunInputs` (a pydantic `ValidationError`, a `ValueError`,
    names the bad field).
    """
    inputs = RunInputs.model_validate(
        {
            "now_ms": now_ms,
            "objectives": tuple(objectives),
            "samples": samples,
            "open_items": tuple(open_items),
            "spend": spend,
            "proposals": proposals if proposals is not None else {},
            "policy": policy if policy is not None else {},
            "overrides": tuple(overrides),
            "dispatched": tuple(dispatched),
        }
    )
    max_open, max_new = inputs.policy.max_open_per_objective, inputs.policy.max_new_per_run
    open_by_key: dict[str, list[BacklogItem]] = {}
    for item in inputs.open_items:
        if item.state == "open":
            open_by_key.setdefault(item.objective_key, []).append(item)
    active: dict[str, dict[str, Override]] = {}
    for ov in inputs.overrides:
        if ov.active:
            active.setdefault(ov.objective_key, {}).setdefault(ov.candidate_key, ov)
    run = _Run(
        inputs,
        MAX_OPEN_PER_OBJECTIVE if max_open is None else max_open,
        MAX_NEW_PER_RUN if max_new is None else max_new,
        {key: tuple(items) for key, items in open_by_key.items()},
        active,
    )
    outcomes = tuple(_plan_objective(run, obj) for obj in inputs.objectives)
    return RunPlan(now_ms=now_ms, outcomes=outcomes, totals=RunTotals.of(outcomes))


def _plan_objective(run: _Run, obj: Objective) -> ObjectiveOutcome:
    """One objective's outcome: not run (and why), or its gap, decision, audit and dispatches."""
    inputs = run.inputs
    proposals = inputs.proposals.get(obj.key, _NO_PROPOSALS)
    candidates = _candidates(obj, proposals)
    seat, status = _steward(obj)
    failures = tuple(_failed(obj.key, f, seat is not None) for f in proposals.failures)
    if seat is None:
        not_run = AuditEntry(objective_key=obj.key, kind="not_run", reason=status)
        skipped = (_not_judged(obj.key, p, status) for p in candidates)
        return ObjectiveOutcome(
            objective_key=obj.key,
            status="not_run",
            reason=status,
            proposer_failures=proposals.failures,
            audit=(not_run, *failures, *skipped),
        )
    samples = inputs.samples.get(obj.key, ())
    latest = sorted(samples, key=lambda s: s.at_ms)[-1] if samples else None
    ref = SampleRef(at_ms=latest.at_ms, source=latest.source) if latest else None
    scope = _Scope(obj, seat, ref, frozenset(inputs.dispatched))
    open_all = run.open_items.get(obj.key, ())
    # A drift item asks for the sensor back; it is no work on the number, so it is neither
    # coverage nor an open item the caps count (it still stops a second drift item).
    open_now = tuple(i for i in open_all if i.route != "drift")
    gap = gap_for(obj, samples, inputs.now_ms)
    decision = decide_for_gap(gap, coverage=len(open_now))
    remaining = (
        None if obj.budget_micros is None else obj.budget_micros - inputs.spend.get(obj.key, 0)
    )
    ctx: AdmissionContext = {
        "objective": obj,
        "gap": gap,
        "latestSample": latest,
        "openItems": open_now,
        "maxOpenPerObjective": run.max_open,
        "maxNewPerRun": run.max_new,
    }
    if remaining is not None:
        ctx["remainingMicros"] = remaining
        ctx["remainingCents"] = remaining // MICROS_PER_CENT
    if inputs.policy.mandate_staleness is not None:
        ctx["staleness"] = inputs.policy.mandate_staleness
    gap_entry, gap_dispatch = _gap_step(scope, decision, open_all)
    pending = run.overrides.get(obj.key, {})
    judged, dispatched = _judge_all(inputs.policy, scope, ctx, candidates, pending)
    return ObjectiveOutcome(
        objective_key=obj.key,
        status="run",
        reason=status,
        seat_id=seat,
        gap=gap,
        decision=decision,
        latest_sample=ref,
        remaining_micros=remaining,
        proposer_failures=proposals.failures,
        audit=(gap_entry, *failures, *judged),
        dispatches=(*gap_dispatch, *dispatched),
    )


def _judge_all(
    policy: RunPolicy,
    scope: _Scope,
    ctx: AdmissionContext,
    candidates: Sequence[Proposal],
    overrides: Mapping[str, Override],
) -> tuple[list[AuditEntry], list[Dispatch]]:
    """Admit each candidate in order, carrying the run's admissions forward; staff the admitted.
    The first candidate of an overridden key is judged with that override's gates."""
    staff: ClassifyContext = {
        "memberId": scope.seat,
        "objective": scope.obj,
        "reachable": policy.reachable.get(scope.seat, ()),
        "peers": [p for p in policy.peers if p.member_id != scope.seat],
    }
    admitted: list[WorkCandidate] = []
    repeats: Counter[str] = Counter()
    audit: list[AuditEntry] = []
    dispatches: list[Dispatch] = []
    for proposal in candidates:
        c, key = proposal.candidate, candidate_key(proposal.candidate.title)
        repeat, repeats[key] = repeats[key], repeats[key] + 1
        step: AdmissionContext = {
            **ctx,
            "admittedItems": tuple(admitted),
            "admittedThisRun": len(admitted),
        }
        did = candidate_dispatch_id(scope.obj.key, c.title, scope.ref, repeat)
        if did in scope.dispatched:
            audit.append(_already(scope.obj.key, proposal, key, did))
            continue
        ov = overrides.get(key) if repeat == 0 else None
        verdict = admit(c, step, overridden=ov.gates if ov is not None else ())
        staffing = dispatch = note = None
        if verdict.admitted:
            admitted.append(c)
            staffing = classify_work_item(c, staff)
            dispatch, note = _candidate_dispatch(scope, c, key, staffing, did)
            if dispatch is not None and ov is not None:
                ref = OverrideRef(id=ov.id, candidate_key=key, by=ov.by)
                dispatch = dispatch.model_copy(update={"override": ref})
            dispatches += [dispatch] if dispatch is not None else []
        used = ov is not None and dispatch is not None
        if ov is not None and not used:
            note = _override_unused(ov, verdict.gate, note)
        audit.append(
            AuditEntry(
                objective_key=scope.obj.key,
                kind="candidate",
                reason=verdict.reason,
                candidate_title=c.title,
                candidate_key=key,
                source=proposal.source,
                admitted=verdict.admitted,
                gate=verdict.gate,
                checks=verdict.checks,
                disposition=staffing.disposition if staffing is not None else None,
                dispatch_id=dispatch.id if dispatch is not None else None,
                note=note,
                override=_override_note(ov, overridden_gates(verdict)) if used else None,
            )
        )
    return audit, dispatches


def _override_note(ov: Override | None, pushed: Sequence[Gate]) -> OverrideNote | None:
    """Who overrode, why, and the gates of theirs that would have refused this candidate."""
    if ov is None:
        return None
    gates = tuple(g for g in ov.gates if g in pushed)
    return OverrideNote(id=ov.id, by=ov.by, reason=ov.reason, gates=gates)


def _override_unused(ov: Override, gate: Gate | None, note: str | None) -> str:
    """Why an override was not used up by this candidate: it stays active for a later run."""
    if gate is not None:
        why = f"refused by {gate}, which override {ov.id} by {ov.by} does not cover"
    else:
        why = f"admitted but not dispatched; override {ov.id} by {ov.by} stays active"
    return why if note is None else f"{note}; {why}"


def _candidate_dispatch(
    scope: _Scope, c: WorkCandidate, key: str, staffing: Classification, did: str
) -> tuple[Dispatch | None, str | None]:
    """What an admitted, classified candidate becomes; (None, why) when it cannot be done."""
    disposition, target = staffing.disposition, staffing.target
    if disposition == "HANDOFF" and not target:
        return None, "HANDOFF with no named target: nobody to hand it to, not dispatched"
    claim = review = None
    if disposition == "COLLABORATE":
        claim = Claim(
            holder_id=scope.seat,
            contributors=staffing.contributors,
            issue_number=c.issue_number,
        )
    if disposition == "NEEDS_REVIEW":
        before = staffing.reason in ("gated-action-class", "collaborator-is-approver")
        review = ReviewRequirement(
            kind="approval" if before else "review",
            reason=staffing.reason,
            reviewer_id=target,
            reviewers=staffing.reviewers,
            approvers=staffing.approvers,
            gated_classes=staffing.gated_classes,
        )
    dispatch = Dispatch(
        id=did,
        kind="engagement" if disposition == "HANDOFF" else "backlog",
        route=disposition,
        objective_key=scope.obj.key,
        seat_id=scope.seat,
        target_id=None if disposition == "SELF" else target,
        title=c.title,
        reason="; ".join(staffing.why),
        candidate_key=key,
        candidate=c,
        classification=staffing,
        claim=claim,
        review=review,
        decided_on=scope.ref,
    )
    return dispatch, None


def _gap_step(
    scope: _Scope, decision: GapDecision, open_all: tuple[BacklogItem, ...]
) -> tuple[AuditEntry, tuple[Dispatch, ...]]:
    """The gap decision's audit line, and its own dispatch: an escalation, or a drift item
    unless one is open for the objective (`open_all`: its open items, drift ones included)."""
    obj, action = scope.obj, decision.action
    entry = AuditEntry(
        objective_key=obj.key, kind="gap_decision", reason=decision.reason, action=action
    )
    if action != "escalate" and action != "drift":
        return entry, ()
    did = gap_dispatch_id(obj.key, action, scope.ref)
    if action == "escalate" and obj.owner_id is None:
        return entry.model_copy(update={"note": "no ownerId: nobody to ask, not dispatched"}), ()
    if action == "drift":
        # One restore item per objective while it is open, whatever made this run drift: the
        # id is per sample (a drift after the sensor came back is a new item), so the item a
        # missing measurement opened has another id than a later stale sample's would.
        restoring = next((i for i in open_all if i.route == "drift" or i.id == did), None)
        if restoring is not None:
            note = f"restore item {restoring.id} is already open"
            return entry.model_copy(update={"note": note}), ()
    if did in scope.dispatched:
        note = f"already dispatched under {did} on this sample"
        return entry.model_copy(update={"note": note, "dispatch_id": did}), ()
    ask = f'Decision needed on "{obj.key}"'
    dispatch = Dispatch(
        id=did,
        kind="engagement" if action == "escalate" else "backlog",
        route=action,
        objective_key=obj.key,
        seat_id=scope.seat,
        target_id=obj.owner_id,
        title=ask
        if action == "escalate"
        else f"Restore the measurement of {obj.metric or obj.key}",
        reason=decision.reason,
        decided_on=scope.ref,
    )
    return entry.model_copy(update={"dispatch_id": did}), (dispatch,)


def _candidates(obj: Objective, proposals: ObjectiveProposals) -> tuple[Proposal, ...]:
    """The playbook, then the proposals; playbook-tagged proposals stand for the playbook."""
    if any(p.source == "playbook" for p in proposals.candidates):
        return proposals.candidates
    playbook = tuple(Proposal(source="playbook", candidate=c) for c in obj.playbook)
    return (*playbook, *proposals.candidates)


def _steward(obj: Objective) -> tuple[str | None, str]:
    """The seat that stewards a runnable objective, or None and why it is not run."""
    if obj.state != "active":
        return None, f'objective "{obj.key}" is {obj.state}, not active — only active ones are run'
    seat = obj.steward_seat
    if not seat:
        return None, f'objective "{obj.key}" names no seatId or adoptedBy — no seat stewards it'
    return seat, f'objective "{obj.key}" is active, stewarded by {seat}'


def _failed(objective_key: str, failure: ProposerFailure, run: bool) -> AuditEntry:
    by = f" ({failure.proposer})" if failure.proposer else ""
    note = f"proposer failed{by}" + ("; the playbook is still used" if run else "")
    return AuditEntry(
        objective_key=objective_key, kind="proposer_failed", reason=failure.reason, note=note
    )


def _already(objective_key: str, p: Proposal, key: str, did: str) -> AuditEntry:
    """A candidate this sample already produced work for: not judged again, not counted."""
    return AuditEntry(
        objective_key=objective_key,
        kind="candidate",
        reason=f"not judged: already dispatched under {did} on this sample",
        candidate_title=p.candidate.title,
        candidate_key=key,
        source=p.source,
        admitted=False,
        dispatch_id=did,
    )


def possible_dispatch_ids(
    objective: Objective | Loose,
    samples: Iterable[Sample | Loose],
    proposals: ObjectiveProposals | Loose | None = None,
) -> tuple[str, ...]:
    """Every id a run of `objective` on these samples could dispatch under: each candidate's
    (the playbook, then the proposals, repeats counted) and the gap's (escalate, drift). The
    shell asks which of them it has already carried out, and hands those to `plan_run`."""
    inputs = RunInputs.model_validate(
        {
            "now_ms": 0,
            "objectives": (objective,),
            "samples": {"_": tuple(samples)},
            "proposals": {"_": proposals} if proposals is not None else {},
        }
    )
    obj = inputs.objectives[0]
    found = inputs.samples.get("_", ())
    latest = max(found, key=lambda s: s.at_ms) if found else None
    ref = SampleRef(at_ms=latest.at_ms, source=latest.source) if latest else None
    repeats: Counter[str] = Counter()
    ids = []
    for p in _candidates(obj, inputs.proposals.get("_", _NO_PROPOSALS)):
        key = candidate_key(p.candidate.title)
        ids.append(candidate_dispatch_id(obj.key, p.candidate.title, ref, repeats[key]))
        repeats[key] += 1
    ids += [gap_dispatch_id(obj.key, action, ref) for action in ("escalate", "drift")]
    return tuple(ids)


def _not_judged(objective_key: str, p: Proposal, why: str) -> AuditEntry:
    return AuditEntry(
        objective_key=objective_key,
        kind="candidate",
        reason=f"not judged: {why}",
        candidate_title=p.candidate.title,
        candidate_key=candidate_key(p.candidate.title),
        source=p.source,
        admitted=False,
    )
