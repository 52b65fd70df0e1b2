"""The console's plumbing: its templates, its headers, its sessions and CSRF, its forms.

Two cookies, each a session kept in Redis (workers/stores/console.py), never both in one:

- `sw_console`: the operator's, made by `POST /console/login` with an operator token (the
  bootstrap token or one `seatwire token issue` made); it opens the operator pages;
- `sw_console_person`: a person's, made by opening an answer link on `/console/my`; it
  opens "My asks" only, for the people the link names.

Both are HttpOnly, SameSite=Strict, Path=/console, Secure when the request came over HTTPS
(the URL's scheme, or `X-Forwarded-Proto: https` from the proxy in front), and expire with
their session. Every POST carries the session's CSRF token (`csrf`), compared in constant
time; the login form, which has no session yet, carries the token of a short-lived cookie of
its own (double submit). A refusal is a page (`ConsoleError`), never a stack trace.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from workers.ingress.deps import IngressDeps, deps_of
from workers.ingress.http import BodyTooLarge, read_capped
from workers.stores.console import ConsoleSession, ConsoleSessions

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
PREFIX = "/console"

OPERATOR_COOKIE = "sw_console"
PERSON_COOKIE = "sw_console_person"
LOGIN_COOKIE = "sw_console_login"
SESSION_TTL_MS = 12 * 3_600_000  # an operator's session: 12 hours
PERSON_TTL_MS = 12 * 3_600_000  # a person's: 12 hours, never beyond their link's expiry
LOGIN_TTL_S = 3_600  # the login form's CSRF cookie
FORM_CAP = 16_384  # a console form's body, at most

# Sent on every response under /console (ConsoleHeaders): nothing inline runs, nothing is
# loaded from elsewhere, forms post only here, no site frames a page, nothing is cached, no
# URL (an answer link's token) leaves as a Referer.
SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_RAW_HEADERS = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]


class ConsoleHeaders:
    """ASGI middleware: the security headers on every response whose path is the console's
    (its pages, its refusals, its static file, a 404 under it), replacing any of the same
    name."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return

        async def send_with(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k for k, _ in _RAW_HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message["headers"] = kept + _RAW_HEADERS
            await send(message)

        await self.app(scope, receive, send_with)


def when(ms: float | int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


templates = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def took(ms: float | int | None) -> str:
    """A duration in words a person reads at a glance: 45 s, 12 min, 3 h 20 min, 2 d 4 h."""
    if ms is None or ms < 0:
        return "-"
    s = int(ms // 1000)
    if s < 60:
        return f"{s} s"
    m, h, d = s // 60, s // 3600, s // 86400
    if h == 0:
        return f"{m} min"
    if d == 0:
        return f"{h} h {m % 60} min" if m % 60 else f"{h} h"
    return f"{d} d {h % 24} h" if h % 24 else f"{d} d"


templates.filters["when"] = when
templates.filters["took"] = took


def render(request: Request, name: str, code: int = 200, **context: Any) -> HTMLResponse:
    """The page `name` (a template) with `context`, answered with the HTTP status `code`."""
    body = templates.get_template(name).render(request=request, prefix=PREFIX, **context)
    return HTMLResponse(body, status_code=code)


class ConsoleError(Exception):
    """A console refusal, answered as a page with its status (app.py's handler)."""

    def __init__(self, status: int, title: str, message: str, *, login: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.title = title
        self.message = message
        self.login = login  # offer the login page's link


async def console_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ConsoleError)
    return render(
        request, "error.html", exc.status, title=exc.title, message=exc.message, login=exc.login
    )


def is_https(request: Request) -> bool:
    """Whether the browser reached us over HTTPS: directly, or through a proxy that says so."""
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


def set_cookie(
    response: Response, request: Request, name: str, value: str, *, max_age_s: int, path: str
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max(1, max_age_s),
        path=path,
        secure=is_https(request),
        httponly=True,
        samesite="strict",
    )


def clear_cookie(response: Response, request: Request, name: str, path: str) -> None:
    response.delete_cookie(
        name, path=path, secure=is_https(request), httponly=True, samesite="strict"
    )


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def sessions_of(deps: IngressDeps) -> ConsoleSessions:
    return ConsoleSessions(deps.container.redis)


def session_from(request: Request, cookie: str) -> ConsoleSession | None:
    deps = deps_of(request)
    value = request.cookies.get(cookie, "")
    if not value:
        return None
    return sessions_of(deps).get(value, now_ms=deps.clock_ms())


def operator_session(request: Request) -> ConsoleSession:
    """The operator's live session, or a ConsoleError: the login page's link."""
    session = session_from(request, OPERATOR_COOKIE)
    if session is None or session.role != "operator":
        ended = bool(request.cookies.get(OPERATOR_COOKIE))
        raise ConsoleError(
            401,
            "Please log in" if not ended else "Your session has ended",
            "The operator pages need the operator token: log in first."
            if not ended
            else "This session expired or was logged out. Log in again with the operator token.",
            login=True,
        )
    return session


def person_session(request: Request) -> ConsoleSession:
    session = session_from(request, PERSON_COOKIE)
    if session is None or session.role != "person":
        raise ConsoleError(
            401,
            "Open your answer link",
            "My asks opens from an answer link: open the whole link from the message it "
            "came in (it carries its token). If you opened it before, it may have expired.",
        )
    return session


async def form_of(request: Request) -> dict[str, str]:
    """A console form's fields (each once); a ConsoleError for anything else."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise ConsoleError(415, "Not a form", "The console takes its own forms only.")
    try:
        raw = await read_capped(request, FORM_CAP)
    except BodyTooLarge:
        raise ConsoleError(413, "Too much", "That form is larger than the console takes.") from None
    try:
        parsed = parse_qs(raw.decode("utf-8"), keep_blank_values=True)
    except (UnicodeDecodeError, ValueError):
        raise ConsoleError(400, "Not a form", "That form is not UTF-8 text.") from None
    fields: dict[str, str] = {}
    for name, values in parsed.items():
        if len(values) != 1:
            raise ConsoleError(400, "Not a form", f"The field {name!r} came more than once.")
        fields[name] = values[0]
    return fields


def check_csrf(fields: Mapping[str, str], expected: str) -> None:
    given = fields.get("csrf", "")
    if not expected or not given or not hmac.compare_digest(given.encode(), expected.encode()):
        raise ConsoleError(
            403,
            "This form has expired",
            "The form did not carry this session's security token (CSRF), so nothing was "
            "done. Reload the page and try again.",
        )


def new_login_token() -> str:
    return secrets.token_urlsafe(24)


Handler = Callable[[Request, Any], Coroutine[Any, Any, Response]]
TITLES = {
    400: "Not understood",
    404: "Not found",
    405: "Not here",
    413: "Too much",
    415: "Not a form",
    422: "Not understood",
    429: "Too many requests",
    503: "Unavailable for a moment",
}


def is_console(request: Request) -> bool:
    return request.url.path == PREFIX or request.url.path.startswith(PREFIX + "/")


def paged(handler: Handler) -> Handler:
    """One of the app's handlers, answering a console path with a page instead of its JSON
    problem (the same status and Retry-After / Allow headers; the problem's message shown)."""

    async def answer(request: Request, exc: Any) -> Response:
        got = await handler(request, exc)
        if not is_console(request):
            return got
        try:
            message = str(json.loads(bytes(got.body)).get("message", ""))
        except (ValueError, AttributeError):
            message = ""
        page = render(
            request,
            "error.html",
            got.status_code,
            title=TITLES.get(got.status_code, "Not done"),
            message=message or "That did not work.",
        )
        for name in ("retry-after", "allow"):
            if name in got.headers:
                page.headers[name] = got.headers[name]
        return page

    return answer
