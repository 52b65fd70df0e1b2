"""`seatwire status`, `ledger`, `trace` and `work` against a real Redis and a real Celery worker
(issue 15 point 3): each says what the deployment holds at that moment — a report waiting in
its queue, then the worker that took it, the ledger row and the ask it led to, the beat tick
that ran — in JSON the API also answers and in text whose identifiers are never broken."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery.contrib.testing.worker import start_worker
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from contracts.ops import ClusterStatus
from tests.auth import as_seats
from tests.fakes import BLOCKED_REPORT
from workers import bootstrap
from workers.celery_app import create_app
from workers.cli import cli
from workers.cli.ops import status_lines
from workers.ingress.app import create_ingress
from workers.queues import FINAL_STATES, Queue
from workers.settings import Settings
from workers.stores import keys

pytestmark = pytest.mark.redis
runner = CliRunner()
TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def deployment(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Settings, TestClient]]:
    outbox = tmp_path / "outbox.jsonl"
    monkeypatch.setenv("SEATWIRE_REDIS_URL", redis_url)
    monkeypatch.setenv("SEATWIRE_API_TOKEN", TOKEN)
    monkeypatch.setenv("SEATWIRE_OUTBOX_PATH", str(outbox))
    settings = Settings(redis_url=redis_url, api_token=TOKEN, outbox_path=outbox)
    app = create_app(settings)
    container = bootstrap.build_container(settings, app=app)
    with TestClient(create_ingress(container, app)) as client:
        as_seats(client)
        yield settings, client


def _json(args: list[str]) -> Any:
    done = runner.invoke(cli, args)
    assert done.exit_code == 0, done.output
    return json.loads(done.output)


def _final(client: TestClient, tracking_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        body: dict[str, Any] = client.get(f"/v1/work/{tracking_id}", headers=AUTH).json()
        if body["state"] in FINAL_STATES:
            return body
        time.sleep(0.05)
    raise AssertionError(f"{tracking_id} did not reach a final state: {body}")


def test_status_work_ledger_and_trace_follow_a_report(
    deployment: tuple[Settings, TestClient], redis_client: redis.Redis
) -> None:
    settings, client = deployment
    posted = client.post("/v1/seats/scout/work", json=dict(BLOCKED_REPORT), headers=AUTH)
    assert posted.status_code == 202, posted.text
    tracking_id = posted.json()["trackingId"]

    waiting = ClusterStatus.model_validate(_json(["status", "--json"]))
    assert waiting.queues[Queue.ENGAGEMENT.value] == 1
    assert waiting.queues[Queue.SEND.value] == 0
    assert (waiting.journal_open, waiting.dlq, waiting.parked) == (1, 0, 0)
    # The report's blocker is news for nobody's controller: the due index holds no seat.
    assert (waiting.controller_due, waiting.controller_overdue) == (0, 0)
    assert waiting.workers == () and waiting.ticks == {} and waiting.beat_leader is None
    accepted = _json(["work", tracking_id, "--json"])
    assert accepted["state"] == "accepted" and accepted["send"] is None

    app = create_app(settings)
    queues = [Queue.ENGAGEMENT.value, Queue.GUARDRAILS.value, Queue.SEND.value]
    with start_worker(app, pool="solo", perform_ping_check=False, queues=queues):
        final = _final(client, tracking_id)
        running = ClusterStatus.model_validate(_json(["status", "--json"]))
    assert final["state"] == "engaged"
    assert sum(running.queues.values()) == 0 and running.journal_open == 0
    assert running.workers is not None and len(running.workers) == 1
    assert set(queues) <= set(running.workers[0].queues)

    # The CLI prints what the API answers for the same work, and the ledger row it wrote.
    assert _json(["work", tracking_id, "--json"]) == final
    rows = _json(["ledger", "--seat", "scout", "--json"])
    assert rows["count"] == 1 and rows["rows"][0]["trackingId"] == tracking_id
    assert rows["rows"][0]["outcome"] == "engaged"
    text = runner.invoke(cli, ["work", tracking_id]).output
    assert f"work {tracking_id}: engaged" in text and "blocked:access -> ben" in text
    # ... and the ask the send recorded, beside the decision, with where it stands.
    [ask] = final["asks"]
    assert ask["state"] == "open" and ask["trackingId"] == tracking_id
    assert f"    ask {ask['id']}: waiting, due " in text
    line = runner.invoke(cli, ["ledger"]).output.strip()
    assert "scout  engaged  blocked:access  -> ben" in line
    assert f"    ask {ask['id']}: waiting, due " in line

    # A beat tick that finishes is written down; status then names it.
    app.tasks["seatwire.sweep"].apply()
    ticked = ClusterStatus.model_validate(_json(["status", "--json"]))
    assert set(ticked.ticks) == {"sweep"} and ticked.ticks["sweep"] >= running.at_ms
    assert redis_client.hexists(keys.TICKS, "sweep")


def test_trace_of_an_inbound_event_names_every_seat(
    deployment: tuple[Settings, TestClient],
) -> None:
    settings, client = deployment
    delivery = "slack:T1:C-PLATFORM:1.0"
    event: dict[str, Any] = {
        "family": "messaging",
        "source": "slack",
        "deliveryId": delivery,
        "ids": {"channelId": "C-PLATFORM", "messageId": "1.0"},
        "msg": {
            "authorId": "U0AVA",
            "body": "<@U0SCOUT> can you look?",
            "mentions": ["U0SCOUT"],
            "channelKind": "PUBLIC",
        },
        "atMs": 1_700_000_000_000,
    }
    posted = client.post("/v1/events", json=event, headers=AUTH)
    assert posted.status_code == 202, posted.text
    app = create_app(settings)
    with start_worker(
        app, pool="solo", perform_ping_check=False, queues=[Queue.DIRECTEDNESS.value]
    ):
        deadline = time.monotonic() + 30
        while _json(["trace", delivery, "--json"])["state"] == "accepted":
            assert time.monotonic() < deadline, "the event was never resolved"
            time.sleep(0.05)
    traced = _json(["trace", delivery, "--json"])
    assert traced == client.get(f"/v1/trace/{delivery}", headers=AUTH).json()
    assert traced["state"] == "directed"
    verdicts = {v["seatId"]: v for v in traced["seats"]}
    assert verdicts["scout"]["directed"] is True and verdicts["tally"]["directed"] is False
    text = runner.invoke(cli, ["trace", delivery]).output.splitlines()
    assert text[0] == f"event {delivery}: directed"
    assert any(line.startswith("  seat scout: directed, mention") for line in text), text
    assert any(line.startswith("  seat tally: not directed, ") for line in text), text


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["work", "wr-nothing"], "nothing was accepted as wr-nothing"),
        (["trace", "slack:nothing"], "no inbound event 'slack:nothing' was received"),
    ],
)
def test_an_id_that_names_nothing_exits_1_saying_so(
    deployment: tuple[Settings, TestClient], args: list[str], said: str
) -> None:
    done = runner.invoke(cli, args)
    assert done.exit_code == 1 and said in done.output


def test_an_unknown_seat_is_refused(deployment: tuple[Settings, TestClient]) -> None:
    done = runner.invoke(cli, ["ledger", "--seat", "nobody-here"])
    assert done.exit_code == 2 and "'nobody-here' is not a seat of the org file" in done.output


def test_embedded_mode_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SEATWIRE_REDIS_URL", raising=False)
    done = runner.invoke(cli, ["status"])
    assert done.exit_code == 2 and "SEATWIRE_REDIS_URL" in done.output


def test_status_text_keeps_every_identifier_whole_and_calls_a_late_tick_late() -> None:
    s = ClusterStatus(
        at_ms=1_000_000,
        queues={"engagement": 3, "send": 0},
        dlq=2,
        journal_open=4,
        journal_overdue=1,
        journal_failed=0,
        parked=0,
        beat_leader="beat-1@host",
        beat_token=7,
        ticks={"sweep": 1_000_000 - 61_000, "steward": 1_000_000 - 5_000},
        workers=None,
    )
    lines = status_lines(
        s, where="redis://x", intervals={"sweep": 5.0, "steward": 60.0, "controller": 5.0}
    )
    assert all(len(line) <= 80 for line in lines), lines
    assert "journal      4 open, 1 overdue, 0 failed" in lines
    assert "dead letters 2 (seatwire dlq list; replay)" in lines
    assert "beat         led by beat-1@host (token 7)" in lines
    assert "tick         sweep      1m 1s ago (LATE: every 5s)" in lines
    assert "tick         steward    5s ago" in lines
    assert "tick         controller never finished" in lines
    assert not any(line.startswith("workers") for line in lines)  # not asked
