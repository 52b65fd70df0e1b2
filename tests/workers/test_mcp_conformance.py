"""MCP conformance of the seats' tools (issue 13, "How it will be checked"), driven by the
official MCP SDK's own client on a real Redis: over streamable HTTP at `/mcp` (the ingress
served by uvicorn in a thread; both the default negotiation and the initialize handshake)
and over stdio (`seatwire mcp --seat scout` as a child process).

The org has a project repository and a `decisions:` policy whose resolver is scout, so that
every one of the 15 tools can succeed for scout, and scout and sage each have an ask on record,
for Seatwire's own two ask tools. One scenario, the same on every transport:

- `tools/list` is exactly contracts/tool_schemas.py: the fifteen project tools in order, then
  Seatwire's own, each inputSchema key for key, and every tool served (none "Not served yet");
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

The 64 KB pages of `get_updates` and `read_thread` are measured as the client receives them:
the HTTP body (both negotiations, and the plain HTTP routes) and the stdio line, each at most
65,536 bytes and full (one more item would be over), every item once, in order.
"""

from __future__ import annotations

import json
import os
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
from anyio.streams.buffered import BufferedByteReceiveStream
from celery import Celery
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from contracts import Candidate, Directedness
from contracts.tool_schemas import SERVED_INPUT_SCHEMAS, SERVED_TOOL_NAMES
from pipeline.work_items import WorkSummary
from tests.ask_records import make_ask
from tests.auth import bearer, seat_token
from tests.fakes import place
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
ASKS = ("ask-scout-k-1", "ask-sage-k-1")  # scout's open ask, and sage's (see `prepare`)


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
        assert [t.name for t in listed] == list(SERVED_TOOL_NAMES)
        for tool in listed:
            assert tool.input_schema == SERVED_INPUT_SCHEMAS[tool.name], tool.name
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

    async def asks(self) -> None:
        """Scout's own ask is listed and read whole; sage's is no ask of scout's."""
        mine, theirs = ASKS
        listed = await self.ok("list_asks")
        assert [a["id"] for a in listed["asks"]] == [mine] and listed["next"] is None
        assert listed["asks"][0]["state"] == "open" and "history" not in listed["asks"][0]
        assert [a["id"] for a in (await self.ok("list_asks", state="answered"))["asks"]] == []
        await self.bad("list_asks", "state", state="maybe")
        whole = await self.ok("get_ask", ask_id=mine)
        assert whole["ask"]["id"] == mine
        assert [e["event"] for e in whole["ask"]["history"]] == ["created", "sent"]
        other = await self.client.call_tool("get_ask", {"ask_id": theirs})
        assert other.is_error and body(other)["error"] == "unknown_ask"
        await self.bad("get_ask", "ask_id")

    async def __call__(self) -> None:
        await self.check_list()
        await self.project()
        await self.messages()
        await self.issues()
        await self.intents()
        await self.decisions()
        await self.asks()


def prepare(world: World) -> None:
    """What the scenario needs besides scout's own calls: issue #7 observed from GitHub
    (labelled bug), a message from sage in scout's inbox, and an open ask of each seat."""
    assert set(load()) == set(SERVED_TOOL_NAMES)  # the 15 and Seatwire's own, all served
    asks = world.container.asks
    for ask_id, seat, work in zip(ASKS, ("scout", "sage"), ("billing", "ledger"), strict=True):
        if asks.get(ask_id) is None:  # a second transport's run finds them made
            made = make_ask(asks, seat=seat, work_id=work, key=f"{seat}-k", now_ms=now_ms())
            assert made.id == ask_id
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
    served = set(SERVED_TOOL_NAMES)
    assert check.called == served, served - check.called
    assert check.refused == served - NO_BAD_INPUT, served - check.refused
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


# ---------------------------------------------------------------- get_updates pages as received

CAP = 65_536  # what get_updates promises a page is at most, as the client receives it
ITEMS = 25
# ASCII (every encoding the same size) and equal: a page holds 8 over MCP (each item's JSON
# twice), 17 over HTTP, and is then within one item of the cap.
BODY = 3_000

Received = tuple[int, dict[str, Any]]  # a page's bytes as received, and the page
CLIENT = {"name": "seatwire-tests", "version": "1"}  # the clientInfo the stdio test sends


def bear(world: World) -> dict[str, str]:
    return bearer(world.tokens["scout"])


def fill_inbox(world: World, count: int = ITEMS, filler: str = "x" * (BODY - 16)) -> None:
    """`count` project announcements in scout's inbox, positions 1..count, each its number
    and `filler` (BODY ASCII characters in all unless told otherwise)."""
    for n in range(count):
        text = f"announcement {n:02d} " + filler
        world.container.project.notify(
            "announcement", ["scout"], by="ava", now_ms=now_ms() + n, body=text
        )


async def page_through(get: Callable[[int | None], Awaitable[Received]]) -> list[Received]:
    """get_updates, then get_updates acknowledging the page's `position`, until a page is
    empty: every page, as received."""
    pages = [await get(None)]
    while pages[-1][1]["items"]:
        pages.append(await get(pages[-1][1]["position"]))
    return pages


def check_pages(pages: list[Received], count: int = ITEMS) -> None:
    """Every page is at most CAP bytes as received; every item comes exactly once, in order,
    each page starting after the position the previous one gave (acknowledged); `hasMore`
    until the last; and every page but the last is full: one more item would be over CAP."""
    print(f"get_updates page bytes as received: {[size for size, _ in pages]}")
    assert all(size <= CAP for size, _ in pages), [size for size, _ in pages]
    assert len(pages) >= 3 and pages[-1][1]["items"] == [] and not pages[-1][1]["hasMore"]
    seen: list[int] = []
    after = 0
    for _size, page in pages[:-1]:
        positions = [item["position"] for item in page["items"]]
        assert positions == list(range(after + 1, after + 1 + len(positions)))
        assert page["position"] == positions[-1] and page["acknowledged"] == after
        seen += positions
        after = page["position"]
    assert seen == list(range(1, count + 1))
    assert [p["hasMore"] for _, p in pages[:-1]] == [True] * (len(pages) - 2) + [False]
    *full, (last_size, last) = pages[:-1]
    for size, page in full:
        added = len(page["items"]) - len(last["items"])
        assert added > 0, "the last page is the short one"
        per_item = (size - last_size) / added  # what one more item adds to the page
        assert size + per_item > CAP, (size, per_item)


async def mcp_pages(client: Client) -> list[Received]:
    async def get(ack: int | None) -> Received:
        result = await client.call_tool("get_updates", {} if ack is None else {"ack": ack})
        assert not result.is_error
        return 0, body(result)

    return await page_through(get)


def http_pages(world: World, mode: str) -> list[Received]:
    """scout's get_updates pages through the SDK's client at `/mcp` (negotiating as `mode`),
    each with its HTTP body's bytes: the whole JSON-RPC response as received."""
    sizes: list[int] = []

    async def record(response: httpx2.Response) -> None:
        await response.aread()
        sent = json.loads(response.request.content or b"{}")
        if isinstance(sent, dict) and sent.get("method") == "tools/call":
            sizes.append(len(response.content))

    pages: list[Received] = []

    async def main(url: str) -> None:
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(
                    headers=bear(world), timeout=10, event_hooks={"response": [record]}
                ) as http,
                Client(streamable_http_client(url, http_client=http), mode=mode) as client,
            ):
                pages.extend(await mcp_pages(client))

    with serving(world) as base:
        anyio.run(main, f"{base}/mcp")
    assert len(sizes) == len(pages)
    return [(size, page) for size, (_, page) in zip(sizes, pages, strict=True)]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_get_updates_pages_fit_64_kib_as_received_over_streamable_http(
    world: World, mode: str
) -> None:
    """The SDK's client at `/mcp` (both negotiations): each get_updates page's HTTP body,
    the whole JSON-RPC response, is at most 64 KiB and as full as that allows; no item is
    lost or repeated across the pages."""
    fill_inbox(world)
    check_pages(http_pages(world, mode))


def test_get_updates_pages_count_escaped_characters_on_the_2026_path(world: World) -> None:
    """Non-ASCII text, which the SDK's 2026-07-28 path sends as six-byte escapes (three
    times its UTF-8), still makes pages of at most 64 KiB as received, and full ones."""
    fill_inbox(world, count=23, filler="é" * 1_000)  # 4 a page, the last 3
    pages = http_pages(world, "auto")
    assert pages[0][1]["items"][0]["candidate"]["msg"]["body"].endswith("é")
    check_pages(pages, count=23)


def test_get_updates_pages_fit_64_kib_as_received_over_stdio(world: World, tmp_path: Path) -> None:
    """`seatwire mcp --seat scout` on its pipes, spoken to line by line: each get_updates
    answer, the whole JSON-RPC line on stdout, is at most 64 KiB and as full as that allows;
    no item is lost or repeated across the pages."""
    fill_inbox(world)
    check_pages(stdio_pages(world, tmp_path))


def stdio_pages(world: World, tmp_path: Path) -> list[Received]:
    """scout's get_updates pages from `seatwire mcp --seat scout`, spoken to line by line,
    each with the bytes of its JSON-RPC line on stdout (and its newline)."""
    env = {
        **os.environ,
        "SEATWIRE_REDIS_URL": str(world.settings.redis_url),
        "SEATWIRE_API_TOKEN": TOKEN,
        "SEATWIRE_ORG_FILE": str(world.settings.org_file),
        "SEATWIRE_OUTBOX_PATH": str(tmp_path / "o.jsonl"),
    }

    async def main() -> list[Received]:
        with anyio.fail_after(60):
            process = await anyio.open_process(
                [str(SEATWIRE), "mcp", "--seat", "scout"], env=env, cwd=tmp_path, stderr=None
            )
            try:
                assert process.stdin is not None and process.stdout is not None
                stdin, stdout = process.stdin, BufferedByteReceiveStream(process.stdout)
                ids = iter(range(1, 1000))

                async def send(message: dict[str, Any]) -> None:
                    await stdin.send(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

                async def ask(method: str, params: dict[str, Any]) -> tuple[int, Any]:
                    asked = next(ids)
                    await send({"id": asked, "method": method, "params": params})
                    line = await stdout.receive_until(b"\n", 4 * CAP)
                    answer = json.loads(line)
                    assert answer["id"] == asked and "result" in answer, answer
                    return len(line) + 1, answer["result"]  # the line and its newline

                version = "2025-11-25"
                hello = {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT}
                assert (await ask("initialize", hello))[1]["protocolVersion"] == version
                await send({"method": "notifications/initialized"})

                async def get(ack: int | None) -> Received:
                    arguments = {} if ack is None else {"ack": ack}
                    size, result = await ask(
                        "tools/call", {"name": "get_updates", "arguments": arguments}
                    )
                    assert not result.get("isError")
                    [text] = result["content"]
                    assert json.loads(text["text"]) == result["structuredContent"]
                    return size, result["structuredContent"]

                pages = await page_through(get)
                await stdin.aclose()
                await process.wait()
                return pages
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()

    return anyio.run(main)


@pytest.mark.parametrize("route", ["tool", "updates"])
def test_get_updates_pages_fit_64_kib_as_received_over_http_routes(
    world: World, route: str
) -> None:
    """`POST /v1/seats/scout/tools/get_updates` and `GET .../updates` with `POST
    .../updates/ack`: each page's body is at most 64 KiB and as full as that allows; no item
    is lost or repeated across the pages."""
    fill_inbox(world)
    check_pages(route_pages(world, route))


def route_pages(world: World, route: str) -> list[Received]:
    """scout's get_updates pages through `POST .../tools/get_updates` (`route` "tool") or
    `GET .../updates` and `POST .../updates/ack` ("updates"), each with its body's bytes."""
    headers = bear(world)

    async def main(base: str) -> list[Received]:
        seat = f"{base}/v1/seats/scout"
        async with httpx2.AsyncClient(headers=headers, timeout=10) as http:

            async def get(ack: int | None) -> Received:
                if route == "tool":
                    arguments = {} if ack is None else {"ack": ack}
                    resp = await http.post(f"{seat}/tools/get_updates", json=arguments)
                elif ack is None:
                    resp = await http.get(f"{seat}/updates")
                else:
                    resp = await http.post(f"{seat}/updates/ack", json={"position": ack})
                assert resp.status_code == 200, resp.text
                return len(resp.content), resp.json()

            return await page_through(get)

    with serving(world) as base:
        return anyio.run(main, base)


# ---------------------------------------------------------------- an item over a page alone

LARGE = 100_000  # characters: the most a Slack message's body may hold (MessagePart)
MENTIONED = Directedness(directed=True, surface="mention", reason="mention", why="mentioned")


def fill_with_large(world: World, large: str) -> None:
    """scout's inbox: a short announcement (position 1), a Slack message whose body is
    `large` (2), and another short announcement (3)."""
    project = world.container.project
    project.notify("announcement", ["scout"], by="ava", now_ms=now_ms(), body="before")
    slack = Candidate.model_validate(
        {
            "family": "messaging",
            "source": "slack",
            "deliveryId": "Ev0LARGE",
            "ids": {"channelId": "C1", "messageId": "1700000000.000100"},
            "msg": {"authorId": "U0AVA", "body": large, "mentions": ["U0SCOUT"]},
            "atMs": now_ms(),
        }
    )
    place(world.container.redis, "scout", slack, MENTIONED)
    project.notify("announcement", ["scout"], by="ava", now_ms=now_ms() + 1, body="after")


def check_large(pages: list[Received], large: str) -> None:
    """Every page at most CAP bytes as received; the large item comes alone on its own page,
    at its position, cut to its body's start and marked; the pages around it come whole, and
    the page after it continues at the next position."""
    print(f"get_updates page bytes as received: {[size for size, _ in pages]}")
    assert all(size <= CAP for size, _ in pages), [size for size, _ in pages]
    got = [[item["position"] for item in page["items"]] for _, page in pages]
    assert got == [[1], [2], [3], []], got
    marks = [(p["acknowledged"], p["position"]) for _, p in pages]
    assert marks == [(0, 1), (1, 2), (2, 3), (3, 3)], marks
    assert [p["hasMore"] for _, p in pages] == [True, True, False, False]
    [cut] = pages[1][1]["items"]
    kept = cut["candidate"]["msg"]["body"]
    assert cut["deliveryId"] == "Ev0LARGE" and large.startswith(kept) and len(kept) > 4_000
    assert cut["truncated"] == {
        "reason": "item_over_page_bytes",
        "fields": ["candidate.msg.body"],
        "originalChars": {"candidate.msg.body": LARGE},
        "originalItems": {},
    }
    assert cut["candidate"]["ids"] == {
        "channelId": "C1",
        "messageId": "1700000000.000100",
        "threadRootId": None,
        "issueId": None,
        "callId": None,
        "eventId": None,
    }
    for index in (0, 2):
        assert "truncated" not in pages[index][1]["items"][0]


@pytest.mark.parametrize(
    ("mode", "large"),
    [("auto", "x" * LARGE), ("legacy", "x" * LARGE), ("auto", "é" * LARGE)],
    ids=["auto-ascii", "legacy-ascii", "auto-escaped"],
)
def test_get_updates_item_over_a_page_alone_fits_64_kib_cut_over_streamable_http(
    world: World, mode: str, large: str
) -> None:
    """The SDK's client at `/mcp` (both negotiations; non-ASCII escaped on the 2026-07-28
    path): a Slack message of 100,000 characters comes on a page of at most 64 KiB as
    received, alone, cut and marked `truncated`, and the next page continues after it."""
    fill_with_large(world, large)
    check_large(http_pages(world, mode), large)


@pytest.mark.parametrize("route", ["tool", "updates"])
def test_get_updates_item_over_a_page_alone_fits_64_kib_cut_over_http_routes(
    world: World, route: str
) -> None:
    """`POST /v1/seats/scout/tools/get_updates`, and `GET .../updates` with `POST
    .../updates/ack`: a Slack message of 100,000 characters comes on a body of at most 64 KiB,
    alone, cut and marked `truncated`, and the next page continues after it."""
    large = "ab€" * (LARGE // 3) + "z"
    fill_with_large(world, large)
    check_large(route_pages(world, route), large)


def test_get_updates_item_over_a_page_alone_fits_64_kib_cut_over_stdio(
    world: World, tmp_path: Path
) -> None:
    """`seatwire mcp --seat scout` on its pipes: a Slack message of 100,000 characters comes
    on a JSON-RPC line of at most 64 KiB, alone, cut and marked `truncated`, and the next
    page continues after it."""
    large = "x" * LARGE
    fill_with_large(world, large)
    check_large(stdio_pages(world, tmp_path), large)


# ---------------------------------------------------------------- read_thread pages as received

THREAD = 31  # messages of 2,000 ASCII characters: 14 a page over MCP


def fill_thread(world: World) -> list[str]:
    """One thread of THREAD messages from sage to scout, sent 5 s apart on the tool's own
    clock (sage's send rate allows no faster): their ids, oldest first."""
    sage = world.container.org.current()[0].seat("sage")
    assert sage is not None
    start, ids = now_ms(), list[str]()
    for n in range(THREAD):
        ctx = ToolContext(world.container, world.app, sage, start + 5_000 * n)
        args: dict[str, Any] = {
            "to": ["scout"],
            "body": f"message {n:02d} " + "x" * 1_989,
            "client_message_id": f"t{n}",
        }
        if ids:
            args["thread_id"] = ids[0]
        ids.append(call(ctx, "send_message", args)["messageId"])
    return ids


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_read_thread_pages_fit_64_kib_as_received_over_streamable_http(
    world: World, mode: str
) -> None:
    """The SDK's client at `/mcp` reads a thread page by page with `next`: each HTTP body is
    at most 64 KiB and as full as that allows (one more message would be over), and every
    message comes once, in order."""
    ids = fill_thread(world)
    sizes: list[int] = []

    async def record(response: httpx2.Response) -> None:
        await response.aread()
        sent = json.loads(response.request.content or b"{}")
        if isinstance(sent, dict) and sent.get("method") == "tools/call":
            sizes.append(len(response.content))

    pages: list[dict[str, Any]] = []

    async def main(url: str) -> None:
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(
                    headers=bear(world), timeout=10, event_hooks={"response": [record]}
                ) as http,
                Client(streamable_http_client(url, http_client=http), mode=mode) as client,
            ):
                args: dict[str, Any] = {"thread_id": ids[-1]}
                while True:
                    result = await client.call_tool("read_thread", args)
                    assert not result.is_error
                    pages.append(body(result))
                    if pages[-1]["next"] is None:
                        return
                    args = {"thread_id": ids[-1], "cursor": pages[-1]["next"]}

    with serving(world) as base:
        anyio.run(main, f"{base}/mcp")
    print(f"read_thread page bytes as received: {sizes}")
    assert len(sizes) == len(pages) >= 3 and all(size <= CAP for size in sizes), sizes
    assert [m["id"] for page in pages for m in page["messages"]] == ids
    counts = [len(page["messages"]) for page in pages]
    for size, count in zip(sizes[:-1], counts[:-1], strict=True):
        per_message = (size - sizes[-1]) / (count - counts[-1])
        assert count > counts[-1] and size + per_message > CAP, (size, per_message)
