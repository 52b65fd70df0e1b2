"""The operational routes: liveness and readiness (Redis and the broker), which a load balancer
calls without a token, and Prometheus metrics, which take an operator token.

The metrics carry the cluster's figures (queue depths, the journal, the beat leader), which are
nobody's business on the port the ingress publishes. A scraper reads the same registry without
a token on SEATWIRE_METRICS_PORT (`seatwire ingress` serves it there, as the workers serve
theirs), a port a deployment keeps on its internal network; `/metrics` here is for an
operator holding a token, and for `seatwire up`, which serves no metrics port."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from contracts.api import Health, Readiness
from workers.ingress.deps import Deps, IngressDeps
from workers.ingress.docs import COMPONENTS, GUARDED, RETRY_AFTER, answers
from workers.ingress.http import UNAVAILABLE
from workers.ingress.v1 import require_token
from workers.settings import scrubbed

router = APIRouter()


def as_json(answer: dict[str, Any]) -> dict[str, Any]:
    """A refusal's `answers` entry with its `Problem` body named as JSON: FastAPI would put a
    `model` under the route's own media type, this route's text/plain."""
    model = answer.pop("model")
    answer["content"] = {"application/json": {"schema": {"$ref": COMPONENTS + model.__name__}}}
    return answer


@router.get("/healthz", response_model=Health)
async def healthz() -> dict[str, str]:
    """The process is up (it says nothing about Redis or the broker)."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={
        503: {
            "model": Readiness,
            "description": "Redis or the broker does not answer (`checks` says which)",
            "headers": RETRY_AFTER,
        }
    },
)
async def readyz(deps: Deps) -> Response:
    """Ready only when Redis and the broker both answer."""
    checks = await run_in_threadpool(probe, deps)
    ok = all(v == "ok" for v in checks.values())
    return JSONResponse(
        {"status": "ready" if ok else "unavailable", "checks": checks},
        status_code=200 if ok else 503,
        headers=None if ok else {"Retry-After": "5"},
    )


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    dependencies=[Depends(require_token)],
    responses={
        200: {
            "description": "Prometheus's text exposition format",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        **{status: as_json(answer) for status, answer in answers({}, *GUARDED).items()},
    },
)
async def metrics(deps: Deps) -> Response:
    # Off the event loop: the cluster's figures are read from Redis and the broker.
    body = await run_in_threadpool(generate_latest, deps.metrics.registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def probe(deps: IngressDeps) -> dict[str, str]:
    """Each of Redis and the broker `ok` or `down: why`; a driver's error may quote the URL
    it was given, so its secrets are scrubbed (anyone may ask /readyz)."""
    checks: dict[str, str] = {}
    urls = (deps.settings.redis_url, deps.settings.resolved_broker_url)
    try:
        deps.container.redis.ping()
        checks["redis"] = "ok"
    except UNAVAILABLE as exc:
        checks["redis"] = f"down: {scrubbed(exc, *urls)}"
    try:
        with deps.celery.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        checks["broker"] = "ok"
    except UNAVAILABLE as exc:
        checks["broker"] = f"down: {scrubbed(exc, *urls)}"
    return checks
