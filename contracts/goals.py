"""The goal steward's shapes (docs/architecture.md, "The goal steward"). Pure data.

Inbound, and strict about unknown fields (a typo there would silently change what gets made):
`Objective` (the org file) and `Sample` (the samples endpoint). Lenient, like every provider
payload: `WorkCandidate` (playbook templates and proposer output) and its parts.

Outbound, field for field the objects the goal functions return on the wire:

    Gap              gap_for             {gap, target, value, withinTolerance, normalizedGap,
                                          trend, stale, stalenessPeriods}
    GapDecision      decide_for_gap      {action, reason}
    Admission        admit               {admitted, gate, reason, checks[{gate, ok, detail}]}
    CapabilityGaps   capability_gaps     {missing, coveredByPeer[{capability, memberId}],
                                          uncovered}
    Classification   classify_work_item  {disposition, reason, target, reviewers, approvers,
                                          contributors, gatedClasses,
                                          capabilityGap{missing, uncovered} | null, why}

Numbers are `int | float` so an integer stays one: the reasons print 3, not 3.0, as
JavaScript prints a number. Money is integer micro-USD (`budgetMicros`, `estMicros`); the
cents fields (`estCents`, `remainingCents`) are read where a caller sends them. The value
sets below are written down once; the pipeline's tuples (`GATES`, `WORK_DISPOSITIONS`) are
read off them, so the two cannot drift.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AllowInfNan, Field, field_validator

from contracts._base import StrictWire, Wire

Finite = Annotated[float, AllowInfNan(False)]
Number = int | Finite

ObjectiveState = Literal["proposed", "active", "retired"]
Direction = Literal["up", "down"]
Cadence = Literal["daily", "weekly", "monthly"]
SampleSource = Literal["method", "human", "llm"]
Trend = Literal["improving", "flat", "worsening", "unknown"]
GapAction = Literal["none", "create", "escalate", "log", "drift"]
# In evaluation order: the first that fails decides.
Gate = Literal["freshness", "adoption", "honesty", "provenance", "dedupe", "trend", "wip", "budget"]
Disposition = Literal["SELF", "COLLABORATE", "HANDOFF", "NEEDS_REVIEW"]
CollaboratorRole = Literal["DOER", "CONTRIBUTOR", "REVIEWER", "APPROVER"]
ClassificationReason = Literal[
    "owned-by-another-seat",
    "collaborator-is-doer",
    "capability-only-reachable-by-peer",
    "gated-action-class",
    "collaborator-is-approver",
    "review-required",
    "named-contributors",
    "self-with-capability-gap",
    "self",
]


class Collaborator(StrictWire):
    """A named person on a task or objective, and the part they play. Roles ignore case."""

    member_id: str = Field(min_length=1)
    role: CollaboratorRole

    @field_validator("role", mode="before")
    @classmethod
    def _upper_role(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value


class CandidateWhy(Wire):
    """Why a machine-made task exists; admission refuses one without a `reason`."""

    reason: str | None = None
    objective_key: str | None = None


class WorkCandidate(Wire):
    """A piece of work a gap might produce: what admission and classification read of it."""

    title: str = ""
    advances: tuple[str, ...] = ()
    why: CandidateWhy | None = None
    est_cents: Number | None = None
    est_micros: int | None = Field(default=None, ge=0)
    expected_delta: Number | None = None
    objective_key: str | None = None
    owner_member_id: str | None = None
    collaborators: tuple[Collaborator, ...] = ()
    required_capabilities: tuple[str, ...] = ()
    action_classes: tuple[str, ...] = ()
    review_by: str | None = None
    # The repository issue the work is about (optional): a COLLABORATE dispatch of it claims
    # that issue (`issue:<n>`, the one claim system of workers/stores/claims.py), so its
    # owner is the issue's owner in get_issue_coordination.
    issue_number: int | None = Field(default=None, gt=0)


class Objective(StrictWire):
    """A KPI a seat stewards: the number, which way is good, and how often it is measured."""

    key: str = Field(min_length=1)
    state: ObjectiveState = "proposed"
    owner_id: str | None = None
    adopted_by: str | None = None
    metric: str = ""
    target: Number
    direction: Direction = "up"
    tolerance: Number = 0  # absolute, in the metric's units
    cadence: Cadence = "weekly"
    budget_micros: int | None = Field(default=None, ge=0)
    playbook: tuple[WorkCandidate, ...] = ()
    collaborators: tuple[Collaborator, ...] = ()
    review_by: str | None = None
    seat_id: str | None = None

    @property
    def is_active(self) -> bool:
        """Adopted and run by the steward; a proposed or retired objective creates no work."""
        return self.state == "active"

    @property
    def steward_seat(self) -> str | None:
        """The seat that stewards it: `seatId`, else the seat that adopted it."""
        return self.seat_id or self.adopted_by

    @field_validator("tolerance")
    @classmethod
    def _non_negative(cls, value: int | float) -> int | float:
        if value < 0:
            raise ValueError("tolerance must be zero or more")
        return value


class Sample(StrictWire):
    """One measurement of an objective's metric. Only method/human samples may create work."""

    value: Number
    source: SampleSource
    window: str | None = None
    at_ms: int = Field(ge=0)


class Staleness(Wire):
    """How fresh the mandate cache is; only `full` allows self-directed (OUTCOME) work."""

    outcome: str


class Peer(Wire):
    """Another seat and the capabilities it declares."""

    member_id: str
    capabilities: tuple[str, ...] = ()


class Gap(Wire):
    """How far the latest measurement is from target; positive is off on the bad side."""

    gap: Number | None = None  # None: there is no sample to measure by
    target: Number
    value: Number | None = None
    within_tolerance: bool = False
    normalized_gap: Finite | None = None  # None when the target is 0
    trend: Trend = "unknown"
    stale: bool = False
    staleness_periods: Finite | None = None


class GapDecision(Wire):
    """What a gap should produce before any candidate is judged, and why."""

    action: GapAction
    reason: str


class AdmissionCheck(Wire):
    gate: Gate
    ok: bool
    detail: str


class Admission(Wire):
    """One candidate's verdict: the gate that refused it (None when admitted) and the trail."""

    admitted: bool
    gate: Gate | None = None
    reason: str
    checks: tuple[AdmissionCheck, ...] = ()


class PeerCover(Wire):
    capability: str
    member_id: str | None = None  # None only when the covering peer named no member id


class CapabilityGaps(Wire):
    """The required capabilities this seat cannot reach, split by whether a peer declares them."""

    missing: tuple[str, ...] = ()
    covered_by_peer: tuple[PeerCover, ...] = ()
    uncovered: tuple[str, ...] = ()


class CapabilityGap(Wire):
    missing: tuple[str, ...] = ()
    uncovered: tuple[str, ...] = ()


class Classification(Wire):
    """Whose hands a candidate needs, who signs it off, and the one line of why."""

    disposition: Disposition
    reason: ClassificationReason
    target: str | None = None
    reviewers: tuple[str, ...] = ()
    approvers: tuple[str, ...] = ()
    contributors: tuple[str, ...] = ()
    gated_classes: tuple[str, ...] = ()
    capability_gap: CapabilityGap | None = None
    why: tuple[str, ...] = ()
