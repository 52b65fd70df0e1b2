"""Fixtures of the process-level fault tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.chaos import RedisServer, redis_server
from tests.e2e.cluster import needs_redis_server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server started by the test on a free port (AOF everysec, its own dir),
    stopped by pid afterwards."""
    needs_redis_server()
    with redis_server(tmp_path / "redis") as started:
        yield started
