"""One thin task per stage: validate the message, call the handler, publish what it returns."""

from __future__ import annotations

import gc
import logging
import random
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
from pipeline.backoff import retry_delay
from workers import bootstrap
from workers.celery_app import (
    RETRY_BACKOFF_MAX_S,
    STAGE_MAX_RETRIES,
    Queue,
    Task,
    publish,
)
from workers.errors import Deferred, LeaseBusy, MaybeSent, NotSent, TransientError
from workers.faults import crash_point
from workers.parking import park
from workers.sweeper import postpone, run_tick

log = logging.getLogger("seatwire.tasks")

RETRYABLE = (TransientError, OperationalError, redis.ConnectionError, redis.TimeoutError)


def _tracking_id(message: Any) -> str:
    found = message.get("trackingId") if isinstance(message, dict) else None
    return str(found) if found else ""


def _on_failure(stage: Queue, message: Any, exc: BaseException) -> None:
    """A stage that gave up writes that down on the journal entry (`failed`, where and why)
    and dead-letters the message with its reason: never a silent drop. An error still worth
    retrying got here only by running out of retries."""
    tracking_id = _tracking_id(message)
    reason = "max_retries" if isinstance(exc, RETRYABLE) else f"permanent:{type(exc).__name__}"
    log.error("stage %s gave up on %s (%s): %s", stage.value, tracking_id, reason, exc)
    if tracking_id:
        try:
            bootstrap.current().dead_letters.give_up(
                tracking_id,
                queue=stage,
                reason=reason,
                error=repr(exc),
                message=message,
                now_ms=bootstrap.now_ms(),
            )
        except Exception:  # the journal itself is unreachable; the sweeper will find it
            log.exception("could not record the failure of %s", tracking_id)


def _admit_redelivery(stage: Queue, tracking_id: str, message: Any) -> bool:
    """Count a redelivered message before its body runs; False when it must not run: it
    reached the delivery cap (dead-lettered now) or was dead-lettered already."""
    try:
        delivery = bootstrap.current().dead_letters.count_redelivery(
            tracking_id, queue=stage, message=message, now_ms=bootstrap.now_ms()
        )
    except redis.RedisError as exc:  # the body meets the same Redis, and retries on it
        log.warning("could not count the redelivery of %s: %s", tracking_id, exc)
        return True
    if delivery.verb == "dead":
        log.error(
            "dead-lettered %s at stage %s after %s deliveries (worker_lost_loop)",
            tracking_id,
            stage.value,
            delivery.deliveries,
        )
    elif delivery.verb == "done":
        log.warning(
            "redelivered %s at stage %s is %s already: acked, not run",
            tracking_id,
            stage.value,
            delivery.state,
        )
    return delivery.run


class StageTask(CeleryTask):  # type: ignore[misc]
    """Base of every stage: late ack, retry only what is transient, write down a give-up,
    and the stage-start hook (the delivery cap, then the `before_claim` crash point)."""

    abstract = True

    @property
    def stage(self) -> Queue:
        return Queue(self.name.split(".", 1)[-1])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # A redelivered message (kombu marks one it put back: a worker process that died on
        # it, a visibility timeout, a shutdown) is counted BEFORE the body, which may kill
        # the process again; a first delivery costs no round trip. At the cap the message is
        # dead-lettered and this returns normally, so Celery acks it and stops. The count
        # comes before the `before_claim` crash point too: a message that killed its process
        # there, ahead of the count, would be requeued forever (RELIABILITY.md test 4).
        message = args[0] if args else None
        tracking_id = _tracking_id(message)
        info = self.request.delivery_info
        if (
            info
            and info.get("redelivered")
            and tracking_id
            and not _admit_redelivery(self.stage, tracking_id, message)
        ):
            return None
        crash_point(self.stage.value, "before_claim", tracking_id)
        return super().__call__(*args, **kwargs)

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        _on_failure(self.stage, args[0] if args else None, exc)

    def on_retry(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        # A message in a retry chain is alive, not lost: keep the sweeper off it until after
        # its next try could have run (the backoff is capped at RETRY_BACKOFF_MAX_S).
        tracking_id = _tracking_id(args[0] if args else None)
        if not tracking_id:
            return
        try:
            container = bootstrap.current()
            until = (
                bootstrap.now_ms()
                + RETRY_BACKOFF_MAX_S * 1000
                + container.settings.journal_deadline_ms
            )
            postpone(container.redis, tracking_id, until_ms=until)
        except Exception as exc2:  # best effort: at worst the sweeper sends a duplicate
            log.warning("could not postpone the deadline of %s: %s", tracking_id, exc2)


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
    # Registered on the app being built only: a shared task would be added to every app
    # created later in the process too (embedded mode and the tests build several).
    "shared": False,
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


# A send's budgets of tries, kept on its op (not in the broker's retry count, which every kind
# of retry shares): waiting out rate limits is not failing, so it has a budget of its own.
RATE_LIMITED_TRIES = 60
NOT_SENT_TRIES = 9


def _again(app: Celery, container: Any, env: ReservedEnvelope, wait_s: float, reason: str) -> None:
    """Run the send again in `wait_s`: a fresh message with a countdown when the wait fits
    under the cap (a longer countdown outlives the broker's visibility timeout and runs
    twice), else parked in Redis for beat to re-publish when due. The entry's deadline moves
    past the wait, so the sweeper leaves it alone meanwhile."""
    now = bootstrap.now_ms()
    if wait_s > RETRY_BACKOFF_MAX_S:
        park(
            container.redis,
            Task.SEND,
            env.tracking_id,
            env.to_wire(),
            due_ms=now + int(wait_s * 1000),
            reason=reason,
        )
        return
    postpone(
        container.redis,
        env.tracking_id,
        until_ms=now + int(wait_s * 1000) + container.settings.journal_deadline_ms,
    )
    publish(app, Task.SEND, env.tracking_id, env.to_wire(), countdown=wait_s)


def register_beat_tasks(app: Celery) -> None:
    """The tasks beat schedules (celery_app `beat_schedule`), run by `seatwire beat`'s own
    worker on the `beat` queue, so recovery never waits behind a stage's backlog."""

    # No late ack and no retry: a lost tick is replaced by the next one.
    @app.task(name=Task.SWEEP.value, queue=Queue.BEAT.value, bind=True, max_retries=0, shared=False)
    def sweep(self: Any) -> None:
        run_tick(bootstrap.current(), self.app)


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
            crash_point("guardrails", "after_reserve", env.tracking_id)
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
        except NotSent as refused:
            # Never applied. Its tries are counted on the op, by kind: a rate limit is waited
            # out (exactly its Retry-After) within its own budget; anything else backs off
            # within the stage's. Out of tries: `send_failed`, written down with why.
            rate_limited = refused.retry_after_s is not None
            budget = RATE_LIMITED_TRIES if rate_limited else NOT_SENT_TRIES
            if refused.tries >= budget:
                container.stages.give_up(env, f"{refused.reason} (after {refused.tries} tries)")
                return
            wait_s = retry_delay(
                max(0, refused.tries - 1),
                retry_after_s=refused.retry_after_s,
                u=random.random(),
                cap_s=RETRY_BACKOFF_MAX_S,
            )
            _again(self.app, container, env, wait_s, refused.reason)
            return
        except Deferred as held:
            # Quiet hours: parked until the window ends, however long; never a try used up.
            park(
                container.redis,
                Task.SEND,
                env.tracking_id,
                env.to_wire(),
                due_ms=held.until_ms,
                reason=held.reason,
            )
            return
        except MaybeSent as unsure:
            # Reconciled on the next try; past the last one it reaches the dead-letter queue
            # with its op still `unknown`, for a person, rather than be sent blind. The next
            # try waits out any Retry-After, and at least twice the call timeout: a post the
            # provider applies late must be visible before the look-up.
            if self.request.retries >= self.max_retries:
                raise
            wait_s = max(
                retry_delay(
                    self.request.retries,
                    retry_after_s=unsure.retry_after_s,
                    u=random.random(),
                    cap_s=RETRY_BACKOFF_MAX_S,
                ),
                2 * container.settings.send_timeout_s,
            )
            if wait_s > RETRY_BACKOFF_MAX_S:
                _again(self.app, container, env, wait_s, unsure.reason)
                return
            raise self.retry(countdown=wait_s, exc=unsure) from unsure
        crash_point("send", "after_done_before_ack", env.tracking_id)
