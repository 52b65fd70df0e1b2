"""The tools as an MCP server (issue 13), driven by the official MCP SDK's own client on a real
Redis: over streamable HTTP at `/mcp` on the ingress (uvicorn in a thread) and over stdio
(`seatwire mcp --seat scout` as a child process). `tools/list` is exactly the fifteen project
tools and schemas, then Seatwire's own two ask tools; a call works, a bad argument and a tool
not served yet are `isError` results, a name that is no tool the JSON-RPC error -32602; the
endpoint refuses a missing token (401), a missing seat (401) and an unknown one (404), any
method but POST (405, `Allow: POST`), and an `MCP-Protocol-Version` it does not speak (400,
naming it and the ones it does)."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx
import httpx2
import pytest
import redis
import uvicorn
from fastapi import FastAPI
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from contracts import Seat
from contracts.tool_schemas import (
    EXECUTION,
    EXTRA_TOOL_NAMES,
    INPUT_SCHEMAS,
    SERVED_INPUT_SCHEMAS,
    SERVED_TOOL_NAMES,
    TOOL_NAMES,
)
from tests.auth import bearer, seat_token
from workers import bootstrap
from workers.celery_app import create_app
from workers.ingress.app import create_ingress
from workers.ingress.mcp import build_server
from workers.settings import Settings
from workers.tools import REGISTRY, load

pytestmark = pytest.mark.redis

TOKEN = "test-token"
ORG = """
project:
  {name: Atlas, mission: Ship the billing rewrite, rules: [review every PR], repository: acme/atlas}
members:
  - {id: ava, displayName: Ava}
  - {id: scout, displayName: Scout}
  - {id: sage, displayName: Sage}
seats:
  - {memberId: scout, operatorId: ava}
  - {memberId: sage, operatorId: ava}
"""
SEATWIRE = Path(sys.executable).with_name("seatwire")
# Bounds, not expectations: on a loaded 2-core machine `seatwire mcp` spends over 30 s just
# importing before it answers, and an in-thread server or a scenario takes seconds more.
STARTUP_S = 60
SCENARIO_S = 60
PROCESS_S = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def org_file(tmp_path: Path) -> Path:
    path = tmp_path / "org.yaml"
    path.write_text(ORG)
    return path


@pytest.fixture
def api(redis_client: redis.Redis, redis_url: str, org_file: Path, tmp_path: Path) -> FastAPI:
    settings = Settings(
        redis_url=redis_url, api_token=TOKEN, org_file=org_file, outbox_path=tmp_path / "o.jsonl"
    )
    app = create_app(settings, register=False)
    SEAT_TOKENS.clear()
    SEAT_TOKENS.update({seat: seat_token(redis_client, seat) for seat in ("scout", "sage")})
    return create_ingress(bootstrap.build_container(settings, app=app), app)


@contextmanager
def serving(api: FastAPI, lifespan: Literal["on", "off"] = "on") -> Iterator[str]:
    """The ingress, served by uvicorn in a thread on a free port: its base URL."""
    port = free_port()
    config = uvicorn.Config(
        api, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_S
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the ingress did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)


@pytest.fixture
def base_url(api: FastAPI) -> Iterator[str]:
    with serving(api) as url:
        yield url


@asynccontextmanager
async def http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[TransportStreams]:
    """The SDK's streamable HTTP transport on an HTTP client with these headers (closed after:
    the transport leaves a client it was given open)."""
    async with (
        httpx2.AsyncClient(headers=headers, timeout=10) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def over_http(url: str, headers: dict[str, str], mode: str = "auto") -> Client:
    return Client(http_transport(url, headers), mode=mode)


SEAT_TOKENS: dict[str, str] = {}  # member id -> its token, issued by the `api` fixture


def as_seat(seat: str = "scout") -> dict[str, str]:
    """The seat's own token, and the (optional) seat header naming the same seat."""
    return {**bearer(SEAT_TOKENS[seat.lower()]), "X-Seatwire-Seat": seat}


def run(
    scenario: Callable[[Client], Awaitable[None]], client: Client, within_s: float = SCENARIO_S
) -> None:
    async def main() -> None:
        with anyio.fail_after(within_s, reason=f"the MCP scenario did not end within {within_s} s"):
            async with client:
                await scenario(client)

    anyio.run(main)


def body(result: Any) -> dict[str, Any]:
    """A tool result's JSON text, which is also its structured content."""
    [content] = result.content
    parsed: dict[str, Any] = json.loads(content.text)
    assert result.structured_content == parsed
    return parsed


async def check_tools(client: Client, *, with_execution: bool) -> None:
    """tools/list: the fifteen project tools' names in their order, their input schemas
    verbatim, their execution; then Seatwire's own ask tools, after all fifteen."""
    listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == list(SERVED_TOOL_NAMES)
    assert [t.name for t in listed[: len(TOOL_NAMES)]] == list(TOOL_NAMES)
    assert [t.name for t in listed[len(TOOL_NAMES) :]] == list(EXTRA_TOOL_NAMES)
    registry = load()
    for tool in listed:
        if tool.name in TOOL_NAMES:
            assert tool.input_schema == INPUT_SCHEMAS[tool.name], tool.name
        assert tool.input_schema == SERVED_INPUT_SCHEMAS[tool.name], tool.name
        if with_execution:
            assert tool.execution is not None
            assert tool.execution.model_dump(by_alias=True, exclude_none=True) == EXECUTION
        found = registry.get(tool.name)
        if found is None:
            assert tool.description and tool.description.startswith("Not served yet:")
        else:
            assert tool.description == found.description


async def check_calls(client: Client) -> None:
    """A call that works, a bad argument naming its field, a project tool not served yet."""
    project = await client.call_tool("get_project", {})
    assert not project.is_error
    card = body(project)
    assert card["project"]["name"] == "Atlas" and card["you"]["id"] == "scout"

    bad = await client.call_tool("get_updates", {"ack": "five"})
    assert bad.is_error
    refused = body(bad)
    assert refused["error"] == "invalid_arguments" and refused["field"] == "ack"

    unserved = [name for name in TOOL_NAMES if name not in REGISTRY]
    if unserved:
        later = await client.call_tool(unserved[0], {})
        assert later.is_error and body(later)["error"] == "not_implemented"
    with pytest.raises(MCPError) as unknown:
        await client.call_tool("make_coffee", {})
    assert (unknown.value.code, unknown.value.message) == (
        INVALID_PARAMS,
        "Unknown tool: make_coffee",
    )


def test_http_lists_the_seed_tools_and_calls_them(base_url: str) -> None:
    """The SDK's client over streamable HTTP, as it negotiates by default (2026-07-28 with
    this SDK: that revision has no `execution` on a tool, the handshake era below has)."""

    async def scenario(client: Client) -> None:
        await check_tools(client, with_execution=client.protocol_version < "2026")
        await check_calls(client)

    run(scenario, over_http(f"{base_url}/mcp", as_seat()))


def test_http_handshake_era_has_the_seed_execution(base_url: str) -> None:
    """The initialize handshake of protocol 2025-11-25: each tool lists its `execution`
    (contracts/tool_schemas.py `EXECUTION`)."""

    async def scenario(client: Client) -> None:
        await check_tools(client, with_execution=True)
        await check_calls(client)

    run(scenario, over_http(f"{base_url}/mcp", as_seat(), mode="legacy"))


def test_http_without_the_lifespan(api: FastAPI) -> None:
    """Served with uvicorn's lifespan off (as the embedded demo serves it): still answers."""

    async def scenario(client: Client) -> None:
        assert body(await client.call_tool("get_project", {}))["you"]["id"] == "scout"

    with serving(api, lifespan="off") as url:
        run(scenario, over_http(f"{url}/mcp", as_seat()))


def test_http_calls_act_as_the_seat_of_the_token(base_url: str) -> None:
    """The token decides who the call is; a seat header naming the same seat (by
    case-insensitive id) is allowed, and none is needed."""

    async def scenario(client: Client) -> None:
        card = body(await client.call_tool("get_project", {}))
        assert card["you"]["id"] == "sage"

    run(scenario, over_http(f"{base_url}/mcp", as_seat("SAGE")))
    run(scenario, over_http(f"{base_url}/mcp", bearer(SEAT_TOKENS["sage"])))


def test_http_refuses_before_any_mcp_handling(base_url: str) -> None:
    """No token or a wrong one: 401; the operator token: 403 `seat_only`; a seat header
    naming another seat than the token's (or no seat at all): 403 `wrong_seat`."""
    ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    cases = [
        ({"X-Seatwire-Seat": "scout"}, 401, "unauthorized"),
        ({"Authorization": "Bearer nope", "X-Seatwire-Seat": "scout"}, 401, "unauthorized"),
        ({"Authorization": f"Bearer {TOKEN}"}, 403, "seat_only"),
        ({"Authorization": f"Bearer {TOKEN}", "X-Seatwire-Seat": "scout"}, 403, "seat_only"),
        ({**as_seat("scout"), "X-Seatwire-Seat": "sage"}, 403, "wrong_seat"),
        ({**as_seat("scout"), "X-Seatwire-Seat": "nobody"}, 403, "wrong_seat"),
    ]
    for headers, status, error in cases:
        resp = httpx.post(f"{base_url}/mcp", json=ping, headers={**accept, **headers})
        assert (resp.status_code, resp.json()["error"]) == (status, error), headers

    async def refused() -> None:
        with anyio.fail_after(10):
            async with over_http(f"{base_url}/mcp", {"X-Seatwire-Seat": "scout"}):
                pass

    with pytest.raises(Exception):  # noqa: B017 - the SDK's client cannot connect at all
        anyio.run(refused)


def test_http_answers_only_post(base_url: str) -> None:
    """GET (an event stream a stateless server never writes to) and DELETE (no session to end)
    are answered at once with 405 and `Allow: POST`, with or without a token."""
    stream = {"Accept": "text/event-stream"}
    for headers in ({**as_seat(), **stream}, stream):
        for method in ("GET", "DELETE"):
            # a short read timeout: a GET the SDK answered would hold its stream open past it
            resp = httpx.request(method, f"{base_url}/mcp", headers=headers, timeout=5)
            assert resp.status_code == 405, (method, headers)
            assert resp.headers["allow"] == "POST"
            assert resp.json()["error"] == "method_not_allowed"


def test_http_names_an_unsupported_protocol_version(base_url: str) -> None:
    """An `MCP-Protocol-Version` the server does not speak: 400, JSON-RPC -32602 whose message
    names that version and every supported one; a supported one is served as before."""
    listing = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream", **as_seat()}
    resp = httpx.post(
        f"{base_url}/mcp", json=listing, headers={**accept, "MCP-Protocol-Version": "1999-01-01"}
    )
    assert resp.status_code == 400
    error = resp.json()["error"]
    supported = [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS]
    assert error["code"] == INVALID_PARAMS and "'1999-01-01'" in error["message"]
    assert all(v in error["message"] for v in supported) and "_meta" not in error["message"]
    assert error["data"] == {"requested": "1999-01-01", "supported": supported}

    served = httpx.post(
        f"{base_url}/mcp", json=listing, headers={**accept, "MCP-Protocol-Version": "2025-11-25"}
    )
    assert served.status_code == 200
    assert [t["name"] for t in served.json()["result"]["tools"]] == list(SERVED_TOOL_NAMES)


def stdio_env(redis_url: str, org_file: Path, tmp_path: Path) -> dict[str, str]:
    return {
        "SEATWIRE_REDIS_URL": redis_url,
        "SEATWIRE_API_TOKEN": TOKEN,
        "SEATWIRE_ORG_FILE": str(org_file),
        "SEATWIRE_OUTBOX_PATH": str(tmp_path / "o.jsonl"),
    }


@pytest.mark.e2e
def test_stdio_lists_the_seed_tools_and_calls_them(
    redis_client: redis.Redis, redis_url: str, org_file: Path, tmp_path: Path
) -> None:
    """`seatwire mcp --seat scout` as a child process, the SDK's stdio client on its pipes."""
    params = StdioServerParameters(
        command=str(SEATWIRE),
        args=["mcp", "--seat", "scout"],
        env=stdio_env(redis_url, org_file, tmp_path),
        cwd=tmp_path,
    )

    async def scenario(client: Client) -> None:
        await check_tools(client, with_execution=client.protocol_version < "2026")
        await check_calls(client)

    run(scenario, Client(params), within_s=PROCESS_S)


@pytest.mark.e2e
def test_stdio_refuses_an_unknown_seat(
    redis_client: redis.Redis, redis_url: str, org_file: Path, tmp_path: Path
) -> None:
    """Exit 2 with the seat's name, on stderr; nothing on stdout (the protocol's)."""
    import subprocess

    env = {**os.environ, **stdio_env(redis_url, org_file, tmp_path)}
    done = subprocess.run(
        [str(SEATWIRE), "mcp", "--seat", "nobody"],
        env=env,
        capture_output=True,
        text=True,
        timeout=PROCESS_S,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "nobody" in done.stderr and done.stdout == ""


def test_an_unexpected_failure_is_an_internal_error_tool_result(
    api: FastAPI, caplog: pytest.LogCaptureFixture
) -> None:
    """Not a ToolError: an `isError` result that says `internal_error` and nothing more; the
    traceback is in the server's log (in-process, the SDK's client on the server itself)."""
    deps = api.state.deps

    def broken(_ctx: object) -> Seat:
        raise RuntimeError("secret detail")

    server = build_server(deps.container, deps.celery, broken, clock_ms=deps.clock_ms)

    async def scenario(client: Client) -> None:
        failed = await client.call_tool("get_project", {})
        assert failed.is_error
        said = body(failed)
        assert said["error"] == "internal_error" and "secret" not in json.dumps(said)

    with caplog.at_level(logging.ERROR, logger="workers.ingress.mcp"):
        run(scenario, Client(server))
    assert "secret detail" in caplog.text and "Traceback" in caplog.text
