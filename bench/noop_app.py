"""The pipeline benchmark's baseline: three no-op Celery tasks, noop1 -> noop2 -> noop3.

The app is Seatwire's own, built by `workers.celery_app.create_app(settings, register=False)`,
so every reliability setting (late ack, prefetch 1, reject on worker lost, visibility
timeout, JSON, max tasks per child, ...) is the same; the tasks use the same task options and
base class as the stage tasks (less the base class's start bookkeeping: `BaselineTask`) and
publish the next hop the way `workers.broker.publish` does (deterministic task id
`{trackingId}:{queue}`, the workers' publish retry policy). The last hop marks completion
with one INCR. Each hop has its own queue.

    SEATWIRE_REDIS_URL=redis://127.0.0.1:6379/14 uv run celery -A bench.noop_app worker \
        -Q bench.noop1,bench.noop2,bench.noop3 -c 2 -P prefork --without-mingle --without-gossip

`bench.pipeline` starts and stops these workers itself.
"""

from __future__ import annotations

import os
from typing import Any

import redis
from celery import Celery

from workers.bootstrap import redis_client
from workers.broker import WORKER_PUBLISH_RETRY
from workers.celery_app import create_app
from workers.queues import Queue
from workers.settings import Settings
from workers.stages.base import STAGE_TASK_OPTIONS, StageTask

QUEUES = ("bench.noop1", "bench.noop2", "bench.noop3")
TASKS = QUEUES  # one task per queue, named like its queue
DONE_KEY = "bench:noop:done"

settings = Settings()
app = create_app(settings, register=False)

_client: tuple[int, redis.Redis] | None = None


def _redis() -> redis.Redis:
    """One client per process, made after the fork (as `workers.bootstrap.Provider` does)."""
    global _client
    if _client is None or _client[0] != os.getpid():
        assert settings.redis_url, "set SEATWIRE_REDIS_URL"
        _client = (os.getpid(), redis_client(settings.redis_url))
    return _client[1]


def publish(
    hop: int,
    message: dict[str, Any],
    *,
    retry_policy: dict[str, Any] | None = None,
    via: Celery | None = None,
) -> None:
    """Send hop `hop` (0, 1 or 2) of the chain for `message`, like `workers.broker.publish`.

    `via` is another app to publish with (the benchmark makes a fresh one per run).
    """
    queue = QUEUES[hop]
    (via or app).send_task(
        TASKS[hop],
        args=[message],
        task_id=f"{message['trackingId']}:{queue}",
        queue=queue,
        retry=True,
        retry_policy=retry_policy or WORKER_PUBLISH_RETRY,
    )


class BaselineTask(StageTask):
    """The stage tasks' own base class, under the bench queue's name (these tasks are no row
    of the stage table), minus the one thing it does that is Seatwire's work, not Celery's:
    writing each start down (`_admit_start`: the delivery-count script marks the message
    running on its journal entry and counts a redelivery, one Lua round trip). A no-op has no
    journal entry, no stage-table row and no container to write it with, so every start is
    admitted as it is; the real stages pay for it on their side of the ratio (a first
    delivery's start inside the stage's first script, a redelivery's in its own). The
    rest of the base class's `__call__` (the delivery info, the `before_claim` crash point)
    runs as it does for a stage."""

    abstract = True

    @property
    def stage(self) -> Queue:
        return Queue.BENCH

    def _admit_start(self, tracking_id: str, message: Any, *, redelivered: bool) -> bool:
        return True


# The stage tasks' own options and base, so the baseline cannot drift.
_options = {**STAGE_TASK_OPTIONS, "base": BaselineTask}

# celery ships no type hints, so its task decorator is untyped (the ignores below).


@app.task(name=TASKS[0], queue=QUEUES[0], **_options)  # type: ignore[untyped-decorator]
def noop1(self: Any, message: dict[str, Any]) -> None:
    publish(1, message)


@app.task(name=TASKS[1], queue=QUEUES[1], **_options)  # type: ignore[untyped-decorator]
def noop2(self: Any, message: dict[str, Any]) -> None:
    publish(2, message)


@app.task(name=TASKS[2], queue=QUEUES[2], **_options)  # type: ignore[untyped-decorator]
def noop3(self: Any, message: dict[str, Any]) -> None:
    _redis().incr(DONE_KEY)
