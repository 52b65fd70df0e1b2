"""`POST /v1/steward/overrides` and `GET /v1/steward/overrides` against a real Redis: 201
recorded (and one audit line), 200 duplicate, and each refusal a 4xx naming its field that
writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis
from fastapi.testclient import TestClient

from workers import bootstrap
from workers.celery_app import create_app
from workers.ingress.app import create_ingress
from workers.settings import Settings

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOW = 1_700_000_000_000
URL = "/v1/steward/overrides"
REVIEW, INVOICES = "review-turnaround", "invoices-paid-on-time"
NUDGE = "Nudge reviewers on pull requests waiting over a day"


@pytest.fixture
def client(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(redis_url=redis_url, api_token=TOKEN, outbox_path=tmp_path / "o.jsonl")
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    with TestClient(create_ingress(container, app, clock_ms=lambda: NOW)) as c:
        yield c


def body(**over: Any) -> dict[str, Any]:
    return {"objective": REVIEW, "candidate": NUDGE, "by": "ava", "reason": "release week", **over}


def snapshot(r: redis.Redis) -> dict[bytes, Any]:
    return {k: r.dump(k) for k in sorted(cast("list[bytes]", r.keys("*")))}


def test_an_override_is_recorded_audited_and_listed(client: TestClient) -> None:
    """201 `recorded` with the override; the audit has one `override` line naming who, why
    and the gates; the listing shows it; the same request again is 200 `duplicate`."""
    resp = client.post(URL, json=body(gates=["wip", "budget"]), headers=AUTH)
    assert resp.status_code == 201, resp.text
    ov = resp.json()["override"]
    assert resp.json()["status"] == "recorded"
    assert ov["gates"] == ["wip", "budget"] and ov["by"] == "ava" and ov["usedBy"] is None
    audit = client.get("/v1/steward/audit", params={"objective": REVIEW}, headers=AUTH).json()
    (line,) = audit["entries"]
    assert line["runId"] == ov["id"] and line["entry"]["kind"] == "override"
    assert line["entry"]["override"] == {
        "id": ov["id"],
        "by": "ava",
        "reason": "release week",
        "gates": ["wip", "budget"],
    }
    again = client.post(URL, json=body(gates=["budget", "wip"]), headers=AUTH)
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    assert again.json()["override"] == ov
    listed = client.get(URL, params={"objective": REVIEW}, headers=AUTH).json()
    assert listed == {"overrides": [ov], "count": 1}
    assert client.get(URL, headers=AUTH).json()["count"] == 1
    audit = client.get("/v1/steward/audit", headers=AUTH).json()
    assert audit["count"] == 1  # the duplicate wrote no second line


@pytest.mark.parametrize(
    ("sent", "status", "error", "field"),
    [
        (body(objective="nope"), 404, "unknown_objective", "objective"),
        (body(objective=INVOICES), 409, "objective_not_active", "objective"),
        (body(by="nobody"), 422, "unknown_member", "by"),
        (body(candidate="Rewrite billing"), 422, "unknown_candidate", "candidate"),
        (body(gates=["honesty"]), 422, "invalid_override", "gates.0"),
        (body(gates=["adoption"]), 422, "invalid_override", "gates.0"),
        (body(gates=[]), 422, "invalid_override", "gates"),
        (body(reason=""), 422, "invalid_override", "reason"),
        (body(reason="x" * 501), 422, "invalid_override", "reason"),
        (body(by=3), 422, "invalid_override", "by"),
        (body(extra=True), 422, "invalid_override", "extra"),
        ({"objective": REVIEW}, 422, "invalid_override", "candidate"),
        ([1, 2], 422, "invalid_override", "(body)"),
    ],
)
def test_each_refusal_names_its_field_and_writes_nothing(
    client: TestClient,
    redis_client: redis.Redis,
    sent: Any,
    status: int,
    error: str,
    field: str,
) -> None:
    """Every refusal is a 4xx with a stable code naming the field, and Redis is unchanged."""
    before = snapshot(redis_client)
    resp = client.post(URL, json=sent, headers=AUTH)
    assert resp.status_code == status, resp.text
    assert resp.json()["error"] == error
    assert field in [d["field"] for d in resp.json()["detail"]]
    assert snapshot(redis_client) == before


def test_a_conflicting_override_is_a_409_that_writes_nothing(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """Another active override of the same candidate: 409 `override_exists`, nothing written."""
    assert client.post(URL, json=body(), headers=AUTH).status_code == 201
    before = snapshot(redis_client)
    resp = client.post(URL, json=body(by="ben", reason="other"), headers=AUTH)
    assert resp.status_code == 409 and resp.json()["error"] == "override_exists"
    assert resp.json()["field"] == "candidate"
    assert snapshot(redis_client) == before


def test_a_body_that_is_not_json_is_a_422(client: TestClient, redis_client: redis.Redis) -> None:
    """Malformed JSON answers 422 `invalid_json` and writes nothing."""
    resp = client.post(URL, content=b"{nope", headers={**AUTH, "Content-Type": "application/json"})
    assert resp.status_code == 422 and resp.json()["error"] == "invalid_json"
    assert redis_client.keys("*") == []


def test_listing_an_unknown_objective_is_a_404(client: TestClient) -> None:
    """The listing refuses an objective the org does not have."""
    resp = client.get(URL, params={"objective": "nope"}, headers=AUTH)
    assert resp.status_code == 404 and resp.json()["error"] == "unknown_objective"


def test_overrides_need_the_token(client: TestClient) -> None:
    """Both routes are behind the bearer token."""
    assert client.post(URL, json=body()).status_code == 401
    assert client.get(URL).status_code == 401
