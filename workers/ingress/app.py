"""The HTTP ingress (FastAPI), put together: one `IngressDeps` on `app.state`, the routers, the
exception handlers and the metrics middleware. A write is answered 2xx only after it is
journalled AND enqueued (accept.py).

Where each concern lives:

- routes: v1.py (`/v1`, each router behind the bearer-token dependency of its role, a
  seat's or the operator's), asks.py (the ask record; its answer route also takes an answer
  link), slack.py, interactions.py (Slack's button clicks) and github.py (plain Starlette
  routes), ops.py
  (`/healthz`, `/readyz`; `/metrics`, an operator's token), console/ (`/console/`, the
  web console's pages: docs/console.md), mcp.py (`/mcp`, the tools
  over MCP's streamable HTTP, a seat's token; its session manager runs in the lifespan);
- refusals: a step raises `Refusal` with its 4xx; one handler answers it; FastAPI's refusal
  of a parameter and Starlette's 404 and 405 are answered in the same shape (http.py);
- the OpenAPI document: each route declares its body and answers (docs.py), the provider
  routes are added by hand (providers.py); served at `/openapi.json` without a token, with
  no /docs page;
- 503: `Unavailable` (journal/enqueue over budget or failed) and every error in
  `UNAVAILABLE` (Redis, broker, sockets): one handler, 503 with Retry-After, never a 2xx;
- metrics: one ASGI middleware counts the writing routes' answers by route and status;
  the cluster's figures are read from Redis and the broker at each scrape (metrics.py);
- the per-source rate limit (ratelimit.py): one ASGI middleware inside it, 429 with
  Retry-After before a writing route journals anything (off unless SEATWIRE_INGRESS_RATE_PER_S).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import redis
from celery import Celery
from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import Route

from contracts.api import ProviderReceipt, SlackChallenge
from workers.clock import now_ms
from workers.container import Container
from workers.ingress import (
    alerts,
    asks,
    backlog,
    console,
    costs,
    decisions,
    objectives,
    project,
    seats,
    steward,
    tools,
    v1,
)
from workers.ingress.deps import IngressDeps
from workers.ingress.docs import finish, model_routes, operation_id
from workers.ingress.github import github_events
from workers.ingress.http import (
    UNAVAILABLE,
    Refusal,
    Unavailable,
    http_error,
    invalid_parameters,
    refused,
    unavailable,
)
from workers.ingress.interactions import slack_interactions
from workers.ingress.mcp import McpEndpoint
from workers.ingress.metrics import (
    CLUSTER_BUDGET_S,
    AskFigureFamilies,
    ClusterFigures,
    RequestMetrics,
    RouteLabels,
    ask_reader,
    cluster_reader,
)
from workers.ingress.ops import router as ops_router
from workers.ingress.providers import provider_paths
from workers.ingress.ratelimit import RateLimit
from workers.ingress.slack import slack_events
from workers.queues import tracking_id_for

__all__ = ["create_ingress", "tracking_id_for"]

log = logging.getLogger("seatwire.ingress")

# The routes that write, counted in seatwire_ingress_requests{route, status}.
METERED: RouteLabels = {
    ("POST", v1.post_work): "work",
    ("POST", v1.post_event): "events",
    ("POST", asks.post_answer): "ask_answer",
    ("POST", slack_events): "slack",
    ("POST", slack_interactions): "slack_interactions",
    ("POST", github_events): "github",
    ("POST", alerts.post_alertmanager): "alerts",
}

Handler = Callable[[Request, Any], Coroutine[Any, Any, Response]]
# One answer per way a route stops early: its own 4xx, or the 503 (never a 2xx, never a 500).
# Under /console each is answered as a page instead (console.paged), its status kept.
HANDLERS: dict[int | type[Exception], Handler] = {
    Refusal: console.paged(refused),
    RequestValidationError: console.paged(invalid_parameters),
    HTTPException: console.paged(http_error),
    Unavailable: console.paged(unavailable),
    **{error: console.paged(unavailable) for error in UNAVAILABLE},
    console.ConsoleError: console.console_error,
}


class IngressApp(FastAPI):
    """FastAPI, with the plain provider routes added to its OpenAPI document by hand and the
    routes' request bodies put in it (docs.py)."""

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:  # generated once, then kept
            schema = get_openapi(
                title=self.title,
                version=self.version,
                description=self.description,
                routes=[*self.routes, *model_routes(answered=(ProviderReceipt, SlackChallenge))],
            )
            schema["paths"].update(provider_paths())
            self.openapi_schema = finish(schema)
        return self.openapi_schema


@asynccontextmanager
async def lifespan(api: FastAPI) -> AsyncIterator[None]:
    endpoint: McpEndpoint = api.state.mcp
    try:
        indexed = await run_in_threadpool(backlog.index_backlogs, api.state.deps)
    except redis.RedisError as exc:  # a request's miss migrates them instead
        log.warning("could not index the backlogs written before the owner index: %s", exc)
    else:
        if indexed is not None:
            log.info("indexed %d backlog items written before the owner index", indexed)
    async with endpoint.run():
        yield
    deps: IngressDeps = api.state.deps
    await deps.intake.aclose()
    if deps.limiter is not None:
        await deps.limiter.aclose()


def create_ingress(
    container: Container, app: Celery, *, clock_ms: Callable[[], int] = now_ms
) -> FastAPI:
    deps = IngressDeps.build(container, app, clock_ms=clock_ms)
    alerts.check_alerts(container.settings, container.org.current()[0])
    deps.metrics.registry.register(
        ClusterFigures(cluster_reader(container, app, clock_ms), budget_s=CLUSTER_BUDGET_S)
    )
    deps.metrics.registry.register(
        AskFigureFamilies(ask_reader(container, clock_ms), budget_s=CLUSTER_BUDGET_S)
    )
    api = IngressApp(
        title="Seatwire",
        version="0.1.0",
        description="Work reports in; engagements decided, guarded and sent exactly once.",
        lifespan=lifespan,
        # No /docs nor /redoc: FastAPI's pages load their scripts from a CDN, so they render
        # blank offline, and they would be one more thing answering without a token on the
        # public port. /openapi.json stays open: it is the same document for every deployment
        # (the code's routes and contracts; nothing of the org, the settings or the data), and
        # a client generator reads it without a token.
        docs_url=None,
        redoc_url=None,
        exception_handlers=HANDLERS,
        generate_unique_id_function=operation_id,
        middleware=[
            # The web console's security headers, on every response under /console.
            Middleware(console.ConsoleHeaders),
            Middleware(RequestMetrics, metrics=deps.metrics, labels=METERED),
            # Before any route reads the body (a 429 is answered before routing, so the
            # metrics see it without a route label). Left out when the limit is off: it
            # would only pass each request on, one more layer on every request's path.
            *(
                []
                if deps.limiter is None
                else [
                    Middleware(
                        RateLimit,
                        limiter=deps.limiter,
                        settings=deps.settings,
                        auth=deps.auth,
                        clock_ms=clock_ms,
                    )
                ]
            ),
        ],
    )
    api.state.deps = deps
    api.state.mcp = McpEndpoint(deps)
    # The provider routes first: Starlette tries the routes in order, and FastAPI matches an
    # included router by trying each of its routes in turn, so a webhook behind the /v1
    # routers paid for matching every one of them (12 % of a Slack event's CPU, growing
    # with each route added; issue 27). No path of theirs overlaps another route's.
    api.add_route("/webhooks/slack", slack_events, methods=["POST"])
    api.add_route("/webhooks/slack/interactions", slack_interactions, methods=["POST"])
    api.add_route("/webhooks/github", github_events, methods=["POST"])
    api.include_router(v1.router)
    api.include_router(v1.seat_router)
    api.include_router(objectives.router)
    api.include_router(costs.router)
    api.include_router(backlog.router)
    api.include_router(steward.router)
    api.include_router(seats.router)
    api.include_router(seats.seat_router)
    api.include_router(tools.router)
    api.include_router(decisions.router)
    api.include_router(project.router)
    api.include_router(asks.router)
    api.include_router(asks.answer_router)
    api.include_router(alerts.router)
    api.include_router(console.router)
    api.mount("/console/static", console.static_files(), name="console-static")
    api.router.routes.append(Route("/mcp", api.state.mcp))  # an ASGI app: POST (405 to the rest)
    api.include_router(ops_router)
    return api
