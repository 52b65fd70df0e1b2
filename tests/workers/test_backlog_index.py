"""The backlog's owner index (issue 27): an item is found by its id alone in one lookup, at any
number of seats. `backlog_add` writes the index with the item, a close keeps it, and backlogs
written before the index existed are indexed once (as the ingress starts, or on the first
miss of a seat set never indexed), never again. Round trips are counted, not timed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from contracts.backlog import BacklogEntry
from contracts.tools import CoordinateIssue
from tests.auth import as_seats, seat_auth
from tests.redis_spy import round_trips
from workers import bootstrap
from workers.celery_app import create_app
from workers.ingress.app import create_ingress
from workers.settings import BUNDLED_ORG, Settings
from workers.stores import keys
from workers.stores.backlog import INDEXED_FIELD, REVISION_FIELD, Backlog
from workers.stores.claims import Claims
from workers.stores.issues import Issues

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LEASE = 60_000
NOW = 1_000_000


def _entry(
    item_id: str, seat: str, claim: dict[str, Any] | None = None, *, route: str = "COLLABORATE"
) -> BacklogEntry:
    return BacklogEntry.model_validate(
        {
            "id": item_id,
            "seatId": seat,
            "objectiveKey": "activation",
            "title": f"item {item_id}",
            "route": route if claim is not None else "SELF",
            "addedAtMs": 1_000,
            "claim": claim,
        }
    )


def _write_unindexed(r: redis.Redis, entry: BacklogEntry) -> None:
    """The entry as the store wrote it before the owner index existed: its JSON, the open
    zsets and the revision, no index entry."""
    r.hset(keys.backlog(entry.seat_id), entry.id, entry.model_dump_json(by_alias=True))
    r.hincrby(keys.backlog(entry.seat_id), REVISION_FIELD, 1)
    r.zadd(keys.backlog_open(entry.seat_id), {entry.id: entry.added_at_ms})
    r.zadd(keys.backlog_open_for(entry.seat_id, entry.objective_key), {entry.id: 1_000})


def _seats(n: int) -> list[str]:
    return [f"seat{i:05d}" for i in range(n)]


def _org(path: Path, n: int) -> Path:
    members = [{"id": "ops", "displayName": "Ops"}]
    members += [{"id": s, "displayName": f"Seat {s}"} for s in _seats(n)]
    seats = [{"memberId": s, "operatorId": "ops"} for s in _seats(n)]
    path.write_text(json.dumps({"members": members, "seats": seats}))
    return path


# ------------------------------------------------------------------------ the store


def test_an_added_item_is_indexed_and_stays_indexed_when_done(redis_client: redis.Redis) -> None:
    store = Backlog(redis_client)
    store.add(_entry("stw_1", "seat00002", {"holderId": "seat00002"}))
    assert store.owner("stw_1") == "seat00002"
    assert store.done("seat00002", "stw_1", by="seat00002", now_ms=NOW).status == "done"
    assert store.owner("stw_1") == "seat00002"
    found = store.find("stw_1", version="v", seats=lambda: pytest.fail("no migration"))
    assert found is not None and found.state == "done"


def test_the_first_seat_an_id_was_added_to_keeps_it(redis_client: redis.Redis) -> None:
    store = Backlog(redis_client)
    assert store.add(_entry("stw_1", "seat00005")).status == "added"
    assert store.add(_entry("stw_1", "seat00001")).status == "added"  # another seat's backlog
    assert store.owner("stw_1") == "seat00005"


def test_a_duplicate_add_writes_no_index(redis_client: redis.Redis) -> None:
    store = Backlog(redis_client)
    _write_unindexed(redis_client, _entry("stw_1", "seat00001"))
    assert store.add(_entry("stw_1", "seat00001")).status == "duplicate"
    assert store.owner("stw_1") is None


def test_find_is_one_lookup_and_one_read_at_any_number_of_seats(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two round trips for an item found, one for an item that is nowhere, with 10 or
    5,000 seats in the org: the seat list is never read once the seat set was indexed."""
    store = Backlog(redis_client)
    for n in (10, 5_000):
        redis_client.flushdb()
        seats = _seats(n)
        store.add(_entry("stw_x", seats[-1], {"holderId": seats[-1]}))
        assert store.ensure_indexed(seats, f"v{n}") == 0
        trips = round_trips(redis_client, monkeypatch)

        def no_seats() -> list[str]:
            raise AssertionError("the seats were listed")

        found = store.find("stw_x", version=f"v{n}", seats=no_seats)
        assert found is not None and found.seat_id == seats[-1]
        assert trips == [["HMGET"], ["HGET"]]
        trips.clear()
        assert store.find("stw_nowhere", version=f"v{n}", seats=no_seats) is None
        assert trips == [["HMGET"]]
        monkeypatch.undo()


def test_old_items_are_indexed_once_on_the_first_miss(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Backlogs written before the index: the first miss of the seat set indexes every item
    of its seats (the first seat in sorted order keeps an id two hold), marks the seat set,
    and answers; later misses read one field; a new seat set is indexed once more."""
    store = Backlog(redis_client)
    seats = _seats(1_200)  # more than one chunk of the migration
    for i, seat in enumerate(seats[::100]):
        _write_unindexed(redis_client, _entry(f"stw_old{i}", seat, {"holderId": seat}))
    _write_unindexed(redis_client, _entry("stw_twice", seats[7]))
    _write_unindexed(redis_client, _entry("stw_twice", seats[3]))
    listed: list[int] = []

    def seat_list() -> list[str]:
        listed.append(1)
        return seats

    found = store.find("stw_old5", version="v1", seats=seat_list)
    assert found is not None and found.seat_id == seats[500]
    assert listed == [1]
    assert store.owner("stw_twice") == seats[3]
    assert all(store.owner(f"stw_old{i}") == seats[i * 100] for i in range(12))
    assert redis_client.hget(keys.BACKLOG_OWNERS, INDEXED_FIELD + "v1") == b"1200"
    trips = round_trips(redis_client, monkeypatch)
    assert store.find("stw_nowhere", version="v1", seats=seat_list) is None
    assert listed == [1] and trips == [["HMGET"]]
    monkeypatch.undo()
    assert store.find("stw_nowhere", version="v2", seats=seat_list) is None
    assert listed == [1, 1]
    assert store.ensure_indexed(seats, "v2") is None  # marked: nothing more to do


def test_an_org_without_backlogs_is_left_as_it_was(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No seat has a backlog: indexing them writes nothing (a refused request must leave a
    fresh database empty), and the process remembers it: a miss is one lookup."""
    store = Backlog(redis_client)
    seats = _seats(50)
    assert store.ensure_indexed(seats, "v") == 0
    assert redis_client.keys("*") == []
    trips = round_trips(redis_client, monkeypatch)
    assert store.ensure_indexed(seats, "v") is None
    assert store.find("stw_nowhere", version="v", seats=lambda: pytest.fail("listed")) is None
    assert trips == [["HMGET"]] and redis_client.keys("*") == []


def test_a_reserved_id_is_never_an_item(redis_client: redis.Redis) -> None:
    store = Backlog(redis_client)
    store.ensure_indexed(["seat00001"], "v")
    assert store.owner(INDEXED_FIELD + "v") is None
    assert store.find(INDEXED_FIELD + "v", version="v", seats=list) is None


# ------------------------------------------------------------------ the claim routes


def _ingress(redis_url: str, tmp_path: Path, org: Path | None) -> Any:
    settings = Settings(
        redis_url=redis_url,
        api_token=TOKEN,
        outbox_path=tmp_path / "o.jsonl",
        claim_lease_ms=LEASE,
        org_file=BUNDLED_ORG if org is None else org,
    )
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    return container, create_ingress(container, app, clock_ms=lambda: NOW)


@pytest.fixture
def bundled(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[Any]:
    """The bundled org's ingress, with an item of scout's claimed through issue #41 by tally
    (`coordinate_issue`), written before the owner index existed."""
    entry = _entry("stw_issue", "scout", {"holderId": "scout", "contributors": ["tally"]})
    wire = entry.model_dump(by_alias=True)
    wire["claim"]["issueNumber"] = 41
    _write_unindexed(redis_client, BacklogEntry.model_validate(wire))
    claimed = Issues(redis_client).coordinate(
        "tally",
        CoordinateIssue.model_validate(
            {"issue_number": 41, "action": "claim", "client_request_id": "c1"}
        ),
        now_ms=NOW,
    )
    assert claimed.verb == "claimed"
    container, api = _ingress(redis_url, tmp_path, None)
    with TestClient(api) as c:
        as_seats(c)
        yield container, c


def test_an_issue_claimed_item_written_before_the_index_is_found_in_one_lookup(
    bundled: Any, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ingress indexed the old backlog as it started: the item (whose claim, on an issue,
    records no owner of its own) is found in one lookup of the index and one read."""
    container, c = bundled
    assert Backlog(redis_client).owner("stw_issue") == "scout"
    assert Claims(redis_client).owner("stw_issue") is None  # the issue door records none
    trips = round_trips(container.redis, monkeypatch)
    resp = c.get("/v1/seats/tally/claims/stw_issue", headers=AUTH)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["ownerId"] == "scout" and body["claim"]["holderId"] == "tally"
    assert body["issueNumber"] == 41
    # The index, the item; then the claim's subject (the issue's hash) and its history.
    assert trips == [["HMGET"], ["HGET"], ["HMGET"], ["XRANGE"]]


def test_an_item_on_a_seat_no_longer_in_the_org_is_found_by_its_claim(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """An item written before the index on a seat that has left the org since, whose claim
    recorded its owner: found there, as before the index."""
    entry = _entry("stw_gone", "departed", {"holderId": "departed", "contributors": ["tally"]})
    _write_unindexed(redis_client, entry)
    redis_client.zadd(keys.backlog_open("departed"), {"stw_gone": 1_000})
    Claims(redis_client).take(
        "stw_gone", "departed", owner_id="departed", now_ms=NOW - 2 * LEASE, lease_ms=LEASE
    )
    _container, api = _ingress(redis_url, tmp_path, None)
    with TestClient(api) as c:
        as_seats(c)
        resp = c.get("/v1/seats/tally/claims/stw_gone", headers=AUTH)
        assert resp.status_code == 200, resp.text
        assert resp.json()["ownerId"] == "departed"
        assert c.get("/v1/seats/tally/claims/stw_nowhere", headers=AUTH).status_code == 404


def _claim_trips(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, n: int, mp: pytest.MonkeyPatch
) -> list[list[list[str]]]:
    """The round trips of GET, POST and DELETE on a claim, with `n` seats in the org."""
    redis_client.flushdb()
    seats = _seats(n)
    owner, taker = seats[n // 2], seats[-1]
    redis_client.hset(keys.issue(7), mapping={"owner": "", "generation": 1})
    claim = {"holderId": owner, "contributors": [taker], "issueNumber": 7}
    Backlog(redis_client).add(_entry("stw_c", owner, claim))
    container, api = _ingress(redis_url, tmp_path / str(n), _org(tmp_path / f"org{n}.json", n))
    seen = []
    headers = seat_auth(container.redis, taker)
    with TestClient(api) as c:
        for method in ("get", "post", "delete"):
            trips = round_trips(container.redis, mp)
            resp = c.request(method, f"/v1/seats/{taker}/claims/stw_c", headers=headers)
            assert resp.status_code == 200, resp.text
            seen.append(list(trips))
            mp.undo()
    return seen


def test_the_claim_routes_send_the_same_at_3_and_3000_seats(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each claim route sends the same round trips, command for command, whatever the size
    of the org (it read one backlog per seat before the index)."""
    (tmp_path / "3").mkdir()
    (tmp_path / "3000").mkdir()
    small = _claim_trips(redis_client, redis_url, tmp_path, 3, monkeypatch)
    large = _claim_trips(redis_client, redis_url, tmp_path, 3_000, monkeypatch)
    assert small == large
    found = [["HMGET"], ["HGET"]]  # the owner index, the item
    assert small == [
        [*found, ["HMGET"], ["XRANGE"]],  # GET: the claim, its history
        [*found, ["EVALSHA"]],  # POST: claim_take
        [*found, ["EVALSHA"]],  # DELETE: claim_release
    ]
