"""A seat's turns over the API and the http launcher, on a real Redis (issue 12 points 5, 7):
status, pause / resume / run-now, the outcome route's 202 / 200 / 409 / 422, and the http
launcher's outcome in the reply, 202, a refusal, a timeout and a reply that is no outcome."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from fastapi.testclient import TestClient

from contracts import UpdatesPage
from contracts.controller import AgentProcess, TurnMessage, TurnOutcome
from contracts.org import HttpLauncher
from pipeline.turns import start_turn
from tests.auth import as_seats
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.ingress import seats as seat_routes
from workers.ingress.app import create_ingress
from workers.outbound.launchers import Brief, Launchers
from workers.settings import Settings
from workers.stages.controller_tick import ControllerTick

pytestmark = pytest.mark.redis

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOW = 1_800_000_000_000
ORG = """
members: [{id: ava}, {id: scout}]
seats: [{memberId: scout, operatorId: ava}]
"""


@pytest.fixture
def container(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Container:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url, api_token=TOKEN, org_file=org, outbox_path=tmp_path / "o.jsonl"
    )
    c = bootstrap.build_container(settings, client=redis_client)
    c.app = create_app(settings, register=False)
    return c


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    monkeypatch.setattr(seat_routes, "publish", lambda app, task, tid, msg: out.append(msg))
    return out


@pytest.fixture
def client(container: Container) -> Iterator[TestClient]:
    assert container.app is not None
    with TestClient(create_ingress(container, container.app)) as c:
        as_seats(c)
        yield c


def running_turn(c: Container, monkeypatch: pytest.MonkeyPatch) -> str:
    """scout's first turn, begun by a tick and started as a worker would."""
    from workers.stages import controller_tick

    monkeypatch.setattr(controller_tick, "publish_turns", lambda *a, **k: None)
    assert c.app is not None
    ControllerTick(c, c.app, rng=lambda: 0.5)(now_ms=NOW)
    run = c.seat_runs.get("scout").run
    assert run.active is not None
    turn = run.active.turn_id
    c.seat_runs.update("scout", lambda r: start_turn(r, turn, now_ms=NOW, lease_ms=60_000))
    return turn


def test_status_and_controls(client: TestClient, container: Container) -> None:
    """GET status reads the record; pause, resume and run-now change it; unknown seat 404."""
    resp = client.get("/v1/seats/scout/status", headers=AUTH)
    assert resp.status_code == 200 and resp.json()["lastDecision"] is None
    assert client.post("/v1/seats/scout/pause", headers=AUTH).json()["paused"] is True
    assert client.post("/v1/seats/scout/resume", headers=AUTH).json()["paused"] is False
    body = client.post("/v1/seats/scout/run-now", headers=AUTH).json()
    assert body["steering"] is True and body["controller"]["continuation"] is True
    assert client.get("/v1/seats/nobody/status", headers=AUTH).status_code == 404
    assert client.post("/v1/seats/scout/pause").status_code == 401


def test_the_outcome_route(
    client: TestClient,
    container: Container,
    published: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The running turn's outcome goes to the turns stage (202); once settled the same one
    is 200 duplicate, another 409 turn_finished; unknown 409; a bad body 422, unwritten."""
    turn = running_turn(container, monkeypatch)
    url = f"/v1/seats/scout/turns/{turn}/outcome"
    ok = {"kind": "ok", "detail": "done"}
    resp = client.post(url, headers=AUTH, json=ok)
    assert resp.status_code == 202, resp.text
    (message,) = published
    assert TurnMessage.model_validate(message).outcome is not None
    bad = client.post(url, headers=AUTH, json={"kind": "exploded"})
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_outcome"
    unknown = client.post("/v1/seats/scout/turns/scout:turn:9/outcome", headers=AUTH, json=ok)
    assert unknown.status_code == 409 and unknown.json()["error"] == "turn_unknown"
    # The turns stage settles it, as a worker would.
    from workers.stages.turns import Turns

    assert container.app is not None
    Turns.of(container, container.app).run(TurnMessage.model_validate(message))
    again = client.post(url, headers=AUTH, json=ok)
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    other = client.post(url, headers=AUTH, json={"kind": "failed"})
    assert other.status_code == 409 and other.json()["error"] == "turn_finished"


def test_a_command_turns_outcome_comes_only_from_its_worker(
    client: TestClient,
    container: Container,
    published: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A running turn whose agent runs under a command launcher here is refused at the
    outcome route (409 `turn_runs_locally`, nothing published): settled from outside, the
    seat's next turn could start beside its agent. A report that reaches the stage anyway
    leaves the agent lingering, to be proven gone before the next turn."""
    turn = running_turn(container, monkeypatch)
    agent = AgentProcess(turn_id=turn, host="h", until_ms=NOW + 60_000, pgid=4242)

    def with_agent(r: Any) -> Any:
        return r.model_copy(update={"active": r.active.model_copy(update={"agent": agent})})

    container.seat_runs.update("scout", with_agent)
    url = f"/v1/seats/scout/turns/{turn}/outcome"
    resp = client.post(url, headers=AUTH, json={"kind": "ok"})
    assert resp.status_code == 409 and resp.json()["error"] == "turn_runs_locally", resp.text
    assert published == []
    from workers.stages.turns import Turns

    assert container.app is not None
    message = TurnMessage(seat_id="scout", turn_id=turn, outcome=TurnOutcome(kind="ok"))
    Turns.of(container, container.app).run(message)
    assert container.seat_runs.get("scout").run.lingering == agent


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("costMicros", 10**15),
        ("costMicros", str(10**15)),
        ("costMicros", -1),
        ("costMicros", True),
        ("shadowCostMicros", 5),
    ],
)
def test_an_outcome_no_cost_frame_could_hold_is_refused_at_the_door(
    client: TestClient,
    container: Container,
    published: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    field: str,
    value: Any,
) -> None:
    """A cost a cost frame would refuse (10**15 micros and over, negative, a bool) or a field
    the outcome has not is a 422 naming it, and nothing goes to the turns stage."""
    turn = running_turn(container, monkeypatch)
    url = f"/v1/seats/scout/turns/{turn}/outcome"
    resp = client.post(url, headers=AUTH, json={"kind": "ok", "enforcement": "on", field: value})
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert body["error"] == "invalid_outcome"
    assert [d["field"] for d in body["detail"]] == [field]
    assert published == []
    assert container.seat_runs.get("scout").run.active is not None  # still running, unsettled


def test_the_largest_cost_taken_in_becomes_a_cost_frame(
    client: TestClient,
    container: Container,
    published: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An outcome costing 10**15 - 1 micros (a decimal string too) is accepted and settled by
    the turns stage into a recorded cost frame, never a ValidationError after the record."""
    turn = running_turn(container, monkeypatch)
    url = f"/v1/seats/scout/turns/{turn}/outcome"
    top = {"kind": "ok", "costMicros": str(10**15 - 1), "enforcement": "on"}
    resp = client.post(url, headers=AUTH, json=top)
    assert resp.status_code == 202, resp.text
    (message,) = published
    from workers.stages.turns import Turns

    assert container.app is not None
    Turns.of(container, container.app).run(TurnMessage.model_validate(message))
    (frame,) = container.costs.frames("scout")
    assert (frame.turn_id, frame.cost_micros, frame.enforcement) == (turn, 10**15 - 1, "on")
    assert container.seat_runs.get("scout").run.turns[-1].outcome.cost_micros == 10**15 - 1


def test_a_shadow_turns_cost_is_the_seats_shadow_spend(
    client: TestClient,
    container: Container,
    published: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A runtime's outcome costing 300000 micros under `shadow`, settled by the turns stage,
    reads back from GET cost as 300000 of shadow spend and no charge."""
    turn = running_turn(container, monkeypatch)
    url = f"/v1/seats/scout/turns/{turn}/outcome"
    shadow = {"kind": "ok", "costMicros": 300_000, "enforcement": "shadow"}
    assert client.post(url, headers=AUTH, json=shadow).status_code == 202
    (message,) = published
    from workers.stages.turns import Turns

    assert container.app is not None
    Turns.of(container, container.app).run(TurnMessage.model_validate(message))
    page = client.get("/v1/seats/scout/cost", headers=AUTH).json()
    assert (page["spendMicros"], page["shadowMicros"], page["count"]) == (0, 300_000, 1)
    (frame,) = page["frames"]
    assert (frame["costMicros"], frame["shadowCostMicros"]) == (None, 300_000)
    assert (frame["enforcement"], frame["turnId"]) == ("shadow", turn)


def brief() -> Brief:
    page = UpdatesPage(items=(), position=0, acknowledged=0, has_more=False)
    return Brief(seat_id="scout", turn_id="scout:turn:1", reason="first", inbox=page)


def launch(handler: Any, **spec: Any) -> Any:
    launcher = HttpLauncher.model_validate({"kind": "http", "url": "http://runtime/turn", **spec})
    ls = Launchers(time_limit_s=120, transport=httpx.MockTransport(handler), environ={"TOK": "s3"})
    return ls.launch(launcher, brief())


def test_http_launcher_outcomes() -> None:
    """The reply's outcome is the turn's; 202 is later; a 503, a timeout and a reply that is
    no outcome (a cost no cost frame could hold among them) are failed launches with their
    signatures; the token is sent."""
    seen: list[httpx.Request] = []

    def reply(status: int, body: Any = None) -> Any:
        def handler(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return httpx.Response(status, json=body)

        return handler

    out = launch(reply(200, {"outcome": {"kind": "ok", "continuation": True}}), tokenEnv="TOK")
    assert out.outcome.kind == "ok" and out.outcome.continuation is True
    assert seen[0].headers["authorization"] == "Bearer s3"
    assert json.loads(seen[0].content)["turnId"] == "scout:turn:1"
    assert launch(reply(202)).outcome is None
    assert launch(reply(503)).outcome.signature == "http:status:503"
    assert launch(reply(200, {"outcome": {"kind": "nope"}})).outcome.signature == "http:bad_reply"

    over = {"outcome": {"kind": "ok", "costMicros": 10**15, "enforcement": "on"}}
    refused = launch(reply(200, over)).outcome
    assert (refused.kind, refused.signature) == ("failed", "http:bad_reply")
    assert refused.cost_micros is None
    top = {"outcome": {"kind": "ok", "costMicros": 10**15 - 1, "enforcement": "on"}}
    assert launch(reply(200, top)).outcome.cost_micros == 10**15 - 1

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    assert launch(slow).outcome.signature == "http:timeout"
    missing = launch(reply(200), tokenEnv="UNSET")
    assert missing.outcome.signature == "http:no_token" and missing.outcome.retryable is False
