"""Unit tests for staffing self-directed work (docs/architecture.md): whose hands it needs.

Pure. The first block is one case per rule; the rest pin `collaborators_of`, the wire shape
and the contracts.
"""

from __future__ import annotations

from typing import Any

from contracts.goals import Collaborator, Objective, Peer, WorkCandidate
from pipeline.goals import (
    GATED_CLASSES,
    WORK_DISPOSITIONS,
    capability_gaps,
    classify_work_item,
    collaborators_of,
    is_work_disposition,
)

ME = "mem_self"
PEER = "mem_peer"
BOSS = "mem_boss"

OBJ: dict[str, Any] = {"key": "pipeline", "state": "active", "collaborators": []}
REACHABLE = {"crm_list_deals", "task_create"}


def ctx(**over: Any) -> dict[str, Any]:
    """This seat's context: it reaches the CRM and tasks, and has no peers."""
    return {"memberId": ME, "objective": OBJ, "reachable": REACHABLE, "peers": [], **over}


# --------------------------------------------------------------------------- one case per rule


def test_the_four_dispositions_are_the_whole_vocabulary() -> None:
    """SELF, COLLABORATE, HANDOFF and NEEDS_REVIEW are the dispositions; inbound ones are not."""
    assert list(WORK_DISPOSITIONS) == ["SELF", "COLLABORATE", "HANDOFF", "NEEDS_REVIEW"]
    assert is_work_disposition("SELF")
    assert not is_work_disposition("react_now")


def test_self_when_mine_alone_ungated_and_reachable() -> None:
    """Work with no collaborator, no gate and every capability reachable is SELF."""
    c = classify_work_item(
        {"title": "Raise coverage", "requiredCapabilities": ["crm_list_deals"]}, ctx()
    )
    assert c.disposition == "SELF"
    assert c.reason == "self"
    assert c.capability_gap is None


def test_handoff_when_another_seat_owns_the_work() -> None:
    """Work owned outright by another seat is handed to that seat."""
    c = classify_work_item({"title": "x", "ownerMemberId": PEER}, ctx())
    assert c.disposition == "HANDOFF"
    assert c.target == PEER
    assert c.reason == "owned-by-another-seat"


def test_handoff_when_a_collaborator_is_the_doer() -> None:
    """A collaborator carrying role DOER does the work; this seat hands it over."""
    c = classify_work_item(
        {"title": "x", "collaborators": [{"memberId": PEER, "role": "DOER"}]}, ctx()
    )
    assert c.disposition == "HANDOFF"
    assert c.target == PEER


def test_handoff_when_only_a_peer_reaches_a_capability() -> None:
    """A capability this seat cannot reach but a peer declares sends the work to that peer."""
    c = classify_work_item(
        {"title": "Post to the ledger", "requiredCapabilities": ["books_invoices"]},
        ctx(peers=[{"memberId": PEER, "capabilities": ["books_invoices"]}]),
    )
    assert c.disposition == "HANDOFF"
    assert c.target == PEER
    assert c.reason == "capability-only-reachable-by-peer"


def test_needs_review_when_gated_even_if_collaborative() -> None:
    """A gated action class outranks a named contributor: the work needs review first."""
    c = classify_work_item(
        {
            "title": "Email the customer base",
            "actionClasses": ["external"],
            "collaborators": [{"memberId": PEER, "role": "CONTRIBUTOR"}],
        },
        ctx(),
    )
    assert c.disposition == "NEEDS_REVIEW"
    assert c.gated_classes == ("external",)
    assert c.reason == "gated-action-class"


def test_needs_review_for_a_named_approver_and_an_objective_level_reviewer() -> None:
    """A named APPROVER, or a REVIEWER on the objective, makes the work need review."""
    approver = classify_work_item(
        {"title": "x", "collaborators": [{"memberId": BOSS, "role": "APPROVER"}]}, ctx()
    )
    assert approver.disposition == "NEEDS_REVIEW"
    assert approver.target == BOSS

    reviewed = {**OBJ, "collaborators": [{"memberId": PEER, "role": "REVIEWER"}]}
    reviewer = classify_work_item({"title": "x"}, ctx(objective=reviewed))
    assert reviewer.disposition == "NEEDS_REVIEW"
    assert reviewer.target == PEER
    assert reviewer.reason == "review-required"


def test_collaborate_with_a_named_contributor() -> None:
    """A named contributor working alongside this seat makes the work COLLABORATE."""
    c = classify_work_item(
        {"title": "x", "collaborators": [{"memberId": PEER, "role": "CONTRIBUTOR"}]}, ctx()
    )
    assert c.disposition == "COLLABORATE"
    assert c.contributors == (PEER,)


def test_a_collaborator_who_is_me_never_makes_my_work_a_handoff() -> None:
    """This seat named as DOER and REVIEWER of its own work leaves the work SELF."""
    mine = [{"memberId": ME, "role": "DOER"}, {"memberId": ME, "role": "REVIEWER"}]
    assert classify_work_item({"title": "x", "collaborators": mine}, ctx()).disposition == "SELF"


def test_a_missing_capability_without_peer_cover_stays_self_and_carries_the_gap() -> None:
    """An unreachable capability no peer declares stays SELF, with the gap recorded."""
    c = classify_work_item({"title": "x", "requiredCapabilities": ["stripe_refund"]}, ctx())
    assert c.disposition == "SELF"
    assert c.reason == "self-with-capability-gap"
    assert c.capability_gap is not None
    assert c.capability_gap.uncovered == ("stripe_refund",)
    assert "capability gap with no peer cover" in " ".join(c.why)


def test_capability_gaps_splits_missing_into_peer_covered_and_uncovered() -> None:
    """Each missing capability goes to the first peer in order that declares it."""
    g = capability_gaps(
        ["a", "b", "c"],
        ["a"],
        [{"memberId": "p1", "capabilities": ["b"]}, {"memberId": "p2", "capabilities": ["b", "c"]}],
    )
    assert g.missing == ("b", "c")
    assert [p.to_wire() for p in g.covered_by_peer] == [
        {"capability": "b", "memberId": "p1"},
        {"capability": "c", "memberId": "p2"},
    ]
    assert g.uncovered == ()


# --------------------------------------------------------------------------- collaborators_of


def test_collaborators_of_matches_roles_case_insensitively() -> None:
    """`doer` and ` Reviewer ` are DOER and REVIEWER."""
    x = {
        "collaborators": [
            {"memberId": "a", "role": "doer"},
            {"memberId": "b", "role": " Reviewer "},
        ]
    }
    assert [c.to_wire() for c in collaborators_of(x)] == [
        {"memberId": "a", "role": "DOER"},
        {"memberId": "b", "role": "REVIEWER"},
    ]


def test_collaborators_of_drops_unknown_roles_and_missing_ids_without_error() -> None:
    """An observer, an entry without a member id, and junk entries are dropped quietly."""
    x = {
        "collaborators": [
            {"memberId": "a", "role": "OBSERVER"},
            {"role": "APPROVER"},
            {"memberId": "", "role": "DOER"},
            None,
            "mem_x",
            {"memberId": "b", "role": "approver"},
        ]
    }
    assert collaborators_of(x) == (Collaborator(member_id="b", role="APPROVER"),)
    assert collaborators_of(None) == ()
    assert collaborators_of({"collaborators": "a,b"}) == ()


def test_collaborators_of_reads_contracts() -> None:
    """An Objective's or WorkCandidate's collaborators come back as they were validated."""
    obj = Objective.model_validate(
        {**OBJ, "target": 3, "collaborators": [{"memberId": "r", "role": "reviewer"}]}
    )
    assert collaborators_of(obj) == (Collaborator(member_id="r", role="REVIEWER"),)


# --------------------------------------------------------------------------- wire and contracts


def test_a_classification_on_the_wire_has_every_seed_key_with_nulls_kept() -> None:
    """SELF work keeps `target` and `capabilityGap` as explicit nulls on the wire."""
    wire = classify_work_item({"title": "x"}, ctx()).to_wire()
    assert wire == {
        "disposition": "SELF",
        "reason": "self",
        "target": None,
        "reviewers": [],
        "approvers": [],
        "contributors": [],
        "gatedClasses": [],
        "capabilityGap": None,
        "why": ["no collaborator, no gate, no capability gap"],
    }


def test_gated_classes_are_lowercased_and_an_empty_list_gates_nothing() -> None:
    """`External` is gated by default; an explicit empty gated list gates nothing."""
    assert classify_work_item({"actionClasses": ["External"]}, ctx()).gated_classes == ("external",)
    assert (
        classify_work_item({"actionClasses": ["external"]}, ctx(gatedClasses=[])).reason == "self"
    )
    assert GATED_CLASSES == ("external", "financial", "irreversible", "destructive", "access")


def test_a_review_by_other_than_me_needs_review_and_my_own_does_not() -> None:
    """`reviewBy` on the candidate or the objective names the reviewer unless it is this seat."""
    other = classify_work_item({"reviewBy": BOSS}, ctx())
    assert (other.disposition, other.target, other.why) == (
        "NEEDS_REVIEW",
        BOSS,
        (f"review required by {BOSS}",),
    )
    assert classify_work_item({}, ctx(objective={**OBJ, "reviewBy": BOSS})).target == BOSS
    assert classify_work_item({"reviewBy": ME}, ctx()).disposition == "SELF"


def test_contracts_classify_exactly_as_the_seeds_mappings() -> None:
    """A WorkCandidate, Objective and Peers classify to the same wire value as their dicts."""
    raw = {
        "title": "Post to the ledger",
        "requiredCapabilities": ["books_invoices", "stripe_refund"],
        "collaborators": [{"memberId": PEER, "role": "CONTRIBUTOR"}],
    }
    peers = [{"memberId": PEER, "capabilities": ["books_invoices"]}]
    as_dicts = classify_work_item(raw, ctx(peers=peers))
    as_contracts = classify_work_item(
        WorkCandidate.model_validate(raw),
        ctx(
            objective=Objective.model_validate({**OBJ, "target": 3}),
            peers=[Peer.model_validate(p) for p in peers],
        ),
    )
    assert as_contracts.to_wire() == as_dicts.to_wire()
    assert as_dicts.disposition == "HANDOFF"
    assert as_dicts.to_wire()["capabilityGap"] == {
        "missing": ["books_invoices", "stripe_refund"],
        "uncovered": ["stripe_refund"],
    }
