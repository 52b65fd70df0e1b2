"""Tokens that let no one in where they do not belong (issue 13 point 6), on a real Redis.

Every `/v1` route, enumerated from the app itself (a route in neither list below fails the
first test), is tried with no token, a wrong token, another seat's token, the operator token
and the right token: only the right role gets past auth, and a refusal writes nothing. Then
the store: several tokens at once, revoke, hashes only, embedded development tokens, `/mcp`
and the `seatwire token` commands.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, cast

import fakeredis
import pytest
import redis
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tests.auth import bearer, seat_token
from workers import bootstrap
from workers.celery_app import create_app
from workers.cli import cli
from workers.ingress.app import create_ingress
from workers.settings import EMBEDDED_TOKEN, Settings
from workers.stores import keys
from workers.stores.tokens import TokenRefused, Tokens, dev_token, token_hash

TOKEN = "test-operator-token"
OPERATOR = bearer(TOKEN)
AUTH_ERRORS = {"unauthorized", "wrong_seat", "seat_only", "operator_only"}

# The routes a seat calls as itself: only that seat's token (workers/ingress/v1.py).
SEAT_ROUTES = {
    ("POST", "/v1/seats/{seat}/work"),
    ("GET", "/v1/seats/{seat}/updates"),
    ("POST", "/v1/seats/{seat}/updates/ack"),
    ("POST", "/v1/seats/{seat}/turns/{turn}/outcome"),
    ("POST", "/v1/seats/{seat}/cost"),
    ("GET", "/v1/seats/{seat}/cost"),
    ("GET", "/v1/seats/{seat}/backlog"),
    ("POST", "/v1/seats/{seat}/backlog/{item}/done"),
    ("POST", "/v1/seats/{seat}/claims/{item}"),
    ("DELETE", "/v1/seats/{seat}/claims/{item}"),
    ("GET", "/v1/seats/{seat}/claims/{item}"),
    ("POST", "/v1/seats/{seat}/tools/{name}"),
}
# Every other /v1 route: only an operator token.
OPERATOR_ROUTES = {
    ("GET", "/v1/work/{tracking_id}"),
    ("GET", "/v1/ledger"),
    ("GET", "/v1/trace/{delivery_id:path}"),
    ("POST", "/v1/events"),
    ("POST", "/v1/objectives/{key}/samples"),
    ("GET", "/v1/objectives"),
    ("GET", "/v1/objectives/{key}/samples"),
    ("GET", "/v1/steward/audit"),
    ("POST", "/v1/steward/overrides"),
    ("GET", "/v1/steward/overrides"),
    ("GET", "/v1/seats/{seat}/status"),
    ("POST", "/v1/seats/{seat}/pause"),
    ("POST", "/v1/seats/{seat}/resume"),
    ("POST", "/v1/seats/{seat}/run-now"),
    ("POST", "/v1/project/start"),
    ("POST", "/v1/project/pause"),
    ("POST", "/v1/project/resume"),
    ("POST", "/v1/project/announcements"),
    # The ask record (workers/ingress/asks.py); its answer route takes an answer link too.
    ("GET", "/v1/asks"),
    ("GET", "/v1/asks/{ask_id}"),
    ("POST", "/v1/asks/{ask_id}/answer"),
    ("GET", "/v1/asks/{ask_id}/answer"),
    ("GET", "/v1/consents"),
    ("POST", "/v1/consents/{consent_id}/revoke"),
    ("POST", "/v1/seats/{seat}/asks/release"),
}
# The decisions' HTTP routes (workers/ingress/decisions.py) are the operator's too, whatever
# they are: people read directions and vote over them.
DECISIONS = re.compile(r"^/v1/decisions(/|$)")


def v1_routes(api: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path) of the app under /v1, from its routes (included routers too)."""
    found: set[tuple[str, str]] = set()

    def walk(routes: list[Any]) -> None:
        for route in routes:
            if isinstance(route, APIRoute):
                if route.path.startswith("/v1"):
                    assert route.methods is not None  # an APIRoute always has its methods
                    found.update((m, route.path) for m in route.methods)
            elif hasattr(route, "original_router"):  # FastAPI's lazily included router
                walk(route.original_router.routes)
            elif hasattr(route, "routes"):
                walk(route.routes)

    walk(api.routes)
    return found


# Routes with a token of their own, neither a seat's nor an operator's; their tests check it
# (tests/workers/test_alerts.py: the alerts token only; a seat's or the operator's refused).
OWN_TOKEN_ROUTES = {("POST", "/v1/alerts/alertmanager")}


def is_operator(route: tuple[str, str]) -> bool:
    return route in OPERATOR_ROUTES or bool(DECISIONS.match(route[1]))


def concrete(path: str, seat: str = "scout") -> str:
    """The path with its parameters filled: the seat, and `x` for the rest."""
    path = path.replace("{seat}", seat)
    return re.sub(r"\{[^}]+\}", "x", path)


def dump(r: redis.Redis) -> dict[bytes, bytes | None]:
    return {k: r.dump(k) for k in sorted(r.scan_iter())}


@pytest.fixture
def api(redis_client: redis.Redis, redis_url: str, tmp_path: Any) -> FastAPI:
    settings = Settings(redis_url=redis_url, api_token=TOKEN, outbox_path=tmp_path / "o.jsonl")
    app = create_app(settings, register=False)
    return create_ingress(bootstrap.build_container(settings, app=app), app)


@pytest.fixture
def client(api: FastAPI) -> Iterator[TestClient]:
    with TestClient(api) as c:
        yield c


def test_every_v1_route_has_a_role(api: FastAPI) -> None:
    """A /v1 route in neither list is a route nobody decided the role of: it fails here."""
    routes = v1_routes(api)
    assert len(routes) >= len(SEAT_ROUTES | OPERATOR_ROUTES)
    unlisted = sorted(
        r
        for r in routes
        if r not in SEAT_ROUTES and r not in OWN_TOKEN_ROUTES and not is_operator(r)
    )
    assert unlisted == [], (
        f"give these routes a role (SEAT_ROUTES, OPERATOR_ROUTES or OWN_TOKEN_ROUTES): {unlisted}"
    )
    assert routes >= SEAT_ROUTES and routes >= OPERATOR_ROUTES and routes >= OWN_TOKEN_ROUTES


def _passes(resp: Any) -> bool:
    """Past auth: the route itself answered (any status but auth's own refusals)."""
    if resp.status_code == 401:
        return False
    if resp.status_code == 403:
        try:
            return resp.json().get("error") not in AUTH_ERRORS
        except ValueError:
            return True
    return True


def test_only_the_right_role_gets_through_and_a_refusal_writes_nothing(
    api: FastAPI, client: TestClient, redis_client: redis.Redis
) -> None:
    """Each route with no token, a wrong one, the other seat's, the operator's and the right
    one: the four refusals are 401/403 and leave Redis as it was; the right one passes."""
    scout, tally = seat_token(redis_client, "scout"), seat_token(redis_client, "tally")
    issued_operator, _ = Tokens(redis_client).issue("operator", label="ops", now_ms=1)
    for method, path in sorted(v1_routes(api) - OWN_TOKEN_ROUTES):
        url = concrete(path)
        seat_route = (method, path) in SEAT_ROUTES
        right = [bearer(scout)] if seat_route else [OPERATOR, bearer(issued_operator)]
        wrong: list[tuple[dict[str, str], int, str]] = [
            ({}, 401, "unauthorized"),
            (bearer("swt_not-a-token"), 401, "unauthorized"),
            (bearer(dev_token(TOKEN, "scout")), 401, "unauthorized"),  # embedded only
        ]
        if seat_route:
            wrong += [(bearer(tally), 403, "wrong_seat"), (OPERATOR, 403, "seat_only")]
            wrong += [(bearer(issued_operator), 403, "seat_only")]
        else:
            wrong += [(bearer(scout), 403, "operator_only"), (bearer(tally), 403, "operator_only")]
        body: dict[str, Any] | None = {} if method == "POST" else None
        for headers, status, error in wrong:
            before = dump(redis_client)
            resp = client.request(method, url, headers=headers, json=body)
            shown = f"{method} {url} with {headers}: {resp.status_code} {resp.text}"
            assert (resp.status_code, resp.json()["error"]) == (status, error), shown
            assert dump(redis_client) == before, f"a refusal wrote to Redis: {shown}"
        for headers in right:
            resp = client.request(method, url, headers=headers, json=body)
            assert _passes(resp), f"{method} {url}: {resp.status_code} {resp.text}"


def test_a_seat_token_is_for_its_seat_by_any_alias(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """A seat's token opens its routes named by member id or alias; an unknown seat in the
    path is not the token's seat (403)."""
    scout = bearer(seat_token(redis_client, "scout"))
    assert client.get("/v1/seats/scout/updates", headers=scout).status_code == 200
    assert client.get("/v1/seats/U0SCOUT/updates", headers=scout).status_code == 200
    nobody = client.get("/v1/seats/nobody/updates", headers=scout)
    assert (nobody.status_code, nobody.json()["error"]) == (403, "wrong_seat")


def test_several_tokens_at_once_and_revoke_ends_one(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """Two tokens of one seat and the bootstrap operator token with an issued one are all
    valid at once; revoking one ends it on the next request and leaves the others."""
    store = Tokens(redis_client)
    old, old_record = store.issue("seat", seat_id="scout", label="old", now_ms=1)
    new, _ = store.issue("seat", seat_id="scout", label="new", now_ms=2)
    ops, ops_record = store.issue("operator", label="ops", now_ms=3)
    for token in (old, new):
        assert client.get("/v1/seats/scout/updates", headers=bearer(token)).status_code == 200
    for token in (TOKEN, ops):
        assert client.get("/v1/ledger", headers=bearer(token)).status_code == 200
    assert store.revoke(old_record.prefix).label == "old"
    assert client.get("/v1/seats/scout/updates", headers=bearer(old)).status_code == 401
    assert client.get("/v1/seats/scout/updates", headers=bearer(new)).status_code == 200
    store.revoke(ops_record.hash[:6])
    assert client.get("/v1/ledger", headers=bearer(ops)).status_code == 401
    assert client.get("/v1/ledger", headers=OPERATOR).status_code == 200  # the bootstrap one
    assert [r.label for r in store.list()] == ["new"]


def test_revoke_refuses_an_unknown_or_ambiguous_prefix(redis_client: redis.Redis) -> None:
    store = Tokens(redis_client)
    records = [store.issue("seat", seat_id="scout", now_ms=n)[1] for n in range(40)]
    before = dump(redis_client)
    shared = next(a.hash[:1] for a in records if sum(b.hash[:1] == a.hash[:1] for b in records) > 1)
    for prefix in ("", "   ", shared, "zz-not-hex"):
        with pytest.raises(TokenRefused):
            store.revoke(prefix)
    assert dump(redis_client) == before


def test_tokens_are_stored_hashed(redis_client: redis.Redis) -> None:
    """Only the sha256 of a token is in Redis: the token itself is nowhere, key or value."""
    store = Tokens(redis_client)
    raw = [
        store.issue("seat", seat_id="scout", label="a", now_ms=1)[0],
        store.issue("operator", label="b", now_ms=2)[0],
    ]
    everything = b"".join(
        k + b"".join(f + v for f, v in cast("dict[bytes, bytes]", redis_client.hgetall(k)).items())
        for k in cast("Iterator[bytes]", redis_client.scan_iter())
    )
    for token in raw:
        assert token.encode() not in everything
        assert redis_client.hexists(keys.TOKENS, token_hash(token))
    stored = [json.loads(v) for v in redis_client.hvals(keys.TOKENS)]
    assert sorted(s["role"] for s in stored) == ["operator", "seat"]
    assert all(set(s) == {"role", "seatId", "label", "issuedAtMs"} for s in stored)


def test_embedded_dev_tokens_work_only_in_embedded_mode(tmp_path: Any) -> None:
    """Embedded, each seat's `dev_token(EMBEDDED_TOKEN, seat)` is that seat's token (its
    routes only) and EMBEDDED_TOKEN the operator's; on a Redis the same tokens are 401 (the
    test above)."""
    settings = Settings(outbox_path=tmp_path / "o.jsonl")
    assert settings.embedded
    app = create_app(settings, register=False)
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    api = create_ingress(bootstrap.build_container(settings, client=client, app=app), app)
    scout = bearer(dev_token(EMBEDDED_TOKEN, "scout"))
    with TestClient(api) as c:
        assert c.get("/v1/seats/scout/updates", headers=scout).status_code == 200
        assert c.get("/v1/seats/tally/updates", headers=scout).json()["error"] == "wrong_seat"
        assert c.get("/v1/ledger", headers=scout).json()["error"] == "operator_only"
        assert c.get("/v1/ledger", headers=bearer(EMBEDDED_TOKEN)).status_code == 200
        other_key = bearer(dev_token("another-key", "scout"))
        assert c.get("/v1/seats/scout/updates", headers=other_key).status_code == 401


MCP_PING = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_mcp_takes_the_seat_token_and_refuses_the_rest(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """`/mcp` with a seat's token passes (a seat header naming the same seat too); a header
    naming another seat is 403 `wrong_seat`, the operator token 403 `seat_only`, none 401;
    a refusal writes nothing."""
    scout = bearer(seat_token(redis_client, "scout"))

    def post(headers: dict[str, str]) -> Any:
        return client.post("/mcp", json=MCP_PING, headers={**MCP_ACCEPT, **headers})

    assert _passes(post(scout))
    assert _passes(post({**scout, "X-Seatwire-Seat": "Scout"}))
    before = dump(redis_client)
    for headers, status, error in [
        ({**scout, "X-Seatwire-Seat": "tally"}, 403, "wrong_seat"),
        (OPERATOR, 403, "seat_only"),
        ({**OPERATOR, "X-Seatwire-Seat": "scout"}, 403, "seat_only"),
        ({"X-Seatwire-Seat": "scout"}, 401, "unauthorized"),
        (bearer("swt_nope"), 401, "unauthorized"),
    ]:
        resp = post(headers)
        assert (resp.status_code, resp.json()["error"]) == (status, error), headers
    assert dump(redis_client) == before


runner = CliRunner()


def test_the_token_commands_issue_list_and_revoke(
    monkeypatch: pytest.MonkeyPatch, redis_client: redis.Redis, redis_url: str
) -> None:
    """`issue` prints the token once; `list` shows hash prefixes and never a token;
    `revoke` ends one and refuses an unknown prefix."""
    monkeypatch.setenv("SEATWIRE_REDIS_URL", redis_url)
    monkeypatch.setenv("SEATWIRE_API_TOKEN", TOKEN)
    done = runner.invoke(cli, ["token", "issue", "--seat", "U0SCOUT", "--label", "ci", "--json"])
    assert done.exit_code == 0, done.output
    issued = json.loads(done.output)
    assert (issued["role"], issued["seatId"], issued["label"]) == ("seat", "scout", "ci")
    assert Tokens(redis_client).find(issued["token"]) is not None
    assert runner.invoke(cli, ["token", "issue", "--operator"]).exit_code == 0
    assert runner.invoke(cli, ["token", "issue"]).exit_code == 2
    assert runner.invoke(cli, ["token", "issue", "--seat", "nobody"]).exit_code == 2
    listed = runner.invoke(cli, ["token", "list", "--json"])
    rows = json.loads(listed.output)
    assert [r["role"] for r in rows] == ["seat", "operator"]
    assert issued["token"] not in listed.output
    assert runner.invoke(cli, ["token", "revoke", "ffffffffffffffff0"]).exit_code == 2
    gone = runner.invoke(cli, ["token", "revoke", issued["hashPrefix"]])
    assert gone.exit_code == 0, gone.output
    assert Tokens(redis_client).find(issued["token"]) is None
    assert runner.invoke(cli, ["token", "dev"]).exit_code == 2  # not embedded


def test_the_dev_command_prints_each_seats_token(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SEATWIRE_REDIS_URL", "SEATWIRE_BROKER_URL", "SEATWIRE_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    done = runner.invoke(cli, ["token", "dev", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["scout"] == dev_token(EMBEDDED_TOKEN, "scout")
