"""The goal steward's API (issue 10): its audit, and the operators' overrides of its gates.

    GET  /v1/steward/audit?objective=&limit=       the newest audit lines, newest first
    POST /v1/steward/overrides                     push one candidate past wip/trend/budget
    GET  /v1/steward/overrides?objective=&limit=   overrides, active or used, newest first

An override `{objective, candidate, by, reason, gates?}` lets a member of the org push ONE
candidate of an active objective past the wip, trend or budget gate (all three by default),
never past adoption, honesty or provenance; the steward's next run dispatches it and uses it
up. It answers 201 `recorded`, or 200 `duplicate` when the same active override exists; the
request itself is written to the audit (kind `override`, run id = the override id, so a
retry writes it once).

Refusals, all before anything is written: 413 / 415 (v1's), 422 naming the field for a body
that is not the shape above (unknown keys, a gate that cannot be overridden, a reason over
500 characters), 404 for an objective the org file does not have, 409 `objective_not_active`
(adoption cannot be overridden), 422 `unknown_member` (`by`) and `unknown_candidate`
(neither a playbook entry nor a candidate the audit has rejected), 409 `override_exists`
when another active override holds that candidate. The audit's refusals: 404 for an unknown
objective, 422 naming `limit` when it is not an integer in 1..500.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from contracts.api import AuditPage, OverrideRecorded, OverridesPage
from contracts.steward import OverrideRequest
from workers.ingress.deps import Deps
from workers.ingress.docs import BODY, GUARDED, answers, reads
from workers.ingress.http import json_body, problem, validated
from workers.ingress.objectives import known_objective
from workers.ingress.v1 import read_json, require_token
from workers.stores.overrides import OverrideRefused

router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)])

UNKNOWN_OBJECTIVE = {404: "no objective of that key in the org (`unknown_objective`)"}


@router.get(
    "/steward/audit",
    response_model=AuditPage,
    responses=answers({}, *GUARDED, 404, 422, why=UNKNOWN_OBJECTIVE),
)
async def get_audit(
    deps: Deps,
    objective: str | None = None,
    limit: int = Query(default=100, ge=1, le=500),
) -> Response:
    """The newest `limit` audit lines, newest first, each with its run id and time."""
    key = None if objective is None else known_objective(deps, objective).key
    records = await run_in_threadpool(deps.container.audit.read, key, limit)
    return JSONResponse({"entries": [r.to_wire() for r in records], "count": len(records)})


@router.post(
    "/steward/overrides",
    status_code=201,
    response_model=OverrideRecorded,
    responses=answers(
        {200: (OverrideRecorded, "the same override is already active (`duplicate`)")},
        *GUARDED,
        *BODY,
        404,
        409,
        why={
            **UNKNOWN_OBJECTIVE,
            409: "`objective_not_active`, or `override_exists` (another active override holds "
            "that candidate)",
            422: "a field is wrong (`detail` names it): also `unknown_member` (`by`) and "
            "`unknown_candidate`",
        },
    ),
    openapi_extra=reads(OverrideRequest),
)
async def post_override(request: Request, deps: Deps) -> Response:
    """Record one operator override; 201 when new, 200 `duplicate` when already recorded."""
    raw = await read_json(request, deps.settings.max_body_bytes)
    body = validated(json_body(raw), OverrideRequest, "invalid_override")
    view, now = deps.container.org.current()[0], deps.clock_ms()
    try:
        status, override = await run_in_threadpool(
            deps.container.overrides.submit, view, body, now_ms=now
        )
    except OverrideRefused as refused:
        r = refused.refusal
        detail = [{"field": r.field, "message": r.message, "type": r.code}]
        return problem(r.status, r.code, r.message, field=r.field, detail=detail)
    return JSONResponse(
        {"status": status, "override": override.to_wire()},
        status_code=201 if status == "recorded" else 200,
    )


@router.get(
    "/steward/overrides",
    response_model=OverridesPage,
    responses=answers({}, *GUARDED, 404, 422, why=UNKNOWN_OBJECTIVE),
)
async def get_overrides(
    deps: Deps,
    objective: str | None = None,
    limit: int = Query(default=100, ge=1, le=500),
) -> Response:
    """The newest `limit` overrides, active or used, of one objective or of all."""
    key = None if objective is None else known_objective(deps, objective).key
    found = await run_in_threadpool(deps.container.overrides.list, key, limit)
    return JSONResponse({"overrides": [o.to_wire() for o in found], "count": len(found)})
