"""The `webhook` outbound adapter: each ask POSTed as JSON to one URL, signed as Standard
Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>` over
`{id}.{timestamp}.{body}`) and carrying `Idempotency-Key`. Both ids are the ask's idempotency
id, so a receiver that dedupes on either applies the ask once however often it arrives.

The receiver answers 2xx with JSON naming where the ask went: `{"channelId": ..., "messageId":
...}` (snake_case accepted). Reconciling an ask whose outcome is unknown is the same POST again:
the receiver's dedupe answers with the first result instead of applying it twice.

Failures are typed like Slack's: a connection that could not be made or a 429 is `NotSent`
(after `Retry-After`); a timeout or reset after the request left, a 5xx, 408 or 409 is
`MaybeSent`; any other 4xx is permanent.

Two kinds of POST, told apart by `type`:

- `seatwire.ask`: `{"type": "seatwire.ask", "ask": <OutboundAsk>}`. With answer links on
  (SEATWIRE_ANSWER_LINK_SECRET, or an operator token to derive their key from),
  `ask.answerUrl` is a signed link for that ask and its targets only:
  `POST` it with `{"answer": ..., "by": <one of the targets>, "text"?}` (JSON, or a form),
  or open it in a browser for a page with the answer's buttons (workers/ingress/asks.py).
  It is null when no link is offered.
- `seatwire.ask_answered`: sent once an ask was answered or snoozed, from any surface, so
  that the receiver can show the answer where it showed the ask (`show_answer`): `askId`,
  `workId`, `seatId`, `channelId` and `messageId` (where the ask landed, as the receiver
  named it), `answer` (approved, declined, replied, done or snoozed), `by`, `text`, `atMs`,
  `via`, and `snoozeUntilMs` or `consentId`/`consentExpiresAtMs` where they apply. Its
  `webhook-id` and `Idempotency-Key` are `answered-{askId}-{answer}-{atMs}`: the same
  answer shown twice (a retry) is one event to a receiver that dedupes. Once the consent
  an approval gave is revoked, the event is sent again with `consentRevokedAtMs` and
  `consentRevokedBy`, its id ending `-revoked-{consentRevokedAtMs}`.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from contracts.asks import Ask
from contracts.messages import OutboundAsk, SendResult
from pipeline.signatures import standard_webhook_headers
from workers.clock import now_ms
from workers.errors import ConfigError, MaybeSent, NotSent, PermanentError
from workers.outbound.base import SendContext, seconds
from workers.settings import masked, scrubbed
from workers.telemetry import telemetry

SECRET_PREFIX = "whsec_"


def signing_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks secret (`whsec_` + base64; bare base64 accepted)."""
    raw = secret.strip()
    raw = raw[len(SECRET_PREFIX) :] if raw.startswith(SECRET_PREFIX) else raw
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigError(
            "SEATWIRE_WEBHOOK_SECRET must be whsec_ followed by base64 (Standard Webhooks)"
        ) from exc
    if len(key) < 16:
        raise ConfigError("SEATWIRE_WEBHOOK_SECRET is too short: use at least 16 random bytes")
    return key


def _retry_after(response: httpx.Response) -> float | None:
    """Retry-After as seconds (a number, or an HTTP date measured from now), finite and at
    most an hour; None when absent or unreadable."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    wait = seconds(value)
    if wait is not None:
        return wait
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return seconds((when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


class WebhookOutbound:
    name = "webhook"

    def __init__(
        self, *, url: str, secret: str, timeout_s: float, client: httpx.Client | None = None
    ) -> None:
        self.url = url
        self.key = signing_key(secret)
        self.client = client or httpx.Client(timeout=timeout_s, follow_redirects=False)

    def check(self) -> str:
        """Refuse at start a URL nothing answers at (any HTTP answer will do)."""
        try:
            self.client.request("HEAD", self.url, timeout=5)
        except httpx.HTTPError as exc:
            raise ConfigError(
                f"cannot reach SEATWIRE_WEBHOOK_URL {masked(self.url)}: {scrubbed(exc, self.url)}"
            ) from exc
        return f"webhook to {masked(self.url)}"

    def _post(self, event: dict[str, Any], msg_id: str, now_s: int) -> httpx.Response:
        body = json.dumps(event, ensure_ascii=False).encode()
        headers = {
            "content-type": "application/json",
            "idempotency-key": msg_id,
            **standard_webhook_headers(body, key=self.key, msg_id=msg_id, now_s=now_s),
        }
        try:
            return self.client.post(self.url, content=body, headers=headers)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise NotSent(f"webhook: cannot connect ({exc})") from exc
        except httpx.HTTPError as exc:
            raise MaybeSent(f"webhook: {type(exc).__name__}: {exc}") from exc

    def send(self, ask: OutboundAsk, ctx: SendContext) -> SendResult:
        event = {"type": "seatwire.ask", "ask": ask.to_wire()}
        response = self._post(event, ask.idempotency_id, ctx.now_ms // 1000)
        return self._result(ask, response)

    def show_answer(self, ask: Ask) -> bool:
        """POST the `seatwire.ask_answered` event of an answered or snoozed ask (False for an
        ask in any other state: nothing to show). A receiver that could not take it raises as
        a send would; the caller logs it (the record holds the answer whatever it shows)."""
        event = answered_event(ask)
        if event is None:
            return False
        msg_id = f"answered-{ask.id}-{event['answer']}-{event['atMs']}"
        if event.get("consentRevokedAtMs") is not None:
            # The same answer shown again once its consent was revoked: a new event, which
            # the receiver's dedupe must not take for the first.
            msg_id += f"-revoked-{event['consentRevokedAtMs']}"
        response = self._post(event, msg_id, now_ms() // 1000)
        status = response.status_code
        if status == 429:
            telemetry().rate_limited("webhook", "ask_answered")
            raise NotSent("webhook: HTTP 429", retry_after_s=_retry_after(response))
        if status >= 500 or status in (408, 409):
            raise MaybeSent(f"webhook: HTTP {status}")
        if status >= 300:
            raise PermanentError(f"webhook: HTTP {status}: {response.text[:200]}")
        return True

    def reconcile(self, ask: OutboundAsk, ctx: SendContext) -> SendResult | None:
        """The same POST again: the receiver's dedupe answers with its first result."""
        try:
            return self.send(ask, ctx)
        except NotSent as exc:
            raise MaybeSent(
                f"reconciliation of {ask.idempotency_id} failed: {exc}",
                retry_after_s=exc.retry_after_s,
            ) from exc

    def _result(self, ask: OutboundAsk, response: httpx.Response) -> SendResult:
        status = response.status_code
        if status == 429:
            telemetry().rate_limited("webhook", "post")
            raise NotSent("webhook: HTTP 429", retry_after_s=_retry_after(response))
        if status >= 500 or status in (408, 409):
            raise MaybeSent(f"webhook: HTTP {status}")
        if status >= 300:
            raise PermanentError(f"webhook: HTTP {status}: {response.text[:200]}")
        reply: Any
        try:
            reply = response.json()
        except ValueError:
            reply = {}
        reply = reply if isinstance(reply, dict) else {}
        channel = reply.get("channelId") or reply.get("channel_id") or "webhook"
        message = reply.get("messageId") or reply.get("message_id") or ask.idempotency_id
        return SendResult(channel_id=str(channel), message_id=str(message))


def answered_event(ask: Ask) -> dict[str, Any] | None:
    """The `seatwire.ask_answered` event of an answered or snoozed ask; None otherwise."""
    landing = ask.landing
    where = {
        "askId": ask.id,
        "workId": ask.work_id,
        "seatId": ask.seat_id,
        "channelId": None if landing is None else landing.channel_id,
        "messageId": None if landing is None else landing.message_id,
    }
    a = ask.answer
    if ask.state == "answered" and a is not None:
        return {
            "type": "seatwire.ask_answered",
            **where,
            "answer": a.answer,
            "by": a.by,
            "text": a.text,
            "atMs": a.at_ms,
            "via": a.via,
            "consentId": a.consent_id,
            "consentExpiresAtMs": a.consent_expires_at_ms,
            **(
                {
                    "consentRevokedAtMs": a.consent_revoked_at_ms,
                    "consentRevokedBy": a.consent_revoked_by,
                }
                if a.consent_revoked_at_ms is not None
                else {}
            ),
        }
    if ask.state == "snoozed":
        last = next((e for e in reversed(ask.history) if e.event == "snoozed"), None)
        if last is None:
            return None
        return {
            "type": "seatwire.ask_answered",
            **where,
            "answer": "snoozed",
            "by": last.by,
            "text": "",
            "atMs": last.at_ms,
            "snoozeUntilMs": ask.snooze_until_ms,
        }
    return None
