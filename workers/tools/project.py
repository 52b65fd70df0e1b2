"""The project and who is in it (issue 13): `get_project`, `find_agents`, `get_updates`.

`get_project` is the card from the org file's `project:` (name, mission, rules, repository,
start time), the project's `started`/`paused` flags (what the work controller reads as
`news.project`), the caller, the number of seats with when it was counted, and the server
time. `find_agents` pages the seats by name (20 a page, an opaque cursor), with their
operator, contact freshness from their last tool call and the last run phase the controller
recorded. `get_updates` is the seat's inbox (workers/stores/inbox.py), acknowledging first
when `ack` is given; an item too large for a page on its own comes cut, marked `truncated`,
and its description says so, and that no call returns the rest: an agent must never take a
cut text for the whole.
"""

from __future__ import annotations

from typing import Any

from contracts.tools import FindAgents, GetProject, GetUpdates
from pipeline.cursors import pack, unpack
from workers.org import seat_name
from workers.stores import keys
from workers.stores.inbox import AckBeyondLast
from workers.stores.scripts import text
from workers.tools.base import ToolContext, ToolError, tool

PAGE = 20
FRESHNESS = ((90_000, "lt_90s"), (300_000, "90s_to_5m"), (3_600_000, "5m_to_1h"))


@tool(
    "get_project",
    "The project card, whether it has started or is paused, who you are, how "
    "many seats it has (and when that was counted), and the server time (Unix ms).",
)
def get_project(ctx: ToolContext, _args: GetProject) -> dict[str, Any]:
    view = ctx.container.org.current()[0]
    card = view.org.project
    started, paused = ctx.container.redis.hmget(keys.PROJECT, ["started", "paused"])
    me = view.member(ctx.seat.member_id)
    return {
        "project": {
            "name": card.name,
            "mission": card.mission,
            "rules": list(card.rules),
            "repository": card.repository,
            "startedAt": card.started_at_ms,
            "started": started is None or text(started) == "1",
            "paused": paused is not None and text(paused) == "1",
        },
        "you": {
            "id": ctx.seat.member_id,
            "name": seat_name(me, ctx.seat.member_id),
            "operatorId": ctx.seat.operator_id or ctx.seat.supervisor_id,
        },
        "agentCount": len(view.org.seats),
        "agentCountObservedAt": ctx.now_ms,
        "serverTime": ctx.now_ms,
    }


def _cursor(name: str, seat_id: str) -> str:
    return pack([name, seat_id])


def _after(cursor: str | None) -> tuple[str, str] | None:
    if cursor is None:
        return None
    data = unpack(cursor)
    if isinstance(data, list) and len(data) == 2 and all(isinstance(d, str) for d in data):
        return data[0], data[1]
    raise ToolError(
        "invalid_cursor",
        "cursor: not a cursor this tool gave; pass the `next` of the previous page",
        field="cursor",
        status=422,
    )


def _freshness(last_ms: int | None, now_ms: int) -> str | None:
    if last_ms is None:
        return None
    age = max(0, now_ms - last_ms)
    return next((bucket for limit, bucket in FRESHNESS if age < limit), "gte_1h")


@tool(
    "find_agents",
    "The project's seats whose names start with `name_prefix` (or all), in "
    "name order, 20 a page with a `next` cursor: id, name, operator, whether it is yours, "
    "contact freshness (lt_90s, 90s_to_5m, 5m_to_1h, gte_1h, or null when never seen) and "
    "the last run phase the work controller recorded. A stale phase is history, not work.",
)
def find_agents(ctx: ToolContext, args: FindAgents) -> dict[str, Any]:
    view = ctx.container.org.current()[0]
    members = view.member_by_id
    prefix = (args.name_prefix or "").casefold()
    # From the org version's index: a bisection and the page, at any number of seats.
    page, more = view.seats_by_name.page(prefix, _after(args.cursor), PAGE)
    r = ctx.container.redis
    pipe = r.pipeline(transaction=False)
    for _label, sid, _seat in page:
        pipe.hget(keys.seat_state(sid), "lastCallMs")
    calls = pipe.execute()
    runs = [ctx.container.seat_runs.get(sid).run for _n, sid, _s in page]
    mine = ctx.seat.operator_id or ctx.seat.supervisor_id
    agents = []
    for (label, sid, seat), call, run in zip(page, calls, runs, strict=True):
        operator = seat.operator_id or seat.supervisor_id
        op_member = members.get(operator) if operator else None
        active, last = run.active, (run.turns[-1] if run.turns else None)
        agents.append(
            {
                "id": sid,
                "name": label,
                "operator": seat_name(op_member, operator) if operator else None,
                "sameOperator": operator is not None and operator == mine,
                "contact": _freshness(None if call is None else int(text(call)), ctx.now_ms),
                "phase": active.state if active else (last.outcome.kind if last else None),
                "acceptingWork": not run.paused,
                "runEnded": active is None,
            }
        )
    nxt = _cursor(page[-1][0], page[-1][1]) if more and page else None
    return {"agents": agents, "next": nxt}


@tool(
    "get_updates",
    "What was delivered to you and not yet acknowledged, oldest first (at "
    "most 50 items or 64 KB as you receive it). An item larger than that on its own comes "
    "alone and cut to fit: its longest texts or lists shortened to their start, and "
    "`truncated` lists each cut field with its full length. No Seatwire call returns the "
    "rest: read the original where it was posted (`candidate.ids` names it) if you need "
    "it. Handle "
    "them, then call again with `ack` = the `position` you "
    "got: until then the same items come back. `has_more` says there is another page. "
    "`overflowed` counts items meant for you that your inbox had no room for (it holds a "
    "cap of unread items) since you last acknowledged: acknowledge sooner; each is in the "
    "ledger with reason code inbox_full.",
)
def get_updates(ctx: ToolContext, args: GetUpdates) -> dict[str, Any]:
    inbox = ctx.container.inbox
    seat = ctx.seat.member_id
    if args.ack is None:
        return inbox.updates(seat, ctx.measure).to_wire()
    try:
        return inbox.ack(seat, args.ack, ctx.measure).to_wire()
    except AckBeyondLast as exc:
        raise ToolError(
            "ack_beyond_last",
            f"ack: {exc}; acknowledge a `position` this tool returned",
            field="ack",
            status=409,
            last=exc.last,
        ) from None
