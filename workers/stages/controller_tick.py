"""The work controller's beat tick (issue 12 point 4, event-driven since issue 27): the seats
that can have something to decide, decided in one batched pass.

A tick costs what the work costs, not what the org costs. It takes from the due index
(workers/stores/seat_runs.py) the seats due by now, oldest-due first and at most
`SEATWIRE_CONTROLLER_TICK_SEATS` (the rest stay due, and are the oldest next time: the next
tick follows at once, see `register`, so a tick stays as short as its batch), reads
their records and news in two round trips, decides each with the pure `tick_seat` (settle a
turn whose worker died, republish a queued turn nobody started, then the controller's
decision), and commits in one script: every record that changed, under a compare-and-set,
and every seat back in the index at its next due time (`next_due_ms`) or out of it. Only
then does it publish the turns it began. A seat is due because a timer of its record comes
(a retry, the quiet interval, an announcement's delay, a lease's end, a republish time) or
because its news was made: every script that writes news wakes the seat in the same step.

What it decides for a seat is what the tick before issue 27, which decided every seat every
second, decided at the same moment (tests/workers/test_controller_index.py compares them
tick by tick); it only skips the seconds at which nothing could change.

- A seat whose write lost to another writer (a turn's outcome, an operator) was woken by
  that write, and is decided again on the next tick; it began nothing.
- A crash between the commit and the publish leaves the turn queued; its republish time
  comes, and a later tick publishes it again; a copy of a turn's message starts nothing
  (workers/stages/turns.py). A crash before the commit leaves the seats claimed: the claim
  runs out and they are due again.
- The org: the index remembers the fingerprint of the org it was filled for (the seats, their
  controller options and the project card); a tick that decides with another fills it again:
  every seat is woken (the first tick of a deployment does that too), a changed card is
  announced first.
- Reconciliation: a wake-up lost to a crash between news and its script cannot happen (they
  are one script), but a record edited by hand or a Redis restored from an old backup can
  leave the index wrong. So each tick whose step is due also decides the next
  `RECONCILE_SLICE` seats of the org in file order: every seat is looked at once per
  `SEATWIRE_CONTROLLER_RECONCILE_S` (15 minutes by default), a step at most once a tick.

Beat publishes the tick only when the index says something is due (`controller_due`, asked
by beat's scheduler each interval in one round trip), so an idle deployment sends no task
that Flower would list; embedded mode asks the same before it runs one. A tick that left
seats due queues the next at once (a chain, under the same leader's token). A chain drains
what was due when it began and ends (what came due since waits for beat's next tick, so a
chain always ends, even while seats are looked at every millisecond); while it runs, the
index says nothing is due to beat (`SeatRuns.take`, `CHAIN_MS`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from celery import Celery

from contracts.controller import TurnMessage
from contracts.org import Project, Seat
from pipeline.controller import Rng
from pipeline.turns import Ticked, index_fingerprint, next_due_ms, tick_seat
from workers.broker import publish, push_all, shares_broker
from workers.clock import now_ms
from workers.container import Container
from workers.org import OrgView
from workers.queues import BY_TASK, Task
from workers.recovery.faults import crash_point
from workers.stages.base import Deps, StageTask, register_beat
from workers.stages.turns import apply_effects
from workers.stores.seat_runs import Taken
from workers.stores.ticks import Ticks
from workers.telemetry import telemetry

log = logging.getLogger("seatwire.controller")

RECONCILE_SLICE = 256  # seats looked at per step of the reconciliation pass
CLAIM_MIN_MS = 30_000  # a tick's claim on the seats it took lasts at least this long


@dataclass(frozen=True)
class TickReport:
    """What one tick did: seats decided (by action and reason), of which due and of which
    reconciled; turns published; conflicts; records written."""

    seats: int
    decisions: dict[str, int]
    published: tuple[str, ...]
    conflicts: int
    written: int
    due: int = 0
    reconciled: int = 0
    decided: tuple[str, ...] = ()  # the seats decided, in the order taken
    more: bool = False  # seats due by now were left for the next batch: tick again at once


@dataclass(frozen=True)
class OrgIndex:
    """What the tick needs of one org version, built once per version: its seats in file
    order, by member id, and the fingerprint the due index is filled for."""

    view: OrgView
    ids: tuple[str, ...]
    by_id: dict[str, Seat]
    fingerprint: str
    card: str

    @classmethod
    def of(cls, view: OrgView) -> OrgIndex:
        seats = view.org.seats
        card = view.org.project.to_wire()
        return cls(
            view=view,
            ids=tuple(s.member_id for s in seats),
            by_id={s.member_id: s for s in seats},
            fingerprint=index_fingerprint(seats, card),
            card=card_fingerprint(view.org.project),
        )


_INDEXES: dict[int, OrgIndex] = {}


def org_index(view: OrgView) -> OrgIndex:
    """The index of `view`, built on its first use (one per org version in a process)."""
    found = _INDEXES.get(id(view))
    if found is None or found.view is not view:
        found = OrgIndex.of(view)
        _INDEXES.clear()  # only the current version is kept
        _INDEXES[id(view)] = found
    return found


def controller_due(c: Container, *, now_ms: int) -> bool:
    """Whether a controller tick now has anything to do (one round trip): what beat asks
    before it publishes one."""
    index = org_index(c.org.current()[0])
    return c.seat_runs.due_now(now_ms=now_ms, org=index.fingerprint)


def idle_gate(c: Container, clock_ms: Callable[[], int] = now_ms) -> Callable[[], bool]:
    """Beat's check before it publishes a controller tick: True when something is due. When
    nothing is, the check was the tick's whole work, so it is marked as the tick's run (the
    stopped-beat alert and `seatwire status` still see a controller that is looked at)."""
    tick = BY_TASK[TASK].tick
    assert tick is not None

    def gate() -> bool:
        now = clock_ms()
        if controller_due(c, now_ms=now):
            return True
        Ticks(c.redis).mark(tick, now)
        return False

    return gate


def lazy_gate(make: Callable[[], Container]) -> Callable[[], bool]:
    """`idle_gate` of the container `make` builds at the first check (beat's, which only the
    leader asks)."""
    gates: list[Callable[[], bool]] = []

    def gate() -> bool:
        if not gates:
            gates.append(idle_gate(make()))
        return gates[0]()

    return gate


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
        index = org_index(c.org.current()[0])
        interval_ms = int(c.settings.controller_interval_s * 1000)
        claim = now + max(CLAIM_MIN_MS, 10 * interval_ms)
        limit = c.settings.controller_tick_seats
        step = min(RECONCILE_SLICE, len(index.ids))

        def take() -> Taken | None:
            return c.seat_runs.take(
                now_ms=now, limit=limit, claim_until_ms=claim, org=index.fingerprint, step=step
            )

        taken = take()
        if taken is None:
            self._refill(index, now)
            taken = take()
            if taken is None:  # another tick filled it for another org meanwhile
                log.warning("controller tick: the due index changed org under this tick")
                return TickReport(0, {}, (), 0, 0)
        seat_ids = list(taken.seats)
        reconcile: tuple[int, int] | None = None
        reconciled = 0
        if taken.reconcile is not None:
            n = len(index.ids)
            start = taken.reconcile if taken.reconcile < n else 0
            looked = index.ids[start : start + step]
            chosen = set(seat_ids)
            extra = [s for s in looked if s not in chosen]
            c.seat_runs.claim(extra, claim_until_ms=claim)
            seat_ids += extra
            reconciled = len(looked)
            # Steps of a whole pass's share: every seat once per SEATWIRE_CONTROLLER_RECONCILE_S.
            every = c.settings.controller_reconcile_s * 1000 * len(looked) / max(n, 1)
            reconcile = (now + max(interval_ms, int(every)), (start + len(looked)) % max(n, 1))
        report = self._decide(
            index, seat_ids, now, claim, reconcile, due=len(taken.seats), reconciled=reconciled
        )
        return replace(report, more=taken.more)

    def _refill(self, index: OrgIndex, now: int) -> None:
        """A new org (or the first tick): announce a changed project card, then wake every
        seat."""
        c = self.container
        known = c.project.card()
        if known != index.card:
            c.project.card_changed(
                list(index.ids), card=index.card, name=index.view.org.project.name, now_ms=now
            )
        period = int(c.settings.controller_reconcile_s * 1000)
        c.seat_runs.fill(
            list(index.ids), org=index.fingerprint, now_ms=now, next_step_ms=now + period
        )
        log.info("controller: due index filled for %d seats", len(index.ids))

    def _decide(
        self,
        index: OrgIndex,
        seat_ids: list[str],
        now: int,
        claim: int,
        reconcile: tuple[int, int] | None,
        *,
        due: int,
        reconciled: int,
    ) -> TickReport:
        c = self.container
        seats = [index.by_id[s] for s in seat_ids if s in index.by_id]
        # A seat the org no longer has leaves the index (its record stays, as before).
        settled_due: list[tuple[str, int | None]] = [
            (s, None) for s in seat_ids if s not in index.by_id
        ]
        observed = c.seat_runs.observe([s.member_id for s in seats], now_ms=now) if seats else []
        decisions: Counter[str] = Counter()
        writes, ticked = [], []
        republish = c.settings.turn_republish_after_ms
        for seat, (read, seen) in zip(seats, observed, strict=True):
            t = tick_seat(
                read.run,
                seen,
                options=seat.controller,
                now_ms=now,
                rng=self.rng,
                republish_after_ms=republish,
            )
            decisions[f"{t.decision.action}:{t.decision.reason}"] += 1
            changed = t.run is not read.run and t.run != read.run
            if changed:
                writes.append((read, t.run))
                ticked.append((seat, t))
            at = next_due_ms(
                t.run,
                seen,
                options=seat.controller,
                now_ms=now,
                republish_after_ms=republish,
                changed=changed,
            )
            settled_due.append((seat.member_id, at))
        flags = c.seat_runs.settle(writes, settled_due, claim_ms=claim, reconcile=reconcile)
        crash_point("controller", "after_commit", "")
        metrics = telemetry()
        for decided, count in decisions.items():
            action, _, reason = decided.partition(":")
            metrics.decided("controller", action, reason, count=count)
        published: list[str] = []
        conflicts = 0
        turns: list[tuple[str, dict[str, Any]]] = []
        effects: list[tuple[Seat, Ticked]] = []
        for ok, (seat, t) in zip(flags, ticked, strict=True):
            if not ok:
                conflicts += 1
                continue
            if t.publish is not None:
                message = TurnMessage(seat_id=seat.member_id, turn_id=t.publish.turn_id)
                turns.append((t.publish.turn_id, message.to_wire()))
                published.append(t.publish.turn_id)
                metrics.launched(t.publish.reason)
            if t.settled is not None or t.escalate is not None:
                effects.append((seat, t))
        if turns:
            publish_turns(self.app, c, turns)
        for seat, t in effects:
            apply_effects(c, self.app, seat, settled=t.settled, escalate=t.escalate, now_ms=now)
        if published or conflicts:
            log.info("controller tick: published %s, %d conflict(s)", published, conflicts)
        return TickReport(
            len(seats),
            dict(decisions),
            tuple(published),
            conflicts,
            sum(flags),
            due,
            reconciled,
            tuple(s.member_id for s in seats),
        )


def publish_turns(app: Celery, c: Container, turns: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Put the turns a tick began on the turns queue: on a broker that is the stores' own
    Redis, ONE LPUSH for all of them (Celery's `send_task` costs two round trips and most of
    a millisecond of CPU a message, the largest part of a busy tick); else Celery's publish
    for each."""
    if shares_broker(c.settings):
        push_all(c.redis, app, Task.TURN, turns)
        return
    for turn_id, message in turns:
        publish(app, Task.TURN, turn_id, message)


def card_fingerprint(card: Project) -> str:
    """The project card's identity: a change of any of its fields is a new card."""
    canonical = json.dumps(card.to_wire(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


TASK = Task.CONTROLLER  # this module's row of the stage table


def register(app: Celery, deps: Deps) -> None:
    def tick(task: StageTask, fence: int | None) -> None:
        report = ControllerTick.of(task.deps(), app)()
        if not report.more:
            return
        if task.request.is_eager:  # in process (embedded mode): the next batch, here
            while report.more:
                report = ControllerTick.of(task.deps(), app)()
            return
        # The next batch follows at once, as its own task under the same leader's token: a
        # tick stays as short as its batch, and a backlog of due seats drains at full speed.
        task.apply_async(kwargs={"fence": fence})

    register_beat(app, TASK, deps, tick)
