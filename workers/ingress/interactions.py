"""`POST /webhooks/slack/interactions`: Slack's interactivity requests, where a click on an
ask's button (pipeline/slack_buttons.py) arrives. Steps: read (413 past the body cap) ->
verify (the Events API's own v0 signature and timestamp window, the same code: 404 without a
signing secret, 401 forged or stale) -> parse (the form's one `payload` field, a JSON object;
400 otherwise) -> read the interaction -> answer it.

Slack wants an answer within 3 s, and shows the clicker an error past it. So the answer is
recorded before the 200 (through workers/stages/answers.py, in a worker thread, within the
webhook budget: recorded with the seat's inbox item, or a 503 and nothing recorded), and what
only the person sees comes after the 200, as the response's background task: the message
changed in place (`chat.update`) and any ephemeral reply through the payload's
`response_url`.

What a click does:
- answered or snoozed: the message shows the answer, who gave it and when (a snooze keeps
  its buttons and says until when);
- a consent clicked by someone it is not asked of (`not_a_target`): an ephemeral "this ask is
  for ..." and nothing changes;
- a second click, a second person, a repeat (`late_answer`): written in the ask's history by
  the store, and an ephemeral "already answered: ... by ... at ...";
- a closed or unknown ask, or a clicker the org file does not know: an ephemeral saying so,
  nothing changes.

A click on an answered consent's "Revoke consent" button (`RevokeClick`) revokes it
(workers/stages/consents.py), recorded with the seat's `consent_revoked` inbox item before the
200, and the message then shows the consent revoked, without the button. Only the person who
gave it, or another person its ask was put to, may: anyone else gets an ephemeral "only ...
can revoke this" and nothing changes; so does a consent unknown, expired or already revoked
(a retried click among them: nothing more is written).

Every other interaction (a modal submitted or closed, a shortcut, a message action, another
app's button, a button in a view or with no message) is a correctly signed request, so it is
answered 200 with an empty body, logged and counted (`seatwire_slack_interactions`), never a
4xx or 5xx, and changes nothing. A refusal carries `X-Slack-No-Retry` as the events route's do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from starlette.background import BackgroundTask

from contracts.asks import Ask, AskLanding
from pipeline.asks import AnswerIn, revokers
from pipeline.slack_buttons import (
    Click,
    Ignored,
    RevokeClick,
    closed_said,
    read_interaction,
    said,
)
from workers.ingress.deps import IngressDeps, deps_of
from workers.ingress.http import Refusal, parse_json, problem, read_body, within_budget
from workers.ingress.slack import no_retry, verify
from workers.org import OrgView
from workers.outbound.slack import mention, slack_date, slack_user_id
from workers.stages.answers import Answers
from workers.stages.consents import Consents
from workers.stores.asks import Answered, AskContended, AskMissing, Revoked
from workers.telemetry import telemetry

log = logging.getLogger("seatwire.webhooks")

# The payload types Slack's interactivity sends, counted by name; anything else as `other`
# (the label's values stay few whatever a request carries).
KINDS = frozenset(
    {
        "block_actions",
        "view_submission",
        "view_closed",
        "shortcut",
        "message_action",
        "block_suggestion",
        "interactive_message",
        "dialog_submission",
    }
)
RESPOND_TIMEOUT_S = 5.0  # an ephemeral reply, after the 200: nobody waits on it but the person


async def slack_interactions(request: Request) -> Response:
    """Slack's interactivity: a click on an ask's button answers it; the rest is a 200."""
    deps = deps_of(request)
    try:
        raw = await read_body(request, deps.settings.max_body_bytes)
        verify(request, raw, deps)
        payload = parse(raw)
    except Refusal as refusal:
        return no_retry(refusal.response)
    read = read_interaction(payload)
    if isinstance(read, Ignored):
        kind = read.kind if read.kind in KINDS else "other"
        log.info("slack interaction %s changes nothing: %s", read.kind, read.reason)
        telemetry().slack_interaction(kind, "ignored")
        return Response(status_code=200)
    if isinstance(read, RevokeClick):
        return await revoke_click(deps, read)
    return await answer_click(deps, read)


def parse(raw: bytes) -> dict[str, Any]:
    """The form's one `payload` field as a JSON object, or a 400 Refusal saying what Slack
    sends instead."""
    try:
        form = parse_qs(raw.decode("utf-8", "replace"), max_num_fields=10)
    except ValueError:  # more than max_num_fields fields
        form = {}
    payloads = form.get("payload", [])
    if len(payloads) != 1:
        raise Refusal(
            problem(
                400,
                "invalid_form",
                "an interaction is a form (application/x-www-form-urlencoded) with exactly one "
                "`payload` field holding its JSON",
            )
        )
    try:
        body = parse_json(payloads[0].encode())
    except ValueError as exc:
        raise Refusal(problem(400, "invalid_json", f"`payload` is not JSON: {exc}")) from None
    if not isinstance(body, dict):
        raise Refusal(problem(400, "invalid_json", "`payload` must be a JSON object"))
    return body


async def answer_click(deps: IngressDeps, click: Click) -> Response:
    """Record the click's answer, then answer Slack at once: what the person sees (the
    message changed in place, an ephemeral reply) is done after the 200."""
    view, _degraded = deps.container.org.current()
    member = view.member_of(click.user_id)
    if member is None:
        return stranger(click.user_id, click.response_url, f"{click.verb} on ask {click.ask_id}")
    telemetry().slack_interaction("block_actions", "clicked")
    answers = Answers(deps.container, deps.celery)
    answer = AnswerIn(
        click.verb,
        member,
        "slack_button",
        text="",
        consent_ttl_ms=click.consent_ttl_ms,
        # Slack sending the same click again (a retry) is the same answer, not a late one.
        key=f"slack:{click.action_ts}:{click.user_id}:{click.verb}" if click.action_ts else None,
    )
    now_ms = deps.clock_ms()

    def record() -> Answered:
        return answers.answer(click.ask_id, answer, now_ms=now_ms, show=False)

    try:
        got = await within_budget(deps.settings.webhook_budget_s, run_in_threadpool(record))
    except AskMissing:
        log.info("Slack click on unknown ask %s by %s: nothing changed", click.ask_id, member)
        text = f"Seatwire has no ask {click.ask_id}: your click changes nothing."
        return after_response(respond, click.response_url, text)
    except AskContended as exc:
        log.error("Slack click on ask %s by %s not recorded: %s", click.ask_id, member, exc)
        text = "Seatwire could not record your answer: too many answers at once. Click again."
        return after_response(respond, click.response_url, text)
    return after_response(follow_up, answers, click, got, view)


def stranger(user_id: str, response_url: str | None, what: str) -> Response:
    """A click by a Slack user the org file does not know: nothing changes, and they are told
    how to be known."""
    telemetry().slack_interaction("block_actions", "unknown_member")
    log.warning(
        "Slack user %s clicked %s and is nobody in the org file: nothing changed", user_id, what
    )
    text = (
        f"<@{user_id}>, Seatwire does not know your Slack user, so your click changes "
        "nothing: ask an operator to add your Slack user id to your member's aliases."
    )
    return after_response(respond, response_url, text)


async def revoke_click(deps: IngressDeps, click: RevokeClick) -> Response:
    """Revoke the consent a click names, as the member who clicked: recorded before the 200
    (with the seat's inbox item), the message shown again after it."""
    view, _degraded = deps.container.org.current()
    member = view.member_of(click.user_id)
    if member is None:
        return stranger(click.user_id, click.response_url, f"revoke on {click.consent_id}")
    telemetry().slack_interaction("block_actions", "clicked")
    consents = Consents(deps.container, deps.celery)
    now_ms = deps.clock_ms()

    def record() -> Revoked | None:
        return consents.revoke(click.consent_id, by=member, now_ms=now_ms, anyone=False, show=False)

    try:
        got = await within_budget(deps.settings.webhook_budget_s, run_in_threadpool(record))
    except AskContended as exc:
        log.error("revoking consent %s by %s not recorded: %s", click.consent_id, member, exc)
        text = "Seatwire could not record your revocation: too much at once. Click again."
        return after_response(respond, click.response_url, text)
    if got is None:
        log.info(
            "Slack revoke of unknown consent %s by %s: nothing changed", click.consent_id, member
        )
        text = (
            f"Seatwire has no consent {click.consent_id} (it is no longer kept): your click "
            "changes nothing."
        )
        return after_response(respond, click.response_url, text)
    return after_response(revoked_follow_up, consents, click, got, view)


def revoked_follow_up(consents: Consents, click: RevokeClick, got: Revoked, view: OrgView) -> None:
    """After the 200: the consent's messages show it revoked (or, for a click that changed
    nothing, as it stands: a message a failed update left with its button heals), and the
    clicker hears why a click that changed nothing changed nothing."""
    r = got.revocation
    if r.reason_code != "not_a_revoker":
        consents.show(got, also=click.ask_id)
    if r.outcome == "revoked":
        return
    c = r.consent
    if r.reason_code == "not_a_revoker":
        allowed = revokers(c, r.ask)
        users = slack_ids(view, allowed)
        names = " or ".join(mention(m, users) for m in allowed)
        text = f"Only {names} can revoke this consent: your click changes nothing."
    elif r.reason_code == "already_revoked" and c.revoked_at_ms is not None:
        users = slack_ids(view, [c.revoked_by or ""])
        text = (
            f"This consent was already revoked by {mention(c.revoked_by or '?', users)} on "
            f"{slack_date(c.revoked_at_ms)}: your click changes nothing."
        )
    elif r.reason_code == "consent_expired":
        text = f"This consent expired on {slack_date(c.expires_at_ms)}: there is nothing to revoke."
    else:
        text = f"Your click changes nothing: {r.why}"
    respond(click.response_url, text)


def after_response(func: Any, *args: Any) -> Response:
    """An empty 200, `func(*args)` run once it is sent (Starlette runs a plain function in a
    worker thread)."""
    return Response(status_code=200, background=BackgroundTask(func, *args))


def slack_ids(view: OrgView, member_ids: Iterable[str]) -> dict[str, str]:
    """The Slack user ids of these members (those the org file gives one), looked up one by
    one: a click must not walk a large org's every member."""
    found: dict[str, str] = {}
    for member_id in member_ids:
        member = view.member(member_id)
        uid = slack_user_id(member.aliases) if member is not None else None
        if uid is not None:
            found[member_id] = uid
    return found


def follow_up(answers: Answers, click: Click, got: Answered, view: OrgView) -> None:
    """After the 200: the message shows where the ask stands, and the clicker hears why a
    click that changed nothing changed nothing."""
    outcome = got.outcome
    ask = outcome.ask
    if outcome.outcome in ("answered", "snoozed"):
        show_all(answers, click, ask)
        return
    first_by = (ask.answer.by,) if ask.answer is not None else ()
    users = slack_ids(view, (*first_by, *ask.asked_ids()))
    text: str
    if outcome.outcome == "late_answer" and ask.answer is not None:
        show_all(answers, click, ask)  # a message a failed update left with buttons heals
        first = ask.answer
        text = (
            f"Already answered: {said(ask.trigger, first.answer).lower()} by "
            f"{mention(first.by, users)} on {slack_date(first.at_ms)}. Your click is written "
            "down and changes nothing."
        )
    elif outcome.reason_code == "not_a_target":
        asked = ", ".join(mention(m, users) for m in ask.asked_ids()) or "nobody"
        text = f"This ask is for {asked}: only they can answer it, so your click changes nothing."
    elif outcome.reason_code == "ask_closed":
        show_all(answers, click, ask)
        text = f"This ask is closed ({closed_said(ask.closed)}): your click changes nothing."
    else:
        text = f"Your click changes nothing: {outcome.why}"
    respond(click.response_url, text)


def show_all(answers: Answers, click: Click, ask: Ask) -> None:
    """The ask on its message, and every message of its escalations: the clicked one when a
    click on an escalation answered the seat's own ask, and the ones an answer closed."""
    answers.show(landed_at(ask, click))
    shown = {ask.id}
    for other in answers.asks.escalations_of(ask.id) if ask.escalates is None else ():
        shown.add(other.id)
        answers.show(other)
    if click.ask_id not in shown:
        clicked = answers.asks.get(click.ask_id)
        if clicked is not None:
            answers.show(landed_at(clicked, click))


def landed_at(ask: Ask, click: Click) -> Ask:
    """`ask`, with the clicked message as its landing when it has none yet: answered while
    its send was still being written down, its message can still show the answer."""
    if ask.landing is not None or ask.id != click.ask_id:
        return ask
    where = AskLanding(
        adapter="slack",
        channel_id=click.channel_id,
        message_id=click.message_ts,
        at_ms=ask.created_at_ms,
    )
    return ask.model_copy(update={"landing": where})


def respond(url: str | None, text: str) -> bool:
    """An ephemeral reply to the clicker through the interaction's `response_url` (only they
    see it; the message is not replaced). A failure is logged: the answer is on record."""
    if not url or urlsplit(url).scheme not in ("https", "http"):
        log.warning("no response_url to tell the clicker: %s", text)
        return False
    body = {"response_type": "ephemeral", "replace_original": False, "text": text}
    try:
        reply = httpx.post(url, json=body, timeout=RESPOND_TIMEOUT_S)
    except httpx.HTTPError as exc:
        log.warning("could not reply to the clicker through Slack's response_url: %s", exc)
        return False
    if reply.status_code >= 300:
        log.warning("Slack's response_url answered %s: %s", reply.status_code, reply.text[:200])
        return False
    return True
