"""Unit tests for planning one steward run (`plan_run`, issue 10 point 2).

Pure: no Redis, no clock. Objectives, samples, items and proposals are plain camelCase
dicts unless a test is about the contracts. The tables pin what each disposition and each gap
decision dispatches; the properties pin determinism and that the audit drops nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from contracts.goals import Objective
from contracts.steward import ObjectiveOutcome, RunPlan, SampleRef
from pipeline.goals.dispatch_ids import candidate_dispatch_id, candidate_key, gap_dispatch_id
from pipeline.goals.steward import plan_run

DAY = 86_400_000
WEEK = 7 * DAY
NOW = 1_760_000_000_000
SEAT, OWNER, PEER = "scout", "mem_owner", "tally"
TITLES = (
    "Call the top ten accounts",
    "Refresh stale opportunity stages",
    "Book demos with trial users",
    "Audit lost deal reasons",
)


def objective(**over: Any) -> dict[str, Any]:
    """An active weekly objective on `pipeline`, stewarded by scout and owned by mem_owner."""
    return {
        "key": "pipeline",
        "state": "active",
        "ownerId": OWNER,
        "seatId": SEAT,
        "metric": "pipeline_coverage_x",
        "target": 3,
        "cadence": "weekly",
        **over,
    }


def candidate(title: str = "Close the pipeline coverage gap", **over: Any) -> dict[str, Any]:
    """A candidate every content gate passes: it advances `pipeline` and says why."""
    return {"title": title, "advances": ["pipeline"], "why": {"reason": "kpi-gap"}, **over}


def sample(value: float = 2, at_ms: int = NOW - DAY, source: str = "method") -> dict[str, Any]:
    return {"value": value, "source": source, "atMs": at_ms}


def plan(
    objectives: list[dict[str, Any]],
    samples: dict[str, Any] | None = None,
    open_items: list[dict[str, Any]] | None = None,
    spend: dict[str, Any] | None = None,
    now_ms: int = NOW,
    proposals: dict[str, Any] | None = None,
    policy: dict[str, Any] | None = None,
) -> RunPlan:
    """`plan_run` with a fresh off-target method sample on `pipeline` unless told otherwise."""
    return plan_run(
        objectives,
        {"pipeline": [sample()]} if samples is None else samples,
        open_items or [],
        spend or {},
        now_ms,
        proposals,
        policy=policy,
    )


def only(p: RunPlan) -> ObjectiveOutcome:
    assert len(p.outcomes) == 1
    return p.outcomes[0]


def candidate_entries(outcome: ObjectiveOutcome) -> list[Any]:
    return [e for e in outcome.audit if e.kind == "candidate"]


# --------------------------------------------------------------------------- what is dispatched


@pytest.mark.parametrize(
    ("over", "policy", "kind", "route", "target", "claim", "review"),
    [
        ({}, None, "backlog", "SELF", None, None, None),
        (
            {"collaborators": [{"memberId": "mem_ana", "role": "contributor"}]},
            None,
            "backlog",
            "COLLABORATE",
            "mem_ana",
            {"holderId": SEAT, "contributors": ["mem_ana"]},
            None,
        ),
        ({"ownerMemberId": PEER}, None, "engagement", "HANDOFF", PEER, None, None),
        (
            {"requiredCapabilities": ["ledger_write"]},
            {"peers": [{"memberId": PEER, "capabilities": ["ledger_write"]}]},
            "engagement",
            "HANDOFF",
            PEER,
            None,
            None,
        ),
        ({"actionClasses": ["External"]}, None, "backlog", "NEEDS_REVIEW", None, None, "approval"),
        ({"reviewBy": "mem_boss"}, None, "backlog", "NEEDS_REVIEW", "mem_boss", None, "review"),
    ],
    ids=["self", "collaborate", "handoff-owner", "handoff-peer", "review-gated", "review-by"],
)
def test_each_disposition_becomes_its_dispatch(
    over: dict[str, Any],
    policy: dict[str, Any] | None,
    kind: str,
    route: str,
    target: str | None,
    claim: dict[str, Any] | None,
    review: str | None,
) -> None:
    """An admitted candidate is dispatched as its disposition says, the audit naming the id."""
    outcome = only(plan([objective(playbook=[candidate(**over)])], policy=policy))
    (dispatch,) = outcome.dispatches
    (entry,) = candidate_entries(outcome)
    assert (dispatch.kind, dispatch.route, dispatch.target_id) == (kind, route, target)
    assert dispatch.seat_id == SEAT
    assert (dispatch.claim.to_wire() if dispatch.claim else None) == claim
    assert (dispatch.review.kind if dispatch.review else None) == review
    assert entry.admitted and entry.disposition == route and entry.dispatch_id == dispatch.id
    assert dispatch.decided_on == SampleRef(at_ms=NOW - DAY, source="method")


def test_a_collaborate_candidate_naming_an_issue_claims_that_issue() -> None:
    """A playbook candidate's optional `issueNumber` is carried onto its COLLABORATE claim,
    whose subject is then the issue (the one claim system); without it, the item."""
    over: dict[str, Any] = {
        "collaborators": [{"memberId": "mem_ana", "role": "contributor"}],
        "issueNumber": 42,
    }
    (dispatch,) = only(plan([objective(playbook=[candidate(**over)])])).dispatches
    assert dispatch.claim is not None and dispatch.claim.issue_number == 42
    assert dispatch.claim.to_wire()["issueNumber"] == 42
    assert dispatch.claim.subject(dispatch.id) == "issue:42"
    del over["issueNumber"]
    (plain,) = only(plan([objective(playbook=[candidate(**over)])])).dispatches
    assert plain.claim is not None and plain.claim.subject(plain.id) == f"item:{plain.id}"


def test_a_gated_review_carries_the_gated_classes_and_the_approver() -> None:
    """NEEDS_REVIEW attaches who signs and which gated classes made it need a signature."""
    over: dict[str, Any] = {
        "actionClasses": ["financial"],
        "collaborators": [{"memberId": "cfo", "role": "APPROVER"}],
    }
    (dispatch,) = only(plan([objective(playbook=[candidate(**over)])])).dispatches
    assert dispatch.review is not None
    assert dispatch.review.to_wire() == {
        "kind": "approval",
        "reason": "gated-action-class",
        "reviewerId": "cfo",
        "reviewers": [],
        "approvers": ["cfo"],
        "gatedClasses": ["financial"],
    }


FLAT = [sample(2, NOW - DAY), sample(2, NOW - DAY - 2 * WEEK)]
IMPROVING = [sample(2.5, NOW - DAY), sample(1, NOW - DAY - 2 * WEEK)]
IN_FLIGHT = [{"id": "item-1", "title": "Older unrelated push", "objectiveKey": "pipeline"}]


@pytest.mark.parametrize(
    ("samples", "open_items", "action", "kind", "title"),
    [
        (FLAT, IN_FLIGHT, "escalate", "engagement", 'Decision needed on "pipeline"'),
        ([sample(2, NOW - 3 * WEEK)], [], "drift", "backlog", "Restore the measurement"),
        ([], [], "drift", "backlog", "Restore the measurement"),
        ([sample(3)], [], "none", None, None),
        (IMPROVING, IN_FLIGHT, "log", None, None),
        ([sample(2)], [], "create", None, None),
    ],
    ids=["escalate", "drift-stale", "drift-no-sample", "none", "log", "create"],
)
def test_each_gap_decision_is_audited_and_escalate_and_drift_dispatch_to_the_owner(
    samples: list[dict[str, Any]],
    open_items: list[dict[str, Any]],
    action: str,
    kind: str | None,
    title: str | None,
) -> None:
    """The gap decision is one audit line; escalate asks the owner, drift gives them an item."""
    outcome = only(plan([objective()], {"pipeline": samples}, open_items))
    (entry,) = [e for e in outcome.audit if e.kind == "gap_decision"]
    assert outcome.decision is not None and outcome.decision.action == entry.action == action
    if kind is None:
        assert outcome.dispatches == () and entry.dispatch_id is None
        return
    (dispatch,) = outcome.dispatches
    assert (dispatch.kind, dispatch.route, dispatch.target_id) == (kind, action, OWNER)
    assert title is not None and dispatch.title.startswith(title)
    assert entry.dispatch_id == dispatch.id and dispatch.reason == outcome.decision.reason


def test_work_in_flight_refuses_new_candidates_at_the_trend_gate_while_escalating() -> None:
    """With work in flight and a flat trend the candidates are refused, not piled on."""
    outcome = only(plan([objective(playbook=[candidate()])], {"pipeline": FLAT}, IN_FLIGHT))
    (entry,) = candidate_entries(outcome)
    assert (entry.admitted, entry.gate) == (False, "trend")
    assert [d.route for d in outcome.dispatches] == ["escalate"]


def test_an_escalation_without_an_owner_is_noted_not_dispatched() -> None:
    """An objective with no ownerId has nobody to ask: the audit says so, nothing is sent."""
    outcome = only(plan([objective(ownerId=None)], {"pipeline": FLAT}, IN_FLIGHT))
    (entry,) = outcome.audit
    assert entry.action == "escalate" and entry.dispatch_id is None
    assert entry.note is not None and "nobody to ask" in entry.note
    assert outcome.dispatches == ()


def test_a_handoff_without_a_named_target_is_noted_not_dispatched() -> None:
    """A peer that covers a capability but names no member id cannot be handed anything."""
    policy = {"peers": [{"memberId": "", "capabilities": ["ledger_write"]}]}
    c = candidate(requiredCapabilities=["ledger_write"])
    outcome = only(plan([objective(playbook=[c])], policy=policy))
    (entry,) = candidate_entries(outcome)
    assert entry.admitted and entry.disposition == "HANDOFF" and entry.dispatch_id is None
    assert entry.note is not None and "nobody to hand it to" in entry.note
    assert outcome.dispatches == ()


# --------------------------------------------------------------------------- what is not run


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"state": "proposed"}, "is proposed, not active"),
        ({"state": "retired"}, "is retired, not active"),
        ({"seatId": None}, "no seat stewards it"),
    ],
)
def test_an_objective_that_is_not_run_says_why_and_audits_its_candidates(
    over: dict[str, Any], words: str
) -> None:
    """A proposed, retired or unstewarded objective is recorded as not run, never skipped."""
    outcome = only(plan([objective(playbook=[candidate()], **over)]))
    assert outcome.status == "not_run" and words in outcome.reason
    assert outcome.gap is None and outcome.decision is None and outcome.dispatches == ()
    assert [e.kind for e in outcome.audit] == ["not_run", "candidate"]
    (entry,) = candidate_entries(outcome)
    assert entry.admitted is False and entry.gate is None
    assert entry.reason.startswith("not judged: ") and words in entry.reason


def test_adopted_by_stewards_an_objective_without_a_seat_id() -> None:
    """`adoptedBy` names the steward seat when `seatId` is not given."""
    outcome = only(plan([objective(seatId=None, adoptedBy="pilot", playbook=[candidate()])]))
    assert outcome.status == "run" and outcome.seat_id == "pilot"
    assert outcome.dispatches[0].seat_id == "pilot"


# --------------------------------------------------------------------------- candidates


def test_a_proposer_failure_is_recorded_and_the_playbook_still_used() -> None:
    """An unreachable proposer is a proposer_failed audit line; the playbook still admits."""
    proposals = {"pipeline": {"failures": [{"reason": "connect timeout", "proposer": "http://p"}]}}
    outcome = only(plan([objective(playbook=[candidate()])], proposals=proposals))
    assert [f.reason for f in outcome.proposer_failures] == ["connect timeout"]
    (failed,) = [e for e in outcome.audit if e.kind == "proposer_failed"]
    assert failed.reason == "connect timeout" and failed.note is not None
    assert "http://p" in failed.note
    (entry,) = candidate_entries(outcome)
    assert (entry.source, entry.admitted) == ("playbook", True)
    assert [d.route for d in outcome.dispatches] == ["SELF"]


def test_proposer_candidates_follow_the_playbook_and_pass_the_same_gates() -> None:
    """A proposer's flat candidates come after the playbook and are judged like any other."""
    proposals = {
        "pipeline": {
            "candidates": [
                {"source": "proposer", **candidate(TITLES[0])},
                {"source": "proposer", "title": TITLES[1], "advances": ["pipeline"]},
            ]
        }
    }
    outcome = only(plan([objective(playbook=[candidate()])], proposals=proposals))
    entries = candidate_entries(outcome)
    assert [(e.source, e.admitted) for e in entries] == [
        ("playbook", True),
        ("proposer", True),
        ("proposer", False),
    ]
    assert entries[2].gate == "provenance"


def test_playbook_tagged_proposals_stand_for_the_objectives_playbook() -> None:
    """A shell that passes the playbook itself does not get every template judged twice."""
    proposals = {"pipeline": {"candidates": [{"source": "playbook", **candidate(TITLES[0])}]}}
    outcome = only(plan([objective(playbook=[candidate()])], proposals=proposals))
    assert [e.candidate_title for e in candidate_entries(outcome)] == [TITLES[0]]


@pytest.mark.parametrize("cap", [0, 1, 2, 3])
def test_max_new_per_run_is_respected_across_the_run(cap: int) -> None:
    """Of four distinct candidates only `maxNewPerRun` are admitted; the rest fail at wip."""
    obj = objective(playbook=[candidate(t) for t in TITLES])
    outcome = only(plan([obj], policy={"maxNewPerRun": cap}))
    entries = candidate_entries(outcome)
    assert [e.admitted for e in entries] == [i < cap for i in range(4)]
    assert all(e.gate == "wip" for e in entries[cap:])
    assert len(outcome.dispatches) == cap


def test_the_default_cap_admits_two_and_says_so() -> None:
    """Without a policy the default MAX_NEW_PER_RUN of 2 holds, and the reason says so."""
    outcome = only(plan([objective(playbook=[candidate(t) for t in TITLES])]))
    entries = candidate_entries(outcome)
    assert [e.admitted for e in entries] == [True, True, False, False]
    assert entries[2].reason == "2 item(s) already admitted this run ≥ cap 2"


def test_a_near_duplicate_of_a_candidate_admitted_earlier_in_the_run_is_refused() -> None:
    """The second of two near-identical candidates fails dedupe against the first."""
    twins = [candidate(), candidate("Close the pipeline coverage gap now")]
    outcome = only(plan([objective(playbook=twins)]))
    first, second = candidate_entries(outcome)
    assert first.admitted and (second.admitted, second.gate) == (False, "dedupe")
    assert second.reason == (
        '"Close the pipeline coverage gap now" is 83% similar to "Close the pipeline coverage gap"'
    )
    assert len(outcome.dispatches) == 1


def test_two_admitted_candidates_with_one_key_get_distinct_ids() -> None:
    """Titles dedupe cannot compare (no word of three letters) still dispatch under two ids."""
    outcome = only(plan([objective(playbook=[candidate("QA"), candidate("qa!")])]))
    assert [e.candidate_key for e in candidate_entries(outcome)] == ["qa", "qa"]
    ids = [d.id for d in outcome.dispatches]
    assert len(ids) == 2 and len(set(ids)) == 2


def test_the_budget_gate_reads_budget_micros_minus_spend() -> None:
    """900k of a 1M envelope spent leaves 100k: a 200k estimate is refused in micros, 20c too."""
    obj = objective(
        budgetMicros=1_000_000,
        playbook=[candidate(TITLES[0], estMicros=200_000), candidate(TITLES[1], estCents=20)],
    )
    outcome = only(plan([obj], spend={"pipeline": "900000"}))
    assert outcome.remaining_micros == 100_000
    micros, cents = candidate_entries(outcome)
    assert (micros.gate, cents.gate) == ("budget", "budget")
    assert micros.reason == "estimate 200000 micros exceeds the remaining envelope 100000 micros"
    assert cents.reason == "estimate 20c exceeds the remaining envelope 10c"


def test_a_stale_mandate_cache_refuses_every_candidate_at_freshness() -> None:
    """The policy's mandate staleness feeds the freshness gate, the first of the eight."""
    outcome = only(
        plan(
            [objective(playbook=[candidate()])], policy={"mandateStaleness": {"outcome": "partial"}}
        )
    )
    (entry,) = candidate_entries(outcome)
    assert (entry.admitted, entry.gate) == (False, "freshness")
    assert [c.gate for c in entry.checks] == ["freshness"]


def test_an_llm_sample_admits_nothing() -> None:
    """An llm-sourced latest sample is advisory: candidates fail the honesty gate."""
    outcome = only(plan([objective(playbook=[candidate()])], {"pipeline": [sample(source="llm")]}))
    assert candidate_entries(outcome)[0].gate == "honesty" and outcome.dispatches == ()


# --------------------------------------------------------------------------- ids


STALE = sample(2, NOW - 3 * WEEK)


def test_the_drift_item_id_is_stable_across_runs_and_unique_per_stale_sample() -> None:
    """Two runs on one stale sample give one id; another stale sample gives another."""
    first = only(plan([objective()], {"pipeline": [STALE]}, now_ms=NOW)).dispatches[0]
    later = only(plan([objective()], {"pipeline": [STALE]}, now_ms=NOW + DAY)).dispatches[0]
    other = sample(2, NOW - 4 * WEEK)
    elsewhere = only(plan([objective()], {"pipeline": [other]})).dispatches[0]
    human = only(plan([objective()], {"pipeline": [{**STALE, "source": "human"}]})).dispatches[0]
    assert first.route == later.route == "drift" and first.id == later.id
    assert len({first.id, elsewhere.id, human.id}) == 3
    assert first.id == gap_dispatch_id(
        "pipeline", "drift", SampleRef(at_ms=NOW - 3 * WEEK, source="method")
    )


def test_an_open_drift_item_is_not_dispatched_again() -> None:
    """When the restore item for this stale sample is already open, the run only notes it."""
    drift_id = only(plan([objective()], {"pipeline": [STALE]})).dispatches[0].id
    open_items = [{"id": drift_id, "title": "Restore the measurement", "objectiveKey": "pipeline"}]
    outcome = only(plan([objective()], {"pipeline": [STALE]}, open_items))
    assert outcome.dispatches == ()
    assert outcome.audit[0].note == f"restore item {drift_id} is already open"


def test_one_open_drift_item_per_objective_whatever_the_drifts_reason() -> None:
    """A restore item opened for "no measurement" stops a later "sensor is stale" drift (and
    one opened for a stale sample a drift on another stale sample) from opening a second."""
    missing = only(plan([objective()], {"pipeline": []}))
    assert missing.decision is not None and missing.decision.reason.startswith("no measurement")
    (restore,) = missing.dispatches
    open_items = [
        {"id": restore.id, "title": restore.title, "objectiveKey": "pipeline", "route": "drift"}
    ]
    stale = only(plan([objective()], {"pipeline": [STALE]}, open_items))
    assert stale.decision is not None and stale.decision.reason.startswith("sensor is stale")
    assert stale.dispatches == ()
    assert stale.audit[0].note == f"restore item {restore.id} is already open"
    older = sample(2, NOW - 4 * WEEK)
    on_stale = only(plan([objective()], {"pipeline": [older]})).dispatches[0]
    open_stale = [{**open_items[0], "id": on_stale.id}]
    assert only(plan([objective()], {"pipeline": [STALE]}, open_stale)).dispatches == ()


def test_a_closed_drift_item_does_not_stop_a_new_one() -> None:
    """Once the restore item is done, the next drift (on another sample) opens a new one."""
    restore = only(plan([objective()], {"pipeline": []})).dispatches[0]
    done = [
        {
            "id": restore.id,
            "title": restore.title,
            "objectiveKey": "pipeline",
            "route": "drift",
            "state": "done",
        }
    ]
    (again,) = only(plan([objective()], {"pipeline": [STALE]}, done)).dispatches
    assert again.route == "drift" and again.id != restore.id


def test_candidate_ids_depend_on_objective_candidate_and_sample_only() -> None:
    """A rerun later, or with reordered candidates, gives each candidate the same id."""
    ab = [candidate(TITLES[0]), candidate(TITLES[1])]
    first = only(plan([objective(playbook=ab)]))
    again = only(plan([objective(playbook=ab[::-1])], now_ms=NOW + 60_000))
    assert {d.title: d.id for d in first.dispatches} == {d.title: d.id for d in again.dispatches}
    ref = SampleRef(at_ms=NOW - DAY, source="method")
    assert first.dispatches[0].id == candidate_dispatch_id("pipeline", TITLES[0], ref)
    assert candidate_key("  Call the TOP-ten accounts!! ") == "call-the-top-ten-accounts"
    assert candidate_dispatch_id("pipeline", "Call the TOP-ten accounts!!", ref) == (
        candidate_dispatch_id("pipeline", TITLES[0], ref)
    )
    newer = SampleRef(at_ms=NOW, source="method")
    assert candidate_dispatch_id("pipeline", TITLES[0], newer) != first.dispatches[0].id
    assert candidate_dispatch_id("other", TITLES[0], ref) != first.dispatches[0].id


# --------------------------------------------------------------------------- inputs and wire


def test_contracts_and_camel_case_mappings_plan_alike() -> None:
    """The planner reads contracts and plain camelCase mappings the same way."""
    obj = objective(playbook=[candidate()])
    assert plan_run([Objective.model_validate(obj)], {"pipeline": [sample()]}, [], {}, NOW) == (
        plan([obj])
    )


@pytest.mark.parametrize(
    "bad",
    [
        {"spend": {"pipeline": 1.5}},
        {"spend": {"pipeline": True}},
        {"spend": {"pipeline": -1}},
        {"objectives": [objective(), objective()]},
        {"now_ms": 1.0},
    ],
    ids=["float-spend", "bool-spend", "negative-spend", "duplicate-key", "float-now"],
)
def test_bad_inputs_are_refused_naming_the_field(bad: dict[str, Any]) -> None:
    """Floats or booleans for money or time, and repeated objective keys, are refused."""
    args: dict[str, Any] = {"objectives": [objective()], "spend": {}, "now_ms": NOW, **bad}
    with pytest.raises(ValidationError):
        plan(args["objectives"], spend=args["spend"], now_ms=args["now_ms"])


def test_the_plan_is_camel_case_on_the_wire_with_totals() -> None:
    """`to_wire()` is camelCase, and the totals count the run."""
    wire = plan(
        [objective(playbook=[candidate()]), objective(key="other", state="proposed")]
    ).to_wire()
    assert set(wire) == {"nowMs", "outcomes", "totals"}
    assert wire["totals"] == {
        "objectives": 2,
        "run": 1,
        "notRun": 1,
        "candidates": 1,
        "admitted": 1,
        "rejected": 0,
        "dispatches": 1,
        "proposerFailures": 0,
    }
    dispatch = wire["outcomes"][0]["dispatches"][0]
    assert {"objectiveKey", "seatId", "targetId", "candidateKey", "decidedOn"} <= set(dispatch)


# --------------------------------------------------------------------------- properties


CANDIDATES = st.lists(
    st.builds(
        lambda title, extra: candidate(title, **extra),
        st.sampled_from((*TITLES, "Close the pipeline coverage gap", "QA", "")),
        st.sampled_from(
            (
                {},
                {"ownerMemberId": PEER},
                {"reviewBy": "mem_boss"},
                {"estMicros": 500_000},
                {"collaborators": [{"memberId": "mem_ana", "role": "CONTRIBUTOR"}]},
                {"advances": []},
            )
        ),
    ),
    max_size=6,
)
OBJECTIVES = st.lists(
    st.tuples(
        st.sampled_from(("active", "active", "proposed", "retired")),
        CANDIDATES,
        CANDIDATES,
        st.sampled_from(([], [sample()], [sample(source="llm")], FLAT, [STALE], IMPROVING)),
        st.booleans(),
    ),
    min_size=1,
    max_size=4,
)


def build(spec: list[Any]) -> dict[str, Any]:
    """plan_run's arguments for a list of (state, playbook, proposed, samples, in_flight)."""
    objectives, samples, items, proposals = [], {}, [], {}
    for n, (state, playbook, proposed, obj_samples, in_flight) in enumerate(spec):
        key = f"obj{n}"
        objectives.append(
            objective(key=key, state=state, budgetMicros=1_000_000, playbook=playbook)
        )
        samples[key] = obj_samples
        proposals[key] = {"candidates": [{"source": "proposer", **c} for c in proposed]}
        items += [{"id": f"{key}-1", "title": "Older push", "objectiveKey": key}] * in_flight
    return {
        "objectives": objectives,
        "samples": samples,
        "open_items": items,
        "spend": {o["key"]: 600_000 for o in objectives},
        "now_ms": NOW,
        "proposals": proposals,
    }


@settings(max_examples=60, deadline=None)
@given(OBJECTIVES)
def test_the_same_inputs_give_the_same_plan_and_ids(spec: list[Any]) -> None:
    """Planning twice gives equal plans and ids, and no two dispatches share an id."""
    first, second = plan_run(**build(spec)), plan_run(**build(spec))
    assert first == second and first.to_wire() == second.to_wire()
    ids = [d.id for d in first.dispatches]
    assert ids == [d.id for d in second.dispatches] and len(ids) == len(set(ids))


@settings(max_examples=60, deadline=None)
@given(OBJECTIVES)
def test_every_candidate_appears_exactly_once_in_the_audit(spec: list[Any]) -> None:
    """Each objective's audit lists its playbook then its proposals, each once, in order."""
    p = plan_run(**build(spec))
    for (state, playbook, proposed, _, _), outcome in zip(spec, p.outcomes, strict=True):
        entries = candidate_entries(outcome)
        expected = [("playbook", c["title"]) for c in playbook]
        expected += [("proposer", c["title"]) for c in proposed]
        assert [(e.source, e.candidate_title) for e in entries] == expected
        assert sum(e.kind == "gap_decision" for e in outcome.audit) == (state == "active")
        assert sum(e.admitted is True for e in entries) <= 2
        assert {d.id for d in outcome.dispatches} >= {e.dispatch_id for e in entries} - {None}
    assert p.totals.candidates == sum(len(s[1]) + len(s[2]) for s in spec)
    assert p.totals.admitted + p.totals.rejected == p.totals.candidates


def test_an_open_drift_item_is_not_work_in_flight() -> None:
    """Once the sensor is back, the open "restore the measurement" item neither counts as
    coverage (the gap says create, not log) nor holds a place under the caps."""
    drift = {"id": "stw_drift", "title": "Restore", "objectiveKey": "pipeline", "route": "drift"}
    outcome = only(plan([objective(playbook=[candidate()])], None, [drift]))
    assert outcome.decision is not None and outcome.decision.action == "create"
    assert [d.route for d in outcome.dispatches] == ["SELF"]
