"""The per-source rate limit on the writing routes (fault test 30, docs/reliability.md): a source
that sends more than its budget is answered 429 with Retry-After before anything is journalled, so a
limited request is never accepted and an accepted one is never dropped.

A source is who a route says sent the request, and only once the route's own check holds
(a forged request is no source; its route answers 401 and it spends nobody's budget):

- `POST /webhooks/slack`: the Slack team (`team_id`, else `enterprise_id`), v0 signature valid;
- `POST /webhooks/slack/interactions`: the Slack team of the form's `payload` (`team.id`,
  else `enterprise.id`, else the clicker's `user.team_id`), v0 signature valid; a budget of
  its own, so a flood of events never holds back a person's click;
- `POST /webhooks/github`: the GitHub installation, else the repository, else the
  organisation, X-Hub-Signature-256 valid;
- `POST /v1/...`: the bearer caller (a hash of its token), token valid (any role: auth.py);
  without one, an answer link (`?token=` on `POST /v1/asks/{id}/answer`, or on
  `POST /v1/consents/{id}/revoke`) whose signature holds: its ask (a link answers one ask,
  so its holders share that ask's budget).

The budget is a token bucket in Redis, one Lua script (workers/stores/lua/rate_take.lua) in
its GCRA form: one number a source (the time its bucket is full again), Redis's own clock,
atomic across every ingress process. Not a library: `limits` and `slowapi` keep a bucket in
several keys and read the clock of the process that asks (two ingress hosts with skewed
clocks disagree), and they add a client of their own beside the one the ingress already
batches. The script is sent through the intake's group commit (one round trip carries the
takes of every concurrent request).

Redis unreachable or slow past `BUDGET_S`: 503 with Retry-After, as every store error is.

Pure ASGI middleware, like metrics.py: the body is read once (up to the route's cap) and
replayed to the route, so the route reads exactly what the limiter read.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Awaitable, Callable
from typing import cast
from urllib.parse import parse_qs

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pipeline.answer_links import LinkClaim
from pipeline.signatures import Refused, verify_github, verify_slack
from workers.ingress.auth import Authenticator
from workers.ingress.http import UNAVAILABLE, problem
from workers.ingress.intake import PerLoop
from workers.settings import Settings
from workers.stages.links import AnswerLinks
from workers.stores import keys
from workers.stores.scripts import source as script_source
from workers.stores.scripts import text

# Who sent a request, from its headers and body, once the route's own check holds; else None.
Source = Callable[[Headers, bytes, Settings, int], str | None]
# The /v1 caller: its token looked up (which may read Redis), so asynchronous.
V1Source = Callable[[Headers], Awaitable[str | None]]
BUDGET_S = 0.5  # of the route's budget (1.5 s on a webhook): the rest is the journal's


def _identity(body: object, fields: tuple[tuple[str, ...], ...]) -> str:
    """The first of `fields` (paths into the body) that holds a string or a number."""
    for path in fields:
        node: object = body
        for name in path:
            node = node.get(name) if isinstance(node, dict) else None
        if isinstance(node, str | int) and not isinstance(node, bool) and str(node):
            return f"{path[0]}:{str(node)[:64]}"
    return "unknown"


def _json(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


SLACK_FIELDS = (("team_id",), ("enterprise_id",))
GITHUB_FIELDS = (("installation", "id"), ("repository", "id"), ("organization", "id"))


def slack_source(headers: Headers, raw: bytes, settings: Settings, now_s: int) -> str | None:
    secret = settings.slack_secret()
    if secret is None:
        return None
    if isinstance(verify_slack(headers, raw, secret=secret, now_s=now_s), Refused):
        return None
    return f"slack:{_identity(_json(raw), SLACK_FIELDS)}"


INTERACTION_FIELDS = (("team", "id"), ("enterprise", "id"), ("user", "team_id"))


def _form_payload(raw: bytes) -> object:
    """The JSON of a form's one `payload` field (Slack's interactions, GitHub's form
    deliveries); None when there is not exactly one, or it is not JSON."""
    try:
        payloads = parse_qs(raw.decode("utf-8", "replace"), max_num_fields=10)
    except ValueError:
        payloads = {}
    found = payloads.get("payload", [])
    return _json(found[0].encode()) if len(found) == 1 else None


def slack_interactions_source(
    headers: Headers, raw: bytes, settings: Settings, now_s: int
) -> str | None:
    secret = settings.slack_secret()
    if secret is None:
        return None
    if isinstance(verify_slack(headers, raw, secret=secret, now_s=now_s), Refused):
        return None
    return f"slack-interactions:{_identity(_form_payload(raw), INTERACTION_FIELDS)}"


def github_source(headers: Headers, raw: bytes, settings: Settings, _now_s: int) -> str | None:
    secret = settings.github_secret()
    if secret is None:
        return None
    if isinstance(verify_github(headers, raw, secret=secret), Refused):
        return None
    body = _json(raw)
    if body is None:  # a form whose one `payload` field is the JSON
        body = _form_payload(raw)
    return f"github:{_identity(body, GITHUB_FIELDS)}"


def v1_source(auth: Authenticator) -> V1Source:
    async def source(headers: Headers) -> str | None:
        scheme, _, given = (headers.get("authorization") or "").partition(" ")
        token = given.strip()
        if scheme.lower() != "bearer" or await auth.caller_async(token) is None:
            return None
        return f"v1:{hashlib.sha256(token.encode()).hexdigest()[:16]}"

    return source


def link_source(links: AnswerLinks | None, scope: Scope, now_ms: int) -> str | None:
    """The ask an answer link's POST answers, when its token is one Seatwire signed."""
    if links is None:
        return None
    tokens = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token") or []
    if len(tokens) != 1:
        return None
    claim = links.read(tokens[0], now_ms=now_ms)
    if not isinstance(claim, LinkClaim):
        return None
    return f"link:{hashlib.sha256(claim.ask_id.encode()).hexdigest()[:16]}"


class RateLimiter:
    """`take(source)`: None when the source may go on, else the seconds until it may."""

    def __init__(self, url: str, *, rate_per_s: float, burst: int) -> None:
        self.url = url
        self.interval_us = max(1, round(1_000_000 / rate_per_s))
        self.burst = burst
        self._loops = PerLoop(
            url, script_source("rate_take"), timeout_s=1, retry_cap_s=0.2, retries=1
        )

    async def take(self, source: str) -> float | None:
        verb, retry_us = await self._loops.here().call(
            [1, keys.RATE_LIMIT, source, self.interval_us, self.burst]
        )
        return None if text(verb) == "allowed" else int(retry_us) / 1_000_000

    async def aclose(self) -> None:
        await self._loops.aclose()


def limiter_for(settings: Settings) -> RateLimiter | None:
    """The limiter the settings ask for: None when it is off or there is no real Redis."""
    if settings.ingress_rate_per_s <= 0 or settings.redis_url is None:
        return None
    return RateLimiter(
        settings.redis_url,
        rate_per_s=settings.ingress_rate_per_s,
        burst=settings.ingress_rate_burst,
    )


def retry_after(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))


class RateLimit:
    """The middleware: takes from the sender's budget before a writing route sees the request."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        limiter: RateLimiter | None,
        settings: Settings,
        auth: Authenticator,
        clock_ms: Callable[[], int],
    ) -> None:
        self.app = app
        self.limiter = limiter
        self.settings = settings
        self.clock_ms = clock_ms
        self.v1 = v1_source(auth)
        self.links = AnswerLinks.of(settings)
        self.sources: dict[str, Source] = {
            "/webhooks/slack": slack_source,
            "/webhooks/slack/interactions": slack_interactions_source,
            "/webhooks/github": github_source,
        }

    def _source_fn(self, scope: Scope) -> Source | V1Source | None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return None
        path: str = scope["path"]
        if path.startswith("/v1/"):
            return self.v1
        return self.sources.get(path)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        find = self._source_fn(scope) if self.limiter is not None else None
        if find is None or self.limiter is None:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        messages, raw, whole = await _read(receive, self.settings.max_body_bytes, headers)
        replay = _replaying(messages, receive)
        if not whole:  # over the cap: the route refuses it (413) without our help
            await self.app(scope, replay, send)
            return
        if find is self.v1:
            try:
                source = await self.v1(headers)
            except UNAVAILABLE as exc:
                await problem(503, "unavailable", f"token lookup unavailable: {exc}")(
                    scope, replay, send
                )
                return
            if source is None:
                source = link_source(self.links, scope, self.clock_ms())
        else:
            source = cast(Source, find)(headers, raw, self.settings, self.clock_ms() // 1000)
        if source is not None:
            try:
                async with asyncio.timeout(BUDGET_S):
                    wait_s = await self.limiter.take(source)
            except (TimeoutError, *UNAVAILABLE) as exc:
                detail = "timed out" if isinstance(exc, TimeoutError) else str(exc)
                await problem(503, "unavailable", f"rate limit unavailable: {detail}")(
                    scope, replay, send
                )
                return
            if wait_s is not None:
                answer = problem(
                    429,
                    "rate_limited",
                    f"{source} sent more than {self.settings.ingress_rate_per_s:g} requests a "
                    f"second (burst {self.settings.ingress_rate_burst}); retry after the delay",
                )
                answer.headers["Retry-After"] = retry_after(wait_s)
                await answer(scope, replay, send)
                return
        await self.app(scope, replay, send)


async def _read(receive: Receive, cap: int, headers: Headers) -> tuple[list[Message], bytes, bool]:
    """The request's body messages read so far, the body, and whether it is whole (False once
    it is known to exceed `cap`: the rest is left for the route to read and refuse)."""
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        return [], b"", False
    messages: list[Message] = []
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, b"", False
        chunk = message.get("body", b"")
        size += len(chunk)
        chunks.append(chunk)
        if size > cap:
            return messages, b"", False
        if not message.get("more_body", False):
            return messages, b"".join(chunks), True


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    """A `receive` that hands the route the messages already read, then the live ones."""
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
