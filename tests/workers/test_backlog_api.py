"""`/v1/seats/{seat}/backlog` against a real Redis: the seat reads its items and revision,
closes an item once, and an unknown seat or item is a 404 that writes nothing."""

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

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
URL = "/v1/seats/scout/backlog"


def _entry(item_id: str, added_at_ms: int) -> BacklogEntry:
    wire: dict[str, Any] = {
        "id": item_id,
        "seatId": "scout",
        "objectiveKey": "activation",
        "title": f"item {item_id}",
        "route": "SELF",
        "addedAtMs": added_at_ms,
    }
    return BacklogEntry.model_validate(wire)


@pytest.fixture
def client(redis_client: redis.Redis, redis_url: str, tmp_path: Any) -> Iterator[TestClient]:
    settings = Settings(redis_url=redis_url, api_token=TOKEN, outbox_path=tmp_path / "o.jsonl")
    app = create_app(settings, register=False)
    with TestClient(create_ingress(bootstrap.build_container(settings, app=app), app)) as c:
        as_seats(c)
        yield c


@pytest.fixture
def backlog(redis_client: redis.Redis) -> Backlog:
    store = Backlog(redis_client)
    store.add(_entry("stw_b", 2_000))
    store.add(_entry("stw_a", 1_000))
    return store


def _snapshot(r: redis.Redis) -> dict[bytes, Any]:
    return {k: r.dump(k) for k in sorted(r.scan_iter(match="sw:backlog*"))}


def test_the_seat_reads_its_open_items_and_revision(client: TestClient, backlog: Backlog) -> None:
    """GET lists the open items oldest first with the revision (one per item added)."""
    resp = client.get(URL, headers=AUTH)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [i["id"] for i in body["items"]] == ["stw_a", "stw_b"] and body["revision"] == 2
    assert body["items"][0]["state"] == "open" and body["items"][0]["seatId"] == "scout"


def test_an_empty_backlog_reads_as_no_items_at_revision_zero(client: TestClient) -> None:
    """A seat with nothing dispatched gets no items and revision 0."""
    assert client.get(URL, headers=AUTH).json() == {"items": [], "count": 0, "revision": 0}


def test_an_item_is_closed_once(client: TestClient, backlog: Backlog) -> None:
    """The first POST .../done answers `done` by the seat; the second `already_done` with the
    same close; the item then shows under `done`, not `open`, and the revision holds."""
    first = client.post(f"{URL}/stw_a/done", headers=AUTH)
    assert first.status_code == 200, first.text
    assert first.json()["status"] == "done" and first.json()["item"]["doneBy"] == "scout"
    again = client.post(f"{URL}/stw_a/done", headers=AUTH)
    assert again.status_code == 200 and again.json()["status"] == "already_done"
    assert again.json()["item"] == first.json()["item"]
    done = client.get(URL, params={"state": "done"}, headers=AUTH).json()
    assert [i["id"] for i in done["items"]] == ["stw_a"] and done["revision"] == 2
    opened = client.get(URL, headers=AUTH).json()
    assert [i["id"] for i in opened["items"]] == ["stw_b"]
    assert len(client.get(URL, params={"state": "all"}, headers=AUTH).json()["items"]) == 2


def test_an_unknown_item_is_a_404_that_writes_nothing(
    client: TestClient, backlog: Backlog, redis_client: redis.Redis
) -> None:
    """Closing an id not on the seat's backlog answers 404 `unknown_item`; Redis is unchanged."""
    before = _snapshot(redis_client)
    resp = client.post(f"{URL}/stw_zzz/done", headers=AUTH)
    assert resp.status_code == 404 and resp.json()["error"] == "unknown_item"
    assert _snapshot(redis_client) == before


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "/v1/seats/nobody/backlog"), ("post", "/v1/seats/nobody/backlog/stw_a/done")],
)
def test_an_unknown_seat_is_a_403_that_writes_nothing(
    client: TestClient, redis_client: redis.Redis, method: str, path: str
) -> None:
    """A seat that is not in the org is no seat a token is valid for: 403 `wrong_seat`, and
    no backlog key appears."""
    resp = client.request(method, path, headers=as_seat("scout"))
    assert resp.status_code == 403 and resp.json()["error"] == "wrong_seat"
    assert _snapshot(redis_client) == {}


def test_a_bad_state_or_no_token_is_refused(client: TestClient, backlog: Backlog) -> None:
    """`state=closed` is a 422 and a request without the bearer token a 401."""
    assert client.get(URL, params={"state": "closed"}, headers=AUTH).status_code == 422
    assert client.get(URL).status_code == 401
    assert client.post(f"{URL}/stw_a/done").status_code == 401
    assert backlog.open_items("scout")[0].id == "stw_a"
