"""The event-driven work controller (issue 27 point 1) on a real Redis.

- Differential: over random runs of news, operator controls, turns that end, fail, are lost
  or never start, and clock jumps, every tick of the event-driven controller leaves every
  seat's record exactly where a tick that decides EVERY seat (the controller before issue 27,
  rebuilt here from the same pure `tick_seat`) would have left it, and publishes the same
  turns: it skips only the seats whose decision nothing could change.
- Each place that makes news wakes its seat in the same script; the tick takes the
  oldest-due first, at most its batch, and a wake-up during a tick is not lost; a tick's
  claim runs out; the reconciliation pass finds a seat missing from the index; a new org
  wakes every seat; a tick with nothing due reads no seat; beat sends no tick then.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from celery import Celery

from contracts import Candidate, Directedness
from contracts.backlog import BacklogEntry
from contracts.controller import SeatRun
from pipeline.turns import Control, Ticked, start_turn, tick_seat
from tests.fakes import per_turn, place
from tests.workers.test_controller_tick import Published, make, turns
from tests.workers.test_ledger_store import decision as ask_decision
from workers.container import Container
from workers.queues import Task
from workers.recovery.leader import Lease, scheduler_for
from workers.stages import controller_tick, report_intake
from workers.stages.controller_tick import ControllerTick, controller_due, idle_gate
from workers.stores import keys, seat_runs

pytestmark = pytest.mark.redis

NOW = 1_800_000_000_000
RNG = 0.37  # one fixed draw for both sides: a jitter is the same wherever it is drawn


def org(n: int, varied: bool = False) -> str:
    """`n` noop seats; `varied`: with varied controller options (quiet intervals, backoffs,
    failure limits), else the defaults (no timer once at rest)."""
    members = ["  - {id: ava, displayName: Ava}"]
    seats = []
    for i in range(n):
        members.append(f"  - {{id: s{i}}}")
        options = [
            "{}",
            "{quietIntervalMs: 20000}",
            "{retryBaseMs: 2000, maxFailures: 2}",
            "{announcementJitterMs: 5000, quietIntervalMs: 45000, quietJitterMs: 3000}",
        ][i % 4 if varied else 0]
        seats.append(f"  - {{memberId: s{i}, operatorId: ava, controller: {options}}}")
    return "members:\n" + "\n".join(members) + "\nseats:\n" + "\n".join(seats) + "\n"


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> Published:
    p = Published()
    monkeypatch.setattr(controller_tick, "publish_turns", per_turn(p))
    monkeypatch.setattr(report_intake, "publish", p)
    return p


def build(
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    n: int,
    varied: bool = False,
    **settings: Any,
) -> Container:
    c = make(redis_client, redis_url, tmp_path, org(n, varied))
    c.settings = c.settings.model_copy(
        update={
            "turn_time_limit_s": 30,
            "turn_lease_grace_ms": 1000,
            "turn_republish_after_ms": 5000,
            **settings,
        }
    )
    return c


@pytest.fixture
def small(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[Container]:
    yield build(redis_client, redis_url, tmp_path, 4)


def tick(c: Container, at: int) -> controller_tick.TickReport:
    assert c.app is not None
    return ControllerTick(c, c.app, rng=lambda: RNG)(now_ms=at)


def directed(c: Container, seat: str, n: int, at: int) -> None:
    cand = Candidate.model_validate(
        {
            "family": "messaging",
            "source": "slack",
            "deliveryId": f"d{n}",
            "ids": {"channelId": "C1", "messageId": f"{n}.0"},
            "msg": {"authorId": "ava", "body": f"{seat}, look", "mentions": [seat]},
            "atMs": at,
        }
    )
    verdict = Directedness(directed=True, surface="mention", reason="mention", why="named")
    place(c.redis, seat, cand, verdict)


def ids(c: Container) -> list[str]:
    return [s.member_id for s in c.org.current()[0].org.seats]


def due(c: Container) -> dict[str, int]:
    found: list[tuple[bytes, float]] = c.redis.zrange(  # type: ignore[assignment]
        keys.CONTROLLER_DUE, 0, -1, withscores=True
    )
    return {k.decode(): int(v) for k, v in found}


# --------------------------------------------------------------------------- differential


def reference(c: Container, at: int) -> dict[str, tuple[SeatRun, Ticked]]:
    """What a tick over every seat would decide at `at`, without writing anything: on each
    whole record (every finished turn, where the tick reads only the last)."""
    seats = c.org.current()[0].org.seats
    observed = c.seat_runs.observe([s.member_id for s in seats], now_ms=at)
    runs = [c.seat_runs.get(s.member_id).run for s in seats]
    return {
        seat.member_id: (
            run,
            tick_seat(
                run,
                seen,
                options=seat.controller,
                now_ms=at,
                rng=lambda: RNG,
                republish_after_ms=c.settings.turn_republish_after_ms,
            ),
        )
        for seat, run, (_read, seen) in zip(seats, runs, observed, strict=True)
    }


def comparable(run: SeatRun) -> SeatRun:
    """A record without what the escalation's journal write adds after the tick (its
    tracking id and try time): the decision is the rest."""
    e = run.escalation
    if e is None:
        return run
    return run.model_copy(
        update={
            "escalation": e.model_copy(
                update={"tracking_id": None, "tried_at_ms": None, "target_id": None}
            )
        }
    )


def act(c: Container, published: Published, rnd: random.Random, at: int, step: int) -> None:
    """One second's worth of the world: news, controls, and what happens to published turns."""
    seats = ids(c)
    for seat in seats:
        roll = rnd.random()
        if roll < 0.04:
            directed(c, seat, step * 100 + seats.index(seat), at)
        elif roll < 0.07:
            page = c.inbox.updates(seat)
            if page.items:
                c.inbox.ack(seat, page.position)
        elif roll < 0.08:
            what: Control = rnd.choice(["pause", "resume", "run-now", "resume"])
            c.seat_runs.control(seat, what, options=c.org.current()[0].seat(seat).controller)  # type: ignore[union-attr]
        elif roll < 0.085:
            c.backlog.add(
                BacklogEntry.model_validate(
                    {
                        "id": f"b{step}-{seat}",
                        "seatId": seat,
                        "objectiveKey": "k",
                        "title": "work",
                        "addedAtMs": at,
                        "route": "SELF",
                    }
                )
            )
        elif roll < 0.095:  # an ask of the seat's: its place held, the send to come
            ask = f"op-{step}-{seat}"
            c.ledger.reserve(
                ask,
                decision=ask_decision(ask, ask),
                seat_id=seat,
                tracking_id=f"t-{ask}",
                now_ms=at,
            )
    onward = {b"reserved": "sending", b"sending": "sent"}
    pending: list[bytes] = c.redis.zrange(keys.PENDING, 0, -1)  # type: ignore[assignment]
    for held in pending:  # the send stage, now and then
        state = c.redis.hget(keys.op(held.decode()), "state")
        if state in onward and rnd.random() < 0.3:
            c.redis.hset(keys.op(held.decode()), "state", onward[state])
    if rnd.random() < 0.01:
        c.project.notify("announcement", seats, by="ava", now_ms=at, body="all hands")
    todo = published.of(Task.TURN)
    published.messages[:] = [x for x in published.messages if x[0] != Task.TURN.value]
    from contracts.controller import TurnMessage

    for m in todo:
        fate = rnd.random()
        if fate < 0.7:
            turns(c, at).run(TurnMessage.model_validate(m))
        elif fate < 0.85:  # started, then its worker died: the lease settles it lost
            turn_id: str = m["turnId"]

            def begun(r: SeatRun, turn_id: str = turn_id) -> SeatRun | None:
                return start_turn(r, turn_id, now_ms=at, lease_ms=3000)

            c.seat_runs.update(m["seatId"], begun)
        # else: never started; the republish time brings it back


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_tick_agrees_with_a_tick_over_every_seat(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, published: Published, seed: int
) -> None:
    """Given 8 seats and a random world, when the event-driven tick runs each second (and
    now and then after a jump of up to a minute), then after every tick every seat's record
    is the one a tick deciding every seat would have written, the same turns are published,
    and the seats it skipped are exactly ones whose record that tick would not change."""
    c = build(redis_client, redis_url, tmp_path, 8, varied=True)
    # The project card recorded first (as the first tick would): both sides read it.
    index = controller_tick.org_index(c.org.current()[0])
    c.project.card_changed(ids(c), card=index.card, name="", now_ms=NOW)
    rnd = random.Random(seed)
    at = NOW
    skipped = decided = 0
    for step in range(260):
        expected = reference(c, at)
        sent_before = len(published.of(Task.TURN))
        report = tick(c, at)
        sent = {m["turnId"] for m in published.of(Task.TURN)[sent_before:]}
        want_sent = {
            t.publish.turn_id for before, t in expected.values() if t.publish and t.run != before
        }
        assert sent == want_sent, (step, at)
        for seat, (before, t) in expected.items():
            after = c.seat_runs.get(seat).run
            want = t.run if t.run != before else before
            assert comparable(after) == comparable(want), (
                step,
                seat,
                at,
                report.seats,
                {
                    k: (v, want.model_dump().get(k))
                    for k, v in comparable(after).model_dump().items()
                    if v != comparable(want).model_dump().get(k)
                },
            )
        skipped += len(expected) - report.seats
        decided += report.seats
        act(c, published, rnd, at, step)
        at += 1000 if rnd.random() < 0.9 else rnd.randint(2, 60) * 1000
    # The comparison is not vacuous: many seat-ticks were skipped, many decided.
    assert skipped > 500 and decided > 200, (skipped, decided)


# --------------------------------------------------------------------------- wake-ups


def settle_all(c: Container, published: Published, at: int) -> int:
    """Bring every seat to rest (first turns run and ended, inboxes read): returns the time."""
    tick(c, at)
    for m in published.of(Task.TURN):
        from contracts.controller import TurnMessage

        turns(c, at).run(TurnMessage.model_validate(m))
    published.messages.clear()
    tick(c, at + 1000)
    tick(c, at + 2000)
    assert due(c) == {}, due(c)
    return at + 2000


def test_every_news_writer_wakes_its_seat_in_the_same_script(
    small: Container, published: Published
) -> None:
    """Given seats at rest (the due index empty), each kind of news puts exactly its seat in
    the index at the clock of the last tick: an inbox item and its acknowledgement, a backlog
    item added and done, an operator's control, an ask's place held, a project announcement
    (every seat)."""
    c = small
    at = settle_all(c, published, NOW)
    directed(c, "s1", 1, at)
    assert due(c) == {"s1": at}
    c.redis.delete(keys.CONTROLLER_DUE)
    c.inbox.ack("s1", c.inbox.updates("s1").position)  # what is pending changed
    assert due(c) == {"s1": at}
    tick(c, at + 1000)
    entry = BacklogEntry.model_validate(
        {
            "id": "b1",
            "seatId": "s2",
            "objectiveKey": "k",
            "title": "work",
            "addedAtMs": at,
            "route": "SELF",
        }
    )
    c.redis.delete(keys.CONTROLLER_DUE)
    c.backlog.add(entry)
    assert due(c) == {"s2": at + 1000}
    c.redis.delete(keys.CONTROLLER_DUE)
    c.backlog.done("s2", "b1", by="s2", now_ms=at)
    assert due(c) == {"s2": at + 1000}
    c.redis.delete(keys.CONTROLLER_DUE)
    c.seat_runs.control("s3", "pause", options=c.org.current()[0].seat("s3").controller)  # type: ignore[union-attr]
    assert due(c) == {"s3": at + 1000}
    c.redis.delete(keys.CONTROLLER_DUE)
    held = c.ledger.reserve(
        "op-s0", decision=ask_decision(), seat_id="s0", tracking_id="t-s0", now_ms=at
    )
    assert held.allowed and due(c) == {"s0": at + 1000}  # an ask on its way
    report = tick(c, at + 1001)
    assert report.decisions == {"wait:pending_delivery": 1}
    assert due(c) == {"s0": at + 1002}  # looked at each tick while it is on its way
    c.redis.delete(keys.CONTROLLER_DUE)
    c.project.notify("announcement", ids(c), by="ava", now_ms=at, body="hello")
    assert due(c) == dict.fromkeys(ids(c), at + 1001)
    c.redis.delete(keys.CONTROLLER_DUE)
    c.seat_runs.set_project(paused=True)  # flags written outside a script: refill
    assert c.seat_runs.index().org is None
    report = tick(c, at + 2000)
    assert report.seats == 4 and report.decisions == {"wait:paused": 4}


def test_an_idle_tick_reads_no_seat_and_beat_sends_none(
    small: Container, published: Published
) -> None:
    """Given seats at rest, a tick decides nobody and writes nothing; the beat gate says
    nothing is due (and marks the tick as looked at); once news comes, it says due."""
    c = small
    at = settle_all(c, published, NOW)
    report = tick(c, at + 1000)
    assert (report.seats, report.written, report.published) == (0, 0, ())
    assert controller_due(c, now_ms=at + 2000) is False
    gate = idle_gate(c, clock_ms=lambda: at + 3000)
    assert gate() is False
    assert c.redis.hget(keys.TICKS, "controller") == str(at + 3000).encode()
    directed(c, "s0", 9, at)
    assert gate() is True


def test_the_oldest_due_go_first_and_the_rest_stay_due(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, published: Published
) -> None:
    """Given a batch of 2 and five seats woken one tick apart, each tick decides the two
    oldest-due; the others stay due and come next, none starves."""
    c = build(redis_client, redis_url, tmp_path, 5, controller_tick_seats=2)
    at = NOW
    for i in range(3):  # the first turns, two by two, then rest
        tick(c, at + i)
    for m in published.of(Task.TURN):
        from contracts.controller import TurnMessage

        turns(c, at).run(TurnMessage.model_validate(m))
    published.messages.clear()
    at += 1000
    for _ in range(6):
        tick(c, at)
        at += 1000
    assert due(c) == {}
    order = ["s3", "s1", "s4", "s0", "s2"]
    for n, seat in enumerate(order):
        c.redis.set(keys.CONTROLLER_CLOCK, at + n)  # woken one tick apart
        directed(c, seat, 50 + n, at)
    batches = [tick(c, at + 10 + k).decided for k in range(3)]
    # The third tick takes s2, the last woken, before the seats the first tick began turns
    # for (due again at its next tick, to write `wait: active`).
    assert batches[:2] == [("s3", "s1"), ("s4", "s0")] and batches[2][0] == "s2"


def test_a_full_batch_is_followed_at_once_by_the_next(
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    published: Published,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given a batch of 2 and five seats due, a tick decides two and says more are due; the
    controller's task then runs the next batch at once: under a worker as one new task with
    the same leader's token, in process (embedded mode) until nothing is due by now."""
    from workers.stages import base

    c = build(redis_client, redis_url, tmp_path, 5, controller_tick_seats=2)
    app = Celery("t", broker="memory://")
    controller_tick.register(app, lambda: c)
    task = app.tasks[Task.CONTROLLER.value]
    monkeypatch.setattr(base, "admit_tick", lambda *_a, **_k: "")
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(type(task), "apply_async", lambda self, *a, **k: sent.append(k))
    task(fence=7)  # as a worker runs it: not in process
    assert sent == [{"kwargs": {"fence": 7}}]
    assert len(published.of(Task.TURN)) == 2
    org_ = c.seat_runs.index().org or ""
    now = time.time_ns() // 10**6
    assert c.redis.zcount(keys.CONTROLLER_DUE, "-inf", now) >= 3  # and the two begun, soon
    # The chain runs: beat's gate sends no tick beside it, until the chain has run out.
    assert not c.seat_runs.due_now(now_ms=now, org=org_)
    assert c.seat_runs.due_now(now_ms=now + seat_runs.CHAIN_MS + 1, org=org_)
    assert task.apply().successful()  # in process: batch after batch
    assert sent == [{"kwargs": {"fence": 7}}]  # nothing more was sent
    assert len(published.of(Task.TURN)) == 5  # every seat's first turn, none twice
    assert c.redis.hget(keys.CONTROLLER_STATE, "chain") is None  # its last tick ended it


def test_a_chain_ends_while_asks_are_on_their_way(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, published: Published
) -> None:
    """Given a batch of 2 and three seats whose asks stay on their way (each is looked at
    again at the next millisecond), a chain of ticks 50 ms apart decides them and ends: it
    goes on only for what was due when it began."""
    c = build(redis_client, redis_url, tmp_path, 5)
    at = settle_all(c, published, NOW)
    c.settings = c.settings.model_copy(update={"controller_tick_seats": 2})
    for seat in ("s0", "s1", "s2"):
        op = f"op-{seat}"
        c.ledger.reserve(
            op, decision=ask_decision(op, op), seat_id=seat, tracking_id=f"t-{op}", now_ms=at
        )

    def chain(start: int) -> list[controller_tick.TickReport]:
        reports = [tick(c, start)]
        while reports[-1].more and len(reports) < 10:
            reports.append(tick(c, start + 50 * len(reports)))
        return reports

    reports = chain(at + 1000)
    assert [r.more for r in reports] == [True, False]
    assert sum(r.decisions.get("wait:pending_delivery", 0) for r in reports) >= 3
    assert c.redis.hget(keys.CONTROLLER_STATE, "chain") is None
    # Still on their way: beat's next tick looks at the three again, in a chain that ends.
    assert [r.more for r in chain(at + 2000)] == [True, False]


def test_the_reconciliation_step_counts_against_the_batch(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, published: Published
) -> None:
    """A tick whose reconciliation step is due takes that many due seats fewer (at least
    one), so it never decides more than its batch plus the step's seats."""
    c = build(redis_client, redis_url, tmp_path, 4, controller_tick_seats=6)
    at = settle_all(c, published, NOW)
    for n, seat in enumerate(("s0", "s1", "s2", "s3")):
        directed(c, seat, 60 + n, at)
    c.redis.hset(keys.CONTROLLER_STATE, "next", at)  # the step is due
    taken = c.seat_runs.take(
        now_ms=at + 1000,
        limit=6,
        claim_until_ms=at + 31_000,
        org=c.seat_runs.index().org or "",
        step=4,
    )
    assert taken is not None and taken.reconcile is not None
    assert len(taken.seats) == 2 and taken.more


def test_a_wake_up_during_a_tick_is_not_lost(
    small: Container, published: Published, monkeypatch: pytest.MonkeyPatch
) -> None:
    """News that lands while a tick is deciding its seat (after the tick read it) leaves the
    seat due for the next tick, which then runs its turn."""
    c = small
    at = settle_all(c, published, NOW)
    c.seat_runs.control("s0", "resume", options=c.org.current()[0].seat("s0").controller)  # type: ignore[union-attr]
    real = c.seat_runs.observe

    def observe_then_news(seat_ids: Any, *, now_ms: int) -> Any:
        found = real(seat_ids, now_ms=now_ms)
        directed(c, "s0", 77, now_ms)  # after the read: this tick cannot see it
        return found

    monkeypatch.setattr(c.seat_runs, "observe", observe_then_news)
    report = tick(c, at + 1000)
    assert report.decisions == {"wait:idle": 1} and report.published == ()
    assert due(c)["s0"] <= at + 1000
    monkeypatch.setattr(c.seat_runs, "observe", real)
    report = tick(c, at + 2000)
    assert report.decisions == {"run:notices": 1}


def test_a_dead_ticks_claim_runs_out(small: Container, published: Published) -> None:
    """A tick that took seats and died before its commit leaves them claimed; once the claim
    runs out they are due again, and a tick decides them."""
    c = small
    at = settle_all(c, published, NOW)
    directed(c, "s2", 5, at)
    taken = c.seat_runs.take(
        now_ms=at + 1000, limit=10, claim_until_ms=at + 31_000, org=c.seat_runs.index().org or ""
    )
    assert taken is not None and taken.seats == ("s2",)
    assert tick(c, at + 2000).seats == 0  # claimed: not due
    report = tick(c, at + 31_000)
    assert report.decisions == {"run:notices": 1}


def test_reconciliation_finds_a_seat_missing_from_the_index(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, published: Published
) -> None:
    """Given a seat with news whose entry was lost from the index (a hand edit, an old
    backup), the reconciliation pass decides it within one pass
    (SEATWIRE_CONTROLLER_RECONCILE_S), and runs its turn."""
    c = build(redis_client, redis_url, tmp_path, 4, controller_reconcile_s=8.0)
    at = settle_all(c, published, NOW)
    directed(c, "s3", 5, at)
    c.redis.zrem(keys.CONTROLLER_DUE, "s3")
    ran = None
    for i in range(1, 12):
        report = tick(c, at + i * 1000)
        if report.decisions.get("run:notices"):
            ran = i
            break
    assert ran is not None and ran <= 9, ran


def test_a_new_org_wakes_every_seat_and_a_new_seat_runs_first(
    small: Container, published: Published
) -> None:
    """Given seats at rest, a seat added to the org file makes the next tick refill the index:
    every seat is decided once, and the new one runs its first turn."""
    c = small
    at = settle_all(c, published, NOW)
    path = c.settings.org_file
    path.write_text(org(5))
    import os

    os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    report = tick(c, at + 1000)
    assert report.seats == 5 and report.decisions.get("run:first") == 1


def test_beat_sends_the_controller_tick_only_when_its_gate_opens(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader's scheduler asks a row's gate before it sends: closed, nothing is sent; a
    gate that raises sends (the tick finds out for itself)."""
    from celery import beat

    sent: list[str] = []
    monkeypatch.setattr(
        beat.Scheduler, "apply_async", lambda self, entry, *a, **k: sent.append(entry.task)
    )
    app = Celery("t", broker="memory://")
    answers = iter([False, True])

    def broken() -> bool:
        raise redis.ConnectionError("down")

    s = scheduler_for(
        Lease(redis_client, holder="a", lease_ms=5000),
        {Task.CONTROLLER.value: lambda: next(answers), Task.ASKS.value: broken},
    )(app=app, lazy=True)
    s._token, s._valid_until = 1, time.monotonic() + 60
    entry = SimpleNamespace(task=Task.CONTROLLER.value, kwargs={})
    assert s.apply_async(entry) is None and sent == []
    s.apply_async(entry)
    s.apply_async(SimpleNamespace(task=Task.ASKS.value, kwargs={}))
    assert sent == [Task.CONTROLLER.value, Task.ASKS.value]
