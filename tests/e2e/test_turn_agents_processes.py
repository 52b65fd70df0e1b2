"""A seat never runs two agents at once, even when its turns worker is SIGKILLed mid-turn
(issue 25 point 1), with real processes: `seatwire ingress`, a `controller` worker, a `turns`
worker (prefork, three pool children) and `seatwire beat` on a redis-server of the test's own,
turn time limit 30 s (the least the settings take), lease grace 1 s.

Three seats run a `command` agent that logs its start and its end (a SIGTERM handler logs the
end of a killed one) and whose first turn sleeps far past its limit; the agent starts a tool
(`sleep`) in its group too. While all three first turns run:

- scout: its pool child alone is SIGKILLed (Celery's main process starts another);
- relay: then the worker's main process and its pool children are SIGKILLed (one killpg);
  relay's keeper lives on, sees its worker gone and ends the agent and its tool;
- tally: killed with the same killpg, and its keeper SIGKILLed too: the agent dies with its
  keeper (PR_SET_PDEATHSIG), its tool lingers in the group until the retry's worker finds it
  by the turn's mark, SIGKILLs it and starts only then (`agent_killed`).

A fresh turns worker is started. Each first turn is settled once as `turn:lost` at its lease,
each retry runs once and ends ok, and for every seat every agent (and tool) of the first
turn is observed dead before the retry's agent starts: no two agents of one seat overlap.

Figures of a run on the 2-core CI host (printed with -s): first agents ended 0.3-2.5 s after
the kill; each lost turn settled ~31 s after its start; the retries began 0.2-1.5 s after
that; about 45 s in all.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bench.chaos import TOKEN, Fleet, RedisServer, fleet_env
from tests.procs import alive
from workers.settings import REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

SEATS = ("scout", "relay", "tally")
WAIT_S = 120.0  # the most any condition is waited for (a lease is 31 s)

# The agent: logs {"seat","turn","pid","event":"start"} then starts a tool in its group; its
# first turn (no `<seat>.first` flag yet) sleeps 600 s, a later one 0.2 s; it logs "end" when
# it ends, killed by SIGTERM or not.
AGENT = r"""
import json, os, signal, subprocess, sys, time
WORKDIR = sys.argv[1]
seat, turn = os.environ["SEATWIRE_SEAT"], os.environ["SEATWIRE_TURN"]
def log(event, **extra):
    with open(os.path.join(WORKDIR, "agents.log"), "a") as fh:
        fh.write(json.dumps({"seat": seat, "turn": turn, "pid": os.getpid(), "event": event,
                             "at": time.time(), **extra}) + "\n")
def ended(signum, frame):
    log("end", signal=signum)
    os._exit(143)
signal.signal(signal.SIGTERM, ended)
sys.stdin.read()
flag = os.path.join(WORKDIR, seat + ".first")
first = not os.path.exists(flag)
open(flag, "a").close()
tool = subprocess.Popen(["sleep", "600" if first else "0.1"])
log("start", tool=tool.pid, first=first)
time.sleep(600 if first else 0.2)
tool.wait()
log("end")
"""


def write_org(tmp: Path) -> Path:
    """examples/org.yaml without objectives, plus a third seat relay; every seat runs the
    agent, retries 200 ms after a failure."""
    org = yaml.safe_load((REPO_ROOT / "examples" / "org.yaml").read_text())
    org.pop("objectives", None)
    org["members"].append(
        {"id": "relay", "displayName": "Relay", "slug": "relay", "supervisorId": "gus"}
    )
    org["seats"].append({"memberId": "relay", "aliases": ["relay"], "names": ["Relay"]})
    script = tmp / "agent.py"
    script.write_text(AGENT)
    for seat in org["seats"]:
        seat["launcher"] = {
            "kind": "command",
            "argv": [sys.executable, str(script), str(tmp)],
            "output": "text",
            "sessionArgs": {},
        }
        seat["controller"] = {"retryBaseMs": 200, "maxFailures": 5}
    path = tmp / "org.yaml"
    path.write_text(yaml.safe_dump(org, sort_keys=False))
    return path


@contextmanager
def turn_fleet(server: RedisServer, tmp: Path) -> Iterator[Fleet]:
    f = Fleet(redis=server, workdir=tmp, env={})
    f.env = fleet_env(
        server,
        tmp,
        SEATWIRE_ORG_FILE=str(write_org(tmp)),
        SEATWIRE_CONTROLLER_INTERVAL_S="0.2",
        SEATWIRE_BEAT_LEASE_MS="2000",
        SEATWIRE_TURN_TIME_LIMIT_S="30",
        SEATWIRE_TURN_LEASE_GRACE_MS="1000",
        SEATWIRE_TURN_REPUBLISH_AFTER_MS="2000",
    )
    try:
        f.spawn("ingress", ["ingress", "--host", "127.0.0.1", "--port", str(f.port)])
        f.spawn("controller", ["worker", "--queues", "controller", "--concurrency", "1"])
        f.spawn("turns", ["worker", "--queues", "turns", "--concurrency", "3"])
        f.spawn("beat", ["beat"])
        f.wait_ready()
        yield f
    finally:
        f.stop()


def wait_for(what: str, probe: Callable[[], Any], timeout: float = WAIT_S) -> Any:
    end = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < end:
        last = probe()
        if last:
            return last
        time.sleep(0.1)
    raise TimeoutError(f"{what}: not within {timeout} s (last: {last!r})")


def status(f: Fleet, seat: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    reply = httpx.get(f"{f.base}/v1/seats/{seat}/status", headers=headers, timeout=10)
    body: dict[str, Any] = reply.raise_for_status().json()
    return body


def agent_log(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "agents.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


class Deaths:
    """Polls pids until each is dead, and keeps the time it was first seen dead (an upper
    bound of when it died)."""

    def __init__(self, pids: list[int]) -> None:
        self.seen: dict[int, float] = {}
        self._pids = pids
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set() and len(self.seen) < len(self._pids):
            for pid in self._pids:
                if pid not in self.seen and not alive(pid):
                    self.seen[pid] = time.time()
            time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def test_a_turns_worker_killed_mid_turn_never_leaves_two_agents_of_a_seat(
    server: RedisServer, tmp_path: Path
) -> None:
    """Pool child alone, main and children, and main, children and keeper SIGKILLed while
    three seats' first turns run: each lost turn settled once, each retry run once and ok,
    and every first agent and tool dead before its seat's retry agent starts."""
    with turn_fleet(server, tmp_path) as f:
        began = time.time()
        firsts = wait_for("three first agents running", lambda: _firsts(tmp_path))
        keepers = {seat: wait_for(f"{seat}'s pgid", partial(_pgid, f, seat)) for seat in SEATS}
        deaths = Deaths([p for r in firsts.values() for p in (r["pid"], r["tool"])])
        killed_at = time.time()
        os.kill(parent_of(keepers["scout"]), signal.SIGKILL)  # scout's pool child alone
        # Tally's keeper is stopped first, so that it cannot end its group when its worker
        # dies, then killed with the worker: its agent dies with it, its tool lingers.
        os.kill(keepers["tally"], signal.SIGSTOP)
        turns = f.procs["turns"]
        f.held.add("turns")
        os.killpg(turns.popen.pid, signal.SIGKILL)  # the main process and its pool children
        turns.popen.wait()
        os.kill(keepers["tally"], signal.SIGKILL)
        wait_for(
            "the first agents and relay's and scout's tools dead",
            lambda: all(
                p in deaths.seen
                for seat in SEATS
                for p in (firsts[seat]["pid"], *([] if seat == "tally" else [firsts[seat]["tool"]]))
            ),
        )
        assert alive(firsts["tally"]["tool"]), "tally's tool should linger until the retry"
        f.restart("turns")
        done = {
            seat: wait_for(f"{seat}: the lost turn and its retry", partial(_two, f, seat))
            for seat in SEATS
        }
        deaths.stop()
        log = agent_log(tmp_path)
    starts = [r for r in log if r["event"] == "start"]
    print(f"\nturn agents e2e: killed {killed_at - began:.1f} s after the fleet was up")
    for seat in SEATS:
        mine = [r for r in starts if r["seat"] == seat]
        first, retry = firsts[seat], [r for r in mine if not r["first"]]
        assert len(mine) == 2 and len(retry) == 1, mine  # the retry ran once
        turns_of = list(reversed(done[seat]["turns"]))
        assert [t["outcome"]["signature"] for t in turns_of] == ["turn:lost", ""], turns_of
        assert turns_of[1]["outcome"]["kind"] == "ok"
        dead = max(deaths.seen[first["pid"]], deaths.seen[first["tool"]])
        print(
            f"  {seat}: first agent dead {dead - killed_at:.2f} s after the kill; retry "
            f"started {retry[0]['at'] - dead:.2f} s after that; cleared: "
            f"{turns_of[1].get('cleared')}"
        )
        assert dead < retry[0]["at"], f"{seat}: two agents at once"
    tally_retry = list(reversed(done["tally"]["turns"]))[1]
    assert "killed" in (tally_retry.get("cleared") or ""), tally_retry


def _pgid(f: Fleet, seat: str) -> int | None:
    agent = (status(f, seat)["activeTurn"] or {}).get("agent") or {}
    pgid = agent.get("pgid")
    return int(pgid) if pgid else None


def _firsts(tmp: Path) -> dict[str, dict[str, Any]] | None:
    started = {r["seat"]: r for r in agent_log(tmp) if r["event"] == "start" and r["first"]}
    return started if len(started) == len(SEATS) else None


def _two(f: Fleet, seat: str) -> dict[str, Any] | None:
    """The seat's status once it has two finished turns and none in flight."""
    s = status(f, seat)
    return s if len(s["turns"]) >= 2 and s["activeTurn"] is None else None
