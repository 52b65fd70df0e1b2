"""Who a bearer token is (issue 13 point 6): the operator, one seat, or nobody.

`Authenticator.caller(token)` answers, in order (constant-time comparisons):

1. the bootstrap operator token (`Settings.token()`: SEATWIRE_API_TOKEN, or EMBEDDED_TOKEN
   in embedded mode) -> the operator;
2. embedded mode only: a seat's development token (`workers.stores.tokens.dev_token` of the
   operator token and the seat's member id) -> that seat;
3. the token store (workers/stores/tokens.py, by the token's sha256) -> its role; a seat
   token whose seat is no longer in the org file is nobody;
4. else nobody (None: the route answers 401).

Only step 3 reads Redis; `caller_async` runs it in a worker thread. The route dependencies
that use it (v1.py `require_token`, `require_seat`) and `/mcp` (mcp.py) decide the 403s.

Every step costs the same at any size of org (issue 27): step 2 looks the token up in an
index of the seats' development tokens built once per org version (`DevTokens`), where it
hashed every seat's token on every request (16.7 ms a request at 10,000 seats); step 3 is
one HGET by the token's hash.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from fastapi.concurrency import run_in_threadpool

from contracts import Seat
from workers.org import OrgSource, OrgView
from workers.settings import Settings
from workers.stores.tokens import Role, Tokens, dev_token


@dataclass(frozen=True)
class Caller:
    role: Role
    seat: Seat | None  # the seat of a seat token; None for the operator
    label: str


OPERATOR = Caller(role="operator", seat=None, label="bootstrap")
DEV_LABEL = "embedded development token"


class DevTokens:
    """Every seat's development token of one org version, indexed for a look-up that costs
    the same at any number of seats, and that tells a caller nothing by its timing.

    The index is a dict keyed by HMAC-SHA256 of the token under a key drawn at random when
    the index is built, never by the token itself. A dict look-up's time depends on the key's
    hash and on comparing the key with the entries it probes; here the key is a MAC the
    caller cannot compute (it does not know the random key), so what it presents steers
    neither which entries are probed nor how far a comparison runs: timing the look-up
    teaches nothing about a seat's token, which guessing it a byte at a time against a
    plain comparison would. The entry found is then confirmed with `hmac.compare_digest` on
    the whole token (constant time), so two tokens whose MACs collide could not pass for
    each other either."""

    def __init__(self, key: str, seats: Iterable[Seat]) -> None:
        self._mac_key = secrets.token_bytes(32)
        self._by_mac: dict[bytes, tuple[bytes, Seat]] = {}
        for seat in seats:
            token = dev_token(key, seat.member_id).encode()
            self._by_mac.setdefault(self._mac(token), (token, seat))  # the first seat wins

    def _mac(self, token: bytes) -> bytes:
        return hmac.new(self._mac_key, token, hashlib.sha256).digest()

    def seat(self, given: bytes) -> Seat | None:
        """The seat whose development token `given` is, or None."""
        found = self._by_mac.get(self._mac(given))
        if found is None or not hmac.compare_digest(given, found[0]):
            return None
        return found[1]


class Authenticator:
    def __init__(self, settings: Settings, tokens: Tokens, org: OrgSource) -> None:
        self.operator = settings.token().encode()
        self.tokens = tokens
        self.org = org
        # The key of the development seat tokens: embedded mode only.
        self.dev_key = settings.token() if settings.embedded else None
        # The org version the index was built for, and the index (replaced as one pair).
        self._dev: tuple[OrgView, DevTokens] | None = None

    def dev_tokens(self) -> DevTokens | None:
        """The development tokens of the org now, indexed once per org version (embedded
        mode only; None otherwise)."""
        if self.dev_key is None:
            return None
        view = self.org.current()[0]
        built = self._dev
        if built is None or built[0] is not view:
            built = (view, DevTokens(self.dev_key, view.org.seats))
            self._dev = built
        return built[1]

    def fast(self, token: str) -> Caller | None:
        """The caller when the token is one checked without Redis (steps 1 and 2)."""
        given = token.encode()
        if hmac.compare_digest(given, self.operator):
            return OPERATOR
        dev = self.dev_tokens()
        seat = None if dev is None else dev.seat(given)
        return None if seat is None else Caller(role="seat", seat=seat, label=DEV_LABEL)

    def caller(self, token: str) -> Caller | None:
        """Who `token` is, or None (nobody)."""
        if not token:
            return None
        found = self.fast(token)
        if found is not None:
            return found
        record = self.tokens.find(token)
        if record is None:
            return None
        if record.role == "operator":
            return Caller(role="operator", seat=None, label=record.label)
        seat = self.org.current()[0].seat(record.seat_id or "")
        if seat is None:
            return None
        return Caller(role="seat", seat=seat, label=record.label)

    async def caller_async(self, token: str) -> Caller | None:
        """`caller`, its Redis read off the event loop."""
        if not token:
            return None
        found = self.fast(token)
        if found is not None:
            return found
        return await run_in_threadpool(self.caller, token)

    def seat_matches(self, caller: Caller, ident: str) -> bool:
        """True when `ident` (a member id or alias) names the caller's own seat."""
        if caller.seat is None:
            return False
        named = self.org.current()[0].seat(ident)
        return named is not None and named.member_id == caller.seat.member_id
