"""Celery's own tools load Seatwire's app: `celery -A workers.app inspect ...` and `control ...`
reach a running `seatwire worker` with no `--broker` given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from tests.e2e.cluster import SEATWIRE, stop_processes

pytestmark = pytest.mark.e2e

CELERY = str(Path(sys.executable).with_name("celery"))


def test_celery_inspect_and_control_load_workers_app(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """A worker of two queues answers ping and active_queues through `-A workers.app`, and
    its task events were on from its start."""
    env = {**os.environ, "SEATWIRE_REDIS_URL": redis_url, "SEATWIRE_API_TOKEN": "t"}
    env["SEATWIRE_OUTBOX_PATH"] = str(tmp_path / "outbox.jsonl")
    log = tmp_path / "worker.log"
    with log.open("wb") as fh:
        worker = subprocess.Popen(
            [SEATWIRE, "worker", "--queues", "engagement,guardrails", "--concurrency", "1"],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while b" ready." not in log.read_bytes():
            assert worker.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)

        def celery(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [CELERY, "-A", "workers.app", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )

        ping = celery("inspect", "ping", "--timeout", "10", "--json")
        assert ping.returncode == 0, ping.stderr
        [(node, pong)] = json.loads(ping.stdout).items()
        assert node.startswith("engagement+guardrails-") and pong == {"ok": "pong"}
        queues = celery("inspect", "active_queues", "--timeout", "10", "--json")
        assert queues.returncode == 0, queues.stderr
        [consumed] = json.loads(queues.stdout).values()
        assert sorted(q["name"] for q in consumed) == ["engagement", "guardrails"]
        # Task events are on from the start: enabling them finds them enabled already.
        control = celery("control", "enable_events", "--timeout", "10", "--json")
        assert control.returncode == 0, control.stderr
        [replies] = json.loads(control.stdout)  # control answers a list, one per node
        [answer] = replies.values()
        assert answer == {"ok": "task events already enabled"}
    finally:
        stop_processes([worker])
