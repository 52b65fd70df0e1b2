"""Recovery on a real Redis: the sweeper re-enqueues what the broker lost, the delivery cap
ends a message that keeps dying, every give-up lands in the dead-letter queue, and a parked
message comes back when it is due."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from redis.backoff import NoBackoff
from redis.retry import Retry

from bench.chaos import redis_server
from contracts import Limits, WorkReport
from contracts.inbound import Candidate
from contracts.messages import (
    DecisionEnvelope,
    InboundEnvelope,
    ReservedEnvelope,
    WorkEnvelope,
)
from tests.e2e.cluster import needs_redis_server
from tests.fakes import BLOCKED_REPORT, queued, run_task
from workers import bootstrap
from workers.broker import publish
from workers.celery_app import create_app
from workers.embedded import free_port
from workers.errors import PermanentError, TransientError
from workers.org import OrgSource
from workers.outbound.file import FileOutbox
from workers.queues import Queue, Task, task_id
from workers.recovery.parking import release_due
from workers.recovery.sweeper import UNSEEN, Sweeper, run_tick, tick
from workers.settings import BUNDLED_ORG, Settings
from workers.stages import Stages
from workers.stages.base import retry_bound_s
from workers.stores import keys
from workers.stores.dlq import DeadLetters
from workers.stores.inbound import InboundStore
from workers.stores.journal import Journal
from workers.stores.ledger import Ledger
from workers.stores.parking import park, parked

pytestmark = pytest.mark.redis

NOW = 1_800_000_000_000
DEADLINE = 300_000
LATE = NOW + DEADLINE + 1  # past an entry accepted at NOW
BLOCKED = dict(BLOCKED_REPORT)


@pytest.fixture
def settings(redis_url: str, tmp_path: Any) -> Settings:
    return Settings(
        redis_url=redis_url,
        api_token="t",
        outbox_path=tmp_path / "outbox.jsonl",
        journal_deadline_ms=DEADLINE,
    )


@pytest.fixture
def app(settings: Settings) -> Celery:
    return create_app(settings, register=False)


@pytest.fixture
def stages(redis_client: redis.Redis, tmp_path: Any) -> Stages:
    return Stages(
        journal=Journal(redis_client, deadline_ms=DEADLINE),
        ledger=Ledger(redis_client, limits=Limits(), reservation_ttl_ms=3_600_000),
        org=OrgSource.open(BUNDLED_ORG),
        outbound=FileOutbox(tmp_path / "outbox.jsonl", fsync=False),
        inbound=InboundStore(redis_client),
        clock_ms=lambda: NOW,
    )


@pytest.fixture
def letters(redis_client: redis.Redis) -> DeadLetters:
    return DeadLetters(redis_client, max_deliveries=5)


def sweeper(r: redis.Redis) -> Sweeper:
    return Sweeper(r, broker=r, deadline_ms=DEADLINE, max_deliveries=5, batch=500)


def accept_work(journal: Journal, tracking: str, report: dict[str, Any] = BLOCKED) -> WorkEnvelope:
    """A work report journalled at NOW, as the ingress journals it (its envelope stored)."""
    env = WorkEnvelope(
        tracking_id=tracking,
        seat_id="scout",
        accepted_at_ms=NOW,
        report=WorkReport.model_validate(report),
    )
    journal.accept(
        tracking,
        kind="work",
        seat_id="scout",
        payload=env.model_dump_json(by_alias=True),
        now_ms=NOW,
        fingerprint="f",
    )
    return env


def accept_inbound(journal: Journal, tracking: str) -> InboundEnvelope:
    candidate = Candidate.model_validate(
        {
            "family": "messaging",
            "source": "slack",
            "deliveryId": tracking,
            "ids": {"channelId": "C1", "messageId": "m1"},
            "msg": {"authorId": "ben", "body": "hello"},
            "atMs": NOW,
        }
    )
    env = InboundEnvelope(tracking_id=tracking, accepted_at_ms=NOW, candidate=candidate)
    journal.accept(
        tracking,
        kind="inbound",
        seat_id="",
        payload=env.model_dump_json(by_alias=True),
        now_ms=NOW,
        fingerprint="f",
    )
    return env


def deadline(r: redis.Redis, tracking: str) -> int | None:
    score = r.zscore(keys.JOURNAL_OPEN, tracking)
    return None if score is None else int(score)


# --------------------------------------------------------------------------- the sweeper


def test_an_accepted_work_report_is_reenqueued_to_engagement(
    stages: Stages, redis_client: redis.Redis, app: Celery
) -> None:
    """A report whose engagement message was lost is re-enqueued with its stored envelope,
    under the same task id; its deadline moves on and one copy is noted, its delivery
    counted only once a worker starts it."""
    env = accept_work(stages.journal, "t-work")
    report = sweeper(redis_client).sweep(app, now_ms=LATE)
    assert report.requeued == [task_id("t-work", Queue.ENGAGEMENT)]
    [msg] = queued(redis_client, Queue.ENGAGEMENT)
    assert msg["task"] == Task.ENGAGEMENT.value
    assert msg["id"] == task_id("t-work", Queue.ENGAGEMENT)
    assert WorkEnvelope.model_validate(msg["arg"]) == env
    assert deadline(redis_client, "t-work") == LATE + DEADLINE
    counters = keys.deliveries("t-work")
    assert redis_client.hget(counters, "engagement") is None
    assert redis_client.hget(counters, keys.copies_field("engagement")) == b"1"
    started = DeadLetters(redis_client).start(
        "t-work", queue=Queue.ENGAGEMENT, message=msg["arg"], now_ms=LATE, redelivered=False
    )
    assert (started.run, started.deliveries) == (True, 2)
    assert redis_client.hget(counters, keys.copies_field("engagement")) == b"0"


def test_an_accepted_inbound_event_is_reenqueued_to_directedness(
    stages: Stages, redis_client: redis.Redis, app: Celery
) -> None:
    """An inbound event still `accepted` goes back to the directedness stage."""
    env = accept_inbound(stages.journal, "ev-1")
    sweeper(redis_client).sweep(app, now_ms=LATE)
    [msg] = queued(redis_client, Queue.DIRECTEDNESS)
    assert msg["id"] == task_id("ev-1", Queue.DIRECTEDNESS)
    assert InboundEnvelope.model_validate(msg["arg"]) == env


def test_a_decided_entry_is_reenqueued_to_guardrails(
    stages: Stages, redis_client: redis.Redis, app: Celery
) -> None:
    """An entry whose decision is stored goes to the guardrails with that decision."""
    decided = stages.engagement(accept_work(stages.journal, "t-dec"))
    assert isinstance(decided, DecisionEnvelope)
    sweeper(redis_client).sweep(app, now_ms=LATE)
    [msg] = queued(redis_client, Queue.GUARDRAILS)
    assert msg["id"] == task_id("t-dec", Queue.GUARDRAILS)
    assert DecisionEnvelope.model_validate(msg["arg"]) == decided
    assert queued(redis_client, Queue.ENGAGEMENT) == []


@pytest.mark.parametrize("state", ["reserved", "sending", "unknown"])
def test_a_reserved_or_sending_entry_is_reenqueued_to_send(
    stages: Stages, redis_client: redis.Redis, app: Celery, state: str
) -> None:
    """An entry holding a reservation (or a send in flight or in doubt) goes to the send
    stage with its decision and the op's own attempt."""
    decided = stages.engagement(accept_work(stages.journal, "t-res"))
    assert isinstance(decided, DecisionEnvelope)
    reserved = stages.guardrails(decided)
    assert isinstance(reserved, ReservedEnvelope)
    redis_client.hset(keys.journal("t-res"), "state", state)
    sweeper(redis_client).sweep(app, now_ms=LATE)
    [msg] = queued(redis_client, Queue.SEND)
    assert msg["id"] == task_id("t-res", Queue.SEND)
    sent = ReservedEnvelope.model_validate(msg["arg"])
    assert sent.decision == reserved.decision and sent.seat_id == "scout"
    assert sent.verdict.allowed and sent.verdict.attempt == reserved.verdict.attempt


def test_an_entry_not_yet_due_is_left_alone(
    stages: Stages, redis_client: redis.Redis, app: Celery
) -> None:
    """Before its deadline an entry is not touched: nothing queued, nothing counted."""
    accept_work(stages.journal, "t-early")
    report = sweeper(redis_client).sweep(app, now_ms=NOW + DEADLINE - 1)
    assert not report.busy
    assert queued(redis_client, Queue.ENGAGEMENT) == []
    assert redis_client.exists(keys.deliveries("t-early")) == 0


def test_two_sweeps_racing_reenqueue_each_entry_once(
    stages: Stages, redis_client: redis.Redis, app: Celery
) -> None:
    """Two sweeps that read the same overdue entries (two beats by mistake) re-enqueue each
    of them once: the second one's claims all fail the compare-and-set."""
    for i in range(20):
        accept_work(stages.journal, f"t-race-{i}")
    a, b = sweeper(redis_client), sweeper(redis_client)
    read_a, read_b = a.overdue(LATE), b.overdue(LATE)
    first = a.apply(app, read_a, now_ms=LATE)
    second = b.apply(app, read_b, now_ms=LATE)
    assert len(first.requeued) == 20 and second.requeued == [] and second.skipped == 20
    assert len(queued(redis_client, Queue.ENGAGEMENT)) == 20
    copies = {
        redis_client.hget(keys.deliveries(f"t-race-{i}"), keys.copies_field("engagement"))
        for i in range(20)
    }
    assert copies == {b"1"}


def test_concurrent_sweeps_in_threads_reenqueue_each_entry_once(
    stages: Stages, redis_client: redis.Redis, redis_url: str, app: Celery
) -> None:
    """Four sweeps started together over 200 overdue entries queue exactly 200 messages."""
    for i in range(200):
        accept_work(stages.journal, f"t-many-{i}")
    barrier = threading.Barrier(4)
    reports = []

    def run() -> None:
        s = sweeper(redis.Redis.from_url(redis_url))
        barrier.wait()
        reports.append(s.sweep(app, now_ms=LATE))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(len(r.requeued) for r in reports) == 200
    ids = [m["id"] for m in queued(redis_client, Queue.ENGAGEMENT)]
    assert len(ids) == 200 and len(set(ids)) == 200


def test_a_vanished_entry_is_unlisted_with_a_log_line(
    redis_client: redis.Redis, app: Celery, caplog: pytest.LogCaptureFixture
) -> None:
    """An open-index member whose journal entry expired is dropped, not retried forever."""
    redis_client.zadd(keys.JOURNAL_OPEN, {"t-gone": NOW})
    with caplog.at_level(logging.WARNING, logger="seatwire.sweeper"):
        report = sweeper(redis_client).sweep(app, now_ms=LATE)
    assert report.vanished == ["t-gone"]
    assert redis_client.zscore(keys.JOURNAL_OPEN, "t-gone") is None
    assert "t-gone" in caplog.text and "gone" in caplog.text
    assert all(redis_client.llen(q.value) == 0 for q in Queue)


def test_a_final_entry_still_listed_is_only_unlisted(
    stages: Stages, redis_client: redis.Redis, app: Celery
) -> None:
    """A final entry found in the open index is dropped from it and never re-enqueued."""
    accept_work(stages.journal, "t-final")
    redis_client.hset(keys.journal("t-final"), "state", "engaged")
    report = sweeper(redis_client).sweep(app, now_ms=LATE)
    assert report.closed == ["t-final"] and report.requeued == []
    assert deadline(redis_client, "t-final") is None


def test_the_fifth_sweep_dead_letters_a_stuck_entry(
    stages: Stages, redis_client: redis.Redis, app: Celery, letters: DeadLetters
) -> None:
    """An entry that never moves is re-enqueued four times, each copy started by a worker
    that makes no progress (deliveries 2..5); the fifth overdue sweep dead-letters it
    (`stuck`) instead: final `dead`, out of the index."""
    env = accept_work(stages.journal, "t-stuck")
    now = LATE
    for n in range(2, 6):
        report = sweeper(redis_client).sweep(app, now_ms=now)
        assert report.requeued == [task_id("t-stuck", Queue.ENGAGEMENT)], n
        assert redis_client.rpop(Queue.ENGAGEMENT.value) is not None  # a worker takes it
        started = letters.start(
            "t-stuck",
            queue=Queue.ENGAGEMENT,
            message=env.to_wire(),
            now_ms=now,
            redelivered=False,
            running_ms=1000,
        )
        assert (started.run, started.deliveries) == (True, n)
        redis_client.delete(keys.running("t-stuck", "engagement"))  # it ended, no progress
        now += DEADLINE + 1
    report = sweeper(redis_client).sweep(app, now_ms=now)
    assert report.dead == [task_id("t-stuck", Queue.ENGAGEMENT)] and report.requeued == []
    assert queued(redis_client, Queue.ENGAGEMENT) == []
    entry = stages.journal.get("t-stuck")
    assert entry is not None and entry["state"] == "dead" and entry["deadFrom"] == "accepted"
    assert deadline(redis_client, "t-stuck") is None
    [letter] = letters.list()
    assert (letter.id, letter.reason, letter.deliveries) == (
        task_id("t-stuck", Queue.ENGAGEMENT),
        "stuck",
        5,
    )
    assert WorkEnvelope.model_validate(letter.message) == env
    # Dead-lettered, the entry is the sweeper's no longer.
    assert not sweeper(redis_client).sweep(app, now_ms=now + 10 * DEADLINE).busy


def test_a_message_still_waiting_in_its_queue_is_never_copied(
    stages: Stages, redis_client: redis.Redis, app: Celery, letters: DeadLetters
) -> None:
    """An overdue entry whose message waits in its queue (its pool is down) only has its
    deadline moved, sweep after sweep: one message stays queued, nothing is counted, and
    when the pool comes back its one start dead-letters nothing."""
    env = accept_work(stages.journal, "t-wait")
    report = sweeper(redis_client).sweep(app, now_ms=LATE)  # the original publish was lost
    assert report.requeued == [task_id("t-wait", Queue.ENGAGEMENT)]
    now = LATE
    for _ in range(12):  # an hour of sweeps with a 5-minute deadline
        now += DEADLINE + 1
        report = sweeper(redis_client).sweep(app, now_ms=now)
        assert report.requeued == [] and report.dead == [] and report.waiting == 1
        assert deadline(redis_client, "t-wait") == now + DEADLINE
    assert len(queued(redis_client, Queue.ENGAGEMENT)) == 1
    started = letters.start(
        "t-wait", queue=Queue.ENGAGEMENT, message=env.to_wire(), now_ms=now, redelivered=False
    )
    assert (started.run, started.deliveries) == (True, 2) and letters.count() == 0


def test_a_message_waiting_on_a_broker_in_another_database_is_not_copied(
    tmp_path: Path,
) -> None:
    """With the broker in another database than the stores (SEATWIRE_BROKER_URL), an overdue
    entry whose message waits in the broker's queue only has its deadline moved, while one
    whose message is in no queue is re-enqueued: the sweep reads the broker's database."""
    needs_redis_server()
    with redis_server(tmp_path / "redis") as server:
        settings = Settings(
            redis_url=server.url,
            broker_url=f"redis://127.0.0.1:{server.port}/1",
            api_token="t",
            outbox_path=tmp_path / "outbox.jsonl",
            journal_deadline_ms=DEADLINE,
        )
        app = create_app(settings, register=False)
        container = bootstrap.build_container(settings, app=app)
        journal = Journal(container.redis, deadline_ms=DEADLINE)
        waiting = accept_work(journal, "t-waiting")
        accept_work(journal, "t-lost")
        publish(app, Task.ENGAGEMENT, "t-waiting", waiting.to_wire())  # onto database 1
        broker = redis.Redis.from_url(settings.resolved_broker_url)
        with closing(broker):
            assert [m["id"] for m in queued(broker, Queue.ENGAGEMENT)] == [
                task_id("t-waiting", Queue.ENGAGEMENT)
            ]
            report = tick(
                container.redis,
                app,
                broker=container.broker_redis,
                now_ms=LATE,
                deadline_ms=DEADLINE,
                max_deliveries=5,
                batch=9,
            )
            assert report.waiting == 1
            assert report.requeued == [task_id("t-lost", Queue.ENGAGEMENT)]
            assert sorted(m["id"] for m in queued(broker, Queue.ENGAGEMENT)) == [
                task_id("t-lost", Queue.ENGAGEMENT),
                task_id("t-waiting", Queue.ENGAGEMENT),
            ]
            assert deadline(container.redis, "t-waiting") == LATE + DEADLINE
            assert (
                container.redis.hget(keys.deliveries("t-waiting"), keys.copies_field("engagement"))
                is None
            )


def test_the_broker_client_is_the_brokers_redis_or_none() -> None:
    """The sweeper's queue client is the stores' client when the broker is their database,
    a client of the broker's database when it is another Redis, and None for a broker no
    Redis client can read (AMQP, a failover list, the embedded in-memory one)."""
    url = "redis://stores.invalid:6379/0"
    stores = redis.Redis.from_url(url)  # never connects: only compared and inspected

    def client_for(broker_url: str | None, redis_url: str | None = url) -> redis.Redis | None:
        return bootstrap.broker_client(Settings(redis_url=redis_url, broker_url=broker_url), stores)

    assert client_for(None) is stores and client_for(url) is stores
    other = client_for("redis://broker.invalid:6380/1")
    assert other is not None and other is not stores
    kwargs = other.connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("broker.invalid", 6380, 1)
    assert client_for("amqp://guest:guest@127.0.0.1:5672//") is None
    assert client_for("redis://broker.invalid:6380/1;redis://broker2.invalid:6380/1") is None
    assert client_for(None, redis_url=None) is None


def test_a_sweep_that_cannot_read_the_broker_copies_and_says_so(
    stages: Stages,
    redis_client: redis.Redis,
    app: Celery,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without a broker it can read, the sweep cannot tell a waiting message from a lost
    one: it re-enqueues the overdue entry and its log line says the queue went unseen."""
    env = accept_work(stages.journal, "t-blind")
    publish(app, Task.ENGAGEMENT, "t-blind", env.to_wire())
    blind = Sweeper(redis_client, broker=None, deadline_ms=DEADLINE, max_deliveries=5, batch=9)
    with caplog.at_level(logging.WARNING, logger="seatwire.sweeper"):
        report = blind.sweep(app, now_ms=LATE)
    assert report.requeued == [task_id("t-blind", Queue.ENGAGEMENT)] and report.waiting == 0
    assert len(queued(redis_client, Queue.ENGAGEMENT)) == 2
    assert UNSEEN in caplog.text


def test_a_broker_that_cannot_be_read_is_swept_as_unseen(
    stages: Stages,
    redis_client: redis.Redis,
    app: Celery,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A broker Redis whose queues cannot be read at a tick (nothing listens on its port)
    does not stop the sweep: the overdue entry is re-enqueued as unseen, the error logged."""
    accept_work(stages.journal, "t-unread")
    down = redis.Redis(port=free_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    sweep = Sweeper(redis_client, broker=down, deadline_ms=DEADLINE, max_deliveries=5, batch=9)
    with caplog.at_level(logging.WARNING, logger="seatwire.sweeper"):
        report = sweep.sweep(app, now_ms=LATE)
    assert report.requeued == [task_id("t-unread", Queue.ENGAGEMENT)]
    assert "could not read the broker's queues" in caplog.text and UNSEEN in caplog.text
    assert [m["id"] for m in queued(redis_client, Queue.ENGAGEMENT)] == [
        task_id("t-unread", Queue.ENGAGEMENT)
    ]


def test_a_message_a_worker_is_running_is_never_copied(
    stages: Stages, redis_client: redis.Redis, app: Celery, letters: DeadLetters
) -> None:
    """An overdue entry whose message a worker started (its running mark holds) is not
    re-enqueued; once the mark is gone (the worker died on it), it is."""
    env = accept_work(stages.journal, "t-run")
    first = letters.start(
        "t-run", queue=Queue.ENGAGEMENT, message=env.to_wire(), now_ms=NOW, redelivered=False
    )
    assert (first.run, first.deliveries) == (True, 1)  # a first start counts nothing
    assert redis_client.hget(keys.deliveries("t-run"), "engagement") is None
    report = sweeper(redis_client).sweep(app, now_ms=LATE)
    assert report.running == 1 and report.requeued == []
    assert queued(redis_client, Queue.ENGAGEMENT) == []
    redis_client.delete(keys.running("t-run", "engagement"))
    report = sweeper(redis_client).sweep(app, now_ms=LATE + DEADLINE + 1)
    assert report.requeued == [task_id("t-run", Queue.ENGAGEMENT)]


@pytest.mark.parametrize("stage", ["engagement", "guardrails"])
def test_an_entry_a_stage_just_moved_is_not_copied_before_its_publish(
    stages: Stages, redis_client: redis.Redis, app: Celery, stage: str
) -> None:
    """A stage moves an entry on (engagement to `decided`, guardrails to `reserved`) and
    publishes the next stage's message a moment later; meanwhile that message is in no queue
    and running nowhere. An entry already past its deadline is then not copied: its deadline
    counts from the move. Past that, a lost publish is re-enqueued as ever (the race that
    copied a message into a down send pool's queue, tests/e2e/test_outage_processes.py)."""
    decided = stages.engagement(accept_work(stages.journal, "t-moved"))
    assert isinstance(decided, DecisionEnvelope)
    nxt = Queue.GUARDRAILS
    if stage == "guardrails":
        assert isinstance(stages.guardrails(decided), ReservedEnvelope)
        nxt = Queue.SEND
    moved_at = LATE - 10  # moved just before the deadline of its acceptance passed
    redis_client.hset(keys.journal("t-moved"), "updatedAtMs", moved_at)
    report = sweeper(redis_client).sweep(app, now_ms=LATE)
    assert report.moved == 1 and report.requeued == [] and not report.busy
    assert queued(redis_client, nxt) == []
    assert deadline(redis_client, "t-moved") == moved_at + DEADLINE
    assert redis_client.hget(keys.deliveries("t-moved"), keys.copies_field(nxt.value)) is None
    report = sweeper(redis_client).sweep(app, now_ms=moved_at + DEADLINE + 1)
    assert report.requeued == [task_id("t-moved", nxt)]
    assert [m["id"] for m in queued(redis_client, nxt)] == [task_id("t-moved", nxt)]


def test_a_deposed_beats_sweep_claims_nothing(
    stages: Stages, redis_client: redis.Redis, app: Celery
) -> None:
    """A sweep fenced with a token that is not the newest beat term's re-enqueues nothing
    and moves no deadline; with the newest token it sweeps as usual."""
    accept_work(stages.journal, "t-fence")
    redis_client.set(keys.BEAT_EPOCH, 7)
    stale = Sweeper(
        redis_client,
        broker=redis_client,
        deadline_ms=DEADLINE,
        max_deliveries=5,
        batch=500,
        fence=6,
    )
    report = stale.sweep(app, now_ms=LATE)
    assert report.fenced == 1 and report.requeued == []
    assert (
        queued(redis_client, Queue.ENGAGEMENT) == []
        and deadline(redis_client, "t-fence") == NOW + DEADLINE
    )
    current = Sweeper(
        redis_client,
        broker=redis_client,
        deadline_ms=DEADLINE,
        max_deliveries=5,
        batch=500,
        fence=7,
    )
    assert current.sweep(app, now_ms=LATE).requeued == [task_id("t-fence", Queue.ENGAGEMENT)]


def test_a_failed_entry_left_open_goes_to_the_dead_letter_queue(
    stages: Stages, redis_client: redis.Redis, app: Celery, letters: DeadLetters
) -> None:
    """A stage's give-up found still open is dead-lettered with its error, never retried."""
    accept_work(stages.journal, "t-failed")
    redis_client.hset(
        keys.journal("t-failed"),
        mapping={"state": "failed", "failedStage": "engagement", "error": "boom"},
    )
    report = sweeper(redis_client).sweep(app, now_ms=LATE)
    assert report.dead == [task_id("t-failed", Queue.ENGAGEMENT)]
    [letter] = letters.list()
    assert letter.reason == "failed" and letter.error == "boom" and letter.message is not None
    assert queued(redis_client, Queue.ENGAGEMENT) == []


# --------------------------------------------------------------------------- delivery cap


def test_redeliveries_are_counted_and_the_sixth_is_dead_lettered(
    stages: Stages, redis_client: redis.Redis, letters: DeadLetters
) -> None:
    """Deliveries 2..5 run (counted before the body); the next one is dead-lettered as
    `worker_lost_loop` with 5 deliveries and is not run; any later copy is acked unrun."""
    env = accept_work(stages.journal, "t-poison")
    msg = env.to_wire()
    for n in range(2, 6):
        d = letters.count_redelivery("t-poison", queue=Queue.ENGAGEMENT, message=msg, now_ms=NOW)
        assert (d.run, d.deliveries) == (True, n)
    d = letters.count_redelivery("t-poison", queue=Queue.ENGAGEMENT, message=msg, now_ms=NOW)
    assert (d.verb, d.deliveries) == ("dead", 5)
    entry = stages.journal.get("t-poison")
    assert entry is not None and entry["state"] == "dead"
    assert entry["deadReason"] == "worker_lost_loop" and entry["failedStage"] == "engagement"
    assert deadline(redis_client, "t-poison") is None
    [letter] = letters.list()
    assert letter.reason == "worker_lost_loop" and letter.deliveries == 5
    assert letter.message == msg
    again = letters.count_redelivery("t-poison", queue=Queue.ENGAGEMENT, message=msg, now_ms=NOW)
    assert (again.verb, again.state) == ("done", "dead")
    assert letters.count() == 1


def test_a_stale_copy_at_the_cap_never_dead_letters_an_entry_that_moved_on(
    stages: Stages, redis_client: redis.Redis, letters: DeadLetters
) -> None:
    """An engagement message redelivered to the cap while its entry is already at the send
    stage is a stale copy: acked unrun, the live entry untouched, nothing dead-lettered."""
    env = accept_work(stages.journal, "t-moved")
    redis_client.hset(keys.journal("t-moved"), "state", "sending")
    msg = env.to_wire()
    for _ in range(4):
        letters.count_redelivery("t-moved", queue=Queue.ENGAGEMENT, message=msg, now_ms=NOW)
    d = letters.count_redelivery("t-moved", queue=Queue.ENGAGEMENT, message=msg, now_ms=NOW)
    assert (d.verb, d.state) == ("done", "sending")
    entry = stages.journal.get("t-moved")
    assert entry is not None and entry["state"] == "sending"
    assert deadline(redis_client, "t-moved") is not None and letters.count() == 0


def test_counters_are_per_stage(
    stages: Stages, letters: DeadLetters, redis_client: redis.Redis
) -> None:
    """Redeliveries of one stage's message do not count against the next stage's."""
    env = accept_work(stages.journal, "t-stages")
    for _ in range(4):
        letters.count_redelivery("t-stages", queue=Queue.ENGAGEMENT, message={}, now_ms=NOW)
    d = letters.count_redelivery("t-stages", queue=Queue.GUARDRAILS, message={}, now_ms=NOW)
    assert (d.run, d.deliveries) == (True, 2)
    assert env.tracking_id == "t-stages"


@pytest.fixture
def installed(
    settings: Settings, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Celery, bootstrap.Container]]:
    """A worker's view: the stage tasks registered and this process's container installed."""
    container = bootstrap.build_container(settings, client=redis_client)
    app = create_app(settings, container=container)
    yield app, container


def test_the_stage_task_does_not_run_a_message_over_the_cap(
    installed: tuple[Celery, bootstrap.Container], redis_client: redis.Redis
) -> None:
    """A redelivered message at the cap is dead-lettered by the stage-start hook and the task
    returns normally (so Celery acks it) without running the stage."""
    app, container = installed
    env = accept_work(container.journal, "t-cap")
    redis_client.hset(keys.deliveries("t-cap"), "engagement", 5)
    assert run_task(app, Task.ENGAGEMENT, env.to_wire(), redelivered=True) is None
    entry = container.journal.get("t-cap")
    assert entry is not None and entry["state"] == "dead" and "decision" not in entry
    assert queued(redis_client, Queue.GUARDRAILS) == []
    assert [x.reason for x in container.dead_letters.list()] == ["worker_lost_loop"]


def test_a_first_delivery_is_not_counted(
    installed: tuple[Celery, bootstrap.Container], redis_client: redis.Redis
) -> None:
    """A message delivered for the first time runs uncounted: it is only marked running
    (for its task time limit, so the sweeper does not copy it meanwhile)."""
    app, container = installed
    env = accept_work(container.journal, "t-first")
    run_task(app, Task.ENGAGEMENT, env.to_wire(), redelivered=False)
    entry = container.journal.get("t-first")
    assert entry is not None and entry["state"] == "decided"
    assert redis_client.exists(keys.deliveries("t-first")) == 0
    ttl = redis_client.pttl(keys.running("t-first", "engagement"))
    assert 0 < ttl <= (container.settings.task_time_limit_s + 15) * 1000
    assert [m["id"] for m in queued(redis_client, Queue.GUARDRAILS)] == [
        task_id("t-first", Queue.GUARDRAILS)
    ]


def test_a_redelivery_under_the_cap_is_counted_and_runs(
    installed: tuple[Celery, bootstrap.Container], redis_client: redis.Redis
) -> None:
    """A redelivered message under the cap is counted, then runs as usual."""
    app, container = installed
    env = accept_work(container.journal, "t-again")
    run_task(app, Task.ENGAGEMENT, env.to_wire(), redelivered=True)
    assert redis_client.hget(keys.deliveries("t-again"), "engagement") == b"2"
    entry = container.journal.get("t-again")
    assert entry is not None and entry["state"] == "decided"


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (PermanentError("seat ghost is not in the org file"), "permanent:PermanentError"),
        (TransientError("redis kept timing out"), "max_retries"),
    ],
)
def test_a_stage_that_gives_up_dead_letters_with_its_reason(
    installed: tuple[Celery, bootstrap.Container],
    redis_client: redis.Redis,
    exc: Exception,
    reason: str,
) -> None:
    """A permanent error, or a transient one out of retries, ends the entry `failed` (in the
    failed index, as before) and puts the message in the dead-letter queue with why."""
    app, container = installed
    env = accept_work(container.journal, "t-gives-up")
    t = app.tasks[Task.ENGAGEMENT.value]
    t.on_failure(exc, task_id("t-gives-up", Queue.ENGAGEMENT), (env.to_wire(),), {}, None)
    entry = container.journal.get("t-gives-up")
    assert entry is not None and entry["state"] == "failed"
    assert entry["failedStage"] == "engagement" and str(exc) in entry["error"]
    assert "t-gives-up" in container.journal.failed()
    assert deadline(redis_client, "t-gives-up") is None
    [letter] = container.dead_letters.list()
    assert (letter.reason, letter.stage, letter.deliveries) == (reason, "engagement", 1)
    assert letter.message == env.to_wire()


def test_a_final_entry_is_never_dead_lettered(
    installed: tuple[Celery, bootstrap.Container], redis_client: redis.Redis
) -> None:
    """A stage that fails after its entry became final leaves the entry and the queue be."""
    app, container = installed
    env = accept_work(container.journal, "t-done")
    redis_client.hset(keys.journal("t-done"), "state", "engaged")
    t = app.tasks[Task.ENGAGEMENT.value]
    t.on_failure(PermanentError("late"), "x", (env.to_wire(),), {}, None)
    entry = container.journal.get("t-done")
    assert entry is not None and entry["state"] == "engaged"
    assert container.dead_letters.count() == 0


def test_a_retry_pushes_the_deadline_past_the_next_try(
    installed: tuple[Celery, bootstrap.Container], redis_client: redis.Redis
) -> None:
    """A message in a retry chain is not lost: its deadline moves past this retry's own
    backoff bound (2 s for the first), and not to the 300 s cap: a retry a worker held when
    its connection dropped is re-enqueued by the sweeper soon, not five minutes later."""
    app, container = installed
    accept_work(container.journal, "t-retry")
    redis_client.zadd(keys.JOURNAL_OPEN, {"t-retry": bootstrap.now_ms() + DEADLINE})
    before = deadline(redis_client, "t-retry")
    t = app.tasks[Task.ENGAGEMENT.value]
    t.on_retry(TransientError("blip"), "x", ({"trackingId": "t-retry"},), {}, None)
    after = deadline(redis_client, "t-retry")
    assert before is not None and after is not None and after > before
    now = bootstrap.now_ms()
    settle = container.settings.journal_deadline_ms
    assert now + settle < after <= now + 2_000 + settle + 1_000
    # A later retry in the chain waits longer: its bound doubles, up to the cap.
    assert [retry_bound_s(n) for n in (0, 1, 2, 7, 8, 40)] == [2, 4, 8, 256, 300, 300]


# --------------------------------------------------------------------------- parking


def test_a_parked_message_is_released_when_due_and_not_before(
    stages: Stages, redis_client: redis.Redis, app: Celery
) -> None:
    """A parked send waits in the lot until its due time, then goes back on the send queue
    under its task id and leaves the lot; parking it again replaces it."""
    accept_work(stages.journal, "t-park")
    message = {"trackingId": "t-park", "hello": 1}
    due = NOW + 3_600_000
    park(redis_client, Task.SEND, "t-park", message, due - 1000, "first")
    park(redis_client, Task.SEND, "t-park", message, due, "quiet hours")
    assert [(p.tracking_id, p.due_ms, p.reason) for p in parked(redis_client)] == [
        ("t-park", due, "quiet hours")
    ]
    assert release_due(redis_client, app, now_ms=due - 1) == 0
    assert queued(redis_client, Queue.SEND) == []
    assert release_due(redis_client, app, now_ms=due) == 1
    assert queued(redis_client, Queue.SEND) == [
        {"task": Task.SEND.value, "id": task_id("t-park", Queue.SEND), "arg": message}
    ]
    assert parked(redis_client) == [] and redis_client.hlen(keys.PARKED_MESSAGES) == 0
    assert release_due(redis_client, app, now_ms=due + 10_000) == 0


def test_a_parked_entry_is_not_taken_for_a_lost_one(
    stages: Stages, redis_client: redis.Redis, app: Celery
) -> None:
    """Parking moves the entry's deadline past its due time: the sweeper leaves it alone
    until then, and the tick releases it when due."""
    accept_work(stages.journal, "t-quiet")
    due = NOW + 8 * 3_600_000
    park(redis_client, Task.SEND, "t-quiet", {"trackingId": "t-quiet"}, due, "quiet hours")
    assert deadline(redis_client, "t-quiet") == due + 300_000
    report = tick(
        redis_client,
        app,
        broker=redis_client,
        now_ms=LATE,
        deadline_ms=DEADLINE,
        max_deliveries=5,
        batch=9,
    )
    assert not report.busy
    report = tick(
        redis_client,
        app,
        broker=redis_client,
        now_ms=due,
        deadline_ms=DEADLINE,
        max_deliveries=5,
        batch=9,
    )
    assert report.released == 1 and report.requeued == []
    assert [m["id"] for m in queued(redis_client, Queue.SEND)] == [task_id("t-quiet", Queue.SEND)]


def test_release_is_bounded_per_tick(redis_client: redis.Redis, app: Celery) -> None:
    """One tick releases at most a batch of due messages; the next takes the rest."""
    for i in range(7):
        park(redis_client, Task.SEND, f"t-b{i}", {"trackingId": f"t-b{i}"}, NOW + i, "x")
    assert release_due(redis_client, app, now_ms=LATE, batch=5) == 5
    assert release_due(redis_client, app, now_ms=LATE, batch=5) == 2
    assert redis_client.llen(Queue.SEND.value) == 7


def test_a_deposed_beats_tick_releases_nothing(redis_client: redis.Redis, app: Celery) -> None:
    """A release fenced with a token that is not the newest beat term's takes nothing out of
    the lot; the current leader's token releases it."""
    park(redis_client, Task.SEND, "t-f", {"trackingId": "t-f"}, NOW, "x")
    redis_client.set(keys.BEAT_EPOCH, 3)
    assert release_due(redis_client, app, now_ms=LATE, fence=2) == 0
    assert len(parked(redis_client)) == 1 and redis_client.llen(Queue.SEND.value) == 0
    assert release_due(redis_client, app, now_ms=LATE, fence=3) == 1


def test_the_tick_runs_on_the_embedded_stand_in(tmp_path: Any) -> None:
    """Embedded mode's in-process tick works on fakeredis with the in-memory broker."""
    import fakeredis

    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    settings = Settings(
        redis_url=None, broker_url=None, outbox_path=tmp_path / "o.jsonl", journal_deadline_ms=1000
    )
    app = create_app(settings)
    container = bootstrap.build_container(settings, client=client, app=app)
    journal = Journal(client, deadline_ms=1000)
    env = accept_work(journal, "t-embedded")
    client.zadd(keys.JOURNAL_OPEN, {"t-embedded": 0})  # long overdue, and long unmoved
    client.hset(keys.journal("t-embedded"), "updatedAtMs", 0)
    report = run_tick(container, app)
    assert report.requeued == [task_id("t-embedded", Queue.ENGAGEMENT)]
    park(client, Task.SEND, "t-embedded", env.to_wire(), 0, "x")
    assert run_tick(container, app).released == 1
