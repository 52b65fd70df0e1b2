"""The stage table: the one place a stage of the pipeline is declared.

Import-light on purpose (contracts only, no Celery, no Redis): the ingress, the stores, the
sweeper, the CLI and the tests all read it. Everything that used to be written per stage in
several modules is derived from `STAGES` here:

- the Celery routes (`TASK_QUEUE`), the journal pipeline's queues (`STAGE_QUEUES`) and which
  queues `seatwire worker` may consume (`WORKER_QUEUES`: every row's but beat's own);
- the beat schedule (`BEAT_STAGES`, each with the setting that gives its cadence);
- the set of final journal states (`FINAL_STATES`: every state no stage owns, less the two
  a give-up closes an entry with);
- the sweeper's plan (`FIRST_STAGE` per kind of entry, `STATE_STAGE` for every state a
  stage's message is for) and the dead-letter tables (`STAGE_STATES`, `QUEUE_TASK`);
- the deterministic task id of one stage of one event (`task_id`), and the tracking id of a
  seat's work report (`tracking_id_for`), which the ingress and the steward both journal.

Adding a stage is one row here plus its module in `workers/stages/`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

from contracts._base import Wire
from contracts.controller import TurnMessage
from contracts.journal import CLOSED_STATES, JOURNAL_STATES, EntryKind, JournalState
from contracts.messages import DecisionEnvelope, InboundEnvelope, ReservedEnvelope, WorkEnvelope


class Queue(StrEnum):
    DIRECTEDNESS = "directedness"
    ENGAGEMENT = "engagement"
    GUARDRAILS = "guardrails"
    SEND = "send"
    STEWARD = "steward"  # the goal steward's tick: beat schedules it, a steward worker runs it
    CONTROLLER = "controller"  # the work controller's tick over every seat (beat schedules it)
    TURNS = "turns"  # a seat's turn: its launcher runs here, one turn per seat at a time
    BENCH = "bench"  # the name bench/noop_app.py's baseline tasks run under; never a stage
    BEAT = "beat"  # what beat schedules, consumed by `seatwire beat` itself


class Task(StrEnum):
    DIRECTEDNESS = "seatwire.directedness"
    ENGAGEMENT = "seatwire.engagement"
    GUARDRAILS = "seatwire.guardrails"
    SEND = "seatwire.send"
    SWEEP = "seatwire.sweep"  # beat: re-enqueue overdue journal entries, release parked ones
    STEWARD = "seatwire.steward.tick"  # beat: one goal-steward run over every objective
    CONTROLLER = "seatwire.controller.tick"  # beat: decide every seat's next turn
    ASKS = "seatwire.asks.tick"  # beat: due asks wake, go one rung up or expire
    TURN = "seatwire.turn"  # one seat's turn, launched


@dataclass(frozen=True)
class Stage:
    """One stage: where its messages queue, the task that runs them, what they carry.

    `states` are the journal states an entry is in while this stage's message is the next
    thing to run (the first is the one a replayed dead letter returns to); `starts` names the
    kind of entry whose first message goes here; `cadence` names the setting that gives a
    beat stage its interval (beat stages carry no envelope and own no state).
    """

    queue: Queue
    task: Task
    envelope: type[Wire] | None = None
    states: tuple[JournalState, ...] = ()
    starts: EntryKind | None = None
    cadence: str | None = None

    @property
    def beat(self) -> bool:
        return self.cadence is not None

    @property
    def tick(self) -> str | None:
        """A beat stage's tick name (`sweep`, `steward`, `controller`): its cadence setting's
        stem, under which its last finish is kept (workers/stores/ticks.py)."""
        return None if self.cadence is None else self.cadence.removesuffix("_interval_s")

    @property
    def journaled(self) -> bool:
        """A stage of the journal pipeline: its messages carry an entry's tracking id, and the
        sweeper and the dead-letter queue know its states (a turn's are the seat's record's)."""
        return bool(self.states)


STAGES: tuple[Stage, ...] = (
    Stage(
        Queue.DIRECTEDNESS,
        Task.DIRECTEDNESS,
        InboundEnvelope,
        states=("accepted",),
        starts="inbound",
    ),
    Stage(
        Queue.ENGAGEMENT,
        Task.ENGAGEMENT,
        WorkEnvelope,
        states=("accepted",),
        starts="work",
    ),
    Stage(Queue.GUARDRAILS, Task.GUARDRAILS, DecisionEnvelope, states=("decided",)),
    Stage(Queue.SEND, Task.SEND, ReservedEnvelope, states=("reserved", "sending", "unknown")),
    Stage(Queue.BEAT, Task.SWEEP, cadence="sweep_interval_s"),
    Stage(Queue.STEWARD, Task.STEWARD, cadence="steward_interval_s"),
    Stage(Queue.CONTROLLER, Task.CONTROLLER, cadence="controller_interval_s"),
    # The asks tick shares the controller's queue (and so its worker): both are short
    # passes over the seats' records, and a deployment that runs the controller runs it.
    Stage(Queue.CONTROLLER, Task.ASKS, cadence="asks_interval_s"),
    Stage(Queue.TURNS, Task.TURN, TurnMessage),
)

BY_TASK: dict[Task, Stage] = {s.task: s for s in STAGES}
# The journal pipeline's queues: the stages an entry's messages go through.
STAGE_QUEUES: tuple[Queue, ...] = tuple(s.queue for s in STAGES if s.journaled)
# What `seatwire worker` consumes by default and may be asked for: every row's queue but
# beat's own (`seatwire beat` runs the sweep itself; the steward tick needs a worker).
WORKER_QUEUES: tuple[Queue, ...] = tuple(
    dict.fromkeys(s.queue for s in STAGES if s.queue is not Queue.BEAT)
)
BEAT_STAGES: tuple[Stage, ...] = tuple(s for s in STAGES if s.beat)
TASK_QUEUE: dict[Task, Queue] = {s.task: s.queue for s in STAGES}
QUEUE_TASK: dict[Queue, Task] = {s.queue: s.task for s in STAGES if s.journaled}
FIRST_STAGE: dict[str, Queue] = {s.starts: s.queue for s in STAGES if s.starts is not None}
FIRST_TASK: dict[str, Task] = {s.starts: s.task for s in STAGES if s.starts is not None}
# The journal states each stage's message is for, keyed by queue name (the DLQ's tables).
STAGE_STATES: dict[str, tuple[JournalState, ...]] = {
    s.queue.value: s.states for s in STAGES if s.journaled
}
# The stage a mid-pipeline state leads to (`accepted` depends on the kind: FIRST_STAGE).
STATE_STAGE: dict[str, Queue] = {
    state: s.queue for s in STAGES if s.starts is None for state in s.states
}

# Every state no stage's message is for, except a give-up's: once there, an entry has ended.
FINAL_STATES: frozenset[str] = frozenset(
    JOURNAL_STATES - {state for s in STAGES for state in s.states} - CLOSED_STATES
)


def task_id(tracking_id: str, stage: Queue) -> str:
    """The deterministic Celery task id of one stage of one event."""
    return f"{tracking_id}:{stage.value}"


def tracking_id_for(seat_id: str, work_id: str, revision: int) -> str:
    """Deterministic: the same (seat, work, revision) is the same event, however often posted."""
    digest = hashlib.sha256(f"{seat_id}\x1f{work_id}\x1f{revision}".encode()).hexdigest()
    return f"wr-{digest[:24]}"
