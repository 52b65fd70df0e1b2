"""The Celery message the one-script intake writes: Celery's task protocol 2, JSON, exactly as
kombu's Redis transport stores it. Pure string work; tests/workers/test_intake.py pins it to
what Celery itself writes."""

from __future__ import annotations

import json
import os
import socket
import uuid
from typing import Any

from workers.queues import TASK_QUEUE, Task, task_id

EMBED = '{"callbacks": null, "errbacks": null, "chain": null, "chord": null}'
_ORIGIN = f"gen{os.getpid()}@{socket.gethostname()}"
_REPLY_TO = str(uuid.uuid4())


def celery_body(payload: str) -> str:
    """Celery's protocol-2 body for one positional argument (a JSON object)."""
    return f"[[{payload}], {{}}, {EMBED}]"


def _template(task: Task) -> str:
    """The message of `task` as JSON, with @tid@, @argsrepr@ and @tag@ left to fill in (the
    ids are tracking ids and uuids: nothing in them needs escaping)."""
    queue = TASK_QUEUE[task].value
    message: dict[str, Any] = {
        "body": "@body@",
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {
            "lang": "py",
            "task": task.value,
            "id": "@tid@",
            "shadow": None,
            "eta": None,
            "expires": None,
            "group": None,
            "group_index": None,
            "retries": 0,
            "timelimit": [None, None],
            "root_id": "@tid@",
            "parent_id": None,
            "argsrepr": "@argsrepr@",
            "kwargsrepr": "{}",
            "origin": _ORIGIN,
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


_TEMPLATES = {task: _template(task) for task in Task}


def celery_message(task: Task, tracking_id: str, payload: str | None = None) -> str:
    """The message `publish(app, task, tracking_id, json.loads(payload))` puts on the broker:
    Celery task protocol 2, JSON, as kombu's Redis transport stores it — except that the body
    is a plain JSON string (no `body_encoding`, which kombu reads as "not encoded") rather
    than base64. Without `payload` the body is left as `"@body@"`, for the script to fill in
    from the journal payload it is given anyway (the event then crosses the wire once)."""
    message = (
        _TEMPLATES[task]
        .replace("@tid@", task_id(tracking_id, TASK_QUEUE[task]))
        .replace("@argsrepr@", f"[{tracking_id}]")
        .replace("@tag@", str(uuid.uuid4()))
    )
    if payload is not None:
        message = message.replace('"@body@"', json.dumps(celery_body(payload)))
    return message
