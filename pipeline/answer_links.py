"""Answer links: a signed, expiring token that lets whoever holds it answer one ask, as one of
the people that ask was put to, from anywhere (a browser, any chat tool a webhook feeds).
Pure: the key and the time arrive as arguments.

A token is `<payload>.<mac>`: the payload is the opaque cursor encoding (pipeline/cursors.py)
of `["a1", ask id, expires at ms, [target ids]]`, the MAC the URL-safe base64 of
HMAC-SHA256 over the payload's text with the link key. So the MAC covers the ask id, the
expiry and the targets, and none of them can be changed without the key. The ask id is in the
token as well as in the URL, so that a valid link presented for another ask can be told from
a forged one (the route answers the first as an unknown ask, revealing nothing, and the
second 401).

The key is `SEATWIRE_ANSWER_LINK_SECRET` when set, else derived one way from the operator
token (`derived_key`): a link never carries or reveals the operator token, and rotating the
token (or setting a secret) voids every link out there. With neither, no link is offered.

How long a link lives (`link_expiry`): as long as its ask can still be answered, and no
longer, because a leaked link answers the ask for whoever holds it. An ask waits one timeout
at its own rung and one more at each of the MAX_LEVEL rungs above before it expires, and a
snooze can push that out by up to MAX_SNOOZE_MS; a send deferred by quiet hours or retried
lands up to about a day after its record was written. So a link lives from the record's
creation: (1 + MAX_LEVEL) timeouts, one maximal snooze and a day. For a consent (4 h timeout)
that is 12 h + 8 days; a fixed week would cut a long review ladder short and keep a consent's
link alive for days it cannot use. Past it, the ask is still answered in Slack or by an
operator (`POST /v1/asks/{id}/answer` with the operator token).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from contracts.asks import Ask
from pipeline.asks import DAY_MS, MAX_LEVEL, MAX_SNOOZE_MS
from pipeline.cursors import pack, unpack

VERSION = "a1"
DERIVATION = b"seatwire answer links v1"
MAX_TOKEN_CHARS = 4_000  # far above any real link's; a longer text is not read at all


@dataclass(frozen=True)
class LinkClaim:
    """What a valid, unexpired link says: this ask, until then, answered by one of these."""

    ask_id: str
    expires_at_ms: int
    targets: tuple[str, ...]


@dataclass(frozen=True)
class LinkRefused:
    """Why a link is not honoured: `invalid_link` (not one Seatwire signed with this key:
    forged, cut, or signed with a key since rotated) or `link_expired`."""

    code: Literal["invalid_link", "link_expired"]
    why: str


def derived_key(secret: str | None, operator_token: str | None) -> bytes | None:
    """The link key: the secret itself, else HMAC-SHA256 of a fixed label under the operator
    token (one way: the key reveals nothing of the token); None with neither."""
    if secret is not None and secret.strip():
        return secret.strip().encode()
    if operator_token is not None and operator_token.strip():
        return hmac.new(operator_token.strip().encode(), DERIVATION, hashlib.sha256).digest()
    return None


def link_expiry(ask: Ask) -> int:
    """When an ask's link stops being honoured (see the module's text for why)."""
    return ask.created_at_ms + ask.timeout_ms * (1 + MAX_LEVEL) + MAX_SNOOZE_MS + DAY_MS


def _mac(key: bytes, payload: str) -> str:
    digest = hmac.new(key, payload.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def sign(key: bytes, ask_id: str, targets: Sequence[str], expires_at_ms: int) -> str:
    """The token that answers `ask_id` as one of `targets` until `expires_at_ms`."""
    payload = pack([VERSION, ask_id, expires_at_ms, list(targets)])
    return f"{payload}.{_mac(key, payload)}"


def read(key: bytes, token: str, *, now_ms: int) -> LinkClaim | LinkRefused:
    """What `token` claims, once its MAC holds under `key` and it has not expired."""
    forged = LinkRefused(
        "invalid_link", "this answer link is not one Seatwire signed (or its key has changed)"
    )
    if len(token) > MAX_TOKEN_CHARS:
        return forged
    payload, dot, mac = token.strip().rpartition(".")
    if not dot or not payload:
        return forged
    if not hmac.compare_digest(mac.encode(), _mac(key, payload).encode()):
        return forged
    data = unpack(payload)
    if not (
        isinstance(data, list)
        and len(data) == 4
        and data[0] == VERSION
        and isinstance(data[1], str)
        and isinstance(data[2], int)
        and not isinstance(data[2], bool)
        and isinstance(data[3], list)
        and all(isinstance(t, str) for t in data[3])
    ):
        return forged
    _v, ask_id, expires, targets = data
    if expires <= now_ms:
        return LinkRefused(
            "link_expired",
            f"this answer link expired at {expires} ms; answer where the ask was posted, or "
            "ask an operator",
        )
    return LinkClaim(ask_id=ask_id, expires_at_ms=expires, targets=tuple(targets))
