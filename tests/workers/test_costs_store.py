"""The cost store against a real Redis: each frame is recorded once, atomically, within its
retention, and an objective's spend sums every seat's charges in a window."""

from __future__ import annotations

from typing import Any, cast

import pytest
import redis

from contracts.money import CostFrame
from workers.stores import keys
from workers.stores.costs import (
    RETENTION_MS,
    SEATS,
    Costs,
    FrameConflict,
    FrameExpired,
    frame_id_of,
)

NOW = 10 * RETENTION_MS


def _frame(**fields: Any) -> CostFrame:
    wire: dict[str, Any] = {"costMicros": 1000, "enforcement": "on", "atMs": NOW, **fields}
    return CostFrame.model_validate(wire)


@pytest.fixture
def costs(redis_client: redis.Redis) -> Costs:
    return Costs(redis_client)


def test_a_frame_is_recorded_under_its_seat(costs: Costs, redis_client: redis.Redis) -> None:
    """A recorded frame lands in the seat's zset and id hash, and the seat in the index."""
    done = costs.record("U1", _frame(turnId="t1"), now_ms=NOW)
    assert done.status == "recorded" and done.frame_id == "turn:t1"
    assert done.frame.seat_id == "U1"
    assert redis_client.zscore(keys.cost_frames("U1"), "turn:t1") == NOW
    assert redis_client.hexists(keys.cost_frame_ids("U1"), "turn:t1")
    assert redis_client.smembers(SEATS) == {b"U1"}


def test_the_same_frame_again_is_a_duplicate(costs: Costs, redis_client: redis.Redis) -> None:
    """Recording an identical frame twice keeps one copy and says `duplicate`."""
    costs.record("U1", _frame(), now_ms=NOW)
    again = costs.record("U1", _frame(), now_ms=NOW)
    assert again.status == "duplicate"
    assert again.frame_id == frame_id_of(_frame(seatId="U1"))
    assert redis_client.zcard(keys.cost_frames("U1")) == 1


def test_a_turn_id_with_other_content_conflicts(costs: Costs, redis_client: redis.Redis) -> None:
    """The same turnId with a different cost raises FrameConflict and keeps the first."""
    costs.record("U1", _frame(turnId="t1"), now_ms=NOW)
    with pytest.raises(FrameConflict) as exc:
        costs.record("U1", _frame(turnId="t1", costMicros=2000), now_ms=NOW)
    assert exc.value.stored.cost_micros == 1000
    assert [f.cost_micros for f in costs.frames("U1")] == [1000]


def test_a_frame_older_than_retention_is_not_recorded(
    costs: Costs, redis_client: redis.Redis
) -> None:
    """A frame stamped before the retention horizon raises FrameExpired and writes nothing."""
    with pytest.raises(FrameExpired):
        costs.record("U1", _frame(atMs=NOW - RETENTION_MS - 1), now_ms=NOW)
    assert redis_client.keys("*") == []


def test_old_frames_are_trimmed_on_write(costs: Costs, redis_client: redis.Redis) -> None:
    """A later write trims the frames that have aged past retention, zset and hash alike."""
    costs.record("U1", _frame(turnId="old"), now_ms=NOW)
    later = NOW + RETENTION_MS + 1
    costs.record("U1", _frame(turnId="new", atMs=later), now_ms=later)
    assert redis_client.zrange(keys.cost_frames("U1"), 0, -1) == [b"turn:new"]
    assert redis_client.hkeys(keys.cost_frame_ids("U1")) == [b"turn:new"]


def test_frames_read_newest_first_within_the_window(costs: Costs) -> None:
    """A seat's frames come back newest first, `since` inclusive and `until` exclusive."""
    for i in range(4):
        costs.record("U1", _frame(turnId=f"t{i}", atMs=NOW + i), now_ms=NOW)
    window = costs.frames("U1", since_ms=NOW + 1, until_ms=NOW + 3)
    assert [f.turn_id for f in window] == ["t2", "t1"]


def test_spend_sums_every_seats_on_charges_in_the_window(costs: Costs) -> None:
    """Spend counts only `on` charges of the objective, across seats, inside [since, until)."""
    costs.record("U1", _frame(turnId="a", objective="o", atMs=NOW), now_ms=NOW)
    costs.record("U2", _frame(turnId="b", objective="o", atMs=NOW + 5, costMicros=7), now_ms=NOW)
    costs.record("U2", _frame(turnId="c", objective="o", enforcement="shadow"), now_ms=NOW)
    costs.record("U2", _frame(turnId="d", objective="o", enforcement="ON"), now_ms=NOW)
    costs.record("U1", _frame(turnId="e", objective="other"), now_ms=NOW)
    costs.record("U1", _frame(turnId="f", objective="o", atMs=NOW + 10), now_ms=NOW)
    assert costs.spend("o", since_ms=NOW, until_ms=NOW + 10) == 1007
    assert costs.spend("o", since_ms=NOW + 1, until_ms=NOW + 11) == 1007
    assert costs.spend("missing", since_ms=0, until_ms=NOW * 2) == 0


def test_spend_reads_only_its_objectives_index(costs: Costs, redis_client: redis.Redis) -> None:
    """An objective's spend is read from its own index of (seat, frame) members, so frames of
    other objectives and of no objective are never read; the index holds exactly its frames."""
    costs.record("U1", _frame(turnId="a", objective="o", atMs=NOW), now_ms=NOW)
    costs.record("U2", _frame(turnId="b", objective="o", atMs=NOW), now_ms=NOW)
    costs.record("U1", _frame(turnId="c", objective="other", atMs=NOW), now_ms=NOW)
    costs.record("U1", _frame(turnId="d", atMs=NOW), now_ms=NOW)
    raw = cast("list[bytes]", redis_client.zrange(keys.cost_by_objective("o"), 0, -1))
    members = sorted(m.decode() for m in raw)
    assert members == ["U1\x1fturn:a", "U2\x1fturn:b"]
    assert redis_client.zcard(keys.cost_by_objective("other")) == 1
    assert not redis_client.exists(keys.cost_by_objective(""))
