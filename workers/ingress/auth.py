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
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from fastapi.concurrency import run_in_threadpool

from contracts import Seat
from workers.org import OrgSource
from workers.settings import Settings
from workers.stores.tokens import Role, Tokens, dev_token


@dataclass(frozen=True)
class Caller:
    role: Role
    seat: Seat | None  # the seat of a seat token; None for the operator
    label: str


OPERATOR = Caller(role="operator", seat=None, label="bootstrap")


class Authenticator:
    def __init__(self, settings: Settings, tokens: Tokens, org: OrgSource) -> None:
        self.operator = settings.token().encode()
        self.tokens = tokens
        self.org = org
        # The key of the development seat tokens: embedded mode only.
        self.dev_key = settings.token() if settings.embedded else None

    def fast(self, token: str) -> Caller | None:
        """The caller when the token is one checked without Redis (steps 1 and 2)."""
        given = token.encode()
        if hmac.compare_digest(given, self.operator):
            return OPERATOR
        if self.dev_key is not None:
            for seat in self.org.current()[0].org.seats:
                if hmac.compare_digest(given, dev_token(self.dev_key, seat.member_id).encode()):
                    return Caller(role="seat", seat=seat, label="embedded development token")
        return None

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
