"""The webhook adapter shows an answer where it showed the ask (issue 26): a signed
`seatwire.ask_answered` event, keyed so that the same answer shown twice is one event; the
ask it sends carries its answer link as `ask.answerUrl`."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from contracts.asks import AnswerVerb, Ask, AskLanding
from contracts.engagement import Target
from contracts.messages import OutboundAsk
from pipeline.asks import AnswerIn, answer_ask, revoke_consent
from tests.workers.test_webhook_adapter import CTX, adapter, verify
from workers.errors import MaybeSent

NOW = 1_800_000_000_000
OPEN = Ask(
    id="ask-dk1-1",
    seat_id="scout",
    work_id="w1",
    dedupe_key="dk1",
    tracking_id="t1",
    created_at_ms=NOW,
    state="open",
    landing=AskLanding(adapter="webhook", channel_id="C1", message_id="m-9", at_ms=NOW),
)


def answered(verb: AnswerVerb, text: str = "", snooze_until_ms: int | None = None) -> Ask:
    given = AnswerIn(verb, "ben", "link", text=text, snooze_until_ms=snooze_until_ms)
    return answer_ask(OPEN, given, now_ms=NOW + 5).ask


def test_an_answer_is_posted_as_a_signed_event() -> None:
    seen: list[httpx.Request] = []

    def receiver(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        verify(request)
        return httpx.Response(204)

    hook = adapter(receiver)
    assert hook.show_answer(answered("approved", text="go")) is True
    [request] = seen
    event = json.loads(request.content)
    assert event["type"] == "seatwire.ask_answered"
    assert (event["askId"], event["answer"], event["by"], event["atMs"]) == (
        "ask-dk1-1",
        "approved",
        "ben",
        NOW + 5,
    )
    assert (event["channelId"], event["messageId"], event["text"]) == ("C1", "m-9", "go")
    key = f"answered-ask-dk1-1-approved-{NOW + 5}"
    assert request.headers["idempotency-key"] == request.headers["webhook-id"] == key

    hook.show_answer(answered("approved", text="go"))  # shown again: the same event id
    assert seen[1].headers["webhook-id"] == key
    assert hook.show_answer(answered("snoozed", snooze_until_ms=NOW + 3_600_000)) is True
    snoozed = json.loads(seen[2].content)
    assert (snoozed["answer"], snoozed["snoozeUntilMs"]) == ("snoozed", NOW + 3_600_000)


def test_a_revoked_consent_is_shown_again_as_a_new_event() -> None:
    seen: list[httpx.Request] = []

    def receiver(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    hook = adapter(receiver)
    consent = OPEN.model_copy(
        update={"trigger": "irreversible_or_external", "targets": (Target(member_id="ben"),)}
    )
    approved = answer_ask(consent, AnswerIn("approved", "ben", "link"), now_ms=NOW + 5)
    assert approved.consent is not None
    got = revoke_consent(approved.consent, approved.ask, by="ben", now_ms=NOW + 9)
    assert got.ask is not None
    assert hook.show_answer(approved.ask) and hook.show_answer(got.ask)
    first, second = (json.loads(r.content) for r in seen)
    assert "consentRevokedAtMs" not in first
    assert (second["consentRevokedAtMs"], second["consentRevokedBy"]) == (NOW + 9, "ben")
    key = f"answered-ask-dk1-1-approved-{NOW + 5}"
    assert seen[0].headers["webhook-id"] == key
    assert seen[1].headers["webhook-id"] == f"{key}-revoked-{NOW + 9}"


def test_nothing_to_show_posts_nothing_and_a_failing_receiver_raises() -> None:
    seen: list[httpx.Request] = []

    def down(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(503)

    hook = adapter(down)
    assert hook.show_answer(OPEN) is False and seen == []
    with pytest.raises(MaybeSent):
        hook.show_answer(answered("done"))


def test_the_ask_carries_its_answer_link() -> None:
    seen: list[dict[str, Any]] = []

    def receiver(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json={"messageId": "m-1"})

    url = "https://seatwire.example/v1/asks/ask-dk1-1/answer?token=abc.def"
    ask = OutboundAsk(
        idempotency_id="engage-dk1-1",
        tracking_id="t1",
        seat_id="scout",
        work_id="w1",
        attempt=1,
        surface="dm",
        body="Can you approve?",
        ask_id="ask-dk1-1",
        answer_url=url,
    )
    adapter(receiver).send(ask, CTX)
    [body] = seen
    assert body["type"] == "seatwire.ask"
    assert body["ask"]["answerUrl"] == url
