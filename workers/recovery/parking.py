"""Releasing the parking lot (workers/stores/parking.py): beat's tick re-publishes every
parked message that is due, under its deterministic task id."""

from __future__ import annotations

import logging

import redis
from celery import Celery

from workers.broker import publish
from workers.stores.parking import park, take_due

log = logging.getLogger("seatwire.parking")


def release_due(client: redis.Redis, app: Celery, *, now_ms: int, batch: int = 500) -> int:
    """Re-publish every parked message that is due (at most `batch`); returns how many."""
    released = 0
    for item in take_due(client, now_ms=now_ms, batch=batch):
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
