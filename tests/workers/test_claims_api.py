"""`/v1/seats/{seat}/claims/{item}` against a real Redis: a collaborator takes, renews and
releases a COLLABORATE item's claim, another is held off until the lease lapses, closing the
item releases it, and every refusal writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from contracts.backlog import BacklogEntry
from tests.auth import as_seat, as_seats
from workers import bootstrap
from workers.celery_app import create_app
from workers.ingress.app import create_ingress
from workers.settings import Settings
from workers.stores.backlog import Backlog
from workers.stores.claims import Claims

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LEASE = 60_000
ITEM = "stw_collab"  # on scout's backlog: held by scout, tally a contributor
SOLO = "stw_solo"  # on scout's backlog: scout alone
PLAIN = "stw_self"  # SELF work: no claim


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def _entry(item_id: str, route: str, claim: dict[str, Any] | None) -> BacklogEntry:
    wire: dict[str, Any] = {
        "id": item_id,
        "seatId": "scout",
        "objectiveKey": "activation",
        "title": f"item {item_id}",
        "route": route,
        "addedAtMs": 1_000,
        "claim": claim,
    }
    return BacklogEntry.model_validate(wire)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def client(
    redis_client: redis.Redis, redis_url: str, tmp_path: Any, clock: Clock
) -> Iterator[TestClient]:
    settings = Settings(
        redis_url=redis_url,
        api_token=TOKEN,
        outbox_path=tmp_path / "o.jsonl",
        claim_lease_ms=LEASE,
    )
    app = create_app(settings, register=False)
    ingress = create_ingress(bootstrap.build_container(settings, app=app), app, clock_ms=clock)
    with TestClient(ingress) as c:
        as_seats(c)
        yield c


@pytest.fixture
def backlog(redis_client: redis.Redis) -> Backlog:
    store = Backlog(redis_client)
    store.add(_entry(ITEM, "COLLABORATE", {"holderId": "scout", "contributors": ["tally"]}))
    store.add(_entry(SOLO, "COLLABORATE", {"holderId": "scout"}))
    store.add(_entry(PLAIN, "SELF", None))
    return store


def _url(seat: str, item: str = ITEM) -> str:
    return f"/v1/seats/{seat}/claims/{item}"


def _snapshot(r: redis.Redis) -> dict[bytes, Any]:
    return {k: r.dump(k) for k in sorted(r.scan_iter(match="sw:*"))}


def test_a_contributor_takes_an_unclaimed_item(client: TestClient, backlog: Backlog) -> None:
    """The contributor's POST is 200 `taken` with the claim, found by the item id alone
    (the steward never took it), owned by the seat whose backlog holds it."""
    resp = client.post(_url("tally"), headers=AUTH)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["status"] == "taken"
    assert body["claim"]["holderId"] == "tally" and body["claim"]["ownerId"] == "scout"
    assert body["claim"]["untilMs"] == 1_000_000 + LEASE


def test_the_holder_renews_and_another_is_held_until_it_lapses(
    client: TestClient, backlog: Backlog, clock: Clock, redis_client: redis.Redis
) -> None:
    """After the steward's take, the holder's POST renews; the contributor's is 409
    `claim_held` naming the holder and untilMs (nothing written) until the lease lapses, then
    a takeover; GET shows the new holder and a history naming the previous one."""
    Claims(redis_client).take(ITEM, "scout", owner_id="scout", now_ms=clock.now, lease_ms=LEASE)
    clock.now += 1_000
    renewed = client.post(_url("scout"), headers=AUTH)
    assert renewed.status_code == 200 and renewed.json()["status"] == "renewed"
    until = renewed.json()["claim"]["untilMs"]
    assert until == clock.now + LEASE
    before = _snapshot(redis_client)
    held = client.post(_url("tally"), headers=AUTH)
    assert held.status_code == 409, held.text
    assert held.json()["error"] == "claim_held"
    assert (held.json()["holderId"], held.json()["untilMs"]) == ("scout", until)
    assert _snapshot(redis_client) == before
    clock.now = until
    over = client.post(_url("tally"), headers=AUTH)
    assert over.status_code == 200 and over.json()["status"] == "takeover"
    assert over.json()["claim"]["previousHolderId"] == "scout"
    seen = client.get(_url("scout"), headers=AUTH).json()
    assert seen["claim"]["holderId"] == "tally" and seen["lapsed"] is False
    assert [e["event"] for e in seen["history"]] == ["taken", "renewed", "takeover"]
    assert seen["history"][-1]["previousHolderId"] == "scout"


def test_the_holder_releases_and_another_seat_cannot(
    client: TestClient, backlog: Backlog, redis_client: redis.Redis
) -> None:
    """DELETE by a seat that does not hold the claim is 409 `not_holder` (nothing written);
    by the holder 200 `released`, after which GET shows nobody holding it."""
    client.post(_url("tally"), headers=AUTH)
    before = _snapshot(redis_client)
    refused = client.delete(_url("scout"), headers=AUTH)
    assert refused.status_code == 409 and refused.json()["error"] == "not_holder"
    assert refused.json()["holderId"] == "tally"
    assert _snapshot(redis_client) == before
    released = client.delete(_url("tally"), headers=AUTH)
    assert released.status_code == 200 and released.json()["status"] == "released"
    seen = client.get(_url("tally"), headers=AUTH).json()
    assert seen["claim"] is None and seen["history"][-1]["event"] == "released"
    assert client.delete(_url("tally"), headers=AUTH).json()["status"] == "none"


def test_closing_the_item_releases_its_claim(
    client: TestClient, backlog: Backlog, redis_client: redis.Redis
) -> None:
    """Closing a claimed item (`.../backlog/{item}/done`) releases whoever holds the claim,
    and the closed item can no longer be claimed (409 `item_done`, nothing written)."""
    client.post(_url("tally"), headers=AUTH)
    done = client.post(f"/v1/seats/scout/backlog/{ITEM}/done", headers=AUTH)
    assert done.status_code == 200 and done.json()["status"] == "done"
    claims = Claims(redis_client)
    assert claims.get(ITEM) is None
    last = claims.history(ITEM)[-1]
    assert (last.event, last.seat_id, last.previous_holder_id) == ("released", "scout", "tally")
    before = _snapshot(redis_client)
    again = client.post(_url("tally"), headers=AUTH)
    assert again.status_code == 409 and again.json()["error"] == "item_done"
    assert _snapshot(redis_client) == before


@pytest.mark.parametrize(
    ("method", "seat", "item", "status", "error"),
    [
        ("post", "nobody", ITEM, 403, "wrong_seat"),
        ("delete", "nobody", ITEM, 403, "wrong_seat"),
        ("get", "nobody", ITEM, 403, "wrong_seat"),
        ("post", "tally", "stw_nowhere", 404, "unknown_item"),
        ("delete", "tally", "stw_nowhere", 404, "unknown_item"),
        ("get", "tally", "stw_nowhere", 404, "unknown_item"),
        ("post", "scout", PLAIN, 409, "not_claimable"),
        ("delete", "scout", PLAIN, 409, "not_claimable"),
        ("post", "tally", SOLO, 403, "not_a_collaborator"),
    ],
)
def test_every_refusal_writes_nothing(
    client: TestClient,
    backlog: Backlog,
    redis_client: redis.Redis,
    method: str,
    seat: str,
    item: str,
    status: int,
    error: str,
) -> None:
    """An unknown seat is 403 (no token is valid for it), an unknown item 404, an item with
    no claim 409 `not_claimable`, a seat neither holder nor contributor 403
    `not_a_collaborator`; Redis is unchanged by each."""
    before = _snapshot(redis_client)
    headers = as_seat("tally") if seat == "nobody" else AUTH
    resp = client.request(method, _url(seat, item), headers=headers)
    assert resp.status_code == status, resp.text
    assert resp.json()["error"] == error
    assert _snapshot(redis_client) == before


def test_no_token_is_refused(
    client: TestClient, backlog: Backlog, redis_client: redis.Redis
) -> None:
    """Every claims route needs the bearer token (401), and nothing is written."""
    before = _snapshot(redis_client)
    for method in ("get", "post", "delete"):
        assert client.request(method, _url("tally")).status_code == 401
    assert _snapshot(redis_client) == before
