"""A seat's own asks (issue 26): `list_asks` and `get_ask`, Seatwire's two tools beyond the
fifteen project tools. They read the ask record (workers/stores/asks.py), only ever the
calling seat's own asks: another seat's ask is as unknown to it as one that never was
(`unknown_ask`, 404), so nothing about other seats' asks leaks through the id.

`list_asks` pages the seat's asks open first (every ask still waiting: pending, open,
snoozed, escalated), then the ended ones, newest first in each, 20 a page or 48 KiB of them
as received (at least one), with an opaque `next` cursor. Each item is the ask without its
history (its last event is `lastEvent`); `get_ask` answers one ask whole, its history and its
escalations' own asks included. A listing reads the seat's newest 1,000 asks (a seat with more
sees the newest 1,000: the record keeps an ended ask 30 days).
"""

from __future__ import annotations

from typing import Any

from contracts.asks import Ask
from contracts.tools import GetAsk, ListAsks
from pipeline.cursors import pack, unpack
from pipeline.paging import longest_fit
from workers.tools.base import ToolContext, ToolError, tool

PAGE = 20
PAGE_BYTES = 48 * 1024

Key = tuple[int, int, str]  # (0 open / 1 ended, -created at ms, id): the listing's order


def _key(ask: Ask) -> Key:
    return (0 if ask.is_open else 1, -ask.created_at_ms, ask.id)


def summary(ask: Ask) -> dict[str, Any]:
    """An ask as a listing shows it: everything but its history, and its latest event."""
    wire = ask.to_wire()
    history = wire.pop("history")
    wire["lastEvent"] = history[-1] if history else None
    return wire


def _cursor(seat: str, state: str | None, key: Key) -> str:
    return pack(["asks", seat, state or "", list(key)])


def _after(cursor: str | None, seat: str, state: str | None) -> Key | None:
    if cursor is None:
        return None
    data = unpack(cursor)
    if (
        isinstance(data, list)
        and len(data) == 4
        and data[:3] == ["asks", seat, state or ""]
        and isinstance(data[3], list)
        and len(data[3]) == 3
    ):
        rank, created, ask_id = data[3]
        if isinstance(rank, int) and isinstance(created, int) and isinstance(ask_id, str):
            return (rank, created, ask_id)
    raise ToolError(
        "invalid_cursor",
        "cursor: not a cursor of this listing; pass the `next` of the previous page, with the "
        "same state",
        field="cursor",
        status=422,
    )


@tool(
    "list_asks",
    "What became of your asks (the people Seatwire asked for you): the ones still waiting "
    "first (pending: being sent; open; snoozed; escalated: asked one rung up), then the "
    "answered and closed ones, newest first, 20 a page with a `next` cursor. Each has its "
    "state, targets, deadline, and once answered `answer` (approved, declined, replied or "
    "done, by whom, its text). Filter with `state` (`open` is every waiting ask). Read one "
    "whole, with its history, with get_ask.",
)
def list_asks(ctx: ToolContext, args: ListAsks) -> dict[str, Any]:
    seat = ctx.seat.member_id
    after = _after(args.cursor, seat, args.state)
    found = ctx.container.asks.listing(seat_id=seat, state=args.state, open_first=True)
    chosen = sorted((a for a in found if after is None or _key(a) > after), key=_key)
    items = [summary(a) for a in chosen[:PAGE]]

    def page(n: int) -> dict[str, Any]:
        more = n < len(chosen)
        return {
            "asks": items[:n],
            "next": _cursor(seat, args.state, _key(chosen[n - 1])) if more and n else None,
            "serverTime": ctx.now_ms,
        }

    return page(longest_fit(len(items), lambda n: ctx.measure(page(n)), PAGE_BYTES))


def unknown_ask(ask_id: str) -> ToolError:
    return ToolError(
        "unknown_ask",
        f"ask_id: you have no ask {ask_id!r}; pass the `askId` of an ask_answered update or "
        "an `id` list_asks returned",
        field="ask_id",
        status=404,
    )


@tool(
    "get_ask",
    "One of your asks, whole: its state, whom it asked and where it landed, its deadline, "
    "the answer once there is one (with the consent it recorded, for an approved consent), "
    "every escalation one rung up and that escalation's own ask, and its history: each "
    "change with its reason code and why.",
)
def get_ask(ctx: ToolContext, args: GetAsk) -> dict[str, Any]:
    asks = ctx.container.asks
    ask = asks.get(args.ask_id)
    if ask is None or ask.seat_id != ctx.seat.member_id:
        raise unknown_ask(args.ask_id)
    return {
        "ask": ask.to_wire(),
        "escalationAsks": [a.to_wire() for a in asks.escalations_of(ask.id)],
        "serverTime": ctx.now_ms,
    }
