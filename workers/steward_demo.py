"""The goal steward's part of `seatwire demo`: KPI samples posted over HTTP for the sample
org's four active objectives, two steward runs (the second is beat's next tick), and a check
of each case against what it must end as, read back over HTTP (audit, backlog, journal):

    deploy-lead-time        off target, nothing in flight: one SELF item on scout's backlog
                            and one HANDOFF, an engagement that asks Ava (the candidate's owner)
    trial-activation        its only sample is `llm`-sourced: the candidate is refused at the
                            honesty gate and nothing is dispatched
    review-turnaround       the first run puts its item in flight; with the trend flat, the
                            second escalates: an engagement that asks Gus, the owner
    vendor-invoice-backlog  its sensor is stale (3 days on a daily cadence): drift, one
                            "restore the measurement" item for Devi on tally's backlog

A Redis an earlier demo used still holds that demo's open items, which would change what the
gates say (dedupe, work in flight); they are closed first, as done by the demo.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from celery import Celery
from rich.console import Console
from rich.table import Table

from workers.container import Container
from workers.queues import tracking_id_for
from workers.stages.steward_run import StewardRun

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
DEMO_OBJECTIVES = {
    "deploy-lead-time": "scout",
    "trial-activation": "scout",
    "review-turnaround": "scout",
    "vendor-invoice-backlog": "tally",
}
Poll = Callable[[httpx.Client, str], dict[str, Any]]
# The Authorization header of a seat's own token (its routes take no other: issue 13).
SeatHeaders = Callable[[str], dict[str, str]]


def samples(now_ms: int) -> list[tuple[str, dict[str, Any]]]:
    """The samples each case is decided on (values in each metric's units)."""

    def at(key: str, value: float, source: str, ago_ms: int) -> tuple[str, dict[str, Any]]:
        body = {"value": value, "source": source, "window": "7d", "atMs": now_ms - ago_ms}
        return key, body

    return [
        at("deploy-lead-time", 30, "method", HOUR_MS),  # target 8 h, down
        at("trial-activation", 31, "llm", HOUR_MS),  # target 40 %, up: a model's estimate
        at("review-turnaround", 40, "method", 14 * DAY_MS + HOUR_MS),  # two periods back...
        at("review-turnaround", 40, "method", HOUR_MS),  # ...and now: the same gap, flat
        at("vendor-invoice-backlog", 25, "method", 3 * DAY_MS),  # daily, 3 days old: stale
    ]


@dataclass
class Case:
    objective: str
    expected: str
    got: str
    ok: bool


def run_steward_demo(
    http: httpx.Client,
    container: Container,
    app: Celery,
    console: Console,
    *,
    now_ms: int,
    wait_final: Poll,
    seat_headers: SeatHeaders,
) -> int:
    """Post the samples, run the steward twice, check the four cases; failures counted."""
    _close_earlier_items(http, seat_headers)
    for key, body in samples(now_ms):
        http.post(f"/v1/objectives/{key}/samples", json=body).raise_for_status()
    steward = StewardRun.of(container, app)
    first = steward(now_ms=now_ms)
    second = steward(now_ms=now_ms + 1_000)  # beat's next tick: the same samples
    runs = {o.objective_key: o for o in first.plan.outcomes}
    again = {o.objective_key: o for o in second.plan.outcomes}
    cases = [
        _admits(http, runs["deploy-lead-time"], wait_final, seat_headers),
        _honesty(runs["trial-activation"]),
        _escalates(http, again["review-turnaround"], wait_final),
        _drifts(http, runs["vendor-invoice-backlog"], seat_headers),
    ]
    audit = http.get("/v1/steward/audit", params={"limit": 500}).raise_for_status().json()
    table = Table(title="The goal steward: every gap and candidate, audited", show_lines=True)
    for column in ("objective", "must end as", "ended as", "check"):
        table.add_column(column, overflow="fold")
    for case in cases:
        mark = "[green]ok[/green]" if case.ok else "[red]UNEXPECTED[/red]"
        table.add_row(case.objective, case.expected, case.got, mark)
    console.print(table)
    console.print(
        f"{first.plan.totals.admitted + second.plan.totals.admitted} admitted, "
        f"{first.plan.totals.rejected + second.plan.totals.rejected} rejected over two runs; "
        f"the audit holds {audit['count']} line(s) (GET /v1/steward/audit)"
    )
    return sum(0 if c.ok else 1 for c in cases)


def _close_earlier_items(http: httpx.Client, seat_headers: SeatHeaders) -> None:
    for seat in sorted(set(DEMO_OBJECTIVES.values())):
        auth = seat_headers(seat)
        page = http.get(f"/v1/seats/{seat}/backlog", headers=auth).raise_for_status().json()
        for item in page["items"]:
            if item["objectiveKey"] in DEMO_OBJECTIVES:
                done = f"/v1/seats/{seat}/backlog/{item['id']}/done"
                http.post(done, headers=auth).raise_for_status()


def _asked(http: httpx.Client, seat: str, dispatch_id: str, wait_final: Poll) -> str:
    """Who the engagement of a dispatch asked, once its journal entry is final."""
    final = wait_final(http, tracking_id_for(seat, dispatch_id, 1))
    targets = [t["memberId"] for t in (final.get("decision") or {}).get("targets", [])]
    return f"{final['state']} -> {','.join(targets) or 'nobody'}"


def _admits(http: httpx.Client, outcome: Any, wait_final: Poll, seat_headers: SeatHeaders) -> Case:
    routes = {d.route: d for d in outcome.dispatches}
    backlog = http.get("/v1/seats/scout/backlog", headers=seat_headers("scout"))
    backlog = backlog.raise_for_status().json()["items"]
    self_item = routes.get("SELF")
    on_backlog = self_item is not None and any(i["id"] == self_item.id for i in backlog)
    handoff = routes.get("HANDOFF")
    asked = _asked(http, "scout", handoff.id, wait_final) if handoff else "no handoff"
    got = f"SELF {'on backlog' if on_backlog else 'missing'}; HANDOFF {asked}"
    return _case(outcome, "SELF on backlog; HANDOFF engaged -> ava", got)


def _honesty(outcome: Any) -> Case:
    refused = [e for e in outcome.audit if e.kind == "candidate" and not e.admitted]
    gates = ",".join(str(e.gate) for e in refused) or "nothing"
    done = f"{len(outcome.dispatches)} dispatched" if outcome.dispatches else "nothing dispatched"
    return _case(outcome, "rejected at honesty, nothing dispatched", f"rejected at {gates}, {done}")


def _escalates(http: httpx.Client, outcome: Any, wait_final: Poll) -> Case:
    action = outcome.decision.action if outcome.decision else "none"
    esc = next((d for d in outcome.dispatches if d.route == "escalate"), None)
    asked = _asked(http, "scout", esc.id, wait_final) if esc else "no engagement"
    got = f"{action}; {asked}"
    return Case(
        outcome.objective_key, "escalate; engaged -> gus", got, got == "escalate; engaged -> gus"
    )


def _drifts(http: httpx.Client, outcome: Any, seat_headers: SeatHeaders) -> Case:
    action = outcome.decision.action if outcome.decision else "none"
    drift = next((d for d in outcome.dispatches if d.route == "drift"), None)
    page = http.get("/v1/seats/tally/backlog", headers=seat_headers("tally"))
    items = page.raise_for_status().json()["items"]
    item = next((i for i in items if drift is not None and i["id"] == drift.id), None)
    got = f"{action}; " + (f"restore item for {drift.target_id}" if item and drift else "no item")
    return _case(outcome, "drift; restore item for devi", got)


def _case(outcome: Any, expected: str, got: str) -> Case:
    return Case(outcome.objective_key, expected, got, got == expected)
