"""A seat's coordination tools as plain HTTP routes (issue 13): the same registry the MCP
server serves (workers/tools/), one route per tool.

    POST /v1/seats/{seat}/tools/{tool}    body: the tool's arguments (a JSON object)

200 with the tool's result; a refusal answers with its status and `{error, message, field?}`
(422 for arguments the tool's input schema refuses, naming each field; 404 for a tool that
does not exist; 501 for one of the fifteen project tools Seatwire does not serve yet). The
seat is the one the path names, the token must be that seat's own (v1.py `require_seat`), and
the call acts as that seat.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from contracts.api import ToolResult
from workers.ingress.deps import Deps
from workers.ingress.docs import BODY, GUARDED, answers
from workers.ingress.http import json_body, problem
from workers.ingress.v1 import read_json, require_seat
from workers.tools import ToolContext, ToolError, call, load

router = APIRouter(prefix="/v1", dependencies=[Depends(require_seat)])
load()


@router.post(
    "/seats/{seat}/tools/{name}",
    response_model=ToolResult,
    responses=answers(
        {},
        *GUARDED,
        *BODY,
        404,
        409,
        501,
        why={
            403: "a token of the wrong role or seat, or a tool's own refusal",
            404: "no such tool (`unknown_tool`), or what the arguments name does not exist",
            409: "the tool's refusal: the call conflicts with what is recorded",
            422: "arguments the tool's input schema refuses (`field` names the argument)",
        },
    ),
    openapi_extra={
        "requestBody": {
            "required": False,
            "description": "the tool's arguments (its input schema is in `tools/list` over "
            "/mcp); an empty body is no arguments",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
)
async def post_tool(seat: str, name: str, request: Request, deps: Deps) -> Response:
    """Call one of the seat's tools with the JSON arguments in the body."""
    raw = await read_json(request, deps.settings.max_body_bytes)
    known = deps.seat(seat)
    arguments = json_body(raw) if raw.strip() else {}
    if not isinstance(arguments, dict):
        return problem(422, "invalid_arguments", "the body must be a JSON object of arguments")
    ctx = ToolContext(deps.container, deps.celery, known, deps.clock_ms())
    try:
        result = await run_in_threadpool(call, ctx, name, arguments)
    except ToolError as exc:
        return JSONResponse(exc.to_wire(), status_code=exc.status)
    return JSONResponse(result)
