"""The engagement decision (docs/architecture.md, "Engagement"): the decision object on the
wire, field for field. Pure data."""

from __future__ import annotations

from typing import Any, Literal

from contracts._base import Wire

Rung = Literal["explicit", "ownership", "expertise", "supervisory"]
Surface = Literal["none", "reply_in_place", "dm", "existing_channel", "new_room"]


class Target(Wire):
    """A person an ask names, with the rung of the ladder that found them and why."""

    member_id: str
    name: str = ""
    role: str = ""
    team: str = ""
    rung: Rung = "explicit"
    why: str = ""


class Mention(Wire):
    member_id: str


class GuardrailSummary(Wire):
    code: str
    detail: str
    counts: dict[str, Any]


class EngagementDecision(Wire):
    """Whether to engage, whom, where and in what words; or who was considered and why not."""

    engage: bool = False
    trigger: str | None = None
    reason_code: str | None = None
    reason: str | None = None
    targets: tuple[Target, ...] = ()
    surface: Surface = "none"
    channel_id: str | None = None
    thread_root_id: str | None = None
    room_name: str | None = None
    durable_channel: bool = False
    member_ids: tuple[str, ...] = ()
    mentions: tuple[Mention, ...] = ()
    body: str | None = None
    work_id: str = ""
    dedupe_key: str | None = None
    attempt: int | None = None
    guardrail: GuardrailSummary | None = None
    why: tuple[str, ...] = ()
    degraded: tuple[str, ...] = ()
    considered_not_engaged: tuple[str, ...] = ()
    now_ms: int = 0
