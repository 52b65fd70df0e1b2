"""The parking lot: stage messages that must wait longer than a Celery retry may.

A long countdown or ETA breaks on Redis (fault test 26, docs/reliability.md): the worker holds the
message unacked while it waits, and past the visibility timeout the broker hands it to another
worker too. So a wait longer than the retry cap (a Slack Retry-After, a quiet-hours deferral) parks
the message here instead: a sorted set scored by due time, one entry per (task, tracking id).
Beat's tick (workers/recovery/parking.py `release_due`) re-publishes each due message under
its deterministic task id.

Parking also moves the journal entry's deadline to due + grace, so the sweeper does not take a
parked message for a lost one; if a release is lost anyway (a crash between taking it and
publishing it), that deadline is what brings the entry back.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import redis

from workers.clock import now_ms
from workers.queues import TASK_QUEUE, Task, task_id
from workers.stores import keys
from workers.stores.scripts import script, text

log = logging.getLogger("seatwire.parking")

PARK_GRACE_MS = 300_000  # after its due time, how long a re-published message has to finish


@dataclass(frozen=True)
class Parked:
    task: Task
    tracking_id: str
    message: dict[str, Any]
    due_ms: int
    reason: str
    parked_at_ms: int


def park(
    client: redis.Redis,
    task: Task,
    tracking_id: str,
    message: dict[str, Any],
    due_ms: int,
    reason: str,
    *,
    grace_ms: int = PARK_GRACE_MS,
) -> None:
    """Hold `message` for `task` until `due_ms`; parking the same task again replaces it."""
    member = task_id(tracking_id, TASK_QUEUE[task])
    record = {
        "task": task.value,
        "trackingId": tracking_id,
        "message": message,
        "dueMs": due_ms,
        "reason": reason[:500],
        "parkedAtMs": now_ms(),
    }
    script(client, "park")(
        keys=[keys.PARKED, keys.PARKED_MESSAGES, keys.JOURNAL_OPEN],
        args=[member, due_ms, json.dumps(record), tracking_id, due_ms + grace_ms],
    )
    log.info("parked %s until %d: %s", member, due_ms, reason)


def _parked(raw: Any) -> Parked:
    record = json.loads(text(raw))
    return Parked(
        task=Task(record["task"]),
        tracking_id=record["trackingId"],
        message=record["message"],
        due_ms=int(record["dueMs"]),
        reason=record.get("reason", ""),
        parked_at_ms=int(record.get("parkedAtMs", 0)),
    )


def parked(client: redis.Redis, limit: int = 100) -> list[Parked]:
    """The parked messages, soonest due first."""
    members: list[bytes] = client.zrange(keys.PARKED, 0, limit - 1)  # type: ignore[assignment]
    if not members:
        return []
    raws = client.hmget(keys.PARKED_MESSAGES, members)
    return [_parked(raw) for raw in raws if raw is not None]


def take_due(client: redis.Redis, *, now_ms: int, batch: int = 500) -> list[Parked]:
    """Take every parked message that is due (at most `batch`) out of the lot, soonest first:
    the caller publishes each, or parks it again."""
    taken = script(client, "unpark_due")(
        keys=[keys.PARKED, keys.PARKED_MESSAGES], args=[now_ms, batch]
    )
    return [_parked(raw) for raw in taken]
