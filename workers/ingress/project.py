"""The project's start, pause, resume and announcements (issue 13, the project-wide
items of `get_updates`), for an operator. Each sets the project's flag (if it has one) and
puts one item in every seat's inbox, in one step (workers/stores/project.py).

    POST /v1/project/start | pause | resume    {by?}
    POST /v1/project/announcements             {body, by?}

200 `{event, seats, item}`; 422 for a body that is not what the route takes.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from contracts.api import ProjectNotified
from workers.ingress.deps import Deps
from workers.ingress.docs import BODY, GUARDED, answers, reads
from workers.ingress.http import json_body, validated
from workers.ingress.v1 import read_json, require_token
from workers.stores.project import ProjectEvent

router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)])
# Something besides the whitespace pydantic strips (Rust's `trim`, which keeps \x1c-\x1f).
NOT_BLANK = r"[^\t-\r\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
By = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=200),
    Field(json_schema_extra={"pattern": NOT_BLANK}),
]


class ProjectChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    by: By = "operator"


class Announcement(ProjectChange):
    body: Annotated[str, Field(min_length=1, max_length=2000)]


async def _notify(
    request: Request, deps: Deps, event: ProjectEvent, model: type[ProjectChange]
) -> Response:
    raw = await read_json(request, deps.settings.max_body_bytes)
    change = validated(json_body(raw) if raw.strip() else {}, model, "invalid_project_change")
    seats = [s.member_id for s in deps.container.org.current()[0].org.seats]
    body = change.body if isinstance(change, Announcement) else None
    notified = await run_in_threadpool(
        lambda: deps.container.project.notify(
            event, seats, by=change.by, now_ms=deps.clock_ms(), body=body
        )
    )
    # `full`: the seats whose inbox held its cap of unread items; the item is not in theirs
    return JSONResponse(
        {
            "event": event,
            "seats": len(seats),
            "full": list(notified.full),
            "item": notified.item.to_wire(),
        }
    )


NOTIFIED = answers({}, *GUARDED, *BODY)
CHANGE = reads(ProjectChange, required=False, description="an empty body is `{}`")


@router.post(
    "/project/start", response_model=ProjectNotified, responses=NOTIFIED, openapi_extra=CHANGE
)
async def start_project(request: Request, deps: Deps) -> Response:
    """Start the project: every seat hears of it; the controller then runs them."""
    return await _notify(request, deps, "start", ProjectChange)


@router.post(
    "/project/pause", response_model=ProjectNotified, responses=NOTIFIED, openapi_extra=CHANGE
)
async def pause_project(request: Request, deps: Deps) -> Response:
    """Pause the project: every seat's turns wait (a running turn is asked to stop)."""
    return await _notify(request, deps, "pause", ProjectChange)


@router.post(
    "/project/resume", response_model=ProjectNotified, responses=NOTIFIED, openapi_extra=CHANGE
)
async def resume_project(request: Request, deps: Deps) -> Response:
    """Resume the project."""
    return await _notify(request, deps, "resume", ProjectChange)


@router.post(
    "/project/announcements",
    response_model=ProjectNotified,
    responses=NOTIFIED,
    openapi_extra=reads(Announcement),
)
async def announce(request: Request, deps: Deps) -> Response:
    """An announcement to every seat (project-only news: the seats' turns are spread out)."""
    return await _notify(request, deps, "announcement", Announcement)
