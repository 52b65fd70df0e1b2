"""The console's pages (docs/console.md): server-rendered HTML over the same stores and
functions the `/v1` routes and the CLI use.

    GET  /console/login, POST /console/login, POST /console/logout
    GET  /console/                       the overview (`seatwire status`)
    GET  /console/seats[/{seat}]         seats, their controller's decision and turns
    POST /console/seats/{seat}/{action}  pause | resume | run-now (asks to confirm first)
    GET  /console/my[?token=]            My asks: an answer link's people (no operator token)
    POST /console/my/asks/{id}/answer    an answer, as the link's page records it
    GET  /console/dead-letters[/{id}]    dead letters; POST .../{id}/replay (confirmed)
    GET  /console/ledger[?filters]       ledger rows; /console/ledger/{seat}/{entry} one row
    GET  /console/asks, /console/work/{trackingId}, /console/trace/{deliveryId},
         /console/search?q=              asks, a report's journey, an event's trace, a search
    GET  /console/steward, POST /console/steward/overrides   objectives, audit, an override
"""

from __future__ import annotations

import hmac
import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, get_args
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from kombu.exceptions import OperationalError
from pydantic import ValidationError
from starlette.background import BackgroundTask
from starlette.responses import Response

from contracts import Seat
from contracts.asks import Ask, AskState
from contracts.guardrails import LedgerRow, Outcome
from contracts.ops import WorkStatus
from contracts.steward import OVERRIDABLE_GATES
from pipeline.answer_links import LinkRefused
from pipeline.ask_figures import AskFigures
from pipeline.asks import AnswerIn
from pipeline.goals.kpi import gap_for
from pipeline.turns import CONTROLS, Control, status_of, summary_of
from workers.ingress import asks as ask_routes
from workers.ingress.console.web import (
    LOGIN_COOKIE,
    LOGIN_TTL_S,
    OPERATOR_COOKIE,
    PERSON_COOKIE,
    PERSON_TTL_MS,
    PREFIX,
    SESSION_TTL_MS,
    ConsoleError,
    check_csrf,
    clear_cookie,
    form_of,
    new_login_token,
    operator_session,
    person_session,
    redirect,
    render,
    sessions_of,
    set_cookie,
)
from workers.ingress.deps import IngressDeps, deps_of
from workers.ingress.http import Refusal
from workers.recovery.replay import replay
from workers.stages.answers import Answers
from workers.status import ask_figures, cluster_status, work_status
from workers.stores.asks import AskContended, AskMissing
from workers.stores.console import ConsoleSession
from workers.stores.ledger import LedgerCursor
from workers.stores.overrides import OverrideRefused

router = APIRouter(prefix=PREFIX, include_in_schema=False)

LEDGER_PAGE = 50
WORK_ROWS = 50  # the ledger rows a work's page shows, newest first
# Failed logins from one client address before the login refuses it for the window's rest.
LOGIN_FAILURES = 10
LOGIN_WINDOW_MS = 15 * 60_000
SEATS_OPEN_ASKS = 2_000
ACTION_WORDS: dict[str, tuple[str, str]] = {
    "pause": ("Pause", "Hold the seat's turns: a running turn is asked to stop."),
    "resume": (
        "Resume",
        "Let the seat's turns run again: lifts a pause, and a stop after failed turns "
        "(the failure count starts again).",
    ),
    "run-now": (
        "Run now",
        "Run a turn on the next tick, even without news; clears a stop after failed turns.",
    ),
}


# ------------------------------------------------------------------ logging in and out


def _login_page(request: Request, status: int = 200, message: str = "") -> Response:
    token = new_login_token()
    page = render(request, "login.html", status, csrf=token, message=message)
    set_cookie(page, request, LOGIN_COOKIE, token, max_age_s=LOGIN_TTL_S, path=f"{PREFIX}/login")
    return page


@router.get("/login")
async def login_form(request: Request) -> Response:
    return _login_page(request)


@router.post("/login")
async def login(request: Request) -> Response:
    deps = deps_of(request)
    fields = await form_of(request)
    check_csrf(fields, request.cookies.get(LOGIN_COOKIE, ""))
    sessions = sessions_of(deps)
    source = request.client.host if request.client else "unknown"
    if await run_in_threadpool(sessions.failures, source) >= LOGIN_FAILURES:
        return _login_page(
            request,
            429,
            f"Too many failed logins from here: try again in {LOGIN_WINDOW_MS // 60_000} minutes.",
        )
    token = fields.get("token", "").strip()
    caller = await deps.auth.caller_async(token) if token else None
    if caller is None or caller.role != "operator":
        await run_in_threadpool(lambda: sessions.failed(source, window_ms=LOGIN_WINDOW_MS))
    if caller is None:
        return _login_page(
            request, 401, "That token does not open the console: it is not an operator token."
        )
    if caller.role != "operator":
        return _login_page(
            request,
            403,
            "That is a seat's token: a seat's token opens no console page. Log in with an "
            "operator token.",
        )
    session = await run_in_threadpool(
        lambda: sessions_of(deps).create(
            "operator", now_ms=deps.clock_ms(), ttl_ms=SESSION_TTL_MS, label=caller.label
        )
    )
    done = redirect(f"{PREFIX}/")
    set_cookie(
        done, request, OPERATOR_COOKIE, session.id, max_age_s=SESSION_TTL_MS // 1000, path=PREFIX
    )
    clear_cookie(done, request, LOGIN_COOKIE, f"{PREFIX}/login")
    return done


@router.post("/logout")
async def logout(request: Request) -> Response:
    deps = deps_of(request)
    fields = await form_of(request)
    for cookie in (OPERATOR_COOKIE, PERSON_COOKIE):
        value = request.cookies.get(cookie, "")
        session = sessions_of(deps).get(value, now_ms=deps.clock_ms()) if value else None
        if session is not None and hmac.compare_digest(
            fields.get("csrf", "").encode(), session.csrf.encode()
        ):
            await run_in_threadpool(sessions_of(deps).end, value)
            done = redirect(f"{PREFIX}/login" if cookie == OPERATOR_COOKIE else f"{PREFIX}/bye")
            clear_cookie(done, request, cookie, PREFIX)
            return done
    # No live session this form's token belongs to: nothing to end.
    raise ConsoleError(
        403,
        "This form has expired",
        "The form did not carry a live session's security token (CSRF): nothing was done.",
        login=True,
    )


@router.get("/bye")
async def bye(request: Request) -> Response:
    return render(request, "bye.html")


# ------------------------------------------------------------------ overview


@router.get("/")
async def overview(request: Request) -> Response:
    session = operator_session(request)
    deps = deps_of(request)
    now = deps.clock_ms()
    reading = replace(deps.container, app=deps.celery)
    broker_error = ""
    try:
        status = await run_in_threadpool(lambda: cluster_status(reading, now_ms=now))
    except (OperationalError, OSError) as exc:
        status = None
        broker_error = f"the broker did not answer: {exc}"
    figures = await run_in_threadpool(lambda: ask_figures(deps.container, now_ms=now))
    seats = deps.container.org.current()[0].org.seats
    return render(
        request,
        "overview.html",
        session=session,
        status=status,
        broker_error=broker_error,
        figures=figures,
        seat_count=len(seats),
        now_ms=now,
    )


# ------------------------------------------------------------------ seats


def _seat(deps: IngressDeps, ident: str) -> Seat:
    try:
        return deps.seat(ident)
    except Refusal:
        raise ConsoleError(404, "No such seat", f"There is no seat {ident!r} in the org.") from None


def stopped_why(status: dict[str, Any]) -> str | None:
    """Why a seat's work controller stopped it (its failed turns), or None when it runs."""
    ctl = status["controller"]
    if not ctl["blocked"]:
        return None
    last = status["turns"][0] if status["turns"] else None
    fault = ""
    if last is not None:
        outcome = last["outcome"]
        fault = f" The last turn ended {outcome['kind']}"
        fault += f": {outcome['detail']}" if outcome.get("detail") else "."
    return (
        f"Stopped after {ctl['failures']} failed turn(s): it runs no more turns until it is "
        f"resumed.{fault}"
    )


@router.get("/seats")
async def seats_page(request: Request) -> Response:
    session = operator_session(request)
    deps = deps_of(request)
    org_seats = deps.container.org.current()[0].org.seats
    now = deps.clock_ms()

    def read() -> tuple[list[dict[str, Any]], dict[str, int]]:
        reads = deps.container.seat_runs.observe([s.member_id for s in org_seats], now_ms=now)
        rows = []
        for seat, (got, seen) in zip(org_seats, reads, strict=True):
            row = summary_of(seat, got.run, seen)
            status = status_of(seat, got.run)
            row["controller"] = status["controller"]
            row["stopped"] = stopped_why(status)
            rows.append(row)
        open_asks: dict[str, int] = {}
        for ask in deps.container.asks.listing(state="open")[:SEATS_OPEN_ASKS]:
            open_asks[ask.seat_id] = open_asks.get(ask.seat_id, 0) + 1
        return rows, open_asks

    rows, open_asks = await run_in_threadpool(read)
    return render(request, "seats.html", session=session, rows=rows, open_asks=open_asks)


@router.get("/seats/{seat}")
async def seat_page(seat: str, request: Request, done: str | None = None) -> Response:
    session = operator_session(request)
    deps = deps_of(request)
    known = _seat(deps, seat)
    now = deps.clock_ms()

    def read() -> tuple[dict[str, Any], int, list[Ask]]:
        status = status_of(known, deps.container.seat_runs.get(known.member_id).run)
        ((_, seen),) = deps.container.seat_runs.observe([known.member_id], now_ms=now)
        unread = max(0, seen.inbox_last - seen.inbox_acked)
        asks = deps.container.asks.listing(seat_id=known.member_id, state="open")
        return status, unread, asks

    status, unread, asks = await run_in_threadpool(read)
    return render(
        request,
        "seat.html",
        session=session,
        seat=known,
        status=status,
        stopped=stopped_why(status),
        unread=unread,
        asks=asks,
        done=done if done in ACTION_WORDS else None,
        actions=ACTION_WORDS,
    )


@router.post("/seats/{seat}/{action}")
async def seat_action(seat: str, action: str, request: Request) -> Response:
    session = operator_session(request)
    deps = deps_of(request)
    fields = await form_of(request)
    check_csrf(fields, session.csrf)
    if action not in CONTROLS:
        raise ConsoleError(404, "No such action", f"A seat has no action {action!r}.")
    known = _seat(deps, seat)
    if fields.get("confirm") != "yes":
        word, means = ACTION_WORDS[action]
        return render(
            request,
            "confirm.html",
            session=session,
            title=f"{word} {known.member_id}?",
            means=means,
            action=f"{PREFIX}/seats/{quote(known.member_id, safe='')}/{action}",
            button=word,
            back=f"{PREFIX}/seats/{quote(known.member_id, safe='')}",
        )
    what: Control = "pause" if action == "pause" else "resume" if action == "resume" else "run-now"

    def act() -> None:
        runs = deps.container.seat_runs
        runs.control(known.member_id, what, options=known.controller)
        if what == "resume":
            # The console's Resume lets the seat run again whatever holds it: a stop after
            # failed turns is lifted as `run-now` lifts it (the operator's word).
            status = status_of(known, runs.get(known.member_id).run)
            if status["controller"]["blocked"]:
                runs.control(known.member_id, "run-now", options=known.controller)

    await run_in_threadpool(act)
    return redirect(f"{PREFIX}/seats/{quote(known.member_id, safe='')}?done={action}")


# ------------------------------------------------------------------ my asks (a person's)


def _offered(ask: Ask) -> list[tuple[str, str]]:
    """The answers a person is offered: the ask's own buttons (as Slack and the link's page
    offer them), then Snooze and Reply when those are not among them."""
    offered = list(ask_routes.BUTTONS.get(ask.trigger or "", ask_routes.FALLBACK))
    verbs = {v for v, _ in offered}
    if "snoozed" not in verbs:
        offered.append(("snoozed", "Snooze 2 h"))
    if "replied" not in verbs:
        offered.append(("replied", "Reply"))
    return offered


@router.get("/my")
async def my_asks(request: Request, token: str | None = None) -> Response:
    deps = deps_of(request)
    if token is not None:
        links = ask_routes.links_of(deps)
        if links is None:
            raise ConsoleError(401, "This link does not work", "Answer links are off here.")
        now = deps.clock_ms()
        got = links.read(token, now_ms=now)
        if isinstance(got, LinkRefused):
            titles = {"link_expired": "This link has expired"}
            raise ConsoleError(401, titles.get(got.code, "This link does not work"), got.why)
        ttl = min(PERSON_TTL_MS, got.expires_at_ms - now)
        earlier = request.cookies.get(PERSON_COOKIE, "")

        def start() -> ConsoleSession:
            sessions = sessions_of(deps)
            if earlier:
                sessions.end(earlier)  # the new link's session replaces the browser's last
            return sessions.create(
                "person", now_ms=now, ttl_ms=ttl, persons=tuple(got.targets), label="answer link"
            )

        session = await run_in_threadpool(start)
        done = redirect(f"{PREFIX}/my")  # the token leaves the address bar
        set_cookie(done, request, PERSON_COOKIE, session.id, max_age_s=ttl // 1000, path=PREFIX)
        return done
    session = person_session(request)

    def read() -> list[Ask]:
        found: dict[str, Ask] = {}
        for person in session.persons:
            for ask in deps.container.asks.listing(person=person, state="open"):
                found.setdefault(ask.id, ask)
        return sorted(found.values(), key=lambda a: (a.created_at_ms, a.id))

    asks = await run_in_threadpool(read)
    return render(
        request,
        "my.html",
        session=session,
        asks=[(a, _offered(a), [p for p in session.persons if p in a.asked_ids()]) for a in asks],
        answered=request.query_params.get("answered") == "1",
    )


@router.post("/my/asks/{ask_id}/answer")
async def my_answer(ask_id: str, request: Request) -> Response:
    session = person_session(request)
    deps = deps_of(request)
    fields = await form_of(request)
    check_csrf(fields, session.csrf)
    by = fields.get("by", "")
    if by not in session.persons:
        raise ConsoleError(
            403,
            "Not yours to answer",
            f"This session answers as {', '.join(session.persons)}, not {by!r}.",
        )
    ask = await run_in_threadpool(deps.container.asks.get, ask_id)
    if ask is None or by not in ask.asked_ids():
        raise ConsoleError(404, "No such ask", "There is no such ask waiting for you.")
    data: dict[str, Any] = {"answer": fields.get("answer", ""), "by": by}
    if fields.get("text", "").strip():
        data["text"] = fields["text"]
    try:
        body = ask_routes.checked(data)
    except Refusal as refusal:
        return _answer_page(request, session, refusal.response, ask)
    if body.answer == "replied" and not (body.text or "").strip():
        raise ConsoleError(422, "Nothing to reply", "A reply needs its text: write it in the note.")
    a = AnswerIn(verb=body.answer, by=body.by, via="link", text=body.text or "")
    answering = Answers(deps.container, deps.celery)
    now = deps.clock_ms()
    try:
        got = await run_in_threadpool(lambda: answering.answer(ask_id, a, now_ms=now, show=False))
    except AskMissing:
        raise ConsoleError(404, "No such ask", "There is no such ask waiting for you.") from None
    except AskContended:
        raise ConsoleError(503, "Busy", "The ask changed while you answered: try again.") from None
    answered = ask_routes.outcome_answer(got)
    done: Response
    if answered.status_code == 200:
        done = redirect(f"{PREFIX}/my?answered=1")
    else:
        done = _answer_page(request, session, answered, ask)
    # As the link's page does: the answer shown on the ask's messages after the reply.
    done.background = BackgroundTask(ask_routes.show_all, answering, got, ask_id)
    return done


def _answer_page(
    request: Request, session: ConsoleSession, answered: Response, ask: Ask
) -> Response:
    body = json.loads(bytes(answered.body))
    return render(
        request,
        "error.html",
        answered.status_code,
        title="Not recorded" if answered.status_code != 409 else "Already settled",
        message=str(body.get("message", "")),
        back=f"{PREFIX}/my",
    )


# ------------------------------------------------------------------ dead letters


@router.get("/dead-letters")
async def dead_letters(request: Request) -> Response:
    session = operator_session(request)
    deps = deps_of(request)
    letters = deps.container.dead_letters
    found, count = await run_in_threadpool(lambda: (letters.list(200), letters.count()))
    return render(request, "dead_letters.html", session=session, letters=found, count=count)


@router.get("/dead-letters/{dlq_id}")
async def dead_letter(dlq_id: str, request: Request, done: str | None = None) -> Response:
    session = operator_session(request)
    deps = deps_of(request)
    letter = await run_in_threadpool(deps.container.dead_letters.get, dlq_id)
    if letter is None:
        raise ConsoleError(404, "No such dead letter", f"There is no dead letter {dlq_id!r}.")
    message = json.dumps(letter.message, indent=2) if letter.message is not None else None
    return render(
        request,
        "dead_letter.html",
        session=session,
        letter=letter,
        message=message,
        done=done if done in ("replayed", "already") else None,
    )


@router.post("/dead-letters/{dlq_id}/replay")
async def dead_letter_replay(dlq_id: str, request: Request) -> Response:
    session = operator_session(request)
    deps = deps_of(request)
    fields = await form_of(request)
    check_csrf(fields, session.csrf)
    letters = deps.container.dead_letters
    letter = await run_in_threadpool(letters.get, dlq_id)
    if letter is None:
        raise ConsoleError(404, "No such dead letter", f"There is no dead letter {dlq_id!r}.")
    path = f"{PREFIX}/dead-letters/{quote(dlq_id, safe='')}"
    if fields.get("confirm") != "yes":
        return render(
            request,
            "confirm.html",
            session=session,
            title=f"Replay {dlq_id}?",
            means=f"Reopen the journal entry {letter.tracking_id} and publish its "
            f"{letter.stage} message again under the same task id. A replay happens once.",
            action=f"{path}/replay",
            button="Replay",
            back=path,
        )
    now = deps.clock_ms()
    settings = deps.settings
    got = await run_in_threadpool(
        lambda: replay(
            letters, dlq_id, deps.celery, deadline_ms=settings.journal_deadline_ms, now_ms=now
        )
    )
    if got.verb in ("unknown", "missing", "nomessage"):
        raise ConsoleError(409, "Cannot replay", got.detail or got.verb)
    return redirect(f"{path}?done={'replayed' if got.verb == 'ok' else 'already'}")


# ------------------------------------------------------------------ ledger


def _time(value: str, name: str) -> int | None:
    """A form's `datetime-local` (UTC) as ms; None when empty; a ConsoleError when wrong."""
    value = value.strip()
    if not value:
        return None
    try:
        return int(datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp() * 1000)
    except ValueError:
        raise ConsoleError(
            422, "Not a time", f"{name}: {value!r} is not a time (YYYY-MM-DDTHH:MM, UTC)."
        ) from None


def ledger_matches(
    row: LedgerRow,
    *,
    person: str,
    outcome: str,
    reason: str,
    since_ms: int | None,
    until_ms: int | None,
) -> bool:
    if person and person not in {t.member_id for t in row.targets}:
        return False
    if outcome and row.outcome != outcome:
        return False
    if reason and row.reason_code != reason:
        return False
    if since_ms is not None and row.at_ms < since_ms:
        return False
    return until_ms is None or row.at_ms < until_ms


def _person_hint(person: str) -> bytes | None:
    """Bytes a ledger row naming `person` as a target holds in its JSON (tried before the row
    is parsed); None for an id the JSON might spell otherwise."""
    if not person or not re.fullmatch(r"[A-Za-z0-9_.@:+-]+", person):
        return None
    return f'"memberId":"{person}"'.encode()


@router.get("/ledger")
async def ledger(request: Request) -> Response:
    session = operator_session(request)
    deps = deps_of(request)
    q = request.query_params
    seat = q.get("seat", "").strip()
    person = q.get("person", "").strip()
    outcome = q.get("outcome", "").strip()
    reason = q.get("reason", "").strip()
    since_ms = _time(q.get("since", ""), "since")
    until_ms = _time(q.get("until", ""), "until")
    try:
        before = LedgerCursor.parse(q["before"]) if q.get("before") else None
    except ValueError:
        raise ConsoleError(
            422, "Not a place in the ledger", "before: use the Older link of a ledger page."
        ) from None
    seat_ids = None if not seat else [_seat(deps, seat).member_id]

    def match(row: LedgerRow) -> bool:
        return ledger_matches(
            row,
            person=person,
            outcome=outcome,
            reason=reason,
            since_ms=since_ms,
            until_ms=until_ms,
        )

    searched = await run_in_threadpool(
        lambda: deps.container.ledger.search(
            match,
            seat_ids=seat_ids,
            before=before,
            since_ms=since_ms,
            hint=_person_hint(person),
            limit=LEDGER_PAGE,
        )
    )
    filters = {k: v for k, v in q.items() if k != "before" and v}
    nxt = searched.next
    older = f"?{urlencode({**filters, 'before': nxt.text()})}" if nxt is not None else None
    return render(
        request,
        "ledger.html",
        session=session,
        rows=searched.rows,
        searched=searched,
        stopped_at=None if searched.complete or nxt is None else int(nxt.entry_id.split("-")[0]),
        filters=filters,
        seat=seat,
        person=person,
        outcome=outcome,
        reason=reason,
        since=q.get("since", ""),
        until=q.get("until", ""),
        newest_url=f"?{urlencode(filters)}" if before is not None else None,
        next_url=older,
        seats=deps.container.org.current()[0].org.seats,
        outcomes=get_args(Outcome),
    )


@router.get("/ledger/{seat}/{entry_id}")
async def ledger_row(seat: str, entry_id: str, request: Request) -> Response:
    session = operator_session(request)
    deps = deps_of(request)
    known = _seat(deps, seat)
    if not _entry_id(entry_id):
        raise ConsoleError(404, "No such row", f"{entry_id!r} is not a ledger entry id.")

    def read() -> tuple[LedgerRow | None, dict[str, str]]:
        row = deps.container.ledger.entry(known.member_id, entry_id)
        op = deps.container.ledger.op_state(row.tracking_id) if row and row.tracking_id else {}
        return row, op

    row, op = await run_in_threadpool(read)
    if row is None:
        raise ConsoleError(
            404, "No such row", f"Seat {known.member_id} has no ledger row {entry_id}."
        )
    return render(request, "ledger_row.html", session=session, row=row, op=op, seat=known)


def _entry_id(value: str) -> bool:
    left, _, right = value.partition("-")
    return left.isdigit() and right.isdigit() and len(value) < 50


# ------------------------------------------------------------------ asks, work, trace, search


# An ask's states, and `expired` (closed unanswered at the top of its ladder) beside them.
ASK_STATES = (*get_args(AskState), "expired")


@router.get("/asks")
async def asks_page(request: Request) -> Response:
    """Asks by state (`expired`: closed unanswered at the top of its ladder), seat and person,
    with the week's figures per seat and per person (workers/status.py `ask_figures`)."""
    session = operator_session(request)
    deps = deps_of(request)
    q = request.query_params
    state = q.get("state", "").strip() or None
    if state is not None and state not in ASK_STATES:
        raise ConsoleError(422, "No such state", f"state: {state!r} is not an ask's state.")
    seat = q.get("seat", "").strip()
    person = q.get("person", "").strip() or None
    seat_id = _seat(deps, seat).member_id if seat else None
    now = deps.clock_ms()

    def read() -> tuple[list[Ask], AskFigures, dict[str, int]]:
        found = deps.container.asks.listing(
            seat_id=seat_id, person=person, state="closed" if state == "expired" else state
        )
        if state == "expired":
            found = [a for a in found if a.closed == "expired"]
        members = list(deps.container.org.current()[0].member_by_id)
        today = deps.container.ledger.attention_today(members, now_ms=now)
        return found, ask_figures(deps.container, now_ms=now), today

    found, figures, today = await run_in_threadpool(read)
    return render(
        request,
        "asks.html",
        session=session,
        asks=found[:200],
        count=len(found),
        states=ASK_STATES,
        state=state or "",
        seat=seat,
        person=person or "",
        figures=figures,
        today=sorted(today.items(), key=lambda item: (-item[1], item[0])),
        budget=deps.container.ledger.limits.per_target_per_day,
    )


@router.get("/asks/{ask_id}")
async def ask_page(ask_id: str, request: Request) -> Response:
    session = operator_session(request)
    deps = deps_of(request)
    ask = await run_in_threadpool(deps.container.asks.get, ask_id)
    if ask is None:
        raise ConsoleError(404, "No such ask", f"There is no ask {ask_id!r}.")
    return render(request, "ask.html", session=session, ask=ask)


@router.get("/work/{tracking_id}")
async def work_page(tracking_id: str, request: Request) -> Response:
    """One report's journey: where its journal entry stands, its decision and send
    (workers/status.py `work_status`), the ledger rows of its work and its asks."""
    session = operator_session(request)
    deps = deps_of(request)

    def read() -> tuple[WorkStatus | None, list[tuple[str, str, LedgerRow]]]:
        found = work_status(deps.container, tracking_id)
        if found is None:
            return None, []
        work_id = found.decision.get("workId") if isinstance(found.decision, dict) else None
        if not work_id or not found.seat_id:
            return found, []
        rows = deps.container.ledger.entries(
            seat_ids=[found.seat_id], work_id=str(work_id), limit=WORK_ROWS
        )
        return found, rows

    found, rows = await run_in_threadpool(read)
    if found is None:
        raise ConsoleError(404, "No such work", f"Nothing was accepted as {tracking_id!r}.")
    decision = json.dumps(found.decision, indent=2) if found.decision else None
    return render(request, "work.html", session=session, work=found, decision=decision, rows=rows)


@router.get("/trace/{delivery_id:path}")
async def trace_page(delivery_id: str, request: Request) -> Response:
    session = operator_session(request)
    deps = deps_of(request)
    trace = await run_in_threadpool(deps.container.inbound.trace, delivery_id)
    if trace is None:
        raise ConsoleError(404, "No such event", f"No inbound event {delivery_id!r} was received.")
    return render(request, "trace.html", session=session, trace=trace)


@router.get("/search")
async def search(request: Request, q: str = "") -> Response:
    """A delivery id, a tracking id or an ask id: the page of the first that exists."""
    operator_session(request)
    deps = deps_of(request)
    q = q.strip()
    if not q:
        raise ConsoleError(422, "Nothing to search", "Type a delivery id, tracking id or ask id.")
    c = deps.container

    def find() -> str | None:
        if c.asks.get(q) is not None:
            return f"{PREFIX}/asks/{quote(q, safe='')}"
        if c.journal.get(q) is not None:
            return f"{PREFIX}/work/{quote(q, safe='')}"
        if c.inbound.trace(q) is not None:
            return f"{PREFIX}/trace/{quote(q, safe='')}"
        return None

    found = await run_in_threadpool(find)
    if found is None:
        raise ConsoleError(404, "Nothing found", f"No ask, tracking id or delivery id is {q!r}.")
    return redirect(found)


# ------------------------------------------------------------------ steward

STEWARD_LINES = 100


def _steward_page(
    request: Request, session: ConsoleSession, code: int = 200, **extra: Any
) -> Response:
    deps = deps_of(request)
    objective = request.query_params.get("objective", "").strip() or None
    objectives = deps.container.org.current()[0].org.objectives
    if objective is not None and objective not in {o.key for o in objectives}:
        raise ConsoleError(404, "No such objective", f"The org has no objective {objective!r}.")
    audit = deps.container.audit.read(objective, STEWARD_LINES)
    overrides = deps.container.overrides.list(objective, STEWARD_LINES)
    now = deps.clock_ms()
    last = deps.container.audit.last_decisions([o.key for o in objectives])
    measured = [
        (o, gap_for(o, deps.container.samples.for_objective(o), now), last.get(o.key))
        for o in objectives
    ]
    return render(
        request,
        "steward.html",
        code,
        session=session,
        objectives=objectives,
        measured=measured,
        objective=objective or "",
        audit=audit,
        overrides=overrides,
        gates=OVERRIDABLE_GATES,
        **extra,
    )


@router.get("/steward")
async def steward(request: Request) -> Response:
    session = operator_session(request)
    return await run_in_threadpool(_steward_page, request, session)


@router.post("/steward/overrides")
async def steward_override(request: Request) -> Response:
    """An override, with the rules of `seatwire steward admit` (the overrides store's
    `submit`): its refusal is shown on the page, nothing written."""
    session = operator_session(request)
    deps = deps_of(request)
    fields = await form_of(request)
    check_csrf(fields, session.csrf)
    gates = [g for g in OVERRIDABLE_GATES if fields.get(f"gate_{g}") == "on"]
    wanted: dict[str, object] = {
        "objective": fields.get("objective", ""),
        "candidate": fields.get("candidate", ""),
        "by": fields.get("by", ""),
        "reason": fields.get("reason", ""),
    }
    if gates:
        wanted["gates"] = gates
    view, now = deps.container.org.current()[0], deps.clock_ms()
    try:
        status, override = await run_in_threadpool(
            lambda: deps.container.overrides.submit(view, wanted, now_ms=now)
        )
    except ValidationError as exc:
        wrong = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(request)'}: {e['msg']}" for e in exc.errors()
        )
        return await run_in_threadpool(
            lambda: _steward_page(request, session, 422, refused=wrong, form=fields)
        )
    except OverrideRefused as refused:
        r = refused.refusal
        return await run_in_threadpool(
            lambda: _steward_page(
                request, session, r.status, refused=f"{r.field}: {r.message}", form=fields
            )
        )
    done = f"{status}: {override.candidate_title} of {override.objective_key} ({override.id})"
    return await run_in_threadpool(lambda: _steward_page(request, session, done=done))
