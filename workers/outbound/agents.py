"""Agent processes on this host: where this process runs, which process group is a turn's
agent, and whether that group is gone. Not pure: reads /proc, sends signals.

Hand-written: it is a few reads of /proc (psutil would do them too, but is not otherwise
needed, and what counts as proof here is the point of the module):

- `host_id()` names the place a pid means something: the host name, the kernel's boot id and
  the pid namespace. Two containers on one machine share a boot id but not a namespace; a
  reboot changes the boot id. Another host's pids are never looked at, let alone signalled.
- `look(agent)` is what a group id says here: gone (no process is in it, or its number now
  belongs to a process started after ours: Linux does not hand out a pid still in use as a
  group id, so a live leader with another start time means ours is gone), ours (the leader
  with our leader's start time, or a member whose environment names our turn, as every
  process the agent started inherits it), or not provably either.
- `kill(agent)` SIGKILLs a group that is ours and waits, on the condition, until it is gone.
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
    """What the group of `agent` (which ran on this host) is now."""
    if agent.pgid is None:
        return Look("unproven", (), "its process group was never written down")
    members, marked = _members(agent.pgid, agent.turn_id)
    leader = start_ticks(agent.pgid)
    if leader is not None and agent.leader_start is not None and leader != agent.leader_start:
        return Look("gone", (), f"pid {agent.pgid} now belongs to a later process")
    if not members:
        return Look("gone", (), f"no process is left in its process group {agent.pgid}")
    if leader is not None and leader == agent.leader_start:
        return Look("ours", members, f"its keeper (pid {agent.pgid}) is still running")
    if marked:
        return Look(
            "ours",
            members,
            f"{len(members)} process(es) of its group {agent.pgid} still run turn {agent.turn_id}",
        )
    return Look(
        "unproven",
        members,
        f"{len(members)} process(es) are in group {agent.pgid}, none provably this turn's",
    )


def kill(agent: AgentProcess, *, wait_s: float = KILL_WAIT_S) -> Look:
    """SIGKILL the group of `agent` if it is ours, then look again until it is gone (at most
    `wait_s`): what it is after."""
    seen = look(agent)
    if seen.verdict != "ours" or agent.pgid is None:
        return seen
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(agent.pgid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while True:
        after = look(agent)
        if after.verdict == "gone" or time.monotonic() >= deadline:
            return after
        time.sleep(0.05)


def _members(pgid: int, turn_id: str) -> tuple[tuple[int, ...], bool]:
    """The live processes whose group is `pgid`, and whether one of them carries the turn's
    id in its environment."""
    marker = f"SEATWIRE_TURN={turn_id}".encode()
    members: list[int] = []
    marked = False
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        stat = _read(entry / "stat")
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) < 3 or fields[0] in ("Z", "X") or int(fields[2]) != pgid:
            continue
        members.append(int(entry.name))
        if not marked:
            with contextlib.suppress(OSError):
                marked = marker in (entry / "environ").read_bytes().split(b"\0")
    return tuple(members), marked


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
