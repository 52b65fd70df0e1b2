"""`seatwire mcp --seat SEAT`: a seat's coordination tools as an MCP server over stdio (issue
13), for an agent CLI that starts its MCP servers as child processes.

    seatwire mcp --seat SEAT

Serves the same tools as `/mcp` on the ingress (workers/ingress/mcp.py), every call acting as
SEAT, on the same Redis as the workers (SEATWIRE_REDIS_URL). Stdout is the protocol: every
message of this command, its refusals and its logs go to stderr. It refuses to start (exit 2,
with the reason) in embedded mode (there is no state outside a running `seatwire up`), when
Redis does not answer, and for a seat the org file does not name.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

if TYPE_CHECKING:
    from celery import Celery

    from workers.container import Container

# Never stdout: that is where the MCP client reads the protocol.
err = Console(stderr=True)


def _refuse(message: object) -> NoReturn:
    err.print(f"[red]cannot serve MCP:[/red] {message}")
    raise typer.Exit(2)


def _container() -> tuple[Container, Celery]:
    """The workers' container on the configured Redis, with the refusals on stderr."""
    from workers.cli.steward import redis_container

    container = redis_container(
        _refuse,
        embedded="the seats' tools keep their state in Redis: set SEATWIRE_REDIS_URL (an "
        "embedded `seatwire up` serves them at /mcp on its own ingress)",
    )
    assert container.app is not None  # redis_container builds it with its app
    return container, container.app


def mcp_command(
    seat: Annotated[str, typer.Option("--seat", help="the seat (member id or alias) to act as")],
    loglevel: Annotated[str, typer.Option(help="log level (logs go to stderr)")] = "WARNING",
) -> None:
    """Serve the seat's coordination tools as an MCP server over stdin/stdout."""
    import anyio
    from mcp.server.stdio import stdio_server

    from workers.clock import now_ms
    from workers.ingress.mcp import build_server

    logging.basicConfig(stream=sys.stderr, level=loglevel.upper(), force=True)
    container, app = _container()
    known = container.org.current()[0].seat(seat)
    if known is None:
        _refuse(f"no seat {seat!r} in the org ({container.settings.org_file})")
    server = build_server(container, app, lambda _ctx: known, clock_ms=now_ms)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    with contextlib.suppress(KeyboardInterrupt):  # SIGTERM (workers/cli/__init__.py main) or ^C
        anyio.run(serve)
