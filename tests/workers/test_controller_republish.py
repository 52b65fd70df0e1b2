"""A turn that waits on the turns queue is published again every `turn_republish_after_ms`
(issue 27's soak, bench/controller_soak.py): each copy is one more message on the queue.

The republish exists for a turn whose message was lost (a crash between the tick's commit and
its publish); the tick cannot tell such a turn from one whose message still waits behind
others. So when the turns wait longer than the republish time, every waiting turn gains a
copy per period, the queue's arrival rate becomes the news' rate times (1 + wait / period),
and a backlog feeds itself: in the 10,000-seat soak on a loaded machine (load 14-17), 33,683
turns had been published 107,822 times after 7 minutes of feed, one turn 12 times (queued
332 s before it started), and the turns queue grew by 200-300 messages a second to 88,943.

The fix (pipeline/turns.py `republish_at`): each copy waits twice as long as the one before,
so the copies of one waiting turn grow with the logarithm of its wait, not with the wait.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import redis

from tests.workers.test_controller_tick import NOW, make, org_text, tick
from workers.queues import Queue

pytestmark = pytest.mark.redis

PERIODS = 10  # republish periods the turns wait on the queue


def test_a_turn_waiting_on_the_queue_is_not_copied_every_period(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Two seats' first turns are published (on the broker's real `turns` list, the stores'
    Redis) and nobody consumes them; a tick every republish period for ten periods. Each turn
    is still queued and its message still waits: at most 1 + log2(10) messages of it may be
    on the queue, not one more per period."""
    c = make(redis_client, redis_url, tmp_path, org_text("{kind: noop}"))
    every = c.settings.turn_republish_after_ms
    first = tick(c, NOW)
    assert len(first.published) == 2
    for k in range(1, PERIODS + 1):
        tick(c, NOW + k * every)
    for seat in ("scout", "quiet"):
        active = c.seat_runs.get(seat).run.active
        assert active is not None and active.state == "queued"  # nobody started it
    per_turn = redis_client.llen(Queue.TURNS.value) / len(first.published)
    print(f"\n{per_turn:.0f} messages of each waiting turn after {PERIODS} periods")
    assert per_turn <= 1 + math.ceil(math.log2(PERIODS))
