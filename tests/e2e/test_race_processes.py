"""Four worker processes racing 500 asks about different work to the same person, from two
seats: exactly perTargetPerDay of them reach that person; every other one is written down as
refused by the per-person limit."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from tests.e2e.cluster import start_cluster
from workers.outbound.file import read_outbox
from workers.stores import keys

pytestmark = pytest.mark.e2e
ASKS = 500
WORKER = ["seatwire", "worker", "--queues", "engagement,guardrails,send", "--concurrency", "1"]


def test_four_workers_racing_500_asks_engage_the_person_exactly_four_times(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """500 blocked reports naming ben, through the HTTP ingress, 4 worker processes: 4 asks."""
    commands = {
        "ingress": ["seatwire", "ingress", "--host", "127.0.0.1", "--port", "0"],
        **{f"worker-{i}": WORKER for i in range(4)},
    }
    with start_cluster(
        commands,
        redis_url,
        tmp_path,
        SEATWIRE_LIMITS__PER_SEAT_PER_HOUR="1000000",
        SEATWIRE_LIMITS__PER_WORK_PER_DAY="1000000",
    ) as cluster:

        def post(i: int) -> int:
            report = {
                "id": f"race-{i}",
                "title": f"Race {i}",
                "state": "blocked",
                "blocker": {"kind": "access", "ownerId": "ben"},
                "selfServeExhausted": True,
            }
            seat = "scout" if i % 2 else "tally"
            with cluster.http() as http:
                return http.post(f"/v1/seats/{seat}/work", json=report).status_code

        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(post, range(ASKS)))
        assert statuses == [202] * ASKS
        deadline = time.monotonic() + 120
        while redis_client.zcard(keys.JOURNAL_OPEN) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert redis_client.zcard(keys.JOURNAL_OPEN) == 0, "not every report reached an end"
        with cluster.http() as http:
            rows = http.get("/v1/ledger", params={"limit": 1000}).json()["rows"]

    outcomes = [r["outcome"] for r in rows]
    assert len(rows) == ASKS
    assert outcomes.count("engaged") == 4
    assert outcomes.count("rate_limited_target") == ASKS - 4
    lines = read_outbox(cluster.outbox)
    assert len(lines) == 4 and all(line["memberIds"] == ["ben"] for line in lines)
    assert redis_client.zcard(keys.by_target("ben")) == 4
