"""The work controller's beat tick (issue 12 point 4, DESIGN.md section 10): every seat's next
turn decided in one batched pass.

One tick reads every seat's record and news inputs in two round trips (workers/stores/
seat_runs.py), decides each seat with the pure `tick_seat` (settle a turn whose worker died,
republish a queued turn nobody started, then the controller's decision), writes back every
seat whose record changed in one compare-and-set call, and only then publishes the turns it
began. A seat whose write lost to another writer (a second tick, a turn's outcome, an
operator) is decided again on the next tick; it began nothing. A crash between the write and
the publish leaves the turn queued, and a later tick publishes it again; a copy of a turn's
message starts nothing (workers/stages/turns.py). So a seat has at most one turn at a time,
whatever beat, the broker or a worker does.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from celery import Celery

from contracts.controller import TurnMessage
from contracts.org import Project
from pipeline.controller import Rng
from pipeline.turns import Ticked, tick_seat
from workers.broker import publish
from workers.clock import now_ms
from workers.container import Container
from workers.queues import Task
from workers.recovery.faults import crash_point
from workers.stages.base import Deps, StageTask, register_beat
from workers.stages.turns import apply_effects
from workers.telemetry import telemetry

log = logging.getLogger("seatwire.controller")


@dataclass(frozen=True)
class TickReport:
    """What one tick did: seats decided, by action and reason; turns published; conflicts."""

    seats: int
    decisions: dict[str, int]
    published: tuple[str, ...]
    conflicts: int
    written: int


@dataclass
class ControllerTick:
    container: Container
    app: Celery
    clock_ms: Callable[[], int] = now_ms
    rng: Rng = field(default_factory=lambda: random.Random().random)

    @classmethod
    def of(cls, c: Container, app: Celery) -> ControllerTick:
        return cls(c, app)

    def __call__(self, *, now_ms: int | None = None) -> TickReport:
        c = self.container
        now = self.clock_ms() if now_ms is None else now_ms
        view = c.org.current()[0]
        seats = view.org.seats
        observed = c.seat_runs.observe([s.member_id for s in seats], now_ms=now)
        card = card_fingerprint(view.org.project)
        if observed and (observed[0][1].project or {}).get("card") != card:
            # The org file's project card changed (or this is its first tick): every seat
            # hears of it once; the next tick's news carries the new card.
            c.project.card_changed(
                [s.member_id for s in seats], card=card, name=view.org.project.name, now_ms=now
            )
            observed = c.seat_runs.observe([s.member_id for s in seats], now_ms=now)
        decisions: Counter[str] = Counter()
        writes, ticked = [], []
        for seat, (read, seen) in zip(seats, observed, strict=True):
            t = tick_seat(
                read.run,
                seen,
                options=seat.controller,
                now_ms=now,
                rng=self.rng,
                republish_after_ms=c.settings.turn_republish_after_ms,
            )
            decisions[f"{t.decision.action}:{t.decision.reason}"] += 1
            if t.run != read.run:
                writes.append((seat.member_id, read.rev, t.run))
                ticked.append((seat, t))
        flags = c.seat_runs.commit(writes)
        crash_point("controller", "after_commit", "")
        metrics = telemetry()
        for decided, count in decisions.items():
            action, _, reason = decided.partition(":")
            metrics.decided("controller", action, reason, count=count)
        published: list[str] = []
        conflicts = 0
        for ok, (seat, t) in zip(flags, ticked, strict=True):
            if not ok:
                conflicts += 1
                continue
            if t.publish is not None:
                self._publish(seat.member_id, t)
                published.append(t.publish.turn_id)
                metrics.launched(t.publish.reason)
            if t.settled is not None or t.escalate is not None:
                apply_effects(c, self.app, seat, settled=t.settled, escalate=t.escalate, now_ms=now)
        if published or conflicts:
            log.info("controller tick: published %s, %d conflict(s)", published, conflicts)
        return TickReport(len(seats), dict(decisions), tuple(published), conflicts, sum(flags))

    def _publish(self, seat_id: str, t: Ticked) -> None:
        assert t.publish is not None
        message = TurnMessage(seat_id=seat_id, turn_id=t.publish.turn_id).to_wire()
        publish(self.app, Task.TURN, t.publish.turn_id, message)


def card_fingerprint(card: Project) -> str:
    """The project card's identity: a change of any of its fields is a new card."""
    canonical = json.dumps(card.to_wire(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


TASK = Task.CONTROLLER  # this module's row of the stage table


def register(app: Celery, deps: Deps) -> None:
    def tick(task: StageTask, fence: int | None) -> None:
        ControllerTick.of(task.deps(), app)()

    register_beat(app, TASK, deps, tick)
