"""Inbound routes: Slack's Events API, GitHub webhooks and generic `Candidate`s.

Every route checks, in order, before anything is written: size (413); for a provider
route, that its secret is set (404), then the signature (401); for `/v1/events` the bearer
token comes first (401). Then content type (415), the body (400; 422 for a `Candidate`), and
the event type (422). A malformed header, timestamp or body is a 4xx with a reason, never a
5xx, and a refused request journals nothing.

An accepted event is journalled and its directedness task enqueued BEFORE the 2xx. Its
journal entry is keyed by the event's delivery id, so the entry is also the dedupe record:
Slack's retries (and its `app_mention` twin of a `message`) and GitHub's redeliveries answer
2xx `duplicate` and enqueue nothing new, for as long as the entry is kept (7 days by default,
above Slack's 24 h and GitHub's 72 h windows). An event that addresses nobody by its nature
(a channel join, a deletion, an action we do not consider) is journalled as `skipped` with
its reason and answered 200, so the provider does not retry it and the trace shows why.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from contracts import Candidate
from contracts.messages import InboundEnvelope
from pipeline.normalise import Skipped, as_str
from pipeline.normalise.github import normalise_github
from pipeline.normalise.slack import normalise_slack
from pipeline.signatures import Refused, verify_github, verify_slack
from workers.container import Container
from workers.ingress.accept import Arrival, Intake
from workers.ingress.http import (
    BodyTooLarge,
    invalid,
    media_type,
    problem,
    read_capped,
    too_large,
    unsupported_media,
    within_budget,
)
from workers.queues import Task
from workers.stores.inbound import inbound_tracking_id

log = logging.getLogger("seatwire.webhooks")

# The GitHub events Seatwire considers (X-GitHub-Event). Any other is refused with 422: the
# hook is subscribed to more than Seatwire reads, which its owner should fix.
GITHUB_EVENTS = frozenset(
    {"issues", "pull_request", "issue_comment", "pull_request_review_comment"}
)
MAX_DELIVERY_ID = 120
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _json_object(raw: bytes) -> dict[str, Any] | JSONResponse:
    try:
        body = json.loads(raw)
        if SURROGATE_ESCAPE.search(raw):
            # A lone `\ud800` parses to a string neither Redis nor an answer can encode;
            # refuse it here rather than fail (500) later. Paired escapes pass.
            json.dumps(body, ensure_ascii=False).encode()
    except (ValueError, RecursionError) as exc:  # also an integer past Python's digit limit
        return problem(400, "invalid_json", f"the body is not JSON: {exc}")
    if not isinstance(body, dict):
        return problem(400, "invalid_json", "the body must be a JSON object")
    return body


def _refusal(refused: Refused) -> JSONResponse:
    return problem(401, refused.reason, refused.detail)


def _normalise_refusal(skip: Skipped) -> JSONResponse:
    """A payload that cannot be an event at all: 422 for an event type we do not consider,
    400 for one that lacks what every event of its type carries."""
    code = skip.reason.split(":", 1)[0]
    if code == "unsupported_event":
        return problem(
            422,
            "unsupported_event",
            f"{skip.reason.split(':', 1)[-1]}: {skip.detail}; subscribe only to the events "
            "Seatwire reads (see the README)",
        )
    return problem(400, "invalid_event", f"{skip.reason}: {skip.detail}")


def inbound_routes(
    container: Container,
    intake: Intake,
    *,
    clock_ms: Callable[[], int],
    authorised: Callable[[Request], bool],
    unauthorised: Callable[[], Response],
    count: Callable[[str, Response], Response],
) -> APIRouter:
    settings = container.settings
    cap = settings.max_body_bytes
    budget = settings.webhook_budget_s
    router = APIRouter()

    async def accept(candidate: Candidate, fingerprint: str) -> tuple[int, dict[str, Any]]:
        """Journal the event once and enqueue its directedness task; a repeat is a no-op
        (unless an earlier delivery was journalled but never enqueued: then enqueue it now)."""
        tracking = inbound_tracking_id(candidate.delivery_id)
        accepted_at = clock_ms()
        payload = InboundEnvelope(
            tracking_id=tracking, accepted_at_ms=accepted_at, candidate=candidate
        ).model_dump_json(by_alias=True)
        done = await intake.accept(
            Arrival(
                task=Task.DIRECTEDNESS,
                tracking_id=tracking,
                kind="inbound",
                seat_id="",
                payload=payload,
                fingerprint=fingerprint,
                now_ms=accepted_at,
            )
        )
        if done.verb == "conflict":
            return 409, {
                "error": "delivery_reused",
                "message": f"delivery {candidate.delivery_id!r} was already received with "
                "different content; give a changed event a delivery id of its own",
                "trackingId": tracking,
            }
        return 200, {
            "ok": True,
            "status": "accepted" if done.new else "duplicate",
            "deliveryId": candidate.delivery_id,
            "trackingId": tracking,
            "state": done.state,
        }

    def skip(delivery_id: str, source: str, reason: Skipped) -> tuple[int, dict[str, Any]]:
        tracking = inbound_tracking_id(delivery_id)
        payload = json.dumps({"source": source, "deliveryId": delivery_id})
        new = container.journal.skip(
            tracking,
            kind="inbound",
            payload=payload,
            reason=reason.reason,
            detail=reason.detail,
            now_ms=clock_ms(),
            retention_ms=settings.inbound_retention_ms,
        )
        return 200, {
            "ok": True,
            "status": "skipped" if new else "duplicate",
            "reason": reason.reason,
            "deliveryId": delivery_id,
            "trackingId": tracking,
        }

    async def settle(route: str, work: Awaitable[tuple[int, dict[str, Any]]]) -> Response:
        done = await within_budget(budget, work)
        if isinstance(done, Response):
            return count(route, done)
        status, body = done
        encoded = json.dumps(body, separators=(",", ":")).encode()
        return count(route, Response(encoded, status_code=status, media_type="application/json"))

    async def slack_events(request: Request) -> Response:
        """Slack's Events API: v0 signature, url_verification, events deduped by delivery."""
        route = "slack"

        def answer(response: Response) -> Response:
            # A refusal is final: Slack must not retry it (three retries of every refused
            # event count against the app's delivery success, which Slack can disable).
            if 400 <= response.status_code < 500:
                response.headers["X-Slack-No-Retry"] = "1"
            return count(route, response)

        try:
            raw = await read_capped(request, cap)
        except BodyTooLarge:
            return answer(too_large(cap))
        secret = settings.slack_secret()
        if secret is None:
            return answer(
                problem(404, "slack_not_configured", "set SLACK_SIGNING_SECRET to receive Slack"),
            )
        verdict = verify_slack(request.headers, raw, secret=secret, now_s=clock_ms() // 1000)
        if isinstance(verdict, Refused):
            return answer(_refusal(verdict))
        ctype = media_type(request, default="")
        if ctype != "application/json":
            return answer(
                unsupported_media(ctype, "Events API bodies are JSON"),
            )
        body = _json_object(raw)
        if isinstance(body, Response):
            return answer(body)
        kind = body.get("type")
        if kind == "url_verification":
            challenge = body.get("challenge")
            if not isinstance(challenge, str) or not challenge:
                return answer(problem(400, "invalid_event", "url_verification without a challenge"))
            return answer(JSONResponse({"challenge": challenge}))
        if kind == "app_rate_limited":
            # Slack tells us it dropped events: nothing to replay, so it must be loud.
            log.error("Slack rate-limited event delivery to this app: %s", body)
            return answer(JSONResponse({"ok": True, "status": "noted"}))
        if kind != "event_callback":
            return answer(problem(400, "unknown_envelope", f"envelope type {str(kind)[:64]!r}"))
        event_id = as_str(body.get("event_id"))
        if event_id is None or len(event_id) > MAX_DELIVERY_ID:
            return answer(problem(400, "invalid_event", "event_callback without an event_id"))
        outcome = normalise_slack(body, received_at_ms=clock_ms())
        if isinstance(outcome, Candidate):
            return await settle(route, accept(outcome, ""))
        if outcome.reason.split(":", 1)[0] in (
            "unsupported_event",
            "missing_field",
            "invalid_candidate",
            "unsupported_envelope",
        ):
            return answer(_normalise_refusal(outcome))
        return await settle(
            route, run_in_threadpool(skip, f"slack-event:{event_id}", "slack", outcome)
        )

    async def github_events(request: Request) -> Response:
        """GitHub webhooks: X-Hub-Signature-256, deduped by X-GitHub-Delivery, ping."""
        route = "github"
        try:
            raw = await read_capped(request, cap)
        except BodyTooLarge:
            return count(route, too_large(cap))
        secret = settings.github_secret()
        if secret is None:
            return count(
                route,
                problem(
                    404, "github_not_configured", "set GITHUB_WEBHOOK_SECRET to receive GitHub"
                ),
            )
        verdict = verify_github(request.headers, raw, secret=secret)
        if isinstance(verdict, Refused):
            return count(route, _refusal(verdict))
        event = (request.headers.get("x-github-event") or "").strip().lower()
        delivery = (request.headers.get("x-github-delivery") or "").strip()
        if not event:
            return count(route, problem(400, "missing_header", "X-GitHub-Event is required"))
        if not delivery or len(delivery) > MAX_DELIVERY_ID or not delivery.isprintable():
            return count(
                route, problem(400, "missing_header", "X-GitHub-Delivery is required (a GUID)")
            )
        ctype = media_type(request, default="")
        if ctype == "application/json":
            body = _json_object(raw)
        elif ctype == "application/x-www-form-urlencoded":
            try:
                form = parse_qs(raw.decode("utf-8", "replace"), max_num_fields=10)
            except ValueError:  # more than max_num_fields fields
                form = {}
            payloads = form.get("payload", [])
            body = (
                _json_object(payloads[0].encode())
                if len(payloads) == 1
                else problem(400, "invalid_form", "a form body carries exactly one `payload`")
            )
        else:
            return count(
                route,
                unsupported_media(ctype),
            )
        if isinstance(body, Response):
            return count(route, body)
        if event == "ping":
            return count(route, JSONResponse({"ok": True, "status": "pong"}))
        if event not in GITHUB_EVENTS:
            return count(
                route,
                problem(
                    422,
                    "unsupported_event",
                    f"{event[:64]}: Seatwire reads {sorted(GITHUB_EVENTS)}; "
                    "unsubscribe the hook from the rest",
                ),
            )
        view, _ = container.org.current()
        outcome = normalise_github(
            event,
            body,
            delivery_id=delivery,
            received_at_ms=clock_ms(),
            logins=view.github_logins,
        )
        if isinstance(outcome, Candidate):
            return await settle(route, accept(outcome, ""))
        if outcome.reason.split(":", 1)[0] in (
            "missing_field",
            "invalid_candidate",
            "unsupported_envelope",
        ):
            return count(route, _normalise_refusal(outcome))
        # A known event with an action we do not consider (an issue opened, a label added).
        return await settle(route, run_in_threadpool(skip, f"github:{delivery}", "github", outcome))

    # The provider routes are plain Starlette routes: their shape is the provider's, not ours,
    # and skipping FastAPI's per-request dependency machinery is a fifth of the hot path's
    # overhead (bench/ingress.py). They are listed in the OpenAPI document by hand below.
    router.add_route("/webhooks/slack", slack_events, methods=["POST"])
    router.add_route("/webhooks/github", github_events, methods=["POST"])

    @router.post("/v1/events", status_code=202)
    async def post_event(request: Request) -> Response:
        """A normalised `Candidate` from any other source; 202 once it is journalled."""
        route = "events"
        if not authorised(request):
            return count(route, unauthorised())
        try:
            raw = await read_capped(request, cap)
        except BodyTooLarge:
            return count(route, too_large(cap))
        ctype = media_type(request)
        if ctype not in ("application/json", ""):
            return count(
                route,
                unsupported_media(ctype),
            )
        try:
            candidate = Candidate.model_validate_json(raw)
        except ValidationError as exc:
            return count(route, invalid("invalid_candidate", exc))
        fingerprint = hashlib.sha256(candidate.model_dump_json(by_alias=True).encode()).hexdigest()
        done = await within_budget(settings.ingress_budget_s, accept(candidate, fingerprint))
        if isinstance(done, Response):
            return count(route, done)
        status, body = done
        return count(route, JSONResponse(body, status_code=202 if status == 200 else status))

    return router


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
