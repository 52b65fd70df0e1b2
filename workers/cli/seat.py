"""`seatwire seat ...` and `seatwire seats`: a seat's turns from a terminal (issue 12 point 7).

    seatwire seat status SEAT [--json]   the controller's last decision and reason, the
                                         launch-failure streak and its signature, the session
                                         record, the next retry, the last turns and outcomes
    seatwire seat pause SEAT             hold its turns (a running one is asked to stop)
    seatwire seat resume SEAT            let them run again
    seatwire seat run-now SEAT           a turn on the next tick, clearing a stop for failures
    seatwire seats [--json]              every seat in one table

They read and write the workers' Redis (SEATWIRE_REDIS_URL), as `seatwire steward` does.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from contracts import Seat
from pipeline.turns import Control, status_of, summary_of
from workers.cli.steward import _container, _refuse
from workers.container import Container

seat = typer.Typer(no_args_is_help=True, help="A seat's turns: status, pause, resume, run now.")
console = Console()

SeatArg = Annotated[str, typer.Argument(metavar="SEAT", help="the seat's member id or alias")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]


def _when(ms: float | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _decision(d: dict[str, Any] | None) -> str:
    return "-" if not d else f"{d['action']}: {d['reason']}"


def _seat(c: Container, seat_id: str) -> Seat:
    found = c.org.current()[0].seat(seat_id)
    if found is None:
        _refuse(f"{seat_id!r} is not a seat of the org file")
    return found


@seat.command("status")
def seat_status(seat_id: SeatArg, as_json: JsonOpt = False) -> None:
    """The seat's controller, streak, session and last turns."""
    c = _container()
    known = _seat(c, seat_id)
    s = status_of(known, c.seat_runs.get(known.member_id).run)
    if as_json:
        typer.echo(json.dumps(s, indent=2))
        return
    streak = s["streak"]
    session = s["session"]
    console.print(
        f"[bold]{s['seatId']}[/bold]  launcher {s['launcher']}, operator "
        f"{s['operatorId'] or 'none'}{', PAUSED' if s['paused'] else ''}"
    )
    console.print(
        f"decision   {_decision(s['lastDecision'])}"
        f" (since {_when((s['lastDecision'] or {}).get('atMs'))})"
    )
    console.print(
        f"failures   {s['controller']['failures']}"
        f"{', blocked' if s['controller']['blocked'] else ''}; next retry "
        f"{_when(s['nextRetryAtMs'])}"
    )
    console.print(
        f"streak     {'-' if not streak else str(streak['streak']) + ' x ' + streak['signature']}"
    )
    if session:
        console.print(
            f"session    {session['sessionId']} (resumes {session['resumes']}, "
            f"rotations {len(session['rotations'])} in the last hour)"
        )
        if session.get("rotatedFrom"):
            console.print(
                f"           rotated from {session['rotatedFrom']}: "
                f"{session.get('rotatedReason') or ''}"
            )
    active = s["activeTurn"]
    if active:
        console.print(f"in flight  {active['turnId']} {active['state']} ({active['reason']})")
        if active.get("held"):
            held = active["held"]
            console.print(f"           waits: {held['why']} (until {_when(held['untilMs'])})")
    if s.get("lingering"):
        agent = s["lingering"]
        console.print(
            f"lingering  the agent of {agent['turnId']} (group {agent['pgid']} on "
            f"{agent['host']}) is not proven gone yet"
        )
    if s["escalation"]:
        e = s["escalation"]
        console.print(f"escalated  to {e['targetId'] or 'nobody (unroutable)'}: {e['hint']}")
    table = Table("turn", "reason", "ended", "outcome", "detail", title="last turns")
    for t in s["turns"]:
        o = t["outcome"]
        table.add_row(
            t["turnId"].rsplit(":", 1)[-1],
            t["reason"],
            _when(t["endedAtMs"]),
            o["kind"],
            (o["detail"] or "")[:60],
        )
    console.print(table)


def _control(seat_id: str, what: Control) -> None:
    c = _container()
    known = _seat(c, seat_id)
    c.seat_runs.control(known.member_id, what, options=known.controller)
    console.print(f"{seat_id}: {what} recorded; the next controller tick acts on it")


@seat.command("pause")
def seat_pause(seat_id: SeatArg) -> None:
    """Hold the seat's turns."""
    _control(seat_id, "pause")


@seat.command("resume")
def seat_resume(seat_id: SeatArg) -> None:
    """Let the seat's turns run again."""
    _control(seat_id, "resume")


@seat.command("run-now")
def seat_run_now(seat_id: SeatArg) -> None:
    """Run a turn on the next tick, clearing a stop for failures."""
    _control(seat_id, "run-now")


def seats_command(as_json: JsonOpt = False) -> None:
    """Every seat: its last decision, turn in flight, last outcome and streak."""
    c = _container()
    org_seats = c.org.current()[0].org.seats
    reads = c.seat_runs.observe([s.member_id for s in org_seats], now_ms=0)
    rows = [summary_of(s, r.run, seen) for s, (r, seen) in zip(org_seats, reads, strict=True)]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table("seat", "decision", "turn", "last outcome", "streak", "inbox", title="seats")
    for r in rows:
        last = r["lastTurn"]
        active = r["activeTurn"]
        streak = r["streak"]
        table.add_row(
            r["seatId"] + (" (paused)" if r["paused"] else ""),
            _decision(r["lastDecision"]),
            "-" if not active else f"{active['state']} ({active['reason']})",
            "-" if not last else last["outcome"]["kind"],
            "-" if not streak else f"{streak['streak']}x" + (" !" if r["escalated"] else ""),
            str(r["unacknowledged"]),
        )
    console.print(table)
