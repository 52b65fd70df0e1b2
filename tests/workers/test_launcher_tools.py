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

from contracts import UpdatesPage
from contracts.org import CommandLauncher, HttpLauncher
from workers.outbound.launchers import Brief, Launchers


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
