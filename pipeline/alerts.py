"""An Alertmanager alert as a seat's work report (docs/alerts.md). Pure.

A firing alert becomes work blocked on the on-call member (`blocked_on_other`, blocker kind
`decision`, owner the on-call member, nothing the seat can do on its own), so the ordinary
stages decide it: engagement names the on-call member, the guardrails count it against the
same attention budget and quiet hours as every other ask, and send sends it once.

One firing of one alert is one report: its id is the alert's fingerprint and the start of
the firing (`alert:<fingerprint>:<startsAt, Unix ms>`), revision 1. Alertmanager sends the
same firing again every `repeat_interval` and on every retry; each of those is the same
tracking id, so the journal keeps one report and one ask. Its resolution is revision 2 of
the same work, reported `done`: the engagement stage withdraws the ask if it is still open,
and asks nobody.
"""

from __future__ import annotations

from contracts.alerts import AlertmanagerAlert
from contracts.work import Blocker, WorkReport

FIRING_REVISION = 1
RESOLVED_REVISION = 2
MAX_LINK = 2000  # WorkReport.link's cap


def alert_work_id(alert: AlertmanagerAlert) -> str:
    """The work id of one firing of one alert."""
    starts_ms = int(alert.starts_at.timestamp() * 1000)
    return f"alert:{alert.fingerprint}:{starts_ms}"


def _severity(alert: AlertmanagerAlert) -> str:
    return alert.labels.get("severity", "") or "unset"


def _link(url: str) -> str | None:
    """`url` as the report's link; one past the cap is left in the text only (a link cut
    short would lead nowhere)."""
    return url if url and len(url) <= MAX_LINK else None


def _labels(alert: AlertmanagerAlert) -> str:
    shown = {k: v for k, v in sorted(alert.labels.items()) if k != "alertname"}
    return ", ".join(f"{k}={v}" for k, v in shown.items()) or "none"


def alert_report(alert: AlertmanagerAlert, *, seat_id: str, oncall_id: str) -> WorkReport:
    """The work report of `alert`: an ask of `oncall_id` while it fires, the work done once
    it is resolved. Built from the alert alone, so every re-send of the same firing is the
    same report id (a changed summary, such as a value that moved, is a conflict the journal
    refuses: the first ask stands)."""
    name = alert.name
    runbook = alert.annotations.get("runbook_url", "").strip()
    summary = alert.annotations.get("summary", "").strip() or f"{name} is firing"
    description = alert.annotations.get("description", "").strip()
    since = alert.starts_at.isoformat().replace("+00:00", "Z")
    scope = f"alert {name}"[:500]
    title = f"{name} ({_severity(alert)})"[:500]
    if alert.status == "resolved":
        return WorkReport(
            id=alert_work_id(alert),
            revision=RESOLVED_REVISION,
            title=title,
            summary=f"Resolved: {summary} (firing since {since}).",
            scope=scope,
            state="done",
            link=_link(runbook),
            seat_id=seat_id,
        )
    # The headline carries the summary, the link and the first option the runbook.
    details = (
        (f"{description} " if description else "")
        + f"Firing since {since}; labels: {_labels(alert)}."
        + ("" if runbook else " This rule names no runbook.")
        + (f" Source: {alert.generator_url}" if alert.generator_url else "")
    )
    options = [f"read the runbook and follow it: {runbook}"[:MAX_LINK]] if runbook else []
    options.append("if it is expected (maintenance), silence it in Alertmanager")
    return WorkReport(
        id=alert_work_id(alert),
        revision=FIRING_REVISION,
        title=title,
        headline=f"Alert {name}: {summary}"[:500],
        summary=details[:8000],
        scope=scope,
        state="blocked",
        blocker=Blocker(
            kind="decision",
            owner_id=oncall_id,
            scope=scope,
            detail="Seatwire's monitoring fired this alert; it clears only when someone on "
            "call looks at it",
        ),
        self_serve_exhausted=True,
        question="What you can do:",
        options=tuple(options),
        link=_link(runbook) or _link(alert.generator_url),
        seat_id=seat_id,
    )
