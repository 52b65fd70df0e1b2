"""What the two provider routes (slack.py, github.py) share, and their OpenAPI entries.

Every provider route checks, in order, before anything is written: size (413), that its
secret is set (404), then the signature (401). Then content type (415), the body (400) and the
event type (422). A malformed header, timestamp or body is a 4xx with a reason, never a 5xx,
and a refused request journals nothing.

An accepted event is journalled and its directedness task enqueued BEFORE the 2xx. Its
journal entry is keyed by the event's delivery id, so the entry is also the dedupe record:
Slack's retries (and its `app_mention` twin of a `message`) and GitHub's redeliveries answer
2xx `duplicate` and enqueue nothing new, for as long as the entry is kept (7 days by default,
above Slack's 24 h and GitHub's 72 h windows). An event that addresses nobody by its nature
(a channel join, a deletion, an action we do not consider) is journalled as `skipped` with
its reason and answered 200, so the provider does not retry it and the trace shows why.

The provider routes are plain Starlette routes: their shape is the provider's, not ours, and
skipping FastAPI's per-request dependency machinery is a fifth of the hot path's overhead
(bench/ingress.py). So FastAPI does not list them; `provider_paths` does.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi.responses import JSONResponse

from pipeline.normalise import Skipped
from pipeline.signatures import Refused
from workers.ingress.http import Refusal, problem

MAX_DELIVERY_ID = 120
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def json_object(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, or a 400 Refusal."""
    try:
        body = json.loads(raw)
        if SURROGATE_ESCAPE.search(raw):
            # A lone `\ud800` parses to a string neither Redis nor an answer can encode;
            # refuse it here rather than fail (500) later. Paired escapes pass.
            json.dumps(body, ensure_ascii=False).encode()
    except (ValueError, RecursionError) as exc:  # also an integer past Python's digit limit
        raise Refusal(problem(400, "invalid_json", f"the body is not JSON: {exc}")) from None
    if not isinstance(body, dict):
        raise Refusal(problem(400, "invalid_json", "the body must be a JSON object"))
    return body


def signature_refusal(refused: Refused) -> Refusal:
    return Refusal(problem(401, refused.reason, refused.detail))


def not_configured(error: str, message: str) -> Refusal:
    return Refusal(problem(404, error, message))


def refuse_unreadable(outcome: Skipped, codes: frozenset[str]) -> None:
    """A payload that cannot be an event at all (its reason's code in `codes`) is refused:
    422 for an event type we do not consider, 400 for one that lacks what every event of
    its type carries. Any other `Skipped` is journalled as skipped by the caller."""
    code = outcome.reason.split(":", 1)[0]
    if code not in codes:
        return
    if code == "unsupported_event":
        raise Refusal(
            problem(
                422,
                "unsupported_event",
                f"{outcome.reason.split(':', 1)[-1]}: {outcome.detail}; subscribe only to the "
                "events Seatwire reads (see the README)",
            )
        )
    raise Refusal(problem(400, "invalid_event", f"{outcome.reason}: {outcome.detail}"))


def pong() -> JSONResponse:
    return JSONResponse({"ok": True, "status": "pong"})


def provider_paths() -> dict[str, Any]:
    """The OpenAPI entries of the provider routes (plain Starlette routes, so FastAPI does not
    list them itself). Their bodies are the providers' own; see their documentation."""
    answers = {
        "200": "accepted, duplicate, skipped (with its reason), or the provider's handshake",
        "400": "not a JSON object, or an event without what its type must carry",
        "401": "a missing, malformed or wrong signature, or a timestamp out of tolerance",
        "404": "this provider's secret is not configured",
        "413": "the body is over the size limit",
        "415": "a content type other than JSON (GitHub: or a form with `payload`)",
        "422": "an event type Seatwire does not read",
        "503": "journal or enqueue unavailable or over budget: retry (Retry-After)",
    }
    responses = {code: {"description": text} for code, text in answers.items()}
    body = {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
    return {
        "/webhooks/slack": {
            "post": {
                "summary": "Slack Events API",
                "description": "Signed with X-Slack-Signature over `v0:{timestamp}:{body}`; "
                "X-Slack-Request-Timestamp within 5 minutes. Answers url_verification.",
                "operationId": "slack_events",
                "requestBody": body,
                "responses": responses,
            }
        },
        "/webhooks/github": {
            "post": {
                "summary": "GitHub webhooks",
                "description": "Signed with X-Hub-Signature-256; X-GitHub-Event and "
                "X-GitHub-Delivery required. Answers ping.",
                "operationId": "github_events",
                "requestBody": body,
                "responses": responses,
            }
        },
    }
