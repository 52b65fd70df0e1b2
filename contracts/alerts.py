"""Alertmanager's webhook notification (its payload format version 4), as Seatwire reads it
at `POST /v1/alerts/alertmanager` (docs/alerts.md). Pure data.

Only what Seatwire reads is required; a field Alertmanager adds in a later release is
ignored, not refused (the shape is Alertmanager's, not ours). What is read is checked: a
`version` other than "4", an alert without a fingerprint, a `startsAt` that is not a time
with its zone, or a status other than firing/resolved is refused, and nothing is written.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, Field

from contracts._base import Wire

AlertStatus = Literal["firing", "resolved"]


class AlertmanagerAlert(Wire):
    """One alert of a notification. `fingerprint` is Alertmanager's hash of the alert's
    labels; with `startsAt` it names one firing of one alert (a re-fire after a resolve has
    a new `startsAt`)."""

    status: AlertStatus
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    starts_at: AwareDatetime
    ends_at: AwareDatetime | None = None
    generator_url: str = Field(default="", alias="generatorURL", max_length=4000)
    fingerprint: str = Field(pattern=r"^[0-9A-Za-z]{1,64}$")

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "") or "(unnamed alert)"


class AlertmanagerNotification(Wire):
    """One webhook notification: a group of alerts, firing or resolved, sent again every
    `repeat_interval` while they fire and on every retry of a failed delivery."""

    version: Literal["4"]
    status: AlertStatus
    receiver: str = ""
    group_key: str = ""
    truncated_alerts: int = Field(default=0, ge=0)
    group_labels: dict[str, str] = Field(default_factory=dict)
    common_labels: dict[str, str] = Field(default_factory=dict)
    common_annotations: dict[str, str] = Field(default_factory=dict)
    external_url: str = Field(default="", alias="externalURL")
    # No cap of its own: the ingress's body cap (SEATWIRE_MAX_BODY_BYTES) bounds it.
    alerts: tuple[AlertmanagerAlert, ...] = Field(min_length=1)
