"""One thin task per stage: validate the message, call the handler, publish what it returns."""

from __future__ import annotations

import gc
import logging
from typing import Any

import redis
from celery import Celery
from celery import Task as CeleryTask
from celery.signals import worker_process_init
from kombu.exceptions import OperationalError

from contracts.messages import (
    DecisionEnvelope,
    InboundEnvelope,
    ReservedEnvelope,
    WorkEnvelope,
)
from workers import bootstrap
from workers.celery_app import (
    RETRY_BACKOFF_MAX_S,
    STAGE_MAX_RETRIES,
    Queue,
    Task,
    publish,
)
from workers.errors import LeaseBusy, TransientError

log = logging.getLogger("seatwire.tasks")

RETRYABLE = (TransientError, OperationalError, redis.ConnectionError, redis.TimeoutError)


def _on_failure(stage: str, message: Any, exc: BaseException) -> None:
    """A stage that gave up writes that down on the journal entry: never a silent drop."""
    tracking_id = message.get("trackingId") if isinstance(message, dict) else None
    log.error("stage %s failed for %s: %s", stage, tracking_id, exc)
    if tracking_id:
        try:
            bootstrap.current().journal.fail(
                str(tracking_id), stage=stage, error=repr(exc), now_ms=bootstrap.now_ms()
            )
        except Exception:  # the journal itself is unreachable; the sweeper will find it
            log.exception("could not record the failure of %s", tracking_id)


class StageTask(CeleryTask):  # type: ignore[misc]
    """Base of every stage: late ack, retry only what is transient, write down a give-up."""

    abstract = True

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        _on_failure(self.name.split(".", 1)[-1], args[0] if args else None, exc)


# Every stage task's options: late ack, retry only what is transient, a bounded backoff.
STAGE_TASK_OPTIONS: dict[str, Any] = {
    "base": StageTask,
    "bind": True,
    "acks_late": True,
    "autoretry_for": RETRYABLE,
    "retry_backoff": 2,
    "retry_backoff_max": RETRY_BACKOFF_MAX_S,
    "retry_jitter": True,
    "max_retries": STAGE_MAX_RETRIES,
}


def _ready_pool_process(**_: Any) -> None:
    """A new prefork pool process (at start, and each time one is recycled) builds its
    container before its first task, then hides it from the cyclic collector, as `seatwire
    worker` hid what the process inherited: it lives as long as the process, and walking it
    on every full collection would be paid by the tasks."""
    try:
        bootstrap.current()
    except Exception:  # the first task meets the same error and reports it against its entry
        log.exception("could not build this pool process's container")
    gc.freeze()


def register_tasks(app: Celery) -> None:
    worker_process_init.connect(
        _ready_pool_process, weak=False, dispatch_uid="seatwire.ready_pool_process"
    )
    options = STAGE_TASK_OPTIONS

    @app.task(name=Task.DIRECTEDNESS.value, queue=Queue.DIRECTEDNESS.value, **options)
    def directedness(self: Any, message: dict[str, Any]) -> None:
        env = InboundEnvelope.model_validate(message)
        bootstrap.current().stages.directedness(env)

    @app.task(name=Task.ENGAGEMENT.value, queue=Queue.ENGAGEMENT.value, **options)
    def engagement(self: Any, message: dict[str, Any]) -> None:
        env = WorkEnvelope.model_validate(message)
        nxt = bootstrap.current().stages.engagement(env)
        if nxt is not None:
            publish(app, Task.GUARDRAILS, nxt.tracking_id, nxt.to_wire())

    @app.task(name=Task.GUARDRAILS.value, queue=Queue.GUARDRAILS.value, **options)
    def guardrails(self: Any, message: dict[str, Any]) -> None:
        env = DecisionEnvelope.model_validate(message)
        nxt = bootstrap.current().stages.guardrails(env)
        if nxt is not None:
            publish(app, Task.SEND, nxt.tracking_id, nxt.to_wire())

    @app.task(name=Task.SEND.value, queue=Queue.SEND.value, **options)
    def send(self: Any, message: dict[str, Any]) -> None:
        env = ReservedEnvelope.model_validate(message)
        container = bootstrap.current()
        try:
            container.stages.send(env)
        except LeaseBusy as busy:
            wait_s = max(1.0, (busy.until_ms - bootstrap.now_ms()) / 1000 + 1)
            raise self.retry(countdown=min(wait_s, RETRY_BACKOFF_MAX_S), exc=busy) from busy
