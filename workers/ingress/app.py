"""The HTTP ingress (FastAPI). A write is answered 2xx only after it is journalled AND enqueued.

Every refusal happens before anything is written: 401 (token), 413 (size), 415 (content
type), 404 (seat), 422 (the field that is wrong), 409 (a revision reused for another report).
Redis or the broker unreachable is a 503 with Retry-After, never a 2xx.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from celery import Celery
from fastapi import FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from pydantic import ValidationError

from contracts import Seat, Trace, WorkReport
from contracts.messages import WorkEnvelope
from workers.clock import now_ms
from workers.container import Container
from workers.ingress.accept import Arrival, intake_for
from workers.ingress.http import (
    UNAVAILABLE,
    BodyTooLarge,
    invalid,
    media_type,
    problem,
    read_capped,
    too_large,
    unsupported_media,
    within_budget,
)
from workers.ingress.webhooks import inbound_routes, provider_paths
from workers.queues import Task
from workers.stores.inbox import AckBeyondLast


def tracking_id_for(seat_id: str, work_id: str, revision: int) -> str:
    """Deterministic: the same (seat, work, revision) is the same event, however often posted."""
    digest = hashlib.sha256(f"{seat_id}\x1f{work_id}\x1f{revision}".encode()).hexdigest()
    return f"wr-{digest[:24]}"


def create_ingress(
    container: Container, app: Celery, *, clock_ms: Callable[[], int] = now_ms
) -> FastAPI:
    settings = container.settings
    token = settings.token().encode()
    registry = CollectorRegistry()
    requests = Counter(
        "seatwire_ingress_requests",
        "Ingress requests by route and status",
        ["route", "status"],
        registry=registry,
    )
    intake = intake_for(settings, container.journal, app)

    @asynccontextmanager
    async def lifespan(_api: FastAPI) -> AsyncIterator[None]:
        yield
        await intake.aclose()

    api = FastAPI(
        title="Seatwire",
        version="0.1.0",
        description="Work reports in; engagements decided, guarded and sent exactly once.",
        lifespan=lifespan,
    )

    def authorised(request: Request) -> bool:
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token)

    def unauthorised() -> JSONResponse:
        return problem(401, "unauthorized", "a valid bearer token is required")

    def seat_of(ident: str) -> Seat | JSONResponse:
        """The seat a path names (by member id or alias), or the 404 that says it is unknown."""
        seat = container.org.current()[0].seat(ident)
        return (
            seat
            if seat is not None
            else problem(404, "unknown_seat", f"no seat {ident!r} in the org")
        )

    counters: dict[tuple[str, int], Any] = {}

    def count(route: str, response: Response) -> Response:
        key = (route, response.status_code)
        counter = counters.get(key)
        if counter is None:
            counter = counters[key] = requests.labels(route, str(response.status_code))
        counter.inc()
        return response

    async def journal_and_enqueue(seat_id: str, report: WorkReport) -> tuple[int, dict[str, Any]]:
        tracking = tracking_id_for(seat_id, report.id, report.revision)
        fingerprint = hashlib.sha256(report.model_dump_json(by_alias=True).encode()).hexdigest()
        accepted_at = clock_ms()
        payload = WorkEnvelope(
            tracking_id=tracking, seat_id=seat_id, accepted_at_ms=accepted_at, report=report
        ).model_dump_json(by_alias=True)
        done = await intake.accept(
            Arrival(
                task=Task.ENGAGEMENT,
                tracking_id=tracking,
                kind="work",
                seat_id=seat_id,
                payload=payload,
                fingerprint=fingerprint,
                now_ms=accepted_at,
            )
        )
        if done.verb == "conflict":
            return 409, {
                "error": "revision_reused",
                "message": f"work {report.id} revision {report.revision} was already reported "
                "with different content; report the change with a higher revision",
                "trackingId": tracking,
            }
        return 202, {
            "trackingId": tracking,
            "status": "accepted" if done.new else "duplicate",
            "state": done.state,
        }

    @api.post("/v1/seats/{seat}/work", status_code=202)
    async def post_work(seat: str, request: Request) -> Response:
        """Report a piece of a seat's work; 202 with a tracking id once it is journalled."""
        route = "work"
        if not authorised(request):
            return count(route, unauthorised())
        try:
            raw = await read_capped(request, settings.max_body_bytes)
        except BodyTooLarge:
            return count(route, too_large(settings.max_body_bytes))
        ctype = media_type(request)
        if ctype not in ("application/json", ""):
            return count(
                route,
                unsupported_media(ctype),
            )
        known = seat_of(seat)
        if not isinstance(known, Seat):
            return count(route, known)
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return count(
                route,
                problem(
                    422,
                    "invalid_json",
                    f"the body is not JSON: {exc}",
                    detail=[{"field": "(body)", "message": str(exc), "type": "json_invalid"}],
                ),
            )
        try:
            report = WorkReport.model_validate(data)
        except ValidationError as exc:
            return count(route, invalid("invalid_work_report", exc))
        if report.seat_id is not None and known.answers_to(report.seat_id) is False:
            return count(
                route,
                problem(
                    422,
                    "invalid_work_report",
                    f"seatId: {report.seat_id!r} does not match the seat in the path ({seat!r})",
                    detail=[
                        {
                            "field": "seatId",
                            "message": "does not match the path",
                            "type": "value_error",
                        }
                    ],
                ),
            )
        done = await within_budget(
            settings.ingress_budget_s, journal_and_enqueue(known.member_id, report)
        )
        if isinstance(done, Response):
            return count(route, done)
        status, body = done
        return count(route, JSONResponse(body, status_code=status))

    @api.get("/v1/seats/{seat}/updates")
    async def get_updates(seat: str, request: Request) -> Response:
        """A seat's unacknowledged inbox items, oldest first (at most 50 items or 64 KB); the
        same items come back until `POST .../updates/ack` acknowledges their position."""
        if not authorised(request):
            return unauthorised()
        known = seat_of(seat)
        if not isinstance(known, Seat):
            return known
        try:
            page = await run_in_threadpool(container.inbox.updates, known.member_id)
        except UNAVAILABLE as exc:
            return problem(503, "unavailable", str(exc))
        return JSONResponse(page.to_wire())

    @api.post("/v1/seats/{seat}/updates/ack")
    async def ack_updates(seat: str, request: Request) -> Response:
        """Acknowledge every inbox item up to `position`; answers with the next page."""
        if not authorised(request):
            return unauthorised()
        known = seat_of(seat)
        if not isinstance(known, Seat):
            return known
        try:
            raw = await read_capped(request, 4096)
            body = json.loads(raw)
            position = body["position"] if isinstance(body, dict) else None
        except (BodyTooLarge, json.JSONDecodeError, UnicodeDecodeError, KeyError):
            position = None
        if not isinstance(position, int) or isinstance(position, bool) or position < 0:
            return problem(
                422,
                "invalid_ack",
                'send {"position": N} with the integer position from your last read',
                detail=[
                    {"field": "position", "message": "a non-negative integer", "type": "int_type"}
                ],
            )
        try:
            page = await run_in_threadpool(container.inbox.ack, known.member_id, position)
        except AckBeyondLast as exc:
            return problem(409, "ack_beyond_last", str(exc), last=exc.last)
        except UNAVAILABLE as exc:
            return problem(503, "unavailable", str(exc))
        return JSONResponse(page.to_wire())

    @api.get("/v1/work/{tracking_id}")
    async def get_work(tracking_id: str, request: Request) -> Response:
        """Where one reported piece of work stands: its state, decision and send."""
        if not authorised(request):
            return unauthorised()
        try:
            entry = await run_in_threadpool(container.journal.get, tracking_id)
            op = await run_in_threadpool(container.ledger.op_state, tracking_id)
        except UNAVAILABLE as exc:
            return problem(503, "unavailable", str(exc))
        if entry is None:
            return problem(404, "unknown_tracking_id", f"nothing was accepted as {tracking_id}")
        send = {
            k: op[k]
            for k in ("state", "attempt", "idempotencyId", "messageId", "channelId")
            if op.get(k)
        }
        return JSONResponse(
            {
                "trackingId": tracking_id,
                "state": entry.get("state"),
                "seatId": entry.get("seatId"),
                "acceptedAtMs": int(entry.get("acceptedAtMs", 0)),
                "decision": entry.get("decision"),
                "send": send or None,
                "failedStage": entry.get("failedStage"),
                "error": entry.get("error"),
            }
        )

    @api.get("/v1/ledger")
    async def get_ledger(
        request: Request,
        seat: str | None = None,
        work_id: str | None = Query(default=None, alias="workId"),
        limit: int = Query(default=100, ge=1, le=1000),
    ) -> Response:
        """Ledger rows, newest first: every engagement, refusal and considered 'nobody'."""
        if not authorised(request):
            return unauthorised()
        seat_ids = None
        if seat is not None:
            known = seat_of(seat)
            if not isinstance(known, Seat):
                return known
            seat_ids = [known.member_id]
        try:
            rows = await run_in_threadpool(
                lambda: container.ledger.read(seat_ids=seat_ids, work_id=work_id, limit=limit)
            )
        except UNAVAILABLE as exc:
            return problem(503, "unavailable", str(exc))
        return JSONResponse({"rows": [r.to_wire() for r in rows], "count": len(rows)})

    @api.get("/v1/trace/{delivery_id:path}", response_model=Trace)
    async def get_trace(delivery_id: str, request: Request) -> Response:
        """Everything decided about one inbound event: whether it was accepted, skipped or
        resolved, and for every seat whether it was directed there and why (or why not)."""
        if not authorised(request):
            return unauthorised()
        try:
            trace = await run_in_threadpool(container.inbound.trace, delivery_id)
        except UNAVAILABLE as exc:
            return problem(503, "unavailable", str(exc))
        if trace is None:
            return problem(
                404, "unknown_delivery", f"no inbound event {delivery_id!r} was received"
            )
        return JSONResponse(trace.to_wire())

    api.include_router(
        inbound_routes(
            container,
            intake,
            clock_ms=clock_ms,
            authorised=authorised,
            unauthorised=unauthorised,
            count=count,
        )
    )

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            schema = get_openapi(
                title=api.title,
                version=api.version,
                description=api.description,
                routes=api.routes,
            )
            schema["paths"].update(provider_paths())
            api.openapi_schema = schema
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]

    @api.get("/healthz")
    async def healthz() -> dict[str, str]:
        """The process is up (it says nothing about Redis or the broker)."""
        return {"status": "ok"}

    def probe() -> dict[str, str]:
        checks: dict[str, str] = {}
        try:
            container.redis.ping()
            checks["redis"] = "ok"
        except UNAVAILABLE as exc:
            checks["redis"] = f"down: {exc}"
        try:
            with app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=2)
            checks["broker"] = "ok"
        except UNAVAILABLE as exc:
            checks["broker"] = f"down: {exc}"
        return checks

    @api.get("/readyz")
    async def readyz() -> Response:
        """Ready only when Redis and the broker both answer."""
        checks = await run_in_threadpool(probe)
        ok = all(v == "ok" for v in checks.values())
        return JSONResponse(
            {"status": "ready" if ok else "unavailable", "checks": checks},
            status_code=200 if ok else 503,
            headers=None if ok else {"Retry-After": "5"},
        )

    @api.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return api
