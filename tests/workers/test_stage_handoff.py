"""A stage hands the next stage its message with one LPUSH when the broker is the stores' own
Redis: the message is the one Celery's publish writes from inside that stage's task, a real
Celery worker runs it, and a failed push is retried as a publish is, then raised retryable.
Any other broker still goes through Celery's publish."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest
import redis
from celery import Celery
from celery.contrib.testing.worker import start_worker

from tests.fakes import BLOCKED_REPORT, celery_fields
from workers import broker
from workers.broker import publish_retrying, push, shares_broker
from workers.celery_app import create_app
from workers.container import Container
from workers.queues import TASK_QUEUE, Queue, Task
from workers.settings import Settings
from workers.stages import base
from workers.stages.base import RETRYABLE, hand_off

MESSAGE = {
    "trackingId": "wr-1",
    "seatId": "scout",
    "decision": {"engage": True, "text": 'quotes " slashes / \\ and ünïcödé ✓ \n'},
}
# What differs per message or per thread by design: a uuid4 and Celery's per-thread oid.
UNIQUE = {("properties", "delivery_tag"), ("properties", "reply_to")}


def _inside_a_task(app: Celery, *, nested: bool, run: Callable[[], None]) -> None:
    """Run `run` as the body of a task a worker runs (`apply`: a request, on the task stack),
    whose id is `wr-1:engagement`; `nested`, inside another task, whose id is then the root."""

    @app.task(name="tests.hop", shared=False)  # type: ignore[untyped-decorator]
    def hop() -> None:
        run()

    @app.task(name="tests.outer", shared=False)  # type: ignore[untyped-decorator]
    def outer() -> None:
        hop.apply(task_id="wr-1:engagement").get(disable_sync_subtasks=False)

    # Not refused as a wait for a subtask once a worker has run in this process (it sets
    # Celery's process-wide "joins block" flag): these are eager, nothing waits.
    root = outer.apply(task_id="wr-0:outer") if nested else hop.apply(task_id="wr-1:engagement")
    root.get(disable_sync_subtasks=False)


@pytest.mark.parametrize("task", [Task.GUARDRAILS, Task.SEND])
@pytest.mark.parametrize("where", ["outside", "in_task", "nested"])
def test_the_pushed_message_is_the_one_celery_writes(
    redis_client: redis.Redis, redis_url: str, task: Task, where: str
) -> None:
    """Every header and property a worker app's own publish writes to the Redis list (the
    stages registered, from inside a task or outside one), with the same values but the
    per-message ids, and the same body (not base64-encoded)."""
    app = create_app(Settings(redis_url=redis_url, api_token="t"))
    queue = TASK_QUEUE[task].value
    raw: list[bytes] = []

    def both() -> None:
        broker.publish(app, task, "wr-1", MESSAGE)
        raw.append(cast(bytes, redis_client.lpop(queue)))
        push(redis_client, app, task, "wr-1", MESSAGE)
        raw.append(cast(bytes, redis_client.lpop(queue)))

    if where == "outside":
        both()
    else:
        _inside_a_task(app, nested=where == "nested", run=both)
    theirs, ours = (json.loads(r) for r in raw)
    a, b = celery_fields(theirs), celery_fields(ours)
    assert a.pop(("properties", "body_encoding")) == "base64"
    assert a.keys() == b.keys()
    assert {k: v for k, v in a.items() if k not in UNIQUE} == {
        k: v for k, v in b.items() if k not in UNIQUE
    }
    assert json.loads(base64.b64decode(theirs["body"])) == json.loads(ours["body"])
    assert ours["headers"]["id"] == f"wr-1:{queue}"
    expected_root, expected_parent = {
        "outside": (f"wr-1:{queue}", None),
        "in_task": ("wr-1:engagement", "wr-1:engagement"),
        "nested": ("wr-0:outer", "wr-1:engagement"),
    }[where]
    assert (ours["headers"]["root_id"], ours["headers"]["parent_id"]) == (
        expected_root,
        expected_parent,
    )
    assert redis_client.llen(queue) == 0


def test_a_real_worker_runs_the_pushed_message(redis_client: redis.Redis, redis_url: str) -> None:
    """Pushed from inside a task and consumed by a Celery worker on the same Redis: the
    send task runs once, with the message as its argument and the ids Celery would give it."""
    app = create_app(Settings(redis_url=redis_url, api_token="t"), register=False)
    seen: list[tuple[Any, str, str | None, str | None]] = []
    done = threading.Event()

    @app.task(name=Task.SEND.value, queue=Queue.SEND.value, bind=True, shared=False)  # type: ignore[untyped-decorator]
    def send(self: Any, message: dict[str, Any]) -> None:
        seen.append((message, self.request.id, self.request.root_id, self.request.parent_id))
        done.set()

    _inside_a_task(
        app, nested=False, run=lambda: push(redis_client, app, Task.SEND, "wr-1", MESSAGE)
    )
    with start_worker(app, pool="solo", perform_ping_check=False, queues=[Queue.SEND.value]):
        assert done.wait(10)
    assert seen == [(MESSAGE, "wr-1:send", "wr-1:engagement", "wr-1:engagement")]


class FlakyRedis:
    """Fails its first `failures` LPUSHes with a connection error, then takes them."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error or redis.ConnectionError("down")
        self.calls = 0
        self.pushed: list[tuple[str, str]] = []

    def lpush(self, key: str, value: str) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        self.pushed.append((key, value))
        return 1


FAST = {"max_retries": 3, "interval_start": 0, "interval_step": 0, "interval_max": 0}


def test_a_failed_push_is_retried_in_place_as_a_publish_is() -> None:
    """Connection errors are retried at the policy's intervals, up to its max_retries."""
    app = Celery("t", set_as_current=False)
    client = FlakyRedis(failures=3)
    push(cast(redis.Redis, client), app, Task.SEND, "wr-1", MESSAGE, retry_policy=FAST)
    assert client.calls == 4
    [(key, raw)] = client.pushed
    assert key == "send" and json.loads(raw)["headers"]["id"] == "wr-1:send"


def test_a_push_waits_as_kombu_does_between_tries() -> None:
    """The waits between tries follow the policy as kombu's retry_policy spaces a publish's:
    interval_start, then interval_step more each time, capped at interval_max; a try that
    gets through ends them, and one past max_retries raises the connection error itself."""
    policy = {"max_retries": 5, "interval_start": 0.1, "interval_step": 0.5, "interval_max": 1.2}
    waits: list[float] = []
    outcomes = iter([redis.ConnectionError("down")] * 4 + [None])

    def lpush() -> None:
        failure = next(outcomes)
        if failure is not None:
            raise failure

    for attempt in publish_retrying(policy, sleep=waits.append):
        with attempt:
            lpush()
    assert waits == pytest.approx([0.1, 0.6, 1.1, 1.2])

    waits.clear()
    with pytest.raises(redis.TimeoutError):
        for attempt in publish_retrying(policy, sleep=waits.append):
            with attempt:
                raise redis.TimeoutError("slow")
    assert waits == pytest.approx([0.1, 0.6, 1.1, 1.2, 1.2])


@pytest.mark.parametrize(
    ("error", "calls"), [(redis.ConnectionError("down"), 4), (redis.ResponseError("OOM"), 1)]
)
def test_a_push_that_keeps_failing_is_a_retryable_error_for_the_stage(
    error: Exception, calls: int
) -> None:
    """Past the policy the connection error is raised, and the stage retries it (RETRYABLE);
    a refusal (`OOM command not allowed`, say) is not retried in place, as kombu does not."""
    app = Celery("t", set_as_current=False)
    client = FlakyRedis(failures=100, error=error)
    with pytest.raises(type(error)):
        push(cast(redis.Redis, client), app, Task.SEND, "wr-1", MESSAGE, retry_policy=FAST)
    assert client.calls == calls
    assert isinstance(redis.ConnectionError("down"), RETRYABLE)


@pytest.mark.parametrize(
    ("settings", "shared"),
    [
        ({"redis_url": "redis://h:6379/3"}, True),
        ({"redis_url": "redis://h:6379/3", "broker_url": "redis://h:6379/3"}, True),
        ({"redis_url": "redis://h:6379/3", "broker_url": "redis://h:6379/4"}, False),
        ({"redis_url": "redis://h:6379/3", "broker_url": "amqp://h//"}, False),
        ({}, False),  # embedded: the in-memory broker
    ],
)
def test_hand_off_pushes_on_a_shared_redis_and_publishes_otherwise(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, Any], shared: bool
) -> None:
    """The broker is the stores' Redis: one LPUSH on the container's client; any other
    broker: Celery's publish, as before."""
    s = Settings(api_token="t", **settings)
    assert shares_broker(s) is shared
    published: list[tuple[Task, str, dict[str, Any]]] = []
    monkeypatch.setattr(
        base, "publish", lambda _app, task, tid, message: published.append((task, tid, message))
    )
    client = FlakyRedis(failures=0)
    container = cast(Container, SimpleNamespace(settings=s, redis=client))
    app = Celery("t", set_as_current=False)
    hand_off(app, container, Task.GUARDRAILS, "wr-1", MESSAGE)
    if shared:
        assert published == [] and [k for k, _ in client.pushed] == ["guardrails"]
    else:
        assert published == [(Task.GUARDRAILS, "wr-1", MESSAGE)] and client.pushed == []


# --------------------------------------------------------------------------- in the write

NOW = 1_800_000_000_000
BLOCKED = dict(BLOCKED_REPORT)


def _celery_writes(
    app: Celery, client: redis.Redis, task: Task, message: dict[str, Any]
) -> dict[str, Any]:
    """What Celery's own publish of `message` for `wr-1` puts on `task`'s queue."""
    broker.publish(app, task, "wr-1", message)
    raw = client.lpop(TASK_QUEUE[task].value)
    assert isinstance(raw, bytes)
    found: dict[str, Any] = json.loads(raw)
    return found


def _same_message(theirs: dict[str, Any], ours: dict[str, Any]) -> None:
    a, b = celery_fields(theirs), celery_fields(ours)
    assert a.pop(("properties", "body_encoding")) == "base64"
    assert {k: v for k, v in a.items() if k not in UNIQUE} == {
        k: v for k, v in b.items() if k not in UNIQUE
    }
    assert json.loads(base64.b64decode(theirs["body"])) == json.loads(ours["body"])


def test_a_decision_and_a_reservation_push_the_next_message_with_their_write_once(
    redis_client: redis.Redis, redis_url: str
) -> None:
    """On a shared Redis the engaging decision lands with the guardrail stage's message and
    the reservation with the send stage's (the attempt it counted written in), each the
    message Celery would publish; run again (a redelivery, a sweeper's copy) neither
    pushes a second one, and the send stage takes the pushed message to the wire."""
    from contracts import GuardrailVerdict, Limits, WorkReport
    from contracts.messages import DecisionEnvelope, ReservedEnvelope, WorkEnvelope
    from tests.fakes import FakeOutbound
    from workers.org import OrgSource
    from workers.settings import BUNDLED_ORG
    from workers.stages.base import Onwards
    from workers.stages.engagement import Engagement
    from workers.stages.guardrails import Guardrails
    from workers.stages.send import Send
    from workers.stores.inbound import InboundStore
    from workers.stores.journal import Journal
    from workers.stores.ledger import Ledger

    app = create_app(Settings(redis_url=redis_url, api_token="t"))
    journal, ledger = Journal(redis_client), Ledger(redis_client, limits=Limits())
    org = OrgSource.open(BUNDLED_ORG)
    engagement = Engagement(journal, ledger, org, lambda: NOW, onwards=Onwards(app))
    guardrails = Guardrails(ledger, lambda: NOW, onwards=Onwards(app))
    journal.accept("wr-1", kind="work", seat_id="scout", payload="{}", now_ms=NOW, fingerprint="f")
    env = WorkEnvelope(
        tracking_id="wr-1",
        seat_id="scout",
        accepted_at_ms=NOW,
        report=WorkReport.model_validate(BLOCKED),
    )

    decided = engagement(env)
    assert isinstance(decided, DecisionEnvelope)
    assert engagement(env) == decided  # found, not made again: nothing pushed
    [raw] = redis_client.lrange(Queue.GUARDRAILS.value, 0, -1)
    pushed = json.loads(raw)
    _same_message(_celery_writes(app, redis_client, Task.GUARDRAILS, decided.to_wire()), pushed)
    message = json.loads(pushed["body"])[0][0]

    reserved = guardrails(DecisionEnvelope.model_validate(message))
    assert isinstance(reserved, ReservedEnvelope) and reserved.verdict.attempt == 1
    assert guardrails(DecisionEnvelope.model_validate(message)) is not None  # replayed
    [raw] = redis_client.lrange(Queue.SEND.value, 0, -1)
    pushed = json.loads(raw)
    carried = reserved.model_copy(update={"verdict": GuardrailVerdict(allowed=True, attempt=1)})
    _same_message(_celery_writes(app, redis_client, Task.SEND, carried.to_wire()), pushed)

    outbound = FakeOutbound()
    send = Send(ledger, org, outbound, InboundStore(redis_client), clock_ms=lambda: NOW)
    assert send.send(ReservedEnvelope.model_validate(json.loads(pushed["body"])[0][0])) == "engaged"
    assert len(outbound.applied) == 1


def test_a_decision_that_engages_nobody_and_a_refused_reservation_push_nothing(
    redis_client: redis.Redis, redis_url: str
) -> None:
    """Only a write that calls for the next stage pushes its message: a considered nobody
    ends the entry, a refusal ends it too."""
    from contracts import Limits, WorkReport
    from contracts.messages import DecisionEnvelope, WorkEnvelope
    from workers.org import OrgSource
    from workers.settings import BUNDLED_ORG
    from workers.stages.base import Onwards
    from workers.stages.engagement import Engagement
    from workers.stages.guardrails import Guardrails
    from workers.stores.journal import Journal
    from workers.stores.ledger import Ledger

    app = create_app(Settings(redis_url=redis_url, api_token="t"))
    journal = Journal(redis_client)
    ledger = Ledger(redis_client, limits=Limits(max_attempts_per_ask=1))
    org = OrgSource.open(BUNDLED_ORG)
    engagement = Engagement(journal, ledger, org, lambda: NOW, onwards=Onwards(app))
    guardrails = Guardrails(ledger, lambda: NOW, onwards=Onwards(app))
    for tid, report in (
        ("wr-nobody", {"id": "tidy", "title": "Tidy dashboards"}),
        ("wr-1", BLOCKED),
    ):
        journal.accept(tid, kind="work", seat_id="scout", payload="{}", now_ms=NOW, fingerprint=tid)
        env = WorkEnvelope(
            tracking_id=tid,
            seat_id="scout",
            accepted_at_ms=NOW,
            report=WorkReport.model_validate(report),
        )
        decided = engagement(env)
    assert redis_client.llen(Queue.GUARDRAILS.value) == 1  # the blocked report's only
    assert isinstance(decided, DecisionEnvelope)
    assert guardrails(decided) is not None
    # The same ask under another op: its one allowed attempt is taken, so it is refused.
    again = decided.model_copy(update={"tracking_id": "wr-2"})
    journal.accept("wr-2", kind="work", seat_id="scout", payload="{}", now_ms=NOW, fingerprint="2")
    assert guardrails(again) is None
    assert redis_client.llen(Queue.SEND.value) == 1
