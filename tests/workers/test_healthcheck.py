"""workers/healthcheck.py in process, on a real Redis: what makes a container unhealthy, and
that it says why (tests/e2e/test_compose_processes.py runs it against live workers)."""

from __future__ import annotations

import pytest
import redis

from workers.healthcheck import leader_problem, main
from workers.recovery.leader import Lease
from workers.settings import Settings


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch, redis_url: str) -> None:
    """The environment a Celery container's check runs in: the shared Redis and a token."""
    monkeypatch.setenv("SEATWIRE_REDIS_URL", redis_url)
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")


@pytest.mark.usefixtures("environment")
def test_a_node_nobody_runs_is_unhealthy_and_named(
    redis_client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no worker under the name, the check exits 1 naming the node it asked for."""
    assert main(["nobody-here@%h", "--timeout", "0.2"]) == 1
    assert "no Celery node nobody-here@" in capsys.readouterr().err


@pytest.mark.usefixtures("environment")
def test_a_refused_configuration_is_unhealthy_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A variable the settings refuse makes the check exit 1 (Docker reserves 2), naming it."""
    monkeypatch.setenv("SEATWIRE_REDIS_ULR", "redis://x")
    assert main(["send@%h"]) == 1
    assert "SEATWIRE_REDIS_ULR" in capsys.readouterr().err


def test_without_a_shared_redis_there_is_nothing_to_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An embedded configuration (no SEATWIRE_REDIS_URL) is unhealthy, and says so."""
    monkeypatch.delenv("SEATWIRE_REDIS_URL", raising=False)
    monkeypatch.delenv("SEATWIRE_BROKER_URL", raising=False)
    assert main(["send@%h"]) == 1
    assert "needs SEATWIRE_REDIS_URL" in capsys.readouterr().err


def test_the_leader_check_follows_the_lease(redis_client: redis.Redis, redis_url: str) -> None:
    """No lease is a problem; a held lease is none; given up, it is a problem again."""
    settings = Settings(redis_url=redis_url, api_token="t")
    assert "no beat holds the leader lease" in (leader_problem(settings) or "")
    lease = Lease(redis_client, holder="h:1:ab", lease_ms=5_000)
    assert lease.hold().leading
    assert leader_problem(settings) is None
    assert lease.release()
    assert leader_problem(settings) is not None


def test_an_unreachable_redis_is_a_leader_problem_not_a_crash() -> None:
    """A Redis nobody answers at gives a reason naming it, password masked."""
    settings = Settings(redis_url="redis://:secret@127.0.0.1:1/0", api_token="t")
    problem = leader_problem(settings) or ""
    assert "cannot read the beat lease" in problem and "secret" not in problem
