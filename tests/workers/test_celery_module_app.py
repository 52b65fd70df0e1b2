"""`workers.app` is Seatwire's Celery app at module level, for `celery -A workers.app ...` and
Flower: the same bootstrap as `seatwire worker`, and nothing connects at import."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from workers.queues import STAGES

pytestmark = pytest.mark.e2e  # each test imports the app in a fresh Python process


def _import_in_a_fresh_process(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = (
        "import json, workers.app as m; print(m.app.conf.broker_url); "
        "print(json.dumps(sorted(n for n in m.app.tasks if n.startswith('seatwire.'))))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )


def test_importing_it_connects_nowhere_and_registers_every_stage() -> None:
    """Against a Redis that is not there (a closed port) the import still succeeds at once:
    the app names that broker and has every task of the stage table registered."""
    env = {
        "PATH": "/usr/bin:/bin",
        "SEATWIRE_REDIS_URL": "redis://127.0.0.1:1/0",
        "SEATWIRE_API_TOKEN": "t",
    }
    started = time.monotonic()
    done = _import_in_a_fresh_process(env)
    assert done.returncode == 0, done.stderr
    broker, tasks = done.stdout.strip().splitlines()
    assert broker == "redis://127.0.0.1:1/0"
    assert set(json.loads(tasks)) == {s.task.value for s in STAGES}
    assert time.monotonic() - started < 60  # no connection attempt waited on


def test_a_malformed_setting_fails_the_import_naming_it() -> None:
    env = {"PATH": "/usr/bin:/bin", "SEATWIRE_TASK_TIME_LIMIT_S": "soon"}
    done = _import_in_a_fresh_process(env)
    assert done.returncode != 0
    assert "task_time_limit_s" in done.stderr.lower()
