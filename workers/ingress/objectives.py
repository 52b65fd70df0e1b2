"""The objectives API (issue 10): KPI samples in, each objective's current gap out.

    POST /v1/objectives/{key}/samples   record one sample (idempotent per atMs and source)
    GET  /v1/objectives                 every objective, its current gap and gap decision
    GET  /v1/objectives/{key}/samples   its samples, newest first

The order of refusals is v1's, all before anything is written: 413 (size), 415 (content
type), 404 (objective), 422 (the field that is wrong), 409 (a sample id reused for other
content). `gapDecision` is `decide_for_gap(gap, coverage=0)` on the current gap: what the
number alone says, with no work counted as in flight; `lastDecision` is the goal steward's
latest gap decision for it (its run id, time, action and reason), or null before its first.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from contracts.api import ObjectivesPage, SampleRecorded, SamplesPage
from contracts.goals import Objective, Sample
from pipeline.goals.admission import decide_for_gap
from pipeline.goals.kpi import gap_for
from workers.ingress.deps import Deps, IngressDeps
from workers.ingress.docs import BODY, GUARDED, answers, reads
from workers.ingress.http import Refusal, field_errors, parse_json, problem
from workers.ingress.v1 import read_json, require_token
from workers.stores.audit import AuditRecord

MAX_FUTURE_SKEW_MS = 5 * 60 * 1000  # a sensor's clock may run a little ahead, not more

router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)])

UNKNOWN_OBJECTIVE = {404: "no objective of that key in the org (`unknown_objective`)"}


@router.post(
    "/objectives/{key}/samples",
    status_code=201,
    response_model=SampleRecorded,
    responses=answers(
        {200: (SampleRecorded, "the same sample was recorded before (`duplicate`)")},
        *GUARDED,
        *BODY,
        404,
        409,
        why={**UNKNOWN_OBJECTIVE, 409: "this sample id was recorded with other content"},
    ),
    openapi_extra=reads(Sample),
)
async def post_sample(key: str, request: Request, deps: Deps) -> Response:
    """Record one KPI sample; 201 when new, 200 `duplicate` when it was already recorded."""
    raw = await read_json(request, deps.settings.max_body_bytes)
    objective = known_objective(deps, key)
    sample = sample_of(raw, now_ms=deps.clock_ms())
    done = await run_in_threadpool(deps.container.samples.record, objective.key, sample)
    if done.outcome == "conflict":
        return problem(
            409,
            "sample_conflict",
            f"sample {done.sample_id} of {objective.key!r} was recorded with other content",
            id=done.sample_id,
            stored=done.stored.to_wire(),
        )
    body = {
        "status": done.outcome,
        "objective": objective.key,
        "id": done.sample_id,
        "sample": done.stored.to_wire(),
    }
    return JSONResponse(body, status_code=201 if done.outcome == "recorded" else 200)


@router.get("/objectives", response_model=ObjectivesPage, responses=answers({}, *GUARDED))
async def get_objectives(deps: Deps) -> Response:
    """Every objective of the org with its current gap, what the gap alone says, and the
    steward's last decision."""
    view = deps.container.org.current()[0]
    now = deps.clock_ms()
    rows = []
    last = await run_in_threadpool(
        deps.container.audit.last_decisions, [o.key for o in view.objectives]
    )
    for objective in view.objectives:
        samples = await run_in_threadpool(deps.container.samples.for_objective, objective)
        gap = gap_for(objective, samples, now)
        rows.append(
            {
                **objective.to_wire(),
                "gap": gap.to_wire(),
                "gapDecision": decide_for_gap(gap, coverage=0).to_wire(),
                "latestSample": samples[-1].to_wire() if samples else None,
                "lastDecision": _decision(last.get(objective.key)),
            }
        )
    return JSONResponse({"objectives": rows, "count": len(rows), "nowMs": now})


@router.get(
    "/objectives/{key}/samples",
    response_model=SamplesPage,
    responses=answers({}, *GUARDED, 404, 422, why=UNKNOWN_OBJECTIVE),
)
async def get_samples(
    key: str, deps: Deps, limit: int = Query(default=100, ge=1, le=500)
) -> Response:
    """An objective's samples, newest first."""
    objective = known_objective(deps, key)
    samples = await run_in_threadpool(deps.container.samples.newest, objective.key, limit)
    return JSONResponse(
        {
            "objective": objective.key,
            "samples": [s.to_wire() for s in samples],
            "count": len(samples),
        }
    )


def _decision(record: AuditRecord | None) -> dict[str, Any] | None:
    """The steward's latest gap decision for an objective, or None before its first run."""
    if record is None:
        return None
    entry = record.entry
    return {
        "runId": record.run_id,
        "atMs": record.at_ms,
        "action": entry.action,
        "reason": entry.reason,
    }


# --------------------------------------------------------------------------- the steps


def known_objective(deps: IngressDeps, key: str) -> Objective:
    """The objective a path names; a 404 Refusal when the org file has no such key."""
    objective = deps.container.org.current()[0].objective(key)
    if objective is None:
        raise Refusal(problem(404, "unknown_objective", f"no objective {key!r} in the org"))
    return objective


def sample_of(raw: bytes, *, now_ms: int) -> Sample:
    """The sample in the body; a 422 Refusal naming the field that is wrong. Strict: `"3"`
    and `true` are not numbers, NaN and infinity (which Python's json reads) are refused."""
    try:
        data = parse_json(raw, whole_numbers=True)
    except ValueError as exc:
        raise Refusal(
            refuse("invalid_json", f"the body is not JSON: {exc}", "(body)", "json_invalid")
        ) from None
    if not isinstance(data, dict):
        raise Refusal(refuse("invalid_sample", "send a JSON object", "(body)", "dict_type"))
    try:
        sample = Sample.model_validate(data, strict=True)
    except ValidationError as exc:
        raise Refusal(invalid_sample(exc)) from None
    if sample.at_ms > now_ms + MAX_FUTURE_SKEW_MS:
        message = f"atMs: {sample.at_ms} is more than 5 minutes after now ({now_ms})"
        raise Refusal(refuse("invalid_sample", message, "atMs", "future"))
    return sample


def invalid_sample(exc: ValidationError) -> JSONResponse:
    """v1's 422, each field named once: `value` rather than its union arms `value.int` and
    `value.float` (the last arm's message, the float one, says the most: "finite number")."""
    detail: dict[str, dict[str, str]] = {}
    for err in field_errors(exc):
        name = err["field"].split(".")[0]
        detail[name] = {**err, "field": name}
    errors = list(detail.values())
    message = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return problem(422, "invalid_sample", message, detail=errors)


def refuse(error: str, message: str, name: str, kind: str) -> JSONResponse:
    detail: list[dict[str, Any]] = [{"field": name, "message": message, "type": kind}]
    return problem(422, error, message, detail=detail)
