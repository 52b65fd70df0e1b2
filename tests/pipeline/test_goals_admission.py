"""Unit tests for the admission gates and the gap decision table (docs/architecture.md).

Pure: no server, no clock. The first block is one case per row of the decision table and
per gate; the rest pin the exact wording, Seatwire's money rule, and the properties the
steward run relies on.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from contracts.goals import Gap, Objective, Sample, Staleness, WorkCandidate
from pipeline.goals import (
    DUPLICATE_THRESHOLD,
    GATES,
    MAX_NEW_PER_RUN,
    admit,
    decide_for_gap,
    title_similarity,
)

OBJ: dict[str, Any] = {
    "key": "pipeline",
    "state": "active",
    "metric": "pipeline_coverage_x",
    "target": 3,
    "cadence": "weekly",
}
GAP: dict[str, Any] = {
    "gap": 1,
    "target": 3,
    "value": 2,
    "withinTolerance": False,
    "trend": "flat",
    "normalizedGap": 0.33,
    "stale": False,
}
SAMPLE: dict[str, Any] = {"source": "method", "value": 2, "window": "2026-W33"}


def candidate(**over: Any) -> dict[str, Any]:
    """A clean candidate on the `pipeline` objective, estimated at 40 cents."""
    return {
        "title": "Close the pipeline coverage gap",
        "advances": ["pipeline"],
        "estCents": 40,
        "why": {"reason": "kpi-gap", "objectiveKey": "pipeline"},
        **over,
    }


def ctx(**over: Any) -> dict[str, Any]:
    """A context every gate passes: active objective, method sample, fresh mandate, 500c left."""
    return {
        "objective": OBJ,
        "gap": GAP,
        "latestSample": SAMPLE,
        "openItems": [],
        "admittedThisRun": 0,
        "remainingCents": 500,
        "staleness": {"outcome": "full"},
        **over,
    }


# --------------------------------------------------------------------------- cases: decision table


def test_decision_table_within_tolerance_is_none_and_no_coverage_creates() -> None:
    """A gap within tolerance produces nothing; one off target with nothing in flight creates."""
    assert decide_for_gap({**GAP, "withinTolerance": True}).action == "none"
    assert decide_for_gap(GAP, coverage=0).action == "create"


def test_decision_table_work_in_flight_and_flat_or_worsening_escalates() -> None:
    """With work in flight, a flat or worsening trend escalates instead of piling on tasks."""
    assert decide_for_gap({**GAP, "trend": "flat"}, coverage=2).action == "escalate"
    assert decide_for_gap({**GAP, "trend": "worsening"}, coverage=1).action == "escalate"


def test_decision_table_work_in_flight_and_improving_logs() -> None:
    """With work in flight and an improving trend, the steward logs and waits."""
    assert decide_for_gap({**GAP, "trend": "improving"}, coverage=1).action == "log"


def test_decision_table_stale_sensor_is_drift() -> None:
    """A stale sensor, or no measurement at all, is drift to fix, never a gap to work."""
    d = decide_for_gap({**GAP, "stale": True, "stalenessPeriods": 3.2}, coverage=0)
    assert d.action == "drift"
    assert "stale" in d.reason
    assert decide_for_gap({"gap": None}).action == "drift"


# --------------------------------------------------------------------------- cases: the gates


def test_a_clean_candidate_passes_every_gate_in_the_declared_order() -> None:
    """A clean candidate is admitted and its trail lists every gate, in order, all passed."""
    v = admit(candidate(), ctx())
    assert v.admitted, v.reason
    assert [c.gate for c in v.checks] == list(GATES)
    assert all(c.ok for c in v.checks)


def test_gate_honesty_an_llm_sample_never_creates_work() -> None:
    """An llm-sourced latest sample is refused at honesty; a human-sourced one is admitted."""
    v = admit(candidate(), ctx(latestSample={"source": "llm", "value": 2}))
    assert not v.admitted
    assert v.gate == "honesty"
    assert "only method/human samples may create work" in v.reason
    assert admit(candidate(), ctx(latestSample={"source": "human", "value": 2})).admitted


def test_gate_adoption_a_proposed_objective_admits_nothing() -> None:
    """A candidate on a proposed objective is refused at adoption."""
    v = admit(candidate(), ctx(objective={**OBJ, "state": "proposed"}))
    assert not v.admitted
    assert v.gate == "adoption"
    assert "proposed objective admits no work" in v.reason


def test_gate_freshness_a_stale_mandate_suspends_self_directed_work() -> None:
    """A mandate cache whose outcome is not `full` refuses at freshness."""
    v = admit(candidate(), ctx(staleness={"outcome": "suspended"}))
    assert not v.admitted
    assert v.gate == "freshness"


def test_gate_provenance_no_advances_and_no_why_reason_are_refusals() -> None:
    """A candidate advancing nothing, or without `why.reason`, is refused at provenance."""
    assert admit(candidate(advances=[]), ctx()).gate == "provenance"
    assert admit(candidate(why={}), ctx()).gate == "provenance"


def test_gate_wip_the_per_objective_and_per_run_caps_bite() -> None:
    """Open items at the cap are refused (trend catches them first); so is a spent run cap."""
    open_items = [{"title": "a"}, {"title": "b"}, {"title": "c"}]
    capped = admit(candidate(), ctx(openItems=open_items, gap={**GAP, "trend": "improving"}))
    assert capped.gate == "trend"

    wip = admit(
        candidate(title="totally unrelated new push"),
        ctx(openItems=open_items, gap={**GAP, "trend": "unknown"}),
    )
    assert not wip.admitted

    per_run = admit(candidate(), ctx(admittedThisRun=2))
    assert per_run.gate == "wip"
    assert "already admitted this run" in per_run.reason


def test_gate_dedupe_a_near_duplicate_of_an_open_item_is_refused() -> None:
    """A candidate whose title nearly repeats an open item's is refused at dedupe."""
    v = admit(
        candidate(title="Close the pipeline coverage gap"),
        ctx(
            openItems=[{"title": "Close the pipeline coverage gap now"}],
            gap={**GAP, "trend": "unknown"},
        ),
    )
    assert not v.admitted
    assert v.gate == "dedupe"
    similarity = title_similarity(
        "Close the pipeline coverage gap", "Close the pipeline coverage gap now"
    )
    assert similarity >= DUPLICATE_THRESHOLD


def test_gate_budget_no_budget_left_means_no_work_and_names_both_numbers() -> None:
    """An estimate over the remaining envelope is refused at budget, naming both amounts."""
    v = admit(candidate(estCents=900), ctx(remainingCents=100))
    assert not v.admitted
    assert v.gate == "budget"
    assert "900c exceeds the remaining envelope 100c" in v.reason


def test_every_rejection_carries_its_gate_and_the_full_check_trail() -> None:
    """A rejection's trail is non-empty and ends with the failing gate, marked not ok."""
    v = admit(candidate(), ctx(latestSample={"source": "llm"}))
    assert v.checks
    assert not v.checks[-1].ok
    assert v.checks[-1].gate == v.gate


# --------------------------------------------------------------------------- wording and money


def test_refusals_use_the_seeds_words_with_numbers_printed_as_javascript_prints_them() -> None:
    """Caps given as floats print as integers (3, not 3.0) and fractions as JavaScript would."""
    assert admit(candidate(), ctx(maxOpenPerObjective=0.0)).reason == (
        '0 open item(s) on "pipeline" ≥ cap 0'
    )
    assert admit(candidate(), ctx(admittedThisRun=2.0, maxNewPerRun=1.5)).reason == (
        "2 item(s) already admitted this run ≥ cap 1.5"
    )
    assert admit(candidate(), ctx(maxOpenPerObjective=3.0)).checks[6].detail == (
        "0/3 open, 0/2 admitted this run"
    )
    assert admit(candidate(estCents="40"), ctx(remainingCents=1e-7)).reason == (
        "estimate 40c exceeds the remaining envelope 1e-7c"
    )


def test_the_similarity_percentage_is_rounded_half_up() -> None:
    """A 62.5% similarity reads 63%, as JavaScript's toFixed gives, not banker's 62%."""
    v = admit(
        candidate(title="alpha bravo charlie delta echo"),
        ctx(admittedItems=[{"title": "alpha bravo charlie delta echo foxtrot golf hotel"}]),
    )
    assert v.reason == (
        '"alpha bravo charlie delta echo" is 63% similar to '
        '"alpha bravo charlie delta echo foxtrot golf hotel"'
    )


def test_each_earlier_gate_refuses_with_the_seeds_reason() -> None:
    """Freshness, adoption, honesty and provenance refuse in their exact words."""
    assert admit(candidate(), ctx(staleness={"outcome": "degraded"})).reason == (
        "mandate cache is too stale for self-directed work (outcome=degraded)"
    )
    assert admit(candidate(), ctx(objective={"state": "retired"})).reason == (
        'objective "?" is retired, not active — a proposed objective admits no work'
    )
    assert admit(candidate(), ctx(latestSample=None)).reason == (
        'latest sample source is "none" — only method/human samples may create work'
    )
    assert admit(candidate(why=None), ctx()).reason == (
        "candidate carries no `why.reason` — a machine-created task must say why it exists"
    )
    assert admit(candidate(advances=[None, ""]), ctx()).reason == "candidate advances no objective"


def test_micros_decide_the_budget_when_both_are_given() -> None:
    """With estMicros and remainingMicros both given, they decide and the reason is in micros."""
    v = admit(candidate(estMicros=1_500_000), ctx(remainingMicros="1000000"))
    assert v.gate == "budget"
    assert v.reason == "estimate 1500000 micros exceeds the remaining envelope 1000000 micros"
    fits = admit(candidate(estCents=900, estMicros=10), ctx(remainingCents=1, remainingMicros=20))
    assert fits.admitted
    assert fits.checks[-1].detail == "estimate 10 micros within envelope"


def test_without_both_micros_the_cents_decide() -> None:
    """One micros figure alone is not enough: the cents keys and their wording apply."""
    v = admit(candidate(estCents=900, estMicros=10), ctx(remainingCents=100))
    assert v.reason == "estimate 900c exceeds the remaining envelope 100c"
    assert admit(candidate(estCents=None), ctx()).checks[-1].detail == "estimate 0c within envelope"
    no_estimate = admit({k: v for k, v in candidate().items() if k != "estCents"}, ctx())
    assert no_estimate.checks[-1].detail == "no cost estimate supplied"


def test_a_missing_gap_value_is_no_measurement() -> None:
    """A gap without a `gap` value, or no gap at all, drifts, so trend refuses the candidate."""
    assert decide_for_gap({"withinTolerance": False}).action == "drift"
    assert decide_for_gap(None).reason == "no measurement to decide on"
    assert admit(candidate(), ctx(gap=None)).reason == "no measurement to decide on"


def test_decide_for_gap_reads_the_seeds_options_object_and_words_its_reasons() -> None:
    """`{"coverage": n}` works like `coverage=n`; a non-number coverage is 0."""
    assert decide_for_gap(GAP, {"coverage": 2}).reason == (
        "2 item(s) already in flight and the trend is flat — more tasks will not help; "
        "ask for a decision"
    )
    assert decide_for_gap(GAP, {"coverage": "2"}).action == "create"
    assert decide_for_gap({**GAP, "stale": True}).reason == (
        "sensor is stale (0.0× cadence with no sample)"
    )
    assert decide_for_gap({**GAP, "trend": "unknown"}, coverage=1).reason == (
        "work is in flight and the trend is not yet established"
    )


def test_contracts_decide_exactly_as_the_seeds_mappings() -> None:
    """The same candidate and context as contracts give the same wire verdict as the dicts."""
    as_dicts = admit(candidate(), ctx())
    as_contracts = admit(
        WorkCandidate.model_validate(candidate()),
        {
            "objective": Objective.model_validate(OBJ),
            "gap": Gap.model_validate(GAP),
            "latestSample": Sample(value=2, source="method", window="2026-W33", at_ms=1),
            "openItems": [],
            "admittedThisRun": 0,
            "remainingCents": 500,
            "staleness": Staleness(outcome="full"),
        },
    )
    assert as_contracts.to_wire() == as_dicts.to_wire()


def test_the_verdict_on_the_wire_has_the_seeds_keys() -> None:
    """A verdict is {admitted, gate, reason, checks[{gate, ok, detail}]}, gate null if admitted."""
    wire = admit(candidate(), ctx()).to_wire()
    assert set(wire) == {"admitted", "gate", "reason", "checks"}
    assert wire["gate"] is None
    assert set(wire["checks"][0]) == {"gate", "ok", "detail"}
    assert decide_for_gap(GAP).to_wire() == {
        "action": "create",
        "reason": "gap exceeds tolerance and nothing is in flight",
    }


# --------------------------------------------------------------------------- properties

TITLES = st.sampled_from(
    [
        "Close the pipeline coverage gap",
        "Close the pipeline coverage gap now",
        "Book five discovery calls",
        "totally unrelated new push",
        "",
    ]
)
GAPS = st.fixed_dictionaries(
    {
        "gap": st.sampled_from([None, 0, 1, 2.5]),
        "withinTolerance": st.booleans(),
        "stale": st.booleans(),
        "stalenessPeriods": st.sampled_from([0, 2, 3.25]),
        "trend": st.sampled_from(["improving", "flat", "worsening", "unknown"]),
    }
)
CANDIDATES = st.fixed_dictionaries(
    {
        "title": TITLES,
        "advances": st.sampled_from([["pipeline"], [], ["pipeline", "revenue"]]),
        "why": st.sampled_from([{"reason": "kpi-gap"}, {}, None]),
        "estCents": st.one_of(st.none(), st.integers(0, 1000)),
    }
)
CONTEXTS = st.fixed_dictionaries(
    {
        "objective": st.sampled_from([OBJ, {**OBJ, "state": "proposed"}]),
        "gap": GAPS,
        "latestSample": st.sampled_from([SAMPLE, {"source": "human"}, {"source": "llm"}, None]),
        "openItems": st.lists(st.fixed_dictionaries({"title": TITLES}), max_size=4),
        "admittedThisRun": st.integers(0, 3),
        "remainingCents": st.integers(0, 1000),
        "staleness": st.sampled_from([{"outcome": "full"}, {"outcome": "suspended"}, None]),
        "maxOpenPerObjective": st.integers(0, 4),
        "maxNewPerRun": st.integers(0, 3),
    }
)


@given(CANDIDATES, CONTEXTS)
def test_an_llm_sourced_latest_sample_never_admits(cand: dict[str, Any], c: dict[str, Any]) -> None:
    """Whatever else holds, a candidate judged on an llm-sourced latest sample is not admitted."""
    assert not admit(cand, {**c, "latestSample": {"source": "llm", "value": 9}}).admitted


@given(CANDIDATES, CONTEXTS)
def test_the_trail_ends_at_the_failing_gate_after_every_earlier_gate_passed(
    cand: dict[str, Any], c: dict[str, Any]
) -> None:
    """A refusal's trail is the gates in order up to its own, all passed but the last."""
    v = admit(cand, c)
    gates = [check.gate for check in v.checks]
    if v.admitted:
        assert gates == list(GATES)
        assert all(check.ok for check in v.checks)
        return
    assert v.gate is not None
    assert gates == list(GATES[: GATES.index(v.gate) + 1])
    assert all(check.ok for check in v.checks[:-1])
    assert not v.checks[-1].ok
    assert v.checks[-1].detail == v.reason


@given(
    st.lists(CANDIDATES, max_size=8),
    CONTEXTS,
    st.one_of(st.none(), st.integers(0, 4)),
)
def test_a_run_never_admits_more_than_max_new_per_run(
    cands: list[dict[str, Any]], c: dict[str, Any], max_new: int | None
) -> None:
    """Admitting candidates in order, carrying the run's admissions forward, stops at the cap."""
    base = {k: v for k, v in c.items() if k != "maxNewPerRun"}
    if max_new is not None:
        base["maxNewPerRun"] = max_new
    admitted: list[dict[str, Any]] = []
    for cand in cands:
        v = admit(cand, {**base, "admittedThisRun": len(admitted), "admittedItems": admitted})
        if v.admitted:
            admitted.append(cand)
    assert len(admitted) <= (MAX_NEW_PER_RUN if max_new is None else max_new)
