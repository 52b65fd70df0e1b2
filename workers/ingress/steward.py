"""The goal steward's audit (issue 10): `GET /v1/steward/audit?objective=&limit=` reads the
newest audit lines, newest first, of one objective or of all.

Refusals: 404 for an objective the org file does not have, 422 naming `limit` when it is not
an integer in 1..500. The steward that writes the audit is not built yet, so until it is the
audit is empty.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from workers.ingress.deps import Deps
from workers.ingress.objectives import known_objective
from workers.ingress.v1 import require_token

router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)])


@router.get("/steward/audit")
async def get_audit(
    deps: Deps,
    objective: str | None = None,
    limit: int = Query(default=100, ge=1, le=500),
) -> Response:
    """The newest `limit` audit lines, newest first, each with its run id and time."""
    key = None if objective is None else known_objective(deps, objective).key
    records = await run_in_threadpool(deps.container.audit.read, key, limit)
    return JSONResponse({"entries": [r.to_wire() for r in records], "count": len(records)})
