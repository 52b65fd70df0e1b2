"""Alertmanager's webhook (`POST /v1/alerts/alertmanager`, docs/alerts.md) on a real Redis: a
firing alert, posted as Alertmanager posts it (payload version 4), runs through the real
engagement, guardrail and send stages and lands in the file outbox as ONE ask of the on-call
member, however often the same notification is posted again; its resolution withdraws the
ask and sends nothing; every refusal changes nothing; and the settings are checked at start."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from fastapi.testclient import TestClient

from pipeline.alerts import alert_report
from tests.auth import bearer
from tests.fakes import queued, run_task
from tests.workers.test_realworld import snapshot
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.errors import ConfigError
from workers.ingress.app import create_ingress
from workers.queues import Queue, Task
from workers.settings import Settings, load_settings

pytestmark = pytest.mark.redis

TOKEN = "operator-token"
ALERTS_TOKEN = "alerts-token-0123"
ROUTE = "/v1/alerts/alertmanager"
RUNBOOK = "https://github.com/acme/seatwire/blob/main/docs/alerts.md#seatwiredeadletters"


def firing(**over: Any) -> dict[str, Any]:
    """A notification as Alertmanager 0.25+ posts it: one group, one alert firing."""
    alert = {
        "status": "firing",
        "labels": {
            "alertname": "SeatwireDeadLetters",
            "severity": "page",
            "job": "seatwire-ingress",
            "instance": "ingress:9808",
        },
        "annotations": {
            "summary": "2 message(s) in the dead-letter queue",
            "description": "A stage gave up on a message. `seatwire dlq list` says why.",
            "runbook_url": RUNBOOK,
        },
        "startsAt": "2026-12-06T09:14:45.123Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus:9090/graph?g0.expr=max%28seatwire_dlq_messages%29",
        "fingerprint": "c5bfe1b2d3a1f6e0",
    }
    alert.update(over)
    return {
        "receiver": "seatwire",
        "status": alert["status"],
        "alerts": [alert],
        "groupLabels": {"alertname": "SeatwireDeadLetters"},
        "commonLabels": alert["labels"],
        "commonAnnotations": alert["annotations"],
        "externalURL": "http://alertmanager:9093",
        "version": "4",
        "groupKey": '{}:{alertname="SeatwireDeadLetters"}',
        "truncatedAlerts": 0,
    }


def resolved() -> dict[str, Any]:
    note = firing(status="resolved", endsAt="2026-12-06T09:31:00.000Z")
    note["status"] = "resolved"
    return note


@dataclass
class World:
    client: TestClient
    app: Celery
    container: Container
    r: redis.Redis
    outbox: Path

    def post(self, body: object, token: str = ALERTS_TOKEN, **kw: Any) -> Any:
        return self.client.post(ROUTE, json=body, headers=bearer(token), **kw)

    def drain(self) -> None:
        """Run every queued stage message, engagement to send, as the workers would."""
        for queue, task in (
            (Queue.ENGAGEMENT, Task.ENGAGEMENT),
            (Queue.GUARDRAILS, Task.GUARDRAILS),
            (Queue.SEND, Task.SEND),
        ):
            for message in queued(self.r, queue):
                run_task(self.app, task, message["arg"], redelivered=False)
            self.r.delete(queue.value)

    def sent(self) -> list[dict[str, Any]]:
        if not self.outbox.exists():
            return []
        return [json.loads(line) for line in self.outbox.read_text().splitlines()]


def settings_for(redis_url: str, tmp_path: Path, **over: Any) -> Settings:
    given: dict[str, Any] = {
        "redis_url": redis_url,
        "api_token": TOKEN,
        "outbox_path": tmp_path / "outbox.jsonl",
        "alerts_token": ALERTS_TOKEN,
        "oncall_member": "gus",
        "alerts_seat": "scout",
        **over,
    }
    return Settings(**given)


@pytest.fixture
def world(redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> Iterator[World]:
    settings = settings_for(redis_url, tmp_path)
    container = bootstrap.build_container(settings, client=redis_client)
    app = create_app(settings, container=container)
    with TestClient(create_ingress(container, app)) as client:
        yield World(client, app, container, redis_client, settings.outbox_path)


def test_a_firing_alert_reaches_the_oncall_member_once(world: World) -> None:
    """The alert becomes one ask of the on-call member (gus) in the outbox, carrying its
    summary and runbook link; the same notification posted again (a repeat_interval re-send,
    a retry), and one whose summary moved, answer `duplicate` and send nothing more."""
    w = world
    first = w.post(firing())
    assert first.status_code == 200, first.text
    [got] = first.json()["alerts"]
    assert (got["result"], got["status"], got["fingerprint"]) == (
        "accepted",
        "firing",
        "c5bfe1b2d3a1f6e0",
    )
    w.drain()
    [line] = w.sent()
    assert line["memberIds"] == ["gus"]
    assert line["workId"] == got["workId"]
    text = json.dumps(line)
    assert "2 message(s) in the dead-letter queue" in text
    assert RUNBOOK in text

    again = w.post(firing())
    moved = firing()
    moved["alerts"][0]["annotations"]["summary"] = "5 message(s) in the dead-letter queue"
    changed = w.post(moved)
    for answer in (again, changed):
        assert answer.status_code == 200, answer.text
        assert [a["result"] for a in answer.json()["alerts"]] == ["duplicate"]
        assert answer.json()["alerts"][0]["trackingId"] == got["trackingId"]
    w.drain()
    assert len(w.sent()) == 1
    [ask] = w.container.asks.of_work(got["workId"])
    assert ask.state == "open" and [t.member_id for t in ask.targets] == ["gus"]


def test_a_new_firing_of_the_same_alert_is_a_new_ask(world: World) -> None:
    """Fired, resolved, fired again: the second firing has its own startsAt, so it is work
    of its own and asks again (once)."""
    w = world
    w.post(firing())
    w.drain()
    w.post(resolved())
    w.drain()
    later = firing(startsAt="2026-12-06T11:02:00Z")
    assert w.post(later).json()["alerts"][0]["result"] == "accepted"
    assert w.post(later).json()["alerts"][0]["result"] == "duplicate"
    w.drain()
    assert len(w.sent()) == 2


def test_a_resolved_alert_withdraws_its_ask_and_sends_nothing(world: World) -> None:
    w = world
    [got] = w.post(firing()).json()["alerts"]
    w.drain()
    assert len(w.sent()) == 1
    done = w.post(resolved())
    assert done.status_code == 200
    assert [a["status"] for a in done.json()["alerts"]] == ["resolved"]
    w.drain()
    assert len(w.sent()) == 1
    [ask] = w.container.asks.of_work(got["workId"])
    assert (ask.state, ask.closed) == ("closed", "withdrawn")
    assert w.post(resolved()).json()["alerts"][0]["result"] == "duplicate"


def test_a_resolution_alone_asks_nobody_nor_does_its_firing_delivered_late(world: World) -> None:
    """A resolution with no firing before it asks nobody; the firing's retry that arrives
    after it (Alertmanager's retry delivered late) is `already_resolved` and journals
    nothing."""
    w = world
    assert w.post(resolved()).status_code == 200
    w.drain()
    before = snapshot(w.r)
    late = w.post(firing())
    assert late.status_code == 200
    assert [a["result"] for a in late.json()["alerts"]] == ["already_resolved"]
    assert snapshot(w.r) == before
    w.drain()
    assert w.sent() == []


def test_alerts_obey_the_attention_budget(world: World) -> None:
    """Alerts are asks like any other: past the per-person limit the guardrails refuse the
    rest (a ledger row each), they are not sent."""
    w = world
    per_person = w.container.ledger.limits.per_target_per_day
    for n in range(per_person + 2):
        body = firing(fingerprint=f"{n:016x}", labels={"alertname": f"A{n}", "severity": "page"})
        assert w.post(body).status_code == 200
        w.drain()
    assert len(w.sent()) == per_person
    rows = w.container.ledger.read(seat_ids=["scout"])
    refused = [r for r in rows if r.outcome == "rate_limited_target"]
    assert len(refused) == 2, [(r.outcome, r.reason_code) for r in rows]


def test_a_notification_of_many_alerts_asks_for_each(world: World) -> None:
    w = world
    body = firing()
    second = copy.deepcopy(body["alerts"][0])
    second.update(fingerprint="0a0b0c0d0e0f0102", labels={"alertname": "SeatwireNoBeatTick"})
    body["alerts"].append(second)
    answer = w.post(body)
    assert [a["result"] for a in answer.json()["alerts"]] == ["accepted", "accepted"]
    w.drain()
    assert sorted(line["workId"] for line in w.sent()) == sorted(
        a["workId"] for a in answer.json()["alerts"]
    )


def _bad(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    at: Any = out
    for key in path[:-1]:
        at = at[key]
    if value is KeyError:
        del at[path[-1]]
    else:
        at[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("version",), "3"),
        (("version",), KeyError),
        (("alerts",), []),
        (("alerts", 0, "fingerprint"), KeyError),
        (("alerts", 0, "fingerprint"), "not hex!"),
        (("alerts", 0, "startsAt"), "yesterday"),
        (("alerts", 0, "startsAt"), "2026-12-06T09:14:45"),  # no zone
        (("alerts", 0, "status"), "pending"),
        (("alerts", 0, "labels"), {"alertname": 3}),
    ],
)
def test_a_bad_notification_is_a_422_and_changes_nothing(
    world: World, path: tuple[Any, ...], value: Any
) -> None:
    w = world
    body = firing()
    second = copy.deepcopy(body["alerts"][0])
    second["fingerprint"] = "ffffffffffffffff"
    body["alerts"].append(second)  # a good alert beside it: not journalled either
    bad = _bad(body, path, value)
    before = snapshot(w.r)
    answer = w.post(bad)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "invalid_alertmanager_notification"
    assert snapshot(w.r) == before


def test_refusals_before_the_body_change_nothing(world: World) -> None:
    w = world
    before = snapshot(w.r)
    assert w.post(firing(), token=TOKEN).status_code == 401  # the operator's token is not it
    assert w.client.post(ROUTE, json=firing()).status_code == 401
    assert w.post(firing(), token="nope").json()["error"] == "unauthorized"
    not_json = w.client.post(
        ROUTE, content=b"{", headers={**bearer(ALERTS_TOKEN), "Content-Type": "application/json"}
    )
    assert not_json.status_code == 422
    text = w.client.post(
        ROUTE, content=b"x", headers={**bearer(ALERTS_TOKEN), "Content-Type": "text/plain"}
    )
    assert text.status_code == 415
    assert snapshot(w.r) == before


def test_the_route_is_refused_until_alerts_are_configured(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    settings = settings_for(
        redis_url, tmp_path, alerts_token=None, oncall_member=None, alerts_seat=None
    )
    container = bootstrap.build_container(settings, client=redis_client)
    with TestClient(create_ingress(container, create_app(settings, container=container))) as c:
        answer = c.post(ROUTE, json=firing(), headers=bearer(ALERTS_TOKEN))
        assert c.post(ROUTE, json=firing()).status_code == 401  # no token: 401 first
    assert answer.status_code == 404
    assert answer.json()["error"] == "alerts_not_configured"


@pytest.mark.parametrize(
    ("over", "says"),
    [
        ({"oncall_member": "nobody"}, "SEATWIRE_ONCALL_MEMBER='nobody' is no member id"),
        ({"oncall_member": "Gus"}, "did you mean 'gus'"),
        ({"oncall_member": "scout"}, "is an agent seat"),
        ({"oncall_member": "kai"}, "has status 'archived'"),
        ({"alerts_seat": "gus"}, "SEATWIRE_ALERTS_SEAT='gus' is no seat"),
    ],
)
def test_the_oncall_member_and_the_seat_are_checked_at_start(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path, over: dict[str, str], says: str
) -> None:
    settings = settings_for(redis_url, tmp_path, **over)
    container = bootstrap.build_container(settings, client=redis_client)
    with pytest.raises(ConfigError, match=says):
        create_ingress(container, create_app(settings, container=container))


def test_the_three_alert_settings_come_together() -> None:
    env = {"SEATWIRE_ALERTS_TOKEN": "x", "SEATWIRE_ONCALL_MEMBER": "gus"}
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        with pytest.raises(ConfigError, match="SEATWIRE_ALERTS_SEAT not set"):
            load_settings(env)


def test_the_report_is_the_ordinary_blocked_on_a_person_shape() -> None:
    """Pure: the report fires `blocked_on_other` on the on-call member, carries the runbook
    as its link, and is the same report for every re-send of the same firing."""
    from contracts.alerts import AlertmanagerNotification
    from pipeline.engagement.triggers import evaluate_triggers

    [alert] = AlertmanagerNotification.model_validate(firing()).alerts
    report = alert_report(alert, seat_id="scout", oncall_id="gus")
    [fired] = evaluate_triggers(report)["fired"]
    assert (fired["trigger"], fired.get("ownerId")) == ("blocked_on_other", "gus")
    assert report.link == RUNBOOK and report.id == "alert:c5bfe1b2d3a1f6e0:1796548485123"
    assert report == alert_report(alert, seat_id="scout", oncall_id="gus")


def test_the_ingress_serves_redis_memory_and_its_process_figures(
    world: World, redis_client: redis.Redis
) -> None:
    """The scrape reads Redis's used_memory and maxmemory (what SeatwireRedisMemoryHigh
    divides), and the process's CPU, memory and version are beside them."""
    text = world.client.get("/metrics", headers=bearer(TOKEN)).text
    samples = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert samples["seatwire_redis_memory_used_bytes"] > 0
    limit = redis_client.info("memory")["maxmemory"]
    assert samples["seatwire_redis_memory_max_bytes"] == limit
    assert samples["process_cpu_seconds_total"] > 0
    assert samples["process_resident_memory_bytes"] > 0
    [build] = [name for name in samples if name.startswith("seatwire_build_info{")]
    assert 'version="' in build and samples[build] == 1.0
