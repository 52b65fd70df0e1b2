"""The shapes of one goal-steward run (issue 10 point 2; docs/architecture.md). Pure data.

In, what the shell loads before a run and `pipeline.goals.steward.plan_run` reads:

    BacklogItem          an item on a seat's backlog {id, title, objectiveKey, seatId, state};
                         the open ones are an objective's `openItems` and its coverage
    Proposal             one candidate and where it came from {source: playbook|proposer,
                         candidate}; a proposer's flat candidate object is read as one too
    ObjectiveProposals   an objective's candidates and its proposer's failures
    RunPolicy            the caps, the mandate cache's freshness, what each seat reaches
    Override             an operator's push of one rejected candidate past the wip, trend or
                         budget gate (never honesty, adoption, provenance, freshness, dedupe),
                         used once: by the dispatch it enabled
    RunInputs            all of the above for one run, validated in one place

Out, the plan the shell acts on and writes to the audit:

    Dispatch             one thing to do, under a deterministic id the shell does at most once
    AuditEntry           one line of the steward audit: a gap decision, a candidate (admitted
                         or refused, with its gate and check trail, and the override that
                         pushed it past a gate), a proposer failure, an objective that was not
                         run, or an operator's override request
    ObjectiveOutcome     one objective's gap, decision, audit lines and dispatches
    RunPlan              every objective's outcome, in input order, and the totals

Money is integer micro-USD. Lenient (`Wire`): these are the shell's own stored shapes and a
proposer's output, not a person's typing; the one exception is `OverrideRequest`, a person's
HTTP body, which is strict (`StrictWire`: unknown keys and coerced types refused).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BeforeValidator,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    StrictStr,
    field_validator,
    model_serializer,
    model_validator,
)

from contracts._base import NOT_BLANK, StrictWire, Wire
from contracts.goals import (
    Admission,
    AdmissionCheck,
    Classification,
    ClassificationReason,
    Disposition,
    Gap,
    GapAction,
    GapDecision,
    Gate,
    Objective,
    Peer,
    Sample,
    SampleSource,
    Staleness,
    WorkCandidate,
)

BacklogState = Literal["open", "done"]
CandidateSource = Literal["playbook", "proposer"]
DispatchKind = Literal["backlog", "engagement"]
# What made the dispatch: a candidate's disposition, or the gap decision itself.
DispatchRoute = Literal["SELF", "COLLABORATE", "HANDOFF", "NEEDS_REVIEW", "escalate", "drift"]
AuditKind = Literal["not_run", "proposer_failed", "gap_decision", "candidate", "override"]
OutcomeStatus = Literal["run", "not_run"]
# The gates a named person may push a candidate past. Never adoption, honesty or provenance
# (nor freshness, dedupe): those say the work should not exist, not that it must wait.
OverridableGate = Literal["wip", "trend", "budget"]
OVERRIDABLE_GATES: tuple[OverridableGate, ...] = get_args(OverridableGate)
MAX_OVERRIDE_REASON = 500


def _micros(value: object) -> object:
    """Micro-USD arrive as integers or decimal strings; a float or a boolean is refused."""
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdecimal():
        return int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError("micro-USD must be an integer or a decimal string, never a float")


Micros = Annotated[int, BeforeValidator(_micros), Field(ge=0)]


class BacklogItem(Wire):
    """An item on a seat's backlog; only an `open` one counts as work in flight, and a
    `drift` one (restore the measurement) never does: it is not work on the number."""

    id: str = Field(min_length=1)
    title: str = ""
    objective_key: str
    seat_id: str | None = None
    state: BacklogState = "open"
    route: str | None = None  # what made it (DispatchRoute), when the shell knows


class Proposal(Wire):
    """One candidate and its source. A flat `{source, title, ...}` object is read as one."""

    source: CandidateSource
    candidate: WorkCandidate

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, value: object) -> object:
        if isinstance(value, Mapping) and "candidate" not in value:
            rest = {k: v for k, v in value.items() if k != "source"}
            return {"source": value.get("source"), "candidate": rest}
        return value


class ProposerFailure(Wire):
    """A proposer that could not be used this run (unreachable, malformed answer), and why."""

    reason: str = Field(min_length=1)
    proposer: str | None = None  # e.g. the endpoint, so the audit says which one


class ObjectiveProposals(Wire):
    """An objective's candidates for this run, and the failures of its proposer."""

    candidates: tuple[Proposal, ...] = ()
    failures: tuple[ProposerFailure, ...] = ()


class RunPolicy(Wire):
    """What a run judges against besides the objectives: caps, freshness, reach and peers.

    A cap left None is admission's default. `mandateStaleness` is the mandate cache's
    freshness for the freshness gate (None: not known, which the gate lets through: an
    unknown staleness is not a stale one). `reachable` maps a seat to the capability ids it reaches.
    """

    max_open_per_objective: int | None = Field(default=None, ge=0)
    max_new_per_run: int | None = Field(default=None, ge=0)
    mandate_staleness: Staleness | None = None
    reachable: Mapping[str, tuple[str, ...]] = Field(default_factory=dict)
    peers: tuple[Peer, ...] = ()


def _gate_set(gates: tuple[OverridableGate, ...]) -> tuple[OverridableGate, ...]:
    """Non-empty, each gate once, in `OVERRIDABLE_GATES` order."""
    if not gates:
        raise ValueError(f"name at least one of {', '.join(OVERRIDABLE_GATES)}")
    return tuple(g for g in OVERRIDABLE_GATES if g in gates)


class Override(Wire):
    """A named person's push of one candidate of one objective past some overridable gates.

    Active while `usedBy` is None; the dispatch it enabled (`usedBy`, a dispatch id) uses it
    up. `candidateKey` is `pipeline.goals.dispatch_ids.candidate_key(candidateTitle)`.
    """

    id: str = Field(min_length=1)
    objective_key: str = Field(min_length=1)
    candidate_key: str = Field(min_length=1)
    candidate_title: str = Field(min_length=1)
    gates: tuple[OverridableGate, ...] = OVERRIDABLE_GATES
    by: str = Field(min_length=1)
    reason: str = Field(min_length=1, max_length=MAX_OVERRIDE_REASON)
    at_ms: int = Field(ge=0)
    used_by: str | None = None
    used_at_ms: int | None = None

    _gates = field_validator("gates")(_gate_set)

    @property
    def active(self) -> bool:
        """Not yet used by a dispatch."""
        return self.used_by is None


class OverrideRequest(StrictWire):
    """`POST /v1/steward/overrides`: push candidate (a title) of objective past `gates`."""

    # The schema says what the validators below refuse (a blank string, no gate).
    objective: StrictStr = Field(min_length=1, json_schema_extra={"pattern": NOT_BLANK})
    candidate: StrictStr = Field(min_length=1, json_schema_extra={"pattern": NOT_BLANK})
    by: StrictStr = Field(min_length=1, json_schema_extra={"pattern": NOT_BLANK})
    reason: StrictStr = Field(
        min_length=1, max_length=MAX_OVERRIDE_REASON, json_schema_extra={"pattern": NOT_BLANK}
    )
    gates: tuple[OverridableGate, ...] = Field(
        default=OVERRIDABLE_GATES, json_schema_extra={"minItems": 1}
    )

    _gates = field_validator("gates")(_gate_set)

    @field_validator("objective", "candidate", "by", "reason")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()


class OverrideNote(Wire):
    """On an audit line: whose override, why, and the gates it pushed past (on a candidate's
    line, only those that would have refused it; on the override's own line, those asked)."""

    id: str
    by: str
    reason: str
    gates: tuple[OverridableGate, ...] = ()


class OverrideRef(Wire):
    """On a dispatch: the override it uses up, so the shell consumes it once dispatched."""

    id: str
    candidate_key: str
    by: str


class OverriddenAdmission(Admission):
    """`admit`'s verdict when it was asked to override gates: `overridden` names the gates that
    would have refused and were passed instead. Emitted on the wire only when non-empty."""

    overridden: tuple[Gate, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        wire = super().to_wire()
        if not self.overridden:
            wire.pop("overridden", None)
        return wire


class RunInputs(Wire):
    """What one run reads; `samples`, `spend` (micro-USD, already summed over each budget
    window) and `proposals` are keyed by objective key, and a missing key means none.
    `overrides` are the operators' overrides; only the active ones are used. `dispatched`
    are dispatch ids already carried out (on this sample or any): never planned again."""

    now_ms: StrictInt = Field(ge=0)
    objectives: tuple[Objective, ...] = ()
    samples: Mapping[str, tuple[Sample, ...]] = Field(default_factory=dict)
    open_items: tuple[BacklogItem, ...] = ()
    spend: Mapping[str, Micros] = Field(default_factory=dict)
    proposals: Mapping[str, ObjectiveProposals] = Field(default_factory=dict)
    policy: RunPolicy = RunPolicy()
    overrides: tuple[Override, ...] = ()
    dispatched: tuple[str, ...] = ()

    @field_validator("objectives")
    @classmethod
    def _unique_keys(cls, objectives: tuple[Objective, ...]) -> tuple[Objective, ...]:
        keys = [o.key for o in objectives]
        doubled = sorted({k for k in keys if keys.count(k) > 1})
        if doubled:
            raise ValueError(f"objective keys must be unique; repeated: {', '.join(doubled)}")
        return objectives


class SampleRef(Wire):
    """The sample a decision was taken on: enough to name it, and to derive ids from it."""

    at_ms: int
    source: SampleSource


class Claim(Wire):
    """The exclusive lease COLLABORATE work needs so that two seats cannot both drive it.
    `issueNumber` is the repository issue its candidate names, if any: the claim is then a
    claim on that issue (subject `issue:<n>`), else on the item itself (`item:<id>`), in the
    one claim system (workers/stores/claims.py)."""

    holder_id: str
    contributors: tuple[str, ...] = ()
    issue_number: int | None = Field(default=None, gt=0)

    @model_serializer(mode="wrap")
    def _without_absent_issue(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A claim naming no issue is written as it was before the field existed.
        out: dict[str, Any] = handler(self)
        for name in ("issueNumber", "issue_number"):
            if name in out and out[name] is None:
                del out[name]
        return out

    def subject(self, item_id: str) -> str:
        """The claim subject of the item `item_id` carrying this claim."""
        return claim_subject(item_id, self.issue_number)


def claim_subject(item_id: str, issue_number: int | None) -> str:
    """`issue:<n>` for a claim on a repository issue, else `item:<id>`."""
    return f"issue:{issue_number}" if issue_number is not None else f"item:{item_id}"


class ReviewRequirement(Wire):
    """The signature NEEDS_REVIEW work needs: an approval before it runs, or a review after."""

    kind: Literal["approval", "review"]
    reason: ClassificationReason
    reviewer_id: str | None = None  # who is asked first
    reviewers: tuple[str, ...] = ()
    approvers: tuple[str, ...] = ()
    gated_classes: tuple[str, ...] = ()


class Dispatch(Wire):
    """One thing the shell does, at most once per `id`: a backlog item or an engagement."""

    id: str
    kind: DispatchKind
    route: DispatchRoute
    objective_key: str
    seat_id: str  # the steward seat: whose backlog holds it, or who asks
    target_id: str | None = None  # the person named: handoff target, owner, reviewer
    title: str
    reason: str
    candidate_key: str | None = None
    candidate: WorkCandidate | None = None
    classification: Classification | None = None
    claim: Claim | None = None
    review: ReviewRequirement | None = None
    decided_on: SampleRef | None = None
    override: OverrideRef | None = None  # consume it once this is done


class AuditEntry(Wire):
    """One line of the steward audit; `note` says why an admitted thing was not dispatched."""

    objective_key: str
    kind: AuditKind
    reason: str
    action: GapAction | None = None  # gap_decision
    candidate_title: str | None = None  # candidate
    candidate_key: str | None = None
    source: CandidateSource | None = None
    admitted: bool | None = None
    gate: Gate | None = None  # the refusing gate; None when admitted or not judged
    checks: tuple[AdmissionCheck, ...] = ()
    disposition: Disposition | None = None
    dispatch_id: str | None = None
    note: str | None = None
    override: OverrideNote | None = None  # the override that admitted it, or this request


class ObjectiveOutcome(Wire):
    """What one objective's run decided, or why it was not run."""

    objective_key: str
    status: OutcomeStatus
    reason: str
    seat_id: str | None = None
    gap: Gap | None = None
    decision: GapDecision | None = None
    latest_sample: SampleRef | None = None
    remaining_micros: int | None = None  # None: the objective has no budget
    proposer_failures: tuple[ProposerFailure, ...] = ()
    audit: tuple[AuditEntry, ...] = ()
    dispatches: tuple[Dispatch, ...] = ()


class RunTotals(Wire):
    """The run in numbers, read off its outcomes."""

    objectives: int = 0
    run: int = 0
    not_run: int = 0
    candidates: int = 0
    admitted: int = 0
    rejected: int = 0  # refused by a gate, or not judged because the objective was not run
    dispatches: int = 0
    proposer_failures: int = 0

    @classmethod
    def of(cls, outcomes: Sequence[ObjectiveOutcome]) -> RunTotals:
        """The totals of these outcomes; a candidate counts once, admitted or not."""
        entries = [e for o in outcomes for e in o.audit if e.kind == "candidate"]
        admitted = sum(1 for e in entries if e.admitted)
        return cls(
            objectives=len(outcomes),
            run=sum(1 for o in outcomes if o.status == "run"),
            not_run=sum(1 for o in outcomes if o.status == "not_run"),
            candidates=len(entries),
            admitted=admitted,
            rejected=len(entries) - admitted,
            dispatches=sum(len(o.dispatches) for o in outcomes),
            proposer_failures=sum(len(o.proposer_failures) for o in outcomes),
        )


class RunPlan(Wire):
    """One steward run, planned: per objective (in input order) an outcome, and the totals."""

    now_ms: int
    outcomes: tuple[ObjectiveOutcome, ...] = ()
    totals: RunTotals = RunTotals()

    @property
    def dispatches(self) -> tuple[Dispatch, ...]:
        """Every dispatch of the run, objective by objective."""
        return tuple(d for o in self.outcomes for d in o.dispatches)

    @property
    def audit(self) -> tuple[AuditEntry, ...]:
        """Every audit line of the run, objective by objective."""
        return tuple(e for o in self.outcomes for e in o.audit)
