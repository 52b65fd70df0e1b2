"""The beat stage: the recovery tick (the sweeper, then the parking lot), run by `seatwire
beat`'s own worker on the `beat` queue, so recovery never waits behind a stage's backlog.

A tick carries the fencing token of the beat leader that sent it (workers/recovery/leader.py):
a stale one (its beat was deposed) does nothing, and the sweeper's claims and the parking
lot's take check the token again as they write."""

from __future__ import annotations

from celery import Celery

from workers.queues import Task
from workers.recovery.sweeper import run_tick
from workers.stages.base import Deps, StageTask, register_beat

TASK = Task.SWEEP  # this module's row of the stage table


def register(app: Celery, deps: Deps) -> None:
    def sweep(task: StageTask, fence: int | None) -> None:
        run_tick(task.deps(), app, fence=fence)

    register_beat(app, TASK, deps, sweep)
