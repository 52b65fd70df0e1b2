"""Agent processes on this host: where this process runs, which processes are a turn's
agent, and whether they are gone. Not pure: reads /proc, sends signals.

Hand-written: it is a few reads of /proc (psutil would do them too, but is not otherwise
needed, and what counts as proof here is the point of the module):

- `host_id()` names the place a pid means something: the host name, the kernel's boot id and
  the pid namespace. Two containers on one machine share a boot id but not a namespace; a
  reboot changes the boot id. Another host's pids are never looked at, let alone signalled.
- The keeper starts a session of its own, so its pid is both the agent's process group and
  its session. `look(agent)` reads what is in that session now: gone (no live process is in
  it, or its number belongs to a leader started after ours), or ours. Linux does not hand out
  a pid that is still some process's session or group id, so while any process remains in
  the session, the session is the one our keeper made, even after the keeper is gone: every
  process the agent started is ours, including one that moved to a process group of its
  own. `unproven` is left for what cannot be read: no /proc (not Linux), or no group written
  down.
- `kill(agent)` SIGKILLs the group and every process of the session, and waits, on the
  condition, until none is left. A process that cannot be signalled (another user's) or
  does not die (stuck in the kernel) leaves it `ours`, with the reason.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from contracts.controller import AgentProcess

PROC = Path("/proc")
KILL_WAIT_S = 5.0  # how long a SIGKILLed group may take to be reaped before we call it alive

Verdict = Literal["gone", "ours", "unproven"]


def host_id() -> str:
    """This process's host name, boot and pid namespace."""
    boot = _read(PROC / "sys/kernel/random/boot_id").strip() or "no-boot-id"
    try:
        ns = str(os.stat(PROC / "self/ns/pid").st_ino)
    except OSError:
        ns = "no-ns"
    return f"{socket.gethostname()}/{boot}/{ns}"


def start_ticks(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (None: no such process)."""
    stat = _read(PROC / str(pid) / "stat")
    if not stat:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields start after the last ")".
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[19]) if len(fields) > 19 else None


@dataclass(frozen=True)
class Look:
    verdict: Verdict
    members: tuple[int, ...]  # live (not zombie) processes in the group
    why: str


def look(agent: AgentProcess) -> Look:
    """What the session of `agent` (which ran on this host) is now."""
    if agent.pgid is None:
        return Look("unproven", (), "its process group was never written down")
    if not (PROC / "self").exists():
        return Look("unproven", (), "this host has no /proc to look in")
    leader = start_ticks(agent.pgid)
    if leader is not None and agent.leader_start is not None and leader != agent.leader_start:
        return Look("gone", (), f"pid {agent.pgid} now belongs to a later process")
    members = _members(agent.pgid)
    if not members:
        return Look("gone", (), f"no process is left in its session {agent.pgid}")
    return Look(
        "ours",
        members,
        f"{len(members)} process(es) of its session {agent.pgid} still run",
    )


def kill(agent: AgentProcess, *, wait_s: float = KILL_WAIT_S) -> Look:
    """SIGKILL the group and session of `agent` if it is ours, then look again until it is
    gone (at most `wait_s`): what it is after."""
    seen = look(agent)
    if seen.verdict != "ours" or agent.pgid is None:
        return seen
    refused: list[str] = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(agent.pgid, signal.SIGKILL)
    for pid in seen.members:  # those that left the group for one of their own
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        except PermissionError:
            refused.append(str(pid))
    deadline = time.monotonic() + wait_s
    while True:
        after = look(agent)
        if after.verdict == "gone":
            return after
        if time.monotonic() >= deadline:
            if refused:
                why = f"{after.why}; not allowed to signal pid(s) {', '.join(refused)}"
                return Look(after.verdict, after.members, why)
            return Look(after.verdict, after.members, f"{after.why} {wait_s:g} s after SIGKILL")
        time.sleep(0.05)


def _members(session: int) -> tuple[int, ...]:
    """The live processes of session `session`."""
    members: list[int] = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _read(entry / "stat").rsplit(")", 1)[-1].split()
        if len(fields) < 4 or fields[0] in ("Z", "X") or int(fields[3]) != session:
            continue
        members.append(int(entry.name))
    return tuple(members)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
