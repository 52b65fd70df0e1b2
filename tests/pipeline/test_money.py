"""Unit tests for money: micros on the wire, the cost frame, charges, spend and the envelope.

Pure: frames are camelCase dicts unless a test is about the contract, and `now_ms`
is an argument.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from contracts.money import MICROS_BOUND, CostFrame, read_enforcement
from pipeline.goals.kpi import DAY_MS
from pipeline.money import (
    ENFORCEMENT_STATES,
    budget_window,
    charge_of,
    parse_micros,
    remaining_envelope,
    spend_in_window,
)

NOW = 1_760_000_000_000
OBJ = "pipeline"


def frame(
    cost: int | str | None = 1_500_000,
    enforcement: object = "on",
    *,
    at_ms: int = NOW,
    objective: str | None = OBJ,
    shadow: int | str | None = None,
) -> dict[str, Any]:
    return {
        "costMicros": cost,
        "enforcement": enforcement,
        "shadowCostMicros": shadow,
        "quotaSource": "ledger",
        "objective": objective,
        "atMs": at_ms,
    }


# --- micros on the wire ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "micros"),
    [(0, 0), (1_500_000, 1_500_000), ("123", 123), ("0", 0), ("007", 7), ("-42", -42)],
)
def test_parse_micros_reads_integers_and_decimal_integer_strings(wire: object, micros: int) -> None:
    """An int or a decimal string of an integer reads as that exact integer of micros."""
    assert parse_micros(wire) == micros
    assert type(parse_micros(wire)) is int


@pytest.mark.parametrize(
    "wire",
    [
        1.0,
        0.0,
        1.5,
        math.nan,
        math.inf,
        -math.inf,
        "1.5",
        "1e6",
        "1.0",
        " 7",
        "7 ",
        "+7",
        "1_000",
        "",
        "0x10",
        "١٢",
        "NaN",
        True,
        False,
        None,
        [1],
        MICROS_BOUND,
        -MICROS_BOUND,
        str(MICROS_BOUND),
        "9" * 5000,
    ],
)
def test_parse_micros_refuses_floats_bools_non_integers_and_huge_values(wire: object) -> None:
    """Floats (even 1.0), bools, non-integer strings, NaN/inf and huge values are refused."""
    with pytest.raises(ValueError, match="budget_micros"):
        parse_micros(wire, name="budget_micros")


def test_parse_micros_accepts_values_just_inside_the_bound() -> None:
    """The largest in-bound magnitude, as an int or a string, is read exactly."""
    top = MICROS_BOUND - 1
    assert parse_micros(top) == top
    assert parse_micros(str(-top)) == -top


@pytest.mark.parametrize("key", ["costMicros", "shadowCostMicros"])
@pytest.mark.parametrize("wire", [1.0, "1.5", "1e6", True, math.nan, 10**15, -1])
def test_a_frame_with_a_bad_amount_is_refused_naming_the_field(key: str, wire: object) -> None:
    """A malformed or negative cost refuses the frame, and the error's location is its key."""
    with pytest.raises(ValidationError) as caught:
        CostFrame.model_validate({**frame(), key: wire})
    assert [e["loc"] for e in caught.value.errors()] == [(key,)]


def test_a_frame_reads_decimal_strings_and_writes_integers() -> None:
    """Micros given as decimal strings read as integers, and `to_wire()` has the frame's keys."""
    f = CostFrame.model_validate(frame("1500000", shadow="250"))
    assert f.to_wire() == {
        "costMicros": 1_500_000,
        "enforcement": "on",
        "shadowCostMicros": 250,
        "quotaSource": "ledger",
        "seatId": None,
        "objective": OBJ,
        "atMs": NOW,
        "turnId": None,
    }


def test_a_frame_read_from_json_refuses_a_float_cost() -> None:
    """A JSON body with `costMicros: 7.0` is refused; `"7"` is read as 7."""
    assert CostFrame.model_validate_json('{"costMicros": "7", "atMs": 1}').cost_micros == 7
    with pytest.raises(ValidationError, match="costMicros"):
        CostFrame.model_validate_json('{"costMicros": 7.0, "atMs": 1}')


def test_the_seed_keys_may_be_absent_but_at_ms_may_not() -> None:
    """Only `atMs` is required: absent cost, enforcement and quota source read as null."""
    f = CostFrame.model_validate({"atMs": 5})
    assert (f.cost_micros, f.enforcement, f.shadow_cost_micros, f.quota_source) == (
        None,
        None,
        None,
        None,
    )
    with pytest.raises(ValidationError, match="atMs"):
        CostFrame.model_validate({"costMicros": 1})


@pytest.mark.parametrize("at_ms", [True, 1.0, "5", -1, None])
def test_at_ms_must_be_a_non_negative_integer(at_ms: object) -> None:
    """A bool, float, string, negative or null `atMs` is refused naming `atMs`."""
    with pytest.raises(ValidationError) as caught:
        CostFrame.model_validate(frame(at_ms=at_ms))  # type: ignore[arg-type]
    assert [e["loc"] for e in caught.value.errors()] == [("atMs",)]


def test_snake_case_keys_are_read_as_the_seed_reads_them() -> None:
    """`cost_micros`, `shadow_cost_micros`, `quota_source` and `at_ms` are read too."""
    f = CostFrame.model_validate(
        {"cost_micros": "9", "shadow_cost_micros": 3, "quota_source": "not_read", "at_ms": 2}
    )
    assert (f.cost_micros, f.shadow_cost_micros, f.quota_source, f.at_ms) == (9, 3, "not_read", 2)


@pytest.mark.parametrize(
    ("wire", "read"),
    [
        ("on", "on"),
        ("shadow", "shadow"),
        ("off", "off"),
        (None, None),
        ("ON", None),
        (" on", None),
        ("enforce", None),
        ("", None),
        (True, None),
        (1, None),
    ],
)
def test_enforcement_reads_the_pinned_words_and_nothing_else(wire: object, read: object) -> None:
    """Only the exact words off/shadow/on are kept; anything else reads as null, not a refusal."""
    assert read_enforcement(wire) == read
    assert CostFrame.model_validate(frame(enforcement=wire)).enforcement == read


@pytest.mark.parametrize(("wire", "read"), [("ledger", "ledger"), ("quota", None), (7, None)])
def test_an_unknown_quota_source_reads_as_null(wire: object, read: object) -> None:
    """`quotaSource` keeps its four pinned words and reads anything else as null."""
    assert CostFrame.model_validate({"quotaSource": wire, "atMs": 0}).quota_source == read


# --- charges -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("enforcement", "charge"),
    [("on", 1_500_000), ("shadow", 0), ("off", 0), (None, 0), ("ON", 0), ("enforced", 0)],
)
def test_only_enforcement_on_is_a_charge(enforcement: object, charge: int) -> None:
    """`costMicros` is charged under `on` only: shadow, off, null and unknown words charge 0."""
    assert charge_of(frame(enforcement=enforcement)) == charge
    assert charge_of(CostFrame.model_validate(frame(enforcement=enforcement))) == charge


def test_a_shadow_cost_is_never_a_charge() -> None:
    """A large `shadowCostMicros` adds nothing, under shadow or under on."""
    assert charge_of(frame(0, "shadow", shadow=9_000_000)) == 0
    assert charge_of(frame(5, "on", shadow=9_000_000)) == 5


def test_an_on_frame_without_a_cost_charges_nothing() -> None:
    """Under `on` a missing `costMicros` is no charge: a charge is never invented."""
    assert charge_of(frame(None, "on")) == 0


# --- spend in a window -------------------------------------------------------------------


def test_the_window_includes_its_start_and_excludes_its_end() -> None:
    """A frame at `since_ms` counts, one at `until_ms` does not, and one just before it does."""
    since, until = NOW - 1000, NOW
    frames = [frame(1, at_ms=since), frame(10, at_ms=until - 1), frame(100, at_ms=until)]
    frames += [frame(1000, at_ms=since - 1)]
    assert spend_in_window(frames, objective=OBJ, since_ms=since, until_ms=until) == 11


def test_frames_of_other_objectives_are_ignored() -> None:
    """Only frames naming the objective count; another objective's or none's do not."""
    frames = [frame(1), frame(20, objective="hiring"), frame(300, objective=None)]
    assert spend_in_window(frames, objective=OBJ, since_ms=0, until_ms=NOW + 1) == 1


def test_spend_counts_only_on_frames() -> None:
    """In a mix of every enforcement value, only the `on` costs are summed."""
    frames = [frame(1, e) for e in ("on", "shadow", "off", None, "bogus")] + [frame("2", "on")]
    assert spend_in_window(frames, objective=OBJ, since_ms=0, until_ms=NOW + 1) == 3


def test_an_empty_window_spends_nothing_and_a_reversed_one_is_refused() -> None:
    """`[t, t)` holds no frame; `until_ms` before `since_ms` is a `ValueError`."""
    assert spend_in_window([frame()], objective=OBJ, since_ms=NOW, until_ms=NOW) == 0
    with pytest.raises(ValueError, match="until_ms"):
        spend_in_window([frame()], objective=OBJ, since_ms=NOW, until_ms=NOW - 1)


# --- the budget window and the envelope ---------------------------------------------------


@pytest.mark.parametrize(("cadence", "days"), [("daily", 1), ("weekly", 7), ("monthly", 30)])
def test_the_budget_window_is_one_trailing_period_ending_at_now(cadence: str, days: int) -> None:
    """The window is one cadence period long and its last millisecond is `now_ms`."""
    since, until = budget_window(cadence, NOW)
    assert until - since == days * DAY_MS
    assert (since, until) == (NOW - days * DAY_MS + 1, NOW + 1)


def test_a_frame_stamped_now_counts_and_one_a_period_old_does_not() -> None:
    """Within the daily window, a charge made at `now_ms` counts and one a day ago rolled off."""
    since, until = budget_window("daily", NOW)
    frames = [
        frame(1, at_ms=NOW),
        frame(10, at_ms=NOW - DAY_MS + 1),
        frame(100, at_ms=NOW - DAY_MS),
    ]
    assert spend_in_window(frames, objective=OBJ, since_ms=since, until_ms=until) == 11


@pytest.mark.parametrize("cadence", ["hourly", "Weekly", ""])
def test_an_unknown_cadence_is_refused(cadence: str) -> None:
    """A cadence other than daily, weekly or monthly is a `ValueError` naming the cadence."""
    with pytest.raises(ValueError, match="cadence"):
        budget_window(cadence, NOW)


@pytest.mark.parametrize(
    ("budget", "spent", "remaining"),
    [(None, 0, None), (None, 5, None), (10, 0, 10), (10, 10, 0), (10, 15, -5), ("10", 3, 7)],
)
def test_the_envelope_is_budget_minus_spend_and_may_go_negative(
    budget: Any, spent: int, remaining: int | None
) -> None:
    """No budget means no envelope (None); otherwise budget minus spend, overdrawn below 0."""
    assert remaining_envelope(budget, spent) == remaining


@pytest.mark.parametrize(("budget", "spent"), [(1.0, 0), (-1, 0), (True, 0), (10, -1), (10, 1.0)])
def test_the_envelope_refuses_bad_money(budget: Any, spent: Any) -> None:
    """A float, bool or negative budget or spend is a `ValueError`, never a guess."""
    with pytest.raises(ValueError, match="_micros"):
        remaining_envelope(budget, spent)


# --- properties ---------------------------------------------------------------------------

COSTS = st.integers(0, MICROS_BOUND - 1)
ENFORCEMENTS = st.sampled_from([*ENFORCEMENT_STATES, None]) | st.text(max_size=8)
FRAMES = st.lists(
    st.builds(
        frame,
        cost=COSTS | st.none(),
        enforcement=ENFORCEMENTS,
        at_ms=st.integers(0, 100),
        objective=st.sampled_from([OBJ, "hiring", None]),
        shadow=COSTS | st.none(),
    ),
    max_size=12,
)
WINDOW = st.tuples(st.integers(0, 110), st.integers(0, 110)).map(sorted)


@given(FRAMES, WINDOW)
def test_spend_is_never_negative_nor_more_than_the_on_costs(
    frames: list[dict[str, Any]], window: list[int]
) -> None:
    """Whatever the frames and window, 0 <= spend <= the sum of every `on` frame's cost."""
    spend = spend_in_window(frames, objective=OBJ, since_ms=window[0], until_ms=window[1])
    on_total = sum(f["costMicros"] or 0 for f in frames if f["enforcement"] == "on")
    assert 0 <= spend <= on_total


@given(FRAMES, WINDOW, st.lists(COSTS | st.none(), min_size=12, max_size=12))
def test_changing_only_shadow_costs_never_changes_spend(
    frames: list[dict[str, Any]], window: list[int], shadows: list[int | None]
) -> None:
    """Replacing every `shadowCostMicros` leaves the spend exactly as it was."""
    reshadowed = [{**f, "shadowCostMicros": s} for f, s in zip(frames, shadows, strict=False)]
    since, until = window
    assert spend_in_window(
        reshadowed, objective=OBJ, since_ms=since, until_ms=until
    ) == spend_in_window(frames, objective=OBJ, since_ms=since, until_ms=until)


@given(st.text(max_size=12).filter(lambda w: w not in ENFORCEMENT_STATES), COSTS)
def test_an_unknown_enforcement_never_counts(word: str, cost: int) -> None:
    """A frame whose `enforcement` is not off/shadow/on reads as null and charges nothing."""
    f = frame(cost, word)
    assert CostFrame.model_validate(f).enforcement is None
    assert charge_of(f) == 0
    assert spend_in_window([f], objective=OBJ, since_ms=0, until_ms=NOW + 1) == 0


@given(FRAMES, st.tuples(*[st.integers(0, 110)] * 3).map(sorted))
def test_adjacent_windows_add_up(frames: list[dict[str, Any]], cuts: list[int]) -> None:
    """Spend over [a, c) is spend over [a, b) plus [b, c): no frame is counted twice or lost."""
    a, b, c = cuts

    def spend(since: int, until: int) -> int:
        return spend_in_window(frames, objective=OBJ, since_ms=since, until_ms=until)

    assert spend(a, c) == spend(a, b) + spend(b, c)
