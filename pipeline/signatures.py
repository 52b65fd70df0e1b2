"""Verifying that a webhook really comes from its provider. Pure: the raw body, the headers, the
secret and the current time (an argument) in; a `Verified` or a `Refused` with a reason out.

Parsing is defensive: a missing, duplicated, non-numeric or malformed header is a refusal with
a reason (the ingress answers 401), never an exception (which would be a 500). Digests are
compared with `hmac.compare_digest`.

    Slack   X-Slack-Signature = "v0=" + hex(HMAC-SHA256(secret, "v0:{ts}:{body}")),
            X-Slack-Request-Timestamp within 5 minutes of now, either way.
    GitHub  X-Hub-Signature-256 = "sha256=" + hex(HMAC-SHA256(secret, body)). No timestamp:
            replay protection is the delivery-id dedupe.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass

SLACK_TOLERANCE_S = 300
_HEX64 = re.compile(r"[0-9a-f]{64}")
_DIGITS = re.compile(r"[0-9]{1,12}")


@dataclass(frozen=True, slots=True)
class Verified:
    ok: bool = True


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str
    detail: str
    ok: bool = False


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """A header by case-insensitive name; None when absent (several values count as absent
    only if they disagree: a proxy may repeat a header, an attacker may add a second one)."""
    wanted = name.lower()
    getlist = getattr(headers, "getlist", None)  # Starlette's Headers: no decoding of the rest
    values: set[str]
    if callable(getlist):
        values = {str(v) for v in getlist(wanted)}
    else:
        values = {v for k, v in headers.items() if k.lower() == wanted}
    if len(values) != 1:
        return None
    return next(iter(values))


def check_secret(secret: str | bytes | None, what: str) -> bytes:
    """A usable signing secret, or ValueError: an empty secret would accept anyone's signature."""
    raw = secret.encode() if isinstance(secret, str) else (secret or b"")
    if not raw.strip():
        raise ValueError(f"{what} is empty: every signature would be checked against nothing")
    return raw


def verify_slack(
    headers: Mapping[str, str],
    body: bytes,
    *,
    secret: str | bytes,
    now_s: int,
    tolerance_s: int = SLACK_TOLERANCE_S,
) -> Verified | Refused:
    """Slack's v0 request signature and timestamp."""
    key = check_secret(secret, "the Slack signing secret")
    stamp = _header(headers, "X-Slack-Request-Timestamp")
    given = _header(headers, "X-Slack-Signature")
    if stamp is None or given is None:
        return Refused(
            "missing_signature",
            "X-Slack-Signature and X-Slack-Request-Timestamp are both required, once each",
        )
    if not _DIGITS.fullmatch(stamp.strip()):
        return Refused("bad_timestamp", "X-Slack-Request-Timestamp is not whole seconds")
    skew = abs(now_s - int(stamp.strip()))
    if skew > tolerance_s:
        return Refused(
            "stale_timestamp",
            f"the request is {skew} s away from now; at most {tolerance_s} s is accepted",
        )
    version, _, digest = given.strip().partition("=")
    if version != "v0" or not _HEX64.fullmatch(digest):
        return Refused("bad_signature", "X-Slack-Signature must be v0= and 64 lowercase hex digits")
    expected = hmac.new(key, b"v0:" + stamp.strip().encode() + b":" + body, hashlib.sha256)
    if not hmac.compare_digest(expected.hexdigest(), digest):
        return Refused("bad_signature", "the signature does not match the body")
    return Verified()


def verify_github(
    headers: Mapping[str, str], body: bytes, *, secret: str | bytes
) -> Verified | Refused:
    """GitHub's X-Hub-Signature-256 (the SHA-1 header alone is not accepted)."""
    key = check_secret(secret, "the GitHub webhook secret")
    given = _header(headers, "X-Hub-Signature-256")
    if given is None:
        return Refused("missing_signature", "X-Hub-Signature-256 is required, once")
    algorithm, _, digest = given.strip().partition("=")
    if algorithm != "sha256" or not _HEX64.fullmatch(digest):
        return Refused(
            "bad_signature", "X-Hub-Signature-256 must be sha256= and 64 lowercase hex digits"
        )
    expected = hmac.new(key, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, digest):
        return Refused("bad_signature", "the signature does not match the body")
    return Verified()


def slack_headers(body: bytes, *, secret: str | bytes, now_s: int) -> dict[str, str]:
    """The headers Slack sends with `body` at `now_s` (for the demo, tests and benchmarks)."""
    key = check_secret(secret, "the Slack signing secret")
    digest = hmac.new(key, f"v0:{now_s}:".encode() + body, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": str(now_s),
        "X-Slack-Signature": f"v0={digest}",
    }


def github_headers(
    body: bytes, *, secret: str | bytes, event: str, delivery_id: str
) -> dict[str, str]:
    """The headers GitHub sends with `body` for one delivery of `event`."""
    key = check_secret(secret, "the GitHub webhook secret")
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id,
        "X-Hub-Signature-256": "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest(),
    }


def standard_webhook_headers(body: bytes, *, key: bytes, msg_id: str, now_s: int) -> dict[str, str]:
    """The headers a Standard Webhooks sender sends with `body`: `webhook-id`,
    `webhook-timestamp` and `webhook-signature` (`v1,` + base64 HMAC-SHA256 of
    `{id}.{timestamp}.{body}`, keyed by the secret's decoded bytes)."""
    mac = hmac.new(key, f"{msg_id}.{now_s}.".encode() + body, hashlib.sha256).digest()
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(now_s),
        "webhook-signature": "v1," + base64.b64encode(mac).decode(),
    }
