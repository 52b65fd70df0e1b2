"""What an operator asks of a running deployment, from a terminal (issue 15 point 3):

    seatwire status [--json]              queues, dead letters, the journal (open, overdue,
                                          failed), parked messages, the workers that answer,
                                          beat's leader, each beat tick's last finish
    seatwire ledger [--seat S] [--work-id W] [--limit N] [--json]
                                          ledger rows, newest first (an engagement with
                                          its ask's standing: its answer, or when it is due)
    seatwire trace DELIVERY_ID [--json]   everything decided about one inbound event
    seatwire work TRACKING_ID [--json]    where one reported piece of work stands, with the
                                          asks of its work and their answers

They read the workers' Redis (SEATWIRE_REDIS_URL), as `seatwire seat` does, and print the
same JSON the API's routes answer (`GET /v1/ledger`, `/v1/trace/...`, `/v1/work/...`).
The text is one fact per line, identifiers whole: it reads the same at 80 columns and piped.
An id that names nothing exits 1 with a sentence saying so.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from contracts.asks import Ask
from contracts.engagement import EngagementDecision
from contracts.guardrails import LedgerRow
from contracts.inbound import Trace
from contracts.ops import ClusterStatus, WorkStatus
from pipeline.asks import ask_id_for
from workers.cli.asks import where_it_stands
from workers.cli.steward import _refuse, redis_container
from workers.clock import now_ms
from workers.container import Container
from workers.settings import masked
from workers.status import cluster_status, work_status

JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]


def _container() -> Container:
    return redis_container(
        _refuse,
        embedded="an embedded Seatwire lives inside its own process: point SEATWIRE_REDIS_URL "
        "at the deployment's Redis",
    )


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def age(ms: int) -> str:
    """A duration in ms as a person reads it: `42s`, `3m 5s`, `2h 10m`, `4d 1h`."""
    s = max(0, ms // 1000)
    if s < 60:
        return f"{s}s"
    if s < 3_600:
        return f"{s // 60}m {s % 60}s"
    if s < 86_400:
        return f"{s // 3_600}h {s % 3_600 // 60}m"
    return f"{s // 86_400}d {s % 86_400 // 3_600}h"


def _dump(wire: Any) -> None:
    typer.echo(json.dumps(wire, indent=2))


def _line(label: str, value: str) -> None:
    typer.echo(f"{label:<13}{value}")


def status_lines(s: ClusterStatus, *, where: str, intervals: dict[str, float]) -> list[str]:
    """The text of `seatwire status`: one fact per line. `intervals`: each tick's cadence in
    seconds, to call a tick late when it has not finished in three of them."""
    lines = [f"Seatwire at {where}, {_when(s.at_ms)}"]
    waiting = sum(s.queues.values())
    lines.append(f"{'queues':<13}{waiting} message(s) waiting")
    lines += [f"{'':<13}{q:<13}{n}" for q, n in s.queues.items()]
    lines.append(
        f"{'dead letters':<13}{s.dlq}" + ("" if not s.dlq else " (seatwire dlq list; replay)")
    )
    lines.append(
        f"{'journal':<13}{s.journal_open} open, {s.journal_overdue} overdue, "
        f"{s.journal_failed} failed"
    )
    lines.append(f"{'parked':<13}{s.parked}")
    lines.append(
        f"{'controller':<13}{s.controller_due} seat(s) in the due index, "
        f"{s.controller_overdue} due now"
    )
    if s.workers is not None:
        lines.append(f"{'workers':<13}{len(s.workers)} answered")
        lines += [f"{'':<13}{w.name}: {', '.join(w.queues)}" for w in s.workers]
    lines.append(
        f"{'beat':<13}"
        + (
            f"led by {s.beat_leader} (token {s.beat_token})"
            if s.beat_leader is not None
            else "no leader: nothing schedules the sweep or the ticks"
        )
    )
    for tick, every_s in intervals.items():
        at = s.ticks.get(tick)
        if at is None:
            lines.append(f"{'tick':<13}{tick:<11}never finished")
            continue
        late = s.at_ms - at > 3 * every_s * 1000
        lines.append(
            f"{'tick':<13}{tick:<11}{age(s.at_ms - at)} ago"
            + (f" (LATE: every {every_s:g}s)" if late else "")
        )
    return lines


def status(as_json: JsonOpt = False) -> None:
    """The deployment at a glance: queues, dead letters, journal, parked messages, workers,
    beat's leader and each tick's last finish."""
    from workers.queues import BEAT_STAGES

    c = _container()
    found = cluster_status(c, now_ms=now_ms(), ask_workers=True)
    if as_json:
        _dump(found.to_wire())
        return
    intervals = {
        str(stage.tick): float(getattr(c.settings, str(stage.cadence))) for stage in BEAT_STAGES
    }
    for line in status_lines(found, where=masked(c.settings.redis_url), intervals=intervals):
        typer.echo(line)


def row_line(row: LedgerRow) -> str:
    """One ledger row on one line: when, seat, outcome, reason code, targets, work id."""
    targets = ", ".join(t.member_id for t in row.targets) or "-"
    reason = row.reason_code or "-"
    return (
        f"{_when(row.at_ms)}  {row.seat_id}  {row.outcome}  {reason}  -> {targets}"
        f"  ({row.surface}; work {row.work_id})"
    )


def row_ask_id(row: LedgerRow) -> str | None:
    """The ask an engaging row's send recorded (its dedupe key and attempt name it)."""
    if not row.engaged or not row.dedupe_key or row.attempt is None:
        return None
    return ask_id_for(row.dedupe_key, row.attempt)


def ask_line(ask: Ask) -> str:
    """An ask under the row or decision it came from: its id and its standing."""
    return f"    ask {ask.id}: {where_it_stands(ask)}"


def ledger(
    seat: Annotated[
        str | None, typer.Option(help="only this seat's rows (member id or alias)")
    ] = None,
    work_id: Annotated[str | None, typer.Option("--work-id", help="only this work's rows")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="at most this many")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """Ledger rows, newest first: every engagement, refusal and considered 'nobody'."""
    c = _container()
    seat_ids = None
    if seat is not None:
        known = c.org.current()[0].seat(seat)
        if known is None:
            _refuse(f"{seat!r} is not a seat of the org file")
        seat_ids = [known.member_id]
    rows = c.ledger.read(seat_ids=seat_ids, work_id=work_id, limit=limit)
    if as_json:
        _dump({"rows": [r.to_wire() for r in rows], "count": len(rows)})
        return
    if not rows:
        typer.echo("no ledger rows" + (" for that filter" if seat or work_id else " yet"))
        return
    ids = [i for i in (row_ask_id(r) for r in rows) if i is not None]
    found = {a.id: a for a in c.asks.many(list(dict.fromkeys(ids)))}
    for row in rows:
        typer.echo(row_line(row))
        ask = found.get(row_ask_id(row) or "")
        if ask is not None:
            typer.echo(ask_line(ask))


def trace_lines(t: Trace) -> list[str]:
    lines = [f"event {t.delivery_id}: {t.state}"]
    lines.append(f"  tracking id  {t.tracking_id}")
    lines.append(f"  source       {t.source or '-'} {t.family or ''}".rstrip())
    lines.append(f"  received     {t.deliveries} time(s), first {_when(t.accepted_at_ms)}")
    if t.resolved_at_ms is not None:
        lines.append(f"  resolved     {_when(t.resolved_at_ms)} (org {t.org_version or '-'})")
    if t.reason:
        lines.append(f"  reason       {t.reason}" + (f": {t.detail}" if t.detail else ""))
    if t.failed_stage or t.error:
        lines.append(f"  failed       {t.failed_stage or '-'}: {t.error or '-'}")
    for v in t.seats:
        where = f" in its inbox at {v.position}" if v.position is not None else ""
        verdict = "directed" if v.directed else "not directed"
        lines.append(f"  seat {v.seat_id}: {verdict}, {v.reason}{where}")
        lines.append(f"    {v.why}")
        if v.inbox_full:
            lines.append("    not put in its inbox: it was full (a ledger row says so)")
    return lines


def trace(
    delivery_id: Annotated[str, typer.Argument(metavar="DELIVERY_ID")],
    as_json: JsonOpt = False,
) -> None:
    """Everything decided about one inbound event, and for every seat why (or why not)."""
    c = _container()
    found = c.inbound.trace(delivery_id)
    if found is None:
        typer.echo(f"no inbound event {delivery_id!r} was received", err=True)
        raise typer.Exit(1)
    if as_json:
        _dump(found.to_wire())
        return
    for line in trace_lines(found):
        typer.echo(line)


def work_lines(w: WorkStatus) -> list[str]:
    lines = [f"work {w.tracking_id}: {w.state or '-'}"]
    lines.append(f"  seat         {w.seat_id or '-'}")
    lines.append(f"  accepted     {_when(w.accepted_at_ms)}")
    if w.decision:
        d = EngagementDecision.model_validate(w.decision)
        targets = ", ".join(t.member_id for t in d.targets) or "-"
        verdict = "engage" if d.engage else "do not engage"
        lines.append(f"  decision     {verdict}, {d.reason_code or '-'} -> {targets} ({d.surface})")
        if d.guardrail is not None:
            lines.append(f"  refused      {d.guardrail.code}: {d.guardrail.detail}")
        lines += [f"    {why}" for why in d.why]
    if w.send is not None:
        s = w.send
        lines.append(
            f"  send         {s.state or '-'}, attempt {s.attempt or '-'}"
            + (f", message {s.message_id} in {s.channel_id}" if s.message_id else "")
        )
    if w.failed_stage or w.error:
        lines.append(f"  failed       {w.failed_stage or '-'}: {w.error or '-'}")
    if w.asks:
        lines.append(f"  asks         {len(w.asks)} of this work, newest first")
        lines += [ask_line(a) for a in w.asks]
    return lines


def work(
    tracking_id: Annotated[str, typer.Argument(metavar="TRACKING_ID")],
    as_json: JsonOpt = False,
) -> None:
    """Where one reported piece of work stands: its state, decision and send."""
    c = _container()
    found = work_status(c, tracking_id)
    if found is None:
        typer.echo(f"nothing was accepted as {tracking_id}", err=True)
        raise typer.Exit(1)
    if as_json:
        _dump(found.to_wire())
        return
    for line in work_lines(found):
        typer.echo(line)


def register(cli: typer.Typer) -> None:
    for command in (status, ledger, trace, work):
        cli.command(command.__name__)(command)
