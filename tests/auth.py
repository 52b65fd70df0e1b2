"""Bearer tokens for tests (issue 13 point 6): a seat's routes take only that seat's token.

`seat_auth(r, seat)` issues a seat token through the token store on the Redis `r` (the one
the app under test reads) and answers the request headers carrying it; `bearer(token)` is
the header of any token (the operator's, say).
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import httpx
import redis
from fastapi.testclient import TestClient

from workers.org import OrgSource
from workers.stores.tokens import Tokens

if TYPE_CHECKING:
    import httpx2  # what Starlette's TestClient is built on (for the annotations only)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def seat_token(r: redis.Redis, seat: str, *, label: str = "test") -> str:
    """A new token of the seat whose member id is `seat`, issued into `r`."""
    token, _record = Tokens(r).issue(
        "seat", seat_id=seat, label=label, now_ms=int(time.time() * 1000)
    )
    return token


def seat_auth(r: redis.Redis, seat: str) -> dict[str, str]:
    """The Authorization header of a new token of `seat` (its member id)."""
    return bearer(seat_token(r, seat))


# The seat routes (workers/ingress/v1.py `require_seat`): the path's seat acts, with its token.
SEAT_ROUTE = re.compile(
    r"^/v1/seats/(?P<seat>[^/]+)/"
    r"(work|updates|updates/ack|turns/[^/]+/outcome|cost|backlog|backlog/[^/]+/done"
    r"|claims/[^/]+|tools/[^/]+)$"
)


class SeatTokens:
    """A token of each seat of `org`, issued into `r` at once (so a Redis snapshot taken
    afterwards does not see tokens appear); `token(SEAT)` by member id or alias."""

    def __init__(self, r: redis.Redis, org: OrgSource) -> None:
        self.r = r
        self.org = org
        self.tokens: dict[str, str] = {}
        self.reissue()

    def reissue(self) -> None:
        """A new token of every seat (after a test flushed the database, say)."""
        seats = self.org.current()[0].org.seats
        self.tokens = {s.member_id: seat_token(self.r, s.member_id) for s in seats}

    def token(self, seat: str) -> str | None:
        known = self.org.current()[0].seat(seat)
        return None if known is None else self.tokens.get(known.member_id)

    def headers(self, seat: str) -> dict[str, str]:
        token = self.token(seat)
        assert token is not None, f"{seat!r} is no seat of the org"
        return bearer(token)


AS_SEAT = "as-seat:"  # with as_seats: `as_seat(SEAT)` is the header of SEAT's own token


def as_seat(seat: str) -> dict[str, str]:
    """With `as_seats` on the client: the header of the token of `seat`, on any route (for
    a request made as one seat to another seat's route, say)."""
    return bearer(AS_SEAT + seat)


def as_seats(client: TestClient) -> SeatTokens:
    """Make `client`'s requests to a seat route that carry the app's operator token carry the
    token of the seat the path names instead (issued through the store into the app's own
    Redis): the tests written before seat tokens keep their requests, each now made as the
    seat whose route it is; `as_seat(SEAT)`'s header becomes SEAT's token on any route. A
    request with no token or another token is left as it is."""
    deps = client.app.state.deps  # type: ignore[attr-defined]
    return routes_as_seats(client, deps.container.redis, deps.container.org, deps.token.decode())


def routes_as_seats(
    client: httpx.Client | httpx2.Client, r: redis.Redis, org: OrgSource, operator: str
) -> SeatTokens:
    """`as_seats` for any client: the seats of `org`, their tokens issued into `r`, swapped
    in for the `operator` token on the seat routes. (Starlette's TestClient is an
    `httpx2.Client`; the e2e tests' clients are `httpx.Client`s.)"""
    seats = SeatTokens(r, org)
    given_operator = f"Bearer {operator}"

    def swap(request: httpx.Request | httpx2.Request) -> None:
        given = request.headers.get("authorization", "")
        found = SEAT_ROUTE.match(request.url.path)
        if given.startswith(f"Bearer {AS_SEAT}"):
            token = seats.token(given.removeprefix(f"Bearer {AS_SEAT}"))
        elif found and given == given_operator:
            token = seats.token(found["seat"])
        else:
            return
        if token is not None:
            request.headers["authorization"] = f"Bearer {token}"

    client.event_hooks["request"] = [*client.event_hooks["request"], swap]
    return seats
