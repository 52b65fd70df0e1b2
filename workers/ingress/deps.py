"""The one dependencies object every ingress route works with, built once per app by
`create_ingress` and kept on `app.state`. Routes reach it with `Deps` (FastAPI's
dependency injection) or, on the plain Starlette provider routes, with `deps_of(request)`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

import redis
from celery import Celery
from fastapi import Depends, Request
from redis.backoff import NoBackoff
from redis.retry import Retry

from contracts import Seat
from workers.container import Container
from workers.ingress.auth import Authenticator
from workers.ingress.http import Refusal, problem
from workers.ingress.intake import Intake, intake_for
from workers.ingress.metrics import IngressMetrics
from workers.ingress.ratelimit import RateLimiter, limiter_for
from workers.settings import Settings
from workers.stores.tokens import Tokens


@dataclass(frozen=True)
class IngressDeps:
    container: Container
    celery: Celery
    intake: Intake
    settings: Settings
    token: bytes  # the bootstrap operator token
    auth: Authenticator  # who a bearer token is (auth.py)
    clock_ms: Callable[[], int]
    metrics: IngressMetrics
    limiter: RateLimiter | None  # the per-source rate limit; None when it is off

    @classmethod
    def build(
        cls, container: Container, celery: Celery, *, clock_ms: Callable[[], int]
    ) -> IngressDeps:
        settings = container.settings
        return cls(
            container=container,
            celery=celery,
            intake=intake_for(settings, container.journal, celery),
            settings=settings,
            token=settings.token().encode(),
            auth=Authenticator(settings, Tokens(token_client(settings, container)), container.org),
            clock_ms=clock_ms,
            metrics=IngressMetrics.create(overflowed=container.inbox.overflowed),
            limiter=limiter_for(settings),
        )

    def seat(self, ident: str) -> Seat:
        """The seat a path names (by member id or alias); a 404 Refusal when it is unknown."""
        seat = self.container.org.current()[0].seat(ident)
        if seat is None:
            raise Refusal(problem(404, "unknown_seat", f"no seat {ident!r} in the org"))
        return seat


def token_client(settings: Settings, container: Container) -> redis.Redis:
    """The Redis client the token lookups use: on a real Redis, one of their own that gives
    up fast (a lookup is one HGET; a stalled Redis must be the 503 within the ingress's
    budget, not a request hanging through the stores' retries); embedded, the stand-in."""
    if settings.redis_url is None:
        return container.redis
    timeout = min(1.0, settings.ingress_budget_s / 2)
    return redis.Redis.from_url(
        settings.redis_url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        health_check_interval=30,
        retry=Retry(NoBackoff(), retries=0),
    )


def deps_of(request: Request) -> IngressDeps:
    deps: IngressDeps = request.app.state.deps
    return deps


async def ingress_deps(request: Request) -> IngressDeps:
    """The dependency (async: FastAPI would run a plain function in a worker thread)."""
    return deps_of(request)


Deps = Annotated[IngressDeps, Depends(ingress_deps)]
