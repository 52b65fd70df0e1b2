"""The ingress's /metrics on a real Redis: the cluster's figures read at each scrape (queue
depth, journal entries open and overdue, the last tick), its own requests and 429s, and a
scrape that goes on, saying so, when the cluster cannot be read or is slow to answer. What
the public port answers without a token: not the metrics, no /docs pages, an OpenAPI
document that is the same for every deployment."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from contracts.ops import ClusterStatus
from tests.auth import as_seats, seat_auth
from tests.fakes import BLOCKED_REPORT
from workers import bootstrap
from workers.celery_app import create_app
from workers.ingress.app import create_ingress
from workers.ingress.metrics import ClusterFigures
from workers.settings import BUNDLED_ORG, Settings
from workers.stores import keys
from workers.stores.ticks import Ticks

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOW = 1_800_000_000_000

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


class Clock:
    def __init__(self) -> None:
        self.ms = NOW

    def __call__(self) -> int:
        return self.ms


def ingress(
    redis_url: str, tmp_path: Path, clock: Clock, *, rate_per_s: float = 0.0, **more: Any
) -> TestClient:
    """An ingress on the test Redis; `rate_per_s`: its per-source rate limit (burst 1);
    `more`: other settings."""
    given: dict[str, Any] = {
        "redis_url": redis_url,
        "api_token": TOKEN,
        "outbox_path": tmp_path / "o.jsonl",
        "ingress_rate_per_s": rate_per_s,
        "ingress_rate_burst": 1,
    }
    settings = Settings(**{**given, **more})
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    return TestClient(create_ingress(container, app, clock_ms=clock))


@pytest.fixture
def client(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    with ingress(redis_url, tmp_path, Clock()) as c:
        as_seats(c)
        yield c


@pytest.mark.redis
def test_the_cluster_is_read_at_each_scrape(redis_client: redis.Redis, client: TestClient) -> None:
    """Given two work reports accepted with no worker running and a sweep that finished, when
    /metrics is scraped, then the engagement queue holds two, two journal entries are open,
    none overdue, the sweep's last tick is there, and the two 202s are counted; once the
    deadline has passed, the same entries read as overdue."""
    for i in range(2):
        posted = client.post(
            "/v1/seats/scout/work", json=dict(BLOCKED_REPORT, id=f"w-{i}"), headers=AUTH
        )
        assert posted.status_code == 202, posted.text
    Ticks(redis_client).mark("sweep", NOW - 5_000)
    redis_client.zadd(keys.CONTROLLER_DUE, {"scout": 1, "tally": 2**52})  # due now; later
    text = client.get("/metrics", headers=AUTH).text
    found = samples(text)
    # This process's own stage figures are served too (in `seatwire up` the stages run here).
    assert "# TYPE seatwire_stage_task_seconds histogram" in text
    assert found[("seatwire_cluster_status_up", ())] == 1
    assert found[("seatwire_queue_depth", (("queue", "engagement"),))] == 2
    assert found[("seatwire_queue_depth", (("queue", "send"),))] == 0
    assert found[("seatwire_journal_entries", (("state", "open"),))] == 2
    assert found[("seatwire_journal_entries", (("state", "overdue"),))] == 0
    assert found[("seatwire_journal_entries", (("state", "failed"),))] == 0
    assert (found[("seatwire_dlq_messages", ())], found[("seatwire_parked_messages", ())]) == (0, 0)
    assert found[("seatwire_beat_leader", ())] == 0
    assert found[("seatwire_controller_due_seats", (("when", "now"),))] == 1
    assert found[("seatwire_controller_due_seats", (("when", "later"),))] == 1
    assert (
        found[("seatwire_last_tick_timestamp_seconds", (("tick", "sweep"),))]
        == (NOW - 5_000) / 1000
    )
    assert found[("seatwire_ingress_requests_total", (("route", "work"), ("status", "202")))] == 2

    clock: Clock = client.app.state.deps.clock_ms  # type: ignore[attr-defined]
    clock.ms = NOW + 301_000  # past the default journal deadline (300 s)
    later = samples(client.get("/metrics", headers=AUTH).text)
    assert later[("seatwire_journal_entries", (("state", "overdue"),))] == 2


@pytest.mark.redis
def test_the_rate_limits_429s_are_counted(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Given a rate limit of one request per source, when one caller posts twice, then the
    second is a 429 before any route and counts in seatwire_ingress_rate_limited_total."""
    with ingress(redis_url, tmp_path, Clock(), rate_per_s=0.001) as c:
        as_seats(c)
        answers = [
            c.post("/v1/seats/scout/work", json=dict(BLOCKED_REPORT, id=f"r-{i}"), headers=AUTH)
            for i in range(2)
        ]
        found = samples(c.get("/metrics", headers=AUTH).text)
    assert [a.status_code for a in answers] == [202, 429]
    assert found[("seatwire_ingress_rate_limited_total", ())] == 1


@pytest.mark.redis
def test_metrics_on_the_public_port_take_the_operator_token(
    redis_client: redis.Redis, client: TestClient
) -> None:
    """Given the ingress's port, when /metrics is asked without a token, with a wrong one or
    with a seat's, then it answers 401, 401 and 403 with no figure in the body; with the
    operator's token it serves the cluster's figures."""
    answers = [
        client.get("/metrics", headers=headers)
        for headers in ({}, {"Authorization": "Bearer nobody"}, seat_auth(redis_client, "scout"))
    ]
    served = client.get("/metrics", headers=AUTH)
    assert [a.status_code for a in answers] == [401, 401, 403]
    assert [a.json()["error"] for a in answers] == ["unauthorized", "unauthorized", "operator_only"]
    assert all("seatwire_" not in a.text for a in answers)
    assert served.status_code == 200 and "seatwire_queue_depth{" in served.text


@pytest.mark.redis
def test_the_public_port_serves_no_docs_pages(client: TestClient) -> None:
    """Given the ingress, when /docs, /redoc or Swagger's OAuth redirect is asked, then each is
    the 404 problem: no page that loads its scripts from a CDN is served."""
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        resp = client.get(path)
        assert resp.status_code == 404 and resp.json()["error"] == "not_found", path


@pytest.mark.redis
def test_the_openapi_document_is_open_and_the_same_for_every_deployment(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Given two ingresses with other tokens, org files, webhook secrets and limits, when each
    is asked for /openapi.json without a token, then both answer 200 with the same document,
    which names neither token, nor the orgs' projects: serving it tells nothing of a
    deployment."""
    other_org = tmp_path / "org.yaml"
    other_org.write_text(
        BUNDLED_ORG.read_text()
        .replace("Acme Platform", "Umbra Freight")
        .replace("acme/platform", "umbra/freight")
    )
    other = {
        "org_file": other_org,
        "api_token": "another-token",
        "slack_signing_secret": "a-slack-secret",
        "github_webhook_secret": "a-github-secret",
        "max_body_bytes": 4096,
    }
    documents = []
    for i, more in enumerate(({}, other)):
        (tmp_path / str(i)).mkdir()
        with ingress(redis_url, tmp_path / str(i), Clock(), rate_per_s=5, **more) as c:
            resp = c.get("/openapi.json")
            assert resp.status_code == 200
            documents.append(resp.text)
    assert documents[0] == documents[1]
    for secret in (TOKEN, "another-token", "Acme Platform", "Umbra Freight", "a-slack-secret"):
        assert secret not in documents[0], secret


def test_a_failing_read_is_a_scrape_without_the_figures() -> None:
    """Given a read of the cluster that raises, when collected, then only
    seatwire_cluster_status_up 0 is there: no figure reads as 0."""

    def broken() -> ClusterStatus:
        raise redis.ConnectionError("Redis is down")

    families = list(ClusterFigures(broken, budget_s=1.0).collect())
    assert [(f.name, [s.value for s in f.samples]) for f in families] == [
        ("seatwire_cluster_status_up", [0.0])
    ]


def test_a_slow_read_is_not_waited_for_nor_started_twice() -> None:
    """Given a read that takes longer than the scrape's budget, when scraped twice meanwhile,
    then both scrapes go on without the figures and only one read was started; once it has
    finished, the next scrape starts a fresh read."""
    release = threading.Event()
    calls: list[float] = []

    def slow() -> ClusterStatus:
        calls.append(time.monotonic())
        release.wait(5)
        raise redis.TimeoutError("timed out")

    figures = ClusterFigures(slow, budget_s=0.05)
    first = [f.name for f in figures.collect()]
    second = [f.name for f in figures.collect()]
    release.set()
    pending = figures._pending  # the read both scrapes left running
    assert pending is not None
    assert isinstance(pending.exception(timeout=30), redis.TimeoutError)
    list(figures.collect())
    assert first == second == ["seatwire_cluster_status_up"]
    assert len(calls) == 2
