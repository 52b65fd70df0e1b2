"""The project's start, pause, resume and announcements on a real Redis (issue 13,
get_updates' project-wide items): one item in every seat's inbox with the flag, in one step;
not a directed notice; project-only news waits the controller's announcement jitter, and a
directed item after it is ordinary news again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from pipeline.turns import news_of
from tests.fakes import place
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.ingress.app import create_ingress
from workers.settings import Settings

pytestmark = pytest.mark.redis

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ORG = """
members: [{id: ava}, {id: scout}, {id: tally}]
seats: [{memberId: scout}, {memberId: tally}]
"""


@pytest.fixture
def built(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> Iterator[tuple[TestClient, Container]]:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url, api_token=TOKEN, org_file=org, outbox_path=tmp_path / "o.jsonl"
    )
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    with TestClient(create_ingress(container, app, clock_ms=lambda: 1_000)) as c:
        yield c, container


def seen(c: Container, seat: str) -> dict[str, object]:
    ((_read, observed),) = c.seat_runs.observe([seat], now_ms=1)
    return news_of(seat, observed, at_ms=1)


def test_pause_and_resume_reach_every_seat_with_the_flag(
    built: tuple[TestClient, Container],
) -> None:
    """A pause sets the flag and puts one item in each seat's inbox, not counted as a notice;
    the controller's news says paused; resume clears it."""
    client, c = built
    resp = client.post("/v1/project/pause", headers=AUTH, json={"by": "ava"})
    assert resp.status_code == 200 and resp.json()["seats"] == 2
    for seat in ("scout", "tally"):
        (item,) = c.inbox.updates(seat).items
        assert item.candidate.msg is not None
        assert (item.reason, item.surface, item.candidate.msg.author_id) == (
            "project_pause",
            "project",
            "ava",
        )
        assert c.redis.hget(f"sw:seat:{seat}", "notices") is None
    news = seen(c, "scout")
    assert news["project"] == {"started": True, "paused": True} and news["project_only"] is True
    client.post("/v1/project/resume", headers=AUTH)
    assert seen(c, "scout")["project"] == {"started": True, "paused": False}


def test_project_only_news_until_a_directed_item_follows(
    built: tuple[TestClient, Container],
) -> None:
    """Announcements alone are project-only news; a directed item after them is not; once
    that is acknowledged, a new announcement is project-only again."""
    client, c = built
    assert (
        client.post(
            "/v1/project/announcements", headers=AUTH, json={"body": "Freeze Friday"}
        ).status_code
        == 200
    )
    client.post("/v1/project/announcements", headers=AUTH, json={"body": "Thaw Monday"})
    assert seen(c, "scout")["project_only"] is True
    from contracts import Candidate, Directedness

    cand = Candidate.model_validate(
        {
            "family": "messaging",
            "source": "slack",
            "deliveryId": "d1",
            "ids": {"channelId": "C1", "messageId": "1.0"},
            "msg": {"authorId": "ava", "body": "scout?", "mentions": ["scout"]},
            "atMs": 5,
        }
    )
    place(
        c.redis,
        "scout",
        cand,
        Directedness(directed=True, surface="mention", reason="mention", why="named"),
    )
    assert seen(c, "scout")["project_only"] is False
    c.inbox.ack("scout", c.inbox.updates("scout").position)
    client.post("/v1/project/announcements", headers=AUTH, json={"body": "Lunch"})
    assert seen(c, "scout")["project_only"] is True and seen(c, "scout")["pending"] == 1


def test_a_bad_body_is_refused_and_writes_nothing(built: tuple[TestClient, Container]) -> None:
    """An announcement without a body, or with an unknown field, is a 422; no inbox changes."""
    client, c = built
    assert client.post("/v1/project/announcements", headers=AUTH, json={}).status_code == 422
    assert client.post("/v1/project/pause", headers=AUTH, json={"why": "x"}).status_code == 422
    assert c.inbox.updates("scout").items == ()


def test_a_changed_project_card_is_announced_once(
    built: tuple[TestClient, Container],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The controller's first tick records the card silently; after the org file's card
    changes, the next ticks put one `project_card` item in every seat's inbox, once."""
    from workers.stages import controller_tick
    from workers.stages.controller_tick import ControllerTick

    monkeypatch.setattr(controller_tick, "publish_turns", lambda *a, **k: None)
    _client, c = built
    tick = ControllerTick(c, c.app, rng=lambda: 0.5)
    tick(now_ms=1_000)
    assert c.inbox.updates("scout").items == ()
    org = c.settings.org_file
    org.write_text(org.read_text().replace("members:", "project: {name: Atlas}\nmembers:", 1))
    import os

    os.utime(org, (2_000_000_000, 2_000_000_000))  # a new mtime: the org source re-reads it
    tick(now_ms=2_000)
    tick(now_ms=3_000)
    for seat in ("scout", "tally"):
        (item,) = c.inbox.updates(seat).items
        assert item.candidate.msg is not None
        assert item.reason == "project_card" and "Atlas" in item.candidate.msg.body
    project = seen(c, "scout")["project"]
    assert isinstance(project, dict) and project["card"]
