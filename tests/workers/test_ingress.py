"""The ingress against a real Redis (stores and broker): what is accepted is journalled and
enqueued before the 202; what is refused leaves no trace."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
import redis
from fastapi.testclient import TestClient

from tests.auth import as_seat, as_seats
from tests.fakes import BLOCKED_REPORT
from workers import bootstrap
from workers.celery_app import create_app
from workers.ingress.app import create_ingress, tracking_id_for
from workers.settings import Settings
from workers.stores import keys

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BLOCKED = dict(BLOCKED_REPORT)


def _settings(url: str, **overrides: Any) -> Settings:
    return Settings(redis_url=url, api_token=TOKEN, **overrides)


@pytest.fixture
def client(redis_client: redis.Redis, redis_url: str, tmp_path: Any) -> Iterator[TestClient]:
    settings = _settings(redis_url, outbox_path=tmp_path / "outbox.jsonl")
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    with TestClient(create_ingress(container, app)) as c:
        as_seats(c)
        yield c


def _journal_keys(r: redis.Redis) -> list[bytes]:
    return [k for k in r.scan_iter(match=keys.journal("*"))]


def _queued(r: redis.Redis) -> int:
    return int(r.llen("engagement"))


def test_accepted_report_is_journalled_and_enqueued(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """A valid report gets 202 with its tracking id, a journal entry and one queued task."""
    resp = client.post("/v1/seats/scout/work", json=BLOCKED, headers=AUTH)
    assert resp.status_code == 202, resp.text
    body = resp.json()
    assert body["trackingId"] == tracking_id_for("scout", "billing-migration", 1)
    assert body["status"] == "accepted"
    entry = redis_client.hgetall(keys.journal(body["trackingId"]))
    assert entry[b"state"] == b"accepted" and b"enqueuedAtMs" in entry
    assert _queued(redis_client) == 1
    message = json.loads(cast(bytes, redis_client.lindex("engagement", 0)))  # one task, above
    assert message["headers"]["id"] == f"{body['trackingId']}:engagement"


def test_reposted_report_is_a_noop(client: TestClient, redis_client: redis.Redis) -> None:
    """Posting the same (seat, work, revision) again answers 'duplicate' and enqueues nothing."""
    first = client.post("/v1/seats/scout/work", json=BLOCKED, headers=AUTH).json()
    again = client.post("/v1/seats/scout/work", json=BLOCKED, headers=AUTH)
    assert again.status_code == 202
    assert again.json()["status"] == "duplicate"
    assert again.json()["trackingId"] == first["trackingId"]
    assert _queued(redis_client) == 1


def test_seat_alias_resolves_to_the_same_event(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """A seat addressed by an alias is the same seat: same tracking id, still one task."""
    first = client.post("/v1/seats/scout/work", json=BLOCKED, headers=AUTH).json()
    again = client.post("/v1/seats/U0SCOUT/work", json=BLOCKED, headers=AUTH).json()
    assert again["trackingId"] == first["trackingId"] and again["status"] == "duplicate"
    assert _queued(redis_client) == 1


def test_new_revision_is_a_new_event(client: TestClient, redis_client: redis.Redis) -> None:
    """A higher revision of the same work is a new report."""
    client.post("/v1/seats/scout/work", json=BLOCKED, headers=AUTH)
    resp = client.post("/v1/seats/scout/work", json={**BLOCKED, "revision": 2}, headers=AUTH)
    assert resp.json()["status"] == "accepted"
    assert _queued(redis_client) == 2


def test_revision_reused_with_other_content_is_a_conflict(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """The same revision with a different body is a 409, not a silently ignored change."""
    client.post("/v1/seats/scout/work", json=BLOCKED, headers=AUTH)
    resp = client.post("/v1/seats/scout/work", json={**BLOCKED, "title": "Other"}, headers=AUTH)
    assert resp.status_code == 409
    assert resp.json()["error"] == "revision_reused"
    assert _queued(redis_client) == 1


@pytest.mark.parametrize(
    ("path", "body", "headers", "status", "error"),
    [
        ("/v1/seats/scout/work", BLOCKED, {}, 401, "unauthorized"),
        ("/v1/seats/scout/work", BLOCKED, {"Authorization": "Bearer wrong"}, 401, "unauthorized"),
        ("/v1/seats/scout/work", BLOCKED, {"Authorization": TOKEN}, 401, "unauthorized"),
        ("/v1/seats/nobody-here/work", BLOCKED, as_seat("scout"), 403, "wrong_seat"),
        ("/v1/seats/tally/work", BLOCKED, as_seat("scout"), 403, "wrong_seat"),
        ("/v1/seats/scout/work", {**BLOCKED, "state": "stuck"}, AUTH, 422, "invalid_work_report"),
        (
            "/v1/seats/scout/work",
            {**BLOCKED, "selfServeExhaused": True},
            AUTH,
            422,
            "invalid_work_report",
        ),
        ("/v1/seats/scout/work", {"title": "no id"}, AUTH, 422, "invalid_work_report"),
        ("/v1/seats/scout/work", {**BLOCKED, "id": "   "}, AUTH, 422, "invalid_work_report"),
        ("/v1/seats/scout/work", {**BLOCKED, "seatId": "tally"}, AUTH, 422, "invalid_work_report"),
        (
            "/v1/seats/scout/work",
            {**BLOCKED, "blocker": {"kind": "budget"}},
            AUTH,
            422,
            "invalid_work_report",
        ),
    ],
)
def test_refused_requests_change_nothing(
    client: TestClient,
    redis_client: redis.Redis,
    path: str,
    body: dict[str, Any],
    headers: dict[str, str],
    status: int,
    error: str,
) -> None:
    """Every refusal has its status and error, and nothing is journalled or enqueued."""
    resp = client.post(path, json=body, headers=headers)
    assert resp.status_code == status, resp.text
    assert resp.json()["error"] == error
    assert _journal_keys(redis_client) == [] and _queued(redis_client) == 0


def test_invalid_report_names_the_field(client: TestClient) -> None:
    """A 422 names the field that is wrong, nested path included."""
    resp = client.post(
        "/v1/seats/scout/work", json={**BLOCKED, "blocker": {"kind": "budget"}}, headers=AUTH
    )
    fields = [d["field"] for d in resp.json()["detail"]]
    assert fields == ["blocker.kind"]
    resp = client.post(
        "/v1/seats/scout/work", json={**BLOCKED, "selfServeExhaused": True}, headers=AUTH
    )
    assert [d["field"] for d in resp.json()["detail"]] == ["selfServeExhaused"]


def test_malformed_json_is_422(client: TestClient, redis_client: redis.Redis) -> None:
    """A body that is not JSON is a 422 and changes nothing."""
    resp = client.post(
        "/v1/seats/scout/work",
        content=b"{not json",
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert resp.status_code == 422 and resp.json()["error"] == "invalid_json"
    assert _journal_keys(redis_client) == []


def test_wrong_content_type_is_415(client: TestClient, redis_client: redis.Redis) -> None:
    """Form data is refused with 415 before anything is read into the journal."""
    resp = client.post(
        "/v1/seats/scout/work",
        content=b"id=x",
        headers={**AUTH, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert resp.status_code == 415
    assert _journal_keys(redis_client) == []


def test_body_over_one_mebibyte_is_413(client: TestClient, redis_client: redis.Redis) -> None:
    """A body over 1 MiB is a 413, declared length or not, and nothing is journalled."""
    big = json.dumps({**BLOCKED, "summary": "x" * (1024 * 1024)}).encode()
    resp = client.post(
        "/v1/seats/scout/work", content=big, headers={**AUTH, "Content-Type": "application/json"}
    )
    assert resp.status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: streamed, counted as it arrives
        for _ in range(17):
            yield b" " * 65536

    resp = client.post(
        "/v1/seats/scout/work",
        content=chunks(),
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert resp.status_code == 413
    assert _journal_keys(redis_client) == [] and _queued(redis_client) == 0


def test_redis_down_is_503_with_retry_after(redis_url: str, tmp_path: Any) -> None:
    """With the stores' Redis unreachable the answer is 503 + Retry-After, never 2xx."""
    settings = _settings("redis://127.0.0.1:1/0", outbox_path=tmp_path / "o.jsonl")
    app = create_app(_settings(redis_url), register=False)
    container = bootstrap.build_container(settings, app=app)
    with TestClient(create_ingress(container, app)) as c:
        started = time.monotonic()
        # A seat's token is looked up in the store: unreachable, that is the 503 too.
        seat = {"Authorization": "Bearer swt_a-seat-token"}
        resp = c.post("/v1/seats/scout/work", json=BLOCKED, headers=seat)
        assert resp.status_code == 503 and resp.headers["Retry-After"]
        assert time.monotonic() - started < 10
        assert c.get("/readyz").status_code == 503


def test_broker_down_is_503_and_a_retry_enqueues(
    redis_client: redis.Redis, redis_url: str, tmp_path: Any
) -> None:
    """Broker unreachable: 503; the entry waits unenqueued, and the client's retry enqueues it."""
    settings = _settings(
        redis_url, broker_url="redis://127.0.0.1:1/0", outbox_path=tmp_path / "o.jsonl"
    )
    down = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=down)
    with TestClient(create_ingress(container, down)) as c:
        as_seats(c)
        resp = c.post("/v1/seats/scout/work", json=BLOCKED, headers=AUTH)
        assert resp.status_code == 503
    tracking = tracking_id_for("scout", "billing-migration", 1)
    entry = redis_client.hgetall(keys.journal(tracking))
    assert entry[b"state"] == b"accepted" and b"enqueuedAtMs" not in entry
    up = create_app(_settings(redis_url), register=False)
    with TestClient(
        create_ingress(bootstrap.build_container(_settings(redis_url), app=up), up)
    ) as c:
        as_seats(c)
        resp = c.post("/v1/seats/scout/work", json=BLOCKED, headers=AUTH)
        assert resp.status_code == 202
    assert _queued(redis_client) == 1
    assert b"enqueuedAtMs" in redis_client.hgetall(keys.journal(tracking))


def test_health_ready_and_openapi(client: TestClient) -> None:
    """healthz is up, readyz sees Redis and the broker, and the OpenAPI document is served."""
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"] == {"redis": "ok", "broker": "ok"}
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/v1/seats/{seat}/work",
        "/v1/ledger",
        "/healthz",
        "/readyz",
        "/v1/events",
        "/v1/trace/{delivery_id}",
        "/v1/seats/{seat}/updates",
        "/v1/seats/{seat}/updates/ack",
    } <= set(paths)
    # The provider routes are plain Starlette routes, listed by hand.
    for provider in ("slack", "github"):
        operation = paths[f"/webhooks/{provider}"]["post"]
        assert operation["operationId"] == f"{provider}_events"
        assert {"200", "401", "413", "415", "503"} <= set(operation["responses"])


def test_ledger_and_work_need_the_token(client: TestClient) -> None:
    """Reading the ledger or a tracking id needs the bearer token too."""
    assert client.get("/v1/ledger").status_code == 401
    assert client.get("/v1/work/wr-x").status_code == 401
    assert client.get("/v1/work/wr-x", headers=AUTH).status_code == 404
    assert client.get("/v1/ledger?seat=ghost", headers=AUTH).status_code == 404


def test_over_budget_is_503_and_the_retry_lands_once(
    redis_client: redis.Redis, redis_url: str, tmp_path: Any
) -> None:
    """Journal-and-enqueue that overruns the ingress budget answers 503 (never a late 2xx);
    the sender's retry is then accepted or recognised, and one task is queued."""
    slow = _settings(redis_url, outbox_path=tmp_path / "o.jsonl", ingress_budget_s=1e-6)
    app = create_app(slow, register=False)
    with TestClient(create_ingress(bootstrap.build_container(slow, app=app), app)) as c:
        as_seats(c)
        resp = c.post("/v1/seats/scout/work", json=BLOCKED, headers=AUTH)
        # The budget runs out in the await, or first in a Redis read whose socket timeout it
        # set (on a loaded machine): either way a 503, never a late 2xx.
        message = resp.json()["message"]
        assert resp.status_code == 503
        assert "did not finish" in message or "Timeout reading from socket" in message
    normal = _settings(redis_url, outbox_path=tmp_path / "o.jsonl")
    app = create_app(normal, register=False)
    with TestClient(create_ingress(bootstrap.build_container(normal, app=app), app)) as c:
        as_seats(c)
        deadline = time.monotonic() + 20  # a loaded machine may overrun the budget again
        while True:  # the overrun attempt may still be finishing in its thread
            retry = c.post("/v1/seats/scout/work", json=BLOCKED, headers=AUTH)
            if retry.status_code == 202 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert retry.status_code == 202
    assert _queued(redis_client) == 1


def test_updates_and_ack_over_http(client: TestClient, redis_client: redis.Redis) -> None:
    """The inbox is read and acknowledged over HTTP; a bad or premature ack changes nothing."""
    from contracts import Candidate, Directedness
    from tests.fakes import place

    for n in (1, 2):
        place(
            redis_client,
            "scout",
            Candidate.model_validate(
                {
                    "family": "messaging",
                    "source": "slack",
                    "deliveryId": f"d{n}",
                    "msg": {"authorId": "U0ANN", "mentions": ["U0SCOUT"]},
                    "atMs": n,
                }
            ),
            Directedness(directed=True, surface="mention", reason="mention", why="w"),
        )
    page = client.get("/v1/seats/U0SCOUT/updates", headers=AUTH).json()
    assert [i["deliveryId"] for i in page["items"]] == ["d1", "d2"]
    assert (page["position"], page["hasMore"]) == (2, False)
    assert (
        client.post("/v1/seats/scout/updates/ack", json={"position": 3}, headers=AUTH).status_code
        == 409
    )
    for bad in ({"position": -1}, {"position": "2"}, {"pos": 2}, [2]):
        resp = client.post("/v1/seats/scout/updates/ack", json=bad, headers=AUTH)
        assert resp.status_code == 422 and resp.json()["error"] == "invalid_ack"
    assert client.get("/v1/seats/scout/updates", headers=AUTH).json() == page
    done = client.post("/v1/seats/scout/updates/ack", json={"position": 2}, headers=AUTH)
    assert done.status_code == 200 and done.json()["items"] == []
    assert client.get("/v1/seats/ghost/updates", headers=as_seat("scout")).status_code == 403
    assert client.get("/v1/seats/scout/updates").status_code == 401
