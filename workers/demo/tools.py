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

from workers.container import Container
from workers.demo.controller import settled
from workers.demo.view import Case, Check, Field, Section, plural
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
    *,
    headers_for: Headers,
) -> Section:
    """Drive the cases through the MCP client, each checked against what it must end as."""
    run = int(time.time())
    claimed, taken, _sent, _reply, thread, intent = anyio.run(
        _scenario, f"{base_url}/mcp", headers_for, run
    )
    assert container.app is not None
    ControllerTick.of(container, container.app)()
    status = settled(http, ["tally"])["tally"]
    turn = status["turns"][0] if status["turns"] else {}
    messages = thread.get("messages") or []
    receipt = claimed.get("receipt") or {}
    cases = (
        _tool_case(
            "scout claims an issue",
            "coordinate_issue (claim)",
            "claimed, generation 2",
            "refused" if claimed["isError"] else f"claimed, generation {receipt.get('generation')}",
            claimed,
            reason=str(claimed.get("error") or receipt.get("outcome")),
        ),
        _tool_case(
            "tally tries to claim the same issue",
            "coordinate_issue (claim)",
            "refused: owned by scout",
            f"refused: owned by {taken.get('owner')}" if taken["isError"] else "claimed",
            taken,
            reason=str(taken.get("error") or "claimed"),
        ),
        _tool_case(
            "scout writes to tally, tally replies",
            "send_message, read_thread",
            "2 messages: scout, tally",
            f"{len(messages)} messages: " + ", ".join(str(m.get("from")) for m in messages),
            thread,
            why=tuple(
                f"{m.get('from')} -> {', '.join(m.get('to') or ())}: {m.get('body')}"
                for m in messages
            ),
        ),
        _tool_case(
            "tally records a runnable work intent",
            "record_work_intent (runnable)",
            "1 turn, reason durable",
            "refused" if intent["isError"] else f"1 turn, reason {turn.get('reason')}",
            intent,
            reason=str(intent.get("error") or turn.get("reason")),
        ),
    )
    return Section(
        key="tools",
        label="seat tools",
        title="A seat's tools, over MCP (streamable HTTP at /mcp)",
        intro="Two seats, each with its own token, through the official MCP client: the same "
        "tools a seat's agent calls.",
        cases=cases,
        summary=f"{plural(len(cases), 'case')} over MCP: a claim, a refused claim "
        f"({taken.get('error') or 'not refused'}), a thread of "
        f"{plural(len(messages), 'message')}, a work intent the controller ran",
        counts=(("cases", len(cases)), ("threadMessages", len(messages))),
    )


def _tool_case(
    title: str,
    tool: str,
    expected: str,
    got: str,
    result: dict[str, Any],
    *,
    reason: str | None = None,
    why: tuple[str, ...] = (),
) -> Case:
    fields = [Field("outcome", "outcome", got)]
    if reason is not None:
        fields.append(Field("reasonCode", "reason code", reason))
    fields.append(Field("tool", "tool", tool))
    said = tuple(str(result[k]) for k in ("message", "note") if result.get(k))
    return Case(title, tuple(fields), Check.of(expected, got), (*said, *why))
