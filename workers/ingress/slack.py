"""`POST /webhooks/slack`, Slack's Events API, as a list of steps: read -> verify -> parse ->
envelope (the handshakes) -> normalise -> accept (or journal as skipped, 200). A step that
refuses raises `Refusal`; every refusal is final and says so (`X-Slack-No-Retry`). See
providers.py for the order of checks."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from contracts import Candidate
from pipeline.normalise import Skipped, as_str
from pipeline.normalise.slack import normalise_slack
from pipeline.signatures import Refused, verify_slack
from workers.ingress.accept import accept_outcome
from workers.ingress.deps import IngressDeps, deps_of
from workers.ingress.http import Refusal, media_type, problem, read_body, unsupported_media
from workers.ingress.providers import (
    MAX_DELIVERY_ID,
    json_object,
    not_configured,
    signature_refusal,
)

log = logging.getLogger("seatwire.webhooks")

# Whatever normalise_slack skips is journalled as skipped and answered 200: an event type
# Seatwire does not read (`assistant_thread_started`, `reaction_added`, ...) or an event
# without what Seatwire would read of it is a signed Events API delivery, and Slack counts every
# 4xx as a failed delivery and disables an app's subscriptions after too many. The reason is
# in the answer, the journal and the trace.


async def slack_events(request: Request) -> Response:
    """Slack's Events API: v0 signature, url_verification, events deduped by delivery."""
    deps = deps_of(request)
    try:
        raw = await read_body(request, deps.settings.max_body_bytes)
        verify(request, raw, deps)
        body = parse(request, raw)
        event_id = envelope(body, raw)
        if isinstance(event_id, Response):
            return no_retry(event_id)
        outcome = normalise(body, deps.clock_ms())
    except Refusal as refusal:
        return no_retry(refusal.response)
    return await accept_outcome(deps, outcome, skip_as=f"slack-event:{event_id}", source="slack")


def no_retry(response: Response) -> Response:
    # A refusal is final: Slack must not retry it (three retries of every refused event
    # count against the app's delivery success, which Slack can disable).
    if 400 <= response.status_code < 500:
        response.headers["X-Slack-No-Retry"] = "1"
    return response


def verify(request: Request, raw: bytes, deps: IngressDeps) -> None:
    secret = deps.settings.slack_secret()
    if secret is None:
        raise not_configured("slack_not_configured", "set SLACK_SIGNING_SECRET to receive Slack")
    verdict = verify_slack(request.headers, raw, secret=secret, now_s=deps.clock_ms() // 1000)
    if isinstance(verdict, Refused):
        raise signature_refusal(verdict)


def parse(request: Request, raw: bytes) -> dict[str, Any]:
    ctype = media_type(request, default="")
    if ctype != "application/json":
        raise Refusal(unsupported_media(ctype, "Events API bodies are JSON"))
    return json_object(raw)


def envelope(body: dict[str, Any], raw: bytes) -> str | Response:
    """The event_callback's event id (one from its bytes when it has none), or the answer to
    a handshake envelope."""
    kind = body.get("type")
    if kind == "url_verification":
        challenge = body.get("challenge")
        if not isinstance(challenge, str) or not challenge:
            raise Refusal(problem(400, "invalid_event", "url_verification without a challenge"))
        return JSONResponse({"challenge": challenge})
    if kind == "app_rate_limited":
        # Slack tells us it dropped events: nothing to replay, so it must be loud.
        log.error("Slack rate-limited event delivery to this app: %s", body)
        return JSONResponse({"ok": True, "status": "noted"})
    if kind != "event_callback":
        raise Refusal(problem(400, "unknown_envelope", f"envelope type {str(kind)[:64]!r}"))
    event_id = body.get("event_id")
    if event_id is None:
        # Older deliveries (and some SDKs' fixtures) carry none: the body itself names it.
        return f"body:{hashlib.sha256(raw).hexdigest()[:32]}"
    if as_str(event_id) is None or len(event_id) > MAX_DELIVERY_ID:
        raise Refusal(problem(400, "invalid_event", "an event_id must be a short string"))
    return str(event_id)


def normalise(body: dict[str, Any], now_ms: int) -> Candidate | Skipped:
    return normalise_slack(body, received_at_ms=now_ms)
