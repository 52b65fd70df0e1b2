"""The stage table (workers/queues.py) is the one place a stage is declared: the routes, the
beat schedule, the sweeper's plan, the dead-letter tables and the final states follow it."""

from __future__ import annotations

from contracts.journal import FINAL_STATES as NAMED_FINAL_STATES
from workers.broker import beat_schedule, new_app
from workers.queues import (
    FINAL_STATES,
    FIRST_STAGE,
    STAGE_QUEUES,
    STAGE_STATES,
    STAGES,
    STATE_STAGE,
    WORKER_QUEUES,
    Queue,
    Task,
)
from workers.recovery.sweeper import plan
from workers.settings import Settings
from workers.stages import stage_modules


def test_every_row_has_a_module_and_every_module_a_row() -> None:
    """Each stage of the table registers its task from its own module, and nothing else does."""
    assert set(stage_modules()) == {s.task for s in STAGES}


def test_the_final_states_are_every_state_no_stage_owns() -> None:
    """The derived final states are exactly the journal's named final states."""
    assert FINAL_STATES == NAMED_FINAL_STATES
    assert not FINAL_STATES & {state for s in STAGES for state in s.states}


def test_celery_routes_each_task_to_its_stage_queue() -> None:
    """The app's routes send every task of the table to the queue of its row."""
    app = new_app(Settings(redis_url="redis://127.0.0.1:1/0", api_token="t"))
    routes = app.conf.task_routes
    assert routes == {s.task.value: {"queue": s.queue.value} for s in STAGES}


def test_beat_runs_each_beat_row_at_its_cadence() -> None:
    """Beat schedules the sweep at the sweep interval on its own queue, the steward's tick at
    the steward interval on the `steward` queue, the work controller's and the asks tick at
    their intervals on the `controller` queue, and nothing else."""
    schedule = beat_schedule(
        Settings(
            sweep_interval_s=7.5, steward_interval_s=42, controller_interval_s=2, asks_interval_s=9
        )
    )
    assert schedule == {
        "sweep": {
            "task": Task.SWEEP.value,
            "schedule": 7.5,
            "options": {"queue": Queue.BEAT.value, "expires": 7.5},
        },
        "steward.tick": {
            "task": Task.STEWARD.value,
            "schedule": 42.0,
            "options": {"queue": Queue.STEWARD.value, "expires": 42.0},
        },
        "controller.tick": {
            "task": Task.CONTROLLER.value,
            "schedule": 2.0,
            "options": {"queue": Queue.CONTROLLER.value, "expires": 2.0},
        },
        "asks.tick": {
            "task": Task.ASKS.value,
            "schedule": 9.0,
            "options": {"queue": Queue.CONTROLLER.value, "expires": 9.0},
        },
    }
    assert Queue.BEAT not in STAGE_QUEUES
    assert Queue.STEWARD not in STAGE_QUEUES  # no journal entry goes through it
    assert Queue.BEAT not in WORKER_QUEUES  # `seatwire beat` consumes its own queue
    assert Queue.TURNS not in STAGE_QUEUES  # a turn's state is its seat's record, no entry's
    assert (*STAGE_QUEUES, Queue.STEWARD, Queue.CONTROLLER, Queue.TURNS) == WORKER_QUEUES


def test_the_sweeper_sends_each_owned_state_to_the_stage_that_owns_it() -> None:
    """An overdue entry goes to the stage whose row owns its state (`accepted` by its kind)."""
    assert FIRST_STAGE == {"inbound": Queue.DIRECTEDNESS, "work": Queue.ENGAGEMENT}
    for state, queue in STATE_STAGE.items():
        entry = {"state": state, "kind": "work", "decision": '{"workId": "w"}', "seatId": "s"}
        assert plan("t", entry, "1").queue == queue
    assert STAGE_STATES == {
        "directedness": ("accepted",),
        "engagement": ("accepted",),
        "guardrails": ("decided",),
        "send": ("reserved", "sending", "unknown"),
    }
