"""The samples store against a real Redis: one atomic write per sample id, bounded
retention, and the two samples the gap reads."""

from __future__ import annotations

from typing import cast

import redis

from contracts.goals import Objective, Sample
from pipeline.goals.kpi import gap_for
from workers.stores import keys
from workers.stores.samples import Samples

DAY = 86_400_000
KEY = "kpi-a"


def _sample(at_ms: int, value: float = 1, source: str = "method") -> Sample:
    return Sample.model_validate({"value": value, "source": source, "atMs": at_ms})


def test_record_then_repeat_then_conflict(redis_client: redis.Redis) -> None:
    """A sample is recorded, then a duplicate, then the same id with another value conflicts."""
    store = Samples(redis_client)
    assert store.record(KEY, _sample(10, 5)).outcome == "recorded"
    assert store.record(KEY, _sample(10, 5)).outcome == "duplicate"
    conflict = store.record(KEY, _sample(10, 6))
    assert conflict.outcome == "conflict" and conflict.stored.value == 5
    assert [s.value for s in store.newest(KEY, 10)] == [5]


def test_retention_drops_the_oldest_and_their_ids(redis_client: redis.Redis) -> None:
    """Over the cap, the oldest samples go from both the zset and the id hash."""
    store = Samples(redis_client, keep=3)
    for at in range(1, 6):
        store.record(KEY, _sample(at * 1000, at))
    assert [s.at_ms for s in store.newest(KEY, 10)] == [5000, 4000, 3000]
    ids = {
        k.decode() for k in cast("list[bytes]", redis_client.hkeys(keys.objective_sample_ids(KEY)))
    }
    assert ids == {"3000:method", "4000:method", "5000:method"}


def test_for_gap_reads_what_gap_for_needs(redis_client: redis.Redis) -> None:
    """The latest sample and the one two periods before it give the same gap as the history."""
    store = Samples(redis_client)
    history = [_sample(d * DAY, 50 + d) for d in range(0, 30, 3)]
    for s in history:
        store.record(KEY, s)
    objective = Objective(key=KEY, target=60, cadence="weekly")
    now = 30 * DAY
    read = store.for_gap(KEY, 14 * DAY)
    assert len(read) == 2
    assert gap_for(objective, read, now) == gap_for(objective, history, now)
    assert store.for_gap("empty", 14 * DAY) == []
