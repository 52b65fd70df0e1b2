"""`send_message` and `read_thread` over the tool routes on a real Redis (issue 13): delivery
to the recipients' inboxes and notices (never the sender's), replays and conflicts on the
client id, 5 concurrent retries delivering once, the 5 s and 60-an-hour limits with the next
allowed time, threads paged by 50 messages and by 64 KB, cursors and after_message_id, and
bad inputs named."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import redis
from celery import Celery
from fastapi.testclient import TestClient

from pipeline.messages import PAGE_BYTES
from pipeline.paging import json_bytes
from tests.auth import as_seats
from tests.fakes import per_turn
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.ingress.app import create_ingress
from workers.settings import Settings
from workers.tools import ToolContext, ToolError, call

pytestmark = pytest.mark.redis

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ORG = """
project: {name: Atlas}
members:
  - {id: ava, displayName: Ava}
  - {id: scout, displayName: Scout}
  - {id: sage, displayName: Sage}
  - {id: tally, displayName: Tally}
seats:
  - {memberId: scout, operatorId: ava}
  - {memberId: sage, operatorId: ava}
  - {memberId: tally}
"""
START = 1_700_000_000_000


@dataclass
class Clock:
    now: int = START

    def __call__(self) -> int:
        return self.now

    def tick(self, ms: int = 5_000) -> None:
        self.now += ms


@dataclass
class World:
    http: TestClient
    clock: Clock
    container: Container
    settings: Settings
    app: Celery

    def tool(self, seat: str, name: str, **args: object) -> tuple[int, dict[str, Any]]:
        resp = self.http.post(f"/v1/seats/{seat}/tools/{name}", headers=AUTH, json=args)
        return resp.status_code, resp.json()

    def send(
        self, seat: str, cid: str, to: list[str], body: str = "hi", **more: object
    ) -> dict[str, Any]:
        status, got = self.tool(
            seat, "send_message", to=to, body=body, client_message_id=cid, **more
        )
        assert status == 200, got
        self.clock.tick()
        return got

    def inbox(self, seat: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.tool(seat, "get_updates")[1]["items"]
        return items


@pytest.fixture
def world(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[World]:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url, api_token=TOKEN, org_file=org, outbox_path=tmp_path / "o.jsonl"
    )
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    clock = Clock()
    with TestClient(create_ingress(container, app, clock_ms=clock)) as http:
        as_seats(http)
        yield World(http, clock, container, settings, app)


def test_a_message_reaches_each_recipient_and_never_the_sender(world: World) -> None:
    """Each recipient's inbox gets a directed item and a notice; the sender, even named in
    `to`, gets neither; the receipt names the message and its thread."""
    status, receipt = world.tool(
        "scout",
        "send_message",
        to=["sage", "tally", "scout", "sage"],
        body="Ship it?",
        client_message_id="ask-1",
    )
    assert status == 200
    assert receipt["to"] == ["sage", "tally"] and receipt["skipped"] == ["scout"]
    assert receipt["threadId"] == receipt["messageId"] and receipt["replyTo"] is None
    assert receipt["sentAtMs"] == START and receipt["clientMessageId"] == "ask-1"
    for seat in ("sage", "tally"):
        (item,) = world.inbox(seat)
        assert item["position"] == 1 and item["family"] == "messaging"
        assert item["deliveryId"] == receipt["messageId"]
        msg = item["candidate"]["msg"]
        assert msg["authorId"] == "scout" and msg["body"] == "Ship it?"
        assert item["candidate"]["ids"]["threadRootId"] == receipt["threadId"]
        assert world.container.inbound.notices(seat) == 1
    assert world.inbox("scout") == [] and world.container.inbound.notices("scout") == 0


def test_a_replay_is_the_original_receipt_and_a_conflict_is_409(world: World) -> None:
    first = world.send("scout", "once", ["sage"], "hello")
    world.clock.tick(60_000)
    status, again = world.tool(
        "scout", "send_message", to=["sage"], body="hello", client_message_id="once"
    )
    assert (status, again) == (200, first)
    assert len(world.inbox("sage")) == 1 and world.container.inbound.notices("sage") == 1
    for change in (
        {"body": "hello!"},
        {"to": ["sage", "tally"]},
        {"thread_id": first["messageId"]},
    ):
        args = {"to": ["sage"], "body": "hello", "client_message_id": "once", **change}
        status, body = world.tool("scout", "send_message", **args)
        assert status == 409 and body["error"] == "client_message_id_conflict"
        assert body["field"] == "client_message_id" and body["original"] == first
    # another seat's same client id is its own message
    other = world.send("sage", "once", ["scout"], "hello")
    assert other["messageId"] != first["messageId"]
    assert len(world.inbox("sage")) == 1 and len(world.inbox("tally")) == 0


def test_five_concurrent_retries_deliver_once(world: World) -> None:
    """Five callers, each with its own Redis connection, send the same client id at once."""
    seat = world.container.org.current()[0].seat("scout")
    assert seat is not None
    barrier = threading.Barrier(5)
    receipts: list[dict[str, Any]] = []

    def retry() -> None:
        container = bootstrap.build_container(world.settings)
        ctx = ToolContext(container, world.app, seat, world.clock())
        barrier.wait()
        receipts.append(
            call(
                ctx,
                "send_message",
                {"to": ["sage", "tally"], "body": "race", "client_message_id": "r"},
            )
        )

    threads = [threading.Thread(target=retry) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(receipts) == 5 and all(r == receipts[0] for r in receipts)
    for seat_id in ("sage", "tally"):
        assert len(world.inbox(seat_id)) == 1
        assert world.container.inbound.notices(seat_id) == 1


def test_one_message_every_5_seconds(world: World) -> None:
    world.tool("scout", "send_message", to=["sage"], body="a", client_message_id="a")
    world.clock.tick(4_000)
    status, body = world.tool("scout", "send_message", to=["sage"], body="b", client_message_id="b")
    assert status == 429 and body["error"] == "rate_limited"
    assert body["retryAfterMs"] == 1_000 and body["nextAllowedAtMs"] == START + 5_000
    assert len(world.inbox("sage")) == 1  # the refusal wrote nothing
    # a replay is never held back; another seat has its own budget
    assert (
        world.tool("scout", "send_message", to=["sage"], body="a", client_message_id="a")[0] == 200
    )
    assert (
        world.tool("tally", "send_message", to=["sage"], body="c", client_message_id="c")[0] == 200
    )
    world.clock.tick(1_000)
    assert (
        world.tool("scout", "send_message", to=["sage"], body="b", client_message_id="b")[0] == 200
    )


def test_sixty_an_hour(world: World) -> None:
    for i in range(60):
        world.send("scout", f"m{i}", ["sage"], f"message {i}")
    status, body = world.tool("scout", "send_message", to=["sage"], body="x", client_message_id="x")
    assert status == 429 and body["nextAllowedAtMs"] == START + 3_600_000
    assert body["retryAfterMs"] == START + 3_600_000 - world.clock.now
    assert "60 messages" in body["message"]
    world.clock.now = START + 3_600_000
    assert (
        world.tool("scout", "send_message", to=["sage"], body="x", client_message_id="x")[0] == 200
    )


def test_replies_join_the_thread_and_read_oldest_first(world: World) -> None:
    root = world.send("scout", "q", ["sage"], "question")
    reply = world.send("sage", "a", ["scout"], "answer", thread_id=root["messageId"])
    assert reply["threadId"] == root["messageId"] and reply["replyTo"] == root["messageId"]
    # a reply to the reply is in the same thread
    third = world.send("tally", "t", ["scout", "sage"], "me too", thread_id=reply["messageId"])
    assert third["threadId"] == root["messageId"]
    answered, joined = world.inbox("scout")
    assert answered["candidate"]["msg"]["parentAuthorId"] == "scout"
    assert joined["candidate"]["msg"]["parentAuthorId"] == "sage"
    # anyone of the project reads it, by any of its messages
    status, page = world.tool("tally", "read_thread", thread_id=reply["messageId"])
    assert status == 200 and page["next"] is None and page["threadId"] == root["messageId"]
    assert [m["body"] for m in page["messages"]] == ["question", "answer", "me too"]
    assert page["messages"][1] == {
        "id": reply["messageId"],
        "threadId": root["messageId"],
        "replyTo": root["messageId"],
        "from": "sage",
        "to": ["scout"],
        "body": "answer",
        "sentAtMs": reply["sentAtMs"],
    }
    status, rest = world.tool(
        "scout", "read_thread", thread_id=root["messageId"], after_message_id=reply["messageId"]
    )
    assert [m["body"] for m in rest["messages"]] == ["me too"] and rest["next"] is None
    after_last = world.tool(
        "scout", "read_thread", thread_id=root["messageId"], after_message_id=third["messageId"]
    )[1]
    assert after_last["messages"] == [] and after_last["next"] is None


def test_a_thread_pages_by_50_messages(world: World) -> None:
    root = world.send("scout", "c0", ["sage"], "0")
    for i in range(1, 53):
        world.send("scout", f"c{i}", ["sage"], str(i), thread_id=root["messageId"])
    _, first = world.tool("sage", "read_thread", thread_id=root["messageId"])
    assert [m["body"] for m in first["messages"]] == [str(i) for i in range(50)]
    _, second = world.tool("sage", "read_thread", thread_id=root["messageId"], cursor=first["next"])
    assert [m["body"] for m in second["messages"]] == ["50", "51", "52"] and second["next"] is None
    # after_message_id starts a page after a known message; next continues it
    _, mid = world.tool(
        "sage",
        "read_thread",
        thread_id=root["messageId"],
        after_message_id=first["messages"][1]["id"],
    )
    assert mid["messages"][0]["body"] == "2" and len(mid["messages"]) == 50
    _, end = world.tool("sage", "read_thread", thread_id=root["messageId"], cursor=mid["next"])
    assert [m["body"] for m in end["messages"]] == ["52"]


def test_a_thread_pages_by_64_kb(world: World) -> None:
    """2,000 three-byte characters a message: ten fit in 64 KB, the eleventh does not."""
    body = "€" * 2000
    root = world.send("scout", "big0", ["sage"], body)
    for i in range(1, 12):
        world.send("scout", f"big{i}", ["sage"], body, thread_id=root["messageId"])
    _, first = world.tool("sage", "read_thread", thread_id=root["messageId"])
    assert len(first["messages"]) == 10 and first["next"]
    _, second = world.tool("sage", "read_thread", thread_id=root["messageId"], cursor=first["next"])
    assert len(second["messages"]) == 2 and second["next"] is None
    ids = [m["id"] for m in first["messages"] + second["messages"]]
    assert len(set(ids)) == 12


def test_a_message_over_a_page_alone_comes_cut_and_next_goes_on(world: World) -> None:
    """A reader whose transport makes one 2,000-character message larger than 64 KB on its
    own (forty times over) gets it alone, cut to fit and marked, and `next` goes on to the
    following message, whole."""
    body = "".join(chr(ord("a") + n % 26) for n in range(2_000))
    root = world.send("scout", "w0", ["sage"], body)
    reply = world.send("scout", "w1", ["sage"], "short", thread_id=root["messageId"])
    sage = world.container.org.current()[0].seat("sage")
    assert sage is not None

    def forty_times(result: object) -> int:
        return 40 * json_bytes(result)

    ctx = ToolContext(world.container, world.app, sage, world.clock(), forty_times)
    first = call(ctx, "read_thread", {"thread_id": root["messageId"]})
    assert forty_times(first) <= PAGE_BYTES and first["next"]
    [cut] = first["messages"]
    assert cut["id"] == root["messageId"] and body.startswith(cut["body"])
    assert 0 < len(cut["body"]) < 2_000
    assert cut["truncated"] == {
        "reason": "item_over_page_bytes",
        "fields": ["body"],
        "originalChars": {"body": 2_000},
        "originalItems": {},
    }
    second = call(ctx, "read_thread", {"thread_id": root["messageId"], "cursor": first["next"]})
    assert [m["id"] for m in second["messages"]] == [reply["messageId"]]
    assert "truncated" not in second["messages"][0] and second["next"] is None
    whole = world.tool("sage", "read_thread", thread_id=root["messageId"])[1]
    assert [m["body"] for m in whole["messages"]] == [body, "short"]  # stored whole


@pytest.mark.parametrize(
    ("args", "status", "code", "field"),
    [
        ({"to": ["sage", "ghost"]}, 422, "unknown_recipient", "to"),
        ({"to": [f"s{i}" for i in range(21)]}, 422, "too_many_recipients", "to"),
        ({"to": []}, 422, "no_recipients", "to"),
        ({"to": ["project"]}, 403, "project_send_not_allowed", "to"),
        ({"to": ["scout"]}, 422, "only_yourself", "to"),
        ({"body": "x" * 2001}, 422, "body_too_long", "body"),
        ({"body": ""}, 422, "empty_body", "body"),
        ({"client_message_id": "has space"}, 422, "invalid_client_message_id", "client_message_id"),
        ({"client_message_id": "x" * 65}, 422, "invalid_client_message_id", "client_message_id"),
        ({"thread_id": "msg-nope"}, 404, "unknown_thread", "thread_id"),
        ({"to": "sage"}, 422, "invalid_arguments", "to"),
        ({"body": 5}, 422, "invalid_arguments", "body"),
    ],
)
def test_bad_sends_are_named_and_write_nothing(
    world: World, args: dict[str, Any], status: int, code: str, field: str
) -> None:
    full = {"to": ["sage"], "body": "hi", "client_message_id": "bad-1", **args}
    got_status, body = world.tool("scout", "send_message", **full)
    assert (got_status, body["error"], body["field"]) == (status, code, field), body
    assert world.inbox("sage") == []
    # nothing was recorded: the same id sends now, with no rate held against it
    assert (
        world.tool("scout", "send_message", to=["sage"], body="hi", client_message_id="bad-1")[0]
        == 200
    )
    if code == "unknown_recipient":
        assert body["unknown"] == ["ghost"]


def test_bad_reads_are_named(world: World) -> None:
    root = world.send("scout", "q", ["sage"], "question")
    other = world.send("scout", "q2", ["sage"], "another thread")
    cases = [
        ({"thread_id": "msg-nope"}, 404, "unknown_thread", "thread_id"),
        ({"after_message_id": "msg-nope"}, 404, "unknown_message", "after_message_id"),
        ({"after_message_id": other["messageId"]}, 404, "unknown_message", "after_message_id"),
        ({"cursor": "garbage"}, 422, "invalid_cursor", "cursor"),
        (
            {"cursor": "x", "after_message_id": root["messageId"]},
            422,
            "cursor_with_after_message_id",
            "after_message_id",
        ),
        ({"cursor": "x" * 1001}, 422, "invalid_arguments", "cursor"),
    ]
    for args, status, code, field in cases:
        got_status, body = world.tool(
            "sage", "read_thread", **{"thread_id": root["messageId"], **args}
        )
        assert (got_status, body["error"], body["field"]) == (status, code, field), body
    # a cursor of another thread is refused
    for i in range(51):
        world.send("tally", f"o{i}", ["sage"], "x", thread_id=other["messageId"])
    cursor = world.tool("sage", "read_thread", thread_id=other["messageId"])[1]["next"]
    assert cursor
    status, body = world.tool("sage", "read_thread", thread_id=root["messageId"], cursor=cursor)
    assert (status, body["field"]) == (422, "cursor")


def test_a_refusal_is_a_tool_error_through_call(world: World) -> None:
    """The registry's `call` raises ToolError (what MCP answers with isError)."""
    seat = world.container.org.current()[0].seat("scout")
    assert seat is not None
    ctx = ToolContext(world.container, world.app, seat, START)
    with pytest.raises(ToolError) as info:
        call(ctx, "send_message", {"to": ["ghost"], "body": "x", "client_message_id": "z"})
    assert info.value.status == 422 and info.value.field == "to"


def test_a_message_makes_the_controller_run_the_recipient_for_notices(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After every seat's first turn the seats idle; a message is a notice for its recipient
    only: the next tick runs sage with reason `notices`, and not the sender."""
    from contracts.controller import TurnMessage
    from workers.queues import Task
    from workers.stages import controller_tick
    from workers.stages.controller_tick import ControllerTick
    from workers.stages.turns import Turns

    published: list[tuple[str, dict[str, Any]]] = []

    def publish(
        _app: Celery, task: Task, _tracking: str, message: dict[str, Any], **_: Any
    ) -> None:
        published.append((task.value, message))

    monkeypatch.setattr(controller_tick, "publish_turns", per_turn(publish))
    c = world.container
    c.app = world.app

    def tick(at: int) -> list[dict[str, Any]]:
        ControllerTick(c, world.app, rng=lambda: 0.5)(now_ms=at)
        got = [m for t, m in published if t == Task.TURN.value]
        published.clear()
        return got

    first = tick(START)
    base = Turns.of(c, world.app)
    for m in first:
        Turns(c, world.app, base.launchers, clock_ms=lambda: START + 10, rng=lambda: 0.5).run(
            TurnMessage.model_validate(m)
        )
    assert tick(START + 1_000) == []
    world.send("scout", "nudge", ["sage"], "sage, your turn")
    (turn,) = tick(START + 2_000)
    assert turn["seatId"] == "sage"
    run = c.seat_runs.get("sage").run
    assert run.active is not None and run.active.reason == "notices"


def test_messages_are_kept_for_their_retention_and_a_thread_as_long_as_its_newest(
    world: World,
) -> None:
    """A message, its request record and its thread expire after the message retention (90
    days); a send after a thread's oldest message aged out drops its place, and a read skips
    a place whose message has gone in between."""
    day = 86_400_000
    retention = world.settings.message_retention_ms
    root = world.send("scout", "r0", ["sage"], "old")
    thread = f"sw:thread:{root['threadId']}"
    for key in (f"sw:msg:{root['messageId']}", thread, "sw:msgreq:scout:r0"):
        assert retention - 60_000 < world.container.redis.pttl(key) <= retention, key
    second = world.send("scout", "r1", ["sage"], "middle", thread_id=root["messageId"])
    world.clock.tick(retention + day)  # the first two aged out; the thread goes on
    world.container.redis.delete(f"sw:msg:{second['messageId']}")  # as its TTL would
    _, body = world.tool("sage", "read_thread", thread_id=root["threadId"])
    assert body["messages"] == [] or [m["body"] for m in body["messages"]] == ["old"]
    status, got = world.tool(
        "scout",
        "send_message",
        to=["sage"],
        body="new",
        client_message_id="r2",
        thread_id=root["messageId"],
    )
    assert status == 200, got
    members = [m.decode() for m in cast(list[bytes], world.container.redis.zrange(thread, 0, -1))]
    assert members == [got["messageId"]]  # the places older than the retention went
    _, body = world.tool("sage", "read_thread", thread_id=root["threadId"])
    assert [m["body"] for m in body["messages"]] == ["new"]
