"""Accept and answer an arrival: journal it and enqueue its first task within the budget, then
answer. Every route that writes comes here: `/v1/seats/{seat}/work` (a work report),
`/v1/events` and both provider routes (an inbound event; a provider's event that addresses
nobody is journalled as skipped instead).

The answer is 2xx only once the entry is journalled AND its task enqueued: `accepted`, or
`duplicate` for a repeat (which enqueues nothing new, unless an earlier delivery was journalled
but never enqueued), or 409 when the same id came back with other content. A stall past the
budget, an unreachable store, or one that refuses the write (Redis at `maxmemory` with
`noeviction` answers the script OOM before its first write, so nothing lands) raises
`Unavailable`, the app's 503 with Retry-After: never a 500, never a 2xx
(tests/workers/test_intake.py, tests/e2e/test_redis_faults_processes.py test 14).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from contracts import Candidate, WorkReport
from contracts.messages import InboundEnvelope, WorkEnvelope
from pipeline.normalise import Skipped
from workers.ingress.deps import IngressDeps
from workers.ingress.http import compact_answer, within_budget
from workers.ingress.intake import Arrival, Enqueued
from workers.queues import FIRST_TASK, tracking_id_for
from workers.stores.inbound import inbound_tracking_id

Render = Callable[[int, dict[str, Any]], Response]


async def journal_and_enqueue(deps: IngressDeps, arrival: Arrival, budget_s: float) -> Enqueued:
    """The one write of every route: the intake's journal + enqueue, within the budget."""
    return await within_budget(budget_s, deps.intake.accept(arrival))


def work_arrival(deps: IngressDeps, seat_id: str, report: WorkReport) -> Arrival:
    """Seat `seat_id`'s report as an arrival: its tracking id (seat, report id, revision),
    its envelope and the fingerprint that tells a changed repeat from a plain one."""
    tracking = tracking_id_for(seat_id, report.id, report.revision)
    fingerprint = hashlib.sha256(report.model_dump_json(by_alias=True).encode()).hexdigest()
    accepted_at = deps.clock_ms()
    payload = WorkEnvelope(
        tracking_id=tracking, seat_id=seat_id, accepted_at_ms=accepted_at, report=report
    ).model_dump_json(by_alias=True)
    return Arrival(
        task=FIRST_TASK["work"],
        tracking_id=tracking,
        kind="work",
        seat_id=seat_id,
        payload=payload,
        fingerprint=fingerprint,
        now_ms=accepted_at,
    )


async def accept_work(deps: IngressDeps, seat_id: str, report: WorkReport) -> Response:
    """202 once the report is journalled and its engagement task enqueued; 409 for a
    revision reused with other content."""
    arrival = work_arrival(deps, seat_id, report)
    tracking = arrival.tracking_id
    done = await journal_and_enqueue(deps, arrival, deps.settings.ingress_budget_s)
    if done.verb == "conflict":
        return JSONResponse(
            {
                "error": "revision_reused",
                "message": f"work {report.id} revision {report.revision} was already reported "
                "with different content; report the change with a higher revision",
                "trackingId": tracking,
            },
            status_code=409,
        )
    return JSONResponse(
        {
            "trackingId": tracking,
            "status": "accepted" if done.new else "duplicate",
            "state": done.state,
        },
        status_code=202,
    )


async def accept_inbound(
    deps: IngressDeps,
    candidate: Candidate,
    *,
    budget_s: float,
    fingerprint: str = "",
    accepted: int = 200,
    render: Render = compact_answer,
) -> Response:
    """Journal the event once and enqueue its directedness task: `accepted` (200 for a
    provider, 202 for /v1/events) with the entry's status, or 409 for a delivery id reused
    with other content (only when there is a `fingerprint`: '' makes every repeat plain)."""
    tracking = inbound_tracking_id(candidate.delivery_id)
    accepted_at = deps.clock_ms()
    payload = InboundEnvelope(
        tracking_id=tracking, accepted_at_ms=accepted_at, candidate=candidate
    ).model_dump_json(by_alias=True)
    arrival = Arrival(
        task=FIRST_TASK["inbound"],
        tracking_id=tracking,
        kind="inbound",
        seat_id="",
        payload=payload,
        fingerprint=fingerprint,
        now_ms=accepted_at,
    )
    done = await journal_and_enqueue(deps, arrival, budget_s)
    body: dict[str, Any]
    if done.verb == "conflict":
        body = {
            "error": "delivery_reused",
            "message": f"delivery {candidate.delivery_id!r} was already received with "
            "different content; give a changed event a delivery id of its own",
            "trackingId": tracking,
        }
        return render(409, body)
    body = {
        "ok": True,
        "status": "accepted" if done.new else "duplicate",
        "deliveryId": candidate.delivery_id,
        "trackingId": tracking,
        "state": done.state,
    }
    return render(accepted, body)


def _skip(deps: IngressDeps, delivery_id: str, source: str, reason: Skipped) -> dict[str, Any]:
    tracking = inbound_tracking_id(delivery_id)
    new = deps.container.journal.skip(
        tracking,
        kind="inbound",
        payload=json.dumps({"source": source, "deliveryId": delivery_id}),
        reason=reason.reason,
        detail=reason.detail,
        now_ms=deps.clock_ms(),
        retention_ms=deps.settings.inbound_retention_ms,
    )
    return {
        "ok": True,
        "status": "skipped" if new else "duplicate",
        "reason": reason.reason,
        "deliveryId": delivery_id,
        "trackingId": tracking,
    }


async def skip_inbound(
    deps: IngressDeps, delivery_id: str, source: str, reason: Skipped
) -> Response:
    """A provider's event that addresses nobody: journalled as skipped with its reason and
    answered 200, so the provider does not retry it and the trace shows why."""
    work = run_in_threadpool(_skip, deps, delivery_id, source, reason)
    return compact_answer(200, await within_budget(deps.settings.webhook_budget_s, work))


async def accept_outcome(
    deps: IngressDeps, outcome: Candidate | Skipped, *, skip_as: str, source: str
) -> Response:
    """A provider route's last step: accept its event, or journal why it was skipped."""
    if isinstance(outcome, Candidate):
        return await accept_inbound(deps, outcome, budget_s=deps.settings.webhook_budget_s)
    return await skip_inbound(deps, skip_as, source, outcome)
