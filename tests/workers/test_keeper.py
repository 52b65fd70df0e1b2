"""A command turn's agent does not outlive its worker or its lease (workers/outbound/keeper.py),
and a lingering agent's group is told apart, killed and proven gone (workers/outbound/agents.py),
with real processes. Every wait is on a condition, bounded generously for a loaded machine."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from contracts.controller import AgentProcess
from tests.procs import alive
from workers.outbound import agents
from workers.outbound.command import run_command

PY = sys.executable
R = TypeVar("R")
WAIT_S = 30.0  # the most any condition below is waited for

# The agent: starts a tool (`sleep`) in its group, writes "AGENT_PID TOOL_PID" to argv[1],
# then sleeps far past any limit the tests set.
AGENT = textwrap.dedent(
    """
    import subprocess, sys, time
    tool = subprocess.Popen(["sleep", "300"])
    with open(sys.argv[1] + ".tmp", "w") as fh:
        fh.write(f"{__import__('os').getpid()} {tool.pid}")
    __import__('os').replace(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(300)
    """
)


def wait_until(what: str, probe: Callable[[], R | None], within_s: float = WAIT_S) -> R:
    end = time.monotonic() + within_s
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {within_s} s")
        time.sleep(0.05)


def pids(path: Path) -> tuple[int, int] | None:
    if not path.exists():
        return None
    agent, tool = path.read_text().split()
    return int(agent), int(tool)


@pytest.fixture
def reap() -> Iterator[list[int]]:
    """Groups to SIGKILL at the end whatever happened (a failed test leaves nothing)."""
    groups: list[int] = []
    yield groups
    for g in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(g, signal.SIGKILL)


def worker(tmp_path: Path, pid_file: Path, *, time_limit_s: float = 120.0) -> subprocess.Popen[str]:
    """A process that runs the agent with `run_command` (as a turns worker does), printing
    the group id it is handed when the agent has started."""
    code = textwrap.dedent(
        f"""
        import sys
        from workers.outbound.command import run_command
        run_command(
            [sys.executable, "-c", {AGENT!r}, {str(pid_file)!r}],
            time_limit_s={time_limit_s},
            on_started=lambda g: print(g, flush=True),
        )
        """
    )
    return subprocess.Popen(
        [PY, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=Path(__file__).resolve().parents[2],
    )


@dataclass(frozen=True)
class Started:
    worker: subprocess.Popen[str]
    group: int  # the keeper's pid, the agent's process group
    agent: int
    tool: int


def start(tmp_path: Path, reap: list[int]) -> Started:
    """A worker running the agent, once the agent and its tool have started."""
    pid_file = tmp_path / "pids"
    w = worker(tmp_path, pid_file)
    reap.append(w.pid)
    assert w.stdout is not None
    group = int(w.stdout.readline())
    reap.append(group)
    agent, tool = wait_until("the agent's pids", lambda: pids(pid_file))
    return Started(w, group, agent, tool)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_the_agent_and_its_tools_end_when_their_worker_dies(
    tmp_path: Path, reap: list[int], signum: signal.Signals
) -> None:
    """The worker that started an agent dies (SIGKILL, or SIGTERM which Python does not
    handle): its keeper ends the agent and every tool in its group, long before the agent's
    own 120 s limit."""
    s = start(tmp_path, reap)
    agent, tool, group = s.agent, s.tool, s.group
    assert os.getpgid(agent) == group and os.getpgid(tool) == group
    os.kill(s.worker.pid, signum)
    s.worker.wait()
    wait_until("the agent and its tool gone", lambda: not alive(agent) and not alive(tool))
    wait_until("the keeper gone", lambda: not alive(group))


def test_the_agent_ends_with_its_keeper(tmp_path: Path, reap: list[int]) -> None:
    """A keeper that is SIGKILLed itself takes the agent with it."""
    s = start(tmp_path, reap)
    os.kill(s.group, signal.SIGKILL)  # the keeper leads the group: its pid is the group id
    wait_until("the agent gone", lambda: not alive(s.agent))
    s.worker.wait(timeout=WAIT_S)


def test_the_backstop_ends_the_group_even_while_the_worker_lives(
    tmp_path: Path, reap: list[int]
) -> None:
    """The keeper ends the group at its backstop whatever the worker's own limit: the run
    ends then, by the signal the keeper sent, and the tool is gone too."""
    pid_file = tmp_path / "pids"
    groups: list[int] = []
    backstop = int(time.time() * 1000) + 1500
    run = run_command(
        [PY, "-c", AGENT, str(pid_file)],
        time_limit_s=120.0,
        backstop_at_ms=backstop,
        kill_grace_s=0.5,
        on_started=groups.append,
    )
    reap += groups
    assert run.exit_code == -signal.SIGTERM and not run.timed_out
    assert time.time() * 1000 >= backstop
    _agent, tool = pids(pid_file) or (0, 0)
    wait_until("the tool gone", lambda: not alive(tool))


def test_a_running_agent_is_ours_then_gone_once_killed(tmp_path: Path, reap: list[int]) -> None:
    """While the agent runs, its group (led by its keeper) is `ours`; `kill` ends it and
    proves it gone."""
    s = start(tmp_path, reap)
    agent = AgentProcess(
        turn_id="s:turn:1",
        host=agents.host_id(),
        until_ms=0,
        pgid=s.group,
        leader_start=agents.start_ticks(s.group),
    )
    assert agents.look(agent).verdict == "ours"
    after = agents.kill(agent, wait_s=WAIT_S)
    assert after.verdict == "gone", after.why
    s.worker.wait(timeout=WAIT_S)


def test_a_session_left_without_its_keeper_is_still_ours_and_killed(
    tmp_path: Path, reap: list[int]
) -> None:
    """A keeper (a session leader) that is gone leaves a process of its session behind, one
    that moved to a process group of its own: it is `ours` by the session, killed by pid,
    and then the session is `gone`. A leader alive under the recorded number but with
    another start time means the number was reused: `gone`, nothing killed."""
    # The stand-in keeper: a session of its own, one child that leaves for its own process
    # group, then the keeper exits (it printed its pid and the child's first).
    code = textwrap.dedent(
        """
        import os, subprocess, sys, time
        os.setsid()
        child = subprocess.Popen(
            [sys.executable, "-c", "import os, time; os.setpgid(0, 0); time.sleep(300)"]
        )
        print(os.getpid(), child.pid, flush=True)
        """
    )
    keeper = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True)
    assert keeper.stdout is not None
    session, child = (int(x) for x in keeper.stdout.readline().split())
    reap += [session, child]
    keeper.wait(timeout=WAIT_S)
    wait_until("the child in a group of its own", lambda: os.getpgid(child) == child)
    agent = AgentProcess(
        turn_id="s:turn:7", host=agents.host_id(), until_ms=0, pgid=session, leader_start=1
    )
    seen = agents.look(agent)
    assert seen.verdict == "ours" and seen.members == (child,), seen
    assert agents.kill(agent, wait_s=WAIT_S).verdict == "gone"
    assert not alive(child)

    # A live leader under the number, started at another time: our session is long gone.
    other = subprocess.Popen(
        [PY, "-c", "import os, time; os.setsid(); print(os.getpid(), flush=True); time.sleep(300)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert other.stdout is not None
    number = int(other.stdout.readline())
    reap.append(number)
    reused = agent.model_copy(update={"pgid": number, "leader_start": 1})
    assert agents.look(reused).verdict == "gone"
    assert agents.kill(reused).verdict == "gone" and alive(number)
    other.kill()
    other.wait()


def test_a_group_nobody_is_in_is_gone() -> None:
    """A group id no process has is `gone`; one never written down is `unproven`."""
    agent = AgentProcess(turn_id="t", host=agents.host_id(), until_ms=0, pgid=2**22 - 7)
    assert agents.look(agent).verdict == "gone"
    assert agents.look(agent.model_copy(update={"pgid": None})).verdict == "unproven"


def test_the_worker_s_kill_at_the_time_limit_reaches_the_agent_once(tmp_path: Path) -> None:
    """At the time limit the worker's SIGTERM reaches the whole group, keeper included; the
    keeper does not send a second one, so an agent that stops cleanly on the first (and
    would quit hard on a second) gets its graceful stop."""
    log = tmp_path / "terms"
    code = textwrap.dedent(
        f"""
        import os, signal, sys, time
        count = []
        def term(signum, frame):
            count.append(signum)
            with open({str(log)!r}, "a") as fh:
                fh.write(f"TERM {{len(count)}}\\n")
            if len(count) > 1:
                os._exit(99)
        signal.signal(signal.SIGTERM, term)
        print("ready", flush=True)
        while not count:
            time.sleep(0.01)
        time.sleep(0.5)  # the clean stop
        sys.exit(0)
        """
    )
    run = run_command([PY, "-c", code], time_limit_s=1.0, kill_grace_s=5.0)
    assert run.timed_out
    wait_until("the agent's log", lambda: log.exists())
    assert log.read_text().splitlines() == ["TERM 1"]
