"""`/v1/seats/{seat}/cost` against a real Redis: a frame is recorded once with its charge,
every refusal leaves no key behind, and the read sums what was charged and what was shadowed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from tests.auth import as_seat, as_seats
from workers import bootstrap
from workers.celery_app import create_app
from workers.ingress.app import create_ingress
from workers.settings import Settings

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
URL = "/v1/seats/scout/cost"
NOW = int(time.time() * 1000)


def _frame(**fields: Any) -> dict[str, Any]:
    return {
        "costMicros": 1500,
        "enforcement": "on",
        "shadowCostMicros": None,
        "quotaSource": "ledger",
        "objective": "activation",
        "atMs": NOW,
        **fields,
    }


@pytest.fixture
def client(redis_client: redis.Redis, redis_url: str, tmp_path: Any) -> Iterator[TestClient]:
    settings = Settings(redis_url=redis_url, api_token=TOKEN, outbox_path=tmp_path / "o.jsonl")
    app = create_app(settings, register=False)
    with TestClient(create_ingress(bootstrap.build_container(settings, app=app), app)) as c:
        as_seats(c)
        yield c


def _cost_keys(r: redis.Redis) -> list[bytes]:
    return list(r.scan_iter(match="sw:cost*"))


def test_a_frame_is_recorded_with_its_charge(client: TestClient) -> None:
    """A frame under `on` answers 201 `recorded` with its cost as the charge."""
    resp = client.post(URL, json=_frame(costMicros="1500", turnId="t1"), headers=AUTH)
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body["status"] == "recorded" and body["frameId"] == "turn:t1"
    assert body["chargeMicros"] == 1500 and body["frame"]["costMicros"] == 1500


def test_the_same_frame_again_is_a_duplicate(client: TestClient) -> None:
    """Posting an identical frame without a turnId again answers 200 `duplicate`, one frame."""
    first = client.post(URL, json=_frame(), headers=AUTH).json()
    again = client.post(URL, json=_frame(costMicros="1500"), headers=AUTH)
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    assert again.json()["frameId"] == first["frameId"]
    assert len(client.get(URL, headers=AUTH).json()["frames"]) == 1


def test_a_turn_id_with_other_content_is_a_conflict(client: TestClient) -> None:
    """The same turnId with another cost answers 409 and keeps the first frame."""
    client.post(URL, json=_frame(turnId="t1"), headers=AUTH)
    resp = client.post(URL, json=_frame(turnId="t1", costMicros=9), headers=AUTH)
    assert resp.status_code == 409 and resp.json()["error"] == "frame_conflict"
    assert client.get(URL, headers=AUTH).json()["spendMicros"] == 1500


def test_an_unknown_enforcement_is_recorded_as_null_and_never_charged(client: TestClient) -> None:
    """`enforcement: "ON"` reads as null: recorded, charge 0, no spend."""
    resp = client.post(URL, json=_frame(enforcement="ON"), headers=AUTH)
    assert resp.status_code == 201
    assert resp.json()["frame"]["enforcement"] is None and resp.json()["chargeMicros"] == 0
    assert client.get(URL, headers=AUTH).json()["spendMicros"] == 0


def test_a_shadow_cost_is_never_a_charge(client: TestClient) -> None:
    """A shadow frame charges nothing, and its shadow cost shows only as `shadowMicros`."""
    shadow = _frame(enforcement="shadow", costMicros=None, shadowCostMicros="4000")
    assert client.post(URL, json=shadow, headers=AUTH).json()["chargeMicros"] == 0
    read = client.get(URL, headers=AUTH).json()
    assert read["spendMicros"] == 0 and read["shadowMicros"] == 4000


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("costMicros", 1.0),
        ("costMicros", 1.5),
        ("costMicros", True),
        ("costMicros", "1.5"),
        ("costMicros", "1e6"),
        ("costMicros", -1),
        ("costMicros", "-1"),
        ("shadowCostMicros", 2.0),
        ("shadowCostMicros", -5),
        ("atMs", "123"),
        ("atMs", None),
    ],
)
def test_bad_money_is_refused_naming_the_field(
    client: TestClient, redis_client: redis.Redis, field: str, value: object
) -> None:
    """A float, bool, non-integer string or negative amount is a 422 naming the field."""
    resp = client.post(URL, json=_frame(**{field: value}), headers=AUTH)
    assert resp.status_code == 422, resp.text
    assert [d["field"] for d in resp.json()["detail"]] == [field]
    assert _cost_keys(redis_client) == []


@pytest.mark.parametrize(
    ("kwargs", "status"),
    [
        ({"content": b"{not json", "headers": {"Content-Type": "application/json"}}, 422),
        ({"content": b"[1, 2]", "headers": {"Content-Type": "application/json"}}, 422),
        ({"content": b"costMicros=1", "headers": {"Content-Type": "text/plain"}}, 415),
        ({"content": b"x" * 2_000_000, "headers": {"Content-Type": "application/json"}}, 413),
        ({"json": _frame(seatId="somebody-else")}, 422),
        ({"json": _frame(atMs=NOW - 63 * 86_400_000)}, 422),
    ],
)
def test_every_refusal_writes_nothing(
    client: TestClient, redis_client: redis.Redis, kwargs: dict[str, Any], status: int
) -> None:
    """Bad JSON, a wrong content type, an oversize body, another seat or a frame older than
    retention is refused and leaves no cost key."""
    headers = {**AUTH, **kwargs.pop("headers", {})}
    resp = client.post(URL, headers=headers, **kwargs)
    assert resp.status_code == status, resp.text
    assert _cost_keys(redis_client) == []


def test_an_unknown_seat_is_403_and_writes_nothing(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """A seat the org does not know is no seat a token is valid for: 403 on write and read,
    and nothing is written."""
    scout = as_seat("scout")
    assert client.post("/v1/seats/nobody/cost", json=_frame(), headers=scout).status_code == 403
    assert client.get("/v1/seats/nobody/cost", headers=scout).status_code == 403
    assert _cost_keys(redis_client) == []


def test_no_token_is_401(client: TestClient, redis_client: redis.Redis) -> None:
    """Without the bearer token the write is 401 and writes nothing."""
    assert client.post(URL, json=_frame()).status_code == 401
    assert _cost_keys(redis_client) == []


def test_the_read_filters_by_objective_and_window(client: TestClient) -> None:
    """The read lists frames newest first and sums the objective's charges in the window."""
    for i, (objective, enforcement) in enumerate(
        [("activation", "on"), ("activation", "off"), ("retention", "on"), ("activation", "on")]
    ):
        frame = _frame(turnId=f"t{i}", atMs=NOW + i, objective=objective, enforcement=enforcement)
        assert client.post(URL, json=frame, headers=AUTH).status_code == 201
    every = client.get(URL, headers=AUTH).json()
    assert [f["turnId"] for f in every["frames"]] == ["t3", "t2", "t1", "t0"]
    assert every["spendMicros"] == 4500
    params: dict[str, str | int] = {
        "objective": "activation",
        "sinceMs": NOW + 1,
        "untilMs": NOW + 4,
        "limit": 1,
    }
    one = client.get(URL, params=params, headers=AUTH).json()
    assert [f["turnId"] for f in one["frames"]] == ["t3"]
    assert one["spendMicros"] == 1500 and one["shadowMicros"] == 0


def test_a_window_ending_before_it_starts_is_refused(client: TestClient) -> None:
    """`untilMs` before `sinceMs` is a 422 naming untilMs."""
    resp = client.get(URL, params={"sinceMs": 10, "untilMs": 5}, headers=AUTH)
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["field"] == "untilMs"
