"""Replaying a dead letter (`seatwire dlq replay ID`): the store reopens its journal entry and
takes it out of the queue (workers/stores/dlq.py), then its message is published again under
its deterministic task id. Replaying an unknown id changes nothing; replaying twice does
nothing the second time."""

from __future__ import annotations

from celery import Celery

from workers.broker import publish
from workers.stores.dlq import DeadLetters, Replay


def replay(
    letters: DeadLetters, dlq_id: str, app: Celery, *, deadline_ms: int, now_ms: int
) -> Replay:
    done = letters.reopen(dlq_id, deadline_ms=deadline_ms, now_ms=now_ms)
    if done.republish is not None:
        task, tracking_id, message = done.republish
        publish(app, task, tracking_id, message)
    return done
