"""The JSON the ingress answers with, route by route, as the OpenAPI document publishes it (a
client is generated from it). Pure data.

The routes build these bodies as dicts (from the stores' `to_wire()` values); these models are
their contract, checked against the live answers by the schemathesis test
(tests/workers/test_openapi_conformance.py), not a second encoder: a route's bytes do not pass
through them.

`Problem` is the one body of every refusal, whatever its status: a stable `error` code, a
`message` that says what to change, `detail` naming each wrong field (on a 422 from a
validated body or a parameter), and whatever facts the refusal carries (`trackingId`,
`holderId`, `last`, ...). `AckRequest` is the one request body no other contract holds.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from contracts._base import StrictWire, Wire
from contracts.backlog import BacklogEntry, ClaimEvent, ClaimResult, ClaimState
from contracts.controller import (
    ActiveTurn,
    Escalation,
    LastDecision,
    LaunchStreak,
    SessionRecord,
    TurnRecord,
)
from contracts.goals import Gap, GapAction, GapDecision, Objective, Sample
from contracts.guardrails import LedgerRow
from contracts.inbound import InboxItem
from contracts.journal import ClaimTakeVerb, JournalState
from contracts.money import CostFrame
from contracts.steward import AuditEntry, Claim, Override

Accepted = Literal["accepted", "duplicate"]
Recorded = Literal["recorded", "duplicate"]

# ------------------------------------------------------------------ refusals


class FieldError(BaseModel):
    """One wrong field: its camelCase path (`(body)` for the body as a whole)."""

    field: str
    message: str
    type: str


class Problem(BaseModel):
    """A refusal. Extra members are the refusal's own facts, named in its route's text."""

    model_config = ConfigDict(extra="allow", frozen=True)

    error: str = Field(description="a stable code: what went wrong")
    message: str = Field(description="what is wrong and what to change")
    detail: list[FieldError] | None = Field(
        default=None, description="each wrong field (a 422 of a body or a parameter)"
    )
    field: str | None = Field(default=None, description="the one field a refusal is about")


# ------------------------------------------------------------------ request bodies


class AckRequest(Wire):
    """`POST /v1/seats/{seat}/updates/ack`: the `position` of the last page read."""

    position: StrictInt = Field(ge=0, description="the `position` of your last read")


# ------------------------------------------------------------------ writes


class WorkAccepted(Wire):
    """A work report journalled and its engagement enqueued (`duplicate`: reported before)."""

    tracking_id: str
    status: Accepted
    state: JournalState


class AlertAccepted(Wire):
    """One alert of an Alertmanager notification, as a work report of the alerts seat:
    `accepted` (journalled now), `duplicate` (this firing, or this resolution, was received
    before; the first report stands) or `already_resolved` (a firing whose resolution was
    received before it: nothing journalled; `state` is the resolution's)."""

    fingerprint: str
    status: Literal["firing", "resolved"]
    work_id: str
    tracking_id: str
    result: Literal["accepted", "duplicate", "already_resolved"]
    state: JournalState


class AlertsAccepted(Wire):
    """Every alert of an Alertmanager notification, journalled and enqueued."""

    ok: Literal[True]
    alerts: tuple[AlertAccepted, ...]


class EventAccepted(Wire):
    """An inbound event journalled and its directedness enqueued."""

    ok: Literal[True]
    status: Accepted
    delivery_id: str
    tracking_id: str
    state: JournalState


class ProviderReceipt(Wire):
    """A provider route's answer to a signed delivery: `accepted` or `duplicate` (journalled
    and enqueued), `skipped` (journalled as addressing nobody, with its `reason`), `noted`
    (Slack's app_rate_limited) or `pong` (GitHub's ping)."""

    ok: Literal[True]
    status: Literal["accepted", "duplicate", "skipped", "noted", "pong"]
    delivery_id: str | None = None
    tracking_id: str | None = None
    state: JournalState | None = None
    reason: str | None = None


class SlackChallenge(Wire):
    """Slack's url_verification handshake, answered with its challenge."""

    challenge: str


class SampleRecorded(Wire):
    status: Recorded
    objective: str
    id: str
    sample: Sample


class CostRecorded(Wire):
    status: Recorded
    frame_id: str
    charge_micros: int = Field(description="what the frame moved: its cost under enforcement on")
    frame: CostFrame


class OverrideRecorded(Wire):
    status: Recorded
    override: Override


class OutcomeAccepted(Wire):
    """The outcome of the seat's running turn, on its way to the turns stage."""

    status: Literal["accepted"]
    turn_id: str


class OutcomeDuplicate(Wire):
    """The same outcome again, for a turn that has finished with it."""

    status: Literal["duplicate"]
    turn: TurnRecord


ProjectChangeEvent = Literal["start", "pause", "resume", "announcement"]


class ProjectNotified(Wire):
    """The project item put in every seat's inbox; `full` names the seats whose inbox held its
    cap of unread items (the item is not in theirs)."""

    event: ProjectChangeEvent
    seats: int
    full: list[str]
    item: InboxItem


# ------------------------------------------------------------------ reads


class LedgerPage(Wire):
    rows: list[LedgerRow]
    count: int


class GapDecisionRecord(Wire):
    """The goal steward's latest gap decision for an objective."""

    run_id: str
    at_ms: int
    action: GapAction | None
    reason: str


class ObjectiveStanding(Objective):
    """An objective of the org, its current gap, what the gap alone says, its latest sample and
    the steward's last decision (null before its first run)."""

    gap: Gap
    gap_decision: GapDecision
    latest_sample: Sample | None
    last_decision: GapDecisionRecord | None


class ObjectivesPage(Wire):
    objectives: list[ObjectiveStanding]
    count: int
    now_ms: int


class SamplesPage(Wire):
    objective: str
    samples: list[Sample]
    count: int


class CostPage(Wire):
    frames: list[CostFrame]
    count: int
    spend_micros: int
    shadow_micros: int


class BacklogPage(Wire):
    items: list[BacklogEntry]
    count: int
    revision: int = Field(description="rises by one for each item added to the seat's backlog")


class BacklogClosed(Wire):
    status: Literal["done", "already_done"]
    item: BacklogEntry


class ClaimTaken(Wire):
    status: ClaimTakeVerb
    claim: ClaimResult


class ClaimReleased(Wire):
    status: Literal["released", "none"]
    item_id: str


class ClaimStanding(Wire):
    """Who holds an item's claim (null when nobody), whether its lease lapsed, its history."""

    item_id: str
    subject: str | None
    issue_number: int | None
    owner_id: str
    collaborators: Claim | None
    claim: ClaimState | None
    lapsed: bool | None
    history: list[ClaimEvent]


class AuditLine(Wire):
    run_id: str
    at_ms: int
    entry: AuditEntry


class AuditPage(Wire):
    entries: list[AuditLine]
    count: int


class OverridesPage(Wire):
    overrides: list[Override]
    count: int


class ControllerStatus(Wire):
    """The work controller's state as its status reports it (`quietAt` null: never)."""

    first: bool
    active: bool
    continuation: bool
    failures: int
    blocked: bool
    handled_revision: int | float
    retry_at: float | None
    quiet_at: float | None


class SeatStatus(Wire):
    """The seat's last decision and reason, controller, streak, session, next retry, the turn
    in flight, its last turns (newest first) and its open escalation."""

    seat_id: str
    launcher: str
    operator_id: str | None
    paused: bool
    steering: bool
    last_decision: LastDecision | None
    controller: ControllerStatus
    next_retry_at_ms: float | None
    active_turn: ActiveTurn | None
    streak: LaunchStreak | None
    session: SessionRecord | None
    escalation: Escalation | None
    turns: list[TurnRecord]


class ToolResult(BaseModel):
    """A tool's result: the object the tool of that name answers (workers/tools/)."""

    model_config = ConfigDict(extra="allow", frozen=True)


class DirectionsPage(Wire):
    directions: list[dict[str, Any]] = Field(description="each direction's summary")
    next: str | None = Field(description="the cursor of the next page; null on the last")
    server_time: int


class DirectionView(Wire):
    direction: dict[str, Any]
    your_vote: dict[str, Any] | None
    your_vote_revision: int
    vote_count: int
    server_time: int


class DirectionLog(Wire):
    direction_id: str
    log: list[dict[str, Any]] = Field(description="every change, oldest first")


class Receipt(BaseModel):
    """A direction write's receipt (`replayed`: the original answer to a repeated request);
    the rest is the write's: the vote, the new deadline, or the resolver's result."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    direction_id: str = Field(alias="directionId")
    client_request_id: str = Field(alias="clientRequestId")
    replayed: bool


class Health(StrictWire):
    status: Literal["ok"]


class Readiness(Wire):
    status: Literal["ready", "unavailable"]
    checks: dict[str, str] = Field(description="`ok`, or `down: <why>`, for redis and broker")
