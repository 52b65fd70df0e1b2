"""Seatwire's processes started for an end-to-end test, as compose.yaml runs them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml

from bench.chaos import wait_ingress
from tests.auth import SeatTokens, routes_as_seats
from workers.embedded import free_port
from workers.org import OrgSource
from workers.settings import REPO_ROOT

TOKEN = "e2e-token"
SEATWIRE = str(Path(sys.executable).parent / "seatwire")
FINAL = {
    "engaged",
    "nobody",
    "refused",
    "send_failed",
    "send_blocked",
    "failed",
    "dead",
    "shadowed",
    "off",
}


def compose_commands() -> dict[str, list[str]]:
    """The command of every Seatwire service in compose.yaml."""
    spec = yaml.safe_load((REPO_ROOT / "compose.yaml").read_text())
    return {
        name: svc["command"]
        for name, svc in spec["services"].items()
        if svc.get("command") and svc["command"][0] == "seatwire"
    }


@dataclass
class Cluster:
    base: str
    env: dict[str, str]
    outbox: Path
    procs: list[subprocess.Popen[bytes]]
    logs: list[Path]

    def http(self) -> httpx.Client:
        """A client with the operator token, whose requests to a seat's routes go with that
        seat's own token (issued into the cluster's Redis through the store)."""
        client = httpx.Client(
            base_url=self.base, timeout=10, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        self.seat_tokens(client)
        return client

    def seat_tokens(self, client: httpx.Client) -> SeatTokens:
        """Each seat of the cluster's org a token issued into its Redis, swapped in on the
        seat routes of `client` (tests/auth.py `routes_as_seats`)."""
        org = OrgSource.open(Path(self.env["SEATWIRE_ORG_FILE"]))
        r = redis.Redis.from_url(self.env["SEATWIRE_REDIS_URL"])
        return routes_as_seats(client, r, org, TOKEN)


@contextmanager
def start_cluster(
    commands: dict[str, list[str]], redis_url: str, tmp_path: Path, **extra_env: str
) -> Iterator[Cluster]:
    """Start each command as a process (the ingress on a free local port) and wait for it."""
    port = free_port()
    outbox = tmp_path / "outbox.jsonl"
    env = {
        **os.environ,
        "SEATWIRE_REDIS_URL": redis_url,
        "SEATWIRE_API_TOKEN": TOKEN,
        "SEATWIRE_ORG_FILE": str(REPO_ROOT / "examples" / "org.yaml"),
        "SEATWIRE_OUTBOX_PATH": str(outbox),
        "SEATWIRE_OUTBOX_FSYNC": "false",
        **extra_env,
    }
    procs, logs = [], []
    for name, command in commands.items():
        args = [SEATWIRE if a == "seatwire" else a for a in command]
        if name == "ingress":
            args = [
                str(port) if prev == "--port" else ("127.0.0.1" if prev == "--host" else a)
                for prev, a in zip(["", *args[:-1]], args, strict=True)
            ]
        log = tmp_path / f"{name}.log"
        logs.append(log)
        with log.open("wb") as fh:
            procs.append(
                subprocess.Popen(
                    args, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
                )
            )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ingress(base, procs)
        yield Cluster(base=base, env=env, outbox=outbox, procs=procs, logs=logs)
    finally:
        stop_processes(procs)


def stop_processes(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each process group, then SIGKILL whatever has not exited after 20 s."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def wait_final(http: httpx.Client, tracking_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body: dict[str, Any] = http.get(f"/v1/work/{tracking_id}").json()
        if body["state"] in FINAL:
            return body
        time.sleep(0.05)
    raise TimeoutError(f"{tracking_id} never reached a final state")


def needs_redis_server() -> None:
    """Skip locally (fail in CI) without a `redis-server` binary to start."""
    from bench.chaos import redis_server_path
    from tests.conftest import IN_CI

    if redis_server_path() is None:
        message = "redis-server is not on the PATH: the fault tests start their own"
        if IN_CI:
            pytest.fail(f"{message}; CI must run them", pytrace=False)
        pytest.skip(message)
