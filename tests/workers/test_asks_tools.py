"""`list_asks` and `get_ask` (issue 26) in process on a real Redis: a seat's own asks, open
first then newest first, paged with a cursor that is the listing's own; another seat's ask
is as unknown as one that never was. (The MCP transports run them in
test_mcp_conformance.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from pipeline.asks import AnswerIn
from tests.ask_records import make_ask
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.settings import Settings
from workers.tools import ToolContext, ToolError, call, load

pytestmark = pytest.mark.redis
NOW = 1_800_000_000_000


@pytest.fixture
def container(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Container:
    settings = Settings(redis_url=redis_url, api_token="t", outbox_path=tmp_path / "o.jsonl")
    app = create_app(settings, register=False)
    load()  # every tool module registered, as the servers do
    return bootstrap.build_container(settings, app=app)


def as_seat(c: Container, seat: str, name: str, **args: Any) -> dict[str, Any]:
    known = c.org.current()[0].seat(seat)
    assert known is not None and c.app is not None
    return call(ToolContext(c, c.app, known, NOW + 10_000), name, args)


def test_list_asks_pages_open_first_then_newest(container: Container) -> None:
    c = container
    made = [make_ask(c.asks, key=f"k{n:02}", now_ms=NOW + n) for n in range(25)]
    for ask in made[:5]:  # the five oldest answered: listed after every open one
        c.asks.answer(ask.id, AnswerIn("done", "ben", "api"), now_ms=NOW + 100)
    make_ask(c.asks, seat="tally", key="theirs", now_ms=NOW + 50)

    first = as_seat(c, "scout", "list_asks")
    expected = [a.id for a in reversed(made[5:])] + [a.id for a in reversed(made[:5])]
    assert [a["id"] for a in first["asks"]] == expected[:20] and first["next"]
    assert all("history" not in a and a["lastEvent"] for a in first["asks"])
    rest = as_seat(c, "scout", "list_asks", cursor=first["next"])
    assert [a["id"] for a in rest["asks"]] == expected[20:] and rest["next"] is None
    assert [a["state"] for a in rest["asks"]] == ["answered"] * 5

    answered = as_seat(c, "scout", "list_asks", state="answered")
    assert [a["id"] for a in answered["asks"]] == expected[20:]
    for args in ({"cursor": first["next"], "state": "open"}, {"cursor": "nonsense"}):
        with pytest.raises(ToolError) as refused:
            as_seat(c, "scout", "list_asks", **args)
        assert (refused.value.code, refused.value.field) == ("invalid_cursor", "cursor")
    with pytest.raises(ToolError) as foreign:
        as_seat(c, "tally", "list_asks", cursor=first["next"])  # scout's cursor
    assert foreign.value.code == "invalid_cursor"


def test_get_ask_reads_only_the_seats_own(container: Container) -> None:
    c = container
    mine = make_ask(c.asks, key="mine", now_ms=NOW)
    theirs = make_ask(c.asks, seat="tally", key="theirs", now_ms=NOW)
    whole = as_seat(c, "scout", "get_ask", ask_id=mine.id)
    assert whole["ask"]["id"] == mine.id and whole["escalationAsks"] == []
    assert [e["event"] for e in whole["ask"]["history"]] == ["created", "sent"]
    for ask_id in (theirs.id, "ask-nothing-1"):
        with pytest.raises(ToolError) as unknown:
            as_seat(c, "scout", "get_ask", ask_id=ask_id)
        assert (unknown.value.code, unknown.value.status) == ("unknown_ask", 404)
        assert theirs.seat_id not in unknown.value.message
