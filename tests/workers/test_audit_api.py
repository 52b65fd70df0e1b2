"""`GET /v1/steward/audit` against a real Redis: newest first, per objective when asked, a
limit in 1..500, and an objective the org does not have is a 404."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from contracts.steward import AuditEntry
from workers import bootstrap
from workers.celery_app import create_app
from workers.ingress.app import create_ingress
from workers.settings import Settings
from workers.stores.audit import StewardAudit

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOW = 1_700_000_000_000
URL = "/v1/steward/audit"
# Two objectives of the bundled examples/org.yaml.
REVIEW, INVOICES = "review-turnaround", "invoices-paid-on-time"


@pytest.fixture
def client(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(redis_url=redis_url, api_token=TOKEN, outbox_path=tmp_path / "o.jsonl")
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    with TestClient(create_ingress(container, app, clock_ms=lambda: NOW)) as c:
        yield c


def _entry(objective: str, reason: str) -> AuditEntry:
    return AuditEntry.model_validate(
        {"objectiveKey": objective, "kind": "gap_decision", "reason": reason, "action": "none"}
    )


@pytest.fixture
def recorded(redis_client: redis.Redis) -> None:
    audit = StewardAudit(redis_client)
    audit.record("run-1", [_entry(REVIEW, "r1"), _entry(INVOICES, "i1")], now_ms=NOW - 2)
    audit.record("run-2", [_entry(REVIEW, "r2")], now_ms=NOW - 1)
    audit.record("run-2", [_entry(REVIEW, "r2")], now_ms=NOW)  # the same run, retried


def test_an_empty_audit_reads_as_no_entries(client: TestClient) -> None:
    """With no steward run yet, the audit answers 200 with no entries."""
    resp = client.get(URL, headers=AUTH)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"entries": [], "count": 0}


@pytest.mark.usefixtures("recorded")
def test_all_entries_newest_first_each_run_once(client: TestClient) -> None:
    """Every objective's entries come newest first, a retried run's once, with run id and time."""
    body = client.get(URL, headers=AUTH).json()
    assert body["count"] == 3
    assert [e["entry"]["reason"] for e in body["entries"]] == ["r2", "i1", "r1"]
    first = body["entries"][0]
    assert first["runId"] == "run-2" and first["atMs"] == NOW - 1
    assert first["entry"]["objectiveKey"] == REVIEW and first["entry"]["action"] == "none"


@pytest.mark.usefixtures("recorded")
def test_one_objective_and_a_limit(client: TestClient) -> None:
    """`objective` keeps that objective's entries and `limit` the newest of them."""
    body = client.get(URL, params={"objective": REVIEW, "limit": 1}, headers=AUTH).json()
    assert body["count"] == 1 and body["entries"][0]["entry"]["reason"] == "r2"
    other = client.get(URL, params={"objective": INVOICES}, headers=AUTH).json()
    assert [e["entry"]["reason"] for e in other["entries"]] == ["i1"]


def test_an_unknown_objective_is_a_404(client: TestClient) -> None:
    """An objective the org file does not have answers 404 `unknown_objective`."""
    resp = client.get(URL, params={"objective": "nope"}, headers=AUTH)
    assert resp.status_code == 404 and resp.json()["error"] == "unknown_objective"


@pytest.mark.parametrize("limit", ["0", "501", "ten"])
def test_a_bad_limit_is_a_422_naming_it(client: TestClient, limit: str) -> None:
    """A limit outside 1..500, or not a number, answers 422 naming `limit`."""
    resp = client.get(URL, params={"limit": limit}, headers=AUTH)
    assert resp.status_code == 422
    assert [e["field"] for e in resp.json()["detail"]] == ["limit"]


@pytest.mark.parametrize("limit", ["1", "500"])
def test_the_limit_bounds_are_accepted(client: TestClient, limit: str) -> None:
    """The two edges of the limit's range are accepted."""
    assert client.get(URL, params={"limit": limit}, headers=AUTH).status_code == 200


def test_without_the_token_the_audit_is_refused(client: TestClient) -> None:
    """The audit is behind the bearer token like the rest of /v1."""
    assert client.get(URL).status_code == 401
