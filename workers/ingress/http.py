"""What every ingress route shares: the problem answer, the two ways a route stops early
(`Refusal`, a 4xx it decided; `Unavailable`, a 503), the capped body read, the 422 detail,
the budgeted call into the stores, and the two encodings of an answer.

    Exception
    +-- Refusal       carries its own 4xx answer; the app's handler returns it as it is
    +-- Unavailable   journal/enqueue failed or ran out of budget; the app's 503 handler
    UNAVAILABLE       Redis, broker or socket errors: the same 503 handler (see app.py)
    RequestValidationError   FastAPI's, for a path or query parameter: the same 422 as a body's
    HTTPException     Starlette's (no such path, a method the path does not take): a problem

Every refusal is one shape (contracts.api.Problem), whoever refuses.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Mapping, Sequence
from http import HTTPStatus
from typing import Any, TypeVar

import redis
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from kombu.exceptions import OperationalError
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match

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


class Refusal(Exception):
    """A route's step refused the request; `response` is the whole answer (a 4xx)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


class Unavailable(Exception):
    """Journal and enqueue could not finish: answered 503 with Retry-After (the sender
    retries; the journal makes that retry a no-op if this attempt landed after all)."""


async def refused(_request: Request, exc: Exception) -> Response:
    """The app's handler for `Refusal`: the answer the step already decided."""
    assert isinstance(exc, Refusal)
    return exc.response


async def unavailable(_request: Request, exc: Exception) -> Response:
    """The app's one 503: `Unavailable` and every error in UNAVAILABLE, never a 2xx."""
    return problem(503, "unavailable", str(exc))


async def invalid_parameters(_request: Request, exc: Exception) -> Response:
    """FastAPI's refusal of a path or query parameter, as the 422 a body's field gets
    (`invalid_parameter`, `detail` naming each parameter by its wire name)."""
    assert isinstance(exc, RequestValidationError)
    errors = [
        {
            "field": ".".join(str(p) for p in err["loc"][1:]) or str(err["loc"][0]),
            "message": err["msg"],
            "type": err["type"],
        }
        for err in exc.errors()
    ]
    return problem(422, "invalid_parameter", _joined(errors), detail=errors)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (404 for a path no route has, 405 for a method the path does
    not take) as problems: `not_found`, `method_not_allowed`. A 405's Allow names every
    method of the path: Starlette's names only those of the first route on it, and a path
    served by two routes (GET and POST on `.../samples`) takes both."""
    assert isinstance(exc, HTTPException)
    code = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_")
    answer = problem(exc.status_code, code, str(exc.detail))
    answer.headers.update(exc.headers or {})
    if exc.status_code == 405:
        answer.headers["Allow"] = ", ".join(allowed_methods(request))
    return answer


METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def allowed_methods(request: Request) -> list[str]:
    """Every method a route on the request's path takes (asked of the routes themselves:
    FastAPI keeps an included router's routes inside it)."""
    routes: list[BaseRoute] = request.app.router.routes
    return [
        method
        for method in METHODS
        if any(r.matches({**request.scope, "method": method})[0] == Match.FULL for r in routes)
    ]


def _joined(errors: Sequence[Mapping[str, str]]) -> str:
    return "; ".join(f"{e['field']}: {e['message']}" for e in errors)


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


async def read_body(request: Request, cap: int) -> bytes:
    """The raw body, or a 413 Refusal."""
    try:
        return await read_capped(request, cap)
    except BodyTooLarge:
        raise Refusal(too_large(cap)) from None


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


def parse_json(raw: bytes, *, whole_numbers: bool = False) -> object:
    """The body as JSON, or ValueError saying why not: not JSON or not UTF-8, an integer of
    more digits than Python reads (4,300), nesting deeper than it recurses, or a string with
    a lone surrogate (`"\\ud800"` is valid JSON but no text Redis or a client can hold).

    `whole_numbers`: a number without a fraction is an int however it is spelt (`7.0` is 7),
    as JSON Schema's `integer` reads it (JSON has one number type)."""
    try:
        data = json.loads(raw, parse_float=_whole if whole_numbers else None)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not may_hold_surrogate(raw):
        # Nothing to encode again for: and nesting too deep for the encoder is refused by the
        # decoder first (both count the same recursion limit).
        return data
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone UTF-16 surrogate") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    return data


# A `\uD800`-`\uDFFF` escape (the scanner takes a lowercase `u` only; either case of hex).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def may_hold_surrogate(raw: bytes) -> bool:
    """False when `json.loads(raw)` cannot have produced a lone surrogate, so `parse_json`
    need not encode the whole document again to find one (a third of its cost on a Slack
    event; issue 27). `json.loads` reads bytes as UTF-8 unless they start with a UTF-16 or
    UTF-32 byte-order mark or a NUL in the first two bytes, and decodes them with
    `surrogatepass`: a surrogate then comes from a `\\uD8..` to `\\uDF..` escape or, in
    UTF-8, from an 0xED lead byte. A surrogate PAIR matches too (it is checked in full and
    passes). Being too cautious costs the check, never a wrong answer."""
    if raw[:2].count(0) or raw.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\xed" in raw:
        return True
    return _SURROGATE_ESCAPE.search(raw) is not None


def _whole(text: str) -> float | int:
    number = float(text)
    return int(number) if number.is_integer() else number


def json_body(raw: bytes, error: str = "invalid_json", *, whole_numbers: bool = True) -> object:
    """The body as JSON, whole numbers as ints (`parse_json`); a 422 Refusal (`error`, field
    `(body)`) when it is not JSON."""
    try:
        return parse_json(raw, whole_numbers=whole_numbers)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        detail = [{"field": "(body)", "message": str(exc), "type": "json_invalid"}]
        raise Refusal(problem(422, error, f"the body is not JSON: {exc}", detail=detail)) from None


M = TypeVar("M", bound=BaseModel)


def validated(data: object, model: type[M], error: str) -> M:
    """`data` (parsed JSON) as `model`; a 422 Refusal (`error`) naming every field that is
    wrong. Read as JSON, strictly, as the OpenAPI document says the body: `true` is no
    integer, `"1"` no number, `1` no boolean."""
    try:
        return model.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        raise Refusal(invalid(error, exc)) from None


def invalid(error: str, exc: ValidationError) -> JSONResponse:
    """A 422 naming every field that is wrong."""
    errors = field_errors(exc)
    return problem(422, error, _joined(errors), detail=errors)


async def within_budget(budget_s: float, work: Awaitable[T]) -> T:
    """Await a store call; `Unavailable` when it stalls past the budget (so the sender
    retries, and the journal makes that retry a no-op if this call lands) or when Redis or
    the broker cannot be reached."""
    try:
        async with asyncio.timeout(budget_s):  # no extra task, unlike wait_for
            return await work
    except TimeoutError:
        raise Unavailable(f"journal and enqueue did not finish within {budget_s} s") from None
    except UNAVAILABLE as exc:
        raise Unavailable(f"cannot journal or enqueue right now: {exc}") from exc


def json_answer(status: int, body: dict[str, Any]) -> Response:
    """The /v1 encoding (Starlette's JSONResponse: UTF-8, compact)."""
    return JSONResponse(body, status_code=status)


def compact_answer(status: int, body: dict[str, Any]) -> Response:
    """The provider routes' encoding: compact ASCII JSON, encoded directly (their hot path)."""
    return Response(_COMPACT.encode(body).encode(), status_code=status, media_type=JSON_TYPE)


# One encoder for every answer: `json.dumps` with separators builds a new one per call.
_COMPACT = json.JSONEncoder(separators=(",", ":"))
JSON_TYPE = "application/json"
