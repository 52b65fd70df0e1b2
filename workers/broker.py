"""The Celery side of the broker: the reliability settings of DESIGN.md section 14, the beat
schedule and `publish`, all derived from the stage table (workers/queues.py).

`configure` sets an app up for given settings without connecting anywhere and without
registering a task (the runtime does that, workers/celery_app.py); the stores and the
recovery code publish through `publish` with nothing more than an app.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from workers.queues import BEAT_STAGES, TASK_QUEUE, Queue, Task, task_id
from workers.settings import Settings

RETRY_BACKOFF_MAX_S = 300
STAGE_MAX_RETRIES = 8

# Ingress publishes under a tight policy so it can answer 503 inside its budget; workers
# ride out a Redis restart of several seconds before giving the message back.
INGRESS_PUBLISH_RETRY: dict[str, Any] = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.5,
}
WORKER_PUBLISH_RETRY: dict[str, Any] = {
    "max_retries": 10,
    "interval_start": 0.1,
    "interval_step": 0.5,
    "interval_max": 2.0,
}


def new_app(settings: Settings) -> Celery:
    """An unconnected Celery app with every reliability setting and no task registered."""
    vt = settings.visibility_timeout_s
    transport: dict[str, Any] = {
        "visibility_timeout": vt,
        "socket_timeout": 10,
        "socket_connect_timeout": 5,
        "socket_keepalive": True,
        "health_check_interval": 25,
    }
    broker = settings.resolved_broker_url
    if broker.startswith("memory://"):
        # kombu's in-memory transport polls once a second by default: ~500 ms a hop.
        transport = {"polling_interval": 0.002}
        from workers.memory_broker import BROKER_URL

        broker = BROKER_URL
    app = Celery("seatwire", broker=broker, set_as_current=False)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        worker_cancel_long_running_tasks_on_connection_loss=True,
        worker_soft_shutdown_timeout=15.0,
        broker_transport_options=transport,
        result_backend_transport_options={"visibility_timeout": vt},
        visibility_timeout=vt,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        task_ignore_result=True,
        result_backend=None,
        task_serializer="json",
        accept_content=["json"],
        task_time_limit=settings.task_time_limit_s,
        task_soft_time_limit=max(1, settings.task_time_limit_s - 15),
        # A turn runs a seat's launcher, whose own limit is kept 30 s inside the turn's: the
        # launcher, not a soft time limit raised into it, ends a long turn (and its process
        # group). A redelivered turn message after the visibility timeout starts nothing.
        task_annotations={
            Task.TURN.value: {
                "soft_time_limit": settings.turn_time_limit_s,
                "time_limit": settings.turn_time_limit_s + 30,
            }
        },
        task_publish_retry_policy=WORKER_PUBLISH_RETRY,
        task_default_queue=Queue.ENGAGEMENT.value,
        task_routes={name.value: {"queue": q.value} for name, q in TASK_QUEUE.items()},
        worker_max_tasks_per_child=1000,
        worker_hijack_root_logger=False,
        enable_utc=True,
        beat_schedule=beat_schedule(settings),
    )
    return app


def beat_schedule(settings: Settings) -> dict[str, Any]:
    """What `seatwire beat` runs: every beat row of the stage table, at its cadence. A tick
    not started within its interval expires unrun: the next one does its work, so a stalled
    beat worker never comes back to a pile of ticks."""
    schedule: dict[str, Any] = {}
    for stage in BEAT_STAGES:
        assert stage.cadence is not None
        every = float(getattr(settings, stage.cadence))
        schedule[stage.task.value.removeprefix("seatwire.")] = {
            "task": stage.task.value,
            "schedule": every,
            "options": {"queue": stage.queue.value, "expires": every},
        }
    return schedule


def publish(
    app: Celery,
    task: Task,
    tracking_id: str,
    message: dict[str, Any],
    *,
    retry_policy: dict[str, Any] | None = None,
    countdown: float | None = None,
) -> None:
    """Publish one stage message under its deterministic task id."""
    queue = TASK_QUEUE[task]
    app.send_task(
        task.value,
        args=[message],
        task_id=task_id(tracking_id, queue),
        queue=queue.value,
        countdown=countdown,
        # Celery would otherwise saferepr the whole message for monitoring on every publish.
        argsrepr=f"[{tracking_id}]",
        kwargsrepr="{}",
        retry=True,
        retry_policy=retry_policy or WORKER_PUBLISH_RETRY,
    )
