"""The gates between "the number is off" and "work exists" (the steward's gates): `admit`. Pure.

A steward that turns every gap into tasks is a spam generator, so a candidate becomes work only
through these gates, judged in `GATES` order, the first failure deciding:

    freshness   the mandate cache is fresh enough for self-directed (OUTCOME) work
    adoption    the objective is `active`; a proposed one admits nothing
    honesty     the latest sample is method- or human-sourced; an `llm` number is advisory
    provenance  the candidate advances an objective and says why it exists (`why.reason`)
    dedupe      it is not a near-duplicate of an open or already admitted item
    trend       `decide_for_gap` says "create": off target, and nothing already in flight
    wip         open items per objective and new items per run stay under their caps
    budget      its estimated cost fits the remaining envelope

Dedupe runs before trend on purpose: any open item stops the gap deciding "create", so after
trend the open-items half of dedupe could never fire, and "you already have this open" is the
more useful refusal. A rejection is returned with its gate, its reason and the trail of every
check so far, never dropped: the steward audits each one.

An operator may override `OVERRIDABLE_GATES` (wip, trend, budget) for one candidate
(`admit(..., overridden=...)`): such a gate that would refuse is recorded in the trail as
passed, its detail saying it was overridden and what it would have said, and judging goes
on; the verdict (an `OverriddenAdmission`) names those gates. The other gates cannot be
overridden. Without `overridden` every gate judges as written above.

Inputs are camelCase mappings (read by JavaScript's rules, `pipeline.js`) or the contracts.
Reasons are fixed wordings, numbers printed as JavaScript prints them. Money: the cents keys
`estCents` / `remainingCents`, unless the candidate's `estMicros` and the
context's `remainingMicros` are both given, which then decide and are named in micros.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TypedDict, get_args

from contracts.goals import (
    Admission,
    AdmissionCheck,
    Gap,
    GapDecision,
    Gate,
    Objective,
    Sample,
    Staleness,
    WorkCandidate,
)
from contracts.steward import OVERRIDABLE_GATES, OverriddenAdmission
from pipeline.goals.kpi import WORK_CREATING_SOURCES
from pipeline.js import (
    EMPTY,
    concat,
    either,
    field,
    is_finite,
    items,
    js_str,
    num_str,
    present,
    to_fixed,
    to_number,
    truthy,
)

GATES: tuple[Gate, ...] = get_args(Gate)
MAX_OPEN_PER_OBJECTIVE = 3
MAX_NEW_PER_RUN = 2
DUPLICATE_THRESHOLD = 0.6  # title similarity at or above this is a duplicate

_WORD_BREAK = re.compile(r"[^a-z0-9]+")

Loose = Mapping[str, object]
Verdict = tuple[bool, str]  # (passed, detail): a failure's detail is its reason


class AdmissionContext(TypedDict, total=False):
    """What `admit` judges a candidate against: the context mapping, key for key."""

    objective: Objective | Loose
    gap: Gap | Loose
    latestSample: Sample | Loose | None
    openItems: Sequence[object]  # each with a `title` (or `text`)
    admittedItems: Sequence[object]  # admitted earlier in this run
    admittedThisRun: int
    remainingCents: int | float | str
    remainingMicros: int | str
    staleness: Staleness | Loose | None
    maxOpenPerObjective: int
    maxNewPerRun: int


def title_similarity(a: object, b: object) -> float:
    """Jaccard similarity of the two titles' words longer than two letters; 0 if either has none."""
    wa, wb = _words(a), _words(b)
    if not wa or not wb:
        return 0.0
    inter = len(wa & wb)
    return inter / (len(wa) + len(wb) - inter)


def _words(title: object) -> set[str]:
    text = js_str(title).lower() if truthy(title) else ""
    return {w for w in _WORD_BREAK.split(text) if len(w) > 2}


def decide_for_gap(
    gap: Gap | Loose | None, coverage: int | float | Loose | None = 0
) -> GapDecision:
    """What a gap should produce (a fixed decision table), given the items in flight.

    No measurement (no gap, or its `gap` missing or None) and a stale sensor are `drift`;
    within tolerance is `none`; off target with nothing in flight is `create`; with work in
    flight an improving trend is `log`, a flat or worsening one `escalate`. `coverage` may
    also be an options object, `{"coverage": n}`; anything but a finite number is 0.
    """
    n = field(coverage, "coverage") if isinstance(coverage, Mapping) else coverage
    return _decide(gap, n if is_finite(n) else 0)


def _decide(gap: object, coverage: int | float) -> GapDecision:
    if not truthy(gap) or not present(field(gap, "gap")):
        return GapDecision(action="drift", reason="no measurement to decide on")
    if truthy(field(gap, "stale")):
        periods = _periods(field(gap, "stalenessPeriods"))
        return GapDecision(
            action="drift", reason=f"sensor is stale ({periods}× cadence with no sample)"
        )
    if truthy(field(gap, "withinTolerance")):
        return GapDecision(action="none", reason="gap is within tolerance")
    if coverage == 0:
        return GapDecision(action="create", reason="gap exceeds tolerance and nothing is in flight")
    trend = field(gap, "trend")
    if trend == "improving":
        return GapDecision(
            action="log",
            reason="gap exceeds tolerance but the trend is improving with work in flight",
        )
    if trend in ("flat", "worsening"):
        return GapDecision(
            action="escalate",
            reason=f"{num_str(coverage)} item(s) already in flight and the trend is {trend} — "
            "more tasks will not help; ask for a decision",
        )
    return GapDecision(
        action="log", reason="work is in flight and the trend is not yet established"
    )


def _periods(value: object) -> str:
    """JavaScript's `(gap.stalenessPeriods || 0).toFixed(1)`; `toFixed` of a non-number throws."""
    if not truthy(value):
        return to_fixed(0, 1)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"gap.stalenessPeriods must be a number, not {js_str(value)}")
    return to_fixed(value, 1)


def admit(
    candidate: WorkCandidate | Loose | None = None,
    ctx: AdmissionContext | Loose | None = None,
    *,
    overridden: Collection[Gate] = (),
) -> Admission:
    """Run the gates in order against one candidate; the first failure refuses it.

    A gate in `overridden` (only `OVERRIDABLE_GATES`, else a ValueError) that would refuse
    passes instead, its check saying so; the verdict is then an `OverriddenAdmission`.
    """
    bad = sorted(set(overridden) - set(OVERRIDABLE_GATES))
    if bad:
        raise ValueError(
            f"gate(s) {', '.join(bad)} cannot be overridden; only {', '.join(OVERRIDABLE_GATES)}"
        )
    c: object = candidate if candidate is not None else EMPTY
    x: object = ctx if ctx is not None else EMPTY
    checks: list[AdmissionCheck] = []
    pushed: list[Gate] = []
    for gate, judge in _JUDGES:
        ok, detail = judge(c, x)
        if not ok and gate in overridden:
            pushed.append(gate)
            ok, detail = True, f"overridden — would have refused: {detail}"
        checks.append(AdmissionCheck(gate=gate, ok=ok, detail=detail))
        if not ok:
            return _verdict(
                overridden, admitted=False, gate=gate, reason=detail, checks=checks, pushed=pushed
            )
    reason = "all gates passed"
    if pushed:
        reason = f"all gates passed, {', '.join(pushed)} by override"
    return _verdict(
        overridden, admitted=True, gate=None, reason=reason, checks=checks, pushed=pushed
    )


def overridden_gates(verdict: Admission) -> tuple[Gate, ...]:
    """The gates an override pushed this verdict past (none for a plain `admit`)."""
    return verdict.overridden if isinstance(verdict, OverriddenAdmission) else ()


def _verdict(
    overridden: Collection[Gate],
    *,
    admitted: bool,
    gate: Gate | None,
    reason: str,
    checks: Sequence[AdmissionCheck],
    pushed: Sequence[Gate] = (),
) -> Admission:
    """An `Admission`, or, when overrides were asked for, an `OverriddenAdmission`."""
    if not overridden:
        return Admission(admitted=admitted, gate=gate, reason=reason, checks=tuple(checks))
    return OverriddenAdmission(
        admitted=admitted, gate=gate, reason=reason, checks=tuple(checks), overridden=tuple(pushed)
    )


def _freshness(c: object, x: object) -> Verdict:
    staleness = field(x, "staleness")
    if truthy(staleness) and field(staleness, "outcome") != "full":
        outcome = js_str(field(staleness, "outcome"))
        return False, (f"mandate cache is too stale for self-directed work (outcome={outcome})")
    return True, "mandate cache is fresh"


def _adoption(c: object, x: object) -> Verdict:
    obj = either(field(x, "objective"), EMPTY)
    key, state = field(obj, "key"), field(obj, "state")
    if state != "active":
        return False, (
            f'objective "{js_str(either(key, "?"))}" is {js_str(either(state, "unknown"))}, '
            "not active — a proposed objective admits no work"
        )
    return True, f'objective "{js_str(key)}" is active'


def _honesty(c: object, x: object) -> Verdict:
    sample = field(x, "latestSample")
    source = field(sample, "source") if truthy(sample) else sample
    if js_str(source) not in WORK_CREATING_SOURCES:
        return False, (
            f'latest sample source is "{js_str(either(source, "none"))}" — only '
            f"{'/'.join(WORK_CREATING_SOURCES)} samples may create work"
        )
    return True, f"latest sample is {js_str(source)}-sourced"


def _provenance(c: object, x: object) -> Verdict:
    advances = [a for a in concat(field(c, "advances")) if truthy(a)]
    if not advances:
        return False, "candidate advances no objective"
    why = field(c, "why")
    if not truthy(why) or not truthy(field(why, "reason")):
        return False, (
            "candidate carries no `why.reason` — a machine-created task must say why it exists"
        )
    return True, f"advances {', '.join(js_str(a) for a in advances)}"


def _dedupe(c: object, x: object) -> Verdict:
    title = field(c, "title")
    against = items(field(x, "openItems")) + items(field(x, "admittedItems"))
    for item in against:
        other = either(field(item, "title"), field(item, "text")) if truthy(item) else item
        sim = title_similarity(title, other)
        if sim >= DUPLICATE_THRESHOLD:
            return False, (
                f'"{js_str(title)}" is {to_fixed(sim * 100, 0)}% similar to "{js_str(other)}"'
            )
    return True, f"no near-duplicate among {len(against)} comparable item(s)"


def _trend(c: object, x: object) -> Verdict:
    decision = _decide(either(field(x, "gap"), EMPTY), len(items(field(x, "openItems"))))
    return decision.action == "create", decision.reason


def _wip(c: object, x: object) -> Verdict:
    key = js_str(field(either(field(x, "objective"), EMPTY), "key"))
    open_now = len(items(field(x, "openItems")))
    max_open = _finite_or(field(x, "maxOpenPerObjective"), MAX_OPEN_PER_OBJECTIVE)
    if open_now >= max_open:
        return False, f'{open_now} open item(s) on "{key}" ≥ cap {num_str(max_open)}'
    max_new = _finite_or(field(x, "maxNewPerRun"), MAX_NEW_PER_RUN)
    this_run = _finite_or(field(x, "admittedThisRun"), 0)
    if this_run >= max_new:
        return False, (
            f"{num_str(this_run)} item(s) already admitted this run ≥ cap {num_str(max_new)}"
        )
    return True, (
        f"{open_now}/{num_str(max_open)} open, "
        f"{num_str(this_run)}/{num_str(max_new)} admitted this run"
    )


def _finite_or(value: object, default: int) -> int | float:
    return value if is_finite(value) else default


def _budget(c: object, x: object) -> Verdict:
    est_micros, remaining_micros = field(c, "estMicros"), field(x, "remainingMicros")
    if present(est_micros) and present(remaining_micros):
        unit, est, remaining = " micros", to_number(est_micros), to_number(remaining_micros)
    else:
        unit = "c"
        est, remaining = to_number(field(c, "estCents")), to_number(field(x, "remainingCents"))
    if is_finite(est) and is_finite(remaining) and est > remaining:
        return False, (
            f"estimate {num_str(est)}{unit} exceeds the remaining envelope "
            f"{num_str(remaining)}{unit}"
        )
    if is_finite(est):
        return True, f"estimate {num_str(est)}{unit} within envelope"
    return True, "no cost estimate supplied"


_BY_GATE: dict[Gate, Callable[[object, object], Verdict]] = {
    "freshness": _freshness,
    "adoption": _adoption,
    "honesty": _honesty,
    "provenance": _provenance,
    "dedupe": _dedupe,
    "trend": _trend,
    "wip": _wip,
    "budget": _budget,
}
_JUDGES = tuple((gate, _BY_GATE[gate]) for gate in GATES)
