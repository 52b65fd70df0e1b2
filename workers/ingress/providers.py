"""What the two provider routes (slack.py, github.py) share, and their OpenAPI entries.

Every provider route checks, in order, before anything is written: size (413), that its
secret is set (404), then the signature (401). Then content type (415) and the body (400: not
a JSON object, not the provider's envelope, a malformed id). A malformed header, timestamp
or body is a 4xx with a reason, never a 5xx, and a refused request journals nothing. An
event type or action that Seatwire does not read, or an event without what Seatwire would
read of it, is none of these: it is a signed delivery in the provider's envelope, so it is
journalled as skipped with its reason (`unsupported_event:<type>`, `missing_field:<path>`)
and answered 200, never a 4xx (which both providers count as a failed delivery, and Slack
answers by disabling the app's subscriptions).

An accepted event is journalled and its directedness task enqueued BEFORE the 2xx. Its
journal entry is keyed by the event's delivery id, so the entry is also the dedupe record:
Slack's retries (and its `app_mention` twin of a `message`) and GitHub's redeliveries answer
2xx `duplicate` and enqueue nothing new, for as long as the entry is kept (7 days by default,
above Slack's 24 h and GitHub's 72 h windows). An event that addresses nobody by its nature
(a channel join, a deletion, an event or action we do not read) is journalled as `skipped` with
its reason and answered 200, so the provider does not retry it and the trace shows why.

The provider routes are plain Starlette routes: their shape is the provider's, not ours, and
skipping FastAPI's per-request dependency machinery is a fifth of the hot path's overhead
(bench/ingress.py). So FastAPI does not list them; `provider_paths` does.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from pipeline.signatures import Refused
from workers.ingress.docs import COMPONENTS, answers
from workers.ingress.http import Refusal, parse_json, problem

MAX_DELIVERY_ID = 120


def json_object(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, or a 400 Refusal: not JSON or not UTF-8, an integer past
    Python's 4,300 digits, nesting deeper than it recurses, or a lone UTF-16 surrogate (which
    neither Redis nor an answer can encode), all read by `parse_json`, never a 500."""
    try:
        body = parse_json(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise Refusal(problem(400, "invalid_json", f"the body is not JSON: {exc}")) from None
    if not isinstance(body, dict):
        raise Refusal(problem(400, "invalid_json", "the body must be a JSON object"))
    return body


def signature_refusal(refused: Refused) -> Refusal:
    return Refusal(problem(401, refused.reason, refused.detail))


def not_configured(error: str, message: str) -> Refusal:
    return Refusal(problem(404, error, message))


def pong() -> JSONResponse:
    return JSONResponse({"ok": True, "status": "pong"})


def provider_paths() -> dict[str, Any]:
    """The OpenAPI entries of the provider routes (plain Starlette routes, so FastAPI does not
    list them itself). Their bodies are the providers' own (see their documentation); they
    take no bearer token: the signature headers are their authentication."""
    responses = _refusal_responses()
    event = {"type": "object", "description": "the provider's event envelope"}
    return {
        "/webhooks/slack": _slack_events(responses, event),
        "/webhooks/slack/interactions": _slack_interactions(responses),
        "/webhooks/github": _github_events(responses, event),
    }


def _refusal_responses() -> dict[str, Any]:
    """The answers every provider route may give besides its 200, each a Problem."""
    refusals = {
        400: "not a JSON object, not the provider's envelope, or a malformed id or header",
        401: "a missing, malformed or wrong signature, or a timestamp out of tolerance",
        404: "this provider's secret is not configured",
        415: "a content type the provider route does not read",
    }
    responses = {
        str(status): answer
        for status, answer in answers({}, *refusals, 413, 429, 503, why=refusals).items()
    }
    for answer in responses.values():
        answer["content"] = {"application/json": {"schema": {"$ref": COMPONENTS + "Problem"}}}
        del answer["model"]
    return responses


def _slack_events(responses: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    receipt = {"$ref": COMPONENTS + "ProviderReceipt"}
    slack_ok = {"anyOf": [receipt, {"$ref": COMPONENTS + "SlackChallenge"}]}
    return {
        "post": {
            "summary": "Slack Events API",
            "description": "Signed with X-Slack-Signature over `v0:{timestamp}:{body}`; "
            "X-Slack-Request-Timestamp within 5 minutes. Answers url_verification with "
            "its challenge. A refusal carries X-Slack-No-Retry.",
            "operationId": "slack_events",
            "security": [],
            "parameters": [
                _header("X-Slack-Signature", "`v0=` and the HMAC-SHA256 of the base string"),
                _header("X-Slack-Request-Timestamp", "Unix seconds, within 5 minutes"),
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": event}},
            },
            "responses": {"200": _ok(slack_ok), **responses},
        }
    }


def _slack_interactions(responses: dict[str, Any]) -> dict[str, Any]:
    return {
        "post": {
            "summary": "Slack interactivity (an ask's buttons)",
            "description": "Signed as the Events API is. A click on an ask's button "
            "answers it (recorded before the 200; the message is changed in place and "
            "any ephemeral reply sent after it). Every other interaction is answered 200 "
            "with an empty body and changes nothing. A refusal carries X-Slack-No-Retry.",
            "operationId": "slack_interactions",
            "security": [],
            "parameters": [
                _header("X-Slack-Signature", "`v0=` and the HMAC-SHA256 of the base string"),
                _header("X-Slack-Request-Timestamp", "Unix seconds, within 5 minutes"),
            ],
            "requestBody": {
                "required": True,
                "content": {
                    "application/x-www-form-urlencoded": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                "payload": {
                                    "type": "string",
                                    "description": "the interaction's JSON",
                                }
                            },
                            "required": ["payload"],
                        }
                    }
                },
            },
            "responses": {
                "200": {"description": "answered or changed nothing; an empty body"},
                **responses,
            },
        }
    }


def _github_events(responses: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    receipt = {"$ref": COMPONENTS + "ProviderReceipt"}
    return {
        "post": {
            "summary": "GitHub webhooks",
            "description": "Signed with X-Hub-Signature-256; X-GitHub-Event and "
            "X-GitHub-Delivery required. Answers ping with `pong`.",
            "operationId": "github_events",
            "security": [],
            "parameters": [
                _header("X-Hub-Signature-256", "`sha256=` and the HMAC-SHA256 of the body"),
                _header("X-GitHub-Event", "the event's name (`issues`, `ping`, ...)"),
                _header("X-GitHub-Delivery", "the delivery's GUID"),
            ],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": event},
                    "application/x-www-form-urlencoded": {
                        "schema": {
                            "type": "object",
                            "properties": {"payload": {"type": "string"}},
                            "required": ["payload"],
                        }
                    },
                },
            },
            "responses": {"200": _ok(receipt), **responses},
        }
    }


def _header(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "header",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
    }


def _ok(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": "accepted, duplicate, skipped (with its reason: `unsupported_event:<type>` "
        "for an event Seatwire does not read, `missing_field:<path>` for one without what it "
        "would read), or the provider's handshake",
        "content": {"application/json": {"schema": schema}},
    }
