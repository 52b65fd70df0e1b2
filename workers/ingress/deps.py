"""The one dependencies object every ingress route works with, built once per app by
`create_ingress` and kept on `app.state`. Routes reach it with `Deps` (FastAPI's
dependency injection) or, on the plain Starlette provider routes, with `deps_of(request)`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from celery import Celery
from fastapi import Depends, Request

from contracts import Seat
from workers.container import Container
from workers.ingress.http import Refusal, problem
from workers.ingress.intake import Intake, intake_for
from workers.ingress.metrics import IngressMetrics
from workers.ingress.ratelimit import RateLimiter, limiter_for
from workers.settings import Settings


@dataclass(frozen=True)
class IngressDeps:
    container: Container
    celery: Celery
    intake: Intake
    settings: Settings
    token: bytes  # the /v1 bearer token
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
            clock_ms=clock_ms,
            metrics=IngressMetrics.create(),
            limiter=limiter_for(settings),
        )

    def seat(self, ident: str) -> Seat:
        """The seat a path names (by member id or alias); a 404 Refusal when it is unknown."""
        seat = self.container.org.current()[0].seat(ident)
        if seat is None:
            raise Refusal(problem(404, "unknown_seat", f"no seat {ident!r} in the org"))
        return seat


def deps_of(request: Request) -> IngressDeps:
    deps: IngressDeps = request.app.state.deps
    return deps


async def ingress_deps(request: Request) -> IngressDeps:
    """The dependency (async: FastAPI would run a plain function in a worker thread)."""
    return deps_of(request)


Deps = Annotated[IngressDeps, Depends(ingress_deps)]
