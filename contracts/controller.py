"""The work controller's shapes (docs/architecture.md, "The work controller"). Pure data.

`ControllerState` is everything a controller remembers between two decisions, so that it can
live in Redis rather than in a process: a tick in any worker reads it, decides and writes it
back. `ControllerDecision` is one decision: `run`, `wait` or `stop`, always with its reason.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts._base import StrictWire, Wire
from contracts.money import CostMicros, Enforcement

ControllerAction = Literal["run", "wait", "stop"]

# The reasons a decision can give, in the order the controller considers them.
RunReason = Literal[
    "first",
    "steering",
    "retry",
    "continuation",
    "durable",
    "notices",
    "inbox",
    "project_change",
    "quiet",
]
HoldReason = Literal[
    "deadline",
    "failure_limit",
    "unknown_contact",
    "paused",
    "active",
    "pending_delivery",
    "fresh_observation",
    "unacknowledged_inbox",
    "retry_backoff",
    "announcement_backoff",
    "idle",
]
ControllerReason = RunReason | HoldReason
OutcomeKind = Literal["ok", "failed", "interrupted", "send_deferred"]
OUTCOME_KINDS: frozenset[str] = frozenset(OutcomeKind.__args__)  # type: ignore[attr-defined]

# A JSON scalar the controller keeps as it came (`news.pending`, `news.work.revision`, ...):
# its comparisons read a missing or non-numeric one as JavaScript reads `undefined`
# (pipeline/js.py): no count, never greater or smaller than a number.
Loose = int | float | str | bool | None


class InboxMark(Wire):
    """The inbox as a turn began (or as it was when its ack was awaited)."""

    pending: Loose = None
    acknowledged: Loose = None


class ControllerState(Wire):
    """The whole state of one controller; `WorkController.from_state` resumes from it.

    `fresh_after` is the observation id of the news the last outcome was recorded with
    (None when it came with none, or with news that had no id: such news is the same as
    nothing). Times are Unix ms; `quiet_at` None is never.
    """

    first: bool = True
    active: bool = False
    continuation: bool = False
    failures: int = Field(default=0, ge=0)
    blocked: bool = False
    fresh_after: str | int | None = None
    fingerprint_seen: str | None = None
    handled_revision: int | float = -1
    retry_at: float | None = None
    announcement_at: float | None = None
    turn_revision: Loose = None
    inbox_at_turn: InboxMark | None = None
    awaiting_ack: InboxMark | None = None
    quiet_at: float | None = None


class ControllerDecision(Wire):
    """One decision. `retry_at_ms` comes with `retry_backoff` and `announcement_backoff`;
    `interrupt` with every `paused` (True when a turn is running and should be stopped)."""

    action: ControllerAction
    reason: ControllerReason
    retry_at_ms: float | None = None
    interrupt: bool | None = None

    def to_wire(self) -> dict[str, object]:
        return self.model_dump(by_alias=True, mode="json", exclude_none=True)


# ---------------------------------------------------------------------- a seat's turns

TurnState = Literal["queued", "running"]
MAX_DETAIL = 2000


class TurnOutcome(StrictWire):
    """How a turn ended, as its launcher (or the agent runtime, at the outcome route) tells.

    `kind` is the controller's; a `failed` launch carries the launch-failure classification
    (`failureKind`, `proven`, `signature`). Usage and cost are numbers only; the agent's own
    words are never kept here beyond `detail` (bounded), and permission denials are counted,
    never quoted.

    `costMicros` is the turn's one cost, bounded exactly as a cost frame's amount is
    (contracts.money: an integer or decimal string, never negative, below 10**15), so every
    outcome taken in can become its cost frame; `enforcement` says whether it was charged. A
    turn has one cost, so there is no `shadowCostMicros` here: a cost under `shadow` or `off`
    is the frame's shadow cost (pipeline.turn_cost)."""

    kind: OutcomeKind
    continuation: bool = False
    retryable: bool = True
    detail: str = Field(default="", max_length=MAX_DETAIL)
    exit_code: int | None = None
    failure_kind: str | None = Field(default=None, max_length=64)
    proven: bool | None = None
    signature: str = Field(default="", max_length=200)
    session_id: str | None = Field(default=None, max_length=200)
    model: str | None = Field(default=None, max_length=200)
    usage: dict[str, float] = Field(default_factory=dict, max_length=32)
    cost_micros: CostMicros = None
    enforcement: Enforcement | None = None
    denials: int = Field(default=0, ge=0)
    duration_ms: int | None = Field(default=None, ge=0)


class AgentProcess(Wire):
    """Where a `command` turn's agent runs, so that a later turn can prove it gone before it
    starts its own: the host (name, boot and process namespace: a pid means something only
    there), the agent's process group (its keeper leads it) and the leader's start time in
    clock ticks since boot (a group id reused by an unrelated process has another), and the
    turn whose agent it is (its environment carries that id). `pgid` is None until the
    agent has started; the group is killed by its keeper before the turn's lease ends."""

    turn_id: str
    host: str
    until_ms: int  # the turn's lease: its keeper has ended the group by then
    pgid: int | None = None
    leader_start: int | None = None


class TurnHold(Wire):
    """Why a queued turn has not started yet: the agent of the seat's previous turn is not
    proven gone (`reason`, `why`), and when it is looked at again at the latest."""

    reason: str
    why: str
    at_ms: int
    until_ms: int
    since_ms: int | None = None  # when the turn was first held (the hold's age escalates)


class ActiveTurn(Wire):
    """The seat's one turn in flight: queued (published, not started) or running (a worker
    holds it until `leaseUntilMs`). A running `command` turn names its agent's process
    (`agent`); a queued one that waits for the previous turn's agent to be gone says why
    (`held`)."""

    turn_id: str
    reason: str
    state: TurnState = "queued"
    queued_at_ms: int
    published_at_ms: int | None = None
    # How often its message was put on the turns queue: each copy waits twice as long as
    # the one before for a worker to start it (pipeline/turns.py `republish_at`).
    publishes: int = Field(default=1, ge=1)
    started_at_ms: int | None = None
    lease_until_ms: int | None = None
    inbox_position: int = 0  # the last inbox position the turn is handed
    # A pause came while it ran: a command launcher ends it (outcome `interrupted`).
    interrupt_requested: bool = False
    agent: AgentProcess | None = None
    held: TurnHold | None = None
    cleared: str | None = None  # what proved the previous turn's agent gone (TurnRecord)


class TurnRecord(Wire):
    """One finished turn, kept in the seat's recent history."""

    turn_id: str
    reason: str
    queued_at_ms: int
    started_at_ms: int | None = None
    ended_at_ms: int
    outcome: TurnOutcome
    # What proved the previous turn's agent gone before this one started, when it had not
    # been reaped by the worker that ran it (its turn was settled as lost).
    cleared: str | None = None


class LaunchStreak(Wire):
    """The launch-failure streak: consecutive failures with one signature. Times are
    ISO-8601 strings, as the original runtime kept them; `escalatedAt` is empty until it
    escalated."""

    signature: str
    streak: int = Field(ge=1)
    first_at: str = ""
    last_at: str = ""
    escalated_at: str = ""


class SessionRecord(Wire):
    """The main-session record: the id the next launch resumes, how often it was
    resumed, the last hour's rotations (ISO strings), and where it was rotated from and why."""

    session_id: str
    created_at: str = ""
    resumes: int = Field(default=0, ge=0)
    rotations: tuple[str, ...] = ()
    rotated_from: str | None = None
    rotated_reason: str | None = None
    last_launch_at: str | None = None


class LastDecision(Wire):
    action: ControllerAction
    reason: ControllerReason
    at_ms: int
    retry_at_ms: float | None = None


class Escalation(Wire):
    """The seat's open escalation: the fault it is about, how many identical failures it
    had reached, and what became of the ask (`trackingId` of its work report, or
    `unroutable` when the seat has neither an operator nor a supervisor)."""

    signature: str
    streak: int
    hint: str
    at_ms: int
    target_id: str | None
    tracking_id: str | None = None
    count: int = 1
    # Why the seat escalated and whether the controller had stopped it, as its work report
    # says: with the fields above, enough to raise the same report again when the first try
    # never reached the journal (`triedAtMs`: the last such try).
    reason: str = ""
    stopped: bool = False
    tried_at_ms: int | None = None


class SeatRun(Wire):
    """Everything the work controller keeps for one seat, read and written as one value
    (compare-and-set on its revision), so any worker can tick any seat."""

    seat_id: str
    controller: ControllerState = Field(default_factory=ControllerState)
    active: ActiveTurn | None = None
    turns: tuple[TurnRecord, ...] = ()
    seq: int = 0
    streak: LaunchStreak | None = None
    session: SessionRecord | None = None
    last_decision: LastDecision | None = None
    paused: bool = False
    steering: bool = False
    notices_at_turn: int = 0
    escalation: Escalation | None = None
    escalations: int = 0  # every escalation ever raised: the revision of the next one's report
    # The agent of a turn settled without its worker (lost at its lease): not proven gone
    # until the next turn's worker looks (workers/outbound/agents.py), which it must before
    # it starts another agent of this seat.
    lingering: AgentProcess | None = None


class TurnMessage(Wire):
    """The `turns` queue's message: start this seat's queued turn and launch it, or, with an
    `outcome` (an agent runtime's report at the outcome route), settle its running turn."""

    seat_id: str
    turn_id: str
    outcome: TurnOutcome | None = None
