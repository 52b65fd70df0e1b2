"""The ask record over HTTP (issue 26): what became of the asks, answers from anywhere, consent
records and the nuisance brake.

    GET  /v1/asks[?state=&seat=&person=&since=&cursor=&limit=]   asks, newest first, paged
    GET  /v1/asks/{askId}                       one ask, its history and its escalations
    POST /v1/asks/{askId}/answer                an answer (the operator token, or ?token=)
    GET  /v1/asks/{askId}/answer?token=...      what the link answers (a browser: its page)
    GET  /v1/consents[?all=true&limit=]         consent records (active ones by default)
    POST /v1/consents/{consentId}/revoke        {"by": MEMBER} (the operator token, or ?token=)
    POST /v1/seats/{seat}/asks/release          {"by": MEMBER}: lift the seat's brake

Every route takes the operator token (v1.py `require_token`: a seat token is 403
`operator_only`). A seat reads its own asks with its tools `list_asks` and `get_ask` (MCP,
or `POST /v1/seats/{seat}/tools/...` with its own token), as it reads everything else of its
own: the `/v1/asks` listing is the operator's view of every seat.

The answer route also takes an answer link instead of a bearer token: `?token=` a signed,
expiring token for that one ask and the people it asked (pipeline/answer_links.py). A `token`
parameter makes the request a link's: its token alone decides (a bearer token beside it is
not looked at). Its refusals, in order, none of them writing anything:

    401 `unauthorized`    no token at all (or a bearer token nobody issued)
    401 `invalid_link`    a token Seatwire did not sign (forged, cut, or signed with a key
                          since changed); `link_expired` one past its expiry
    403 `operator_only`   a seat's bearer token
    413 / 415             the body is too large, or neither JSON nor a form
    404 `unknown_ask`     no such ask, or a valid link of another ask (nothing is revealed)
    422 `invalid_answer`  the body is not an AnswerRequest (unknown fields too), or
                          `snoozeUntilMs` without `snoozed`, `consentTtlMs` without `approved`
    422 `unknown_member`  `by` is not a member of the org
    403 `not_a_link_target` a link answer whose `by` is not one of the people the link names
    409 `late_answer`     the ask was answered first by someone else: this answer is written
                          in the ask's history and changes nothing else (`ask` shows the first)
    409 `ask_closed`      the ask ended without an answer (expired, withdrawn, ...)
    409 `not_a_target`    a consent answered by someone it was not put to
    422 `snooze_in_past` / `snooze_too_long`: the snooze's end is a wrong value (a field to
                          change, as any other 422), not a conflict with the record
    503 `busy`            the ask changed under every try (retry after Retry-After)

Every answer goes through workers/stages/answers.py `Answers` (recorded once with the seat's
inbox item, counted, the brake judged), `via` `api` (the operator token) or `link`. 200
answers the outcome (`answered` or `snoozed`) with the ask as it now stands; the answered
message is changed in place where the adapter can (Slack's `chat.update`, the webhook's
`seatwire.ask_answered` event) after the answer is sent back, so a slow provider never holds
it up (the record holds the answer whatever a message shows).

The revoke route takes the same link, of the ask the consent was given on (or of one of its
escalations), for the people it names: the link's page offers a Revoke button once the ask's
approval gave a consent that still holds. Its refusals, in order: 401 as above, 415, 404
`unknown_consent` (a link of another ask too), 422 `invalid_body` / `unknown_member`, 403
`not_a_link_target`, 409 `already_revoked` / `consent_expired`. A revocation is recorded with
the seat's `consent_revoked` inbox item (workers/stages/consents.py), and the consent's
messages are shown again after the reply.

The body is JSON (`AnswerRequest`), or a form (`application/x-www-form-urlencoded`, the same
fields, as the link's page posts it). A request that accepts `text/html` and no JSON (a
browser) is answered with a small page; any other gets the JSON above.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.security import APIKeyQuery, HTTPAuthorizationCredentials
from starlette.background import BackgroundTask

from contracts.ask_api import ActedBy, AnswerView, AskDetail, AsksPage, ConsentsPage
from contracts.asks import AnswerOutcome, AnswerRequest, Ask, AskBrake, ConsentRecord
from contracts.tools import MAX_SAFE
from pipeline.answer_links import LinkRefused
from pipeline.asks import AnswerIn
from pipeline.cursors import digest, pack, unpack
from workers.ingress.deps import Deps
from workers.ingress.docs import BODY, GUARDED, answers, reads
from workers.ingress.http import (
    Refusal,
    json_body,
    media_type,
    problem,
    read_body,
    unsupported_media,
    validated,
)
from workers.ingress.v1 import OperatorCredentials, require_token
from workers.stages.answers import Answers
from workers.stages.consents import Consents
from workers.stages.links import AnswerLinks
from workers.stores.asks import Answered, AskContended, AskMissing, AskStore, Revoked

router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)])
# The answer route decides its own caller: the operator's bearer token or an answer link.
answer_router = APIRouter(prefix="/v1")

link_query = APIKeyQuery(
    name="token",
    scheme_name="answerLink",
    auto_error=False,
    description="An answer link's token (the `token` of the `answerUrl` a webhook ask "
    "carries): answers that one ask, as one of the people it asked, until it expires.",
)
LinkToken = Annotated[str | None, Depends(link_query)]

FORM = "application/x-www-form-urlencoded"
StateFilter = Literal["open", "pending", "snoozed", "escalated", "answered", "closed"]
UNKNOWN_ASK = {404: "there is no ask of that id (`unknown_ask`)"}


def unknown_ask(ask_id: str) -> Response:
    return problem(404, "unknown_ask", f"there is no ask {ask_id!r}")


def unknown_member(by: str) -> Response:
    return problem(422, "unknown_member", f"by: {by!r} is not a member of the org", field="by")


def _member(deps: Deps, by: str) -> None:
    if deps.container.org.current()[0].member(by) is None:
        raise Refusal(unknown_member(by))


# ------------------------------------------------------------------ reading


Key = tuple[int, str]  # (created at ms, id): the listing's order, newest first


def _filters(state: str | None, seat: str | None, person: str | None, since: int | None) -> str:
    return digest([state, seat, person, since])[:16]


def _after(cursor: str | None, filters: str) -> Key | None:
    if cursor is None:
        return None
    data = unpack(cursor)
    if (
        isinstance(data, list)
        and len(data) == 4
        and data[:2] == ["asks", filters]
        and isinstance(data[2], int)
        and isinstance(data[3], str)
    ):
        return (data[2], data[3])
    raise Refusal(
        problem(
            422,
            "invalid_cursor",
            "cursor: not a cursor of this listing; pass the `next` of the previous page, with "
            "the same filters",
            field="cursor",
        )
    )


@router.get(
    "/asks",
    response_model=AsksPage,
    responses=answers(
        {},
        *GUARDED,
        404,
        422,
        why={
            404: "no seat of that name in the org (`unknown_seat`)",
            422: "a parameter is wrong, or `cursor` is not one of this listing's "
            "(`invalid_cursor`)",
        },
    ),
)
async def list_asks(
    deps: Deps,
    state: Annotated[StateFilter | None, Query()] = None,
    seat: Annotated[str | None, Query(max_length=200)] = None,
    person: Annotated[str | None, Query(max_length=200)] = None,
    since: Annotated[int | None, Query(ge=0, le=MAX_SAFE)] = None,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Response:
    """Asks newest first: `state` (`open` is every ask still waiting: pending, open, snoozed
    or escalated), `seat` (member id or alias), `person` (asked of them: a target or an
    escalation's), `since` (created at or after, Unix ms); `limit` a page, `next` the
    cursor of the one after. Reads at most the newest 1,000 asks of the index it filters on
    per page."""
    seat_id = None if seat is None else deps.seat(seat).member_id
    filters = _filters(state, seat_id, person, since)
    after = _after(cursor, filters)

    def read() -> list[Ask]:
        return deps.container.asks.listing(
            seat_id=seat_id,
            person=person,
            state=state,
            since_ms=since,
            until_ms=None if after is None else after[0],
        )

    found = sorted(await run_in_threadpool(read), key=lambda a: (a.created_at_ms, a.id))
    found.reverse()
    chosen = [a for a in found if after is None or (a.created_at_ms, a.id) < after]
    page = chosen[:limit]
    more = len(chosen) > limit
    nxt = pack(["asks", filters, page[-1].created_at_ms, page[-1].id]) if more and page else None
    return JSONResponse({"asks": [a.to_wire() for a in page], "count": len(page), "next": nxt})


@router.get(
    "/asks/{ask_id}",
    response_model=AskDetail,
    responses=answers({}, *GUARDED, 404, why=UNKNOWN_ASK),
)
async def get_ask(ask_id: str, deps: Deps) -> Response:
    """One ask: its state, targets, landing, answer, deadline and history, every rung it went
    up, and each escalation's own ask."""
    store = deps.container.asks
    ask = await run_in_threadpool(store.get, ask_id)
    if ask is None:
        return unknown_ask(ask_id)
    ups = await run_in_threadpool(store.escalations_of, ask_id)
    detail = AskDetail(ask=ask, escalations=ask.escalations, escalation_asks=tuple(ups))
    return JSONResponse(detail.to_wire())


# ------------------------------------------------------------------ answering


@dataclass(frozen=True)
class Answerer:
    """Who answers: the operator (`api`), or an answer link for these people (`link`)."""

    via: Literal["api", "link"]
    targets: tuple[str, ...] = ()
    expires_at_ms: int | None = None


def links_of(deps: Deps) -> AnswerLinks | None:
    return AnswerLinks.of(deps.settings)


def link_claim(deps: Deps, token: str, ask_id: str) -> Answerer:
    """The answerer a link is, for the ask the path names; a Refusal otherwise."""
    links = links_of(deps)
    if links is None:
        raise Refusal(
            problem(
                401,
                "invalid_link",
                "answer links are off here (no SEATWIRE_ANSWER_LINK_SECRET, no operator token)",
            )
        )
    got = links.read(token, now_ms=deps.clock_ms())
    if isinstance(got, LinkRefused):
        raise Refusal(problem(401, got.code, got.why))
    if got.ask_id != ask_id:
        raise Refusal(unknown_ask(ask_id))  # a valid link, of another ask: reveal nothing
    return Answerer("link", got.targets, got.expires_at_ms)


async def answerer(
    deps: Deps, ask_id: str, credentials: HTTPAuthorizationCredentials | None, token: str | None
) -> Answerer:
    if token is not None:
        return link_claim(deps, token, ask_id)
    await require_token(deps, credentials)
    return Answerer("api")


def form_fields(raw: bytes, code: str = "invalid_answer") -> dict[str, Any]:
    """A form's fields as the JSON body would carry them: each once, the two numbers as
    integers, empty optional fields left out; a 422 Refusal (`code`) for a field given
    twice."""
    try:
        parsed = parse_qs(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Refusal(problem(422, code, f"the form is not UTF-8 text: {exc}")) from None
    data: dict[str, Any] = {}
    for name, values in parsed.items():
        if len(values) != 1:
            raise Refusal(problem(422, code, f"{name}: given {len(values)} times", field=name))
        value = values[0]
        if name in ("text", "snoozeUntilMs", "consentTtlMs") and not value.strip():
            continue
        if name in ("snoozeUntilMs", "consentTtlMs") and value.strip().isdigit():
            data[name] = int(value.strip())
        else:
            data[name] = value
    return data


async def answer_request(request: Request, deps: Deps) -> tuple[bytes, str]:
    """The raw answer and whether it is a form (413 over the cap, 415 for neither JSON nor
    a form). Parsed later, once the ask is known to exist (404 before 422)."""
    raw = await read_body(request, deps.settings.max_body_bytes)
    ctype = media_type(request)
    if ctype not in (FORM, "application/json", ""):
        raise Refusal(unsupported_media(ctype, f"send application/json (or a form, {FORM})"))
    return raw, ctype


def parsed(raw: bytes, ctype: str) -> object:
    """The body as the JSON an AnswerRequest is read from (a 422 Refusal when it is none)."""
    return form_fields(raw) if ctype == FORM else json_body(raw, "invalid_answer")


def checked(data: object) -> AnswerRequest:
    """The body as an AnswerRequest; a 422 Refusal naming each wrong field."""
    body = validated(data, AnswerRequest, "invalid_answer")
    if body.snooze_until_ms is not None and body.answer != "snoozed":
        raise Refusal(
            problem(
                422,
                "invalid_answer",
                "snoozeUntilMs: only a `snoozed` answer has a snooze's end",
                field="snoozeUntilMs",
            )
        )
    if body.consent_ttl_ms is not None and body.answer != "approved":
        raise Refusal(
            problem(
                422,
                "invalid_answer",
                "consentTtlMs: only an `approved` answer records a consent",
                field="consentTtlMs",
            )
        )
    return body


CONFLICTS = {"ask_closed", "not_a_target"}


def outcome_answer(got: Answered) -> Response:
    """The answer to an answer: 200 when it changed the ask, else its refusal."""
    out = got.outcome
    if out.outcome in ("answered", "snoozed"):
        return JSONResponse(out.to_wire())
    ask = out.ask.to_wire()
    if out.outcome == "late_answer":
        return problem(409, "late_answer", out.why, outcome="late_answer", ask=ask)
    status = 409 if out.reason_code in CONFLICTS else 422
    return problem(status, out.reason_code, out.why, outcome="refused", ask=ask)


def show_all(answering: Answers, got: Answered, ask_id: str) -> None:
    """After the reply went out: the answer on the seat's ask's message, on every message of
    its escalations (the answer closed them), and on the message answered (`ask_id`, an
    escalation's own) when that is another."""
    if got.outcome.outcome in ("answered", "snoozed"):
        answering.show_everywhere(got.root or got.outcome.ask, also=ask_id)


def wants_html(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "text/html" in accept and "application/json" not in accept


async def _answer(
    ask_id: str,
    request: Request,
    deps: Deps,
    credentials: HTTPAuthorizationCredentials | None,
    token: str | None,
) -> Response:
    who = await answerer(deps, ask_id, credentials, token)
    raw, ctype = await answer_request(request, deps)
    store = deps.container.asks
    if await run_in_threadpool(store.get, ask_id) is None:
        return unknown_ask(ask_id)
    body = checked(parsed(raw, ctype))
    _member(deps, body.by)
    if who.via == "link" and body.by not in who.targets:
        names = ", ".join(who.targets) or "nobody"
        return problem(
            403,
            "not_a_link_target",
            f"by: this answer link is for {names}; {body.by!r} cannot answer with it",
            field="by",
        )
    a = AnswerIn(
        verb=body.answer,
        by=body.by,
        via=who.via,
        text=body.text or "",
        snooze_until_ms=body.snooze_until_ms,
        consent_ttl_ms=body.consent_ttl_ms,
    )
    answering = Answers(deps.container, deps.celery)
    now = deps.clock_ms()
    try:
        got = await run_in_threadpool(lambda: answering.answer(ask_id, a, now_ms=now, show=False))
    except AskMissing:
        return unknown_ask(ask_id)
    except AskContended as exc:
        return problem(503, "busy", f"{exc}: try again")
    answered = outcome_answer(got)
    answered.background = BackgroundTask(show_all, answering, got, ask_id)
    return answered


@answer_router.post(
    "/asks/{ask_id}/answer",
    response_model=AnswerOutcome,
    responses=answers(
        {},
        *GUARDED,
        *BODY,
        404,
        409,
        why={
            401: "no valid token: no bearer token and no `token` (`unauthorized`), a link "
            "Seatwire did not sign (`invalid_link`), or one past its expiry (`link_expired`)",
            403: "a seat's token (`operator_only`), or a link answer by someone the link does "
            "not name (`not_a_link_target`)",
            404: "no such ask, or a link of another ask (`unknown_ask`)",
            409: "the ask was answered first (`late_answer`: written in its history, nothing "
            "else changed; `ask` shows the first answer), it is closed (`ask_closed`), or a "
            "consent was answered by someone it was not put to (`not_a_target`)",
            422: "the body is not an AnswerRequest (`invalid_answer`, naming each field), `by` "
            "is not a member of the org (`unknown_member`), or the snooze ends in the past or "
            "too far ahead (`snooze_in_past`, `snooze_too_long`)",
            503: "the ask changed under every try (`busy`), or a store is unavailable: retry "
            "after Retry-After",
        },
    ),
    openapi_extra=reads(
        AnswerRequest,
        description="the answer; a form (application/x-www-form-urlencoded) with the same "
        "fields is read too, as the answer link's page posts it",
    ),
)
async def post_answer(
    ask_id: str,
    request: Request,
    deps: Deps,
    credentials: OperatorCredentials,
    token: LinkToken,
) -> Response:
    """Answer an ask as one of the people it asked: `approved`, `declined`, `replied`,
    `done`, or `snoozed` (until `snoozeUntilMs`, two hours without it; at most a week). The
    first valid answer wins; a later one is `late_answer`."""
    try:
        answered = await _answer(ask_id, request, deps, credentials, token)
    except Refusal as refusal:
        answered = refusal.response
    return result_page(answered) if wants_html(request) else answered


@answer_router.get(
    "/asks/{ask_id}/answer",
    response_model=AnswerView,
    responses=answers(
        {200: (AnswerView, "what the link answers; a browser (Accept: text/html) gets its page")},
        *GUARDED,
        404,
        why={
            401: "no valid token: no bearer token and no `token` (`unauthorized`), a link "
            "Seatwire did not sign (`invalid_link`), or one past its expiry (`link_expired`)",
            403: "a seat's token (`operator_only`)",
            404: "no such ask, or a link of another ask (`unknown_ask`)",
        },
    ),
)
async def answer_page(
    ask_id: str,
    request: Request,
    deps: Deps,
    credentials: OperatorCredentials,
    token: LinkToken,
) -> Response:
    """What an answer link answers: the ask, the answers offered for it and who may give
    them. Opened in a browser, the page with a button for each answer, which posts it."""
    browser = wants_html(request)
    if token is None and credentials is None and browser:
        return page(
            401,
            "This link is incomplete",
            "<p>An answer link carries its token (<code>?token=...</code>). Open the whole "
            "link from the message it came in.</p>",
        )
    try:
        who = await answerer(deps, ask_id, credentials, token)
        ask = await run_in_threadpool(deps.container.asks.get, ask_id)
        if ask is None:
            raise Refusal(unknown_ask(ask_id))
    except Refusal as refusal:
        return result_page(refusal.response) if browser else refusal.response
    offered = BUTTONS.get(ask.trigger or "", FALLBACK)
    consent = await run_in_threadpool(consent_of, deps.container.asks, ask)
    if browser:
        form = form_html(ask, who, token) if token is not None else state_html(ask)
        if token is not None:
            # The console's My asks (docs/console.md): every ask waiting for the link's
            # people. Relative to this page, so it holds behind a path prefix too.
            mine = f"../../../console/my?token={quote(token, safe='')}"
            form += f'<p><a href="{html.escape(mine)}">Everything waiting for you</a></p>'
        if consent is not None:
            form += consent_html(consent, who, token, now_ms=deps.clock_ms())
        return page(200, "Answer an ask", ask_html(ask) + form)
    view = AnswerView(
        ask=ask,
        answers=tuple(v for v, _label in offered),
        by=who.targets if who.via == "link" else ask.asked_ids(),
        expires_at_ms=who.expires_at_ms,
        consent=consent,
    )
    return JSONResponse(view.to_wire())


# ------------------------------------------------------------------ the link's pages

STYLE = (
    "body{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:2em auto;padding:0 1em}"
    "blockquote{white-space:pre-wrap;border-left:3px solid #ccc;margin:1em 0;padding-left:1em}"
    "button{font-size:1em;margin:.25em .5em .25em 0;padding:.4em 1em}"
    "textarea{width:100%}"
)
# The page carries its link's token in its URL: it is never cached, never sent on as a
# Referer, never framed by another site (a click it did not mean), and loads nothing.
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'",
}
# The answers a page offers, by the ask's trigger (what Slack's buttons offer too).
BUTTONS: dict[str, tuple[tuple[str, str], ...]] = {
    "irreversible_or_external": (
        ("approved", "Approve"),
        ("declined", "Decline"),
        ("snoozed", "Snooze 2 h"),
    ),
    "mandatory_review": (("approved", "Approve"), ("declined", "Request changes")),
    "blocked_on_other": (("done", "Done"), ("snoozed", "Snooze 2 h")),
    "commitment_at_risk": (("done", "Done"), ("replied", "Reply"), ("snoozed", "Snooze 2 h")),
}
FALLBACK = (("approved", "Approve"), ("declined", "Decline"), ("done", "Done"))


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def page(status: int, title: str, body_html: str) -> HTMLResponse:
    e = html.escape
    document = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        f"<title>{e(title)} - Seatwire</title><style>{STYLE}</style></head>"
        f"<body><h1>{e(title)}</h1>{body_html}</body></html>"
    )
    return HTMLResponse(document, status_code=status, headers=PAGE_HEADERS)


def ask_html(ask: Ask) -> str:
    e = html.escape
    names = ", ".join(t.member_id for t in ask.targets) or "nobody"
    parts = [
        f"<p>Seat <b>{e(ask.seat_id)}</b> asked <b>{e(names)}</b> about "
        f"<b>{e(ask.work_id)}</b> ({e(ask.reason_code or ask.trigger or 'an ask')}), "
        f"{e(_when(ask.created_at_ms))}.</p>"
    ]
    if ask.body:
        parts.append(f"<blockquote>{e(ask.body)}</blockquote>")
    return "".join(parts)


def state_html(ask: Ask) -> str:
    e = html.escape
    a = ask.answer
    if ask.state == "answered" and a is not None:
        said = f": &ldquo;{e(a.text)}&rdquo;" if a.text else ""
        return (
            f"<p>Answered <b>{e(a.answer)}</b> by {e(a.by)}, {e(_when(a.at_ms))}{said}. "
            "The first answer stands.</p>"
        )
    if ask.state == "closed":
        return (
            f"<p>This ask is closed ({e(ask.closed or 'ended')}): there is nothing to answer.</p>"
        )
    return ""


def form_html(ask: Ask, who: Answerer, token: str) -> str:
    e = html.escape
    if not ask.is_open:
        return state_html(ask)
    if len(who.targets) == 1:
        chooser = f'<input type=hidden name=by value="{e(who.targets[0])}">'
        you = f"<p>Answering as <b>{e(who.targets[0])}</b>.</p>"
    else:
        options = "".join(f'<option value="{e(t)}">{e(t)}</option>' for t in who.targets)
        chooser = f"<p><label>Who answers <select name=by>{options}</select></label></p>"
        you = ""
    buttons = "".join(
        f'<button type=submit name=answer value="{e(v)}">{e(label)}</button>'
        for v, label in BUTTONS.get(ask.trigger or "", FALLBACK)
    )
    snoozed = (
        f"<p>Snoozed until {e(_when(ask.snooze_until_ms))}.</p>" if ask.state == "snoozed" else ""
    )
    return (
        f'{snoozed}{you}<form method=post action="?token={e(token)}">{chooser}'
        "<p><label>A note (optional)<br><textarea name=text rows=3 maxlength=2000>"
        f"</textarea></label></p><p>{buttons}</p></form>"
    )


def consent_of(store: AskStore, ask: Ask) -> ConsentRecord | None:
    """The consent record an ask's approval gave (an escalation's: the one recorded on the
    ask it escalates), while it is kept; None for any other ask."""
    a = ask.answer
    if a is None or a.consent_id is None:
        return None
    consent_id: str | None = a.consent_id
    if ask.escalates is not None:
        root = store.get(ask.escalates)
        consent_id = root.answer.consent_id if root is not None and root.answer else None
    return None if consent_id is None else store.consent(consent_id)


def consent_html(consent: ConsentRecord, who: Answerer, token: str | None, *, now_ms: int) -> str:
    """What a page says of the consent an approval gave: revoked (by whom, when), expired,
    or on record until when, with a form that revokes it for the people a link names."""
    e = html.escape
    if consent.revoked_at_ms is not None:
        return (
            f"<p>The consent was revoked by {e(consent.revoked_by or '?')}, "
            f"{e(_when(consent.revoked_at_ms))}.</p>"
        )
    if not consent.holds_at(now_ms):
        return f"<p>The consent expired {e(_when(consent.expires_at_ms))}.</p>"
    said = f"<p>The consent is on record until {e(_when(consent.expires_at_ms))}.</p>"
    if token is None or who.via != "link" or not who.targets:
        return said
    if len(who.targets) == 1:
        chooser = f'<input type=hidden name=by value="{e(who.targets[0])}">'
    else:
        options = "".join(f'<option value="{e(t)}">{e(t)}</option>' for t in who.targets)
        chooser = f"<p><label>Who revokes it <select name=by>{options}</select></label></p>"
    # Relative to this page (/v1/asks/{id}/answer), so it holds behind a path prefix too.
    action = f"../../consents/{quote(consent.id, safe='')}/revoke?token={quote(token, safe='')}"
    return (
        f'{said}<form method=post action="{e(action)}">{chooser}'
        "<p>Changed your mind? The seat is told at once, and a later step needing this "
        "consent asks again.</p><p><button type=submit>Revoke</button></p></form>"
    )


def revoked_page(revoked: Response) -> HTMLResponse:
    """A revocation's JSON (or its refusal's) as the page a browser shows."""
    e = html.escape
    body = json.loads(bytes(revoked.body))
    status = revoked.status_code
    if status == 200:
        c = ConsentRecord.model_validate(body)
        done = page(
            200,
            "Consent revoked",
            f"<p>The consent {e(c.by)} gave is revoked, {e(_when(c.revoked_at_ms))}. The seat "
            "is told; a later step needing it asks again.</p>",
        )
        done.background = revoked.background
        return done
    titles = {
        401: "This link does not work",
        403: "Not yours to revoke",
        404: "No such consent",
        409: "Nothing to revoke",
    }
    return page(
        status, titles.get(status, "Not recorded"), f"<p>{e(str(body.get('message', '')))}</p>"
    )


def result_page(answered: Response) -> HTMLResponse:
    """An answer's JSON (or a refusal's) as the page a browser shows."""
    e = html.escape
    body = json.loads(bytes(answered.body))
    status = answered.status_code
    if status == 200 and "ask" in body:
        ask = Ask.model_validate(body["ask"])
        if ask.state == "snoozed":
            done = f"<p>Snoozed until {e(_when(ask.snooze_until_ms))}.</p>"
        else:
            done = "<p>Your answer is recorded.</p>" + state_html(ask)
        result = page(200, "Thank you", done)
        result.background = answered.background
        return result
    titles = {
        401: "This link does not work",
        403: "Not yours to answer",
        404: "No such ask",
        409: "Already settled",
    }
    detail = f"<p>{e(str(body.get('message', '')))}</p>"
    if "ask" in body and isinstance(body["ask"], dict):
        detail += state_html(Ask.model_validate(body["ask"]))
    return page(status, titles.get(status, "Not recorded"), detail)


# ------------------------------------------------------------------ consents and the brake


@router.get(
    "/consents",
    response_model=ConsentsPage,
    responses=answers({}, *GUARDED, 422),
)
async def list_consents(
    deps: Deps,
    every: Annotated[bool, Query(alias="all")] = False,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> Response:
    """Consent records, latest expiry first: the ones that still hold, or with `all=true`
    the expired and revoked ones too (kept until their retention ends)."""
    found = await run_in_threadpool(
        lambda: deps.container.asks.consents(now_ms=deps.clock_ms(), active=not every, limit=limit)
    )
    return JSONResponse({"consents": [c.to_wire() for c in found], "count": len(found)})


@dataclass(frozen=True)
class Revoker:
    """Who revokes: the operator (for any member they name), or an answer link of the ask
    the consent was given on (or of one of its escalations), for the people it names."""

    via: Literal["api", "link"]
    targets: tuple[str, ...] = ()


async def revoker(
    deps: Deps, credentials: HTTPAuthorizationCredentials | None, token: str | None
) -> tuple[Revoker, str | None]:
    """The revoker, and the ask a link is of (checked against the consent once it is read)."""
    if token is None:
        await require_token(deps, credentials)
        return Revoker("api"), None
    links = links_of(deps)
    if links is None:
        raise Refusal(
            problem(
                401,
                "invalid_link",
                "answer links are off here (no SEATWIRE_ANSWER_LINK_SECRET, no operator token)",
            )
        )
    got = links.read(token, now_ms=deps.clock_ms())
    if isinstance(got, LinkRefused):
        raise Refusal(problem(401, got.code, got.why))
    return Revoker("link", got.targets), got.ask_id


def link_is_of(store: AskStore, link_ask: str, consent: ConsentRecord) -> bool:
    """Whether a link's ask is the one the consent was given on, or one of its escalations
    (its page is where the consent was given, by the person one rung up)."""
    if link_ask == consent.ask_id:
        return True
    ask = store.get(link_ask)
    return ask is not None and ask.escalates == consent.ask_id


def unknown_consent(consent_id: str) -> Response:
    return problem(404, "unknown_consent", f"there is no consent {consent_id!r}")


REVOKE_CONFLICTS = {"already_revoked", "consent_expired"}


async def _revoke(
    consent_id: str,
    request: Request,
    deps: Deps,
    credentials: HTTPAuthorizationCredentials | None,
    token: str | None,
) -> Response:
    who, link_ask = await revoker(deps, credentials, token)
    raw = await read_body(request, deps.settings.max_body_bytes)
    ctype = media_type(request)
    if ctype not in (FORM, "application/json", ""):
        return unsupported_media(ctype, f"send application/json (or a form, {FORM})")
    store = deps.container.asks
    found = await run_in_threadpool(store.consent, consent_id)
    if found is None:
        return unknown_consent(consent_id)
    if link_ask is not None and not await run_in_threadpool(link_is_of, store, link_ask, found):
        return unknown_consent(consent_id)  # a valid link, of another ask: reveal nothing
    data = form_fields(raw, "invalid_body") if ctype == FORM else json_body(raw, "invalid_body")
    body = validated(data, ActedBy, "invalid_body")
    _member(deps, body.by)
    if who.via == "link" and body.by not in who.targets:
        names = ", ".join(who.targets) or "nobody"
        return problem(
            403,
            "not_a_link_target",
            f"by: this link is for {names}; {body.by!r} cannot revoke with it",
            field="by",
        )
    consents = Consents(deps.container, deps.celery)
    now = deps.clock_ms()

    def record() -> Revoked | None:
        return consents.revoke(
            consent_id, by=body.by, now_ms=now, anyone=who.via == "api", show=False
        )

    try:
        got = await run_in_threadpool(record)
    except AskContended as exc:
        return problem(503, "busy", f"{exc}: try again")
    if got is None:
        return unknown_consent(consent_id)
    r = got.revocation
    if r.outcome != "revoked":
        status = 409 if r.reason_code in REVOKE_CONFLICTS else 403
        return problem(status, r.reason_code, r.why, consent=r.consent.to_wire())
    revoked = JSONResponse(r.consent.to_wire())
    # The seat was told with the revocation; its messages are shown again once answered.
    revoked.background = BackgroundTask(consents.show, got, also=link_ask)
    return revoked


@answer_router.post(
    "/consents/{consent_id}/revoke",
    response_model=ConsentRecord,
    responses=answers(
        {},
        *GUARDED,
        *BODY,
        404,
        409,
        why={
            401: "no valid token: no bearer token and no `token` (`unauthorized`), a link "
            "Seatwire did not sign (`invalid_link`), or one past its expiry (`link_expired`)",
            403: "a seat's token (`operator_only`), or a link's revocation by someone the link "
            "does not name (`not_a_link_target`)",
            404: "there is no consent record of that id, or the link is of another ask "
            "(`unknown_consent`)",
            409: "it was revoked already (`already_revoked`) or has expired (`consent_expired`)",
            422: 'the body is not `{"by": MEMBER}` (`invalid_body`), or `by` is not a member '
            "of the org (`unknown_member`)",
            503: "the consent changed under every try (`busy`), or a store is unavailable: "
            "retry after Retry-After",
        },
    ),
    openapi_extra=reads(
        ActedBy,
        description="who revokes it; a form (application/x-www-form-urlencoded) with the same "
        "field is read too, as the answer link's page posts it",
    ),
)
async def revoke_consent(
    consent_id: str,
    request: Request,
    deps: Deps,
    credentials: OperatorCredentials,
    token: LinkToken,
) -> Response:
    """Revoke a consent: for an operator (the operator token, `by` any member), or for one
    of the people an answer link of its ask names (`?token=`, `by` one of them). The record
    is kept, marked revoked; the seat gets a `consent_revoked` inbox item with it, and a
    later report needing consent within its scope asks again."""
    try:
        revoked = await _revoke(consent_id, request, deps, credentials, token)
    except Refusal as refusal:
        revoked = refusal.response
    return revoked_page(revoked) if wants_html(request) else revoked


@router.post(
    "/seats/{seat}/asks/release",
    response_model=AskBrake,
    responses=answers(
        {},
        *GUARDED,
        *BODY,
        404,
        409,
        why={
            404: "no seat of that name in the org (`unknown_seat`)",
            409: "the seat's asks are not held (`not_held`)",
            422: 'the body is not `{"by": MEMBER}` (`invalid_body`), or `by` is not a member '
            "of the org (`unknown_member`)",
        },
    ),
    openapi_extra=reads(ActedBy),
)
async def release_asks(seat: str, request: Request, deps: Deps) -> Response:
    """Lift the nuisance brake on a seat's asks: it asks people again, its window of recent
    asks starting empty."""
    raw = await read_body(request, deps.settings.max_body_bytes)
    ctype = media_type(request)
    if ctype not in ("application/json", ""):
        return unsupported_media(ctype)
    known = deps.seat(seat)
    body = validated(json_body(raw, "invalid_body"), ActedBy, "invalid_body")
    _member(deps, body.by)
    lifted = await run_in_threadpool(
        lambda: deps.container.asks.lift(known.member_id, by=body.by, now_ms=deps.clock_ms())
    )
    if lifted is None:
        return problem(
            409, "not_held", f"seat {known.member_id}'s asks are not held: nothing to release"
        )
    return JSONResponse(lifted.to_wire())
