"""Unit tests for `gap_for`: the gap, tolerance, trend and staleness of an objective.

Pure: `now_ms` is an argument. Objectives and samples are camelCase dicts unless a
test is about the contracts.
"""

from __future__ import annotations

from typing import Any

import pytest

from contracts.goals import Objective, Sample
from pipeline.goals import WORK_CREATING_SOURCES, decide_for_gap, gap_for
from pipeline.goals.kpi import DAY_MS

WEEK = 7 * DAY_MS
NOW = 1_760_000_000_000

OBJ: dict[str, Any] = {"key": "pipeline", "state": "active", "target": 3, "cadence": "weekly"}


def sample(value: float, at_ms: int, source: str = "method") -> dict[str, Any]:
    return {"value": value, "source": source, "atMs": at_ms}


def test_no_sample_means_no_gap_and_an_unknown_trend() -> None:
    """Without a sample the gap and value are null, the trend unknown, and nothing is stale."""
    g = gap_for(OBJ, [], NOW)
    assert g.to_wire() == {
        "gap": None,
        "target": 3,
        "value": None,
        "withinTolerance": False,
        "normalizedGap": None,
        "trend": "unknown",
        "stale": False,
        "stalenessPeriods": None,
    }
    assert decide_for_gap(g).action == "drift"


def test_the_latest_sample_sets_the_gap_for_direction_up() -> None:
    """Going up, the gap is target minus value, normalised by the target."""
    g = gap_for(OBJ, [sample(2, NOW - DAY_MS)], NOW)
    assert (g.gap, g.value, g.within_tolerance) == (1, 2, False)
    assert g.normalized_gap == pytest.approx(1 / 3)
    assert g.staleness_periods == pytest.approx(1 / 7)
    assert not g.stale


def test_direction_down_makes_a_value_above_target_the_bad_side() -> None:
    """Going down, the gap is value minus target: above target is positive, below negative."""
    down = {**OBJ, "direction": "down", "target": 10}
    assert gap_for(down, [sample(12, NOW)], NOW).gap == 2
    below = gap_for(down, [sample(7, NOW)], NOW)
    assert below.gap == -3
    assert below.within_tolerance


def test_a_gap_equal_to_the_tolerance_is_within_it() -> None:
    """The tolerance is absolute and inclusive: a gap of exactly the tolerance is fine, more not."""
    tolerant = {**OBJ, "tolerance": 0.5}
    assert gap_for(tolerant, [sample(2.5, NOW)], NOW).within_tolerance
    assert not gap_for(tolerant, [sample(2.49, NOW)], NOW).within_tolerance


def test_the_sensor_goes_stale_at_exactly_two_periods() -> None:
    """A latest sample two cadence periods old is stale; one a millisecond younger is not."""
    at_edge = gap_for(OBJ, [sample(2, NOW - 2 * WEEK)], NOW)
    assert at_edge.stale
    assert at_edge.staleness_periods == 2
    assert not gap_for(OBJ, [sample(2, NOW - 2 * WEEK + 1)], NOW).stale
    assert decide_for_gap(at_edge).reason == "sensor is stale (2.0× cadence with no sample)"


def test_each_cadence_has_its_own_period() -> None:
    """Daily, weekly and monthly periods are 1, 7 and 30 days."""
    ten_days = [sample(2, NOW - 10 * DAY_MS)]
    periods = {
        cadence: gap_for({**OBJ, "cadence": cadence}, ten_days, NOW).staleness_periods
        for cadence in ("daily", "weekly", "monthly")
    }
    assert periods == pytest.approx({"daily": 10, "weekly": 10 / 7, "monthly": 1 / 3})


def test_a_gap_that_shrank_over_two_periods_is_improving() -> None:
    """The latest gap against the one two periods earlier: smaller is improving."""
    samples = [sample(1, NOW - 2 * WEEK), sample(2, NOW)]
    assert gap_for(OBJ, samples, NOW).trend == "improving"


def test_a_gap_that_grew_over_two_periods_is_worsening() -> None:
    """A larger gap than two periods before is worsening."""
    samples = [sample(2.5, NOW - 3 * WEEK), sample(2, NOW)]
    assert gap_for(OBJ, samples, NOW).trend == "worsening"


def test_a_move_within_epsilon_is_flat() -> None:
    """An unchanged gap is flat, and so is a move under 1% of the target; just over it is not."""
    assert gap_for(OBJ, [sample(2, NOW - 2 * WEEK), sample(2, NOW)], NOW).trend == "flat"
    assert gap_for(OBJ, [sample(2, NOW - 2 * WEEK), sample(2.02, NOW)], NOW).trend == "flat"
    assert gap_for(OBJ, [sample(2, NOW - 2 * WEEK), sample(2.04, NOW)], NOW).trend == "improving"


def test_without_a_sample_two_periods_back_the_trend_is_unknown() -> None:
    """Samples newer than two periods before the latest cannot establish a trend."""
    samples = [sample(1, NOW - 2 * WEEK + 1), sample(2, NOW)]
    assert gap_for(OBJ, samples, NOW).trend == "unknown"


def test_the_trend_compares_with_the_nearest_sample_at_or_before_two_periods_back() -> None:
    """Of the samples at or before the instant, the latest one is the baseline."""
    samples = [sample(2.9, NOW - 5 * WEEK), sample(2, NOW - 2 * WEEK), sample(2, NOW)]
    assert gap_for(OBJ, samples, NOW).trend == "flat"


def test_the_latest_sample_is_by_time_not_by_list_order() -> None:
    """Samples are placed by atMs; the newest decides the value whatever its position."""
    samples = [sample(2, NOW - DAY_MS), sample(1, NOW - 3 * WEEK)]
    g = gap_for(OBJ, samples, NOW)
    assert g.value == 2
    assert g.trend == "improving"


def test_a_zero_target_has_no_normalised_gap() -> None:
    """With a target of 0 there is nothing to normalise by, so normalizedGap is null."""
    g = gap_for({**OBJ, "target": 0, "direction": "down"}, [sample(4, NOW)], NOW)
    assert g.gap == 4
    assert g.normalized_gap is None


def test_a_sample_from_the_near_future_has_age_zero() -> None:
    """A sample dated past now (clock skew) is fresh, not negatively old."""
    assert gap_for(OBJ, [sample(2, NOW + 5_000)], NOW).staleness_periods == 0


def test_contracts_give_the_same_gap_as_the_seeds_mappings() -> None:
    """An Objective and Samples give exactly the wire gap their dicts give."""
    raw = [sample(1, NOW - 2 * WEEK, "human"), sample(2, NOW - DAY_MS, "llm")]
    as_dicts = gap_for(OBJ, raw, NOW)
    as_contracts = gap_for(
        Objective.model_validate(OBJ), [Sample.model_validate(s) for s in raw], NOW
    )
    assert as_contracts.to_wire() == as_dicts.to_wire()
    assert as_dicts.value == 2  # an llm sample still measures; honesty is admission's call


def test_an_objective_without_a_usable_target_direction_or_cadence_is_refused() -> None:
    """A non-numeric target, an unknown direction or cadence, or no clock is a ValueError."""
    with pytest.raises(ValueError, match=r"objective\.target"):
        gap_for({**OBJ, "target": "3"}, [], NOW)
    with pytest.raises(ValueError, match=r"objective\.direction"):
        gap_for({**OBJ, "direction": "sideways"}, [], NOW)
    with pytest.raises(ValueError, match=r"objective\.cadence"):
        gap_for({**OBJ, "cadence": "hourly"}, [], NOW)
    with pytest.raises(ValueError, match="now_ms"):
        gap_for(OBJ, [], None)  # type: ignore[arg-type]


def test_unplaceable_samples_are_not_measurements() -> None:
    """A sample without a finite value or a numeric atMs is skipped."""
    samples: list[dict[str, Any]] = [
        {"value": None, "atMs": NOW},
        {"value": 1, "atMs": "now"},
        sample(2, NOW - DAY_MS),
    ]
    assert gap_for(OBJ, samples, NOW).value == 2


def test_only_method_and_human_samples_create_work() -> None:
    """The work-creating sources are exactly method and human."""
    assert WORK_CREATING_SOURCES == ("method", "human")
