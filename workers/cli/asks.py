"""What became of the asks, from a terminal (issue 26):

    seatwire asks [--open | --state S] [--person P] [--seat S] [--limit N] [--json]
                                          asks, newest first: state, who asked whom, and
                                          the answer or when it is due
    seatwire asks release SEAT --by MEMBER
                                          lift the nuisance brake on a seat's asks
    seatwire ask ID [--json]              one ask whole: where it landed, its answer, every
                                          rung it went up, and its history
    seatwire consents [--all] [--json]    consent records (the ones that hold; --all: every
                                          one still kept, expired and revoked too)
    seatwire consents revoke ID --by MEMBER
                                          revoke a consent (for an operator or the person)

They read and write the workers' Redis (SEATWIRE_REDIS_URL), as `seatwire ledger` does, and
their --json is what the API answers (`GET /v1/asks`, `/v1/asks/{id}`, `/v1/consents`). The
text is one fact per line, identifiers whole; free text (an answer's words, a why) is
wrapped at 80 columns on spaces only, so it reads the same at 80 columns and piped. An id
that names nothing exits 1 saying so; a bad seat or member exits 2.
"""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from contracts.ask_api import AskDetail
from contracts.asks import Ask, ConsentRecord
from workers.cli.steward import redis_container
from workers.clock import now_ms
from workers.container import Container

asks = typer.Typer(
    invoke_without_command=True,
    help="The asks: list them (newest first), or `release` a seat's held asks.",
)
consents = typer.Typer(
    invoke_without_command=True,
    help="Consent records: list them, or `revoke` one.",
)
errors = Console(stderr=True)

WIDTH = 80
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]
ByOpt = Annotated[str, typer.Option("--by", help="the member of the org this is done for")]


def _refuse(message: object) -> NoReturn:
    errors.print(f"[red]cannot run:[/red] {message}", soft_wrap=True)
    raise typer.Exit(2)


def _container() -> Container:
    return redis_container(
        _refuse, embedded="the ask record lives in Redis: point SEATWIRE_REDIS_URL at it"
    )


def _missing(message: str) -> NoReturn:
    typer.echo(message, err=True)
    raise typer.Exit(1)


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _dump(wire: Any) -> None:
    typer.echo(json.dumps(wire, indent=2))


def wrapped(label: str, words: str, *, indent: int = 2) -> list[str]:
    """`words` after a label column, wrapped at WIDTH on spaces only (never inside an id)."""
    lead = " " * indent + f"{label:<13}"
    return textwrap.wrap(
        " ".join(words.split()) or "-",
        width=WIDTH,
        initial_indent=lead,
        subsequent_indent=" " * len(lead),
        break_long_words=False,
        break_on_hyphens=False,
    )


def _member(c: Container, by: str) -> str:
    if c.org.current()[0].member(by) is None:
        _refuse(f"--by: {by!r} is not a member of the org file")
    return by


def where_it_stands(ask: Ask) -> str:
    """An ask's standing in one phrase: its answer, or when it is due, or how it ended."""
    a = ask.answer
    if ask.state == "answered" and a is not None:
        return f"{a.answer} by {a.by} via {a.via}, {_when(a.at_ms)}"
    if ask.state == "closed":
        return f"closed ({ask.closed or '-'})"
    if ask.state == "snoozed":
        return f"snoozed until {_when(ask.snooze_until_ms)}"
    if ask.state == "pending":
        return "being sent"
    up = f", {len(ask.escalations)} rung(s) up" if ask.escalations else ""
    return f"waiting{up}, due {_when(ask.deadline_ms)}"


def ask_lines(ask: Ask) -> list[str]:
    """One ask of a listing: its id, state and who asked whom; then its work and standing."""
    targets = ", ".join(t.member_id for t in ask.targets) or "-"
    lines = [f"{ask.id}  {ask.state}  {ask.seat_id} -> {targets}"]
    lines.append(f"  work {ask.work_id} ({ask.reason_code or ask.trigger or '-'})")
    lines.append(f"  {where_it_stands(ask)}")
    a = ask.answer
    if a is not None and a.text:
        lines += wrapped("said", f'"{a.text}"')
    return lines


def detail_lines(d: AskDetail) -> list[str]:
    """`seatwire ask ID`: the ask whole, one fact per line."""
    ask = d.ask
    lines = [f"ask {ask.id}: {ask.state}"]
    lines.append(f"  {'seat':<13}{ask.seat_id}")
    lines.append(f"  {'work':<13}{ask.work_id} (revision {ask.revision})")
    lines.append(f"  {'tracking id':<13}{ask.tracking_id}")
    lines.append(f"  {'why asked':<13}{ask.trigger or '-'} ({ask.reason_code or '-'})")
    if ask.escalates:
        lines.append(f"  {'escalates':<13}{ask.escalates} (rung {ask.level})")
    for t in ask.targets:
        lines.append(f"  {'asked':<13}{t.member_id} ({t.rung})")
    lines.append(f"  {'created':<13}{_when(ask.created_at_ms)}")
    landing = ask.landing
    if landing is not None:
        lines.append(
            f"  {'landed':<13}{landing.adapter}: {landing.channel_id or '-'} message "
            f"{landing.message_id or '-'}, {_when(landing.at_ms)}"
        )
    if ask.is_open:
        lines.append(f"  {'due':<13}{_when(ask.deadline_ms)}")
    a = ask.answer
    if a is not None:
        lines.append(f"  {'answer':<13}{a.answer} by {a.by} via {a.via}, {_when(a.at_ms)}")
        if a.text:
            lines += wrapped("", f'"{a.text}"')
        if a.consent_id:
            lines.append(f"  {'consent':<13}{a.consent_id} until {_when(a.consent_expires_at_ms)}")
    if ask.state == "snoozed":
        lines.append(f"  {'snoozed':<13}until {_when(ask.snooze_until_ms)}")
    if ask.closed:
        lines.append(f"  {'closed':<13}{ask.closed}")
    by_tracking = {u.tracking_id: u for u in d.escalation_asks}
    for step in d.escalations:
        own = by_tracking.get(step.tracking_id)
        state = f", ask {own.id} {own.state}" if own is not None else ""
        lines.append(
            f"  {'escalated':<13}rung {step.level} to {step.target_id} ({step.rung}), "
            f"{_when(step.at_ms)}{state}"
        )
    if ask.body:
        lines += wrapped("words", ask.body)
    lines.append("  history")
    for e in ask.history:
        who = f" ({e.by})" if e.by else ""
        lines += wrapped("", f"{_when(e.at_ms)} {e.event} {e.reason_code}{who}: {e.why}", indent=4)
    return lines


def consent_line(c: ConsentRecord, now: int) -> list[str]:
    standing = (
        f"revoked by {c.revoked_by}, {_when(c.revoked_at_ms)}"
        if c.revoked_at_ms is not None
        else f"holds until {_when(c.expires_at_ms)}"
        if c.holds_at(now)
        else f"expired {_when(c.expires_at_ms)}"
    )
    kinds = ", ".join(c.risk_kinds) or "any risk"
    return [
        f"{c.id}  {standing}",
        f"  work {c.work_id}, scope {c.scope or '(the whole work)'} ({kinds})",
        f"  approved by {c.by} for seat {c.seat_id}, {_when(c.at_ms)} (ask {c.ask_id})",
    ]


# ------------------------------------------------------------------ commands


@asks.callback()
def asks_list(
    ctx: typer.Context,
    open_only: Annotated[
        bool, typer.Option("--open", help="only asks still waiting for their answer")
    ] = False,
    state: Annotated[
        str | None,
        typer.Option(help="only this state: pending, open, snoozed, escalated, answered, closed"),
    ] = None,
    person: Annotated[str | None, typer.Option(help="only asks put to this member")] = None,
    seat: Annotated[str | None, typer.Option(help="only this seat's (member id or alias)")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="at most this many")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Asks, newest first: who asked whom about what, and the answer or when it is due."""
    if ctx.invoked_subcommand is not None:
        return
    states = ("pending", "open", "snoozed", "escalated", "answered", "closed")
    if state is not None and state not in states:
        _refuse(f"--state: {state!r} is not one of {', '.join(states)}")
    if open_only and state not in (None, "open"):
        _refuse("--open and --state name two states: give one")
    c = _container()
    seat_id = None
    if seat is not None:
        known = c.org.current()[0].seat(seat)
        if known is None:
            _refuse(f"{seat!r} is not a seat of the org file")
        seat_id = known.member_id
    found = c.asks.listing(seat_id=seat_id, person=person, state="open" if open_only else state)
    found.sort(key=lambda a: (a.created_at_ms, a.id), reverse=True)
    page = found[:limit]
    if as_json:
        _dump({"asks": [a.to_wire() for a in page], "count": len(page)})
        return
    if not page:
        filtered = open_only or state or person or seat
        typer.echo("no asks" + (" for that filter" if filtered else " yet"))
        return
    for ask in page:
        for line in ask_lines(ask):
            typer.echo(line)


@asks.command("release")
def asks_release(
    seat: Annotated[str, typer.Argument(metavar="SEAT", help="the seat's member id or alias")],
    by: ByOpt,
) -> None:
    """Lift the nuisance brake on a seat's asks: it asks people again."""
    c = _container()
    known = c.org.current()[0].seat(seat)
    if known is None:
        _refuse(f"{seat!r} is not a seat of the org file")
    lifted = c.asks.lift(known.member_id, by=_member(c, by), now_ms=now_ms())
    if lifted is None:
        _missing(f"seat {known.member_id}'s asks are not held: nothing to release")
    typer.echo(
        f"seat {known.member_id} asks again: its hold since {_when(lifted.since_ms)} "
        f"({lifted.why}) lifted by {by}"
    )


def ask_command(
    ask_id: Annotated[str, typer.Argument(metavar="ID")],
    as_json: JsonOpt = False,
) -> None:
    """One ask whole: whom it asked, where it landed, its answer, every rung it went up and
    its history."""
    c = _container()
    ask = c.asks.get(ask_id)
    if ask is None:
        _missing(f"there is no ask {ask_id!r}")
    ups = c.asks.escalations_of(ask_id)
    detail = AskDetail(ask=ask, escalations=ask.escalations, escalation_asks=tuple(ups))
    if as_json:
        _dump(detail.to_wire())
        return
    for line in detail_lines(detail):
        typer.echo(line)


@consents.callback()
def consents_list(
    ctx: typer.Context,
    every: Annotated[
        bool, typer.Option("--all", help="expired and revoked ones too (while kept)")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Consent records, latest expiry first: who approved what, for how long."""
    if ctx.invoked_subcommand is not None:
        return
    c = _container()
    now = now_ms()
    found = c.asks.consents(now_ms=now, active=not every)
    if as_json:
        _dump({"consents": [x.to_wire() for x in found], "count": len(found)})
        return
    if not found:
        typer.echo("no consent records" + ("" if every else " hold now"))
        return
    for record in found:
        for line in consent_line(record, now):
            typer.echo(line)


@consents.command("revoke")
def consents_revoke(
    consent_id: Annotated[str, typer.Argument(metavar="ID")],
    by: ByOpt,
) -> None:
    """Revoke a consent: a later report needing it asks again."""
    c = _container()
    _member(c, by)
    now = now_ms()
    found = c.asks.consent(consent_id)
    if found is None:
        _missing(f"there is no consent {consent_id!r}")
    if found.revoked_at_ms is not None:
        _missing(f"consent {consent_id} was revoked already by {found.revoked_by}")
    if not found.holds_at(now):
        _missing(f"consent {consent_id} expired at {_when(found.expires_at_ms)}: nothing to revoke")
    revoked = c.asks.revoke(consent_id, by=by, now_ms=now)
    if revoked is None:
        _missing(f"there is no consent {consent_id!r}")
    typer.echo(
        f"consent {consent_id} revoked by {by}: seat {revoked.seat_id} is told "
        "(a consent_revoked item), and its scope is asked again"
    )


def register(cli: typer.Typer) -> None:
    cli.add_typer(asks, name="asks")
    cli.command("ask")(ask_command)
    cli.add_typer(consents, name="consents")
