"""Unit tests for operator overrides of the steward's gates (issue 10 point 5). Pure.

`admit(..., overridden=...)` passes the overridable gates (wip, trend, budget) that would
refuse, saying so in the trail; `plan_run(..., overrides=...)` gives an active override to the
first candidate of its key; `check_override` / `against_active` decide whether a request may
be recorded, each refusal naming its field.
"""

from __future__ import annotations

from typing import Any

import pytest

from contracts.goals import Admission, Objective
from contracts.steward import OVERRIDABLE_GATES, OverriddenAdmission, OverrideRequest, RunPlan
from pipeline.goals.admission import GATES, admit, overridden_gates
from pipeline.goals.dispatch_ids import candidate_key
from pipeline.goals.overrides import (
    OverrideRefusal,
    against_active,
    check_override,
    override_audit_entry,
    override_id,
)
from pipeline.goals.steward import plan_run

DAY = 86_400_000
NOW = 1_760_000_000_000
TITLE = "Close the pipeline coverage gap"
KEY = candidate_key(TITLE)


def objective(**over: Any) -> dict[str, Any]:
    """An active weekly objective on `pipeline` stewarded by scout, one playbook entry."""
    return {
        "key": "pipeline",
        "state": "active",
        "ownerId": "owner",
        "seatId": "scout",
        "metric": "pipeline_coverage_x",
        "target": 3,
        "cadence": "weekly",
        "playbook": [candidate()],
        **over,
    }


def candidate(title: str = TITLE, **over: Any) -> dict[str, Any]:
    return {"title": title, "advances": ["pipeline"], "why": {"reason": "kpi-gap"}, **over}


def ctx(**over: Any) -> dict[str, Any]:
    """A context every gate passes: active, method sample, off target, nothing open."""
    return {
        "objective": {"key": "pipeline", "state": "active"},
        "gap": {"gap": 1, "withinTolerance": False, "trend": "flat"},
        "latestSample": {"source": "method"},
        "openItems": [],
        **over,
    }


def override(gates: tuple[str, ...] = OVERRIDABLE_GATES, **over: Any) -> dict[str, Any]:
    return {
        "id": "ovr_1",
        "objectiveKey": "pipeline",
        "candidateKey": KEY,
        "candidateTitle": TITLE,
        "gates": list(gates),
        "by": "ava",
        "reason": "the quarter ends Friday",
        "atMs": NOW - 1,
        **over,
    }


def plan(
    obj: dict[str, Any],
    *,
    overrides: list[dict[str, Any]],
    source: str = "method",
    open_items: list[dict[str, Any]] | None = None,
    spend: dict[str, Any] | None = None,
    policy: dict[str, Any] | None = None,
) -> RunPlan:
    samples = {"pipeline": [{"value": 2, "source": source, "atMs": NOW - DAY}]}
    return plan_run(
        [obj], samples, open_items or [], spend or {}, NOW, policy=policy, overrides=overrides
    )


# --------------------------------------------------------------------------- admit


def test_admit_without_overrides_is_the_seed_admission() -> None:
    """With no `overridden` the verdict is the plain `Admission`, wire shape unchanged."""
    refused = admit(candidate(), ctx(maxNewPerRun=0, admittedThisRun=0))
    assert type(refused) is Admission and refused.gate == "wip"
    assert "overridden" not in refused.to_wire()
    assert admit(candidate(), ctx(), overridden=()) == admit(candidate(), ctx())


@pytest.mark.parametrize(
    ("gate", "context", "would"),
    [
        ("wip", ctx(maxNewPerRun=0), "0 item(s) already admitted this run ≥ cap 0"),
        ("trend", ctx(openItems=[{"title": "unrelated work"}]), "1 item(s) already in flight"),
        ("budget", ctx(remainingMicros=10), "estimate 500 micros exceeds"),
    ],
)
def test_an_overridden_gate_that_would_refuse_passes_and_says_so(
    gate: str, context: dict[str, Any], would: str
) -> None:
    """The overridden gate's check passes, says what it would have said, and judging goes on."""
    c = candidate(estMicros=500)
    assert admit(c, context).gate == gate  # refused without the override
    verdict = admit(c, context, overridden=[gate])
    assert isinstance(verdict, OverriddenAdmission)
    assert verdict.admitted and verdict.gate is None
    assert [ch.gate for ch in verdict.checks] == list(GATES)
    check = next(ch for ch in verdict.checks if ch.gate == gate)
    assert check.ok and check.detail.startswith("overridden — would have refused: ")
    assert would in check.detail
    assert verdict.overridden == (gate,) and overridden_gates(verdict) == (gate,)
    assert verdict.to_wire()["overridden"] == [gate]
    assert verdict.reason == f"all gates passed, {gate} by override"


def test_an_override_that_was_not_needed_names_no_gate() -> None:
    """Gates that pass anyway are not "overridden": the verdict names none, the wire omits it."""
    verdict = admit(candidate(), ctx(), overridden=OVERRIDABLE_GATES)
    assert verdict.admitted and overridden_gates(verdict) == ()
    assert "overridden" not in verdict.to_wire()
    assert all(not ch.detail.startswith("overridden") for ch in verdict.checks)


def test_an_override_never_passes_honesty() -> None:
    """An llm sample still refuses at honesty with every overridable gate overridden."""
    verdict = admit(candidate(), ctx(latestSample={"source": "llm"}), overridden=OVERRIDABLE_GATES)
    assert not verdict.admitted and verdict.gate == "honesty"


@pytest.mark.parametrize("gate", ["freshness", "adoption", "honesty", "provenance", "dedupe"])
def test_overriding_another_gate_is_a_value_error(gate: str) -> None:
    """Only wip, trend and budget can be overridden; naming another is a ValueError."""
    with pytest.raises(ValueError, match=gate):
        admit(candidate(), ctx(), overridden=[gate])  # type: ignore[list-item]  # any str, on purpose


# --------------------------------------------------------------------------- plan_run


@pytest.mark.parametrize(
    ("gate", "kwargs"),
    [
        ("wip", {"policy": {"maxNewPerRun": 0}}),
        ("trend", {"open_items": [{"id": "b1", "title": "unrelated", "objectiveKey": "pipeline"}]}),
        ("budget", {"spend": {"pipeline": 900}}),
    ],
)
def test_an_override_admits_a_rejected_candidate_and_the_audit_says_who(
    gate: str, kwargs: dict[str, Any]
) -> None:
    """Refused by `gate` without it; with an override the candidate is dispatched, the
    dispatch names the override to consume and the audit line who, why and which gate."""
    obj = objective(budgetMicros=1000, playbook=[candidate(estMicros=500)])
    (before,) = [e for e in plan(obj, overrides=[], **kwargs).audit if e.kind == "candidate"]
    assert before.gate == gate and before.override is None
    p = plan(obj, overrides=[override()], **kwargs)
    (entry,) = [e for e in p.audit if e.kind == "candidate"]
    assert entry.admitted and entry.dispatch_id is not None
    assert entry.override is not None
    assert (entry.override.by, entry.override.reason) == ("ava", "the quarter ends Friday")
    assert entry.override.gates == (gate,) and entry.override.id == "ovr_1"
    (dispatch,) = [d for d in p.dispatches if d.candidate_key == KEY]
    assert dispatch.override is not None and dispatch.override.id == "ovr_1"
    assert dispatch.override.candidate_key == KEY and dispatch.id == entry.dispatch_id
    assert p.totals.admitted == 1


def test_an_override_never_admits_an_honesty_rejected_candidate() -> None:
    """An llm sample refuses at honesty; the override is not used and the note says why."""
    p = plan(objective(), overrides=[override()], source="llm")
    (entry,) = [e for e in p.audit if e.kind == "candidate"]
    assert not entry.admitted and entry.gate == "honesty" and entry.override is None
    assert entry.note is not None and "ovr_1" in entry.note and "honesty" in entry.note
    assert all(d.override is None for d in p.dispatches)


def test_an_override_of_other_gates_does_not_pass_this_one() -> None:
    """A budget-only override leaves a wip refusal standing."""
    p = plan(objective(), overrides=[override(gates=("budget",))], policy={"maxNewPerRun": 0})
    (entry,) = [e for e in p.audit if e.kind == "candidate"]
    assert entry.gate == "wip" and entry.override is None and not p.dispatches


def test_an_override_is_used_by_the_first_candidate_of_its_key_only() -> None:
    """Two candidates of one key: the first uses the override, the repeat is judged plainly,
    and the override counts toward admittedThisRun."""
    obj = objective(playbook=[candidate(), candidate("Write the quarterly memo")])
    proposals = {"pipeline": {"candidates": [{"source": "proposer", **candidate()}]}}
    samples = {"pipeline": [{"value": 2, "source": "method", "atMs": NOW - DAY}]}
    p = plan_run(
        [obj], samples, [], {}, NOW, proposals, policy={"maxNewPerRun": 0}, overrides=[override()]
    )
    entries = [e for e in p.audit if e.kind == "candidate"]
    assert [(e.candidate_key, e.admitted) for e in entries] == [
        (KEY, True),
        (candidate_key("Write the quarterly memo"), False),
        (KEY, False),
    ]
    assert [e.override is not None for e in entries] == [True, False, False]
    assert len([d for d in p.dispatches if d.override is not None]) == 1


def test_used_and_foreign_overrides_are_ignored() -> None:
    """A used override, or one for an objective not in the run, changes nothing."""
    used = override(usedBy="stw_x", usedAtMs=NOW - 1)
    foreign = override(id="ovr_2", objectiveKey="other")
    with_them = plan(objective(), overrides=[used, foreign], policy={"maxNewPerRun": 0})
    assert with_them == plan(objective(), overrides=[], policy={"maxNewPerRun": 0})


def test_plan_run_with_overrides_is_deterministic() -> None:
    """The same inputs, overrides included, plan the same run."""
    args: dict[str, Any] = {"overrides": [override()], "policy": {"maxNewPerRun": 0}}
    assert plan(objective(), **args) == plan(objective(), **args)


# --------------------------------------------------------------------------- check_override


MEMBERS = ("ava", "ben")


def request(**over: Any) -> OverrideRequest:
    body = {"objective": "pipeline", "candidate": TITLE.upper(), "by": "ava", "reason": "ship it"}
    return OverrideRequest.model_validate({**body, **over})


def check(req: OverrideRequest, obj: dict[str, Any] | None, rejected: tuple[str, ...] = ()) -> Any:
    o = None if obj is None else Objective.model_validate(obj)
    return check_override(req, o, member_ids=MEMBERS, rejected_titles=rejected, now_ms=NOW)


def test_a_valid_request_becomes_an_active_override_of_the_known_title() -> None:
    """The title is matched by candidate key and stored as the playbook writes it."""
    ov = check(request(gates=["budget"]), objective())
    assert ov.candidate_title == TITLE and ov.candidate_key == KEY and ov.active
    assert ov.gates == ("budget",) and ov.at_ms == NOW and ov.by == "ava"
    assert ov.id == override_id("pipeline", KEY, "ava", "ship it", ("budget",), NOW)


def test_a_title_the_audit_rejected_is_known_too() -> None:
    """A proposer's candidate, known only from the audit, can be overridden."""
    ov = check(request(candidate="book demos"), objective(), rejected=("Book demos",))
    assert ov.candidate_title == "Book demos"


@pytest.mark.parametrize(
    ("req", "obj", "status", "code", "field"),
    [
        (request(), None, 404, "unknown_objective", "objective"),
        (request(), objective(state="proposed"), 409, "objective_not_active", "objective"),
        (request(by="zed"), objective(), 422, "unknown_member", "by"),
        (request(candidate="Something else"), objective(), 422, "unknown_candidate", "candidate"),
        (request(candidate="!!!"), objective(), 422, "unknown_candidate", "candidate"),
    ],
)
def test_each_refusal_names_its_field(
    req: OverrideRequest, obj: dict[str, Any] | None, status: int, code: str, field: str
) -> None:
    """Unknown objective, not active, not a member, unknown candidate: refused by field."""
    assert check(req, obj) == OverrideRefusal(status, code, field, check(req, obj).message)
    assert field in ("objective", "by", "candidate")


@pytest.mark.parametrize(
    "body",
    [
        {"gates": ["honesty"]},
        {"gates": []},
        {"reason": "x" * 501},
        {"reason": "   "},
        {"by": 7},
        {"extra": 1},
    ],
)
def test_the_request_model_is_strict(body: dict[str, Any]) -> None:
    """A gate that cannot be overridden, no gate, a long or blank reason, unknown keys: refused."""
    with pytest.raises(ValueError):
        request(**body)


def test_against_active_recorded_duplicate_or_conflict() -> None:
    """No or a used override: recorded; the same one: duplicate; a different one: 409."""
    new = check(request(), objective())
    assert against_active(new, None) == "recorded"
    assert against_active(new, new.model_copy(update={"used_by": "stw_1"})) == "recorded"
    assert against_active(new, new.model_copy(update={"id": "ovr_old", "at_ms": 1})) == "duplicate"
    other = new.model_copy(update={"by": "ben"})
    refusal = against_active(new, other)
    assert isinstance(refusal, OverrideRefusal)
    assert (refusal.status, refusal.code, refusal.field) == (409, "override_exists", "candidate")


def test_the_override_audit_line_says_who_why_and_which_gates() -> None:
    """The request's own audit line is kind `override`, naming by, reason and gates."""
    ov = check(request(gates=["wip", "trend"]), objective())
    entry = override_audit_entry(ov)
    assert entry.kind == "override" and entry.candidate_key == KEY
    assert entry.override is not None and entry.override.by == "ava"
    assert entry.override.gates == ("wip", "trend") and entry.reason == "ship it"


@pytest.mark.parametrize("gate", ["honesty", "provenance", "dedupe", "freshness"])
def test_a_candidate_last_refused_at_a_gate_no_override_passes_is_refused(gate: str) -> None:
    """An override could never let through a candidate whose newest refusal was at honesty
    (or any gate but wip, trend, budget): 409 `not_overridable`, naming that gate."""
    o = Objective.model_validate(objective())
    refused = check_override(
        request(),
        o,
        member_ids=MEMBERS,
        rejected_titles=(),
        now_ms=NOW,
        last_gates={candidate_key(TITLE): gate},  # type: ignore[dict-item]  # a parametrized str
    )
    assert isinstance(refused, OverrideRefusal)
    assert (refused.status, refused.code, refused.field) == (409, "not_overridable", "candidate")
    assert f"the {gate} gate" in refused.message


def test_a_candidate_last_refused_at_an_overridable_gate_is_accepted() -> None:
    o = Objective.model_validate(objective())
    for gate in (*OVERRIDABLE_GATES, None):
        made = check_override(
            request(),
            o,
            member_ids=MEMBERS,
            rejected_titles=(),
            now_ms=NOW,
            last_gates={candidate_key(TITLE): gate},
        )
        assert not isinstance(made, OverrideRefusal), gate
