"""Project directions over HTTP for people (issue 13): reading them, human votes, the
owner's early end and the resolver's decisions. The seats' side is the decision tools
(workers/tools/decisions.py); these routes run the same operations.

    GET  /v1/decisions[?cursor=&memberId=]          20 a page in id order, `next` cursor
    GET  /v1/decisions/{id}[?memberId=]             the direction (and that member's vote)
    GET  /v1/decisions/{id}/log                     its audit log, oldest first
    POST /v1/decisions/{id}/votes   {memberId, option, reason?, expectedRevision,
                                     clientRequestId}               a person's vote (weight 2)
    POST /v1/decisions/{id}/end     {by, clientRequestId, reason?}  the owner ends voting now
    POST /v1/decisions/{id}/decide  {by, action, option?, reason, expectedRevision,
                                     clientRequestId}               the policy's resolver

A vote here is a person's: `memberId` is a member of the org who is not a seat (a seat votes
with its `vote` tool, weight 1). Every write carries a `clientRequestId`: a replay answers
the original receipt, another body under the same id is a 409. Refusals are the tools'
(`{error, message, field?}`) with their status; a body the schema refuses is a 422 naming
each field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from pydantic import Field, StrictInt, StrictStr

from contracts._base import StrictWire
from contracts.api import DirectionLog, DirectionsPage, DirectionView, Receipt
from contracts.tools import MAX_SAFE, ToolError
from pipeline import decisions as rules
from workers.ingress.deps import Deps
from workers.ingress.docs import BODY, GUARDED, answers, reads
from workers.ingress.http import json_body, problem, validated
from workers.ingress.v1 import read_json, require_token
from workers.stages import directions as ops

router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)])

DIRECTION_ID = r"^[a-f0-9]{64}$"
RequestId = Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
Member = Annotated[StrictStr, Field(min_length=1, max_length=200)]
OPERATOR_VIEWER = "operator"  # the listing cursor's scope when no member is named


class HumanVote(StrictWire):
    member_id: Member
    option: Annotated[StrictInt, Field(ge=0, le=1)]
    reason: Annotated[StrictStr, Field(max_length=280)] = ""
    expected_revision: Annotated[StrictInt, Field(ge=0, le=MAX_SAFE - 1)]
    client_request_id: RequestId


class EndVoting(StrictWire):
    by: Member
    client_request_id: RequestId
    reason: Annotated[StrictStr, Field(max_length=500)] = ""


class HumanDecision(StrictWire):
    by: Member
    action: Literal["resolve_tie", "approve", "reject"]
    option: Annotated[StrictInt, Field(ge=0, le=1)] | None = None
    reason: Annotated[StrictStr, Field(min_length=1, max_length=500)]
    expected_revision: Annotated[StrictInt, Field(gt=0, le=MAX_SAFE - 1)]
    client_request_id: RequestId


async def _run(work: Callable[[], dict[str, Any]]) -> Response:
    try:
        return JSONResponse(await run_in_threadpool(work))
    except ToolError as exc:
        return JSONResponse(exc.to_wire(), status_code=exc.status)


def _check_id(direction_id: str) -> Response | None:
    if len(direction_id) == 64 and all(ch in "0123456789abcdef" for ch in direction_id):
        return None
    return problem(
        422,
        "invalid_direction_id",
        "direction id: 64 lowercase hex characters (an id open_decision or GET /v1/decisions "
        "returned)",
        field="directionId",
    )


def _person(deps: Deps, member_id: str, field: str) -> Response | None:
    """None for a member of the org who is not a seat; else the 422 saying why not."""
    view = deps.container.org.current()[0]
    if view.member(member_id) is None:
        return problem(
            422, "unknown_member", f"{field}: {member_id!r} is not a member of the org", field=field
        )
    if view.seat(member_id) is not None:
        return problem(
            422,
            "seat_not_person",
            f"{field}: {member_id!r} is a seat; a seat acts with its own tools (vote, "
            "decide_direction) under its own token, not here",
            field=field,
        )
    return None


# Documented, and checked by `_check_id` (its own 422, `invalid_direction_id`).
DirectionPath = Annotated[str, Path(json_schema_extra={"pattern": DIRECTION_ID})]
UNKNOWN = {404: "there is no direction of that id (`unknown_direction`)"}
READ = answers({}, *GUARDED, 404, 422, why=UNKNOWN)
WRITE = answers(
    {},
    *GUARDED,
    *BODY,
    404,
    409,
    why={
        **UNKNOWN,
        403: "a token of the wrong role, or a person the policy does not let act (`not_permitted`)",
        409: "the direction's state refuses it (`voting_closed`, `voting_open`, `wrong_state`, "
        "`revision_conflict`), or the clientRequestId was used for another write "
        "(`request_conflict`)",
        422: "a field is wrong (`detail` or `field` names it): also `unknown_member` and "
        "`seat_not_person`",
        503: "the direction changed under every attempt (`busy`), or a store is unavailable: "
        "retry after Retry-After",
    },
)


@router.get(
    "/decisions",
    response_model=DirectionsPage,
    responses=answers({}, *GUARDED, 422, why={422: "`cursor` is not one of your listing's"}),
)
async def list_directions(
    deps: Deps,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
    member_id: Annotated[str | None, Query(alias="memberId")] = None,
) -> Response:
    """Up to 20 directions in id order (each closed first when its deadline has passed)."""
    viewer = member_id or OPERATOR_VIEWER
    return await _run(lambda: ops.page(deps.container, viewer, cursor, deps.clock_ms()))


@router.get("/decisions/{direction_id}", response_model=DirectionView, responses=READ)
async def get_direction(
    direction_id: DirectionPath,
    deps: Deps,
    member_id: Annotated[str | None, Query(alias="memberId")] = None,
) -> Response:
    """One direction, with `memberId`'s vote when one is named."""
    bad = _check_id(direction_id)
    if bad is not None:
        return bad
    return await _run(lambda: ops.read(deps.container, direction_id, member_id, deps.clock_ms()))


@router.get("/decisions/{direction_id}/log", response_model=DirectionLog, responses=READ)
async def get_direction_log(direction_id: DirectionPath, deps: Deps) -> Response:
    """Every change of one direction, oldest first."""
    bad = _check_id(direction_id)
    if bad is not None:
        return bad
    if await run_in_threadpool(deps.container.decisions.read, direction_id) is None:
        return problem(404, "unknown_direction", f"there is no direction {direction_id}")
    log = await run_in_threadpool(deps.container.decisions.log, direction_id)
    return JSONResponse({"directionId": direction_id, "log": log})


@router.post(
    "/decisions/{direction_id}/votes",
    response_model=Receipt,
    responses=WRITE,
    openapi_extra=reads(HumanVote),
)
async def post_vote(direction_id: DirectionPath, request: Request, deps: Deps) -> Response:
    """A person's vote (weight 2), cast or changed before the deadline."""
    bad = _check_id(direction_id)
    if bad is not None:
        return bad
    raw = await read_json(request, deps.settings.max_body_bytes)
    body = validated(json_body(raw), HumanVote, "invalid_vote")
    bad = _person(deps, body.member_id, "memberId")
    if bad is not None:
        return bad
    now = deps.clock_ms()
    return await _run(
        lambda: ops.cast_vote(
            deps.container,
            direction_id,
            member_id=body.member_id,
            kind=rules.HUMAN,
            option=body.option,
            reason=body.reason,
            expected_revision=body.expected_revision,
            client_request_id=body.client_request_id,
            now_ms=now,
        )
    )


@router.post(
    "/decisions/{direction_id}/end",
    response_model=Receipt,
    responses=WRITE,
    openapi_extra=reads(EndVoting),
)
async def post_end(direction_id: DirectionPath, request: Request, deps: Deps) -> Response:
    """The project owner (the frozen policy's ownerId) ends voting now."""
    bad = _check_id(direction_id)
    if bad is not None:
        return bad
    raw = await read_json(request, deps.settings.max_body_bytes)
    body = validated(json_body(raw), EndVoting, "invalid_end")
    now = deps.clock_ms()
    return await _run(
        lambda: ops.end_voting(
            deps.container,
            direction_id,
            by=body.by,
            client_request_id=body.client_request_id,
            reason=body.reason,
            now_ms=now,
        )
    )


@router.post(
    "/decisions/{direction_id}/decide",
    response_model=Receipt,
    responses=WRITE,
    openapi_extra=reads(HumanDecision),
)
async def post_decide(direction_id: DirectionPath, request: Request, deps: Deps) -> Response:
    """The frozen policy's resolver, a person: resolve a tie, approve or reject."""
    bad = _check_id(direction_id)
    if bad is not None:
        return bad
    raw = await read_json(request, deps.settings.max_body_bytes)
    body = validated(json_body(raw), HumanDecision, "invalid_decision")
    bad = _person(deps, body.by, "by")
    if bad is not None:
        return bad
    now = deps.clock_ms()
    return await _run(
        lambda: ops.decide_as(
            deps.container,
            direction_id,
            actor=body.by,
            action=body.action,
            option=body.option,
            reason=body.reason,
            expected_revision=body.expected_revision,
            client_request_id=body.client_request_id,
            now_ms=now,
        )
    )
