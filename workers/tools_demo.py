"""The seats' tools part of `seatwire demo` (issue 13 point 5): two seats driven through the
official MCP client over streamable HTTP at `/mcp`, each case checked against what it must end
as:

    scout claims an issue                      claimed, generation 2
    tally tries to claim it                    refused: owned by scout
    scout writes to tally, tally replies       one thread of two messages, oldest first
    tally records a runnable work intent       the controller runs tally, reason `durable`

Everything goes through the same tools a seat's agent calls (workers/tools/), as that seat.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from rich.console import Console

from workers.container import Container
from workers.controller_demo import checked_cases, settled
from workers.stages.controller_tick import ControllerTick

Headers = Callable[[str], dict[str, str]]


@asynccontextmanager
async def _transport(url: str, headers: dict[str, str]) -> AsyncIterator[TransportStreams]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=10) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _result(called: Any) -> dict[str, Any]:
    text = called.content[0].text if called.content else "{}"
    parsed: dict[str, Any] = json.loads(text)
    return {"isError": bool(called.is_error), **parsed}


async def _scenario(url: str, headers_for: Headers, run: int) -> list[dict[str, Any]]:
    issue = 1000 + run % 100_000
    async with (
        Client(_transport(url, headers_for("scout"))) as scout,
        Client(_transport(url, headers_for("tally"))) as tally,
    ):
        claimed = _result(
            await scout.call_tool(
                "coordinate_issue",
                {"issue_number": issue, "action": "claim", "client_request_id": f"claim-{run}"},
            )
        )
        taken = _result(
            await tally.call_tool(
                "coordinate_issue",
                {"issue_number": issue, "action": "claim", "client_request_id": f"take-{run}"},
            )
        )
        sent = _result(
            await scout.call_tool(
                "send_message",
                {
                    "to": ["tally"],
                    "body": f"I have issue #{issue}; can you check the invoice totals it touches?",
                    "client_message_id": f"ask-{run}",
                },
            )
        )
        thread_id = str(sent.get("threadId") or sent.get("messageId") or sent.get("id") or "")
        reply = _result(
            await tally.call_tool(
                "send_message",
                {
                    "to": ["scout"],
                    "body": "Yes: the March totals are off by one invoice, I will say which.",
                    "thread_id": thread_id,
                    "client_message_id": f"reply-{run}",
                },
            )
        )
        thread = _result(await tally.call_tool("read_thread", {"thread_id": thread_id}))
        for client in (scout, tally):  # each agent reads its inbox and acknowledges it
            page = _result(await client.call_tool("get_updates", {}))
            if page.get("items"):
                await client.call_tool("get_updates", {"ack": page["position"]})
        intent = _result(
            await tally.call_tool(
                "record_work_intent",
                {
                    "intent_id": f"invoices-{run}",
                    "client_request_id": f"intent-{run}",
                    "expected_revision": 0,
                    "state": "runnable",
                    "next_step": f"Find the March invoice missing from issue #{issue}'s totals",
                    "issue_number": issue,
                },
            )
        )
    return [claimed, taken, sent, reply, thread, intent]


def run_tools_demo(
    base_url: str,
    http: Any,
    container: Container,
    console: Console,
    *,
    headers_for: Headers,
) -> int:
    """Drive the cases through the MCP client; print the table; 1 per case that ended
    otherwise."""
    run = int(time.time())
    claimed, taken, _sent, _reply, thread, intent = anyio.run(
        _scenario, f"{base_url}/mcp", headers_for, run
    )
    assert container.app is not None
    ControllerTick.of(container, container.app)()
    status = settled(http, ["tally"])["tally"]
    turn = status["turns"][0] if status["turns"] else {}
    messages = thread.get("messages") or []
    cases = [
        (
            "scout",
            "coordinate_issue claim",
            "claimed, generation 2",
            "refused"
            if claimed["isError"]
            else f"claimed, generation {claimed.get('receipt', {}).get('generation')}",
        ),
        (
            "tally",
            "coordinate_issue claim",
            "refused: owned by scout",
            f"refused: owned by {taken.get('owner')}" if taken["isError"] else "claimed",
        ),
        (
            "both",
            "send_message, read_thread",
            "2 messages: scout, tally",
            f"{len(messages)} messages: " + ", ".join(str(m.get("from")) for m in messages),
        ),
        (
            "tally",
            "record_work_intent runnable",
            "1 turn, reason durable",
            "refused" if intent["isError"] else f"1 turn, reason {turn.get('reason')}",
        ),
    ]
    failures = checked_cases(
        console, "A seat's tools, over MCP (streamable HTTP at /mcp)", ("seat", "tool"), cases
    )
    return failures
