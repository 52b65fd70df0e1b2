"""The work controller on beat, end to end with real processes (issue 12, "How it will be
checked"): `seatwire ingress`, a stage worker (directedness, engagement, guardrails, send), a
`controller` worker, a `turns` worker and `seatwire beat` as processes on a redis-server of
the test's own; seat scout's turns run a `command` launcher, a small Python program written
by the test, which logs every turn it runs (`$SEATWIRE_TURN`, its session mode and id, start
and end times) and holds a lock file created with O_EXCL while it runs, so that a second
concurrent turn of the seat is written down as a violation.

1. A really signed, directed Slack message leads to exactly one more turn (reason
   `notices`, outcome ok); the quiet seat idles.
2. The named fault: a resume that prints "No conversation found with session ID: <id>" and
   exits 1 rotates the session at once (proven, `resume-target-missing`), and the retry starts
   the fresh session.
3. Three identical failures are exactly one escalation ask in the outbox, to the operator,
   verdict first; the seat stops (`failure_limit`); run-now and a success clear it.
4. Two beats at once and the controller worker SIGKILLed between ticks (twice) while two
   seats turn over and over: no turn id runs twice, no two turns of a seat at once, every
   turn begun is run, and a failing seat's streak keeps counting across the kills.

Each test prints its figures (run with -s to see them).
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml

from bench.chaos import TOKEN, Fleet, RedisServer, fleet_env
from pipeline.signatures import slack_headers
from tests.auth import routes_as_seats, seat_token
from workers.org import OrgSource
from workers.outbound.file import read_outbox
from workers.settings import REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

SLACK_SECRET = "e2e-controller-slack-secret"
TEAM = "T0SEATWIRE"
INTERVAL_S = 0.2  # SEATWIRE_CONTROLLER_INTERVAL_S
VERDICT = "3× in a row, identically — retries are not fixing it and this needs a person."
STAGES = ["worker", "--queues", "directedness,engagement,guardrails,send", "--concurrency", "2"]
CONTROLLER = ["worker", "--queues", "controller", "--concurrency", "1"]
TURNS = ["worker", "--queues", "turns", "--concurrency", "2"]
TICK_DONE = "seatwire.controller.tick["  # Celery's "Task seatwire.controller.tick[id] succeeded"

# The agent the `command` launcher runs. It reads its brief from stdin, holds `<seat>.lock`
# (O_EXCL: a second turn of the seat at once cannot take it, and says so in violations.log),
# logs one JSON line per turn to runs.log, acknowledges the inbox page it was handed (as an
# agent that read its brief does), then behaves as BEHAVIOUR says: `ok` exits 0, `fail`
# exits 3 unless the flag file exists, `fault` exits 1 with the named fault in resume mode.
AGENT = r"""
import json, os, sys, time, urllib.request

BEHAVIOUR = sys.argv[1]
WORKDIR = sys.argv[2]
seat = os.environ["SEATWIRE_SEAT"]
turn = os.environ["SEATWIRE_TURN"]
mode = os.environ.get("SEATWIRE_SESSION_MODE", "")
session = os.environ.get("SEATWIRE_SESSION_ID", "")
brief = json.loads(sys.stdin.read() or "{}")
lock = os.path.join(WORKDIR, seat + ".lock")
held = False
try:
    os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    held = True
except FileExistsError:
    with open(os.path.join(WORKDIR, "violations.log"), "a") as fh:
        fh.write(turn + "\n")
started = time.time()
time.sleep(float(os.environ.get("AGENT_SLEEP_S", "0.2")))
page = brief.get("inbox") or {}
if page.get("items") and BEHAVIOUR != "fail":
    request = urllib.request.Request(
        os.environ["AGENT_BASE"] + "/v1/seats/" + seat + "/updates/ack",
        data=json.dumps({"position": page["position"]}).encode(),
        headers={"authorization": "Bearer " + json.load(
                     open(os.path.join(WORKDIR, "tokens.json")))[seat],
                 "content-type": "application/json"},
        method="POST",
    )
    urllib.request.urlopen(request, timeout=10).read()
code = 0
if BEHAVIOUR == "fail" and not os.path.exists(os.path.join(WORKDIR, "fixed")):
    print("the agent could not start its work", file=sys.stderr)
    code = 3
if BEHAVIOUR == "fault" and mode == "resume":
    print("No conversation found with session ID: " + session, file=sys.stderr)
    code = 1
with open(os.path.join(WORKDIR, "runs.log"), "a") as fh:
    fh.write(json.dumps({"seat": seat, "turn": turn, "mode": mode, "session": session,
                         "reason": brief.get("reason"), "start": started, "end": time.time(),
                         "code": code, "items": len(page.get("items") or [])}) + "\n")
if held:
    os.unlink(lock)
sys.exit(code)
"""


# ---------------------------------------------------------------- the org and the agent


def launcher(tmp: Path, base: str, behaviour: str, *, sessions: bool) -> dict[str, Any]:
    """A `command` launcher running the agent program with `behaviour`."""
    script = tmp / "agent.py"
    script.write_text(AGENT)
    spec: dict[str, Any] = {
        "kind": "command",
        "argv": [sys.executable, str(script), behaviour, str(tmp)],
        "output": "text",
        "homeDir": str(tmp / "home"),
        "env": {"AGENT_BASE": base},  # each seat's own token: tokens.json (controller_fleet)
    }
    if not sessions:
        spec["sessionArgs"] = {}
    return spec


def write_org(tmp: Path, seats: dict[str, dict[str, Any]]) -> Path:
    """examples/org.yaml without its objectives (no steward runs here), with each seat's
    launcher and controller options from `seats` (seat id -> extra fields)."""
    org = yaml.safe_load((REPO_ROOT / "examples" / "org.yaml").read_text())
    org.pop("objectives", None)
    for seat in org["seats"]:
        seat.update(seats.get(seat["memberId"], {}))
    path = tmp / "org.yaml"
    path.write_text(yaml.safe_dump(org, sort_keys=False, allow_unicode=True))
    return path


def runs(tmp: Path, seat: str | None = None) -> list[dict[str, Any]]:
    """Every turn the agent program ran (of `seat`), in the order they ended."""
    path = tmp / "runs.log"
    if not path.exists():
        return []
    found = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in found if seat is None or r["seat"] == seat]


def violations(tmp: Path) -> list[str]:
    path = tmp / "violations.log"
    return path.read_text().split() if path.exists() else []


def overlaps(ran: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Pairs of one seat's turns whose runs overlapped in time."""
    out = []
    by_seat: dict[str, list[dict[str, Any]]] = {}
    for r in ran:
        by_seat.setdefault(r["seat"], []).append(r)
    for seat_runs in by_seat.values():
        ordered = sorted(seat_runs, key=lambda r: r["start"])
        for a, b in itertools.pairwise(ordered):
            if b["start"] < a["end"]:
                out.append((a["turn"], b["turn"]))
    return out


# ---------------------------------------------------------------- the processes


@contextmanager
def controller_fleet(
    server: RedisServer, tmp: Path, seats: Callable[[str], dict[str, dict[str, Any]]], **env: str
) -> Iterator[Fleet]:
    """The ingress, a stage worker, a controller worker, a turns worker and a beat as
    processes (each in its own process group, stopped by pid on the way out). `seats` gets
    the ingress's base URL and gives the org file's seat fields."""
    f = Fleet(redis=server, workdir=tmp, env={})
    org = write_org(tmp, seats(f.base))
    # The agent acks its inbox as its seat, with the seat's own token (issued into this
    # Redis through the store; the program reads it from tokens.json in its workdir).
    client = redis.Redis.from_url(server.url)
    issued = {
        s.member_id: seat_token(client, s.member_id)
        for s in OrgSource.open(org).current()[0].org.seats
    }
    client.close()
    (tmp / "tokens.json").write_text(json.dumps(issued))
    f.env = fleet_env(
        server,
        tmp,
        SEATWIRE_ORG_FILE=str(org),
        SEATWIRE_CONTROLLER_INTERVAL_S=str(INTERVAL_S),
        SEATWIRE_BEAT_LEASE_MS="2000",
        SLACK_SIGNING_SECRET=SLACK_SECRET,
        **env,
    )
    try:
        f.spawn("ingress", ["ingress", "--host", "127.0.0.1", "--port", str(f.port)])
        f.spawn("stages", STAGES)
        f.spawn("controller", CONTROLLER)
        f.spawn("turns", TURNS)
        f.spawn("beat", ["beat"])
        f.wait_ready()
        yield f
    finally:
        f.stop()


def api(f: Fleet) -> httpx.Client:
    """The operator token; on a seat's routes, that seat's own token."""
    client = httpx.Client(base_url=f.base, timeout=10, headers={"Authorization": f"Bearer {TOKEN}"})
    org = OrgSource.open(Path(f.env["SEATWIRE_ORG_FILE"]))
    routes_as_seats(client, redis.Redis.from_url(f.redis.url), org, TOKEN)
    return client


def status(f: Fleet, seat: str) -> dict[str, Any]:
    with api(f) as http:
        body: dict[str, Any] = http.get(f"/v1/seats/{seat}/status").raise_for_status().json()
        return body


def wait_for(
    what: str, probe: Callable[[], Any], *, timeout: float = 60, every: float = 0.1
) -> Any:
    """`probe()` once it is truthy; a TimeoutError naming `what` (and the last value). The
    default bound is for a loaded machine, where a turn's processes start slowly."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    raise TimeoutError(f"{what}: not within {timeout} s (last: {last!r})")


def settled(f: Fleet, seat: str, turns: int) -> dict[str, Any] | None:
    """The seat's status once it has `turns` finished turns and none in flight."""
    s = status(f, seat)
    return s if len(s["turns"]) >= turns and s["activeTurn"] is None else None


def post_directed(f: Fleet, text: str = "<@U0SCOUT> can you look at the deploy?") -> None:
    """A Slack message in #platform from Ava mentioning scout, signed as Slack signs it."""
    ts = f"{int(time.time())}.{uuid.uuid4().int % 1_000_000:06d}"
    envelope: dict[str, Any] = json.loads(
        (REPO_ROOT / "tests/pipeline/fixtures/slack/message_channel_mention.json").read_text()
    )
    envelope["event"].update(
        user="U0AVA",
        text=text,
        ts=ts,
        event_ts=ts,
        channel="C-PLATFORM",
        team=TEAM,
        client_msg_id=str(uuid.uuid4()),
        blocks=[
            {
                "type": "rich_text",
                "block_id": "b1",
                "elements": [
                    {
                        "type": "rich_text_section",
                        "elements": [
                            {"type": "user", "user_id": "U0SCOUT"},
                            {"type": "text", "text": text.removeprefix("<@U0SCOUT>")},
                        ],
                    }
                ],
            }
        ],
    )
    envelope.update(
        team_id=TEAM,
        context_team_id=TEAM,
        event_id=f"Ev{ts.replace('.', '')}",
        event_time=int(float(ts)),
    )
    envelope["authorizations"][0].update(team_id=TEAM, user_id="U0SCOUT")
    body = json.dumps(envelope).encode()
    headers = slack_headers(body, secret=SLACK_SECRET, now_s=int(time.time()))
    resp = httpx.post(f"{f.base}/webhooks/slack", content=body, headers=headers, timeout=10)
    assert resp.status_code == 200 and resp.json()["status"] == "accepted", resp.text


def asks_to(f: Fleet, seat: str) -> list[dict[str, Any]]:
    """The outbox lines of `seat`'s asks."""
    return [x for x in read_outbox(f.outbox) if x.get("seatId") == seat]


def ticks_done(f: Fleet) -> int:
    """Controller ticks the controller workers (logs named controller*) have finished."""
    return sum(
        line.count(TICK_DONE)
        for log in f.workdir.glob("controller*.log")
        for line in log.read_text(errors="replace").splitlines()
        if "succeeded" in line
    )


def ticks_after(f: Fleet, done: int) -> bool:
    return ticks_done(f) > done


def tracebacks(f: Fleet) -> list[str]:
    """Log files holding a Python traceback (an unexpected error in a process)."""
    return [
        log.name
        for log in f.workdir.glob("*.log")
        if "Traceback" in log.read_text("utf-8", "replace")
    ]


# ---------------------------------------------------------------- the tests


def test_a_directed_slack_message_leads_to_exactly_one_turn(
    server: RedisServer, tmp_path: Path
) -> None:
    """After each seat's first turn, the seats idle; one directed Slack message mentioning
    scout is exactly one more of scout's turns, reason `notices`, ok, its inbox acknowledged;
    over the next ticks nothing more runs, and the noop seat tally stays idle."""
    started = time.monotonic()

    def seats(base: str) -> dict[str, dict[str, Any]]:
        return {"scout": {"launcher": launcher(tmp_path, base, "ok", sessions=False)}}

    with controller_fleet(server, tmp_path, seats) as f:
        ready_s = time.monotonic() - started
        first = wait_for("scout's first turn", lambda: settled(f, "scout", 1))
        assert [t["reason"] for t in first["turns"]] == ["first"]
        wait_for("tally's first turn", lambda: settled(f, "tally", 1))
        wait_for("scout to idle", lambda: status(f, "scout")["lastDecision"]["reason"] == "idle")
        assert len(runs(tmp_path, "scout")) == 1
        posted = time.monotonic()
        post_directed(f)
        after = wait_for("the directed turn", lambda: settled(f, "scout", 2), timeout=30)
        turn_s = time.monotonic() - posted
        time.sleep(10 * INTERVAL_S)  # ten more ticks: none may run another turn
        final = status(f, "scout")
        tally = status(f, "tally")
        with api(f) as http:
            inbox = http.get("/v1/seats/scout/updates").json()
        logs_with_tracebacks = tracebacks(f)
    ran = runs(tmp_path, "scout")
    print(
        f"\ncontroller e2e 1: ready {ready_s:.1f} s, message to turn settled {turn_s:.2f} s, "
        f"runs {[(r['turn'], r['reason'], r['items']) for r in ran]}"
    )
    assert [r["turn"] for r in ran] == ["scout:turn:1", "scout:turn:2"]
    assert ran[1]["reason"] == "notices" and ran[1]["items"] == 1
    newest = final["turns"][0]
    assert final["turns"] == after["turns"]  # nothing ran after the directed turn
    assert (newest["turnId"], newest["reason"], newest["outcome"]["kind"]) == (
        "scout:turn:2",
        "notices",
        "ok",
    )
    assert final["lastDecision"]["reason"] == "idle" and final["streak"] is None
    assert inbox["items"] == []  # the agent acknowledged what it was handed
    assert [t["reason"] for t in tally["turns"]] == ["first"]
    assert tally["lastDecision"]["reason"] == "idle"
    assert logs_with_tracebacks == []


def test_the_named_fault_rotates_the_session_at_once(server: RedisServer, tmp_path: Path) -> None:
    """scout's agent succeeds in session-id mode and, resumed, prints "No conversation found
    with session ID: <id>" and exits 1. A directed message forces the resume: the status shows
    the session rotated at once (rotatedFrom the old id, the reason naming that the
    conversation does not exist on this machine), the outcome `resume-target-missing`,
    proven; the retry starts the fresh session in session-id mode and succeeds."""

    def seats(base: str) -> dict[str, dict[str, Any]]:
        return {
            "scout": {
                "launcher": launcher(tmp_path, base, "fault", sessions=True),
                # The failed turn's status is read between it and the retry: the retry waits
                # 4-6 s (jittered), far longer than a status read on a loaded machine.
                "controller": {"retryBaseMs": 5000},
            }
        }

    with controller_fleet(server, tmp_path, seats) as f:
        first = wait_for("scout's first turn", lambda: settled(f, "scout", 1))
        old = first["session"]
        assert first["turns"][0]["outcome"]["kind"] == "ok"
        assert old["lastLaunchAt"] is not None and old["rotatedFrom"] is None
        post_directed(f)
        failed = wait_for("the resumed turn", lambda: settled(f, "scout", 2))
        retried = wait_for("the retry", lambda: settled(f, "scout", 3))
        time.sleep(5 * INTERVAL_S)
        final = status(f, "scout")
        logs_with_tracebacks = tracebacks(f)
    ran = runs(tmp_path, "scout")
    print(f"\ncontroller e2e 2: runs {[(r['turn'], r['mode'], r['code']) for r in ran]}")
    outcome = failed["turns"][0]["outcome"]
    assert failed["turns"][0]["reason"] == "notices"
    assert (outcome["kind"], outcome["failureKind"], outcome["proven"]) == (
        "failed",
        "resume-target-missing",
        True,
    )
    assert outcome["signature"] == "resume:resume-target-missing"
    session = failed["session"]
    assert session["rotatedFrom"] == old["sessionId"]
    assert session["sessionId"] != old["sessionId"]
    assert "does not exist on this machine" in (session["rotatedReason"] or "")
    assert session["lastLaunchAt"] is None  # the fresh id was never launched: session-id next
    assert len(session["rotations"]) == 1
    assert [(r["mode"], r["session"], r["code"]) for r in ran] == [
        ("session-id", old["sessionId"], 0),
        ("resume", old["sessionId"], 1),
        ("session-id", session["sessionId"], 0),
    ]
    newest = retried["turns"][0]
    assert (newest["reason"], newest["outcome"]["kind"]) == ("retry", "ok")
    assert final["session"]["sessionId"] == session["sessionId"]
    assert final["streak"] is None and len(final["turns"]) == 3
    assert logs_with_tracebacks == []


def test_three_identical_failures_escalate_once_and_a_success_clears_it(
    server: RedisServer, tmp_path: Path
) -> None:
    """scout's agent exits 3 three times in a row: exactly one escalation ask in the outbox,
    to scout's operator gus, its first line the verdict; scout stops (`failure_limit`) and
    runs nothing more. With the fault fixed (a flag file), run-now runs one turn that
    succeeds: no streak, no escalation, and still exactly one ask."""

    def seats(base: str) -> dict[str, dict[str, Any]]:
        return {
            "scout": {
                "launcher": launcher(tmp_path, base, "fail", sessions=False),
                "controller": {"retryBaseMs": 200, "maxFailures": 3},
            }
        }

    with controller_fleet(server, tmp_path, seats) as f:
        began = time.monotonic()
        stopped = wait_for("three failures", lambda: settled(f, "scout", 3), timeout=30)
        failed_s = time.monotonic() - began
        ask = wait_for("the escalation ask", lambda: asks_to(f, "scout"), timeout=30)
        ask_s = time.monotonic() - began - failed_s
        time.sleep(10 * INTERVAL_S)  # ten more ticks: no turn, no second ask
        held = status(f, "scout")
        asks_before = asks_to(f, "scout")
        runs_before = len(runs(tmp_path, "scout"))
        (tmp_path / "fixed").write_text("")
        with api(f) as http:
            http.post("/v1/seats/scout/run-now").raise_for_status()
        fixed = time.monotonic()
        cleared = wait_for("the run-now turn", lambda: settled(f, "scout", 4))
        cleared_s = time.monotonic() - fixed
        time.sleep(10 * INTERVAL_S)
        final = status(f, "scout")
        asks_after = asks_to(f, "scout")
        logs_with_tracebacks = tracebacks(f)
    print(
        f"\ncontroller e2e 3: failed 3 times in {failed_s:.2f} s, ask in the outbox "
        f"{ask_s:.2f} s later: {ask[0]['body'].splitlines()[0]!r} to "
        f"{[t['memberId'] for t in ask[0]['targets']]}; run-now to ok {cleared_s:.2f} s"
    )
    assert [t["outcome"]["kind"] for t in stopped["turns"]] == ["failed"] * 3
    assert stopped["streak"]["streak"] == 3
    assert stopped["streak"]["signature"] == "command:never-beaten:3"
    assert held["lastDecision"]["reason"] == "failure_limit"
    assert held["escalation"] is not None and held["escalation"]["targetId"] == "gus"
    assert len(held["turns"]) == 3 and runs_before == 3
    (only,) = asks_before
    # The ask's first line is the report's headline, set in bold (pipeline/engagement/ask.py).
    assert only["body"].splitlines()[0].lstrip("*").startswith(VERDICT), only["body"]
    assert [t["memberId"] for t in only["targets"]] == ["gus"], only["targets"]
    newest = cleared["turns"][0]
    assert (newest["reason"], newest["outcome"]["kind"]) == ("steering", "ok")
    assert final["streak"] is None and final["escalation"] is None
    assert final["lastDecision"]["reason"] == "idle" and len(final["turns"]) == 4
    assert asks_after == asks_before
    assert [r["code"] for r in runs(tmp_path, "scout")] == [3, 3, 3, 0]
    assert logs_with_tracebacks == []


def test_two_beats_and_a_killed_controller_worker_change_none_of_it(
    server: RedisServer, tmp_path: Path
) -> None:
    """Two beats at once; a turns worker of two processes; the controller worker SIGKILLed
    right after a tick finished, twice, and a new one started each time. Meanwhile scout (its
    agent succeeds) and tally (its agent always fails) are steered with run-now over and
    over. No turn id ran twice; no two turns of a seat ran at once (the lock file and the
    logged times); every turn each seat's record began was run; tally's streak equals its
    number of failed runs and grew across each kill; nothing of scout failed.

    Tally's retries back off exponentially (retry_base · 2^(failures-1), steering does not
    jump the backoff), so each sample waits for its streak to have grown past the one before
    rather than sleeping a fixed time: a fixed sleep lands inside one long backoff sooner or
    later, and a streak that did not grow in it says nothing about the kill."""

    def seats(base: str) -> dict[str, dict[str, Any]]:
        return {
            "scout": {"launcher": launcher(tmp_path, base, "ok", sessions=False)},
            "tally": {
                "launcher": launcher(tmp_path, base, "fail", sessions=False),
                "controller": {"retryBaseMs": 50, "maxFailures": 100},
            },
        }

    stop = threading.Event()
    steered: Counter[str] = Counter()

    def steer(f: Fleet) -> None:
        with api(f) as http:
            while not stop.wait(0.4):
                for seat in ("scout", "tally"):
                    try:
                        http.post(f"/v1/seats/{seat}/run-now").raise_for_status()
                        steered[seat] += 1
                    except httpx.HTTPError:
                        steered["errors"] += 1

    def streak(f: Fleet) -> int:
        return int((status(f, "tally")["streak"] or {}).get("streak", 0))

    def grown(f: Fleet, past: int) -> int | None:
        now = streak(f)
        return now if now > past else None

    streaks: list[int] = []
    with controller_fleet(server, tmp_path, seats, AGENT_SLEEP_S="0.3") as f:
        f.spawn("beat-2", ["beat"])
        wait_for("scout's first turn", lambda: settled(f, "scout", 1))
        steerer = threading.Thread(target=steer, args=(f,), daemon=True)
        steerer.start()
        try:
            for kill in range(2):
                time.sleep(3)
                name = "controller" if kill == 0 else f"controller-k{kill}"
                past = streaks[-1] if streaks else 0
                streaks.append(wait_for("tally to fail again", partial(grown, f, past), timeout=60))
                done = ticks_done(f)
                wait_for("a tick to finish", partial(ticks_after, f, done), every=0.01)
                f.kill_main(name)  # just after a tick finished: between two ticks
                time.sleep(1.5)  # nobody decides; the ticks sent meanwhile expire unrun
                f.spawn(f"controller-k{kill + 1}", CONTROLLER)
            last = partial(grown, f, streaks[-1])
            wait_for("tally to fail after the last kill", last, timeout=60)
        finally:
            stop.set()
            steerer.join(timeout=15)
        with api(f) as http:  # tally would go on retrying by itself: hold both seats
            for seat in ("scout", "tally"):
                http.post(f"/v1/seats/{seat}/pause").raise_for_status()
        for seat in ("scout", "tally"):
            wait_for(f"{seat} settled", partial(settled, f, seat, 1), timeout=30)
        streaks.append(streak(f))
        time.sleep(5 * INTERVAL_S)
        finals = {seat: status(f, seat) for seat in ("scout", "tally")}
        ticks = ticks_done(f)
        orphans = f.orphans
        logs_with_tracebacks = tracebacks(f)
    ran = runs(tmp_path)
    by_seat = Counter(r["seat"] for r in ran)
    print(
        f"\ncontroller e2e 4: runs {dict(by_seat)}, run-now {dict(steered)}, tally streak at "
        f"each kill and at the end {streaks}, controller ticks run {ticks}, orphans {orphans}"
    )
    turn_ids = [r["turn"] for r in ran]
    assert [t for t, n in Counter(turn_ids).items() if n > 1] == []  # no turn twice
    assert violations(tmp_path) == [] and overlaps(ran) == []  # never two of a seat at once
    for seat in ("scout", "tally"):
        seq = max(int(r["turn"].rsplit(":", 1)[1]) for r in ran if r["seat"] == seat)
        expected = {f"{seat}:turn:{i}" for i in range(1, seq + 1)}
        assert {r["turn"] for r in ran if r["seat"] == seat} == expected, seat
        assert finals[seat]["activeTurn"] is None
        assert finals[seat]["turns"][0]["turnId"] == f"{seat}:turn:{seq}"
    assert by_seat["scout"] >= 5 and by_seat["tally"] >= 5, by_seat
    assert all(t["outcome"]["kind"] == "ok" for t in finals["scout"]["turns"])
    assert {r["code"] for r in ran if r["seat"] == "tally"} == {3}
    assert finals["tally"]["streak"]["streak"] == by_seat["tally"]  # no failure forgotten
    assert streaks == sorted(streaks) and len(set(streaks)) == len(streaks), streaks
    assert logs_with_tracebacks == []
