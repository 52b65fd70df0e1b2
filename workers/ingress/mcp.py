"""A seat's coordination tools as an MCP server (issue 13): the same registry the HTTP tool
routes serve (workers/tools/), on the official MCP SDK's low-level `Server`.

Two transports, one server:

- streamable HTTP at `/mcp` on the ingress (`McpEndpoint`, mounted by app.py). Every HTTP
  request is authenticated before the SDK sees it: `Authorization: Bearer <a seat's token>`
  names the seat the call acts as (401 without a valid token, 403 `seat_only` for an
  operator token); an `X-Seatwire-Seat` header is optional and, when sent, must name that
  same seat (member id or alias; 403 `wrong_seat` otherwise). The session manager is
  stateless: the seat comes with each request's token, so nothing is kept between requests
  and any ingress process can answer any request (all state is in Redis);
- stdio, `seatwire mcp --seat SEAT` (workers/cli/mcp.py): one process, one seat.

`tools/list` answers exactly the fifteen project tools (contracts/tool_schemas.py): their names in
their order, their input schemas verbatim, `execution` `{"taskSupport": "forbidden"}` (every call
runs to completion); then Seatwire's own tools (`list_asks`, `get_ask`: a seat's asks), in the same
shape. A project tool Seatwire does not serve yet is listed with a description that says so; calling
it is the `not_implemented` tool error. `tools/call` runs the tool in a worker thread (its Redis I/O
blocks) and answers its result as JSON text (and as `structuredContent`); a `ToolError` is a result
with `isError` whose text is the error's JSON; anything else is logged with its traceback and
answered as the `internal_error` tool error, nothing more said. A name that is not a listed tool is
no tool's failure but a bad request: the JSON-RPC error -32602 `Unknown tool: NAME`, as the MCP
specification answers it.

A paged tool's byte cap is counted on what the client receives (`received_bytes`): the
result carries the JSON twice (text and `structuredContent`), the text escaped inside the
JSON-RPC message, and one of the SDK's paths escapes every non-ASCII character, so a page is
fitted to the larger of the SDK's two encodings of the whole message.

Two answers the SDK gets wrong for this server are given by `McpEndpoint` before the SDK sees
the request (the narrowest place: the SDK's transport itself is used as it is):

- any method but POST is 405 with `Allow: POST`. The session manager is stateless (no
  session to resume, nothing the server would ever push), yet the SDK's handshake-era
  transport answers GET with an event stream it holds open, empty, for as long as the
  client waits; the transport specification lets a server that offers no such stream say
  405, and the SDK's clients take that as "no stream" and carry on;
- an `MCP-Protocol-Version` header naming a version the SDK serves on neither of its paths
  is 400 with the JSON-RPC error -32602 naming that version and the supported ones. The SDK
  routes any unknown version to its 2026-07-28 path, whose first check refuses the missing
  `params._meta` envelope, a message that never says the version was the problem.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
import mcp_types as types
from celery import Celery
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from contracts import Seat
from contracts.tool_schemas import EXECUTION, SERVED_INPUT_SCHEMAS, SERVED_TOOL_NAMES
from workers.container import Container
from workers.ingress.deps import IngressDeps
from workers.ingress.http import UNAVAILABLE, Refusal, problem
from workers.tools import ToolContext, ToolError, call, load

log = logging.getLogger(__name__)

SEAT_HEADER = "X-Seatwire-Seat"
SCOPE_SEAT = "seatwire.seat"  # where McpEndpoint leaves the authenticated seat for the tools
SERVER_NAME = "seatwire"
INSTRUCTIONS = (
    "Seatwire's coordination tools for this seat: the project card, updates and acks, "
    "messages, issue claims, work intents, decisions, and what became of your asks (list_asks, "
    "get_ask). Every call acts as the seat you connected as."
)
INTERNAL_ERROR = {
    "error": "internal_error",
    "message": "the tool failed inside Seatwire; nothing more is known here (the server "
    "logged it): try again later",
}

# The calling seat of one MCP request (from the HTTP headers, or the one stdio seat).
SeatOf = Callable[[ServerRequestContext[Any, Any]], Seat]


def listed_tools() -> list[types.Tool]:
    """The fifteen project tools, in their order, with their input schemas, then Seatwire's
    own, as `tools/list` answers them."""
    registry = load()
    execution = types.ToolExecution.model_validate(EXECUTION)
    tools = []
    for name in SERVED_TOOL_NAMES:
        found = registry.get(name)
        description = (
            found.description
            if found is not None
            else f"Not served yet: {name} is one of the project tools that Seatwire does not "
            "serve yet; calling it answers the not_implemented tool error and does nothing."
        )
        tools.append(
            types.Tool(
                name=name,
                description=description,
                input_schema=SERVED_INPUT_SCHEMAS[name],
                execution=execution,
            )
        )
    return tools


def _result(body: dict[str, Any], *, error: bool) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
        is_error=error,
    )


# What the SDK wraps around a tool result besides the request id: `{"jsonrpc":"2.0","id":,
# "result":}` (31 bytes), `resultType`, and the 2026-07-28 path's serverInfo stamp in the
# result's `_meta` (about 90 bytes with this server's name and version). Rounded up well past
# their sum, so that a page measured here is never larger as received.
ENVELOPE_BYTES = 256


def received_bytes(body: dict[str, Any], request_id: types.RequestId | None) -> int:
    """The bytes of the JSON-RPC message that answers the call `request_id` with `body` as
    its (successful) result, as the client receives it: the larger of the SDK's encodings
    (UTF-8 kept, on stdio and the handshake-era HTTP path; every non-ASCII character escaped,
    on the 2026-07-28 path)."""
    result = _result(body, error=False)
    kept = len(result.model_dump_json(by_alias=True, exclude_none=True).encode())
    escaped = len(
        json.dumps(
            result.model_dump(mode="json", by_alias=True, exclude_none=True),
            separators=(",", ":"),
        )
    )
    return max(kept, escaped) + len(json.dumps(request_id)) + ENVELOPE_BYTES


def build_server(
    container: Container, app: Celery, seat_of: SeatOf, *, clock_ms: Callable[[], int]
) -> Server[Any]:
    """The MCP server of the tools, each call as `seat_of(ctx)` at `clock_ms()`."""
    tools = listed_tools()

    async def on_list_tools(
        _ctx: ServerRequestContext[Any, Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in SERVED_TOOL_NAMES:
            # Not a tool that failed but a request for none: a protocol error (the spec's own
            # example), which a client tells apart from a tool's refusal.
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        try:
            seat = seat_of(ctx)
            measure = functools.partial(received_bytes, request_id=ctx.request_id)
            tool_ctx = ToolContext(container, app, seat, clock_ms(), measure)
            result = await anyio.to_thread.run_sync(call, tool_ctx, params.name, params.arguments)
        except ToolError as exc:
            return _result(exc.to_wire(), error=True)
        except Exception:
            log.exception("MCP tool %s failed", params.name)
            return _result(dict(INTERNAL_ERROR), error=True)
        return _result(result, error=False)

    return Server(
        SERVER_NAME,
        version="0.1.0",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=SERVED_INPUT_SCHEMAS.get,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


SUPPORTED_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)


def not_post(method: str) -> JSONResponse:
    """405 for any method but POST: a stateless server has no stream to offer a GET (nothing
    is ever pushed) and no session for a DELETE to end."""
    refusal = problem(
        405,
        "method_not_allowed",
        f"/mcp answers POST only, not {method}: the server is stateless, so it has no event "
        "stream to open and no session to end; send each JSON-RPC message as a POST",
    )
    refusal.headers["Allow"] = "POST"
    return refusal


def unsupported_version(version: str) -> JSONResponse:
    """400 with the JSON-RPC error -32602 (no request id: the body is not read) naming the
    `MCP-Protocol-Version` sent and the versions this server speaks."""
    shown = version if len(version) <= 64 else version[:64] + "..."
    supported = ", ".join(SUPPORTED_VERSIONS)
    error = types.ErrorData(
        code=types.INVALID_PARAMS,
        message=f"Unsupported MCP-Protocol-Version: {shown!r}; this server supports "
        f"{supported} (send one of them, or no header to use the default)",
        data={"requested": shown, "supported": list(SUPPORTED_VERSIONS)},
    )
    return JSONResponse(
        {"jsonrpc": "2.0", "id": None, "error": error.model_dump(mode="json", exclude_none=True)},
        status_code=400,
    )


def http_seat(ctx: ServerRequestContext[Any, Any]) -> Seat:
    """The seat `McpEndpoint` authenticated for the HTTP request that carried this call."""
    request = ctx.request
    seat = None if request is None else request.scope.get(SCOPE_SEAT)
    if not isinstance(seat, Seat):
        raise RuntimeError("an MCP call reached the tools without an authenticated seat")
    return seat


class McpEndpoint:
    """The ASGI app at `/mcp`: POST only (405), the seat's token and the seat header (401,
    403), and the protocol version header (400) checked before the SDK's streamable HTTP
    transport sees the request. `run()` is the app's lifespan part:
    a session manager can run only once, so each run gets a new one (and a request served
    without the lifespan runs one of its own)."""

    def __init__(self, deps: IngressDeps) -> None:
        self.deps = deps
        self.server = build_server(deps.container, deps.celery, http_seat, clock_ms=deps.clock_ms)
        self._manager: StreamableHTTPSessionManager | None = None

    def _new_manager(self) -> StreamableHTTPSessionManager:
        return StreamableHTTPSessionManager(app=self.server, stateless=True, json_response=True)

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        manager = self._new_manager()
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def authenticate(self, headers: Headers) -> Seat:
        """The seat the request's token is; a Refusal (401 or 403) otherwise."""
        scheme, _, token = headers.get("authorization", "").partition(" ")
        auth = self.deps.auth
        caller = await auth.caller_async(token.strip()) if scheme.lower() == "bearer" else None
        if caller is None:
            raise Refusal(problem(401, "unauthorized", "a valid bearer token is required"))
        if caller.role != "seat" or caller.seat is None:
            raise Refusal(
                problem(
                    403,
                    "seat_only",
                    "/mcp takes a seat's token: the calls act as the seat it was issued to",
                )
            )
        ident = headers.get(SEAT_HEADER, "").strip()
        if ident and not auth.seat_matches(caller, ident):
            raise Refusal(
                problem(
                    403,
                    "wrong_seat",
                    f"{SEAT_HEADER}: {ident!r} is not the seat of this token "
                    f"({caller.seat.member_id!r}); send that seat's own token",
                )
            )
        return caller.seat

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if scope["type"] != "http":
                raise Refusal(problem(404, "not_found", "MCP is served over HTTP here"))
            if scope["method"] != "POST":
                raise Refusal(not_post(scope["method"]))
            headers = Headers(scope=scope)
            scope[SCOPE_SEAT] = await self.authenticate(headers)
            version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
            if version is not None and version not in SUPPORTED_VERSIONS:
                raise Refusal(unsupported_version(version))
        except Refusal as refusal:
            await refusal.response(scope, receive, send)
            return
        except UNAVAILABLE as exc:  # the org's view unreadable: the ingress's one 503
            await problem(503, "unavailable", str(exc))(scope, receive, send)
            return
        if self._manager is not None:
            await self._manager.handle_request(scope, receive, send)
            return
        # Served without the app's lifespan (uvicorn's `lifespan="off"`): stateless, a request
        # needs nothing that outlives it, so it gets a session manager of its own.
        manager = self._new_manager()
        async with manager.run():
            await manager.handle_request(scope, receive, send)
