"""The operational routes: liveness, readiness (Redis and the broker) and Prometheus metrics.
No token: a load balancer and a scraper call them."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from workers.ingress.deps import Deps, IngressDeps
from workers.ingress.http import UNAVAILABLE

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up (it says nothing about Redis or the broker)."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(deps: Deps) -> Response:
    """Ready only when Redis and the broker both answer."""
    checks = await run_in_threadpool(probe, deps)
    ok = all(v == "ok" for v in checks.values())
    return JSONResponse(
        {"status": "ready" if ok else "unavailable", "checks": checks},
        status_code=200 if ok else 503,
        headers=None if ok else {"Retry-After": "5"},
    )


@router.get("/metrics")
async def metrics(deps: Deps) -> Response:
    return Response(generate_latest(deps.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def probe(deps: IngressDeps) -> dict[str, str]:
    checks: dict[str, str] = {}
    try:
        deps.container.redis.ping()
        checks["redis"] = "ok"
    except UNAVAILABLE as exc:
        checks["redis"] = f"down: {exc}"
    try:
        with deps.celery.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        checks["broker"] = "ok"
    except UNAVAILABLE as exc:
        checks["broker"] = f"down: {exc}"
    return checks
