"""Releasing the parking lot (workers/stores/parking.py): beat's tick re-publishes every
parked message that is due, under its deterministic task id. A tick beat sent carries its
leader's fencing token (workers/recovery/leader.py): the take checks it in Lua, so a deposed
beat's stale tick takes (and re-publishes) nothing."""

from __future__ import annotations

import logging

import redis
from celery import Celery

from workers.broker import publish
from workers.stores import keys
from workers.stores.parking import Parked, _parked, park, take_due
from workers.stores.scripts import script

log = logging.getLogger("seatwire.parking")


def _take_fenced(client: redis.Redis, *, now_ms: int, batch: int, fence: int) -> list[Parked]:
    taken = script(client, "unpark_due")(
        keys=[keys.PARKED, keys.PARKED_MESSAGES, keys.BEAT_EPOCH], args=[now_ms, batch, fence]
    )
    return [_parked(raw) for raw in taken]


def release_due(
    client: redis.Redis,
    app: Celery,
    *,
    now_ms: int,
    batch: int = 500,
    fence: int | None = None,
) -> int:
    """Re-publish every parked message that is due (at most `batch`); returns how many.
    With `fence`, nothing is taken unless it is still the beat leader's token."""
    due = (
        take_due(client, now_ms=now_ms, batch=batch)
        if fence is None
        else _take_fenced(client, now_ms=now_ms, batch=batch, fence=fence)
    )
    released = 0
    for item in due:
        try:
            publish(app, item.task, item.tracking_id, item.message)
        except Exception:
            # Put it back for the next tick; were that to fail too, the entry's deadline
            # (due + grace) brings it back through the sweeper.
            log.exception("could not re-enqueue parked %s; parked again", item.tracking_id)
            park(client, item.task, item.tracking_id, item.message, item.due_ms, item.reason)
            continue
        released += 1
        log.info("re-enqueued parked %s %s (%s)", item.task.value, item.tracking_id, item.reason)
    return released
