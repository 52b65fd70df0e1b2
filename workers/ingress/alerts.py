"""`POST /v1/alerts/alertmanager`: Alertmanager's webhook receiver (docs/alerts.md).

Each alert of a notification becomes a work report of the alerts seat (SEATWIRE_ALERTS_SEAT)
blocked on the on-call member (SEATWIRE_ONCALL_MEMBER), built by pipeline/alerts.py, and is
journalled and enqueued exactly as a seat's own report is (accept.py's intake): the
engagement, guardrail and send stages then decide, count and send it like any other ask,
under the same attention budget, guardrails and quiet hours.

The route takes its own bearer token, SEATWIRE_ALERTS_TOKEN, and no other: Alertmanager's
config file holds it, so whoever reads that file can post alerts and nothing else (an
operator token would open every /v1 route to them). In order, before anything is written:
413 (size), 401 (no bearer token), 404 `alerts_not_configured` (the three settings are not
set), 401 (not the alerts token), 415 (content type), 422 (not Alertmanager's version 4
notification: `detail` names each field). Every alert of the body is read before any is
journalled, so a bad one refuses the whole notification and changes nothing.

Idempotent: one firing of one alert (its fingerprint and startsAt) is one tracking id, so
Alertmanager's re-sends (each repeat_interval, each retry) answer `duplicate`, and a re-send
whose summary changed (a value in it moved) is `duplicate` too: the first report, and its
one ask, stand. A resolved alert is the same work reported done: it withdraws the ask if it
is still open, and asks nobody. A firing that arrives after its own resolution (a retry
delivered late) is `already_resolved`, and journals nothing.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from contracts.alerts import AlertmanagerNotification
from contracts.api import AlertsAccepted
from pipeline.alerts import RESOLVED_REVISION, alert_report
from workers.errors import ConfigError
from workers.ingress.accept import journal_and_enqueue, work_arrival
from workers.ingress.deps import Deps
from workers.ingress.docs import answers, reads
from workers.ingress.http import (
    Refusal,
    json_body,
    media_type,
    problem,
    read_body,
    unsupported_media,
    validated,
    within_budget,
)
from workers.org import OrgView
from workers.queues import tracking_id_for
from workers.settings import Settings

alerts_bearer = HTTPBearer(
    scheme_name="alertsToken",
    auto_error=False,
    description="SEATWIRE_ALERTS_TOKEN, the token Alertmanager's webhook config sends "
    "(`http_config.authorization`): good on the alerts route only.",
)

router = APIRouter(prefix="/v1")
log = logging.getLogger("seatwire.alerts")


def check_alerts(settings: Settings, view: OrgView) -> None:
    """Refuse, at start, alert settings the org file cannot honour: an on-call member who is
    nobody in the org, a seat (an ask must reach a person) or not engageable, or an alerts
    seat that is no seat. Nothing when alerts are not configured."""
    configured = settings.alerts()
    if configured is None:
        return
    _token, oncall, seat_id = configured
    member = view.member(oncall)
    if member is None:
        close = [m.id for m in view.org.members if m.id.casefold() == oncall.casefold()]
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"SEATWIRE_ONCALL_MEMBER={oncall!r} is no member id of the org file "
            f"{settings.org_file}{hint}: name the person alerts ask"
        )
    if view.seat(oncall) is not None:
        raise ConfigError(
            f"SEATWIRE_ONCALL_MEMBER={oncall!r} is an agent seat: alerts must ask a person"
        )
    if not member.engageable_status:
        raise ConfigError(
            f"SEATWIRE_ONCALL_MEMBER={oncall!r} has status {member.status!r} in the org file: "
            "nobody could be asked; name an active member"
        )
    if view.seat(seat_id) is None:
        raise ConfigError(
            f"SEATWIRE_ALERTS_SEAT={seat_id!r} is no seat of the org file {settings.org_file}: "
            "name the seat alerts are reported as (its `seats:` memberId)"
        )


def _configured(deps: Deps) -> tuple[str, str, str]:
    configured = deps.settings.alerts()
    if configured is None:
        raise Refusal(
            problem(
                404,
                "alerts_not_configured",
                "set SEATWIRE_ALERTS_TOKEN, SEATWIRE_ONCALL_MEMBER and SEATWIRE_ALERTS_SEAT "
                "to receive Alertmanager's alerts",
            )
        )
    return configured


async def _resolved_before(deps: Deps, seat_id: str, work_id: str) -> str | None:
    """The journal state of this firing's resolution when it was received already (a retry
    of the firing that arrives after it), else None: a resolved alert is not asked about."""
    tracking = tracking_id_for(seat_id, work_id, RESOLVED_REVISION)
    entry = await within_budget(
        deps.settings.ingress_budget_s, run_in_threadpool(deps.container.journal.get, tracking)
    )
    return None if entry is None else str(entry.get("state", ""))


Credentials = HTTPAuthorizationCredentials | None


@router.post(
    "/alerts/alertmanager",
    response_model=AlertsAccepted,
    responses=answers(
        {},
        401,
        404,
        413,
        415,
        422,
        429,
        503,
        why={
            401: "no bearer token, or not SEATWIRE_ALERTS_TOKEN (`unauthorized`)",
            404: "alerts are not configured (`alerts_not_configured`)",
            422: "not Alertmanager's version 4 webhook notification "
            "(`invalid_alertmanager_notification`): `detail` names each field",
        },
    ),
    openapi_extra=reads(AlertmanagerNotification),
)
async def post_alertmanager(
    request: Request,
    deps: Deps,
    credentials: Credentials = Depends(alerts_bearer),  # noqa: B008
) -> Response:
    """Alertmanager's webhook: each firing alert becomes an ask of the on-call member through
    the ordinary stages, once per firing; a resolved one withdraws its ask."""
    raw = await read_body(request, deps.settings.max_body_bytes)
    given = "" if credentials is None else credentials.credentials.strip()
    if not given:
        raise Refusal(problem(401, "unauthorized", "send SEATWIRE_ALERTS_TOKEN as the bearer"))
    token, oncall, seat_name = _configured(deps)
    if not hmac.compare_digest(given.encode(), token.encode()):
        raise Refusal(problem(401, "unauthorized", "send SEATWIRE_ALERTS_TOKEN as the bearer"))
    ctype = media_type(request)
    if ctype not in ("application/json", ""):
        raise Refusal(unsupported_media(ctype))
    body = json_body(raw, "invalid_alertmanager_notification")
    note = validated(body, AlertmanagerNotification, "invalid_alertmanager_notification")
    if note.truncated_alerts:
        log.warning(
            "Alertmanager left %d alert(s) of group %s out of its notification (max_alerts): "
            "they are not asked about",
            note.truncated_alerts,
            note.group_key,
        )
    seat = deps.seat(seat_name)
    reports = [
        (alert, alert_report(alert, seat_id=seat.member_id, oncall_id=oncall))
        for alert in note.alerts
    ]
    results: list[dict[str, Any]] = []
    for alert, report in reports:
        arrival = work_arrival(deps, seat.member_id, report)
        resolved = None
        if alert.status == "firing":
            resolved = await _resolved_before(deps, seat.member_id, report.id)
        if resolved is not None:
            result, state = "already_resolved", resolved
        else:
            done = await journal_and_enqueue(deps, arrival, deps.settings.ingress_budget_s)
            # A changed re-send of the same firing is `duplicate` too: the first report stands.
            result, state = ("accepted" if done.new else "duplicate"), done.state
        results.append(
            {
                "fingerprint": alert.fingerprint,
                "status": alert.status,
                "workId": report.id,
                "trackingId": arrival.tracking_id,
                "result": result,
                "state": state,
            }
        )
    return JSONResponse({"ok": True, "alerts": results})
