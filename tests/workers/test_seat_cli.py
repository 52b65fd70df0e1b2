"""`seatwire seat status|pause|resume|run-now SEAT` and `seatwire seats` against a real Redis
(issue 12 point 7): the controls write the seat's record, the status and the table show the
decision, streak and turns, an unknown seat is refused with its name."""

from __future__ import annotations

import json

import pytest
import redis
from typer.testing import CliRunner

from contracts.controller import LastDecision, LaunchStreak, SeatRun
from workers.cli import cli
from workers.stores.seat_runs import Read, SeatRuns

pytestmark = pytest.mark.redis
runner = CliRunner()


@pytest.fixture
def runs(redis_client: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> SeatRuns:
    monkeypatch.setenv("SEATWIRE_REDIS_URL", redis_url)
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
    store = SeatRuns(redis_client)
    run = SeatRun(
        seat_id="scout",
        last_decision=LastDecision(action="stop", reason="failure_limit", at_ms=1),
        streak=LaunchStreak(signature="resume:binary-missing", streak=3),
    )
    assert store.commit([(Read(0, SeatRun(seat_id="scout")), run)]) == [True]
    return store


def test_controls_write_the_record_and_status_shows_it(runs: SeatRuns) -> None:
    """pause / resume / run-now change the record; status prints decision and streak."""
    assert runner.invoke(cli, ["seat", "pause", "scout"]).exit_code == 0
    assert runs.get("scout").run.paused is True
    assert runner.invoke(cli, ["seat", "resume", "scout"]).exit_code == 0
    assert runs.get("scout").run.paused is False
    done = runner.invoke(cli, ["seat", "run-now", "scout"])
    assert done.exit_code == 0 and "run-now recorded" in done.output
    assert runs.get("scout").run.steering is True
    shown = runner.invoke(cli, ["seat", "status", "scout"])
    assert shown.exit_code == 0, shown.output
    assert "stop: failure_limit" in shown.output and "resume:binary-missing" in shown.output
    body = json.loads(runner.invoke(cli, ["seat", "status", "scout", "--json"]).output)
    assert body["streak"]["streak"] == 3 and body["steering"] is True


def test_seats_lists_every_seat(runs: SeatRuns) -> None:
    """`seatwire seats` has a row per seat of the org, those never ticked included."""
    rows = json.loads(runner.invoke(cli, ["seats", "--json"]).output)
    assert [r["seatId"] for r in rows] == ["scout", "tally"]
    assert rows[0]["streak"]["streak"] == 3 and rows[1]["lastDecision"] is None
    table = runner.invoke(cli, ["seats"])
    assert table.exit_code == 0 and "scout" in table.output and "tally" in table.output


def test_an_unknown_seat_is_refused(runs: SeatRuns) -> None:
    """A seat that is not in the org file is refused with exit 2 and its name."""
    done = runner.invoke(cli, ["seat", "pause", "nobody"])
    assert done.exit_code == 2 and "'nobody' is not a seat" in done.output
