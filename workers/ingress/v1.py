"""The `/v1` API: work reports, the inbox, tracking, the ledger, traces and generic events.

Every route needs a bearer token of the right role (issue 13 point 6), checked by one
dependency on its router before the route's body runs (so a refusal reads and writes
nothing), each of which also gives the OpenAPI document its bearer scheme:

- `require_seat` (`seat_router`): a seat's own routes (`/v1/seats/{seat}/...` that the seat
  itself calls) take only that seat's token: another seat's is 403 `wrong_seat`, an
  operator token 403 `seat_only`;
- `require_token` (`router`): every other route takes only an operator token: a seat token
  is 403 `operator_only`.

Each role is its own bearer scheme in the OpenAPI document (`operatorToken`, `seatToken`), so a
generated client and a reader see which token a route takes.

No token, or one nobody issued (or revoked), is 401 `unauthorized`. Then, in order, before
anything is written: 413 (size), 415 (content type), 404 (seat), 422 (the field that is
wrong), 409 (a revision or delivery id reused for other content). A step that refuses
raises `Refusal`; an unreachable store raises and is the app's 503 (see app.py).
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from contracts import Candidate, Seat, Trace, UpdatesPage, WorkReport
from contracts.api import AckRequest, EventAccepted, LedgerPage, WorkAccepted
from contracts.ops import WorkStatus
from workers.ingress.accept import accept_inbound, accept_work
from workers.ingress.auth import Caller
from workers.ingress.deps import Deps
from workers.ingress.docs import BODY, GUARDED, answers, reads
from workers.ingress.http import (
    BodyTooLarge,
    Refusal,
    json_answer,
    json_body,
    media_type,
    parse_json,
    problem,
    read_body,
    read_capped,
    unsupported_media,
    validated,
)
from workers.status import work_status
from workers.stores.inbox import AckBeyondLast

operator_bearer = HTTPBearer(
    scheme_name="operatorToken",
    auto_error=False,
    description="An operator token (SEATWIRE_API_TOKEN is one; `seatwire token issue` makes "
    "more): every /v1 route but a seat's own.",
)
seat_bearer = HTTPBearer(
    scheme_name="seatToken",
    auto_error=False,
    description="The token of the seat the path names (`seatwire token issue --seat SEAT`): "
    "that seat's own routes.",
)
OperatorCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(operator_bearer)]
SeatCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(seat_bearer)]


async def authenticated(deps: Deps, credentials: HTTPAuthorizationCredentials | None) -> Caller:
    """The caller a bearer token names; a 401 Refusal for no token or an unknown one."""
    token = "" if credentials is None else credentials.credentials.strip()
    caller = await deps.auth.caller_async(token)
    if caller is None:
        raise Refusal(problem(401, "unauthorized", "a valid bearer token is required"))
    return caller


async def require_token(deps: Deps, credentials: OperatorCredentials) -> Caller:
    """An operator's routes: 401 without a valid token, 403 `operator_only` for a seat's."""
    caller = await authenticated(deps, credentials)
    if caller.role != "operator":
        raise Refusal(
            problem(403, "operator_only", "this route takes an operator token, not a seat's")
        )
    return caller


async def require_seat(request: Request, deps: Deps, credentials: SeatCredentials) -> Caller:
    """A seat's own routes (`/v1/seats/{seat}/...`): 401 without a valid token, 403
    `seat_only` for an operator token, 403 `wrong_seat` for another seat's token."""
    caller = await authenticated(deps, credentials)
    if caller.role != "seat" or caller.seat is None:
        raise Refusal(
            problem(
                403,
                "seat_only",
                "this route takes the token of the seat it names (an operator token acts "
                "as no seat)",
            )
        )
    named = str(request.path_params.get("seat", ""))
    if not deps.auth.seat_matches(caller, named):
        raise Refusal(
            problem(
                403,
                "wrong_seat",
                f"this token is the seat {caller.seat.member_id!r}'s: it is valid only on "
                "that seat's routes",
            )
        )
    return caller


router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)])
seat_router = APIRouter(prefix="/v1", dependencies=[Depends(require_seat)])

UNKNOWN_SEAT = {404: "no seat of that name in the org (`unknown_seat`)"}


@seat_router.post(
    "/seats/{seat}/work",
    status_code=202,
    response_model=WorkAccepted,
    responses=answers(
        {},
        *GUARDED,
        *BODY,
        404,
        409,
        why={**UNKNOWN_SEAT, 409: "this revision was reported with other content"},
    ),
    openapi_extra=reads(WorkReport),
)
async def post_work(seat: str, request: Request, deps: Deps) -> Response:
    """Report a piece of a seat's work; 202 with a tracking id once it is journalled."""
    raw = await read_json(request, deps.settings.max_body_bytes)
    known = deps.seat(seat)
    report = work_report(raw, known, seat)
    return await accept_work(deps, known.member_id, report)


@seat_router.get(
    "/seats/{seat}/updates",
    response_model=UpdatesPage,
    responses=answers({}, *GUARDED, 404, why=UNKNOWN_SEAT),
)
async def get_updates(seat: str, deps: Deps) -> Response:
    """A seat's unacknowledged inbox items, oldest first (at most 50 items or 64 KB); the
    same items come back until `POST .../updates/ack` acknowledges their position."""
    known = deps.seat(seat)
    page = await run_in_threadpool(deps.container.inbox.updates, known.member_id)
    return JSONResponse(page.to_wire())


@seat_router.post(
    "/seats/{seat}/updates/ack",
    response_model=UpdatesPage,
    responses=answers(
        {},
        *GUARDED,
        404,
        409,
        422,
        429,
        why={
            **UNKNOWN_SEAT,
            409: "`position` is beyond the last item (`ack_beyond_last`, with `last`)",
            422: "not an object with a non-negative integer `position` (`invalid_ack`)",
        },
    ),
    openapi_extra=reads(AckRequest),
)
async def ack_updates(seat: str, request: Request, deps: Deps) -> Response:
    """Acknowledge every inbox item up to `position`; answers with the next page."""
    known = deps.seat(seat)
    position = await ack_position(request)
    try:
        page = await run_in_threadpool(deps.container.inbox.ack, known.member_id, position)
    except AckBeyondLast as exc:
        return problem(409, "ack_beyond_last", str(exc), last=exc.last)
    return JSONResponse(page.to_wire())


@router.get(
    "/work/{tracking_id}",
    response_model=WorkStatus,
    responses=answers(
        {}, *GUARDED, 404, why={404: "nothing was accepted as it (`unknown_tracking_id`)"}
    ),
)
async def get_work(tracking_id: str, deps: Deps) -> Response:
    """Where one reported piece of work stands: its state, decision and send."""
    found = await run_in_threadpool(work_status, deps.container, tracking_id)
    if found is None:
        return problem(404, "unknown_tracking_id", f"nothing was accepted as {tracking_id}")
    return JSONResponse(found.to_wire())


@router.get(
    "/ledger",
    response_model=LedgerPage,
    responses=answers({}, *GUARDED, 404, 422, why=UNKNOWN_SEAT),
)
async def get_ledger(
    deps: Deps,
    seat: str | None = None,
    work_id: str | None = Query(default=None, alias="workId"),
    limit: int = Query(default=100, ge=1, le=1000),
) -> Response:
    """Ledger rows, newest first: every engagement, refusal and considered 'nobody'."""
    seat_ids = None if seat is None else [deps.seat(seat).member_id]
    rows = await run_in_threadpool(
        lambda: deps.container.ledger.read(seat_ids=seat_ids, work_id=work_id, limit=limit)
    )
    return JSONResponse({"rows": [r.to_wire() for r in rows], "count": len(rows)})


@router.get(
    "/trace/{delivery_id:path}",
    response_model=Trace,
    responses=answers(
        {}, *GUARDED, 404, why={404: "no inbound event of that delivery id (`unknown_delivery`)"}
    ),
)
async def get_trace(delivery_id: str, deps: Deps) -> Response:
    """Everything decided about one inbound event: whether it was accepted, skipped or
    resolved, and for every seat whether it was directed there and why (or why not)."""
    trace = await run_in_threadpool(deps.container.inbound.trace, delivery_id)
    if trace is None:
        return problem(404, "unknown_delivery", f"no inbound event {delivery_id!r} was received")
    return JSONResponse(trace.to_wire())


@router.post(
    "/events",
    status_code=202,
    response_model=EventAccepted,
    responses=answers(
        {}, *GUARDED, *BODY, 409, why={409: "this delivery id came with other content"}
    ),
    openapi_extra=reads(Candidate),
)
async def post_event(request: Request, deps: Deps) -> Response:
    """A normalised `Candidate` from any other source; 202 once it is journalled."""
    raw = await read_json(request, deps.settings.max_body_bytes)
    candidate = validated(json_body(raw, "invalid_candidate"), Candidate, "invalid_candidate")
    fingerprint = hashlib.sha256(candidate.model_dump_json(by_alias=True).encode()).hexdigest()
    return await accept_inbound(
        deps,
        candidate,
        budget_s=deps.settings.ingress_budget_s,
        fingerprint=fingerprint,
        accepted=202,
        render=json_answer,
    )


# --------------------------------------------------------------------------- the steps


async def read_json(request: Request, cap: int) -> bytes:
    """The raw body of a JSON write (413 over `cap`, 415 for another content type)."""
    raw = await read_body(request, cap)
    ctype = media_type(request)
    if ctype not in ("application/json", ""):
        raise Refusal(unsupported_media(ctype))
    return raw


def work_report(raw: bytes, seat: Seat, named: str) -> WorkReport:
    """The report in the body, for the seat the path names (`named`); a 422 Refusal naming
    the field that is wrong."""
    report = validated(json_body(raw), WorkReport, "invalid_work_report")
    same_seat(report.seat_id, seat, named, "invalid_work_report")
    return report


def same_seat(claimed: str | None, seat: Seat, named: str, error: str) -> None:
    """A 422 Refusal (`error`, field `seatId`) when a body names another seat than its path."""
    if claimed is not None and seat.answers_to(claimed) is False:
        message = f"seatId: {claimed!r} does not match the seat in the path ({named!r})"
        detail = [{"field": "seatId", "message": "does not match the path", "type": "value_error"}]
        raise Refusal(problem(422, error, message, detail=detail))


async def ack_position(request: Request) -> int:
    """The `position` of an ack body; a 422 Refusal unless it is a non-negative integer."""
    position: Any
    try:
        body = parse_json(await read_capped(request, 4096), whole_numbers=True)
        position = body["position"] if isinstance(body, dict) else None
    except (BodyTooLarge, ValueError, KeyError):
        position = None
    if not isinstance(position, int) or isinstance(position, bool) or position < 0:
        raise Refusal(
            problem(
                422,
                "invalid_ack",
                'send {"position": N} with the integer position from your last read',
                detail=[
                    {"field": "position", "message": "a non-negative integer", "type": "int_type"}
                ],
            )
        )
    return position
