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
from workers.stages.base import Deps, StageTask, hand_off, register_stage
from workers.stages.rows import stage_row
from workers.stores.ledger import Ledger


@dataclass
class Guardrails:
    ledger: Ledger
    clock_ms: Callable[[], int] = now_ms

    @classmethod
    def of(cls, c: Container) -> Guardrails:
        return cls(ledger=c.ledger)

    def __call__(self, env: DecisionEnvelope) -> ReservedEnvelope | None:
        verdict = self.ledger.reserve(
            env.tracking_id,
            decision=env.decision,
            seat_id=env.seat_id,
            tracking_id=env.tracking_id,
        )
        if verdict.allowed:
            return ReservedEnvelope(
                tracking_id=env.tracking_id,
                seat_id=env.seat_id,
                decision=env.decision,
                verdict=verdict,
            )
        self.refuse(env.tracking_id, env.seat_id, env.decision, verdict)
        return None

    def refuse(
        self,
        tracking_id: str,
        seat_id: str,
        decision: EngagementDecision,
        verdict: GuardrailVerdict,
    ) -> None:
        """Write a refusal down: `refused`, with the limit's code and the counts."""
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


TASK = Task.GUARDRAILS  # this module's row of the stage table


def register(app: Celery, deps: Deps) -> None:
    def guardrails(task: StageTask, env: DecisionEnvelope) -> None:
        container = task.deps()
        nxt = Guardrails.of(container)(env)
        if nxt is not None:
            crash_point("guardrails", "after_reserve", env.tracking_id)
            hand_off(app, container, Task.SEND, nxt.tracking_id, nxt.to_wire())

    register_stage(app, TASK, deps, guardrails)
