"""Flower as compose runs it (`celery -A workers.app flower`, basic auth from
FLOWER_BASIC_AUTH), as a process on a free port against a real Redis."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import redis
import yaml

from tests.e2e.cluster import TOKEN, stop_processes
from workers.embedded import free_port
from workers.settings import REPO_ROOT

pytestmark = pytest.mark.e2e

CELERY = str(Path(sys.executable).parent / "celery")


def flower_command(port: int) -> list[str]:
    """compose's flower command, on the loopback and the given port."""
    spec = yaml.safe_load((REPO_ROOT / "compose.yaml").read_text())
    command: list[str] = spec["services"]["flower"]["command"]
    assert "--address=0.0.0.0" in command and "--port=5555" in command
    swapped = {"celery": CELERY, "--address=0.0.0.0": "--address=127.0.0.1"}
    return [f"--port={port}" if a == "--port=5555" else swapped.get(a, a) for a in command]


def wait_up(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"flower exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{base}/healthcheck", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"flower never answered at {base}:\n{log.read_text()}")


def test_flower_answers_only_with_its_basic_auth(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Flower starts on Seatwire's app with only SEATWIRE_REDIS_URL for a broker; its API
    answers 401 without credentials or with wrong ones, and 200 with FLOWER_BASIC_AUTH's."""
    port = free_port()
    env = {
        **os.environ,
        "SEATWIRE_REDIS_URL": redis_url,
        "SEATWIRE_API_TOKEN": TOKEN,
        "FLOWER_BASIC_AUTH": "ops:s3cret",
    }
    log = tmp_path / "flower.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            flower_command(port),
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_up(base, proc, log)
        assert httpx.get(f"{base}/api/workers", timeout=5).status_code == 401
        wrong = httpx.get(f"{base}/api/workers", auth=("ops", "nope"), timeout=5)
        assert wrong.status_code == 401
        right = httpx.get(f"{base}/api/workers", auth=("ops", "s3cret"), timeout=5)
        assert right.status_code == 200 and isinstance(right.json(), dict)
    finally:
        stop_processes([proc])
    # The broker it reached is the one SEATWIRE_REDIS_URL names (Flower logs it masked).
    assert f"@{redis_url.split('://', 1)[1].rpartition('@')[2]}" in log.read_text()
