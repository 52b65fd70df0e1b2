"""A seat's backlog (issue 10): what the goal steward dispatched to the seat, and the seat
closing an item. The seat acts on its own backlog, with the bearer token as the rest of /v1.

    GET  /v1/seats/{seat}/backlog?state=open|done|all   its items, oldest first, and revision
    POST /v1/seats/{seat}/backlog/{item}/done           close one item, once

`revision` is the seat's work revision: it rises by one for each item added, so a seat that
saw the same revision has seen every item. 404 for an unknown seat or item; nothing is written
by a refusal. The goal steward that adds the items is not built yet.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from contracts.backlog import BacklogView
from workers.ingress.deps import Deps
from workers.ingress.http import problem
from workers.ingress.v1 import require_token

router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)])


@router.get("/seats/{seat}/backlog")
async def get_backlog(
    seat: str, deps: Deps, view: Annotated[BacklogView, Query(alias="state")] = "open"
) -> Response:
    """The seat's items in the state asked for (open by default), oldest first, and its work
    revision."""
    known = deps.seat(seat)
    store = deps.container.backlog
    items = await run_in_threadpool(store.items, known.member_id, view)
    revision = await run_in_threadpool(store.revision, known.member_id)
    return JSONResponse(
        {"items": [e.to_wire() for e in items], "count": len(items), "revision": revision}
    )


@router.post("/seats/{seat}/backlog/{item}/done")
async def post_done(seat: str, item: str, deps: Deps) -> Response:
    """Close one of the seat's items: 200 `done` the first time, 200 `already_done` after
    (the first close stands), 404 when the seat has no such item."""
    known = deps.seat(seat)
    closed = await run_in_threadpool(
        lambda: deps.container.backlog.done(
            known.member_id, item, by=known.member_id, now_ms=deps.clock_ms()
        )
    )
    if closed.entry is None:
        return problem(404, "unknown_item", f"no item {item!r} on the backlog of {seat!r}")
    return JSONResponse({"status": closed.status, "item": closed.entry.to_wire()})
