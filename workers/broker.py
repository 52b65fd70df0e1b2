"""The Celery side of the broker: the reliability settings (docs/reliability.md), the beat
schedule, `publish`, and the wire format of a Celery message on a Redis broker, all derived
from the stage table (workers/queues.py).

`configure` sets an app up for given settings without connecting anywhere and without
registering a task (the runtime does that, workers/celery_app.py); the stores and the
recovery code publish through `publish` with nothing more than an app.

When the broker is the stores' own Redis (`shares_broker`), a message can be written without
Celery: `celery_message` is Celery's task protocol 2, JSON, exactly as kombu's Redis transport
stores it (pure string work), and `push` LPUSHes it on a given Redis client. The ingress's
one-script intake (workers/ingress/intake.py), the engagement and guardrail stages' writes
(workers/stores/onward.py: the message goes out in the script that records the decision or
reserves the place) and the other stage hand-offs (workers/stages/base.py `hand_off`) write
theirs so: Celery's `send_task` costs 0.4-1.7 ms of CPU a message (a new kombu client,
`maybe_declare`, routing), the LPUSH a few microseconds.
tests/workers/test_intake.py and tests/workers/test_stage_handoff.py pin both to what Celery
itself writes.

Retries, one owner per hop. A failed task is Celery's to retry (`autoretry_for`, backoff,
jitter, the delivery count: workers/stages/base.py): the message goes back to the broker and
any worker may run it, the journal knowing. A publish is kombu's to retry
(`task_publish_retry_policy`, the policies below). `push`, which bypasses kombu, retries its
LPUSH with tenacity at the same policy's intervals (`publish_retrying`), in place: a short
wait inside the task, never a second layer over Celery's (the task's own retry takes over
once it gives up).
"""

from __future__ import annotations

import functools
import json
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import redis
from celery import Celery
from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_incrementing,
)

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
        # A turn runs a seat's launcher, whose own limit is kept 10-30 s inside the turn's
        # (workers/outbound/launchers.py): the launcher, not a soft time limit raised into it,
        # ends a long turn (and its process group). The soft limit leaves the settlement 30 s
        # after the turn's limit (its own retries of a Redis blip, the escalation's publish);
        # a pool process killed at the hard limit leaves the agent to its keeper. A redelivered
        # turn message after the visibility timeout starts nothing.
        task_annotations={
            Task.TURN.value: {
                "soft_time_limit": settings.turn_time_limit_s + 30,
                "time_limit": settings.turn_time_limit_s + 60,
            }
        },
        task_publish_retry_policy=WORKER_PUBLISH_RETRY,
        task_default_queue=Queue.ENGAGEMENT.value,
        task_routes={name.value: {"queue": q.value} for name, q in TASK_QUEUE.items()},
        worker_max_tasks_per_child=1000,
        worker_hijack_root_logger=False,
        # Task events on from the start (SEATWIRE_TASK_EVENTS), for Flower and `celery
        # events`: nobody has to switch them on remotely after every worker restart.
        worker_send_task_events=settings.task_events,
        task_send_sent_event=settings.task_events,
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


# --------------------------------------------------------------------------- the wire

EMBED = '{"callbacks": null, "errbacks": null, "chain": null, "chord": null}'
_HOST = socket.gethostname()
_REPLY_TO = str(uuid.uuid4())


def shares_broker(settings: Settings) -> bool:
    """True when the Celery broker is the stores' own Redis database (same URL)."""
    url = settings.redis_url
    if url is None or settings.broker_url not in (None, url):
        return False
    return urlsplit(url).scheme in ("redis", "rediss")


def celery_body(payload: str) -> str:
    """Celery's protocol-2 body for one positional argument (a JSON object)."""
    return f"[[{payload}], {{}}, {EMBED}]"


def _template(name: str, queue: str) -> str:
    """The message of task `name` on `queue` as JSON, with @tid@, @root@, @parent@,
    @argsrepr@, @origin@ and @tag@ left to fill in (the ids are tracking ids, uuids and
    pid@host: nothing in them needs escaping; @parent@ is filled in with its JSON, null or a
    string)."""
    message: dict[str, Any] = {
        "body": "@body@",
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {
            "lang": "py",
            "task": name,
            "id": "@tid@",
            "shadow": None,
            "eta": None,
            "expires": None,
            "group": None,
            "group_index": None,
            "retries": 0,
            "timelimit": [None, None],
            "root_id": "@root@",
            "parent_id": "@parent@",
            "argsrepr": "@argsrepr@",
            "kwargsrepr": "{}",
            "origin": "@origin@",
            "ignore_result": None,
            "replaced_task_nesting": 0,
            "stamped_headers": None,
            "stamps": {},
        },
        "properties": {
            "correlation_id": "@tid@",
            "reply_to": _REPLY_TO,
            "argsrepr": "@argsrepr@",
            "kwargsrepr": "{}",
            "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": queue},
            "priority": 0,
            "delivery_tag": "@tag@",
        },
    }
    return json.dumps(message)


_TEMPLATES = {task: _template(task.value, TASK_QUEUE[task].value) for task in Task}


# The parts of a template `_filled` fills in, each replaced by its own value in one pass, and
# the position of each one's value among `_filled`'s.
_SLOTS = re.compile(r'@tid@|@root@|"@parent@"|@argsrepr@|@origin@|@tag@|"@body@"')
_SLOT_INDEX = {
    slot: i
    for i, slot in enumerate(
        ("@tid@", "@root@", '"@parent@"', "@argsrepr@", "@origin@", "@tag@", '"@body@"')
    )
}


@functools.lru_cache(maxsize=64)
def _compiled(template: str) -> str:
    """`template` as a `str.format` string: its text with braces doubled, each slot the field
    of its value (`_SLOT_INDEX`). `format` writes a value as it is, never reading it for
    fields itself."""
    texts, slots = _SLOTS.split(template), _SLOTS.findall(template)
    out = [texts[0].replace("{", "{{").replace("}", "}}")]
    for slot, after in zip(slots, texts[1:], strict=True):
        out += (f"{{{_SLOT_INDEX[slot]}}}", after.replace("{", "{{").replace("}", "}}"))
    return "".join(out)


def _tag() -> str:
    """A random (version 4) UUID as text: kombu's delivery tag."""
    return str(uuid.uuid4())


def _filled(
    template: str,
    tid: str,
    argsrepr: str,
    payload: str | None,
    root_id: str | None,
    parent_id: str | None,
) -> str:
    """`template` with its ids filled in, and its body when `payload` is given. One
    `str.format` of the compiled template (it was seven `str.replace` passes over the whole
    message, then a join of its parts, on every event the ingress accepts and every hand-off
    a stage writes; issue 27); a value is never read for slots itself."""
    return _compiled(template).format(
        tid,
        root_id or tid,
        "null" if parent_id is None else json.dumps(parent_id),
        argsrepr,
        f"gen{os.getpid()}@{_HOST}",
        _tag(),
        '"@body@"' if payload is None else json.dumps(celery_body(payload)),
    )


def foreign_message(name: str, queue: str, task_id: str, payload: str) -> str:
    """`celery_message` for a task that is no `Task` of Seatwire's (bench.noop_app's no-op
    chain, fed by bench.pipeline the way the ingress feeds a report): its own root."""
    return _filled(_template(name, queue), task_id, f"[{task_id}]", payload, None, None)


def celery_message(
    task: Task,
    tracking_id: str,
    payload: str | None = None,
    *,
    root_id: str | None = None,
    parent_id: str | None = None,
) -> str:
    """The message `publish(app, task, tracking_id, json.loads(payload))` puts on the broker:
    Celery task protocol 2, JSON, as kombu's Redis transport stores it — except that the body
    is a plain JSON string (no `body_encoding`, which kombu reads as "not encoded") rather
    than base64. Without `payload` the body is left as `"@body@"`, for the script to fill in
    from the journal payload it is given anyway (the event then crosses the wire once).

    Published from inside a task, Celery names that task as the parent (`parent_id`, its
    id) and its `root_id` (or its id) as the root; outside one (`parent_id` None) the message
    is its own root. `origin` is this process's, as Celery's `anon_nodename()`."""
    tid = task_id(tracking_id, TASK_QUEUE[task])
    return _filled(_TEMPLATES[task], tid, f"[{tracking_id}]", payload, root_id, parent_id)


def stage_message(app: Celery, task: Task, tracking_id: str, payload: str | None) -> str:
    """`celery_message` as Celery publishes it from the task `app` is running, if any: that
    task its parent and its root the message's root."""
    parent = app.current_worker_task
    request = parent.request if parent is not None else None
    return celery_message(
        task,
        tracking_id,
        payload,
        root_id=(request.root_id or request.id) if request is not None else None,
        parent_id=request.id if request is not None else None,
    )


# What kombu retries a publish on: the connection, never a reply (an `OOM` refusal, say).
_PUSH_RETRYABLE = (redis.ConnectionError, redis.TimeoutError)


def publish_retrying(
    policy: dict[str, Any], *, sleep: Callable[[float], None] | None = None
) -> Retrying:
    """Tenacity's retrying of a connection error as kombu's `retry_policy` does it: up to
    `max_retries` more tries, the first after `interval_start` s, each next one
    `interval_step` s later than the last, at most `interval_max`; then the error itself is
    raised. `sleep`: how to wait (time.sleep)."""
    return Retrying(
        retry=retry_if_exception_type(_PUSH_RETRYABLE),
        stop=stop_after_attempt(int(policy["max_retries"]) + 1),
        wait=wait_incrementing(
            start=float(policy["interval_start"]),
            increment=float(policy["interval_step"]),
            max=float(policy["interval_max"]),
        ),
        sleep=sleep or time.sleep,
        reraise=True,
    )


def push(
    client: redis.Redis,
    app: Celery,
    task: Task,
    tracking_id: str,
    message: dict[str, Any],
    *,
    retry_policy: dict[str, Any] | None = None,
) -> None:
    """`publish` on a broker that is `client`'s Redis (`shares_broker`), with one LPUSH of
    the message Celery would write: the same queue, task id, parent and root (those of the
    task `app` is running, if any) and the same retry policy (a connection error is retried
    in place at the policy's intervals, then raised). No countdown: an ETA message is
    Celery's to write."""
    raw = stage_message(app, task, tracking_id, json.dumps(message))
    queue = TASK_QUEUE[task].value
    for attempt in publish_retrying(retry_policy or WORKER_PUBLISH_RETRY):
        with attempt:
            client.lpush(queue, raw)


def push_all(
    client: redis.Redis,
    app: Celery,
    task: Task,
    messages: Sequence[tuple[str, dict[str, Any]]],
    *,
    retry_policy: dict[str, Any] | None = None,
) -> None:
    """`push` of many (tracking id, message) at once: ONE LPUSH of every message Celery would
    write (in chunks of `PUSH_CHUNK`), in their order (a worker's BRPOP takes the first
    first), retried as `push` is. A retry after a connection error may push a chunk Redis had
    taken already: a stage message twice is what every stage takes (its id is its work's)."""
    queue = TASK_QUEUE[task].value
    raws = [stage_message(app, task, t, json.dumps(m)) for t, m in messages]
    for start in range(0, len(raws), PUSH_CHUNK):
        chunk = raws[start : start + PUSH_CHUNK]
        for attempt in publish_retrying(retry_policy or WORKER_PUBLISH_RETRY):
            with attempt:
                client.lpush(queue, *chunk)


PUSH_CHUNK = 1000  # messages per LPUSH of `push_all`
