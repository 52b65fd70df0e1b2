"""Turn cost frames (issue 10): `POST /v1/seats/{seat}/cost` records one, `GET` reads a
seat's frames and what they spent. Micros are integers or decimal strings in, integers out.

The POST refuses in v1's order, before anything is written: 413 (size), 415 (content type),
404 (seat), 422 (the field that is wrong, or a frame older than retention), 409 (a `turnId`
recorded with other content). Only `enforcement: on` is a charge (pipeline.money); the budget
gate that reads the spend belongs to the goal steward.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from contracts import Seat
from contracts.api import CostPage, CostRecorded
from contracts.money import CostFrame
from pipeline.money import charge_of
from workers.ingress.deps import Deps
from workers.ingress.docs import BODY, GUARDED, answers, reads
from workers.ingress.http import Refusal, json_body, problem, validated
from workers.ingress.v1 import read_json, require_seat, same_seat
from workers.stores.costs import FrameConflict, FrameExpired, totals

router = APIRouter(prefix="/v1", dependencies=[Depends(require_seat)])

# An open window's end: later than any atMs a frame can carry.
_NO_END_MS = 2**63


@router.post(
    "/seats/{seat}/cost",
    status_code=201,
    response_model=CostRecorded,
    responses=answers(
        {200: (CostRecorded, "the same frame was recorded before (`duplicate`)")},
        *GUARDED,
        *BODY,
        404,
        409,
        why={
            404: "no seat of that name in the org (`unknown_seat`)",
            409: "this turnId was recorded with another frame (`frame_conflict`)",
        },
    ),
    openapi_extra=reads(CostFrame),
)
async def post_cost(seat: str, request: Request, deps: Deps) -> Response:
    """Record one turn cost frame for a seat; 201 `recorded` with its charge, 200 `duplicate`
    when the same frame came before."""
    raw = await read_json(request, deps.settings.max_body_bytes)
    known = deps.seat(seat)
    frame = cost_frame(raw, known, seat)
    try:
        done = await run_in_threadpool(
            lambda: deps.container.costs.record(known.member_id, frame, now_ms=deps.clock_ms())
        )
    except FrameConflict as exc:
        return problem(
            409, "frame_conflict", f"{exc}: a turnId names one frame", frameId=exc.frame_id
        )
    except FrameExpired as exc:
        message = f"atMs: {exc}; it could count in no budget window"
        detail = [{"field": "atMs", "message": str(exc), "type": "value_error"}]
        return problem(422, "invalid_cost_frame", message, detail=detail)
    return JSONResponse(
        {
            "status": done.status,
            "frameId": done.frame_id,
            "chargeMicros": charge_of(done.frame),
            "frame": done.frame.to_wire(),
        },
        status_code=201 if done.status == "recorded" else 200,
    )


@router.get(
    "/seats/{seat}/cost",
    response_model=CostPage,
    responses=answers(
        {}, *GUARDED, 404, 422, why={404: "no seat of that name in the org (`unknown_seat`)"}
    ),
)
async def get_cost(
    seat: str,
    deps: Deps,
    objective: str | None = None,
    since_ms: int = Query(default=0, ge=0, alias="sinceMs"),
    until_ms: int | None = Query(default=None, ge=0, alias="untilMs"),
    limit: int = Query(default=100, ge=1, le=1000),
) -> Response:
    """A seat's frames in `[sinceMs, untilMs)`, newest first (at most `limit`), for one
    objective when given, with what all of them charged and would have charged."""
    known = deps.seat(seat)
    if until_ms is not None and until_ms < since_ms:
        detail = [
            {"field": "untilMs", "message": "must not be before sinceMs", "type": "value_error"}
        ]
        raise Refusal(
            problem(422, "invalid_window", "untilMs: must not be before sinceMs", detail=detail)
        )
    frames = await run_in_threadpool(
        lambda: deps.container.costs.frames(known.member_id, since_ms=since_ms, until_ms=until_ms)
    )
    chosen = [f for f in frames if objective is None or f.objective == objective]
    end = _NO_END_MS if until_ms is None else until_ms
    spend, shadow = totals(chosen, objective=objective, since_ms=since_ms, until_ms=end)
    return JSONResponse(
        {
            "frames": [f.to_wire() for f in chosen[:limit]],
            "count": min(len(chosen), limit),
            "spendMicros": spend,
            "shadowMicros": shadow,
        }
    )


def cost_frame(raw: bytes, seat: Seat, named: str) -> CostFrame:
    """The frame in the body, for the seat the path names (`named`); a 422 Refusal naming
    the field that is wrong."""
    # Read as written: money is never a float, not even a whole one (contracts/money.py).
    frame = validated(json_body(raw, whole_numbers=False), CostFrame, "invalid_cost_frame")
    same_seat(frame.seat_id, seat, named, "invalid_cost_frame")
    return frame
