"""`seatwire steward ...` and `seatwire objectives`: the goal steward from a terminal.

    seatwire steward run [--dry-run] [--objective KEY] [--json]
        --dry-run plans a run from what Redis holds now and prints, gate by gate, what it
        would decide, admit and reject; it takes no lease and writes nothing. Without it,
        one run now (the tick beat schedules), leases, audit and dispatches included.
    seatwire steward admit OBJECTIVE CANDIDATE --by MEMBER --reason TEXT [--gate G ...]
        an operator's override: the named candidate passes the WIP, trend or budget gate
        once, at the next run; recorded with who and why.
    seatwire objectives [--json]
        every objective with its gap, trend and the steward's last decision.

They read and write the same Redis as the workers (SEATWIRE_REDIS_URL); in embedded mode
there is no state outside the running process, so they refuse with that reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from contracts.goals import AdmissionCheck
from contracts.steward import AuditEntry, ObjectiveOutcome
from workers.container import Container
from workers.errors import ConfigError
from workers.settings import load_settings, masked, scrubbed

steward = typer.Typer(no_args_is_help=True, help="The goal steward: run it, or override a gate.")
console = Console()
errors = Console(stderr=True)

# Short names of the gates, so that a check trail fits an 80-column table.
GATE_MARK = {
    "freshness": "fresh",
    "adoption": "adopt",
    "honesty": "honest",
    "provenance": "why",
    "dedupe": "dedupe",
    "trend": "trend",
    "wip": "wip",
    "budget": "budget",
}


def _refuse(message: object) -> NoReturn:
    errors.print(f"[red]cannot run:[/red] {message}", soft_wrap=True)
    raise typer.Exit(2)


def _container() -> Container:
    """The workers' container on the configured Redis, its Redis answering."""
    return redis_container(
        _refuse, embedded="the steward's state lives in Redis: set SEATWIRE_REDIS_URL"
    )


def redis_container(refuse: Callable[[object], NoReturn], *, embedded: str) -> Container:
    """The workers' container (its `app` set) on the configured Redis, its Redis answering;
    `refuse` says why not (a bad setting, embedded mode: `embedded`, Redis not answering)."""
    from workers import bootstrap
    from workers.celery_app import create_app

    try:
        settings = load_settings()
    except ConfigError as exc:
        refuse(exc)
    if settings.embedded:
        refuse(embedded)
    try:
        container = bootstrap.build_container(settings, app=create_app(settings, register=False))
        container.redis.ping()
    except ConfigError as exc:
        refuse(exc)
    except Exception as exc:
        url = settings.redis_url
        refuse(f"Redis at {masked(url)} does not answer: {scrubbed(exc, url)}")
    return container


def trail(checks: tuple[AdmissionCheck, ...]) -> str:
    """A check trail in one short line: each gate judged, passed or not."""
    return " ".join(f"{GATE_MARK.get(c.gate, c.gate)}{'+' if c.ok else '-'}" for c in checks)


def verdict(entry: AuditEntry) -> str:
    if entry.kind == "gap_decision":
        return f"gap: {entry.action}"
    if entry.kind == "proposer_failed":
        return "proposer failed"
    if entry.kind == "not_run":
        return "not run"
    if entry.admitted:
        return f"admitted {entry.disposition or ''}".strip()
    return f"rejected: {entry.gate}" if entry.gate else "not judged"


def plan_table(outcome: ObjectiveOutcome, label: str) -> Table:
    """One objective's part of a run: its gap decision and every candidate, gate by gate."""
    gap = outcome.gap
    where = f" (seat {outcome.seat_id})" if outcome.seat_id else ""
    measured = "" if gap is None or gap.gap is None else f", gap {gap.gap:g}, trend {gap.trend}"
    table = Table(title=f"{label}: {outcome.objective_key}{where}{measured}", show_lines=True)
    for column in ("line", "verdict", "gates", "why"):
        table.add_column(column, overflow="fold")
    for entry in outcome.audit:
        what = entry.candidate_title or entry.kind.replace("_", " ")
        why = entry.reason + (f" [{entry.note}]" if entry.note else "")
        table.add_row(what, verdict(entry), trail(entry.checks) or "-", why)
    return table


@steward.command("run")
def run(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="plan only: no lease, audit or dispatch")
    ] = False,
    objective: Annotated[str | None, typer.Option(help="only this objective")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the plan as JSON")] = False,
) -> None:
    """Run the goal steward once now, or (--dry-run) show what it would decide."""
    from workers.clock import now_ms
    from workers.stages.steward_run import StewardRun

    container = _container()
    runner = StewardRun.of(container)
    result = (runner.preview if dry_run else runner)(objective, now_ms=now_ms())
    if as_json:
        body = {
            "dryRun": dry_run,
            "plan": result.plan.to_wire(),
            "skipped": [{"objective": s.objective_key, "reason": s.reason} for s in result.skipped],
            "dispatched": dict(result.dispatched),
            "pending": [d.to_wire() for d in result.pending],
            "audited": result.audited,
        }
        typer.echo(json.dumps(body, indent=2))
    else:
        label = "dry run (nothing written)" if dry_run else "steward run"
        for outcome in result.plan.outcomes:
            console.print(plan_table(outcome, label))
        for s in result.skipped:
            console.print(f"skipped {s.objective_key}: {s.reason}")
        for d in result.pending:
            console.print(
                f"pending from a run that died part-way: {d.id} ({d.route}, "
                f"{d.objective_key}); a real run does it first"
            )
        t = result.plan.totals
        console.print(
            f"{t.run} objective(s) run, {t.admitted} admitted, {t.rejected} rejected, "
            f"{t.dispatches} dispatch(es)"
            + ("" if dry_run else f", {result.audited} audit line(s) written")
        )
        for dispatch_id, status in result.dispatched.items():
            console.print(f"  {dispatch_id}: {status}")
    if objective is not None and result.skipped and not result.plan.outcomes:
        raise typer.Exit(1)


def objectives(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Every objective with its gap, trend and the steward's last decision."""
    from pipeline.goals.kpi import gap_for
    from workers.clock import now_ms

    container = _container()
    view = container.org.current()[0]
    now = now_ms()
    rows = []
    decided = container.audit.last_decisions([o.key for o in view.objectives])
    for obj in view.objectives:
        gap = gap_for(obj, container.samples.for_objective(obj), now)
        rows.append((obj, gap, decided.get(obj.key)))
    if as_json:
        body = [
            {
                **obj.to_wire(),
                "gap": gap.to_wire(),
                "lastDecision": None if last is None else last.to_wire(),
            }
            for obj, gap, last in rows
        ]
        typer.echo(json.dumps({"objectives": body, "nowMs": now}, indent=2))
        return
    table = Table(title="objectives (the last decision's reason: --json)")
    for column in ("key", "state", "seat", "value / target", "gap", "trend", "last decision"):
        table.add_column(column, overflow="fold")
    for obj, gap, last in rows:
        value = "-" if gap.value is None else f"{gap.value:g}"
        table.add_row(
            obj.key,
            obj.state,
            obj.steward_seat or "-",
            f"{value} / {obj.target:g} ({obj.direction})",
            "-" if gap.gap is None else f"{gap.gap:g}" + (" stale" if gap.stale else ""),
            gap.trend,
            "-" if last is None else str(last.entry.action),
        )
    console.print(table)


@steward.command("admit")
def admit(
    objective: Annotated[str, typer.Argument(metavar="OBJECTIVE", help="the objective's key")],
    candidate: Annotated[
        str, typer.Argument(metavar="CANDIDATE", help="the rejected candidate's title")
    ],
    by: Annotated[str, typer.Option("--by", help="the member id of who overrides")],
    reason: Annotated[str, typer.Option("--reason", help="why, in words, for the audit")],
    gate: Annotated[
        list[str] | None,
        typer.Option("--gate", help="wip, trend or budget (repeatable; default all three)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Push one rejected candidate past the WIP, trend or budget gate at the next run
    (never past honesty, adoption or provenance); written to the audit with who and why."""
    from pydantic import ValidationError

    from workers.clock import now_ms
    from workers.stores.overrides import OverrideRefused

    container = _container()
    request: dict[str, object] = {
        "objective": objective,
        "candidate": candidate,
        "by": by,
        "reason": reason,
    }
    if gate:
        request["gates"] = gate
    view = container.org.current()[0]
    try:
        status, override = container.overrides.submit(view, request, now_ms=now_ms())
    except ValidationError as exc:
        wrong = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(request)'}: {e['msg']}" for e in exc.errors()
        )
        console.print(f"[red]refused:[/red] {wrong}")
        raise typer.Exit(2) from None
    except OverrideRefused as refused:
        r = refused.refusal
        console.print(f"[red]refused ({r.code}, {r.field}):[/red] {r.message}")
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps({"status": status, "override": override.to_wire()}, indent=2))
        return
    gates = ", ".join(override.gates)
    console.print(
        f"{status}: {override.id} — {override.candidate_title!r} of {override.objective_key} "
        f"may pass {gates} at the next run (by {override.by}: {override.reason})"
    )
