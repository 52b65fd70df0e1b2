"""The beat stage: the recovery tick (the sweeper, then the parking lot), run by `seatwire
beat`'s own worker on the `beat` queue, so recovery never waits behind a stage's backlog."""

from __future__ import annotations

from celery import Celery

from workers.queues import Task
from workers.recovery.sweeper import run_tick
from workers.stages.base import Deps, StageTask, register_beat

TASK = Task.SWEEP  # this module's row of the stage table


def register(app: Celery, deps: Deps) -> None:
    def sweep(task: StageTask) -> None:
        run_tick(task.deps(), app)

    register_beat(app, TASK, deps, sweep)
