"""The work controller on a real Redis (issue 12 points 3-6): a directed event leads to one
turn; a turn is never started twice; a dead worker's turn is settled as failed; a command
launcher's named fault rotates its session at once; three identical failures escalate once to
the operator with the verdict first, and a success clears it; no operator is `unroutable`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from contracts import Candidate, Directedness
from tests.fakes import per_turn, place
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.queues import Task
from workers.settings import Settings
from workers.stages import controller_tick, report_intake
from workers.stages.controller_tick import ControllerTick
from workers.stages.turns import Turns

pytestmark = pytest.mark.redis

NOW = 1_800_000_000_000
FAULT = "No conversation found with session ID: e953a33e-97a0-4d13-9fd4-6a77cd7a68c9"


def org_text(launcher: str, operator: str = "operatorId: ava") -> str:
    return f"""
members:
  - {{id: ava, displayName: Ava}}
  - {{id: scout}}
  - {{id: quiet}}
seats:
  - {{memberId: scout, {operator}, launcher: {launcher}}}
  - {{memberId: quiet}}
"""


def fault_program(tmp_path: Path) -> str:
    script = tmp_path / "agent.py"
    script.write_text(f"import sys\nprint({FAULT!r}, file=sys.stderr)\nsys.exit(1)\n")
    return f'{{kind: command, argv: ["{sys.executable}", "{script}"], output: text}}'


class Published:
    def __init__(self) -> None:
        self.messages: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(
        self, app: Celery, task: Task, tracking: str, message: dict[str, Any], **_: Any
    ) -> None:
        self.messages.append((task.value, tracking, message))

    def of(self, task: Task) -> list[dict[str, Any]]:
        return [m for t, _, m in self.messages if t == task.value]


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> Published:
    p = Published()
    monkeypatch.setattr(controller_tick, "publish_turns", per_turn(p))
    monkeypatch.setattr(report_intake, "publish", p)
    return p


def make(redis_client: redis.Redis, redis_url: str, tmp_path: Path, text: str) -> Container:
    org = tmp_path / "org.yaml"
    org.write_text(text)
    settings = Settings(
        redis_url=redis_url, api_token="t", org_file=org, outbox_path=tmp_path / "o.jsonl"
    )
    c = bootstrap.build_container(settings, client=redis_client)
    c.app = create_app(settings, register=False)
    return c


@pytest.fixture
def noop(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[Container]:
    yield make(redis_client, redis_url, tmp_path, org_text("{kind: noop}"))


def directed(c: Container, seat: str, n: int = 1) -> None:
    cand = Candidate.model_validate(
        {
            "family": "messaging",
            "source": "slack",
            "deliveryId": f"d{n}",
            "ids": {"channelId": "C1", "messageId": f"{n}.0"},
            "msg": {"authorId": "ava", "body": "scout, look", "mentions": [seat]},
            "atMs": NOW,
        }
    )
    place(
        c.redis,
        seat,
        cand,
        Directedness(directed=True, surface="mention", reason="mention", why="named"),
    )


def tick(c: Container, at: int) -> controller_tick.TickReport:
    assert c.app is not None
    return ControllerTick(c, c.app, rng=lambda: 0.5)(now_ms=at)


def turns(c: Container, at: int) -> Turns:
    assert c.app is not None
    return Turns.of(c, c.app).__class__(
        c, c.app, Turns.of(c, c.app).launchers, clock_ms=lambda: at, rng=lambda: 0.5
    )


def run_published(c: Container, published: Published, at: int) -> list[str]:
    from contracts.controller import TurnMessage

    done = []
    todo = published.of(Task.TURN)
    published.messages[:] = [x for x in published.messages if x[0] != Task.TURN.value]
    for m in todo:
        done.append(turns(c, at).run(TurnMessage.model_validate(m)))
    return done


def only_scout(published: Published) -> None:
    """Drop the other seats' turn messages (their turns stay queued)."""
    published.messages[:] = [
        x for x in published.messages if x[0] != Task.TURN.value or x[2]["seatId"] == "scout"
    ]


def test_a_directed_event_leads_to_exactly_one_turn(noop: Container, published: Published) -> None:
    """First tick runs each seat's first turn; after it, a directed event is one more turn
    (reason notices), a second tick while it is queued begins nothing, and a quiet seat idles."""
    tick(noop, NOW)
    assert sorted(m["seatId"] for m in published.of(Task.TURN)) == ["quiet", "scout"]
    assert run_published(noop, published, NOW + 10) == ["ok", "ok"]
    report = tick(noop, NOW + 1000)
    assert published.of(Task.TURN) == []
    assert report.decisions == {"wait:idle": 2}
    directed(noop, "scout")
    tick(noop, NOW + 2000)
    tick(noop, NOW + 3000)  # queued, not started: waits as active, publishes nothing new
    (turn,) = published.of(Task.TURN)
    assert turn["seatId"] == "scout"
    run = noop.seat_runs.get("scout").run
    assert run.active is not None and run.active.reason == "notices"
    assert run.last_decision is not None and run.last_decision.reason == "active"
    assert run_published(noop, published, NOW + 3500) == ["ok"]
    page = noop.inbox.updates("scout")
    assert len(page.items) == 1  # the noop launcher leaves the inbox to the seat
    noop.inbox.ack("scout", page.position)  # as the seat's runtime does, over the API
    tick(noop, NOW + 4000)
    assert published.of(Task.TURN) == []
    assert noop.seat_runs.get("quiet").run.last_decision.reason == "idle"  # type: ignore[union-attr]


def test_a_turn_message_twice_starts_one_turn(noop: Container, published: Published) -> None:
    """A copy of a turn's message (redelivery, republish) starts nothing."""
    tick(noop, NOW)
    messages = list(published.messages)
    assert run_published(noop, published, NOW + 1)[0] == "ok"
    published.messages[:] = messages
    assert run_published(noop, published, NOW + 2) == ["not_queued", "not_queued"]


def test_an_inbox_the_seat_never_acknowledges_stops_it_and_asks_its_operator(
    noop: Container, published: Published
) -> None:
    """A noop seat's turns end with its directed item unacknowledged: each counts as a
    failure, and at the limit the seat stops (`unacknowledged_inbox`) and its operator is
    asked, once."""
    tick(noop, NOW)
    run_published(noop, published, NOW + 1)
    directed(noop, "scout")
    t = NOW + 1000
    for _ in range(12):
        tick(noop, t)
        only_scout(published)
        run_published(noop, published, t + 1)
        t = max(t + 2, int(noop.seat_runs.get("scout").run.controller.retry_at or 0) + 1)
    run = noop.seat_runs.get("scout").run
    assert run.last_decision is not None and run.last_decision.reason == "failure_limit"
    assert run.escalation is not None
    assert run.escalation.signature == "controller:unacknowledged_inbox"
    (ask,) = published.of(Task.ENGAGEMENT)
    assert ask["report"]["headline"].startswith("3 turns in a row ended without acknowledging")
    assert ask["report"]["blocker"]["ownerId"] == "ava"


def test_a_queued_turn_nobody_started_is_published_again(
    noop: Container, published: Published
) -> None:
    """A crash between the tick's write and its publish loses nothing: the turn is published
    again once `turn_republish_after_ms` passed, under the same turn id."""
    tick(noop, NOW)
    first = {m["turnId"] for m in published.of(Task.TURN)}
    published.messages.clear()
    tick(noop, NOW + noop.settings.turn_republish_after_ms - 1)
    assert published.of(Task.TURN) == []
    tick(noop, NOW + noop.settings.turn_republish_after_ms)
    assert {m["turnId"] for m in published.of(Task.TURN)} == first


def test_a_running_turn_whose_lease_ran_out_is_settled_failed(
    noop: Container, published: Published
) -> None:
    """A worker that died mid-turn: the next tick past its lease records it failed
    (`turn:lost`) and the controller retries after its backoff."""
    tick(noop, NOW)
    (m, _) = published.of(Task.TURN)
    published.messages.clear()
    from pipeline.turns import start_turn

    noop.seat_runs.update(
        m["seatId"], lambda r: start_turn(r, m["turnId"], now_ms=NOW, lease_ms=1000)
    )
    tick(noop, NOW + 1001)
    run = noop.seat_runs.get(m["seatId"]).run
    assert run.active is None
    assert run.turns[-1].outcome.signature == "turn:lost"
    assert run.streak is not None and run.streak.streak == 1
    assert run.last_decision is not None and run.last_decision.reason == "retry_backoff"


def program(tmp_path: Path, body: str, sessions: bool = True) -> str:
    script = tmp_path / "agent.py"
    script.write_text(f"import os, sys\n{body}\n")
    extra = "" if sessions else ", sessionArgs: {}"
    return f'{{kind: command, argv: ["{sys.executable}", "{script}"], output: text{extra}}}'


def fail_turns(c: Container, published: Published, t: int, n: int) -> int:
    """Tick and run scout's turn `n` times, each after the previous one's retry backoff."""
    for i in range(n):
        tick(c, t)
        only_scout(published)
        assert run_published(c, published, t + 100) == ["failed"], i
        t = int(c.seat_runs.get("scout").run.controller.retry_at or t + 100) + 1
    return t


def test_the_named_fault_rotates_the_session_at_once(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, published: Published
) -> None:
    """A resume that prints "No conversation found with session ID" and exits 1 is rotated to
    a fresh session at once, proven, even with the hour's rotation budget spent."""
    body = (
        "if os.environ['SEATWIRE_SESSION_MODE'] == 'resume':\n"
        f"    print({FAULT!r}, file=sys.stderr); sys.exit(1)"
    )
    c = make(redis_client, redis_url, tmp_path, org_text(program(tmp_path, body)))
    tick(c, NOW)
    only_scout(published)
    assert run_published(c, published, NOW + 1) == ["ok"]  # a fresh session: session-id mode
    first = c.seat_runs.get("scout").run.session
    assert first is not None and first.last_launch_at is not None
    spent = ("2027-01-15T07:59:00.000Z",) * 3  # three rotations in the last hour

    def budget_spent(r: Any) -> Any:
        assert r.session is not None
        return r.model_copy(update={"session": r.session.model_copy(update={"rotations": spent})})

    c.seat_runs.update("scout", budget_spent)
    directed(c, "scout")
    tick(c, NOW + 1000)
    only_scout(published)
    assert run_published(c, published, NOW + 1001) == ["failed"]
    run = c.seat_runs.get("scout").run
    outcome = run.turns[-1].outcome
    assert (outcome.failure_kind, outcome.proven) == ("resume-target-missing", True)
    assert outcome.signature == "resume:resume-target-missing"
    assert run.session is not None and run.session.rotated_from == first.session_id
    assert run.session.session_id != first.session_id and run.session.last_launch_at is None
    assert "does not exist on this machine" in (run.session.rotated_reason or "")
    assert len(run.session.rotations) == 4
    # The failed turn's record names the session it resumed (the dead one), not the fresh one.
    assert outcome.session_id == first.session_id


def test_three_identical_failures_escalate_once_and_a_success_clears_it(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, published: Published
) -> None:
    """Three identical failures: exactly one escalation ask, to the operator, whose first
    sentence is the verdict; the seat stops; run-now and a success clear it."""
    flag = tmp_path / "fixed"
    body = f"sys.exit(0 if os.path.exists({str(flag)!r}) else 3)"
    c = make(redis_client, redis_url, tmp_path, org_text(program(tmp_path, body, False)))
    t = fail_turns(c, published, NOW, 3)
    run = c.seat_runs.get("scout").run
    assert run.streak is not None and run.streak.streak == 3
    assert run.streak.signature == "command:never-beaten:3"
    (engaged,) = published.of(Task.ENGAGEMENT)
    report = engaged["report"]
    assert report["blocker"]["ownerId"] == "ava"
    assert report["headline"].startswith(
        "3× in a row, identically — retries are not fixing it and this needs a person."
    )
    assert "exit 3" in report["headline"]
    assert run.escalation is not None and run.escalation.target_id == "ava"
    published.messages.clear()
    tick(c, t)
    assert published.messages == []  # stopped at the failure limit, nothing raised again
    assert c.seat_runs.get("scout").run.last_decision.reason == "failure_limit"  # type: ignore[union-attr]
    flag.write_text("")
    seat = c.org.current()[0].seat("scout")
    assert seat is not None
    c.seat_runs.control("scout", "run-now", options=seat.controller)
    tick(c, t + 1)
    only_scout(published)
    assert run_published(c, published, t + 2) == ["ok"]
    run = c.seat_runs.get("scout").run
    assert run.streak is None and run.escalation is None
    assert run.turns[-1].reason == "steering"


def test_no_operator_no_supervisor_is_unroutable(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, published: Published
) -> None:
    """An escalation with nobody to ask is an `unroutable` ledger row, never silence."""
    text = org_text(
        '{kind: http, url: "http://127.0.0.1:9/turn", timeoutS: 0.5}', operator="aliases: [s]"
    )
    c = make(redis_client, redis_url, tmp_path, text)
    t = NOW
    for _ in range(3):
        tick(c, t)
        only_scout(published)
        assert run_published(c, published, t + 1) == ["failed"]
        t = int(c.seat_runs.get("scout").run.controller.retry_at or t) + 1
    assert published.of(Task.ENGAGEMENT) == []
    rows = c.ledger.read(seat_ids=["scout"])
    assert [r.outcome for r in rows] == ["unroutable"]
    assert "3× in a row" in (rows[0].reason or "")


def test_a_pause_interrupts_a_running_command_turn(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, published: Published
) -> None:
    """A pause while a command turn runs: the tick asks for the interrupt, the launcher ends
    the process group within about a second, the outcome is `interrupted` (no failure), and
    after resume the seat runs again (still its `first` turn: an interrupted turn was not an
    outcome)."""
    import threading
    import time

    c = make(
        redis_client,
        redis_url,
        tmp_path,
        org_text(program(tmp_path, "import time; time.sleep(30)", False)),
    )
    seat = c.org.current()[0].seat("scout")
    assert seat is not None
    tick(c, NOW)
    only_scout(published)
    done: list[str] = []
    worker = threading.Thread(target=lambda: done.extend(run_published(c, published, NOW + 1)))
    started = time.monotonic()
    worker.start()
    deadline = time.monotonic() + 60
    while (a := c.seat_runs.get("scout").run.active) is None or a.state != "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    c.seat_runs.control("scout", "pause", options=seat.controller)
    tick(c, NOW + 2)
    assert c.seat_runs.get("scout").run.last_decision.reason == "paused"  # type: ignore[union-attr]
    worker.join(timeout=60)
    # Far below the program's 30 s: it was interrupted, not left to finish.
    assert done == ["interrupted"] and time.monotonic() - started < 25
    run = c.seat_runs.get("scout").run
    assert run.turns[-1].outcome.kind == "interrupted" and run.controller.failures == 0
    c.seat_runs.control("scout", "resume", options=seat.controller)
    tick(c, NOW + 3)
    assert c.seat_runs.get("scout").run.active.reason == "first"  # type: ignore[union-attr]


def test_a_claude_turns_usage_and_cost_reach_the_outcome_and_the_spend(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, published: Published
) -> None:
    """A command turn's stream-json result: session id, model, usage and cost in the outcome;
    the cost a frame of the seat's (spend under `costEnforcement: on`); permission denials
    counted by tool name only, the tool's input never kept."""
    body = (
        "import json\n"
        "sid = os.environ['SEATWIRE_SESSION_ID']\n"
        "print(json.dumps({'type': 'system', 'subtype': 'init', 'model': 'claude-x', "
        "'session_id': sid}))\n"
        "print(json.dumps({'type': 'result', 'session_id': sid, 'total_cost_usd': 0.0123, "
        "'usage': {'input_tokens': 10, 'output_tokens': 5}, 'result': 'done', "
        "'is_error': False, 'permission_denials': [{'tool_name': 'Bash', "
        "'tool_use_id': 't1', 'tool_input': {'command': 'cat SECRET-TOKEN'}}]}))"
    )
    launcher = program(tmp_path, body).replace(
        "output: text", "output: claude, costEnforcement: on"
    )
    c = make(redis_client, redis_url, tmp_path, org_text(launcher))
    tick(c, NOW)
    only_scout(published)
    assert run_published(c, published, NOW + 1) == ["ok"]
    run = c.seat_runs.get("scout").run
    outcome = run.turns[-1].outcome
    assert run.session is not None and outcome.session_id == run.session.session_id
    assert outcome.model == "claude-x" and outcome.usage == {"input_tokens": 10, "output_tokens": 5}
    assert (outcome.cost_micros, outcome.enforcement, outcome.denials) == (12_300, "on", 1)
    assert "SECRET-TOKEN" not in run.model_dump_json()
    (frame,) = c.costs.frames("scout")
    assert (frame.cost_micros, frame.enforcement, frame.turn_id) == (12_300, "on", "scout:turn:1")


# ---------------------------------------------------------------------- lingering agents


def linger(c: Container, published: Published, *, host: str, pgid: int) -> None:
    """Scout's first turn is running with an agent on `host` in group `pgid` when its
    worker dies: the tick at its lease settles it lost and leaves the agent lingering."""
    from contracts.controller import AgentProcess

    tick(c, NOW)
    only_scout(published)
    published.messages.clear()

    def running(run: Any) -> Any:
        assert run.active is not None
        agent = AgentProcess(
            turn_id=run.active.turn_id, host=host, until_ms=NOW + 60_000, pgid=pgid
        )
        active = run.active.model_copy(
            update={
                "state": "running",
                "started_at_ms": NOW,
                "lease_until_ms": NOW + 60_000,
                "agent": agent,
            }
        )
        return run.model_copy(update={"active": active})

    c.seat_runs.update("scout", running)
    tick(c, NOW + 60_001)
    run = c.seat_runs.get("scout").run
    assert run.lingering is not None and run.turns[-1].outcome.signature == "turn:lost"


def test_a_retry_waits_while_the_lost_turns_agent_elsewhere_may_still_run(
    noop: Container, published: Published
) -> None:
    """A lost turn's agent on another host cannot be looked at: the retry holds (queued, the
    reason on its record) until the agent's lease and 5 s for clock skew have passed, then
    starts and says why."""
    linger(noop, published, host="another-host/boot/1", pgid=4242)

    def later(r: Any) -> Any:
        assert r.lingering is not None
        lingering = r.lingering.model_copy(update={"until_ms": NOW + 200_000})
        return r.model_copy(update={"lingering": lingering})

    noop.seat_runs.update("scout", later)
    tick(noop, NOW + 100_000)
    only_scout(published)
    assert run_published(noop, published, NOW + 100_001) == ["held"]
    run = noop.seat_runs.get("scout").run
    assert run.active is not None and run.active.state == "queued"
    assert run.active.held is not None and run.active.held.reason == "agent_unproven"
    assert run.active.held.until_ms == NOW + 205_000 and run.lingering is not None
    turn = run.active.turn_id
    from contracts.controller import TurnMessage

    message = TurnMessage(seat_id="scout", turn_id=turn)
    assert turns(noop, NOW + 204_999).run(message) == "held"
    assert turns(noop, NOW + 205_000).run(message) == "ok"
    run = noop.seat_runs.get("scout").run
    assert run.lingering is None and run.turns[-1].turn_id == turn
    assert "that has passed" in (run.turns[-1].cleared or "")


def test_a_retry_on_the_same_host_starts_once_the_agent_is_proven_gone(
    noop: Container, published: Published
) -> None:
    """A lost turn's agent on this host whose group has no process left is proven gone: the
    retry starts at once, its record saying so."""
    from workers.outbound import agents

    linger(noop, published, host=agents.host_id(), pgid=2**22 - 11)
    tick(noop, NOW + 100_000)
    only_scout(published)
    assert run_published(noop, published, NOW + 100_001) == ["ok"]
    run = noop.seat_runs.get("scout").run
    assert run.lingering is None
    assert "no process is left" in (run.turns[-1].cleared or "")


def test_a_failing_cost_frame_does_not_stop_the_escalation(
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    published: Published,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A settlement effect that raises (the cost frame here) is dead-lettered with its reason,
    and the escalation after three identical failures still reaches the engagement stage
    with a target and a tracking id on the record."""
    from workers.stages import turns as turns_stage

    def broken(c: Container, settled: Any) -> None:
        raise ValueError("a frame the store refuses")

    monkeypatch.setattr(turns_stage, "_cost", broken)
    c = make(redis_client, redis_url, tmp_path, org_text(program(tmp_path, "sys.exit(3)", False)))
    fail_turns(c, published, NOW, 3)
    (engaged,) = published.of(Task.ENGAGEMENT)
    assert engaged["report"]["blocker"]["ownerId"] == "ava"
    run = c.seat_runs.get("scout").run
    assert (
        run.escalation is not None
        and run.escalation.tracking_id
        and run.escalation.target_id == "ava"
    )
    letters = c.dead_letters.list()
    assert len(letters) == 3 and {x.reason for x in letters} == {"settle:cost:ValueError"}
    assert all(x.stage == "turns" and x.message and x.message["seatId"] == "scout" for x in letters)


def test_an_escalation_whose_report_was_never_raised_is_raised_by_a_tick(
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    published: Published,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker that dies between writing the escalation and raising its report leaves it
    with no tracking id: a tick after ESCALATION_RETRY_MS raises the same report once, and
    the record then names its tracking id and target."""
    from pipeline.turns import ESCALATION_RETRY_MS
    from workers.stages import turns as turns_stage

    real = turns_stage.raise_escalation
    monkeypatch.setattr(
        turns_stage, "raise_escalation", lambda *a, **k: (_ for _ in ()).throw(SystemError("died"))
    )
    c = make(redis_client, redis_url, tmp_path, org_text(program(tmp_path, "sys.exit(3)", False)))
    t = fail_turns(c, published, NOW, 3)
    assert published.of(Task.ENGAGEMENT) == []
    run = c.seat_runs.get("scout").run
    assert run.escalation is not None and run.escalation.tracking_id is None
    monkeypatch.setattr(turns_stage, "raise_escalation", real)
    monkeypatch.setattr(controller_tick, "apply_effects", turns_stage.apply_effects)
    tick(c, run.escalation.at_ms + ESCALATION_RETRY_MS - 1)
    assert published.of(Task.ENGAGEMENT) == []
    tick(c, run.escalation.at_ms + ESCALATION_RETRY_MS)
    (engaged,) = published.of(Task.ENGAGEMENT)
    assert engaged["report"]["revision"] == 1 and engaged["report"]["id"] == "seat-turns:scout"
    after = c.seat_runs.get("scout").run.escalation
    assert after is not None and after.tracking_id and after.target_id == "ava"
    tick(c, run.escalation.at_ms + 3 * ESCALATION_RETRY_MS)
    assert len(published.of(Task.ENGAGEMENT)) == 1
    assert t > 0


def test_a_settle_rides_out_a_short_redis_outage_in_place(
    noop: Container, published: Published, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A settle whose first two writes meet a connection error is tried again in place
    (tenacity, no sleep here) and settles the turn once; a fifth failure in a row is raised."""
    from workers.stages import turns as turns_stage

    monkeypatch.setattr(turns_stage.SETTLE_RETRYING, "sleep", lambda _s: None)
    real = turns_stage.Turns._settle_once
    failures = {"left": 2}

    def flaky(self: Any, *args: Any) -> Any:
        if failures["left"] > 0:
            failures["left"] -= 1
            raise redis.ConnectionError("reset by peer")
        return real(self, *args)

    monkeypatch.setattr(turns_stage.Turns, "_settle_once", flaky)
    tick(noop, NOW)
    only_scout(published)
    assert run_published(noop, published, NOW + 1) == ["ok"]
    assert failures["left"] == 0 and len(noop.seat_runs.get("scout").run.turns) == 1
    failures["left"] = 5
    directed(noop, "scout")
    tick(noop, NOW + 1000)
    only_scout(published)
    with pytest.raises(redis.ConnectionError):
        run_published(noop, published, NOW + 1001)
    run = noop.seat_runs.get("scout").run
    assert run.active is not None and run.active.state == "running"  # the lease settles it
