"""The answers part of `seatwire demo`: what happens after an ask, each case checked against
what it must end as:

    a consent, approved by ben's signed Slack click     answered: approved; scout's inbox
                                                        holds an `ask_answered` item
    a blocked ask, answered in its Slack thread         answered: replied, with ben's words
    a review nobody answers (its timeout shortened      asked one rung up: emil, reason code
    to a few seconds for the demo)                      `ask_unanswered`
    the consent's work reported again                   nobody engaged: `consent_on_record`

Everything a person does goes in as the provider sends it (a click form-encoded and signed as
Slack signs it, a thread reply as a signed Events API message); the asks tick that climbs
the ladder is run by hand, once the review's timeout has passed, as beat would run it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
from celery import Celery

from contracts.asks import Ask
from pipeline.signatures import slack_headers
from workers.container import Container
from workers.demo.view import Case, Check, Field, Section, plural
from workers.stages.asks_tick import AsksTick
from workers.stores.asks import AskStore

Headers = Callable[[str], dict[str, str]]
Wait = Callable[[httpx.Client, str], dict[str, Any]]
SEAT = "scout"
# The review's timeout in this demo (SEATWIRE_ASK_TIMEOUTS names it; 24 h by default).
DEMO_REVIEW_TIMEOUT_MS = 2_000


def _report(kind: str, suffix: str, revision: int = 1) -> dict[str, Any]:
    if kind == "consent":
        return {
            "id": f"demo-drop-invoices-2019{suffix}",
            "revision": revision,
            "title": "Drop the unused invoices_2019 table",
            "summary": "It holds 40 GB and nothing has read it since the March migration.",
            "scope": "billing database",
            "risk": {"irreversible": True},
            "approverId": "ben",
            "question": "May I drop it tonight?",
        }
    if kind == "blocked":
        return {
            "id": f"demo-replica-backfill{suffix}",
            "title": "Backfill the billing replica",
            "state": "blocked",
            "scope": "billing database",
            "blocker": {"kind": "access", "ownerId": "ben", "detail": "no write grant on it"},
            "selfServeExhausted": True,
        }
    return {
        "id": f"demo-checkout-contrast{suffix}",
        "title": "Raise the checkout button's contrast",
        "review": {
            "required": True,
            "kind": "accessibility",
            "scope": "design systems and accessibility",
            "reviewerId": "jo",
        },
    }


def _post(http: httpx.Client, headers: Headers, report: dict[str, Any], wait: Wait) -> Any:
    resp = http.post(f"/v1/seats/{SEAT}/work", json=report, headers=headers(SEAT))
    if resp.status_code != 202:
        raise RuntimeError(f"{report['id']}: HTTP {resp.status_code} {resp.text}")
    return wait(http, resp.json()["trackingId"])


def _ask_of(final: dict[str, Any]) -> str | None:
    send = final.get("send") or {}
    sent = str(send.get("idempotencyId") or "")
    return "ask-" + sent.removeprefix("engage-") if sent.startswith("engage-") else None


def _drain(http: httpx.Client, headers: Headers) -> None:
    """Scout reads and acknowledges what its inbox holds, as a running seat does."""
    for _ in range(1_000):
        page = http.get(f"/v1/seats/{SEAT}/updates", headers=headers(SEAT)).json()
        if not page["items"]:
            return
        http.post(
            f"/v1/seats/{SEAT}/updates/ack",
            json={"position": page["position"]},
            headers=headers(SEAT),
        ).raise_for_status()


def _answered_items(http: httpx.Client, headers: Headers) -> list[dict[str, Any]]:
    page = http.get(f"/v1/seats/{SEAT}/updates", headers=headers(SEAT)).json()
    return [i for i in page["items"] if i.get("kind") == "ask_answered"]


def _signed(http: httpx.Client, path: str, body: bytes, secret: str, form: bool) -> Any:
    headers = slack_headers(body, secret=secret, now_s=int(time.time()))
    if form:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    resp = http.post(path, content=body, headers=headers)
    resp.raise_for_status()
    return resp


def _click(http: httpx.Client, ask: Ask, verb: str, user: str, secret: str) -> None:
    """Ben's click on a button of the ask's message, as Slack posts it."""
    landing = ask.landing
    assert landing is not None
    stamp = f"{time.time():.6f}"
    payload = {
        "type": "block_actions",
        "user": {"id": user, "team_id": "T0SEATWIRE"},
        "team": {"id": "T0SEATWIRE", "domain": "seatwire"},
        "api_app_id": "A0SEATWIRE",
        "container": {
            "type": "message",
            "message_ts": landing.message_id,
            "channel_id": landing.channel_id,
            "is_ephemeral": False,
        },
        "channel": {"id": landing.channel_id},
        "message": {"ts": landing.message_id, "type": "message"},
        "actions": [
            {
                "type": "button",
                "block_id": f"seatwire_ask:{ask.id}",
                "action_id": f"seatwire_answer:{verb}",
                "value": f"{ask.id}|{verb}",
                "action_ts": stamp,
            }
        ],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    _signed(http, "/webhooks/slack/interactions", body, secret, form=True)


def _reply(http: httpx.Client, ask: Ask, user: str, text: str, secret: str) -> str:
    """Ben's reply in the ask's thread, as the Events API delivers it; its delivery id."""
    landing = ask.landing
    assert landing is not None
    run = time.time()
    ts = f"{run:.6f}"
    channel = landing.channel_id or ""
    envelope = {
        "token": "unused",
        "team_id": "T0SEATWIRE",
        "api_app_id": "A0SEATWIRE",
        "type": "event_callback",
        "event_id": f"EvASK{int(run * 1000)}",
        "event_time": int(run),
        "event": {
            "type": "message",
            "channel": channel,
            "channel_type": "im" if channel.startswith(("D", "dm:")) else "channel",
            "user": user,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "thread_ts": landing.thread_root_id or landing.message_id,
        },
        "authorizations": [{"team_id": "T0SEATWIRE", "user_id": "U0SCOUT", "is_bot": True}],
    }
    body = json.dumps(envelope).encode()
    resp = _signed(http, "/webhooks/slack", body, secret, form=False)
    return str(resp.json()["deliveryId"])


def _landed(store: AskStore, ask_id: str) -> Ask | None:
    """The ask once its landing (where it was posted) is on record; None if it never is."""
    found: Ask | None = _until(lambda: (a := store.get(ask_id)) and a.landing is not None and a)
    return found


def _until(check: Callable[[], Any], timeout_s: float = 60) -> Any:
    """`check()` once it says something (polled; a worker thread answers meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def _said(ask: Ask | None) -> str:
    if ask is None:
        return "no ask"
    if ask.answer is not None:
        return f"{ask.state}: {ask.answer.answer} by {ask.answer.by}"
    return ask.state if not ask.escalations else f"{ask.state} to {ask.escalations[-1].target_id}"


@dataclass(frozen=True)
class _Run:
    """What every case of this part works with: the ingress, the process's stores and Celery
    app, and how a seat's calls are signed and waited on."""

    http: httpx.Client
    container: Container
    app: Celery
    slack_secret: str
    suffix: str
    wait_final: Wait
    wait_resolved: Wait
    seat_headers: Headers

    @property
    def store(self) -> AskStore:
        return self.container.asks


def run_asks_demo(
    http: httpx.Client,
    container: Container,
    app: Celery,
    *,
    slack_secret: str,
    suffix: str,
    wait_final: Wait,
    wait_resolved: Wait,
    seat_headers: Headers,
) -> Section:
    run = _Run(http, container, app, slack_secret, suffix, wait_final, wait_resolved, seat_headers)
    _drain(http, seat_headers)
    cases = [
        _approved_by_click(run),
        _answered_in_thread(run),
        _climbed_past_timeout(run),
        _consent_on_record(run),
    ]
    passed = sum(1 for c in cases if c.check.ok)
    return Section(
        key="asks",
        label="answers",
        title="After the ask: answers, escalation, consent on record",
        intro="Each ask is recorded before it is sent; a person's answer reaches the seat's "
        "inbox once, an unanswered one climbs a rung, and an approval is not asked again.",
        cases=tuple(cases),
        summary=f"{passed} of {plural(len(cases), 'case')} as expected: a click, a thread "
        "reply, an escalation, a consent on record",
        counts=(("cases", len(cases)),),
        notes=("Every ask, open first: seatwire asks --open (or GET /v1/asks).",),
    )


def _approved_by_click(run: _Run) -> Case:
    """A consent approved by a signed click; the seat's inbox hears of it."""
    consent = _post(run.http, run.seat_headers, _report("consent", run.suffix), run.wait_final)
    consent_id = _ask_of(consent) or ""
    # The report's journal entry ends with its send; where the ask landed is written just
    # after, in the send's own settle: wait for it, as a person's click comes after the post.
    asked = _landed(run.store, consent_id)
    if asked is not None and asked.landing is not None:
        _click(run.http, asked, "approved", "U0BEN", run.slack_secret)
    clicked = _until(lambda: (a := run.store.get(consent_id)) and a.state != "open" and a)
    items = _until(lambda: _answered_items(run.http, run.seat_headers))
    heard = [i for i in items if (i.get("ask") or {}).get("askId") == consent_id]
    answer = clicked.answer if clicked else None
    ok = bool(answer and answer.answer == "approved" and answer.by == "ben" and heard)
    return Case(
        "a consent, approved by ben's signed Slack click",
        (
            Field("outcome", "outcome", _said(clicked)),
            Field("reasonCode", "answer", answer.answer if answer else "-"),
            Field("ask", "ask", consent_id or "none"),
            Field(
                "consent",
                "consent on record",
                f"{answer.consent_id} until {answer.consent_expires_at_ms} ms"
                if answer and answer.consent_id
                else "none",
            ),
            Field("inbox", "scout's inbox", plural(len(heard), "ask_answered item")),
        ),
        Check(ok, "answered: approved by ben, and one ask_answered item for scout"),
        subject=SEAT,
    )


def _answered_in_thread(run: _Run) -> Case:
    """A blocked ask answered by a reply in its thread."""
    blocked = _post(run.http, run.seat_headers, _report("blocked", run.suffix), run.wait_final)
    blocked_id = _ask_of(blocked) or ""
    asked = _landed(run.store, blocked_id)
    words = "Granted: you have write access on the billing replica now."
    delivery = ""
    if asked is not None and asked.landing is not None:
        delivery = _reply(run.http, asked, "U0BEN", words, run.slack_secret)
        run.wait_resolved(run.http, delivery)
    replied = _until(lambda: (a := run.store.get(blocked_id)) and a.state != "open" and a)
    answer = replied.answer if replied else None
    ok = bool(answer and answer.answer == "replied" and answer.text == words)
    where = asked.landing if asked is not None else None
    return Case(
        "a blocked ask, answered in its Slack thread",
        (
            Field("outcome", "outcome", _said(replied)),
            Field("reasonCode", "answer", answer.answer if answer else "-"),
            Field("ask", "ask", blocked_id or "none"),
            Field(
                "thread",
                "thread",
                f"{where.channel_id} {where.thread_root_id}" if where else "none",
            ),
            Field("text", "words", answer.text if answer else "none"),
        ),
        Check(ok, "answered: replied, with ben's words"),
        subject=SEAT,
    )


def _climbed_past_timeout(run: _Run) -> Case:
    """A review nobody answers: past its (shortened) timeout, one rung up."""
    review = _post(run.http, run.seat_headers, _report("review", run.suffix), run.wait_final)
    review_id = _ask_of(review) or ""
    asked = run.store.get(review_id)
    deadline = (asked.deadline_ms or 0) if asked else 0
    _until(lambda: time.time() * 1000 > deadline, timeout_s=DEMO_REVIEW_TIMEOUT_MS / 1000 + 5)
    tick = AsksTick.of(run.container, run.app)(now_ms=int(time.time() * 1000))
    climbed = run.store.get(review_id)
    step = climbed.escalations[0] if climbed and climbed.escalations else None
    up = run.wait_final(run.http, step.tracking_id) if step else {}
    decided = up.get("decision") or {}
    targets = [t["memberId"] for t in decided.get("targets", ())]
    ok = bool(
        step
        and step.target_id == "emil"
        and up.get("state") == "engaged"
        and decided.get("reasonCode") == "ask_unanswered"
        and targets == ["emil"]
    )
    return Case(
        "a review nobody answers, past its timeout",
        (
            Field("outcome", "outcome", _said(climbed)),
            Field("reasonCode", "reason code", decided.get("reasonCode") or "-"),
            Field("ask", "ask", review_id or "none"),
            Field("asked", "asked", "jo (the reviewer it names)"),
            Field("timeout", "timeout", f"{DEMO_REVIEW_TIMEOUT_MS // 1000} s (shortened)"),
            Field("targets", "asked next", tuple(targets) or ("nobody",)),
            Field("tick", "the asks tick", tick.summary()),
        ),
        Check(ok, "escalated to emil (jo's supervisor), reason code ask_unanswered"),
        tuple(decided.get("why", ()))[-1:],
        subject=SEAT,
    )


def _consent_on_record(run: _Run) -> Case:
    """The consent's work reported again: the approval is on record."""
    again = _post(
        run.http, run.seat_headers, _report("consent", run.suffix, revision=2), run.wait_final
    )
    d = again.get("decision") or {}
    ok = again.get("state") == "nobody" and d.get("reasonCode") == "consent_on_record"
    return Case(
        "the consent's work, reported again",
        (
            Field("outcome", "outcome", again.get("state") or "-"),
            Field("reasonCode", "reason code", d.get("reasonCode") or "-"),
        ),
        Check(ok, "nobody engaged: consent_on_record"),
        (str(d.get("reason") or ""),),
        subject=SEAT,
    )
