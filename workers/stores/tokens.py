"""The API's bearer tokens (issue 13 point 6), in Redis, stored hashed.

A token is a role: `seat` (valid only on that seat's routes and `/mcp` as that seat) or
`operator` (every other `/v1` route). One hash, `keys.TOKENS`:

    sha256(token) hex  ->  {"role", "seatId", "label", "issuedAtMs"}   (JSON)

The token itself is never written anywhere: `issue` hands it back once and keeps its hash.
Several tokens may be valid at once (of one seat, of the operator), so a token is rotated
without a restart: issue a new one, move the clients to it, `revoke` the old one by a prefix
of its hash (the prefix `list` shows). A revoke takes effect on the next request (every
request looks its token up; nothing is cached).

Two tokens are not in the store (workers/ingress/auth.py checks them first):

- the bootstrap operator token, `SEATWIRE_API_TOKEN` (or, embedded, `EMBEDDED_TOKEN`);
- embedded mode only: each seat's development token, `dev_token(operator token, seat id)`:
  `swdev_` + HMAC-SHA256(key = the embedded operator token, message = the seat's member
  id), hex. Deterministic, so `seatwire up` can print them and a demo can use them; accepted
  only when no Redis is configured (a real deployment issues its seat tokens here).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any, Literal

import redis

from workers.stores import keys

Role = Literal["seat", "operator"]
ROLES: tuple[Role, ...] = ("seat", "operator")
TOKEN_PREFIX = "swt_"
DEV_TOKEN_PREFIX = "swdev_"
SHOWN_HASH = 12  # how many hex digits of a token's hash `list` and `issue` show
MAX_LABEL = 200


def token_hash(token: str) -> str:
    """The sha256 of a token, hex: what the store keeps instead of it."""
    return hashlib.sha256(token.encode()).hexdigest()


def dev_token(key: str, seat_id: str) -> str:
    """A seat's embedded-mode development token: `swdev_` + HMAC-SHA256(key, seat id) hex,
    `key` being the embedded operator token."""
    return DEV_TOKEN_PREFIX + hmac.new(key.encode(), seat_id.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class TokenRecord:
    """What the store knows of one token (never the token)."""

    hash: str
    role: Role
    seat_id: str | None
    label: str
    issued_at_ms: int

    @property
    def prefix(self) -> str:
        return self.hash[:SHOWN_HASH]

    def to_wire(self) -> dict[str, Any]:
        return {
            "hashPrefix": self.prefix,
            "role": self.role,
            "seatId": self.seat_id,
            "label": self.label,
            "issuedAtMs": self.issued_at_ms,
        }

    @classmethod
    def of(cls, digest: str, raw: bytes | str) -> TokenRecord:
        body = json.loads(raw)
        role = body.get("role")
        if role not in ROLES:
            raise ValueError(f"token {digest[:SHOWN_HASH]} has an unknown role {role!r}")
        return cls(
            hash=digest,
            role=role,
            seat_id=body.get("seatId"),
            label=str(body.get("label", "")),
            issued_at_ms=int(body.get("issuedAtMs", 0)),
        )


class TokenRefused(Exception):
    """`revoke` found no token, or more than one, for a prefix; nothing was written."""


class Tokens:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client

    def issue(
        self, role: Role, *, seat_id: str | None = None, label: str = "", now_ms: int
    ) -> tuple[str, TokenRecord]:
        """A new token (returned once, never stored) and its record."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, not {role!r}")
        if (role == "seat") != bool(seat_id):
            raise ValueError("a seat token names its seat; an operator token names none")
        if len(label) > MAX_LABEL:
            raise ValueError(f"a label is at most {MAX_LABEL} characters")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = TokenRecord(
            hash=token_hash(token),
            role=role,
            seat_id=seat_id if role == "seat" else None,
            label=label,
            issued_at_ms=now_ms,
        )
        body = {
            "role": record.role,
            "seatId": record.seat_id,
            "label": record.label,
            "issuedAtMs": record.issued_at_ms,
        }
        self.r.hset(keys.TOKENS, record.hash, json.dumps(body, separators=(",", ":")))
        return token, record

    def find(self, token: str) -> TokenRecord | None:
        """The record of a presented token; None when it was never issued or is revoked."""
        digest = token_hash(token)
        raw = self.r.hget(keys.TOKENS, digest)
        return None if raw is None else TokenRecord.of(digest, raw)

    def list(self) -> list[TokenRecord]:
        """Every valid token's record, oldest first."""
        found: dict[bytes, bytes] = self.r.hgetall(keys.TOKENS)  # type: ignore[assignment]
        records = [TokenRecord.of(k.decode(), v) for k, v in found.items()]
        return sorted(records, key=lambda r: (r.issued_at_ms, r.hash))

    def revoke(self, prefix: str) -> TokenRecord:
        """End the one token whose hash starts with `prefix`; `TokenRefused` (nothing
        written) when no token's hash does or several do."""
        probe = prefix.strip().lower()
        if not probe:
            raise TokenRefused("give the hash prefix `seatwire token list` shows")
        matches = [r for r in self.list() if r.hash.startswith(probe)]
        if not matches:
            raise TokenRefused(f"no token's hash starts with {probe!r}")
        if len(matches) > 1:
            shown = ", ".join(r.prefix for r in matches)
            raise TokenRefused(f"{probe!r} is ambiguous: it starts {shown}; give more digits")
        self.r.hdel(keys.TOKENS, matches[0].hash)
        return matches[0]
