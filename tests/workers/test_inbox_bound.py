"""A seat's inbox is bounded (issue 14, item 3), on a real Redis: it holds at most its cap of
unread items, the unread ones are never dropped to make room, and an item that finds it full
is written down instead of put in it: a ledger row `inbox_full` naming the delivery, the count
the seat's next read reports until it acknowledges, the deployment's count and its metric.
The rule is one (inbox_common.lua), so every way into an inbox keeps it: directed events,
messages between seats, project items."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from contracts import Candidate
from contracts.messages import InboundEnvelope
from tests.auth import as_seats
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.ingress.app import create_ingress
from workers.settings import Settings
from workers.stores import keys
from workers.stores.inbound import inbound_tracking_id

pytestmark = pytest.mark.redis

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOW = 1_800_000_000_000
ORG = """
members:
  - {id: ann, aliases: [U0ANN]}
  - {id: scout, aliases: [U0SCOUT]}
  - {id: sage, aliases: [U0SAGE]}
channels: [{id: C-PUB, kind: PUBLIC}]
seats: [{memberId: scout}, {memberId: sage}]
"""
CAP = 2


@pytest.fixture
def world(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> Iterator[tuple[TestClient, Container]]:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url,
        api_token=TOKEN,
        org_file=org,
        outbox_path=tmp_path / "o.jsonl",
        inbox_cap=CAP,
    )
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    with TestClient(create_ingress(container, app, clock_ms=lambda: NOW)) as http:
        as_seats(http)
        yield http, container


def mention(c: Container, ts: str, seat_alias: str = "U0SCOUT") -> Candidate:
    """A channel message mentioning a seat, through the directedness stage."""
    from workers.stages.directedness import Directedness

    candidate = Candidate.model_validate(
        {
            "family": "messaging",
            "source": "slack",
            "deliveryId": f"slack:T1:C-PUB:{ts}",
            "ids": {"channelId": "C-PUB", "messageId": ts},
            "msg": {
                "authorId": "U0ANN",
                "body": f"<@{seat_alias}> look",
                "mentions": [seat_alias],
                "channelKind": "PUBLIC",
            },
            "atMs": NOW,
        }
    )
    tracking = inbound_tracking_id(candidate.delivery_id)
    env = InboundEnvelope(tracking_id=tracking, accepted_at_ms=NOW, candidate=candidate)
    c.journal.accept(
        tracking,
        kind="inbound",
        seat_id="",
        payload=env.model_dump_json(by_alias=True),
        now_ms=NOW,
        fingerprint="",
    )
    Directedness(c.org, c.inbound, lambda: NOW)(env)
    return candidate


def overflow_rows(c: Container, seat: str) -> list[str]:
    return [r.work_id for r in c.ledger.read(seat_ids=[seat]) if r.reason_code == "inbox_full"]


def test_a_full_inbox_keeps_its_unread_items_and_writes_down_the_next(
    world: tuple[TestClient, Container],
) -> None:
    _http, c = world
    first, second = mention(c, "1.1"), mention(c, "1.2")
    third = mention(c, "1.3")

    page = c.inbox.updates("scout")
    assert [i.delivery_id for i in page.items] == [first.delivery_id, second.delivery_id]
    assert [i.position for i in page.items] == [1, 2] and page.overflowed == 1
    assert page.has_more is False
    (verdict,) = [
        s for s in (c.inbound.trace(third.delivery_id) or pytest.fail()).seats if s.directed
    ]
    assert (verdict.seat_id, verdict.position, verdict.inbox_full) == ("scout", None, True)
    assert overflow_rows(c, "scout") == [third.delivery_id]
    (row,) = [r for r in c.ledger.read(seat_ids=["scout"]) if r.reason_code == "inbox_full"]
    assert row.outcome == "none" and not row.engaged and "2 unread items" in (row.reason or "")
    assert c.redis.hget(keys.STATS, "inboxOverflowed") == b"1"
    assert c.inbox.overflowed() == 1
    # the seat that was not full got nothing and lost nothing
    assert c.inbox.updates("sage").items == () and overflow_rows(c, "sage") == []

    # the same delivery again changes nothing: one row, one count
    mention(c, "1.3")
    assert overflow_rows(c, "scout") == [third.delivery_id] and c.inbox.overflowed() == 1

    # acknowledged: the refusal has been reported, and there is room again
    after = c.inbox.ack("scout", 2)
    assert after.items == () and after.overflowed == 0
    fourth = mention(c, "1.4")
    (item,) = c.inbox.updates("scout").items
    assert (item.position, item.delivery_id) == (3, fourth.delivery_id)


def test_messages_and_project_items_keep_the_same_bound(
    world: tuple[TestClient, Container],
) -> None:
    http, c = world
    mention(c, "2.1")
    mention(c, "2.2")  # scout is full; sage is empty
    resp = http.post(
        "/v1/seats/sage/tools/send_message",
        headers=AUTH,
        json={"to": ["scout"], "body": "hi", "client_message_id": "m1"},
    )
    assert resp.status_code == 200, resp.text
    message_id = resp.json()["messageId"]
    assert overflow_rows(c, "scout") == [message_id]
    assert len(c.inbox.updates("scout").items) == CAP

    resp = http.post("/v1/project/pause", headers=AUTH, json={"by": "ann"})
    assert resp.status_code == 200 and resp.json()["full"] == ["scout"]
    (item,) = c.inbox.updates("sage").items
    assert item.reason == "project_pause"
    assert len(overflow_rows(c, "scout")) == 2 and c.inbox.updates("scout").overflowed == 2
    assert c.redis.hget(keys.seat_state("scout"), "notices") == b"2"  # the two put in

    metrics = http.get("/metrics", headers=AUTH).text
    assert "seatwire_inbox_overflowed_total 2.0" in metrics
