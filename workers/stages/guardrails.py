"""The guardrail stage: reserve the ask's place against the limits atomically, or write the
refusal down with the limit it hit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from celery import Celery

from contracts import EngagementDecision, GuardrailVerdict
from contracts.messages import DecisionEnvelope, ReservedEnvelope
from workers.clock import now_ms
from workers.container import Container
from workers.queues import Task
from workers.recovery.faults import crash_point
from workers.stages.base import (
    Deps,
    Onwards,
    StageTask,
    Start,
    hand_off,
    onwards,
    refused,
    register_stage,
)
from workers.stages.rows import stage_row
from workers.stores.ledger import Ledger
from workers.stores.onward import Onward
from workers.telemetry import telemetry

# The send message's payload ends with its verdict, whose last field is the attempt: the
# reservation's attempt is written in by the script, between the payload and this tail.
_ATTEMPT_TAIL = "}}"


def send_onward(onwards: Onwards, env: DecisionEnvelope) -> Onward:
    """The send stage's message for `env`'s reservation, for guard_reserve.lua to push with
    the place it holds, the attempt it counts written in. It carries what the send stage reads
    of a verdict, allowed and the attempt (the op's own attempt wins there anyway)."""
    text = ReservedEnvelope(
        tracking_id=env.tracking_id,
        seat_id=env.seat_id,
        accepted_at_ms=env.accepted_at_ms,
        decision=env.decision,
        asking=env.asking,
        verdict=GuardrailVerdict(allowed=True, attempt=1),
    ).model_dump_json(by_alias=True)
    end = '"attempt":1' + _ATTEMPT_TAIL
    if not text.endswith(end):  # the contract's field order changed: the slot is elsewhere
        raise RuntimeError(f"a send message no longer ends with its attempt: {text[-60:]!r}")
    return onwards.message(
        Task.SEND, env.tracking_id, text[: -len("1" + _ATTEMPT_TAIL)], _ATTEMPT_TAIL
    )


@dataclass
class Guardrails:
    ledger: Ledger
    clock_ms: Callable[[], int] = now_ms
    # With a broker that is the stores' Redis, a place held is held together with the send
    # stage's message (workers/stores/onward.py); None: the task publishes it.
    onwards: Onwards | None = None

    @classmethod
    def of(cls, c: Container, onwards: Onwards | None = None) -> Guardrails:
        return cls(ledger=c.ledger, onwards=onwards)

    def __call__(
        self, env: DecisionEnvelope, start: Start | None = None
    ) -> ReservedEnvelope | None:
        """Reserve `env`'s place, or write its refusal down. With `start` (the task's own:
        workers/stages/base.py `Start`) the reservation script runs the start first, and
        nothing is reserved unless it is admitted."""
        started, verdict = self.ledger.reserve_started(
            env.tracking_id,
            decision=env.decision,
            seat_id=env.seat_id,
            tracking_id=env.tracking_id,
            onward=None if self.onwards is None else send_onward(self.onwards, env),
            start=None if start is None else start.script_args(),
        )
        if refused(start, started):
            return None
        if verdict is None:  # the start was not admitted: nothing reserved
            return None
        if verdict.allowed:
            return ReservedEnvelope(
                tracking_id=env.tracking_id,
                seat_id=env.seat_id,
                accepted_at_ms=env.accepted_at_ms,
                decision=env.decision,
                asking=env.asking,
                verdict=verdict,
            )
        at_ms = self.refuse(env.tracking_id, env.seat_id, env.decision, verdict)
        metrics = telemetry()
        metrics.refused("guardrails", verdict.code)
        metrics.finished("work", "refused", accepted_at_ms=env.accepted_at_ms, now_ms=at_ms)
        return None

    def refuse(
        self,
        tracking_id: str,
        seat_id: str,
        decision: EngagementDecision,
        verdict: GuardrailVerdict,
    ) -> int:
        """Write a refusal down: `refused`, with the limit's code and the counts; when (ms)."""
        row = stage_row(
            seat_id,
            decision,
            verdict,
            tracking_id,
            outcome=verdict.code or "",  # type: ignore[arg-type]  # a guardrail's code
            at_ms=self.clock_ms(),
            reason=verdict.detail,
            extra_why=f"guardrail {verdict.code}: {verdict.detail}",
        )
        self.ledger.finish(
            tracking_id, outcome="refused", row=row, tracking_id=tracking_id, now_ms=row.at_ms
        )
        return row.at_ms


TASK = Task.GUARDRAILS  # this module's row of the stage table


def register(app: Celery, deps: Deps) -> None:
    def guardrails(task: StageTask, env: DecisionEnvelope) -> None:
        container = task.deps()
        atomic = onwards(app, container)
        nxt = Guardrails.of(container, atomic)(env, task.start_of_request())
        if nxt is not None:
            crash_point("guardrails", "after_reserve", env.tracking_id)
            if atomic is None:  # else it went out with the reservation
                hand_off(app, container, Task.SEND, nxt.tracking_id, nxt.to_wire())

    # Its start runs in its reservation's script: the body before it only reads the message.
    register_stage(app, TASK, deps, guardrails, start_in="always")
