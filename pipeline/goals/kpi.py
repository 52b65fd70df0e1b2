"""How far an objective is from target, by its samples: `gap_for`. Pure: `now_ms` is an argument.

The original steward imported this from a module it did not ship; issue 10 pins it:

- `gap` is `target - value` for direction `up`, `value - target` for `down`, so a positive gap is
  off target on the bad side; None (with `value`) when there is no sample.
- `withinTolerance` is `gap <= tolerance`; the tolerance is absolute, in the metric's units.
- `normalizedGap` is `gap / abs(target)`; None when the target is 0.
- A cadence period is 1, 7 or 30 days (daily, weekly, monthly). `stalenessPeriods` is the
  latest sample's age in periods, and `stale` is `stalenessPeriods >= 2`.
- `trend` compares the latest gap with the gap of the nearest sample at or before two periods
  earlier: `improving` if the gap shrank by more than epsilon, `worsening` if it grew by more,
  `flat` otherwise, `unknown` without such a sample.

Epsilon is 1% of `abs(target)` (`TREND_EPSILON_RATIO`), or 1e-9 when the target is 0. A gap is
in the metric's units, which differ per objective, so no fixed number suits them all; a move of
under 1% of the target in two periods is measurement noise, not progress, and calling it
`improving` would let work in flight sit on a number that is not moving instead of escalating.
With a zero target there is no scale, so only float rounding is ignored.

Every sample counts as a measurement, whatever its source: whether an `llm`-sourced one may
create work is admission's question (the honesty gate), not the gap's. A sample dated after
`now_ms` (clock skew) has age 0. A sample without a finite `value` or a numeric `atMs` cannot be
placed and is not a measurement. Samples are camelCase mappings or `Sample`s; the
objective is an `Objective` or its mapping, and a target that is not a finite number, or an
unknown direction or cadence, is a `ValueError` naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from contracts.goals import Gap, Objective, Sample, Trend
from pipeline.js import field, is_finite, js_str, present

WORK_CREATING_SOURCES = ("method", "human")

DAY_MS = 86_400_000
CADENCE_PERIOD_MS = {"daily": DAY_MS, "weekly": 7 * DAY_MS, "monthly": 30 * DAY_MS}
DEFAULT_CADENCE = "weekly"
STALE_AFTER_PERIODS = 2
TREND_LOOKBACK_PERIODS = 2
TREND_EPSILON_RATIO = 0.01
TREND_EPSILON_FLOOR = 1e-9

Number = int | float


@dataclass(frozen=True, slots=True)
class _Spec:
    """What the gap reads of an objective."""

    target: Number
    down: bool
    tolerance: Number
    period_ms: int

    def gap_of(self, value: Number) -> Number:
        return value - self.target if self.down else self.target - value

    @property
    def epsilon(self) -> float:
        return max(TREND_EPSILON_RATIO * abs(self.target), TREND_EPSILON_FLOOR)


@dataclass(frozen=True, slots=True)
class _Point:
    at_ms: Number
    value: Number


def gap_for(
    objective: Objective | Mapping[str, object],
    samples: Iterable[Sample | Mapping[str, object]],
    now_ms: int,
) -> Gap:
    """The objective's gap by its latest sample, with tolerance, trend and staleness."""
    if not isinstance(now_ms, int) or isinstance(now_ms, bool):
        raise ValueError("gap_for needs now_ms as an integer: it has no clock")
    spec = _spec(objective)
    points = _points(samples)
    if not points:
        return Gap(target=spec.target)
    latest = points[-1]
    gap = spec.gap_of(latest.value)
    periods = max(0, now_ms - latest.at_ms) / spec.period_ms
    return Gap(
        gap=gap,
        target=spec.target,
        value=latest.value,
        within_tolerance=gap <= spec.tolerance,
        normalized_gap=None if spec.target == 0 else gap / abs(spec.target),
        trend=_trend(spec, points, gap),
        stale=periods >= STALE_AFTER_PERIODS,
        staleness_periods=periods,
    )


def _trend(spec: _Spec, points: list[_Point], gap: Number) -> Trend:
    """The latest gap against the gap of the nearest sample at or before two periods back."""
    instant = points[-1].at_ms - TREND_LOOKBACK_PERIODS * spec.period_ms
    earlier = next((p for p in reversed(points) if p.at_ms <= instant), None)
    if earlier is None:
        return "unknown"
    before = spec.gap_of(earlier.value)
    if before - gap > spec.epsilon:
        return "improving"
    if gap - before > spec.epsilon:
        return "worsening"
    return "flat"


def _points(samples: Iterable[Sample | Mapping[str, object]]) -> list[_Point]:
    """The placeable samples, oldest first; of two at one instant the later-listed is newer."""
    found = []
    for sample in samples:
        at, value = field(sample, "atMs"), field(sample, "value")
        if is_finite(at) and is_finite(value):
            found.append(_Point(at, value))
    return sorted(found, key=lambda p: p.at_ms)


def _spec(objective: Objective | Mapping[str, object]) -> _Spec:
    target, tolerance = field(objective, "target"), field(objective, "tolerance")
    if not is_finite(target):
        raise ValueError(f"objective.target must be a finite number, not {js_str(target)}")
    if not present(tolerance):
        tolerance = 0
    if not is_finite(tolerance):
        raise ValueError(f"objective.tolerance must be a finite number, not {js_str(tolerance)}")
    direction = _word(field(objective, "direction"), "up")
    if direction not in ("up", "down"):
        raise ValueError(f"objective.direction must be up or down, not {direction!r}")
    cadence = _word(field(objective, "cadence"), DEFAULT_CADENCE)
    if cadence not in CADENCE_PERIOD_MS:
        raise ValueError(f"objective.cadence must be daily, weekly or monthly, not {cadence!r}")
    return _Spec(target, direction == "down", tolerance, CADENCE_PERIOD_MS[cadence])


def _word(value: object, default: str) -> str:
    return js_str(value).strip().lower() if present(value) and value != "" else default
