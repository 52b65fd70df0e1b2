"""What every ingress route shares: the problem answer, the capped body read, the 422 detail,
the budgeted call into the stores, and what counts as "unavailable" (a 503, never a 2xx)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

import redis
from fastapi import Request
from fastapi.responses import JSONResponse
from kombu.exceptions import OperationalError
from pydantic import ValidationError

UNAVAILABLE = (redis.RedisError, OperationalError, ConnectionError, TimeoutError, OSError)

T = TypeVar("T")


def problem(status: int, error: str, message: str, **extra: Any) -> JSONResponse:
    """A refusal: a stable `error` code and a sentence that says what to change."""
    headers = {"Retry-After": "5"} if status == 503 else None
    if status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return JSONResponse(
        {"error": error, "message": message, **extra}, status_code=status, headers=headers
    )


class BodyTooLarge(Exception):
    pass


async def read_capped(request: Request, cap: int) -> bytes:
    """The raw body, refused (BodyTooLarge) as soon as it is known to exceed `cap` bytes,
    whether declared by Content-Length or streamed without one."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > cap:
                raise BodyTooLarge
        except ValueError:
            pass
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def too_large(cap: int) -> JSONResponse:
    return problem(413, "body_too_large", f"the body exceeds {cap} bytes")


def unsupported_media(ctype: str, what: str = "send application/json") -> JSONResponse:
    return problem(415, "unsupported_media_type", f"{what}, not {ctype!r}")


def media_type(request: Request, default: str = "application/json") -> str:
    return request.headers.get("content-type", default).split(";")[0].strip().lower()


def field_errors(exc: ValidationError) -> list[dict[str, str]]:
    return [
        {
            "field": ".".join(str(p) for p in err["loc"]) or "(body)",
            "message": err["msg"],
            "type": err["type"],
        }
        for err in exc.errors()
    ]


def invalid(error: str, exc: ValidationError) -> JSONResponse:
    """A 422 naming every field that is wrong."""
    errors = field_errors(exc)
    return problem(
        422,
        error,
        "; ".join(f"{e['field']}: {e['message']}" for e in errors),
        detail=errors,
    )


async def within_budget(budget_s: float, work: Awaitable[T]) -> T | JSONResponse:
    """Await a store call; a 503 when it stalls past the budget (so the sender retries, and
    the journal makes that retry a no-op if this call lands) or when Redis or the broker
    cannot be reached."""
    try:
        async with asyncio.timeout(budget_s):  # no extra task, unlike wait_for
            return await work
    except TimeoutError:
        return problem(
            503, "unavailable", f"journal and enqueue did not finish within {budget_s} s"
        )
    except UNAVAILABLE as exc:
        return problem(503, "unavailable", f"cannot journal or enqueue right now: {exc}")
