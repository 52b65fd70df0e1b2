"""`seatwire dlq list` and `seatwire dlq replay` on a real Redis, and the refusals of
`seatwire beat` and `seatwire dlq` without one."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
import redis
from typer.testing import CliRunner

from tests.fakes import queued
from tests.workers.test_recovery import NOW, accept_work
from workers import cli as cli_module
from workers.cli import cli
from workers.queues import Queue, task_id
from workers.stores import keys
from workers.stores.dlq import DeadLetters
from workers.stores.journal import Journal

pytestmark = pytest.mark.redis
runner = CliRunner()
POISON = "t-poison-cli"
LETTER = task_id(POISON, Queue.ENGAGEMENT)


@pytest.fixture
def env(redis_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("SEATWIRE_REDIS_URL", redis_url)
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
    monkeypatch.setenv("SEATWIRE_OUTBOX_PATH", str(tmp_path / "outbox.jsonl"))
    monkeypatch.delenv("SEATWIRE_BROKER_URL", raising=False)


@pytest.fixture
def dead(redis_client: redis.Redis, env: None) -> dict[str, Any]:
    """One work report dead-lettered at the delivery cap; returns its message."""
    message = accept_work(Journal(redis_client), POISON).to_wire()
    letters = DeadLetters(redis_client, max_deliveries=5)
    for _ in range(5):
        letters.count_redelivery(POISON, queue=Queue.ENGAGEMENT, message=message, now_ms=NOW)
    assert letters.count() == 1
    return message


def snapshot(r: redis.Redis) -> dict[bytes, Any]:
    """Every key's type and content: equal snapshots mean nothing was written."""
    out: dict[bytes, Any] = {}
    for name in sorted(cast("list[bytes]", r.keys("*"))):
        kind = r.type(name)
        if kind == b"hash":
            out[name] = r.hgetall(name)
        elif kind == b"zset":
            out[name] = r.zrange(name, 0, -1, withscores=True)
        elif kind == b"list":
            out[name] = r.lrange(name, 0, -1)
        elif kind == b"string":
            out[name] = r.get(name)
        else:
            out[name] = kind
    return out


def test_list_shows_each_dead_letter_with_its_reason(
    dead: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dlq list --json` gives id, tracking id, stage, reason, deliveries, time and the
    message; the table shows the same at a glance."""
    result = runner.invoke(cli, ["dlq", "list", "--json"])
    assert result.exit_code == 0, result.output
    [letter] = json.loads(result.output)
    assert letter["id"] == LETTER and letter["trackingId"] == POISON
    assert (letter["stage"], letter["reason"], letter["deliveries"]) == (
        "engagement",
        "worker_lost_loop",
        5,
    )
    assert letter["message"] == dead and letter["atMs"] == NOW
    # The CLI's console took its width when it was made (COLUMNS, else 80): a wide one here.
    monkeypatch.setattr(cli_module.console, "width", 200)
    table = runner.invoke(cli, ["dlq", "list"])
    assert table.exit_code == 0, table.output
    assert LETTER in table.output and "worker_lost_loop" in table.output


def test_list_of_an_empty_queue_says_so(redis_client: redis.Redis, env: None) -> None:
    """An empty dead-letter queue is said to be empty (and `[]` in JSON)."""
    assert "empty" in runner.invoke(cli, ["dlq", "list"]).output
    assert json.loads(runner.invoke(cli, ["dlq", "list", "--json"]).output) == []


def test_replay_republishes_and_reopens_the_entry(
    dead: dict[str, Any], redis_client: redis.Redis
) -> None:
    """Replay puts the original message back on its queue under the same task id, reopens
    the journal entry in the state it had, resets its delivery count and empties the queue."""
    result = runner.invoke(cli, ["dlq", "replay", LETTER])
    assert result.exit_code == 0, result.output
    assert [(m["id"], m["arg"]) for m in queued(redis_client, Queue.ENGAGEMENT)] == [(LETTER, dead)]
    entry = Journal(redis_client).get(POISON)
    assert entry is not None and entry["state"] == "accepted"
    assert "deadReason" not in entry and "failedStage" not in entry
    assert redis_client.zscore(keys.JOURNAL_OPEN, POISON) is not None
    assert redis_client.hget(keys.deliveries(POISON), "engagement") is None
    assert DeadLetters(redis_client).list() == []


def test_replaying_twice_is_a_no_op(dead: dict[str, Any], redis_client: redis.Redis) -> None:
    """A second replay of the same letter publishes nothing and changes nothing."""
    assert runner.invoke(cli, ["dlq", "replay", LETTER]).exit_code == 0
    before = snapshot(redis_client)
    again = runner.invoke(cli, ["dlq", "replay", LETTER])
    assert again.exit_code == 0, again.output
    assert "already replayed" in again.output
    assert snapshot(redis_client) == before
    assert len(queued(redis_client, Queue.ENGAGEMENT)) == 1


def test_replaying_an_unknown_id_is_an_error_that_changes_nothing(
    dead: dict[str, Any], redis_client: redis.Redis
) -> None:
    """An id that is not in the dead-letter queue exits 2 and writes nothing."""
    before = snapshot(redis_client)
    result = runner.invoke(cli, ["dlq", "replay", "t-nope:engagement"])
    assert result.exit_code == 2
    assert "no dead letter" in result.output
    assert snapshot(redis_client) == before


def test_a_letter_replayed_after_its_event_ended_publishes_nothing(
    dead: dict[str, Any], redis_client: redis.Redis
) -> None:
    """If the event reached a final state meanwhile, replay only removes the letter."""
    redis_client.hset(keys.journal(POISON), "state", "engaged")
    result = runner.invoke(cli, ["dlq", "replay", LETTER])
    assert result.exit_code == 0 and "nothing re-published" in result.output
    assert queued(redis_client, Queue.ENGAGEMENT) == []
    assert DeadLetters(redis_client).count() == 0


@pytest.mark.parametrize("command", [["beat"], ["dlq", "list"], ["dlq", "replay", "x"]])
def test_beat_and_dlq_refuse_to_run_embedded(
    monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Without a shared Redis, beat and the dead-letter commands are refused with why."""
    monkeypatch.delenv("SEATWIRE_REDIS_URL", raising=False)
    monkeypatch.delenv("SEATWIRE_BROKER_URL", raising=False)
    result = runner.invoke(cli, command)
    assert result.exit_code == 2 and "SEATWIRE_REDIS_URL" in result.output
