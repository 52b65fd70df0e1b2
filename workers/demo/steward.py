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
from typing import Any

import httpx
from celery import Celery

from contracts.steward import AuditEntry, Dispatch, ObjectiveOutcome
from pipeline.js import num_str
from workers.container import Container
from workers.demo.view import Case, Check, Field, Section, plural
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


# What each case is given, for its heading.
GIVEN = {
    "deploy-lead-time": "off target, with nothing in flight",
    "trial-activation": "off target, its only sample a model's estimate (`llm`)",
    "review-turnaround": "the second run: an item in flight, the trend flat",
    "vendor-invoice-backlog": "its sensor 3 days stale on a daily cadence",
}


def run_steward_demo(
    http: httpx.Client,
    container: Container,
    app: Celery,
    *,
    now_ms: int,
    wait_final: Poll,
    seat_headers: SeatHeaders,
) -> Section:
    """Post the samples, run the steward twice, and check the four cases."""
    _close_earlier_items(http, seat_headers)
    for key, body in samples(now_ms):
        http.post(f"/v1/objectives/{key}/samples", json=body).raise_for_status()
    steward = StewardRun.of(container, app)
    first = steward(now_ms=now_ms)
    second = steward(now_ms=now_ms + 1_000)  # beat's next tick: the same samples
    runs = {o.objective_key: o for o in first.plan.outcomes}
    again = {o.objective_key: o for o in second.plan.outcomes}
    cases = (
        _admits(http, runs["deploy-lead-time"], wait_final, seat_headers),
        _honesty(runs["trial-activation"]),
        _escalates(http, again["review-turnaround"], wait_final),
        _drifts(http, runs["vendor-invoice-backlog"], seat_headers),
    )
    audit = http.get("/v1/steward/audit", params={"limit": 500}).raise_for_status().json()
    admitted = first.plan.totals.admitted + second.plan.totals.admitted
    rejected = first.plan.totals.rejected + second.plan.totals.rejected
    tally = (
        f"{plural(admitted, 'candidate')} admitted and {rejected} rejected over two runs; "
        f"{plural(audit['count'], 'audit line')}"
    )
    return Section(
        key="steward",
        label="goal steward",
        title="The goal steward: every gap and candidate, audited",
        intro="KPI samples posted for the sample org's four objectives "
        "(POST /v1/objectives/{key}/samples), then two steward runs, the second as beat's "
        "next tick. Each case is read back over HTTP: backlogs, the journal, the audit.",
        cases=cases,
        summary=f"{plural(len(cases), 'objective')}: {tally}",
        counts=(
            ("objectives", len(cases)),
            ("admitted", admitted),
            ("rejected", rejected),
            ("auditLines", audit["count"]),
        ),
        notes=(
            f"In all, {tally} (GET /v1/steward/audit; against a Redis, "
            "`uv run seatwire objectives`).",
        ),
    )


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


def _admits(
    http: httpx.Client, outcome: ObjectiveOutcome, wait_final: Poll, seat_headers: SeatHeaders
) -> Case:
    routes = {d.route: d for d in outcome.dispatches}
    backlog = http.get("/v1/seats/scout/backlog", headers=seat_headers("scout"))
    backlog = backlog.raise_for_status().json()["items"]
    self_item = routes.get("SELF")
    on_backlog = self_item is not None and any(i["id"] == self_item.id for i in backlog)
    handoff = routes.get("HANDOFF")
    asked = _asked(http, "scout", handoff.id, wait_final) if handoff else "no handoff"
    got = f"SELF {'on backlog' if on_backlog else 'missing'}; HANDOFF {asked}"
    return _case(outcome, "SELF on backlog; HANDOFF engaged -> ava", got)


def _honesty(outcome: ObjectiveOutcome) -> Case:
    refused = [e for e in outcome.audit if e.kind == "candidate" and not e.admitted]
    gates = ",".join(str(e.gate) for e in refused) or "nothing"
    done = f"{len(outcome.dispatches)} dispatched" if outcome.dispatches else "nothing dispatched"
    return _case(outcome, "rejected at honesty, nothing dispatched", f"rejected at {gates}, {done}")


def _escalates(http: httpx.Client, outcome: ObjectiveOutcome, wait_final: Poll) -> Case:
    action = outcome.decision.action if outcome.decision else "none"
    esc = next((d for d in outcome.dispatches if d.route == "escalate"), None)
    asked = _asked(http, "scout", esc.id, wait_final) if esc else "no engagement"
    return _case(outcome, "escalate; engaged -> gus", f"{action}; {asked}")


def _drifts(http: httpx.Client, outcome: ObjectiveOutcome, seat_headers: SeatHeaders) -> Case:
    action = outcome.decision.action if outcome.decision else "none"
    drift = next((d for d in outcome.dispatches if d.route == "drift"), None)
    page = http.get("/v1/seats/tally/backlog", headers=seat_headers("tally"))
    items = page.raise_for_status().json()["items"]
    item = next((i for i in items if drift is not None and i["id"] == drift.id), None)
    got = f"{action}; " + (f"restore item for {drift.target_id}" if item and drift else "no item")
    return _case(outcome, "drift; restore item for devi", got)


def _case(outcome: ObjectiveOutcome, expected: str, got: str) -> Case:
    """An objective's case: what it ended as, the steward's decision (its reason code) and
    the gap it was decided on; each audit line and dispatch as a `why` line."""
    key = outcome.objective_key
    action = outcome.decision.action if outcome.decision else "none"
    fields = [Field("outcome", "outcome", got), Field("reasonCode", "reason code", action)]
    gates = tuple(str(e.gate) for e in outcome.audit if e.gate is not None)
    if gates:
        fields.append(Field("gates", "refused at", gates))
    fields.append(Field("seat", "seat", outcome.seat_id or "none"))
    if outcome.gap is not None:
        g = outcome.gap
        value = "no sample" if g.value is None else num_str(g.value)
        stale = ", stale" if g.stale else ""
        measured = f"{value} against a target of {num_str(g.target)} (trend {g.trend}{stale})"
        fields.append(Field("gap", "measured", measured))
    why = tuple(_audit_line(e) for e in outcome.audit) + tuple(
        _dispatch_line(d) for d in outcome.dispatches
    )
    given = GIVEN.get(key, "its latest sample")
    return Case(given, tuple(fields), Check.of(expected, got), why, subject=key)


def _audit_line(entry: AuditEntry) -> str:
    if entry.kind != "candidate":
        line = f"{entry.action or entry.kind}: {entry.reason}"
    else:
        title = f'candidate "{entry.candidate_title}"' if entry.candidate_title else "a candidate"
        if entry.admitted:
            line = f"{title} admitted ({entry.disposition or 'no disposition'}): {entry.reason}"
        elif entry.gate is not None:
            line = f"{title} refused at the {entry.gate} gate: {entry.reason}"
        else:
            line = f"{title}: {entry.reason}"
    return f"{line}; {entry.note}" if entry.note else line


def _dispatch_line(dispatch: Dispatch) -> str:
    to = f", for {dispatch.target_id}" if dispatch.target_id else ""
    return f"dispatched {dispatch.route} ({dispatch.kind}{to}): {dispatch.title}"
