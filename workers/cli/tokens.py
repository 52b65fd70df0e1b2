"""`seatwire token ...`: the API's bearer tokens (issue 13 point 6, workers/stores/tokens.py).

    seatwire token issue (--seat SEAT | --operator) [--label TEXT]
                                   a new token, printed once with its hash prefix
    seatwire token list [--json]   every valid token: role, seat, label, issued, hash prefix
                                   (never a token: only its hash is stored)
    seatwire token revoke PREFIX   end the one token whose hash starts with PREFIX
    seatwire token dev [--json]    embedded mode: each seat's development token

Rotation without a restart: issue a new token, move the client to it, revoke the old one.
They read and write the workers' Redis (SEATWIRE_REDIS_URL), as `seatwire steward` does;
SEATWIRE_API_TOKEN stays a valid operator token besides the issued ones.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from workers.cli.steward import redis_container
from workers.container import Container
from workers.errors import ConfigError
from workers.settings import Settings, load_settings
from workers.stores.tokens import TokenRefused, Tokens, dev_token

token = typer.Typer(
    no_args_is_help=True, help="API tokens: issue, list, revoke (and embedded dev tokens)."
)
console = Console()

JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]


def _refuse(message: object) -> NoReturn:
    console.print(f"[red]cannot run:[/red] {message}")
    raise typer.Exit(2)


def _container() -> Container:
    return redis_container(
        _refuse,
        embedded="issued tokens live in Redis: set SEATWIRE_REDIS_URL (embedded mode has "
        "fixed development tokens: `seatwire token dev`)",
    )


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


@token.command("issue")
def issue(
    seat: Annotated[
        str | None, typer.Option("--seat", help="a seat token: the seat's member id or alias")
    ] = None,
    operator: Annotated[bool, typer.Option("--operator", help="an operator token")] = False,
    label: Annotated[str, typer.Option("--label", help="what it is for, for `list`")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Issue a token; it is printed once (only its hash is kept)."""
    from workers.clock import now_ms

    if (seat is None) == (not operator):
        _refuse("give exactly one of --seat SEAT or --operator")
    container = _container()
    seat_id = None
    if seat is not None:
        found = container.org.current()[0].seat(seat)
        if found is None:
            _refuse(f"{seat!r} is not a seat of the org file")
        seat_id = found.member_id
    store = Tokens(container.redis)
    try:
        raw, record = store.issue(
            "seat" if seat_id else "operator", seat_id=seat_id, label=label, now_ms=now_ms()
        )
    except ValueError as exc:
        _refuse(exc)
    if as_json:
        typer.echo(json.dumps({"token": raw, **record.to_wire()}, indent=2))
        return
    who = f"seat {seat_id}" if seat_id else "the operator"
    console.print(f"issued a token for {who} (hash prefix {record.prefix}):")
    typer.echo(raw)
    console.print("it is shown only now: Seatwire keeps its hash, never the token")


@token.command("list")
def list_tokens(as_json: JsonOpt = False) -> None:
    """Every valid token, oldest first: role, seat, label, issued, hash prefix."""
    store = Tokens(_container().redis)
    records = store.list()
    if as_json:
        typer.echo(json.dumps([r.to_wire() for r in records], indent=2))
        return
    table = Table("hash prefix", "role", "seat", "label", "issued (UTC)", title="tokens")
    for r in records:
        table.add_row(r.prefix, r.role, r.seat_id or "-", r.label or "-", _when(r.issued_at_ms))
    console.print(table)
    console.print("SEATWIRE_API_TOKEN is an operator token as well (not listed: not stored)")


@token.command("revoke")
def revoke(
    prefix: Annotated[str, typer.Argument(metavar="PREFIX", help="a prefix of the token's hash")],
) -> None:
    """End one token, named by a prefix of its hash (`list` shows it); an unknown or
    ambiguous prefix is refused."""
    store = Tokens(_container().redis)
    try:
        record = store.revoke(prefix)
    except TokenRefused as exc:
        _refuse(exc)
    who = f"seat {record.seat_id}" if record.seat_id else "operator"
    console.print(f"revoked {record.prefix} ({who}, {record.label or 'no label'})")


def dev_tokens(settings: Settings) -> dict[str, str]:
    """Embedded mode's development seat tokens, seat id -> token."""
    from workers.org import OrgSource

    view = OrgSource.open(settings.org_file).current()[0]
    key = settings.token()
    return {s.member_id: dev_token(key, s.member_id) for s in view.org.seats}


@token.command("dev")
def dev(as_json: JsonOpt = False) -> None:
    """Embedded mode only: each seat's development token (valid only without a Redis)."""
    try:
        settings = load_settings()
    except ConfigError as exc:
        _refuse(exc)
    if not settings.embedded:
        _refuse(
            "development tokens are accepted only in embedded mode; with a Redis, issue "
            "seat tokens: seatwire token issue --seat SEAT"
        )
    found = dev_tokens(settings)
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    for seat_id, value in found.items():
        typer.echo(f"{seat_id}\t{value}")
