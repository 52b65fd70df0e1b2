"""A seat's turns over the API (issue 12 points 5 and 7): its status, an operator's pause,
resume and run-now, and the outcome of a turn an agent runtime reports after the fact.

    GET  /v1/seats/{seat}/status                     the controller's view of the seat
    POST /v1/seats/{seat}/pause | resume | run-now   an operator's control; the new status
    POST /v1/seats/{seat}/turns/{turn}/outcome       how a turn (launched over http) ended

An outcome is idempotent per turn: the outcome of the seat's running turn goes to the turns
stage, which settles it (202 `accepted`); the same outcome of a finished turn is 200
`duplicate`; another outcome for it is 409 `turn_finished`, a queued turn's is 409
`turn_not_started`, and a turn this seat never had (or no longer remembers) is 409
`turn_unknown`, never a silent success. The body is the `TurnOutcome` contract (unknown fields
refused, 422).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from contracts.api import OutcomeAccepted, OutcomeDuplicate, SeatStatus
from contracts.controller import TurnMessage, TurnOutcome
from pipeline.turns import Control, status_of
from workers.broker import publish
from workers.ingress.deps import Deps
from workers.ingress.docs import BODY, GUARDED, answers, reads
from workers.ingress.http import json_body, problem, validated
from workers.ingress.v1 import read_json, require_seat, require_token
from workers.queues import Task

router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)])
seat_router = APIRouter(prefix="/v1", dependencies=[Depends(require_seat)])

UNKNOWN_SEAT = {404: "no seat of that name in the org (`unknown_seat`)"}
CONTROL = answers({}, *GUARDED, 404, 429, why=UNKNOWN_SEAT)


@router.get(
    "/seats/{seat}/status",
    response_model=SeatStatus,
    responses=answers({}, *GUARDED, 404, why=UNKNOWN_SEAT),
)
async def get_status(seat: str, deps: Deps) -> Response:
    """The seat's last decision and reason, streak, session, next retry and last turns."""
    known = deps.seat(seat)
    read = await run_in_threadpool(deps.container.seat_runs.get, known.member_id)
    return JSONResponse(status_of(known, read.run))


async def _control(seat: str, deps: Deps, what: Control) -> Response:
    known = deps.seat(seat)
    run = await run_in_threadpool(
        lambda: deps.container.seat_runs.control(known.member_id, what, options=known.controller)
    )
    return JSONResponse(status_of(known, run))


@router.post("/seats/{seat}/pause", response_model=SeatStatus, responses=CONTROL)
async def pause_seat(seat: str, deps: Deps) -> Response:
    """Hold the seat's turns (a running turn is asked to stop: the decision says interrupt)."""
    return await _control(seat, deps, "pause")


@router.post("/seats/{seat}/resume", response_model=SeatStatus, responses=CONTROL)
async def resume_seat(seat: str, deps: Deps) -> Response:
    """Let the seat's turns run again."""
    return await _control(seat, deps, "resume")


@router.post("/seats/{seat}/run-now", response_model=SeatStatus, responses=CONTROL)
async def run_seat_now(seat: str, deps: Deps) -> Response:
    """Run a turn on the next tick, clearing a stop for failures (the operator's word)."""
    return await _control(seat, deps, "run-now")


@seat_router.post(
    "/seats/{seat}/turns/{turn}/outcome",
    status_code=202,
    response_model=OutcomeAccepted,
    responses=answers(
        {200: (OutcomeDuplicate, "the same outcome of a finished turn (`duplicate`)")},
        *GUARDED,
        *BODY,
        404,
        409,
        why={
            **UNKNOWN_SEAT,
            409: "`turn_not_started`, `turn_runs_locally` (a `command` turn: its worker reports "
            "its outcome), `turn_unknown`, or `turn_finished` (with another outcome)",
        },
    ),
    openapi_extra=reads(TurnOutcome),
)
async def post_outcome(seat: str, turn: str, request: Request, deps: Deps) -> Response:
    """Report how the seat's turn `turn` ended: 202 once it is on its way to the turns stage,
    which settles it; 200 for the same outcome of a finished turn; 409 otherwise."""
    raw = await read_json(request, deps.settings.max_body_bytes)
    known = deps.seat(seat)
    outcome = validated(json_body(raw), TurnOutcome, "invalid_outcome")
    run = (await run_in_threadpool(deps.container.seat_runs.get, known.member_id)).run
    active = run.active
    if active is not None and active.turn_id == turn:
        if active.state != "running":
            return problem(409, "turn_not_started", f"turn {turn} has not started yet")
        if active.agent is not None:
            # Its agent runs under a worker here, which settles the turn once the agent is
            # gone; settled from outside, the seat's next turn could start beside it.
            return problem(
                409,
                "turn_runs_locally",
                f"turn {turn} runs a command agent whose worker reports its outcome",
            )
        message = TurnMessage(seat_id=known.member_id, turn_id=turn, outcome=outcome)
        await run_in_threadpool(
            publish, deps.celery, Task.TURN, f"{turn}:outcome", message.to_wire()
        )
        return JSONResponse({"status": "accepted", "turnId": turn}, status_code=202)
    done = next((t for t in run.turns if t.turn_id == turn), None)
    if done is None:
        return problem(409, "turn_unknown", f"seat {seat} has no turn {turn} in flight or recent")
    if done.outcome == outcome:
        return JSONResponse({"status": "duplicate", "turn": done.to_wire()})
    return problem(
        409,
        "turn_finished",
        f"turn {turn} already ended ({done.outcome.kind}) with another outcome",
        outcome=done.outcome.to_wire(),
    )
