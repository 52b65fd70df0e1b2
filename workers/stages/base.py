"""The base of every stage task: late ack, retry only what is transient, write a give-up
down, write each start down (and count a redelivery) before the body runs, time each call
(workers/telemetry), and the stage's container.

A stage module declares its handler (plain code, no Celery: load, decide, persist, return the
next message) and a task that validates its message, calls the handler and publishes what
comes back. The task is handed the process's container (`deps`) when it is registered
(`register_stage`), never fetching it from a global.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, TypeVar, cast

import redis
from celery import Celery
from celery import Task as CeleryTask
from celery.exceptions import Retry, SoftTimeLimitExceeded
from celery.signals import worker_process_init
from kombu.exceptions import OperationalError

from contracts._base import Wire
from workers.broker import (
    EMBED,
    RETRY_BACKOFF_MAX_S,
    STAGE_MAX_RETRIES,
    publish,
    push,
    shares_broker,
    stage_message,
)
from workers.clock import now_ms
from workers.container import Container
from workers.errors import TransientError
from workers.queues import BY_TASK, TASK_QUEUE, Queue, Task
from workers.recovery.faults import crash_point
from workers.recovery.leader import admit_tick
from workers.stores.dlq import Delivery
from workers.stores.journal import postpone
from workers.stores.onward import Onward
from workers.stores.ticks import Ticks
from workers.telemetry import TaskOutcome, telemetry

log = logging.getLogger("seatwire.tasks")


# Where a stage's start is written: `apart`, in a round trip of its own before the body
# (delivery_count.lua); `first`, a first delivery's in the stage's first script and a
# redelivery's apart; `always`, every start in the stage's first script (`Start`).
StartIn = Literal["apart", "first", "always"]


class Deps(Protocol):
    """What hands a task its process's container (workers/bootstrap.py `Provider`)."""

    def __call__(self) -> Container: ...


# What a stage retries: its own transient errors, the broker's, Redis's connection errors,
# timeouts and `OOM command not allowed` (at `maxmemory` under `noeviction` a write is
# refused until memory frees up: a wait, never a reason to give an entry up), and its soft
# time limit (a try that ran long, riding out a stalled Redis say, is tried again within the
# retry budget rather than given up at once; each stage is idempotent per tracking id).
RETRYABLE = (
    TransientError,
    OperationalError,
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.OutOfMemoryError,
    SoftTimeLimitExceeded,
)
RETRY_BACKOFF_FACTOR_S = 2


def retry_bound_s(retries: int) -> int:
    """The longest Celery waits before retry number `retries` + 1 (exponential from
    `RETRY_BACKOFF_FACTOR_S`, full jitter below it, capped at `RETRY_BACKOFF_MAX_S`)."""
    return int(min(RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_FACTOR_S * 2 ** min(retries, 16)))


def tracking_id_of(message: Any) -> str:
    found = message.get("trackingId") if isinstance(message, dict) else None
    return str(found) if found else ""


class StageTask(CeleryTask):  # type: ignore[misc]  # celery ships no type hints
    """Base of every stage: late ack, retry only what is transient, write down a give-up,
    and the stage-start hook (the delivery cap, then the `before_claim` crash point)."""

    abstract = True
    deps: ClassVar[Deps]  # set per task by `register_stage`
    # Where the stage's start is written (`StartIn`).
    start_in: ClassVar[StartIn] = "apart"

    @property
    def stage(self) -> Queue:
        return BY_TASK[Task(self.name)].queue

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return timed(self.stage.value, lambda: self._call(*args, **kwargs))

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        # Every start is written down before the body can do anything that may kill the
        # process: the message is marked running (the sweeper never copies a message that is
        # waiting or running), and a redelivery (kombu marks one it put back: a worker
        # process that died on it, a visibility timeout, a shutdown) or a sweeper copy is
        # counted; a message that only waited in its queue counts nothing. At the cap the
        # message is dead-lettered and this returns normally, so Celery acks it and stops.
        # A redelivery's count comes before the `before_claim` crash point too: a message
        # that killed its process there, ahead of the count, would be requeued forever
        # (fault test 4, docs/reliability.md). A start the stage's first script runs instead
        # (`start_in`, `Start` says when) is handed to the body on its request.
        message = args[0] if args else None
        tracking_id = tracking_id_of(message)
        info = self.request.delivery_info or {}
        redelivered = bool(info.get("redelivered"))
        where = self.start_in
        in_script = where == "always" or (where == "first" and not redelivered)
        self.request.seatwire_start = None
        if tracking_id and in_script:
            self.request.seatwire_start = Start(
                self, tracking_id, message, redelivered, crash_after=where == "always"
            )
            if where == "first":  # nothing is written yet, and a first delivery counts nothing
                crash_point(self.stage.value, "before_claim", tracking_id)
            return super().__call__(*args, **kwargs)
        if tracking_id and not self._admit_start(tracking_id, message, redelivered=redelivered):
            return None
        crash_point(self.stage.value, "before_claim", tracking_id)
        return super().__call__(*args, **kwargs)

    def start_of_request(self) -> Start | None:
        """The `Start` this request's body runs in its first script (None: no tracking id,
        or a start written apart, before the body)."""
        start = getattr(self.request, "seatwire_start", None)
        return start if isinstance(start, Start) else None

    def _admit_start(self, tracking_id: str, message: Any, *, redelivered: bool) -> bool:
        """Write a start down before its body runs; False when it must not run: it reached
        the delivery cap (dead-lettered now) or was dead-lettered already."""
        try:
            container = self.deps()
            delivery = container.dead_letters.start(
                tracking_id,
                queue=self.stage,
                message=message,
                now_ms=now_ms(),
                redelivered=redelivered,
                running_ms=(container.settings.task_time_limit_s + 15) * 1000,
            )
        except redis.RedisError as exc:  # the body meets the same Redis, and retries on it
            log.warning("could not count the start of %s: %s", tracking_id, exc)
            return True
        return self.admitted(tracking_id, delivery)

    def admitted(self, tracking_id: str, delivery: Delivery) -> bool:
        """Whether a written start runs, a refusal logged."""
        stage = self.stage
        if delivery.verb == "dead":
            log.error(
                "dead-lettered %s at stage %s after %s deliveries",
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

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        """A stage that gave up writes that down on the journal entry (`failed`, where and
        why) and dead-letters the message with its reason: never a silent drop. An error
        still worth retrying got here only by running out of retries."""
        message = args[0] if args else None
        tracking_id = tracking_id_of(message)
        stage = self.stage
        reason = "max_retries" if isinstance(exc, RETRYABLE) else f"permanent:{type(exc).__name__}"
        log.error("stage %s gave up on %s (%s): %s", stage.value, tracking_id, reason, exc)
        if not tracking_id:
            return
        try:
            self.deps().dead_letters.give_up(
                tracking_id,
                queue=stage,
                reason=reason,
                error=repr(exc),
                message=message,
                now_ms=now_ms(),
            )
        except Exception:  # the journal itself is unreachable; the sweeper will find it
            log.exception("could not record the failure of %s", tracking_id)

    def on_retry(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        # A message in a retry chain is alive, not lost: keep the sweeper off it until after
        # its next try could have run, and no longer: this retry's own backoff bound, not the
        # cap. A retry held by a worker that then lost its connection (kombu keeps it in its
        # unacked hash until the visibility timeout) is re-enqueued by the sweeper soon after.
        tracking_id = tracking_id_of(args[0] if args else None)
        if not tracking_id:
            return
        try:
            container = self.deps()
            wait_s = retry_bound_s(int(self.request.retries or 0))
            until = now_ms() + wait_s * 1000 + container.settings.journal_deadline_ms
            postpone(container.redis, tracking_id, until_ms=until)
        except Exception as exc2:  # best effort: at worst the sweeper sends a duplicate
            log.warning("could not postpone the deadline of %s: %s", tracking_id, exc2)


class Start:
    """A stage's start run by the stage's first script instead of in a round trip of its
    own: the delivery cap and the running mark of `StageTask._admit_start` (stage_start.lua),
    ahead of the script's own work; the script does nothing more unless the start is admitted.

    Where (`StageTask.start_in`, given to `register_stage`):
    - `always`: every start (the guardrail stage, whose first script is its reservation).
      The `before_claim` crash point follows the admission, so the count still comes before
      it (fault test 4, docs/reliability.md): for that stage the point comes after the
      reservation. The body before the script only validates the message: nothing there
      runs on what it says.
    - `first`: a first delivery's (the engagement stage's decision record, the send stage's
      send_begin). A first delivery counts nothing (the count is of REdeliveries), so what
      its start adds there is the running mark and the check that the entry is not dead; its
      `before_claim` point comes before the body, where nothing is written yet. A redelivery
      (kombu's `redelivered`: a process died on it, a visibility timeout, a shutdown) is
      counted apart before its body, as a stage that writes its start apart does, so a
      message that kills its process in the body (the engagement's plan, say) is still
      dead-lettered at the cap. A sweeper copy is not marked redelivered: the script counts
      it, from the copies the sweeper noted. Until the script, the message is marked running
      nowhere: a sweep in that moment may copy it once, which costs a redundant message,
      never an effect (workers/recovery/sweeper.py)."""

    def __init__(
        self,
        task: StageTask,
        tracking_id: str,
        message: Any,
        redelivered: bool,
        *,
        crash_after: bool = True,
    ) -> None:
        self.task = task
        self.tracking_id = tracking_id
        self.message = message
        self.redelivered = redelivered
        self.crash_after = crash_after

    def script_args(self) -> tuple[list[str], list[str]]:
        """The start's keys and arguments, for the stage's first script to run it."""
        container = self.task.deps()
        return container.dead_letters.start_of(
            self.tracking_id,
            queue=self.task.stage,
            message=self.message,
            now_ms=now_ms(),
            redelivered=self.redelivered,
            running_ms=(container.settings.task_time_limit_s + 15) * 1000,
        )

    def admit(self, delivery: Delivery) -> bool:
        """Whether the body goes on (a refusal logged), then, for an `always` start, the
        `before_claim` point."""
        run = self.task.admitted(self.tracking_id, delivery)
        if run and self.crash_after:
            crash_point(self.task.stage.value, "before_claim", self.tracking_id)
        return run


def refused(start: Start | None, started: Delivery | None) -> bool:
    """Whether a stage's first script refused to go on for the start it was handed: False
    without a start; else `start.admit` on the script's answer (`started`, which a script
    given a start always returns), which logs a refusal."""
    if start is None:
        return False
    assert started is not None  # a script given a start always answers for it
    return not start.admit(started)


@dataclass(frozen=True)
class Onwards:
    """The next stage's messages of a stage whose broker is the stores' own Redis
    (`shares_broker`), for the store script whose write calls for one to push it in the same
    atomic step (workers/stores/onward.py). A stage without it (`onwards` None: any other
    broker) publishes after its write, with `hand_off`."""

    app: Celery

    def message(self, task: Task, tracking_id: str, payload: str, tail: str = "") -> Onward:
        """`task`'s message for `tracking_id`, published from the task being run."""
        return Onward(
            queue=TASK_QUEUE[task].value,
            template=stage_message(self.app, task, tracking_id, None),
            payload=payload,
            tail=tail,
            embed=EMBED,
        )


def onwards(app: Celery, container: Container) -> Onwards | None:
    """A stage's `Onwards` when its broker is the stores' own Redis; None otherwise."""
    return Onwards(app) if shares_broker(container.settings) else None


def hand_off(
    app: Celery, container: Container, task: Task, tracking_id: str, message: dict[str, Any]
) -> None:
    """Publish the next stage's message from inside a stage, under its deterministic task id
    and the workers' publish retry policy: with one LPUSH of the message Celery would write
    when the broker is the stores' own Redis (`shares_broker`; Celery's `send_task` costs
    over a millisecond of CPU a message, most of a no-op hop), through Celery's publish for
    any other broker. A failure either way is a retryable error for the stage, whose retry
    runs it again idempotently (its decision or reservation is found, not made twice)."""
    if shares_broker(container.settings):
        push(container.redis, app, task, tracking_id, message)
    else:
        publish(app, task, tracking_id, message)


# Every stage task's options: late ack, retry only what is transient, a bounded backoff.
STAGE_TASK_OPTIONS: dict[str, Any] = {
    "base": StageTask,
    "bind": True,
    "acks_late": True,
    "autoretry_for": RETRYABLE,
    "retry_backoff": RETRY_BACKOFF_FACTOR_S,
    "retry_backoff_max": RETRY_BACKOFF_MAX_S,
    "retry_jitter": True,
    "max_retries": STAGE_MAX_RETRIES,
    # Registered on the app being built only: a shared task would be added to every app
    # created later in the process too (embedded mode and the tests build several).
    "shared": False,
}

# No retry: a lost tick is replaced by the next one.
BEAT_TASK_OPTIONS: dict[str, Any] = {"bind": True, "max_retries": 0, "shared": False}


W = TypeVar("W", bound=Wire)
R = TypeVar("R")


def timed(stage: str, call: Callable[[], R]) -> R:
    """`call()`, recorded as one of `stage`'s task calls: its latency, its start's round trip
    included, and how it ended (a `Retry` is Celery's own way out of a try that runs again,
    autoretry's included)."""
    started = time.perf_counter()
    outcome: TaskOutcome = "error"
    try:
        result = call()
        outcome = "ok"
        return result
    except Retry:
        outcome = "retry"
        raise
    finally:
        telemetry().task_ran(stage, outcome, time.perf_counter() - started)


def register_stage(
    app: Celery,
    task: Task,
    deps: Deps,
    run: Callable[[StageTask, W], None],
    *,
    start_in: StartIn = "apart",
) -> CeleryTask:
    """Register `run(task, envelope)` as the task of one pipeline row of the stage table:
    its name and queue, the stage options, handed `deps`, its message validated as the row's
    envelope before `run` sees it. With `start_in` `first` or `always`, `run`'s first script
    runs the start it is handed (`task.start_of_request()`, None when written apart)."""
    stage = BY_TASK[task]
    envelope = stage.envelope
    if envelope is None:
        raise ValueError(f"{task.value} is a beat row: register it with register_beat")

    def body(self: StageTask, message: dict[str, Any]) -> None:
        run(self, cast(W, envelope.model_validate(message)))

    return _register(app, stage.task, deps, body, {**STAGE_TASK_OPTIONS, "start_in": start_in})


def register_beat(
    app: Celery, task: Task, deps: Deps, run: Callable[[StageTask, int | None], None]
) -> None:
    """Register `run(task, fence)` as the tick of one beat row of the stage table: `fence` is
    the fencing token of the beat leader that scheduled the tick (workers/recovery/leader.py),
    None for a tick run in process (embedded mode, `apply()`). A tick from a deposed leader
    (its token not the current one) is refused here, for every beat row alike, and logged;
    `run` only sees admitted ticks."""
    stage = BY_TASK[task]
    if not stage.beat:
        raise ValueError(f"{task.value} is a pipeline stage: register it with register_stage")
    tick = stage.tick
    assert tick is not None  # every beat stage has a cadence

    def body(self: StageTask, fence: int | None = None) -> None:
        refused = admit_tick(self.deps().redis, fence, in_process=bool(self.request.is_eager))
        if refused:
            log.warning("%s tick refused: %s", task.value, refused)
            telemetry().ticked(tick, "refused")
            return
        timed(stage.queue.value, lambda: run(self, fence))
        Ticks(self.deps().redis).mark(tick, now_ms())
        telemetry().ticked(tick, "ran")

    _register(app, stage.task, deps, body, BEAT_TASK_OPTIONS)


def _register(
    app: Celery, task: Task, deps: Deps, body: Callable[..., None], options: dict[str, Any]
) -> CeleryTask:
    # `deps` becomes an attribute of the task's class: a staticmethod, so that a plain
    # function is not bound as a method of the task.
    registered: CeleryTask = app.task(
        name=task.value, queue=BY_TASK[task].queue.value, deps=staticmethod(deps), **options
    )(body)
    return registered


def ready_pool_process(deps: Deps) -> None:
    """A new prefork pool process (at start, and each time one is recycled) builds its
    container before its first task, then hides it from the cyclic collector, as `seatwire
    worker` hid what the process inherited: it lives as long as the process, and walking it
    on every full collection would be paid by the tasks."""

    def ready(**_: Any) -> None:
        try:
            deps()
        except Exception:  # the first task meets the same error and reports it against its entry
            log.exception("could not build this pool process's container")
        gc.freeze()

    # One hook per provider: a process that registers tasks twice (the tests) warms both.
    uid = f"seatwire.ready_pool_process.{id(deps)}"
    worker_process_init.connect(ready, weak=False, dispatch_uid=uid)
