"""MCP conformance of the seats' tools (issue 13, "How it will be checked"), driven by the
official MCP SDK's own client on a real Redis: over streamable HTTP at `/mcp` (the ingress
served by uvicorn in a thread; both the default negotiation and the initialize handshake)
and over stdio (`seatwire mcp --seat scout` as a child process).

The org has a project repository and a `decisions:` policy whose resolver is scout, so that
every one of the 15 tools can succeed for scout. One scenario, the same on every transport:

- `tools/list` is exactly contracts/tool_schemas.py: the names in order, each inputSchema
  key for key, and every tool served (none "Not served yet");
- every tool is called with valid input and succeeds, with what it answers checked;
- every tool that has an input its schema refuses is called with one: an `isError` result
  naming the field (get_project's schema accepts any object: it has none);
- the idempotent tools (send_message, coordinate_issue, record_work_intent, open_decision,
  vote, decide_direction) are replayed: the replay answers the original receipt (marked
  `replayed` where the tool says so), and writes nothing more; and every replay again
  through a restarted server (a new ingress, a new `seatwire mcp` process).

What another seat does (sage's message to scout, sage's vote) and what a person does (the
owner ava ends voting early, as `POST /v1/decisions/{id}/end` does) go through the same
operations in-process, on the same Redis.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import redis
import uvicorn
from celery import Celery
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from contracts.tool_schemas import INPUT_SCHEMAS, TOOL_NAMES
from pipeline.work_items import WorkSummary
from tests.auth import bearer, seat_token
from workers import bootstrap
from workers.celery_app import create_app
from workers.clock import now_ms
from workers.container import Container
from workers.ingress.app import create_ingress
from workers.settings import Settings
from workers.stages.directions import end_voting
from workers.tools import REGISTRY, ToolContext, call, load

pytestmark = pytest.mark.redis

TOKEN = "test-token"
ORG = """
project:
  name: Atlas
  mission: Ship the billing rewrite
  rules: [review every PR]
  repository: acme/atlas
members:
  - {id: ava, displayName: Ava}
  - {id: scout, displayName: Scout}
  - {id: sage, displayName: Sage}
seats:
  - {memberId: scout, operatorId: ava}
  - {memberId: sage, operatorId: ava}
decisions: {ownerId: ava, minCountdownSeconds: 60, maxCountdownSeconds: 86400, resolverId: scout}
"""
SEATWIRE = Path(sys.executable).with_name("seatwire")
IDEMPOTENT = {
    "send_message",
    "coordinate_issue",
    "record_work_intent",
    "open_decision",
    "vote",
    "decide_direction",
}
NO_BAD_INPUT = {"get_project"}  # its schema, {"type": "object", "properties": {}}, takes any


# ---------------------------------------------------------------- the world


@dataclass
class World:
    settings: Settings
    container: Container
    app: Celery
    tokens: dict[str, str]

    def as_peer(self, seat: str, name: str, **args: Any) -> dict[str, Any]:
        """A tool called in-process as another seat (the same operation the servers run)."""
        known = self.container.org.current()[0].seat(seat)
        assert known is not None
        return call(ToolContext(self.container, self.app, known, now_ms()), name, args)


@pytest.fixture
def world(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> World:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url, api_token=TOKEN, org_file=org, outbox_path=tmp_path / "o.jsonl"
    )
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    tokens = {seat: seat_token(redis_client, seat) for seat in ("scout", "sage")}
    return World(settings, container, app, tokens)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(world: World, *, restarted: bool = False) -> Iterator[str]:
    """The ingress of `world`, served by uvicorn in a thread on a free port: its base URL.
    `restarted`: an ingress of its own container and app, as a restarted process has."""
    container, app = world.container, world.app
    if restarted:
        app = create_app(world.settings, register=False)
        container = bootstrap.build_container(world.settings, app=app)
    api = create_ingress(container, app)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(api, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a bound: a loaded machine starts it slowly
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the ingress did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)


@asynccontextmanager
async def http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[TransportStreams]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=10) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def run(scenario: Callable[[Client], Awaitable[None]], client: Client) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with client:
                await scenario(client)

    anyio.run(main)


# ---------------------------------------------------------------- the scenario


def body(result: Any) -> dict[str, Any]:
    """A tool result's JSON text, which is also its structured content."""
    [content] = result.content
    parsed: dict[str, Any] = json.loads(content.text)
    assert result.structured_content == parsed
    return parsed


def without_replayed(receipt: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in receipt.items() if k != "replayed"}


@dataclass
class Conformance:
    """One scenario's calls through the SDK client, and what each kind covered."""

    client: Client
    world: World
    called: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)
    replayed: set[str] = field(default_factory=set)
    receipts: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    direction: tuple[str, int] = ("", 0)  # the direction's id and its final revision

    async def ok(self, name: str, **args: Any) -> dict[str, Any]:
        result = await self.client.call_tool(name, args)
        got = body(result)
        assert not result.is_error, (name, got)
        self.called.add(name)
        return got

    async def bad(self, name: str, field_name: str, **args: Any) -> dict[str, Any]:
        """A call the tool must refuse as an `isError` result naming `field_name`."""
        result = await self.client.call_tool(name, args)
        got = body(result)
        assert result.is_error, (name, got)
        assert got["field"] == field_name and field_name in got["message"], (name, got)
        self.refused.add(name)
        return got

    async def replay(self, name: str, first: dict[str, Any], **args: Any) -> None:
        """The same call again: the original receipt (with `replayed: true` when the tool
        marks it)."""
        again = await self.ok(name, **args)
        assert without_replayed(again) == without_replayed(first), (name, again, first)
        if "replayed" in first:
            assert first["replayed"] is False and again["replayed"] is True, (name, again)
        self.replayed.add(name)
        self.receipts.append((name, args, first))

    async def check_list(self) -> None:
        listed = (await self.client.list_tools()).tools
        assert [t.name for t in listed] == list(TOOL_NAMES)
        for tool in listed:
            assert tool.input_schema == INPUT_SCHEMAS[tool.name], tool.name
            assert tool.description == REGISTRY[tool.name].description, tool.name

    async def project(self) -> None:
        card = await self.ok("get_project")
        assert card["project"]["name"] == "Atlas"
        assert card["project"]["repository"] == "acme/atlas"
        assert card["you"] == {"id": "scout", "name": "Scout", "operatorId": "ava"}
        assert card["agentCount"] == 2

        work = await self.ok("find_work", label="bug")
        assert [i["number"] for i in work["items"]] == [7] and work["coverage"]["partial"]
        await self.bad("find_work", "kind", kind="epic")

        agents = await self.ok("find_agents", name_prefix="S")
        assert [a["id"] for a in agents["agents"]] == ["sage", "scout"]
        assert all(a["sameOperator"] for a in agents["agents"])
        await self.bad("find_agents", "name_prefix", name_prefix=5)

    async def messages(self) -> None:
        inbox = await self.ok("get_updates")
        (item,) = inbox["items"]
        asked = item["deliveryId"]
        assert item["candidate"]["msg"]["authorId"] == "sage"
        assert (await self.ok("get_updates", ack=inbox["position"]))["items"] == []
        await self.bad("get_updates", "ack", ack=-1)

        send = {"to": ["sage"], "body": "Yes: it ships today.", "thread_id": asked}
        sent = await self.ok("send_message", client_message_id="reply-1", **send)
        assert sent["to"] == ["sage"] and sent["threadId"] == asked
        await self.replay("send_message", sent, client_message_id="reply-1", **send)
        conflict = await self.bad(
            "send_message",
            "client_message_id",
            client_message_id="reply-1",
            **{**send, "body": "No."},
        )
        assert conflict["error"] == "client_message_id_conflict"
        await self.bad("send_message", "body", to=["sage"], client_message_id="reply-2")
        replies = self.world.as_peer("sage", "get_updates")["items"]
        assert [i["deliveryId"] for i in replies] == [sent["messageId"]]  # once, not twice

        thread = await self.ok("read_thread", thread_id=sent["messageId"])
        assert [m["id"] for m in thread["messages"]] == [asked, sent["messageId"]]
        after = await self.ok("read_thread", thread_id=asked, after_message_id=asked)
        assert [m["id"] for m in after["messages"]] == [sent["messageId"]]
        await self.bad("read_thread", "thread_id", cursor="x")

    async def issues(self) -> None:
        before = await self.ok("get_issue_coordination", issue_number=7)
        assert before["owner"] is None and before["repository"] == "acme/atlas"
        assert before["githubObservation"] != "not_observed"
        await self.bad("get_issue_coordination", "issue_number", issue_number=0)

        claim = {"issue_number": 7, "action": "claim", "client_request_id": "claim-7"}
        claimed = await self.ok("coordinate_issue", **claim)
        await self.replay("coordinate_issue", claimed, **claim)
        now = await self.ok("get_issue_coordination", issue_number=7)
        assert now["owner"]["id"] == "scout" and now["generation"] > before["generation"]
        report = {
            "issue_number": 7,
            "action": "report",
            "client_request_id": "report-7",
            "expected_generation": now["generation"],
            "work_state": "working",
        }
        reported = await self.ok("coordinate_issue", **report)
        await self.replay("coordinate_issue", reported, **report)
        await self.bad("coordinate_issue", "action", **{**claim, "action": "steal"})
        old = {**report, "client_request_id": "report-old"}
        old["expected_generation"] = before["generation"]
        stale = await self.bad("coordinate_issue", "expected_generation", **old)
        assert (stale["error"], stale["generation"]) == ("stale_generation", now["generation"])
        after = await self.ok("get_issue_coordination", issue_number=7)
        assert after["workState"]["state"] == "working"
        assert after["generation"] == now["generation"]

    async def intents(self) -> None:
        write = {
            "intent_id": "billing",
            "client_request_id": "i-1",
            "expected_revision": 0,
            "state": "waiting",
            "next_step": "open the pull request once CI is green",
            "issue_number": 7,
        }
        made = await self.ok("record_work_intent", **write)
        assert made["intent"]["revision"] == 1 and made["created"] is True
        await self.replay("record_work_intent", made, **write)
        await self.bad(
            "record_work_intent", "priority", **{**write, "client_request_id": "i-2"}, priority=1
        )
        stale = await self.bad(
            "record_work_intent",
            "expected_revision",
            **{**write, "client_request_id": "i-3", "next_step": "another step"},
        )
        assert stale["currentRevision"] == 1
        listed = await self.ok("list_work_intents")
        assert [(i["intentId"], i["revision"]) for i in listed["intents"]] == [("billing", 1)]
        await self.bad("list_work_intents", "include_completed", include_completed="yes")

    async def decisions(self) -> None:
        opening = {
            "client_request_id": "d-1",
            "title": "Move billing to v2",
            "body": "Adopt the v2 billing API before the release.",
            "countdown_seconds": 600,
            "affected_issues": [7],
        }
        opened = await self.ok("open_decision", **opening)
        did = opened["directionId"]
        await self.replay("open_decision", opened, **opening)
        await self.bad(
            "open_decision", "options", **{**opening, "client_request_id": "d-2"}, options=[0, 1]
        )
        notices = [
            i
            for i in self.world.as_peer("sage", "get_updates")["items"]
            if i["deliveryId"] == f"direction:{did}"
        ]
        assert len(notices) == 1  # the replay notified nobody again

        ballot = {"direction_id": did, "client_request_id": "v-1", "expected_revision": 0}
        voted = await self.ok("vote", option=0, **ballot)
        assert voted["vote"]["weight"] == 1
        await self.replay("vote", voted, option=0, **ballot)
        await self.bad("vote", "option", **{**ballot, "client_request_id": "v-2"}, option=2)
        self.world.as_peer(
            "sage", "vote", direction_id=did, client_request_id="s-1", expected_revision=0, option=1
        )

        seen = await self.ok("get_decision", direction_id=did)
        assert seen["voteCount"] == 2 and seen["yourVote"]["option"] == 0
        assert seen["direction"]["policy"]["resolverId"] == "scout"
        await self.bad("get_decision", "direction_id", direction_id="XYZ")

        listed = await self.ok("list_decisions")
        assert [d["id"] for d in listed["directions"]] == [did]
        await self.bad("list_decisions", "cursor", cursor=5)

        # the owner (a person) ends voting early: 1 to 1, a tie for the resolver (scout)
        end_voting(
            self.world.container,
            did,
            by="ava",
            client_request_id="end-1",
            reason="both sides heard",
            now_ms=now_ms(),
        )
        tied = (await self.ok("get_decision", direction_id=did))["direction"]
        assert tied["state"] == "tied" and tied["votingOpen"] is False
        decide = {
            "direction_id": did,
            "client_request_id": "t-1",
            "expected_revision": tied["revision"],
            "action": "resolve_tie",
            "option": 0,
            "reason": "the migration risk is low",
        }
        decided = await self.ok("decide_direction", **decide)
        assert decided["result"]["state"] == "decided" and decided["result"]["winner"] == 0
        await self.replay("decide_direction", decided, **decide)
        await self.bad(
            "decide_direction", "action", **{**decide, "client_request_id": "t-2", "action": "veto"}
        )
        final = (await self.ok("get_decision", direction_id=did))["direction"]
        assert final["state"] == "decided" and final["revision"] == tied["revision"] + 1
        self.direction = (did, final["revision"])

    async def __call__(self) -> None:
        await self.check_list()
        await self.project()
        await self.messages()
        await self.issues()
        await self.intents()
        await self.decisions()


def prepare(world: World) -> None:
    """What the scenario needs besides scout's own calls: issue #7 observed from GitHub
    (labelled bug), and a message from sage in scout's inbox."""
    assert set(load()) == set(TOOL_NAMES)  # all 15 served
    world.container.work.observe(
        WorkSummary(
            kind="issue",
            number=7,
            state="open",
            title="Fix the billing export",
            source_updated_at_ms=now_ms() - 60_000,
            observed_at_ms=now_ms(),
            labels=("bug",),
        )
    )
    world.as_peer(
        "sage", "send_message", to=["scout"], body="Ships today?", client_message_id="ask-1"
    )


def conform(world: World, client: Client) -> Conformance:
    prepare(world)
    holder: list[Conformance] = []

    async def scenario(c: Client) -> None:
        check = Conformance(c, world)
        holder.append(check)
        await check()

    run(scenario, client)
    (check,) = holder
    assert check.called == set(TOOL_NAMES), set(TOOL_NAMES) - check.called
    assert check.refused == set(TOOL_NAMES) - NO_BAD_INPUT, set(TOOL_NAMES) - check.refused
    assert check.replayed == IDEMPOTENT
    return check


def replay_after_restart(world: World, check: Conformance, client: Client) -> None:
    """Every replay of the scenario again, through a new server (a restarted ingress, or a
    new `seatwire mcp` process): each answers its original receipt, and nothing more is
    written (sage's inbox, the intent's revision, the direction's revision)."""
    sage_items = world.as_peer("sage", "get_updates")["items"]

    async def scenario(c: Client) -> None:
        again = Conformance(c, world)
        for name, args, first in check.receipts:
            await again.replay(name, first, **args)
        assert again.replayed == IDEMPOTENT
        listed = await again.ok("list_work_intents")
        assert [(i["intentId"], i["revision"]) for i in listed["intents"]] == [("billing", 1)]
        did, revision = check.direction
        seen = await again.ok("get_decision", direction_id=did)
        assert seen["direction"]["revision"] == revision

    run(scenario, client)
    assert world.as_peer("sage", "get_updates")["items"] == sage_items


# ---------------------------------------------------------------- the transports


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_every_tool_over_streamable_http(world: World, mode: str) -> None:
    """The SDK's client at `/mcp`, with scout's own token (and the optional seat header),
    as it negotiates by default and with the initialize handshake; then every replay again
    through a restarted ingress."""
    headers = {**bearer(world.tokens["scout"]), "X-Seatwire-Seat": "scout"}
    with serving(world) as base:
        check = conform(world, Client(http_transport(f"{base}/mcp", headers), mode=mode))
    with serving(world, restarted=True) as base:
        client = Client(http_transport(f"{base}/mcp", headers), mode=mode)
        replay_after_restart(world, check, client)


@pytest.mark.e2e
def test_every_tool_over_stdio(world: World, tmp_path: Path) -> None:
    """`seatwire mcp --seat scout` as a child process, the SDK's stdio client on its pipes;
    then every replay again through a second `seatwire mcp` process."""
    params = StdioServerParameters(
        command=str(SEATWIRE),
        args=["mcp", "--seat", "scout"],
        env={
            "SEATWIRE_REDIS_URL": world.settings.redis_url,
            "SEATWIRE_API_TOKEN": TOKEN,
            "SEATWIRE_ORG_FILE": str(world.settings.org_file),
            "SEATWIRE_OUTBOX_PATH": str(tmp_path / "o.jsonl"),
        },
        cwd=tmp_path,
    )
    check = conform(world, Client(params))
    replay_after_restart(world, check, Client(params))
