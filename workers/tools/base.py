"""The frame every coordination tool runs in (issue 13): who calls it, how a call is
validated, how a refusal is said. Served as MCP tools (workers/ingress/mcp.py, `seatwire mcp`)
and as HTTP routes (workers/ingress/tools.py), from this one registry.

A tool is `run(ctx, args) -> result`: `ctx` names the calling seat (from its credentials,
never from an argument) and the process's stores; `args` is the tool's input model, already
validated against the tool's input schema (contracts/tools.py). A refusal is a `ToolError`
with a stable code, a message that names the field and the fix, and the HTTP status the route
answers with; MCP answers it as a tool result with `isError`. A tool either writes all it
means to (one atomic step in Redis) or nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from celery import Celery
from pydantic import BaseModel, ValidationError

from contracts import Seat
from contracts.tool_schemas import SERVED_INPUT_SCHEMAS, SERVED_TOOL_NAMES
from contracts.tools import SERVED_TOOL_INPUTS, ToolError
from pipeline.paging import Measure, json_bytes

__all__ = ["REGISTRY", "Tool", "ToolContext", "ToolError", "call", "tool", "validate"]
from workers.container import Container
from workers.stores import keys


@dataclass(frozen=True)
class ToolContext:
    """One call: the process's container and app, the calling seat, the time of the call, and
    how many bytes a result takes as this caller receives it (its transport's encoding: the
    HTTP routes' compact JSON unless the transport says otherwise), which a paged tool fits
    its byte cap to."""

    container: Container
    app: Celery
    seat: Seat
    now_ms: int
    measure: Measure = json_bytes


M = TypeVar("M", bound=BaseModel)
Run = Callable[[ToolContext, Any], dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_model: type[BaseModel]
    run: Run
    schema: dict[str, Any] = field(default_factory=dict)


REGISTRY: dict[str, Tool] = {}


def tool(
    name: str, description: str
) -> Callable[[Callable[[ToolContext, M], dict[str, Any]]], Run]:
    """Register `run` as the tool `name` (one of the fifteen project tools, or one of
    Seatwire's own, listed in contracts/tool_schemas.py), with Seatwire's description."""
    if name not in SERVED_TOOL_NAMES:
        raise ValueError(f"{name!r} is not one of the tools contracts/tool_schemas.py names")

    def register(run: Callable[[ToolContext, M], dict[str, Any]]) -> Run:
        if name in REGISTRY:
            raise ValueError(f"the tool {name} is registered twice")
        REGISTRY[name] = Tool(
            name, description, SERVED_TOOL_INPUTS[name], run, SERVED_INPUT_SCHEMAS[name]
        )
        return run

    return register


def validate(name: str, arguments: Mapping[str, Any] | None) -> BaseModel:
    """The arguments as the tool's input model; a 422 `invalid_arguments` naming each field."""
    model = SERVED_TOOL_INPUTS[name]
    try:
        return model.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
            problems.append({"field": where, "message": err["msg"]})
        message = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
        raise ToolError(
            "invalid_arguments",
            f"{name}: {message} (see the tool's input schema)",
            field=problems[0]["field"] if problems else None,
            status=422,
            detail=problems,
        ) from None


def call(ctx: ToolContext, name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """Run tool `name` as `ctx.seat`: validated, then run; every refusal a ToolError. Any
    call, refused or not, is the seat's contact (its freshness in `find_agents`)."""
    ctx.container.redis.hset(keys.seat_state(ctx.seat.member_id), "lastCallMs", ctx.now_ms)
    found = REGISTRY.get(name)
    if found is None:
        if name in SERVED_TOOL_NAMES:
            raise ToolError(
                "not_implemented",
                f"{name} is one of the project tools that Seatwire does not serve yet: nothing "
                "was done (see the list of tools in docs/tools.md)",
                status=501,
            )
        raise ToolError("unknown_tool", f"there is no tool {name!r}", status=404)
    return found.run(ctx, validate(name, arguments))
