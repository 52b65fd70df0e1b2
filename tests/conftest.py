"""Shared fixtures. Anything that touches Redis uses a REAL Redis server.

SEATWIRE_TEST_REDIS_URL (default redis://127.0.0.1:6379/15) names a database the tests may
flush; run in parallel (pytest-xdist, `-n 2` by default: pyproject.toml), worker K flushes the
database K below it instead (15, 14, ...), so no two workers share one. Without a reachable
server, Redis tests SKIP locally with a visible reason, and FAIL when CI=true: CI must never
pass because the real-Redis tests did not run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis


def _worker_url(url: str, worker: str) -> str:
    """`url` for xdist worker `worker` (gw0, gw1, ...): its database K below the given one."""
    found = re.fullmatch(r"gw(\d+)", worker)
    if found is None:
        return url
    head, _, db = url.rpartition("/")
    if not db.isdigit():
        head, db = url.rstrip("/"), "0"
    return f"{head}/{(int(db) - int(found.group(1))) % 16}"


REDIS_URL = _worker_url(
    os.environ.get("SEATWIRE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"),
    os.environ.get("PYTEST_XDIST_WORKER", ""),
)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _reachable() -> str | None:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


@pytest.fixture(scope="session")
def redis_url() -> str:
    problem = _reachable()
    if problem is not None:
        message = f"real Redis needed at {REDIS_URL} ({problem})"
        if IN_CI:
            pytest.fail(f"{message}: CI must run the Redis tests", pytrace=False)
        pytest.skip(f"{message}; set SEATWIRE_TEST_REDIS_URL or start redis-server")
    return REDIS_URL


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A client on a flushed test database (flushed again afterwards)."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


E2E_DIR = Path(__file__).parent / "e2e"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/e2e `e2e` (a file there that forgot its mark still is one),
    so `-m "not e2e"` runs the fast part alone. A test elsewhere that starts a process of its
    own (a redis-server, a `seatwire` command, a spawned worker) carries the mark by hand."""
    for item in items:
        if E2E_DIR in item.path.parents:
            item.add_marker(pytest.mark.e2e)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    skipped = terminalreporter.stats.get("skipped", [])
    redis_skips = [r for r in skipped if "real Redis needed" in str(r.longrepr)]
    if redis_skips:
        terminalreporter.write_line(
            f"WARNING: {len(redis_skips)} test(s) needing a real Redis were SKIPPED",
            yellow=True,
            bold=True,
        )
