"""`record_work_intent` and `list_work_intents` on a real Redis (issue 13): create, update,
compare-and-set conflicts, replays and conflicting replays, credentials refused with nothing
written, allowed while paused, the Issue link fixed, paging and completed history; 100
concurrent writers lose no update; and a runnable intent is exactly one `durable` turn."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from contracts.controller import TurnMessage
from tests.auth import as_seats
from tests.fakes import per_turn
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.ingress.app import create_ingress
from workers.queues import Task
from workers.settings import Settings
from workers.stages import controller_tick, report_intake
from workers.stages.controller_tick import ControllerTick
from workers.stages.turns import Turns
from workers.stores import keys
from workers.tools import ToolContext, ToolError, call, load

pytestmark = pytest.mark.redis

NOW = 1_800_000_000_000
ORG = """
members:
  - {id: ava, displayName: Ava}
  - {id: scout}
  - {id: sage}
seats:
  - {memberId: scout, operatorId: ava, launcher: {kind: noop}}
  - {memberId: sage, operatorId: ava, launcher: {kind: noop}}
"""
load()


def make(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Container:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url, api_token="test-token", org_file=org, outbox_path=tmp_path / "o"
    )
    c = bootstrap.build_container(settings, client=redis_client)
    c.app = create_app(settings, register=False)
    return c


@pytest.fixture
def c(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Container:
    return make(redis_client, redis_url, tmp_path)


def ctx(c: Container, seat: str = "scout", at: int = NOW) -> ToolContext:
    assert c.app is not None
    found = next(s for s in c.org.current()[0].org.seats if s.member_id == seat)
    return ToolContext(c, c.app, found, at)


def record(c: Container, seat: str = "scout", **args: Any) -> dict[str, Any]:
    return call(ctx(c, seat), "record_work_intent", args)


def refused(c: Container, name: str = "record_work_intent", **args: Any) -> ToolError:
    with pytest.raises(ToolError) as caught:
        call(ctx(c), name, args)
    return caught.value


def intent(n: int | str = 1, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "intent_id": f"i{n}",
        "client_request_id": f"r{n}",
        "expected_revision": 0,
        "state": "waiting",
        "next_step": "open the PR for the billing rewrite once CI is green",
    }
    return {**base, **over}


def listing(c: Container, seat: str = "scout", **args: Any) -> dict[str, Any]:
    return call(ctx(c, seat), "list_work_intents", args)


# ---------------------------------------------------------------------- writes


def test_create_then_update_with_the_current_revision(c: Container) -> None:
    """expected_revision 0 creates revision 1; the next write gives 1 and makes 2."""
    first = record(c, **intent(issue_number=42))
    assert first["intent"]["revision"] == 1 and first["created"] is True
    assert first["replayed"] is False and first["intent"]["issueNumber"] == 42
    second = record(
        c, **intent(client_request_id="r1b", expected_revision=1, state="runnable", issue_number=42)
    )
    assert second["intent"]["revision"] == 2 and second["intent"]["state"] == "runnable"
    assert c.intents.get("scout", "i1") == second["intent"]
    assert c.intents.counters("scout") == (2, 1, 1)


def test_a_stale_revision_or_a_second_create_is_409_with_the_current(c: Container) -> None:
    record(c, **intent())
    again = refused(c, **intent(client_request_id="r2"))
    assert (again.status, again.code, again.field) == (
        409,
        "revision_conflict",
        "expected_revision",
    )
    assert again.extra["currentRevision"] == 1 and "exists already" in again.message
    record(c, **intent(client_request_id="r3", expected_revision=1))
    stale = refused(c, **intent(client_request_id="r4", expected_revision=1))
    assert stale.status == 409 and stale.extra["currentRevision"] == 2
    assert stale.extra["intent"]["revision"] == 2
    missing = refused(c, **intent("x", expected_revision=3))
    assert missing.status == 409 and missing.extra["currentRevision"] == 0
    assert c.intents.counters("scout") == (2, 0, 0)


def test_a_replay_returns_the_original_receipt_even_after_a_change(c: Container) -> None:
    """The same request id with the same input answers its first receipt, however the intent
    changed since; with another input it is a 409 and writes nothing."""
    first = record(c, **intent())
    record(c, **intent(client_request_id="r9", expected_revision=1, state="done"))
    replay = record(c, **intent())
    assert replay["replayed"] is True
    assert {k: v for k, v in replay.items() if k != "replayed"} == {
        k: v for k, v in first.items() if k != "replayed"
    }
    assert c.intents.get("scout", "i1")["state"] == "done"  # type: ignore[index]
    other = refused(c, **intent(next_step="something else entirely"))
    assert (other.status, other.code, other.field) == (409, "request_conflict", "client_request_id")
    reused = refused(c, **intent(2, client_request_id="r1"))  # same id, another intent
    assert reused.code == "request_conflict" and c.intents.get("scout", "i2") is None
    assert c.intents.counters("scout")[0] == 2


def test_credentials_are_refused_naming_the_field_and_nothing_is_written(c: Container) -> None:
    token = "ghp_" + "a1B2" * 10
    bad = refused(c, **intent(next_step=f"push with {token}"))
    assert (bad.status, bad.code, bad.field) == (422, "credentials_refused", "next_step")
    assert token not in bad.message and "GitHub token" in bad.message
    blocked = refused(c, **intent(state="blocked", blocker="needs Bearer abcdefghij0123456789xyz"))
    assert (blocked.status, blocked.field) == (422, "blocker")
    assert c.redis.exists(keys.intents("scout"), keys.intent_request("scout", "r1")) == 0
    assert c.intents.counters("scout") == (0, 0, 0)


def test_a_blocker_belongs_to_blocked_only(c: Container) -> None:
    missing = refused(c, **intent(state="blocked"))
    assert (missing.status, missing.code, missing.field) == (422, "blocker_required", "blocker")
    extra = refused(c, **intent(blocker="CI is red"))
    assert (extra.status, extra.code, extra.field) == (422, "blocker_not_blocked", "blocker")
    ok = record(c, **intent(state="blocked", blocker="CI is red on main"))
    assert ok["intent"]["blocker"] == "CI is red on main"


def test_the_issue_link_is_fixed_at_creation(c: Container) -> None:
    record(c, **intent(issue_number=7))
    moved = refused(c, **intent(client_request_id="r2", expected_revision=1, issue_number=8))
    assert (moved.status, moved.code, moved.field) == (409, "issue_link_changed", "issue_number")
    assert moved.extra["issueNumber"] == 7
    dropped = refused(c, **intent(client_request_id="r3", expected_revision=1))
    assert dropped.code == "issue_link_changed"
    record(c, **intent(2))
    added = refused(c, **intent(2, client_request_id="r4", expected_revision=1, issue_number=9))
    assert added.code == "issue_link_changed" and added.extra["issueNumber"] is None
    assert c.intents.get("scout", "i1")["revision"] == 1  # type: ignore[index]


def test_unknown_fields_and_bad_types_are_refused(c: Container) -> None:
    unknown = refused(c, **intent(seat_id="sage"))
    assert (unknown.status, unknown.code, unknown.field) == (422, "invalid_arguments", "seat_id")
    bad = refused(c, **intent(expected_revision="0"))
    assert bad.field == "expected_revision"


def test_allowed_while_the_seat_or_the_project_is_paused(c: Container) -> None:
    view = c.org.current()[0]
    options = next(s for s in view.org.seats if s.member_id == "scout").controller
    c.seat_runs.control("scout", "pause", options=options)
    assert record(c, **intent(state="runnable"))["intent"]["revision"] == 1
    c.seat_runs.set_project(paused=True)
    assert record(c, **intent(2, state="runnable"))["intent"]["revision"] == 1


def test_a_seats_intents_are_its_own(c: Container) -> None:
    """The same intent id for two seats is two intents; each lists only its own."""
    record(c, **intent())
    record(c, "sage", **intent())
    assert [i["intentId"] for i in listing(c, "sage")["intents"]] == ["i1"]
    assert c.intents.counters("scout")[0] == c.intents.counters("sage")[0] == 1


# ---------------------------------------------------------------------- listing


def test_listing_pages_pending_by_id_and_include_completed_adds_history(c: Container) -> None:
    for n in range(25):
        record(c, **intent(f"{n:02d}", state="runnable" if n % 2 else "waiting"))
    for n in (3, 4):
        record(
            c, **intent(f"{n:02d}", client_request_id=f"done{n}", expected_revision=1, state="done")
        )
    first = listing(c)
    ids = [i["intentId"] for i in first["intents"]]
    assert len(ids) == 20 and ids == sorted(ids) and "i03" not in ids and "i04" not in ids
    rest = listing(c, cursor=first["next"])
    assert len(rest["intents"]) == 3 and rest["next"] is None
    assert not {i["intentId"] for i in rest["intents"]} & set(ids)
    everything = listing(c, include_completed=True)
    more = listing(c, include_completed=True, cursor=everything["next"])
    all_ids = [i["intentId"] for i in everything["intents"] + more["intents"]]
    assert all_ids == [f"i{n:02d}" for n in range(25)] and more["next"] is None
    assert listing(c, "sage") == {**listing(c, "sage"), "intents": [], "next": None}


def test_a_cursor_is_scoped_to_its_listing(c: Container) -> None:
    for n in range(21):
        record(c, **intent(n))
    nxt = listing(c)["next"]
    assert nxt is not None
    for args in ({"cursor": nxt, "include_completed": True}, {"cursor": "garbage!"}):
        bad = refused(c, "list_work_intents", **args)
        assert (bad.status, bad.code, bad.field) == (422, "invalid_cursor", "cursor")
    with pytest.raises(ToolError):
        call(ctx(c, "sage"), "list_work_intents", {"cursor": nxt})


# ---------------------------------------------------------------------- races


def test_100_concurrent_writers_lose_no_update(c: Container) -> None:
    """100 threads write one intent at once from the same revision: exactly one wins. Then
    100 threads each retry until their write lands: every revision is won exactly once and
    the final revision is the number of writes."""
    record(c, **intent())
    start = threading.Barrier(100)

    def once(n: int) -> int | None:
        start.wait()
        try:
            made = record(c, **intent(client_request_id=f"a{n}", expected_revision=1))
            return int(made["intent"]["revision"])
        except ToolError as exc:
            assert exc.code == "revision_conflict"
            return None

    with ThreadPoolExecutor(100) as pool:
        won = [r for r in pool.map(once, range(100)) if r is not None]
    assert won == [2]

    def until_written(n: int) -> int:
        start.wait()
        expected = 2
        while True:
            try:
                args = intent(client_request_id=f"b{n}", expected_revision=expected)
                return int(record(c, **{**args, "next_step": f"step {n}"})["intent"]["revision"])
            except ToolError as exc:
                assert exc.code == "revision_conflict"
                expected = int(exc.extra["currentRevision"])

    with ThreadPoolExecutor(100) as pool:
        revisions = sorted(pool.map(until_written, range(100)))
    assert revisions == list(range(3, 103))
    assert c.intents.get("scout", "i1")["revision"] == 102  # type: ignore[index]
    assert c.intents.counters("scout")[0] == 102  # 1 create + 1 + 100 writes, none lost


# ---------------------------------------------------------------------- the controller


class Published:
    def __init__(self) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []

    def __call__(
        self, app: Any, task: Task, tracking: str, message: dict[str, Any], **_: Any
    ) -> None:
        self.messages.append((task.value, message))

    def turns(self) -> list[dict[str, Any]]:
        found = [m for t, m in self.messages if t == Task.TURN.value]
        self.messages[:] = [x for x in self.messages if x[0] != Task.TURN.value]
        return found


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> Published:
    p = Published()
    monkeypatch.setattr(controller_tick, "publish_turns", per_turn(p))
    monkeypatch.setattr(report_intake, "publish", p)
    return p


def tick(c: Container, at: int) -> controller_tick.TickReport:
    assert c.app is not None
    return ControllerTick(c, c.app, rng=lambda: 0.5)(now_ms=at)


def run_turns(c: Container, published: Published, at: int) -> list[str]:
    assert c.app is not None
    runner = Turns.of(c, c.app)
    turns = Turns(c, c.app, runner.launchers, clock_ms=lambda: at, rng=lambda: 0.5)
    return [turns.run(TurnMessage.model_validate(m)) for m in published.turns()]


def test_a_runnable_intent_is_exactly_one_durable_turn(
    c: Container, published: Published, redis_url: str, tmp_path: Path
) -> None:
    """After the first turns, a runnable intent makes the next tick run that seat with reason
    `durable`; once that turn ended ok the same revision is handled, and the seat idles. A
    write that moves the intent to waiting is no new work; making it runnable again is, also
    across a restart (a new container: all the state is in Redis)."""
    tick(c, NOW)
    assert run_turns(c, published, NOW + 1) == ["ok", "ok"]
    tick(c, NOW + 1000)
    assert standing(c) == {"wait:idle": 2}
    record(c, **intent(state="runnable"))
    tick(c, NOW + 2000)
    assert standing(c) == {"run:durable": 1, "wait:idle": 1}
    run = c.seat_runs.get("scout").run
    assert run.active is not None and run.active.reason == "durable"
    tick(c, NOW + 2500)  # queued: nothing new
    assert [m["seatId"] for t, m in published.messages if t == Task.TURN.value] == ["scout"]
    assert run_turns(c, published, NOW + 3000) == ["ok"]
    tick(c, NOW + 4000)
    assert standing(c) == {"wait:idle": 2}
    tick(c, NOW + 5000)
    assert standing(c) == {"wait:idle": 2}
    record(c, **intent(client_request_id="r2", expected_revision=1))  # waiting: not runnable
    tick(c, NOW + 6000)
    assert standing(c) == {"wait:idle": 2}
    record(c, **intent(client_request_id="r3", expected_revision=2, state="runnable"))
    c = make(c.redis, redis_url, tmp_path)  # every process restarted
    tick(c, NOW + 7000)
    assert standing(c) == {"run:durable": 1, "wait:idle": 1}
    assert run_turns(c, published, NOW + 7001) == ["ok"]
    record(c, **intent(client_request_id="r4", expected_revision=3, state="done"))
    tick(c, NOW + 8000)
    assert standing(c) == {"wait:idle": 2}
    assert c.intents.counters("scout") == (4, 0, 2)


def standing(c: Container) -> dict[str, int]:
    """Every seat's standing decision (the last one its record holds), by action and reason:
    what a tick over every seat would have decided for each, which the event-driven tick,
    deciding only the seats due, must leave in every record alike."""
    found: Counter[str] = Counter()
    for seat in c.org.current()[0].org.seats:
        last = c.seat_runs.get(seat.member_id).run.last_decision
        if last is not None:
            found[f"{last.action}:{last.reason}"] += 1
    return dict(found)


def test_observe_reads_the_intent_counters_in_its_one_pipeline(c: Container) -> None:
    record(c, **intent(state="runnable"))
    record(c, "sage", **intent(state="waiting"))
    (_, scout), (_, sage) = c.seat_runs.observe(["scout", "sage"], now_ms=NOW)
    assert (scout.intents_runnable, scout.intents_revision) == (1, 1)
    assert (sage.intents_runnable, sage.intents_revision) == (0, 0)


# ---------------------------------------------------------------------- over HTTP


@pytest.fixture
def client(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    container = make(redis_client, redis_url, tmp_path)
    assert container.app is not None
    with TestClient(create_ingress(container, container.app)) as http:
        as_seats(http)
        yield http


def test_the_tools_answer_over_their_http_routes(client: TestClient) -> None:
    auth = {"Authorization": "Bearer test-token"}
    url = "/v1/seats/scout/tools/"
    made = client.post(url + "record_work_intent", headers=auth, json=intent())
    assert made.status_code == 200 and made.json()["intent"]["revision"] == 1
    again = client.post(
        url + "record_work_intent", headers=auth, json=intent(client_request_id="x")
    )
    assert again.status_code == 409 and again.json()["currentRevision"] == 1
    listed = client.post(url + "list_work_intents", headers=auth, json={})
    assert listed.status_code == 200 and [i["intentId"] for i in listed.json()["intents"]] == ["i1"]
