"""`seatwire steward run [--dry-run]`, `seatwire steward admit` and `seatwire objectives`
against a real Redis: a dry run writes nothing, a run dispatches, an override is recorded or
refused with a clear reason, and embedded mode is refused."""

from __future__ import annotations

import json
import time
from typing import cast

import pytest
import redis
from typer.testing import CliRunner

from contracts.goals import Sample
from workers.cli import cli
from workers.stores.samples import Samples

pytestmark = pytest.mark.redis
runner = CliRunner()


@pytest.fixture
def env(redis_client: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Samples:
    monkeypatch.setenv("SEATWIRE_REDIS_URL", redis_url)
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
    samples = Samples(redis_client)
    at = int(time.time() * 1000) - 60_000
    samples.record("deploy-lead-time", Sample(value=30, source="method", at_ms=at))
    return samples


def dump(r: redis.Redis) -> dict[bytes, bytes | None]:
    return {k: r.dump(k) for k in cast("list[bytes]", r.keys("*"))}


def test_a_dry_run_prints_the_plan_and_writes_nothing(
    env: Samples, redis_client: redis.Redis
) -> None:
    before = dump(redis_client)
    done = runner.invoke(cli, ["steward", "run", "--dry-run", "--objective", "deploy-lead-time"])
    assert done.exit_code == 0, done.output
    assert "dry run (nothing written): deploy-lead-time" in done.output
    assert "admitted SELF" in done.output and "admitted HANDOFF" in done.output
    assert dump(redis_client) == before


def test_a_run_dispatches_and_objectives_show_its_decision(env: Samples) -> None:
    done = runner.invoke(cli, ["steward", "run", "--objective", "deploy-lead-time", "--json"])
    assert done.exit_code == 0, done.output
    body = json.loads(done.output)
    assert body["dryRun"] is False and len(body["dispatched"]) == 2
    listed = runner.invoke(cli, ["objectives", "--json"])
    rows = {o["key"]: o for o in json.loads(listed.output)["objectives"]}
    assert rows["deploy-lead-time"]["lastDecision"]["entry"]["action"] == "create"
    assert rows["trial-activation"]["lastDecision"] is None


def test_an_override_is_recorded_or_refused_with_its_reason(env: Samples) -> None:
    args = ["steward", "admit", "deploy-lead-time", "Cache dependencies in the deploy pipeline"]
    ok = runner.invoke(cli, [*args, "--by", "ava", "--reason", "release week"])
    assert ok.exit_code == 0, ok.output
    assert "recorded: ovr_" in ok.output
    nobody = runner.invoke(cli, [*args, "--by", "nobody", "--reason", "x"])
    assert nobody.exit_code == 2 and "unknown_member" in nobody.output
    honesty = runner.invoke(cli, [*args, "--by", "ava", "--reason", "x", "--gate", "honesty"])
    assert honesty.exit_code == 2 and "gates" in honesty.output


def test_embedded_mode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SEATWIRE_REDIS_URL", raising=False)
    monkeypatch.delenv("SEATWIRE_BROKER_URL", raising=False)
    done = runner.invoke(cli, ["steward", "run", "--dry-run"])
    assert done.exit_code == 2 and "SEATWIRE_REDIS_URL" in done.output
