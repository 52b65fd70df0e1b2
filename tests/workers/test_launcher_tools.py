"""The launchers hand a seat its tools (issue 13 point 4): the `http` launcher's brief names
the ingress's MCP endpoint and the seat; the `command` launcher writes an MCP config that
runs `seatwire mcp --seat SEAT` with this worker's Seatwire settings, and `{mcpConfig}` in its
argv is that file."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import httpx
import pytest

from contracts import UpdatesPage
from contracts.org import CommandLauncher, HttpLauncher
from workers.outbound.launchers import Brief, Launchers, launcher_limit_s


def brief(seat: str = "scout") -> Brief:
    page = UpdatesPage(items=(), position=0, acknowledged=0, has_more=False)
    return Brief(seat_id=seat, turn_id=f"{seat}:turn:1", reason="first", inbox=page)


def test_the_http_brief_names_the_mcp_endpoint() -> None:
    """The POSTed brief carries `mcp: {url, headers}` for the seat."""
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(202)

    launchers = Launchers(
        time_limit_s=120,
        mcp_url="https://seatwire.example/mcp",
        transport=httpx.MockTransport(handler),
        environ={},
    )
    spec = HttpLauncher.model_validate({"kind": "http", "url": "http://runtime/turn"})
    assert launchers.launch(spec, brief()).outcome is None
    assert seen[0]["mcp"] == {
        "url": "https://seatwire.example/mcp",
        "headers": {"X-Seatwire-Seat": "scout"},
    }


def test_the_command_launcher_writes_an_mcp_config(tmp_path: Path) -> None:
    """`mcpConfig` is written (owner-only) before the launch and named in argv; it runs
    `python -m workers.cli mcp --seat scout` with the SEATWIRE_* settings, nothing else."""
    check = tmp_path / "check.py"
    check.write_text(
        "import json, sys\n"
        "cfg = json.load(open(sys.argv[1]))['mcpServers']['seatwire']\n"
        "assert cfg['args'][-3:] == ['mcp', '--seat', 'scout'], cfg\n"
        "assert cfg['env'] == {'SEATWIRE_REDIS_URL': 'redis://r/0'}, cfg\n"
    )
    spec = CommandLauncher.model_validate(
        {
            "kind": "command",
            "argv": [sys.executable, str(check), "{mcpConfig}"],
            "sessionArgs": {},
            "mcpConfig": "agent/mcp.json",
            "cwd": str(tmp_path),
        }
    )
    environ = {"SEATWIRE_REDIS_URL": "redis://r/0", "HOME": str(tmp_path), "PATH": os.defpath}
    out = Launchers(time_limit_s=120, environ=environ).launch(spec, brief())
    assert out.outcome is not None and out.outcome.kind == "ok", out.outcome
    written = tmp_path / "agent" / "mcp.json"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    server = json.loads(written.read_text())["mcpServers"]["seatwire"]
    assert server["command"] == sys.executable and server["args"][:2] == ["-m", "workers.cli"]


@pytest.mark.parametrize(("turn", "inner"), [(30, 20.0), (60, 48.0), (150, 120.0), (1200, 1170.0)])
def test_a_launchers_limit_always_leaves_it_time(turn: int, inner: float) -> None:
    """The launcher's own limit is the turn's less a fifth of it (at least 10 s, at most
    30 s): positive at the least turn limit the settings take (30 s gives 20 s)."""
    assert launcher_limit_s(turn) == inner


def test_the_least_turn_limit_runs_command_and_http_turns(tmp_path: Path) -> None:
    """At SEATWIRE_TURN_TIME_LIMIT_S=30 a command turn runs (its limit 20 s, not 0) and an
    http launcher's request gets 20 s, not 0."""
    spec = CommandLauncher.model_validate(
        {"kind": "command", "argv": [sys.executable, "-c", "pass"], "sessionArgs": {}}
    )
    environ = {"HOME": str(tmp_path), "PATH": os.defpath}
    out = Launchers(time_limit_s=30, environ=environ).launch(spec, brief())
    assert out.outcome is not None and out.outcome.kind == "ok", out.outcome
    timeouts: list[object] = []

    def handler(request: httpx.Request) -> httpx.Response:
        timeouts.append(request.extensions["timeout"]["read"])
        return httpx.Response(202)

    http = Launchers(time_limit_s=30, transport=httpx.MockTransport(handler), environ={})
    runtime = HttpLauncher.model_validate({"kind": "http", "url": "http://runtime/turn"})
    assert http.launch(runtime, brief()).outcome is None
    assert timeouts == [20.0]
