"""KPI samples per objective (issue 10): written by `POST /v1/objectives/{key}/samples`.

A sample is idempotent per (objective, atMs, source): its id is `{atMs}:{source}`. One script
(`sample_record`) writes the id hash and the by-time zset together, so a crash never leaves
one without the other. Posted again with the same content it is a `duplicate`; with other
content a `conflict`, and nothing is written. Retention is bounded: at most `MAX_SAMPLES` per
objective, the oldest (and their ids) dropped first, so a sample older than every kept one
can be recorded again after it was trimmed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import redis

from contracts.goals import Objective, Sample
from pipeline.goals.kpi import CADENCE_PERIOD_MS, TREND_LOOKBACK_PERIODS
from workers.stores import keys
from workers.stores.scripts import script, text

MAX_SAMPLES = 10_000

Outcome = Literal["recorded", "duplicate", "conflict"]


@dataclass(frozen=True, slots=True)
class Recorded:
    """What recording a sample did, and the sample now stored under its id."""

    outcome: Outcome
    sample_id: str
    stored: Sample


def sample_id(sample: Sample) -> str:
    """The idempotency id of a sample within its objective."""
    return f"{sample.at_ms}:{sample.source}"


class Samples:
    def __init__(self, client: redis.Redis, *, keep: int = MAX_SAMPLES) -> None:
        self.r = client
        self.keep = keep
        self._record = script(client, "sample_record")

    def record(self, objective_key: str, sample: Sample) -> Recorded:
        """Store `sample` once; a repeat is a duplicate, the same id with other content a
        conflict (neither writes)."""
        sid = sample_id(sample)
        verb, stored_json = self._record(
            keys=[keys.objective_samples(objective_key), keys.objective_sample_ids(objective_key)],
            args=[sid, sample.model_dump_json(by_alias=True), sample.at_ms, self.keep],
        )
        stored = Sample.model_validate_json(stored_json)
        outcome = _OUTCOMES[text(verb)]
        if outcome == "conflict" and stored == sample:  # 5 and 5.0: the same number
            outcome = "duplicate"
        return Recorded(outcome, sid, stored)

    def newest(self, objective_key: str, limit: int) -> list[Sample]:
        """Up to `limit` samples, newest first."""
        return _decoded(self.r.zrevrange(keys.objective_samples(objective_key), 0, limit - 1))

    def for_objective(self, objective: Objective) -> list[Sample]:
        """What `gap_for(objective, ...)` reads: `for_gap` over its trend's lookback (two
        cadence periods)."""
        lookback = TREND_LOOKBACK_PERIODS * CADENCE_PERIOD_MS[objective.cadence]
        return self.for_gap(objective.key, lookback)

    def for_gap(self, objective_key: str, lookback_ms: int) -> list[Sample]:
        """All that `gap_for` reads, oldest first: the latest sample and the nearest one at or
        before `lookback_ms` before it (the trend's comparison point), not the whole history."""
        zset = keys.objective_samples(objective_key)
        newest = _decoded(self.r.zrevrange(zset, 0, 0))
        if not newest:
            return []
        instant = newest[0].at_ms - lookback_ms
        earlier = _decoded(self.r.zrevrangebyscore(zset, instant, "-inf", start=0, num=1))
        return [*earlier, *newest]


_OUTCOMES: dict[str, Outcome] = {o: o for o in ("recorded", "duplicate", "conflict")}


def _decoded(members: Any) -> list[Sample]:
    """Zset members (sample JSON) as samples, in the order Redis gave them."""
    return [Sample.model_validate_json(m) for m in members]
