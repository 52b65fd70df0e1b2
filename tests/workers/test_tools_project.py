"""`get_project`, `find_agents` and `get_updates` over the tool routes on a real Redis (issue
13): the card and flags, seats by name with cursors and freshness, the inbox and its ack; bad
arguments named; an unknown tool 404, a project tool not served yet 501."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from tests.auth import as_seats
from workers import bootstrap
from workers.celery_app import create_app
from workers.ingress.app import create_ingress
from workers.settings import Settings

pytestmark = pytest.mark.redis

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ORG = """
project:
  {name: Atlas, mission: Ship the billing rewrite, rules: [review every PR], repository: acme/atlas}
members:
  - {id: ava, displayName: Ava}
  - {id: scout, displayName: Scout}
  - {id: sage, displayName: Sage}
  - {id: tally, displayName: Tally}
seats:
  - {memberId: scout, operatorId: ava}
  - {memberId: sage, operatorId: ava}
  - {memberId: tally}
"""


@pytest.fixture
def client(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url, api_token=TOKEN, org_file=org, outbox_path=tmp_path / "o.jsonl"
    )
    app = create_app(settings, register=False)
    with TestClient(create_ingress(bootstrap.build_container(settings, app=app), app)) as c:
        as_seats(c)
        yield c


def tool(client: TestClient, seat: str, name: str, **args: object) -> tuple[int, dict[str, Any]]:
    resp = client.post(f"/v1/seats/{seat}/tools/{name}", headers=AUTH, json=args)
    return resp.status_code, resp.json()


def test_get_project_is_the_card_and_the_caller(client: TestClient) -> None:
    """The org file's card, started and not paused by default, the caller and the count."""
    status, body = tool(client, "scout", "get_project")
    assert status == 200
    assert body["project"]["name"] == "Atlas" and body["project"]["rules"] == ["review every PR"]
    assert (body["project"]["started"], body["project"]["paused"]) == (True, False)
    assert body["you"] == {"id": "scout", "name": "Scout", "operatorId": "ava"}
    assert body["agentCount"] == 3 and body["serverTime"] == body["agentCountObservedAt"]


def test_find_agents_pages_by_name_with_freshness(client: TestClient) -> None:
    """Name order, a prefix, a cursor; the caller's own call makes it fresh; same operator."""
    tool(client, "sage", "get_project")
    status, body = tool(client, "scout", "find_agents")
    assert status == 200 and [a["id"] for a in body["agents"]] == ["sage", "scout", "tally"]
    sage = body["agents"][0]
    assert (sage["contact"], sage["sameOperator"], sage["operator"]) == ("lt_90s", True, "Ava")
    assert body["agents"][2]["contact"] is None and body["agents"][2]["sameOperator"] is False
    assert [
        a["id"] for a in tool(client, "scout", "find_agents", name_prefix="s")[1]["agents"]
    ] == [
        "sage",
        "scout",
    ]
    bad = tool(client, "scout", "find_agents", cursor="nope")
    assert bad[0] == 422 and bad[1]["field"] == "cursor"


def test_get_updates_and_ack(client: TestClient) -> None:
    """An empty inbox at position 0; an ack beyond it is a 409 naming the field."""
    status, page = tool(client, "scout", "get_updates")
    assert status == 200 and page["items"] == [] and page["position"] == 0
    status, body = tool(client, "scout", "get_updates", ack=5)
    assert status == 409 and body["error"] == "ack_beyond_last" and body["field"] == "ack"


def test_bad_arguments_and_tools(client: TestClient) -> None:
    """A wrong type is 422 naming the field; an unknown tool 404; no seat 403 (no token is
    valid for it)."""
    status, body = tool(client, "scout", "get_updates", ack="5")
    assert status == 422 and body["error"] == "invalid_arguments" and body["field"] == "ack"
    assert tool(client, "scout", "make_coffee")[0] == 404
    assert tool(client, "nobody", "get_project")[0] == 403
