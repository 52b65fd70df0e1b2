"""The webhook adapter: Standard Webhooks signing, the receiver's answer, and error classes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable

import httpx
import pytest

from contracts.messages import OutboundAsk
from workers.errors import ConfigError, MaybeSent, NotSent, PermanentError
from workers.outbound.base import SendContext
from workers.outbound.webhook import WebhookOutbound, signing_key

KEY = b"0123456789abcdef0123456789abcdef"
SECRET = "whsec_" + base64.b64encode(KEY).decode()
ASK = OutboundAsk(
    idempotency_id="engage-dk1-1",
    tracking_id="t1",
    seat_id="scout",
    work_id="w1",
    attempt=1,
    surface="dm",
    member_ids=("ben",),
    body="Can you approve the migration?",
)
CTX = SendContext(now_ms=1_700_000_000_000, since_ms=1_700_000_000_000)


def adapter(handler: Callable[[httpx.Request], httpx.Response]) -> WebhookOutbound:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return WebhookOutbound(
        url="https://hooks.example/ask", secret=SECRET, timeout_s=5, client=client
    )


def verify(request: httpx.Request) -> None:
    """What a Standard Webhooks receiver checks."""
    msg_id = request.headers["webhook-id"]
    ts = request.headers["webhook-timestamp"]
    signed = f"{msg_id}.{ts}.".encode() + request.content
    expected = base64.b64encode(hmac.new(KEY, signed, hashlib.sha256).digest()).decode()
    versions = request.headers["webhook-signature"].split(" ")
    assert f"v1,{expected}" in versions


def test_a_signed_post_carries_the_ask_and_its_idempotency_key() -> None:
    seen: list[httpx.Request] = []

    def receiver(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        verify(request)
        return httpx.Response(200, json={"channelId": "C1", "messageId": "m-9"})

    result = adapter(receiver).send(ASK, CTX)
    assert (result.channel_id, result.message_id) == ("C1", "m-9")
    (request,) = seen
    assert request.headers["idempotency-key"] == "engage-dk1-1"
    assert request.headers["webhook-id"] == "engage-dk1-1"
    assert request.headers["webhook-timestamp"] == "1700000000"
    body = json.loads(request.content)
    assert body["type"] == "seatwire.ask" and body["ask"]["idempotencyId"] == "engage-dk1-1"


def test_a_reply_without_ids_is_still_delivered() -> None:
    result = adapter(lambda r: httpx.Response(202, text="accepted")).send(ASK, CTX)
    assert (result.channel_id, result.message_id) == ("webhook", "engage-dk1-1")


@pytest.mark.parametrize(
    ("status", "headers", "error", "retry_after"),
    [
        (429, {"retry-after": "7"}, NotSent, 7.0),
        (429, {}, NotSent, None),
        (500, {}, MaybeSent, None),
        (503, {}, MaybeSent, None),
        (408, {}, MaybeSent, None),
        (409, {}, MaybeSent, None),
        (400, {}, PermanentError, None),
        (404, {}, PermanentError, None),
        (301, {"location": "https://elsewhere"}, PermanentError, None),
    ],
)
def test_answers_are_classed(
    status: int, headers: dict[str, str], error: type[Exception], retry_after: float | None
) -> None:
    with pytest.raises(error) as caught:
        adapter(lambda r: httpx.Response(status, headers=headers)).send(ASK, CTX)
    if isinstance(caught.value, NotSent):
        assert caught.value.retry_after_s == retry_after


def test_a_connection_never_made_is_not_sent_and_a_lost_reply_may_be() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    def drop(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("read timed out", request=request)

    with pytest.raises(NotSent):
        adapter(refuse).send(ASK, CTX)
    with pytest.raises(MaybeSent):
        adapter(drop).send(ASK, CTX)


def test_reconcile_is_the_same_post_and_never_reads_as_not_sent() -> None:
    keys: list[str] = []

    def receiver(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers["idempotency-key"])
        return httpx.Response(200, json={"channel_id": "C1", "message_id": "m-1"})

    box = adapter(receiver)
    assert box.send(ASK, CTX) == box.reconcile(ASK, CTX)
    assert keys == ["engage-dk1-1", "engage-dk1-1"]
    with pytest.raises(MaybeSent):  # a 429 while reconciling: still in doubt, not "not sent"
        adapter(lambda r: httpx.Response(429)).reconcile(ASK, CTX)


@pytest.mark.parametrize(
    "secret", ["whsec_not base64!", "whsec_" + base64.b64encode(b"short").decode()]
)
def test_a_bad_secret_is_refused_at_start(secret: str) -> None:
    with pytest.raises(ConfigError, match="SEATWIRE_WEBHOOK_SECRET"):
        signing_key(secret)


def test_an_unreachable_url_is_refused_at_start() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(ConfigError, match="cannot reach"):
        adapter(refuse).check()
    assert "webhook to" in adapter(lambda r: httpx.Response(405)).check()


@pytest.mark.parametrize(
    "header",
    ["Wed, 21 Oct 2015 07:28:00 -0000", "Wed, 21 Oct 2015 07:28:00 GMT", "not a date", "inf"],
)
def test_an_odd_retry_after_never_escapes_as_another_error(header: str) -> None:
    with pytest.raises(NotSent) as refused:
        adapter(lambda r: httpx.Response(429, headers={"retry-after": header})).send(ASK, CTX)
    wait = refused.value.retry_after_s
    assert wait is None or 0 <= wait <= 3600
