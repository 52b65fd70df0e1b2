"""A settled turn's cost frame (pipeline.turn_cost): an `on` turn's cost is a charge, any other
turn's is its shadow cost, and every cost an outcome can carry becomes a frame."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.controller import TurnOutcome
from contracts.money import ENFORCEMENT_STATES, MICROS_BOUND, CostFrame
from pipeline.money import charge_of
from pipeline.turn_cost import cost_frame_of

AT = 1_800_000_000_000


def frame(cost: int | None, enforcement: str | None) -> CostFrame | None:
    outcome = TurnOutcome.model_validate(
        {"kind": "ok", "costMicros": cost, "enforcement": enforcement}
    )
    return cost_frame_of(outcome, at_ms=AT, turn_id="scout:turn:1")


def test_an_on_turns_cost_is_a_charge() -> None:
    """Under `on` the cost is the frame's costMicros and its charge; no shadow cost."""
    f = frame(300_000, "on")
    assert f is not None
    assert (f.cost_micros, f.shadow_cost_micros, f.enforcement) == (300_000, None, "on")
    assert (f.at_ms, f.turn_id, charge_of(f)) == (AT, "scout:turn:1", 300_000)


@pytest.mark.parametrize("enforcement", ["shadow", "off", None])
def test_any_other_turns_cost_is_its_shadow_cost_never_a_charge(enforcement: str | None) -> None:
    """Under `shadow`, `off` or no enforcement the cost is the frame's shadowCostMicros, its
    costMicros null, its charge 0, and the enforcement kept as the outcome said it."""
    f = frame(300_000, enforcement)
    assert f is not None
    assert (f.cost_micros, f.shadow_cost_micros, f.enforcement) == (None, 300_000, enforcement)
    assert charge_of(f) == 0


def test_a_turn_without_a_cost_has_no_frame() -> None:
    """No costMicros, no frame, whatever the enforcement."""
    assert frame(None, "on") is None and frame(None, None) is None


@given(
    cost=st.integers(min_value=0, max_value=MICROS_BOUND - 1),
    enforcement=st.sampled_from([*ENFORCEMENT_STATES, None]),
)
def test_every_cost_an_outcome_carries_becomes_a_frame(cost: int, enforcement: str | None) -> None:
    """Any cost the outcome contract takes makes a valid frame that reads back the same, and
    the cost is counted exactly once: as the charge or as the shadow cost."""
    f = frame(cost, enforcement)
    assert f is not None
    assert CostFrame.model_validate(f.to_wire()) == f
    assert charge_of(f) + (f.shadow_cost_micros or 0) == cost
