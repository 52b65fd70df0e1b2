"""What a turn cost frame charged, and what is left of an objective's budget. Pure: no I/O, no
clock; `now_ms` and the frames are arguments.

    charge_of            a frame's charge: `costMicros` under `enforcement == "on"`, else 0
    spend_in_window      the charges of one objective's frames with `atMs` in [since, until)
    budget_window        the objective's budget window at `now_ms`, by its cadence
    remaining_envelope   `budgetMicros` minus spend; None without a budget; may be negative
    parse_micros         integer micro-USD from an int or a decimal string (contracts.money)

Only `enforcement: on` moves money: a shadow cost is what enforcement would have
charged and is never a charge, and `off`, null and any unrecognised word charge nothing. The
contract already reads an unknown word as None, so no path here can promote it to `on`.

The budget window is trailing: one cadence period (`CADENCE_PERIOD_MS` of pipeline.goals.kpi:
1, 7 or 30 days) whose last millisecond is `now_ms`, i.e. `[now - period + 1, now + 1)`. Its
end is exclusive like every window here, so it is `now + 1` for a frame stamped this very
millisecond to count: it was spent already, and the next admission in the same millisecond must
see it. A trailing window needs no calendar or time zone (a pure module has no `datetime`), and
has no reset cliff: a calendar month would reopen the whole envelope at midnight on the 1st,
while here each charge rolls off exactly one period after it was made. A frame stamped ahead of
`now_ms` (clock skew) counts from the moment `now_ms` reaches its stamp, for a full period.

The envelope is not clamped at 0. Overspend happens (a turn costs more than its estimate, a
seat's enforcement flips from shadow to on), and the admission budget gate, `estimate >
remaining`, then refuses every candidate, a zero estimate included, until charges roll out of
the window or an operator overrides the gate; clamping would let zero-estimate work through an
overdrawn budget and would hide by how much it is overdrawn, which the gate's reason prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from contracts.money import (
    ENFORCEMENT_STATES,
    MICROS_BOUND,
    CostFrame,
    parse_cost_micros,
    parse_micros,
)
from pipeline.goals.kpi import CADENCE_PERIOD_MS

__all__ = [
    "ENFORCEMENT_STATES",
    "MICROS_BOUND",
    "budget_window",
    "charge_of",
    "parse_micros",
    "remaining_envelope",
    "spend_in_window",
]

FrameLike = CostFrame | Mapping[str, object]


def charge_of(frame: FrameLike) -> int:
    """The micros this frame moved: its `costMicros` under `enforcement == "on"`, else 0."""
    f = _frame(frame)
    if f.enforcement != "on" or f.cost_micros is None:
        return 0
    return f.cost_micros


def spend_in_window(
    frames: Iterable[FrameLike], *, objective: str, since_ms: int, until_ms: int
) -> int:
    """The charges of `objective`'s frames whose `atMs` is in `[since_ms, until_ms)`."""
    since, until = _ms(since_ms, "since_ms"), _ms(until_ms, "until_ms")
    if until < since:
        raise ValueError(f"until_ms ({until}) must not be before since_ms ({since})")
    total = 0
    for frame in frames:
        f = _frame(frame)
        if f.objective == objective and since <= f.at_ms < until:
            total += charge_of(f)
    return total


def budget_window(cadence: str, now_ms: int) -> tuple[int, int]:
    """`(since_ms, until_ms)`: the trailing cadence period whose last millisecond is `now_ms`."""
    now = _ms(now_ms, "now_ms")
    period = CADENCE_PERIOD_MS.get(cadence) if isinstance(cadence, str) else None
    if period is None:
        raise ValueError(f"cadence must be daily, weekly or monthly, not {cadence!r}")
    return now + 1 - period, now + 1


def remaining_envelope(budget_micros: int | None, spent_micros: int) -> int | None:
    """What is left of the budget after spend: None without a budget, negative when overdrawn."""
    if isinstance(spent_micros, bool) or not isinstance(spent_micros, int) or spent_micros < 0:
        raise ValueError(f"spent_micros must be a non-negative integer, not {spent_micros!r}")
    if budget_micros is None:
        return None
    return parse_cost_micros(budget_micros, name="budget_micros") - spent_micros


def _frame(frame: FrameLike) -> CostFrame:
    return frame if isinstance(frame, CostFrame) else CostFrame.model_validate(frame)


def _ms(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer of milliseconds, not {value!r}")
    return value
