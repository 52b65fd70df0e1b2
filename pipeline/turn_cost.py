"""A settled turn's cost as the cost frame it becomes: `cost_frame_of`. Pure: no I/O, no clock.

A turn outcome carries one cost (`costMicros`) and the `enforcement` it ran under. The frame
puts that cost where the cost reads look for it:

- `on`: money moved, so the cost is the frame's `costMicros`, a charge (pipeline.money).
- `shadow`, `off` or none given: no money moved, so the cost is the frame's
  `shadowCostMicros` (what enforcement would have charged) and `costMicros` is null. Left in
  `costMicros`, it would charge nothing and count in no shadow total either: a seat's
  `shadowMicros` would read 0 after any amount of shadow cost.

The enforcement word is kept as the outcome said it (None stays None, never promoted to
`on`). An outcome without a cost has no frame (None). The outcome contract bounds its cost
as a frame's, so every outcome has its frame and this never refuses one.
"""

from __future__ import annotations

from contracts.controller import TurnOutcome
from contracts.money import CostFrame


def cost_frame_of(outcome: TurnOutcome, *, at_ms: int, turn_id: str) -> CostFrame | None:
    """The cost frame of a turn that ended at `at_ms` with `outcome`; None without a cost."""
    cost = outcome.cost_micros
    if cost is None:
        return None
    charged = outcome.enforcement == "on"
    return CostFrame(
        cost_micros=cost if charged else None,
        shadow_cost_micros=None if charged else cost,
        enforcement=outcome.enforcement,
        at_ms=at_ms,
        turn_id=turn_id,
    )
