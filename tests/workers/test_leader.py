"""Beat's leader lease on a real Redis: one holder at a time, an owner-checked renewal, a new
fencing token for every term, ticks that carry it and writes that refuse a stale one, and a
scheduler that never schedules on an error or past its lease (redbeat 127, 208, 218, 230,
238)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis
from celery import Celery, beat

from workers import bootstrap
from workers.celery_app import create_app
from workers.queues import Queue, Task
from workers.recovery.leader import Lease, admit_tick, current_token, scheduler_for, status
from workers.settings import Settings
from workers.stores import keys
from workers.stores.journal import Journal

pytestmark = pytest.mark.redis


# Long enough that the few Redis calls a test makes within one term all land inside it on a
# loaded machine; a test that needs the lease to run out waits for Redis to expire it.
SHORT_MS = 2000


def lease(r: redis.Redis, holder: str, ms: int = 2000) -> Lease:
    return Lease(r, holder=holder, lease_ms=ms)


def wait_lease_expired(r: redis.Redis, within_s: float = 30) -> None:
    """Return once Redis has expired the leader lease (its own clock, not the test's)."""
    deadline = time.monotonic() + within_s
    while r.exists(keys.BEAT_LEADER):
        assert time.monotonic() < deadline, f"the lease did not run out within {within_s} s"
        time.sleep(0.02)


def test_the_first_beat_is_elected_and_renews_its_own_term(redis_client: redis.Redis) -> None:
    """A free lease is taken with token 1; its holder's next hold renews the same term."""
    a = lease(redis_client, "a")
    first, again = a.hold(), a.hold()
    assert (first.verb, first.token, first.holder) == ("elected", 1, "a")
    assert (again.verb, again.token) == ("renewed", 1)
    assert current_token(redis_client) == 1


def test_a_second_beat_stands_by_and_takes_over_with_a_new_token(
    redis_client: redis.Redis,
) -> None:
    """While the leader holds the lease a second beat stands by naming it; once the lease
    runs out the second is elected with a higher token, and the old leader's next hold
    stands by instead of extending the new lease (an owner-checked renewal)."""
    a, b = lease(redis_client, "a", SHORT_MS), lease(redis_client, "b", SHORT_MS)
    assert a.hold().leading
    standby = b.hold()
    assert (standby.verb, standby.holder, standby.token) == ("standby", "a", 1)
    assert 0 < standby.lease_ms <= SHORT_MS
    wait_lease_expired(redis_client)
    took = b.hold()
    assert (took.verb, took.token) == ("elected", 2)
    back = a.hold()
    assert (back.verb, back.holder, back.token) == ("standby", "b", 2)
    assert redis_client.hget(keys.BEAT_LEADER, "holder") == b"b"


def test_only_the_holder_gives_the_lease_up(redis_client: redis.Redis) -> None:
    """Releasing a lease someone else holds changes nothing; the holder's release frees it
    and the next beat is elected at once."""
    a, b = lease(redis_client, "a"), lease(redis_client, "b")
    a.hold()
    assert b.release() is False and a.release() is True
    assert b.hold().verb == "elected"


def test_a_tick_runs_only_with_the_current_token(redis_client: redis.Redis) -> None:
    """A tick carrying the newest term's token runs; an older token, or none from the broker,
    is refused; a tick run in process (embedded mode) carries none and runs."""
    a, b = lease(redis_client, "a", SHORT_MS), lease(redis_client, "b", SHORT_MS)
    assert a.hold().token == 1
    assert admit_tick(redis_client, 1, in_process=False) == ""
    wait_lease_expired(redis_client)
    assert b.hold().token == 2
    assert "not the current leader's" in admit_tick(redis_client, 1, in_process=False)
    assert "no fencing token" in admit_tick(redis_client, None, in_process=False)
    assert admit_tick(redis_client, None, in_process=True) == ""


def test_status_names_the_leader_and_the_elections(redis_client: redis.Redis) -> None:
    """`beat status` reads who holds the lease, its token, and the elections, newest first."""
    assert status(redis_client).holder is None
    lease(redis_client, "a").hold()
    found = status(redis_client)
    assert (found.holder, found.token) == ("a", 1)
    assert found.expires_in_ms is not None and 0 < found.expires_in_ms <= 2000
    assert [t["holder"] for t in found.terms] == ["a"]


# --------------------------------------------------------------------------- the scheduler


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Every tick a scheduler would publish: (task, kwargs), recorded instead of sent."""
    found: list[tuple[str, dict[str, Any]]] = []

    def record(self: Any, entry: Any, producer: Any = None, advance: bool = True, **kw: Any) -> Any:
        found.append((entry.task, dict(entry.kwargs)))
        return None

    monkeypatch.setattr(beat.Scheduler, "apply_async", record)
    return found


def scheduler(app: Celery, lease_: Lease) -> Any:
    return scheduler_for(lease_)(app=app, lazy=False)


@pytest.fixture
def app(redis_url: str, tmp_path: Any) -> Celery:
    settings = Settings(
        redis_url=redis_url,
        api_token="t",
        outbox_path=tmp_path / "o.jsonl",
        sweep_interval_s=0.01,
    )
    return create_app(settings, register=False)


def test_the_leader_schedules_with_its_token_and_a_standby_schedules_nothing(
    redis_client: redis.Redis, app: Celery, sent: list[tuple[str, dict[str, Any]]]
) -> None:
    """Two schedulers tick side by side: only the elected one sends, each tick with its token."""
    a, b = scheduler(app, lease(redis_client, "a")), scheduler(app, lease(redis_client, "b"))
    time.sleep(0.02)
    for _ in range(3):
        a.tick()
        b.tick()
        time.sleep(0.02)
    assert sent and {task for task, _ in sent} <= {Task.SWEEP.value, Task.STEWARD.value}
    assert {kw["fence"] for _, kw in sent} == {1}
    assert b.leading() is False


class Unreachable(Lease):
    def hold(self) -> Any:
        raise redis.ConnectionError("Connection closed by server.")


def test_an_error_while_asking_for_the_lease_is_never_leadership(
    redis_client: redis.Redis, app: Celery, sent: list[tuple[str, dict[str, Any]]]
) -> None:
    """A standby whose lease request fails (redbeat 208/238) schedules nothing."""
    s = scheduler(app, Unreachable(redis_client, holder="b", lease_ms=2000))
    time.sleep(0.02)
    s.tick()
    assert sent == [] and not s.leading()


def test_a_leader_that_cannot_renew_stops_before_its_lease_could_pass_on(
    redis_client: redis.Redis, app: Celery, sent: list[tuple[str, dict[str, Any]]]
) -> None:
    """A leader whose renewals fail (Redis unreachable, a host pause: redbeat 218/230) keeps
    sending only until the lease less its margin, counted from before its last renewal was
    asked; by then no one else could have been elected."""
    # A 5 s lease has the full 1 s margin: room on a loaded machine between the scheduler
    # giving up and the lease's TTL being read.
    good = lease(redis_client, "a", 5000)
    s = scheduler(app, good)
    time.sleep(0.02)
    s.tick()
    assert s.leading() and sent
    s.lease = Unreachable(redis_client, holder="a", lease_ms=5000)
    deadline = time.monotonic() + 30
    while s.leading():
        assert time.monotonic() < deadline, "the scheduler still leads 30 s on"
        time.sleep(0.02)
    left_ms = redis_client.pttl(keys.BEAT_LEADER)
    sent.clear()
    s.tick()
    assert not s.leading() and sent == []
    assert left_ms > 0  # the lease itself still ran when the scheduler stopped


def test_a_stale_tick_of_a_deposed_leader_sweeps_nothing(
    redis_client: redis.Redis, redis_url: str, tmp_path: Any
) -> None:
    """The beat task run with a deposed leader's token re-enqueues no overdue entry; the
    current leader's token sweeps it."""
    settings = Settings(
        redis_url=redis_url,
        api_token="t",
        outbox_path=tmp_path / "o.jsonl",
        journal_deadline_ms=1000,
    )
    container = bootstrap.build_container(settings, client=redis_client)
    app = create_app(settings, container=container)
    Journal(redis_client, deadline_ms=1000).accept(
        "t-old", kind="work", seat_id="scout", payload="{}", now_ms=0, fingerprint="f"
    )
    redis_client.set(keys.BEAT_EPOCH, 5)
    app.tasks[Task.SWEEP.value].apply(kwargs={"fence": 4})
    assert redis_client.llen(Queue.ENGAGEMENT.value) == 0
    assert redis_client.zscore(keys.JOURNAL_OPEN, "t-old") == 1000
    app.tasks[Task.SWEEP.value].apply(kwargs={"fence": 5})
    assert redis_client.zscore(keys.JOURNAL_OPEN, "t-old") != 1000
