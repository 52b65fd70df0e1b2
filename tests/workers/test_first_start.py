"""A first delivery's start runs in the stage's first script (the engagement stage's decision
record, the send stage's send_begin): one round trip fewer per stage. A redelivery is still
counted apart, before its body and before the `before_claim` point, so a message that keeps killing
its process is dead-lettered at the cap (fault test 4, docs/reliability.md); a sweeper copy at the
cap is dead-lettered by the stage's own script, with nothing recorded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from contracts.messages import WorkEnvelope
from tests.fakes import Crash, queued, run_task
from tests.redis_spy import scripts_sent
from tests.workers.test_recovery import accept_work
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.queues import Queue, Task
from workers.settings import Settings
from workers.stores import keys

pytestmark = pytest.mark.redis


@pytest.fixture
def worker(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> Iterator[tuple[Celery, Container]]:
    """A worker's view: the stage tasks registered on this process's container."""
    settings = Settings(redis_url=redis_url, api_token="t", outbox_path=tmp_path / "out.jsonl")
    container = bootstrap.build_container(settings, client=redis_client)
    yield create_app(settings, container=container), container


@pytest.fixture
def scripts_run(redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the Lua scripts run on `redis_client`, in order."""
    yield scripts_sent(redis_client, monkeypatch)


def send_message(app: Celery, r: redis.Redis, env: WorkEnvelope) -> dict[str, Any]:
    """Run the report to its send message (engagement and guardrails, first deliveries)."""
    run_task(app, Task.ENGAGEMENT, env.to_wire(), redelivered=False)
    [decided] = queued(r, Queue.GUARDRAILS)
    run_task(app, Task.GUARDRAILS, decided["arg"], redelivered=False)
    [reserved] = queued(r, Queue.SEND)
    message: dict[str, Any] = reserved["arg"]
    return message


def entry_state(container: Container, tracking: str) -> str | None:
    entry = container.journal.get(tracking)
    return None if entry is None else entry["state"]


def test_a_first_engagement_starts_in_its_decision_record(
    worker: tuple[Celery, Container], redis_client: redis.Redis, scripts_run: list[str]
) -> None:
    app, container = worker
    env = accept_work(container.journal, "t-one")
    scripts_run.clear()
    run_task(app, Task.ENGAGEMENT, env.to_wire(), redelivered=False)
    assert scripts_run == ["engage_read", "decision_record"]  # no delivery_count of its own
    assert redis_client.get(keys.running("t-one", "engagement")) == b"t-one"
    assert redis_client.exists(keys.deliveries("t-one")) == 0  # a first delivery counts nothing
    assert entry_state(container, "t-one") == "decided"
    assert len(queued(redis_client, Queue.GUARDRAILS)) == 1


def test_a_redelivered_engagement_is_counted_apart_before_its_body(
    worker: tuple[Celery, Container], redis_client: redis.Redis, scripts_run: list[str]
) -> None:
    app, container = worker
    env = accept_work(container.journal, "t-two")
    scripts_run.clear()
    run_task(app, Task.ENGAGEMENT, env.to_wire(), redelivered=True)
    assert scripts_run == ["delivery_count", "engage_read", "decision_record"]
    assert redis_client.hget(keys.deliveries("t-two"), "engagement") == b"2"
    assert entry_state(container, "t-two") == "decided"


def test_a_first_send_starts_in_send_begin(
    worker: tuple[Celery, Container], redis_client: redis.Redis, scripts_run: list[str]
) -> None:
    app, container = worker
    message = send_message(app, redis_client, accept_work(container.journal, "t-send"))
    scripts_run.clear()
    run_task(app, Task.SEND, message, redelivered=False)
    # The ask's record is written before the post and learns where it landed after it.
    assert scripts_run == ["send_begin_ask", "op_finish_ask"]
    assert redis_client.get(keys.running("t-send", "send")) == b"t-send"
    assert entry_state(container, "t-send") == "engaged"
    scripts_run.clear()
    # Its redelivery (the process died before the ack) is counted apart, and finds it done.
    run_task(app, Task.SEND, message, redelivered=True)
    assert scripts_run == ["delivery_count", "send_begin_ask"]  # which finds the op final
    assert entry_state(container, "t-send") == "engaged"


@pytest.mark.parametrize("stage", ["engagement", "send"])
def test_a_sweeper_copy_at_the_cap_is_dead_lettered_by_the_stage_script(
    worker: tuple[Celery, Container], redis_client: redis.Redis, stage: str
) -> None:
    """A sweeper copy is no kombu redelivery: its start runs in the stage's script, which
    counts it (from the copy the sweeper noted) and, at the cap, dead-letters it as `stuck`
    with nothing recorded: no decision, no send begun."""
    app, container = worker
    env = accept_work(container.journal, "t-stuck")
    message = env.to_wire() if stage == "engagement" else send_message(app, redis_client, env)
    redis_client.hset(keys.deliveries("t-stuck"), mapping={stage: 5, keys.copies_field(stage): 1})
    task = Task.ENGAGEMENT if stage == "engagement" else Task.SEND
    assert run_task(app, task, message, redelivered=False) is None
    assert entry_state(container, "t-stuck") == "dead"
    [letter] = container.dead_letters.list()
    assert (letter.reason, letter.stage, letter.message) == ("stuck", stage, message)
    if stage == "engagement":
        assert "decision" not in (container.journal.get("t-stuck") or {})
        assert queued(redis_client, Queue.GUARDRAILS) == []
    else:
        assert redis_client.hget(keys.op("t-stuck"), "state") == b"reserved"
        assert not (container.settings.outbox_path).exists()


@pytest.mark.parametrize("stage", ["engagement", "send"])
def test_a_first_delivery_of_a_dead_entry_touches_nothing(
    worker: tuple[Celery, Container], redis_client: redis.Redis, stage: str
) -> None:
    app, container = worker
    env = accept_work(container.journal, "t-dead")
    message = env.to_wire() if stage == "engagement" else send_message(app, redis_client, env)
    redis_client.hset(keys.journal("t-dead"), "state", "dead")
    task = Task.ENGAGEMENT if stage == "engagement" else Task.SEND
    run_task(app, task, message, redelivered=False)
    assert redis_client.exists(keys.running("t-dead", stage)) == 0
    if stage == "engagement":
        assert "decision" not in (container.journal.get("t-dead") or {})
    else:
        assert redis_client.hget(keys.op("t-dead"), "state") == b"reserved"


def test_a_message_that_kills_its_process_is_still_counted_to_the_cap(
    worker: tuple[Celery, Container], redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault test 4 (docs/reliability.md) in process: the process dies at `before_claim` on every
    delivery. The first dies with nothing written (not even the running mark); each redelivery is
    counted before it dies; the fifth is dead-lettered and never reaches the point."""
    app, container = worker
    env = accept_work(container.journal, "t-poison")
    seen: list[tuple[bool, Any]] = []

    def dies(stage: str, point: str, tracking_id: str) -> None:
        if (stage, point) == ("engagement", "before_claim"):
            running = bool(redis_client.exists(keys.running(tracking_id, stage)))
            seen.append((running, redis_client.hget(keys.deliveries(tracking_id), stage)))
            raise Crash(point)

    monkeypatch.setattr("workers.stages.base.crash_point", dies)
    with pytest.raises(Crash):
        run_task(app, Task.ENGAGEMENT, env.to_wire(), redelivered=False)
    for _ in range(4):
        with pytest.raises(Crash):
            run_task(app, Task.ENGAGEMENT, env.to_wire(), redelivered=True)
    assert run_task(app, Task.ENGAGEMENT, env.to_wire(), redelivered=True) is None
    assert seen == [(False, None), (True, b"2"), (True, b"3"), (True, b"4"), (True, b"5")]
    assert entry_state(container, "t-poison") == "dead"
    [letter] = container.dead_letters.list()
    assert (letter.reason, letter.deliveries) == ("worker_lost_loop", 5)
