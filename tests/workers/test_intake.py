"""The ingress's intake on a real Redis: the hand-built Celery message is the one Celery writes,
kombu reads it back, and journal + enqueue happen together, once, or not at all."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from kombu.connection import Connection

from bench.chaos import RedisServer, redis_server, redis_server_path
from pipeline.signatures import slack_headers
from tests.auth import bearer
from tests.conftest import IN_CI
from tests.fakes import celery_fields
from workers import bootstrap
from workers.broker import foreign_message, publish
from workers.celery_app import create_app
from workers.ingress.app import create_ingress
from workers.ingress.intake import Arrival, Enqueued, RedisIntake, shares_broker
from workers.ingress.wire import celery_message
from workers.queues import Task
from workers.settings import Settings
from workers.stores import keys
from workers.stores.journal import Journal
from workers.stores.tokens import Tokens

PAYLOAD = {"trackingId": "ev-1", "acceptedAtMs": 5, "candidate": {"deliveryId": "d-1"}}
# What differs per message or per process, by design (uuid4s, pid@host).
UNIQUE = {("properties", "delivery_tag"), ("properties", "reply_to"), ("headers", "origin")}


def test_the_message_is_the_one_celery_writes(redis_client: redis.Redis, redis_url: str) -> None:
    """Every header and property Celery's own publish writes to the Redis list, with the same
    values (but the per-message ids), and the same body (not base64-encoded)."""
    app = create_app(Settings(redis_url=redis_url, api_token="t"), register=False)
    publish(app, Task.DIRECTEDNESS, "ev-1", PAYLOAD)
    theirs = json.loads(redis_client.lpop("directedness"))  # type: ignore[arg-type]
    ours = json.loads(celery_message(Task.DIRECTEDNESS, "ev-1", json.dumps(PAYLOAD)))
    a, b = celery_fields(theirs), celery_fields(ours)
    # Ours carries the body as a plain JSON string: no `body_encoding` (kombu: not encoded).
    assert a.pop(("properties", "body_encoding")) == "base64"
    assert a.keys() == b.keys()
    assert {k: v for k, v in a.items() if k not in UNIQUE} == {
        k: v for k, v in b.items() if k not in UNIQUE
    }
    assert json.loads(base64.b64decode(theirs["body"])) == json.loads(ours["body"])


def test_a_foreign_task_s_message_is_the_one_celery_writes(
    redis_client: redis.Redis, redis_url: str
) -> None:
    """`foreign_message` (bench.pipeline's baseline fed by one LPUSH) writes what Celery's
    `send_task` does for a task that is no `Task` of Seatwire's, but the argument's repr."""
    app = create_app(Settings(redis_url=redis_url, api_token="t"), register=False)
    app.send_task("bench.noop1", args=[PAYLOAD], task_id="ev-1:noop1", queue="noop1")
    theirs = json.loads(redis_client.lpop("noop1"))  # type: ignore[arg-type]
    ours = json.loads(foreign_message("bench.noop1", "noop1", "ev-1:noop1", json.dumps(PAYLOAD)))
    a, b = celery_fields(theirs), celery_fields(ours)
    assert a.pop(("properties", "body_encoding")) == "base64"
    # Seatwire's messages name their argument by its tracking id (`publish` passes argsrepr,
    # so it is a property too); a plain send_task reprs it, in the headers only.
    skip = UNIQUE | {
        ("headers", "argsrepr"),
        ("properties", "argsrepr"),
        ("properties", "kwargsrepr"),
    }
    assert a.keys() - skip == b.keys() - skip
    assert {k: v for k, v in a.items() if k not in skip} == {
        k: v for k, v in b.items() if k not in skip
    }
    assert b[("headers", "task")] == "bench.noop1"
    assert b[("properties", "delivery_info")]["routing_key"] == "noop1"
    assert json.loads(base64.b64decode(theirs["body"])) == json.loads(ours["body"])


def test_kombu_reads_the_message_back(redis_client: redis.Redis, redis_url: str) -> None:
    """Written by the script (which fills in the body) and consumed through kombu's Redis
    transport, as a worker does: the task, its id and its argument, byte for byte."""
    intake = RedisIntake(redis_url, deadline_ms=60_000)
    odd = {**PAYLOAD, "text": 'quotes " slashes / \\ and ünïcödé ✓ \n'}

    async def go() -> Enqueued:
        try:
            return await intake.accept(
                Arrival(
                    task=Task.ENGAGEMENT,
                    tracking_id="wr-1",
                    kind="work",
                    seat_id="scout",
                    payload=json.dumps(odd, ensure_ascii=False),
                    fingerprint="f",
                    now_ms=10,
                )
            )
        finally:
            await intake.aclose()

    assert asyncio.run(go()).verb == "new"
    with Connection(redis_url) as conn:  # type: ignore[no-untyped-call]  # kombu: unannotated
        queue = conn.SimpleQueue("engagement")
        message = queue.get(timeout=30)  # already queued: a bound, not a wait
        message.ack()
        queue.close()
    assert message.headers["task"] == "seatwire.engagement"
    assert message.headers["id"] == "wr-1:engagement"
    args, kwargs, _embed = message.decode()
    assert (args, kwargs) == ([odd], {})


@pytest.fixture
def accept(redis_url: str) -> Any:
    intake = RedisIntake(redis_url, deadline_ms=60_000)

    def call(fingerprint: str = "f", now_ms: int = 10) -> str:
        async def go() -> str:
            try:
                done = await intake.accept(
                    Arrival(
                        task=Task.DIRECTEDNESS,
                        tracking_id="ev-1",
                        kind="inbound",
                        seat_id="",
                        payload=json.dumps(PAYLOAD),
                        fingerprint=fingerprint,
                        now_ms=now_ms,
                    )
                )
                return done.verb
            finally:
                await intake.aclose()

        return asyncio.run(go())

    return call


def test_journal_and_enqueue_together_and_once(redis_client: redis.Redis, accept: Any) -> None:
    """The first delivery writes the entry (enqueued) and one message; a repeat only counts."""
    assert accept() == "new"
    entry = redis_client.hgetall(keys.journal("ev-1"))
    assert entry[b"state"] == b"accepted" and entry[b"enqueuedAtMs"] == b"10"
    assert redis_client.zscore(keys.JOURNAL_OPEN, "ev-1") == 60_010
    assert accept(now_ms=20) == "duplicate"
    assert redis_client.llen("directedness") == 1
    assert redis_client.hget(keys.journal("ev-1"), "deliveries") == b"2"


def test_a_conflicting_repeat_changes_nothing(redis_client: redis.Redis, accept: Any) -> None:
    accept()
    before = redis_client.hgetall(keys.journal("ev-1"))
    assert accept(fingerprint="other") == "conflict"
    assert redis_client.hgetall(keys.journal("ev-1")) == before
    assert redis_client.llen("directedness") == 1


def test_an_entry_journalled_but_never_enqueued_is_enqueued_by_the_repeat(
    redis_client: redis.Redis, accept: Any
) -> None:
    """A publish that failed after the journal write (the thread path) is mended by a retry."""
    Journal(redis_client).accept(
        "ev-1", kind="inbound", seat_id="", payload="{}", now_ms=1, fingerprint="f"
    )
    assert accept(now_ms=30) == "requeued"
    assert redis_client.llen("directedness") == 1
    assert redis_client.hget(keys.journal("ev-1"), "enqueuedAtMs") == b"30"
    assert accept() == "duplicate" and redis_client.llen("directedness") == 1


@pytest.mark.parametrize(
    ("redis_url", "broker_url", "shared"),
    [
        ("redis://h:6379/0", None, True),
        ("redis://h:6379/0", "redis://h:6379/0", True),
        ("rediss://h:6380/2", None, True),
        ("redis://h:6379/0", "redis://h:6379/1", False),  # another database
        ("redis://h:6379/0", "amqp://guest@h//", False),
        (None, None, False),  # embedded: the in-memory broker
    ],
)
def test_the_one_script_path_is_taken_only_on_the_brokers_own_redis(
    redis_url: str | None, broker_url: str | None, shared: bool
) -> None:
    settings = Settings(redis_url=redis_url, broker_url=broker_url, api_token="t")
    assert shares_broker(settings) is shared


def test_concurrent_accepts_share_round_trips_and_each_gets_its_own_answer(
    redis_client: redis.Redis, redis_url: str
) -> None:
    """Sixty requests at once, twenty events three times each: each event is journalled and
    enqueued once, and every request hears its own verdict. A script flush (Redis restarted
    without its scripts) in between is mended by loading it again."""
    intake = RedisIntake(redis_url, deadline_ms=60_000)

    async def one(n: int) -> str:
        done = await intake.accept(
            Arrival(
                task=Task.DIRECTEDNESS,
                tracking_id=f"ev-{n}",
                kind="inbound",
                seat_id="",
                payload=json.dumps({**PAYLOAD, "trackingId": f"ev-{n}"}),
                fingerprint="f",
                now_ms=10,
            )
        )
        return done.verb

    async def go() -> tuple[list[str], list[str]]:
        try:
            first = await asyncio.gather(*(one(n % 20) for n in range(60)))
            redis_client.script_flush()
            again = await asyncio.gather(*(one(n) for n in range(15, 25)))
            return list(first), list(again)
        finally:
            await intake.aclose()

    first, again = asyncio.run(go())
    assert sorted(first) == ["duplicate"] * 40 + ["new"] * 20
    assert again == ["duplicate"] * 5 + ["new"] * 5
    assert redis_client.llen("directedness") == 25
    assert {redis_client.hget(keys.journal(f"ev-{n}"), "deliveries") for n in range(15)} == {b"3"}


def test_a_repeat_past_the_deadline_of_an_untouched_entry_enqueues_it_again(
    redis_client: redis.Redis, accept: Any
) -> None:
    """A message lost on the broker after the 2xx: the entry is still `accepted` long after
    it was enqueued, so the provider's retry enqueues it again (the stage is idempotent)."""
    assert accept(now_ms=10) == "new"
    assert accept(now_ms=10 + 60_000) == "duplicate"  # within the deadline: still in flight
    assert accept(now_ms=10 + 60_001) == "requeued"
    assert redis_client.llen("directedness") == 2
    assert accept(now_ms=10 + 60_002) == "duplicate"


SCOUT_TOKENS: dict[str, str] = {}  # a full server's url -> the scout token issued into it


@pytest.fixture
def full_redis(tmp_path: Any) -> Iterator[RedisServer]:
    """A redis-server of the test's own, `noeviction`, with a `maxmemory` below what it uses
    (1 byte), so it refuses every write (the shared test Redis must not be starved)."""
    if redis_server_path() is None:
        if IN_CI:
            pytest.fail("redis-server is not on the PATH; CI must run this test", pytrace=False)
        pytest.skip("redis-server is not on the PATH")
    with redis_server(tmp_path / "redis") as server:
        client = server.client()
        token, _ = Tokens(client).issue("seat", seat_id="scout", label="oom", now_ms=1)
        SCOUT_TOKENS[server.url] = token  # issued while the server still takes writes
        client.config_set("maxmemory", "1")
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            client.set("probe", "x")
        client.close()
        yield server


@pytest.mark.e2e
def test_out_of_memory_is_a_503_with_retry_after_and_writes_nothing(
    full_redis: RedisServer, tmp_path: Any
) -> None:
    """With Redis refusing writes (OOM), the intake's script is refused whole: a work report,
    a Slack event and a Slack event that is journalled as skipped are each answered 503 with
    Retry-After (never a 500, never a 2xx), and nothing is journalled or queued."""
    settings = Settings(
        redis_url=full_redis.url,
        api_token="t",
        slack_signing_secret="s",
        outbox_path=tmp_path / "outbox.jsonl",
    )
    app = create_app(settings, register=False)
    report = {"id": "w-oom", "title": "W", "state": "blocked", "blocker": {"kind": "access"}}
    event: dict[str, Any] = {
        "type": "event_callback",
        "team_id": "T0OOM",
        "event_id": "Ev0OOM",
        "event": {"type": "message", "channel": "C1", "user": "U1", "text": "hi", "ts": "1.2"},
    }
    notice = {
        **event,
        "event_id": "Ev0OOM2",
        "event": {**event["event"], "subtype": "channel_join"},
    }
    with TestClient(create_ingress(bootstrap.build_container(settings, app=app), app)) as c:
        scout = bearer(SCOUT_TOKENS[full_redis.url])
        answers = [c.post("/v1/seats/scout/work", json=report, headers=scout)]
        for body in (event, notice):
            raw = json.dumps(body).encode()
            headers = {
                **slack_headers(raw, secret="s", now_s=int(time.time())),
                "Content-Type": "application/json",
            }
            answers.append(c.post("/webhooks/slack", content=raw, headers=headers))
    assert [a.status_code for a in answers] == [503, 503, 503], [a.text for a in answers]
    assert all(a.headers["Retry-After"] for a in answers)
    client = full_redis.client()
    # database 0: no journal entry, no message (only the token issued before it filled up)
    assert [k for k in client.scan_iter() if k != keys.TOKENS.encode()] == []
    client.close()
