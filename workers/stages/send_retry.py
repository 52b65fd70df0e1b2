"""When a send that did not get through runs again: its error as a `SendFailure`, the pure
`plan_retry` (pipeline/send.py), and the plan carried out (a broker retry, a fresh message
with a countdown, a park, a give-up, or the error raised on to the stage's give-up)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any, Protocol

from celery import Celery

from contracts.messages import ReservedEnvelope
from contracts.send import RetryPlan, RetryPolicy, SendFailure
from pipeline.send import plan_retry
from workers.broker import RETRY_BACKOFF_MAX_S, STAGE_MAX_RETRIES, publish
from workers.clock import now_ms
from workers.container import Container
from workers.errors import Deferred, LeaseBusy, MaybeSent, NotSent, TransientError
from workers.outbound.base import MAX_RETRY_AFTER_S
from workers.queues import Task
from workers.stores.journal import postpone
from workers.stores.parking import park


class SendTask(Protocol):
    """What a retry plan needs of the running send task (a bound Celery task)."""

    app: Celery
    request: Any  # celery's Context, untyped

    def retry(self, *, countdown: float | None, exc: BaseException) -> BaseException: ...


def _wait(value: float | None) -> float | None:
    """A provider's wait as the plan may take it: finite, within [0, an hour]."""
    if value is None or math.isnan(value):
        return None
    return min(max(0.0, value), MAX_RETRY_AFTER_S)


def failure_of(exc: TransientError) -> SendFailure | None:
    """A try's error as the value `plan_retry` takes (None: not one a send plans for)."""
    if isinstance(exc, LeaseBusy):
        return SendFailure(kind="lease_busy", reason=str(exc), until_ms=exc.until_ms)
    if isinstance(exc, NotSent):
        return SendFailure.never_sent(exc.reason, retry_after_s=_wait(exc.retry_after_s))
    if isinstance(exc, MaybeSent):
        return SendFailure(
            kind="maybe_sent", reason=exc.reason, retry_after_s=_wait(exc.retry_after_s)
        )
    if isinstance(exc, Deferred):
        return SendFailure(kind="deferred", reason=exc.reason, until_ms=exc.until_ms)
    return None


def retry_policy(c: Container) -> RetryPolicy:
    return RetryPolicy(
        max_retries=STAGE_MAX_RETRIES,
        countdown_cap_s=RETRY_BACKOFF_MAX_S,
        in_doubt_floor_s=2 * c.settings.send_timeout_s,
    )


GiveUp = Callable[[ReservedEnvelope, str], str]


def retry_send(
    task: SendTask, c: Container, env: ReservedEnvelope, exc: TransientError, give_up: GiveUp
) -> bool:
    """Plan and carry out the next try of a send that failed with `exc` (`give_up` writes
    `send_failed` down when it is out of tries); False when `exc` is no send failure (the
    stage's own retry handles it)."""
    failure = failure_of(exc)
    if failure is None:
        return False
    # Tries of a never-sent kind are the op's own count; the rest spend the broker's.
    tries = exc.tries if isinstance(exc, NotSent) else int(task.request.retries)
    plan = plan_retry(
        failure, tries=tries, policy=retry_policy(c), u=random.random(), now_ms=now_ms()
    )
    apply_plan(task, c, env, plan, exc, give_up)
    return True


def apply_plan(
    task: SendTask,
    c: Container,
    env: ReservedEnvelope,
    plan: RetryPlan,
    exc: TransientError,
    give_up: GiveUp,
) -> None:
    """Carry out a retry plan: a broker retry, a fresh message with a countdown (the entry's
    deadline moved past it, so the sweeper leaves it alone), a park, a give-up (written down
    as `send_failed`), or the error raised on to the stage's give-up (the dead-letter queue)."""
    if plan.kind == "countdown" and plan.via == "retry":
        raise task.retry(countdown=plan.wait_s, exc=exc) from exc
    if plan.kind == "countdown":
        wait_s = plan.wait_s or 0.0
        until = now_ms() + int(wait_s * 1000) + c.settings.journal_deadline_ms
        postpone(c.redis, env.tracking_id, until_ms=until)
        publish(task.app, Task.SEND, env.tracking_id, env.to_wire(), countdown=wait_s)
    elif plan.kind == "park":
        assert plan.due_ms is not None  # the contract sets it on every park
        park(c.redis, Task.SEND, env.tracking_id, env.to_wire(), plan.due_ms, plan.reason)
    elif plan.kind == "give_up":
        give_up(env, plan.reason)
    else:
        raise exc
