"""`POST /webhooks/github`, GitHub webhooks, as a list of steps: read -> verify -> headers ->
parse -> (ping) -> normalise -> accept. A step that refuses raises `Refusal`, which the app's
handler answers. See providers.py for the order of checks."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs

import redis
from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from contracts import Candidate
from pipeline.issues import observation_of
from pipeline.normalise import Skipped
from pipeline.normalise.github import normalise_github
from pipeline.signatures import Refused, verify_github
from pipeline.work_items import summaries_of
from workers.ingress.accept import accept_outcome
from workers.ingress.deps import IngressDeps, deps_of
from workers.ingress.http import Refusal, media_type, problem, read_body, unsupported_media
from workers.ingress.providers import (
    MAX_DELIVERY_ID,
    json_object,
    not_configured,
    pong,
    signature_refusal,
)

# The GitHub events Seatwire reads (X-GitHub-Event), some of their actions (see
# pipeline/normalise/github.py). Any other event or action (`push`, `star`, `workflow_run`, a
# label added) is a well-formed, signed delivery: journalled as skipped with
# `unsupported_event:<event>.<action>` and answered 200, never 4xx, which GitHub counts as a
# failed delivery.
GITHUB_EVENTS = frozenset(
    {
        "issues",
        "pull_request",
        "issue_comment",
        "pull_request_review_comment",
        "pull_request_review",
    }
)
# Whatever normalise_github skips (an event or action not read, or one without what Seatwire
# would read of it) is journalled as skipped with its reason and answered 200.


log = logging.getLogger("seatwire.ingress")


async def github_events(request: Request) -> Response:
    """GitHub webhooks: X-Hub-Signature-256, deduped by X-GitHub-Delivery, ping."""
    deps = deps_of(request)
    raw = await read_body(request, deps.settings.max_body_bytes)
    verify(request, raw, deps)
    event, delivery = delivery_of(request)
    body = parse(request, raw)
    if event == "ping":
        return pong()
    outcome = normalise(event, body, delivery, deps)
    answer = await accept_outcome(deps, outcome, skip_as=f"github:{delivery}", source="github")
    await observe_issue(deps, event, body)
    return answer


async def observe_issue(deps: IngressDeps, event: str, body: Any) -> None:
    """What the event says of an issue or pull request number of the project's repository,
    for `get_issue_coordination`'s `githubObservation` (the newest GitHub update wins), and
    the work summaries it carries (Issues, pull requests, milestones) for `find_work`. An
    observation that cannot be written is logged: the event itself is already journalled."""
    repository = deps.container.org.current()[0].org.project.repository
    if not isinstance(body, dict):
        return
    now_ms = deps.clock_ms()
    observed = observation_of(event, body, repository=repository, received_at_ms=now_ms)
    if observed is not None:
        try:
            await run_in_threadpool(deps.container.issues.observe, observed)
        except redis.RedisError as exc:
            log.warning("could not record the GitHub observation of #%s: %s", observed.number, exc)
    for summary in summaries_of(event, body, repository=repository, received_at_ms=now_ms):
        try:
            await run_in_threadpool(deps.container.work.observe, summary)
        except redis.RedisError as exc:
            log.warning(
                "could not record the GitHub work summary of %s #%s: %s",
                summary.kind,
                summary.number,
                exc,
            )


def verify(request: Request, raw: bytes, deps: IngressDeps) -> None:
    secret = deps.settings.github_secret()
    if secret is None:
        raise not_configured("github_not_configured", "set GITHUB_WEBHOOK_SECRET to receive GitHub")
    verdict = verify_github(request.headers, raw, secret=secret)
    if isinstance(verdict, Refused):
        raise signature_refusal(verdict)


def delivery_of(request: Request) -> tuple[str, str]:
    """X-GitHub-Event (lowercased) and X-GitHub-Delivery, or a 400 Refusal."""
    event = (request.headers.get("x-github-event") or "").strip().lower()
    delivery = (request.headers.get("x-github-delivery") or "").strip()
    if not event:
        raise Refusal(problem(400, "missing_header", "X-GitHub-Event is required"))
    if not delivery or len(delivery) > MAX_DELIVERY_ID or not delivery.isprintable():
        raise Refusal(problem(400, "missing_header", "X-GitHub-Delivery is required (a GUID)"))
    return event, delivery


def parse(request: Request, raw: bytes) -> dict[str, Any]:
    """A JSON body, or a form whose one `payload` field is the JSON."""
    ctype = media_type(request, default="")
    if ctype == "application/json":
        return json_object(raw)
    if ctype != "application/x-www-form-urlencoded":
        raise Refusal(unsupported_media(ctype))
    try:
        form = parse_qs(raw.decode("utf-8", "replace"), max_num_fields=10)
    except ValueError:  # more than max_num_fields fields
        form = {}
    payloads = form.get("payload", [])
    if len(payloads) != 1:
        raise Refusal(problem(400, "invalid_form", "a form body carries exactly one `payload`"))
    return json_object(payloads[0].encode())


def normalise(
    event: str, body: dict[str, Any], delivery: str, deps: IngressDeps
) -> Candidate | Skipped:
    view, _ = deps.container.org.current()
    return normalise_github(
        event,
        body,
        delivery_id=delivery,
        received_at_ms=deps.clock_ms(),
        logins=view.github_logins,
    )
