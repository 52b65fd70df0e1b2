"""The objectives API against a real Redis: samples are recorded once, every refusal leaves
Redis untouched, and GET /v1/objectives shows each objective's current gap."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from workers import bootstrap
from workers.celery_app import create_app
from workers.errors import ConfigError
from workers.ingress.app import create_ingress
from workers.org import parse_org
from workers.settings import Settings
from workers.stores import keys

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOW = 1_700_000_000_000
DAY = 86_400_000
URL = "/v1/objectives/review-turnaround/samples"
SAMPLE = {"value": 30, "source": "method", "window": "7d", "atMs": NOW - DAY}


@pytest.fixture
def client(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(redis_url=redis_url, api_token=TOKEN, outbox_path=tmp_path / "o.jsonl")
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    with TestClient(create_ingress(container, app, clock_ms=lambda: NOW)) as c:
        yield c


def _keys(r: redis.Redis) -> set[bytes]:
    return {k for k in r.scan_iter(match=f"{keys.PREFIX}kpi:*")}


def _post(client: TestClient, body: Any, url: str = URL) -> Any:
    return client.post(url, json=body, headers=AUTH)


def test_a_new_sample_is_recorded(client: TestClient, redis_client: redis.Redis) -> None:
    """A valid sample gets 201 with its id and is in both the zset and the id hash."""
    resp = _post(client, SAMPLE)
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body["status"] == "recorded" and body["id"] == f"{NOW - DAY}:method"
    assert body["sample"] == SAMPLE
    assert redis_client.zcard(keys.objective_samples("review-turnaround")) == 1
    assert redis_client.hexists(keys.objective_sample_ids("review-turnaround"), body["id"])


def test_the_same_sample_again_is_a_duplicate(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """Posting the same (atMs, source) with the same content answers 200 duplicate, once stored."""
    _post(client, SAMPLE)
    again = _post(client, {**SAMPLE, "value": 30.0})
    assert again.status_code == 200, again.text
    assert again.json()["status"] == "duplicate"
    assert redis_client.zcard(keys.objective_samples("review-turnaround")) == 1


def test_the_same_id_with_another_value_conflicts(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """Another value for a recorded (atMs, source) is a 409 and the first sample stays."""
    _post(client, SAMPLE)
    resp = _post(client, {**SAMPLE, "value": 31})
    assert resp.status_code == 409
    assert resp.json()["error"] == "sample_conflict" and resp.json()["stored"]["value"] == 30
    stored = client.get(URL, headers=AUTH).json()["samples"]
    assert [s["value"] for s in stored] == [30]


def test_another_source_at_the_same_instant_is_another_sample(client: TestClient) -> None:
    """A human sample at the same atMs as a method one is a separate sample."""
    _post(client, SAMPLE)
    assert _post(client, {**SAMPLE, "source": "human", "value": 29}).status_code == 201
    assert client.get(URL, headers=AUTH).json()["count"] == 2


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**SAMPLE, "source": "guess"}, "source"),
        ({**SAMPLE, "value": "30"}, "value"),
        ({**SAMPLE, "value": True}, "value"),
        ({k: v for k, v in SAMPLE.items() if k != "atMs"}, "atMs"),
        ({k: v for k, v in SAMPLE.items() if k != "value"}, "value"),
        ({**SAMPLE, "atMs": NOW + 5 * 60 * 1000 + 1}, "atMs"),
        ({**SAMPLE, "extra": 1}, "extra"),
        ([SAMPLE], "(body)"),
    ],
)
def test_an_invalid_sample_is_a_422_naming_the_field(
    client: TestClient, redis_client: redis.Redis, body: Any, field: str
) -> None:
    """A wrong, missing or future field is a 422 naming it, and nothing is written."""
    resp = _post(client, body)
    assert resp.status_code == 422, resp.text
    assert [d["field"] for d in resp.json()["detail"]] == [field]
    assert _keys(redis_client) == set()


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
def test_a_non_finite_value_is_refused(
    client: TestClient, redis_client: redis.Redis, literal: bytes
) -> None:
    """NaN or infinity (which Python's json would read) is a 422 on `value`; nothing written."""
    raw = b'{"value": ' + literal + b', "source": "method", "atMs": 1}'
    resp = client.post(URL, content=raw, headers={**AUTH, "Content-Type": "application/json"})
    assert resp.status_code == 422, resp.text
    assert resp.json()["detail"][0]["field"] == "value"
    assert _keys(redis_client) == set()


def test_a_sample_within_the_skew_is_accepted(client: TestClient) -> None:
    """An atMs up to five minutes ahead of the clock is a sensor's skew, not a refusal."""
    assert _post(client, {**SAMPLE, "atMs": NOW + 5 * 60 * 1000}).status_code == 201


def test_other_refusals_write_nothing(client: TestClient, redis_client: redis.Redis) -> None:
    """Not JSON (422), another content type (415), too big (413) and an unknown objective (404)
    each refuse and leave no key behind."""
    json_ct = {**AUTH, "Content-Type": "application/json"}
    not_json = client.post(URL, content=b"{value", headers=json_ct)
    assert not_json.status_code == 422 and not_json.json()["detail"][0]["field"] == "(body)"
    text = client.post(URL, content=b"30", headers={**AUTH, "Content-Type": "text/plain"})
    assert text.status_code == 415
    big = client.post(URL, content=b" " * 1_048_577, headers=json_ct)
    assert big.status_code == 413
    unknown = _post(client, SAMPLE, "/v1/objectives/nope/samples")
    assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_objective"
    assert client.post(URL, json=SAMPLE).status_code == 401
    assert _keys(redis_client) == set()


def test_samples_read_newest_first_with_a_limit(client: TestClient) -> None:
    """GET .../samples lists newest first, capped by `limit`; a limit over 500 is a 422."""
    for i in range(3):
        _post(client, {**SAMPLE, "atMs": NOW - (3 - i) * DAY, "value": 30 - i})
    page = client.get(URL, params={"limit": 2}, headers=AUTH).json()
    assert [s["value"] for s in page["samples"]] == [28, 29]
    assert client.get(URL, params={"limit": 501}, headers=AUTH).status_code == 422
    assert client.get("/v1/objectives/nope/samples", headers=AUTH).status_code == 404


def test_objectives_show_the_current_gap(client: TestClient) -> None:
    """After samples, GET /v1/objectives shows the gap, its trend and the gap decision."""
    _post(client, {**SAMPLE, "atMs": NOW - 15 * DAY, "value": 36})
    _post(client, {**SAMPLE, "atMs": NOW - DAY, "value": 30})
    rows = {o["key"]: o for o in client.get("/v1/objectives", headers=AUTH).json()["objectives"]}
    review = rows["review-turnaround"]
    assert review["gap"]["gap"] == 6 and review["gap"]["withinTolerance"] is False
    assert review["gap"]["trend"] == "improving" and review["gap"]["stale"] is False
    assert review["gapDecision"]["action"] == "create"
    assert review["latestSample"]["value"] == 30
    proposed = rows["invoices-paid-on-time"]
    assert proposed["gap"]["gap"] is None and proposed["gapDecision"]["action"] == "drift"
    assert review["lastDecision"] is None  # the steward has not run


def test_objectives_show_the_stewards_last_decision(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """Once the steward's audit holds a gap decision for an objective, GET /v1/objectives
    shows it as `lastDecision`."""
    from contracts.steward import AuditEntry
    from workers.stores.audit import StewardAudit

    decision = AuditEntry.model_validate(
        {
            "objectiveKey": "review-turnaround",
            "kind": "gap_decision",
            "action": "escalate",
            "reason": "1 item(s) already in flight",
        }
    )
    StewardAudit(redis_client).record("run-x", [decision], now_ms=NOW)
    rows = {o["key"]: o for o in client.get("/v1/objectives", headers=AUTH).json()["objectives"]}
    assert rows["review-turnaround"]["lastDecision"] == {
        "runId": "run-x",
        "atMs": NOW,
        "action": "escalate",
        "reason": "1 item(s) already in flight",
    }
    assert rows["deploy-lead-time"]["lastDecision"] is None


ORG = """
members: [{id: ava}, {id: gus}]
seats: [{memberId: gus}]
objectives:
"""


@pytest.mark.parametrize(
    ("objectives", "named"),
    [
        ("  - {key: a, target: 1}\n  - {key: a, target: 2}", "objectives: duplicate key(s)"),
        ("  - {key: a, target: 1, ownerId: zed}", "objectives.0.ownerId: 'zed'"),
        ("  - {key: a, target: 1, reviewBy: zed}", "objectives.0.reviewBy: 'zed'"),
        ("  - {key: a, target: 1, adoptedBy: zed}", "objectives.0.adoptedBy: 'zed'"),
        ("  - {key: a, target: 1, seatId: ava}", "objectives.0.seatId: 'ava' is not a seat"),
        ("  - {key: a, target: 1, tolerance: -1}", "objectives.0.tolerance"),
        ("  - {key: a}", "objectives.0.target"),
    ],
)
def test_a_bad_objective_stops_the_org_naming_the_field(objectives: str, named: str) -> None:
    """An objective with a duplicate key, an unknown person or seat, or a bad field is refused
    at load with the field named."""
    with pytest.raises(ConfigError, match="org") as caught:
        parse_org(ORG + objectives, Path("org.yaml"))
    assert named in str(caught.value)


def test_a_valid_objective_loads() -> None:
    """An objective naming members and a seat of the org loads and is found by key."""
    org = parse_org(
        ORG + "  - {key: a, target: 1, ownerId: ava, seatId: gus, state: active}",
        Path("org.yaml"),
    )
    assert org.objectives[0].seat_id == "gus" and org.objectives[0].state == "active"
