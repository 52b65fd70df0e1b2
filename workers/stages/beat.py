"""The beat stage: the recovery tick (the sweeper, then the parking lot), run by `seatwire
beat`'s own worker on the `beat` queue, so recovery never waits behind a stage's backlog."""

from __future__ import annotations

from typing import Any

from celery import Celery

from workers.queues import Task
from workers.recovery.sweeper import run_tick
from workers.stages.base import Deps, register_stage


def register(app: Celery, deps: Deps) -> None:
    def sweep(self: Any) -> None:
        run_tick(deps(), app)

    register_stage(app, Task.SWEEP, deps, sweep)
