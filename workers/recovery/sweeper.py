"""The sweeper: what makes "never silently drop" hold when the broker loses a message.

Every journal entry stays in `sw:j:open` (score: its deadline, ms) until it is final. Beat
runs `tick` every `sweep_interval_s`: each entry past its deadline is re-enqueued to the
stage its state says is next, under the SAME deterministic task id, and its deadline moves
forward (so a slow stage is not re-enqueued every tick). The same tick re-publishes the
parked messages that are due (workers/recovery/parking.py).

kombu's Redis transport does restore unacked messages by itself, but only about every
visibility timeout + 100 s, and not a message lost between BRPOP and its unacked write, nor
a publish that never landed; with the sweeper, recovery is a matter of the deadline.

A message merely waiting in a long queue (a stage pool that is down) also looks stuck past
its deadline; so is one still running. Neither is copied: the sweep looks for the entry's
task id in its stage's queue where the broker keeps it (`queued_task_ids`, one pass over each
queue that has an overdue entry, on the broker's Redis: the stores' own database, or another
database or server) and the claim looks for the running mark a worker sets when it starts the
message (stage_start.lua, in delivery_count.lua or the stage's first script: a first
delivery's mark comes with that script, workers/stages/base.py `Start`); either only moves the
deadline on. So does an entry whose state moved within a deadline: on a broker that is not the
stores' Redis, the stage that moved it (guardrails reserving, say) publishes the next stage's
message a moment later, and until then that message is in no queue and running nowhere, yet
must not be copied (on the stores' Redis the move and the message are one script, workers/stores/
onward.py, and a copied stage that finds its move made publishes nothing). A re-enqueue
notes one outstanding copy, and the delivery is counted only when a worker starts the copy,
so a pool down for an hour drains its backlog with nothing dead-lettered: what waited
counted nothing. At `max_deliveries` started deliveries with no progress the entry is
dead-lettered (`stuck`). A message a worker has taken but not yet started (prefetched behind
a running one) is in neither place and may be copied once; the copy costs a redundant
message, never an effect (every stage is idempotent for its tracking id).

A broker that is no Redis (AMQP, a failover list of URLs, Sentinel, the embedded in-memory
one) cannot be read without taking its messages, so there the sweep cannot tell a waiting
message from a lost one: each entry still waiting past its deadline is copied once a
deadline, its log line says its queue went unseen, and the copies cost redundant stage runs,
never an effect (once one start has moved the entry on, none of them dead-letters it). A
journal deadline above the longest queue wait expected keeps them rare. A Redis broker whose
queues cannot be read at a tick (down, say) is swept the same way for that tick, with the
error logged: the look only spares copies, and must never stop the recovery.

Safe to run concurrently or twice: each entry is claimed by a compare-and-set on its
deadline in Lua (workers/stores/lua/sweep_claim.lua), so only one sweep re-enqueues it; and
a tick beat sent carries its leader's fencing token (workers/recovery/leader.py), which every
claim checks, so a deposed beat's tick claims nothing. Bounded: at most `batch` entries a
tick, oldest deadline first.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import redis
from celery import Celery

from contracts import EngagementDecision, GuardrailVerdict
from contracts.messages import AskContext, DecisionEnvelope, ReservedEnvelope, WorkEnvelope
from pipeline.asks import asking_of
from workers import clock
from workers.broker import publish
from workers.queues import FIRST_STAGE, QUEUE_TASK, STAGE_QUEUES, STATE_STAGE, Queue, task_id
from workers.recovery.parking import release_due
from workers.settings import Settings
from workers.stores import keys
from workers.stores.dlq import COUNTER_TTL_MS, finals
from workers.stores.scripts import script, text
from workers.telemetry import telemetry

log = logging.getLogger("seatwire.sweeper")

STAGE_NAMES = frozenset(q.value for q in STAGE_QUEUES)


@dataclass
class SweepReport:
    requeued: list[str] = field(default_factory=list)  # task ids re-enqueued
    dead: list[str] = field(default_factory=list)  # task ids dead-lettered
    vanished: list[str] = field(default_factory=list)  # tracking ids whose entry was gone
    closed: list[str] = field(default_factory=list)  # final entries still listed as open
    skipped: int = 0  # claimed by another sweep, or moved on since read
    released: int = 0  # parked messages re-enqueued
    waiting: int = 0  # overdue, but a copy waits in its queue: deadline moved, not copied
    running: int = 0  # overdue, but a worker runs it: deadline moved, not copied
    moved: int = 0  # overdue, but its state moved within a deadline: deadline moved, not copied
    fenced: int = 0  # claims refused: the tick's token is no longer the leader's

    @property
    def busy(self) -> bool:
        return bool(self.requeued or self.dead or self.vanished or self.closed or self.released)


@dataclass(frozen=True)
class Plan:
    """What to do with one overdue entry: re-enqueue `message` to `queue`, or give it up."""

    queue: Queue
    message: dict[str, Any] | None
    give_up: str = ""  # a reason, when the sweep itself gives the entry up
    error: str = ""
    close_as: str = "dead"


def message_for(
    queue: Queue, tracking_id: str, entry: dict[str, str], op_attempt: str | None
) -> dict[str, Any]:
    """The message `queue`'s task takes for this entry, rebuilt from what the journal (and,
    for a send, the guardrail op) holds: the same message the stage before it published."""
    if queue in (Queue.DIRECTEDNESS, Queue.ENGAGEMENT):
        payload: dict[str, Any] = json.loads(entry["payload"])
        return payload
    decision = EngagementDecision.model_validate_json(entry["decision"])
    asking = _asking(entry)
    seat_id = entry.get("seatId", "")
    accepted_at = int(entry.get("acceptedAtMs") or 0) or None
    if queue == Queue.GUARDRAILS:
        return DecisionEnvelope(
            tracking_id=tracking_id,
            seat_id=seat_id,
            accepted_at_ms=accepted_at,
            decision=decision,
            asking=asking,
        ).to_wire()
    # The send stage builds its ask from the op's own attempt, never the message's.
    verdict = GuardrailVerdict(allowed=True, attempt=int(op_attempt or 1))
    return ReservedEnvelope(
        tracking_id=tracking_id,
        seat_id=seat_id,
        accepted_at_ms=accepted_at,
        decision=decision,
        asking=asking,
        verdict=verdict,
    ).to_wire()


def _asking(entry: dict[str, str]) -> AskContext | None:
    """What the ask record keeps of a work report's entry (None for any other entry)."""
    if entry.get("kind") != "work" or not entry.get("payload"):
        return None
    try:
        return asking_of(WorkEnvelope.model_validate_json(entry["payload"]))
    except ValueError:
        return None


def plan(tracking_id: str, entry: dict[str, str], op_attempt: str | None) -> Plan:
    """Which stage an overdue entry's state says is next, and its message."""
    state = entry.get("state", "")
    first = FIRST_STAGE.get(entry.get("kind", ""))
    if state == "accepted" and first is not None:
        queue = first
    elif state in STATE_STAGE:
        queue = STATE_STAGE[state]
    elif state == "failed" and entry.get("failedStage") in STAGE_NAMES:
        # A stage gave up, yet the entry is still open: the dead-letter queue is its place.
        queue = Queue(entry["failedStage"])
        return Plan(
            queue,
            _message_or_none(queue, tracking_id, entry, op_attempt),
            give_up="failed",
            error=entry.get("error", ""),
            close_as="failed",
        )
    else:
        return Plan(
            first or Queue.ENGAGEMENT,
            None,
            give_up=f"unknown_state:{state or '-'}",
            error=f"state {state!r} of kind {entry.get('kind')!r} leads to no stage",
        )
    try:
        return Plan(queue, message_for(queue, tracking_id, entry, op_attempt))
    except (KeyError, ValueError) as exc:  # a malformed entry: no retry can help
        return Plan(queue, None, give_up=f"permanent:{type(exc).__name__}", error=repr(exc))


def _message_or_none(
    queue: Queue, tracking_id: str, entry: dict[str, str], op_attempt: str | None
) -> dict[str, Any] | None:
    try:
        return message_for(queue, tracking_id, entry, op_attempt)
    except (KeyError, ValueError):
        return None


@dataclass(frozen=True)
class Overdue:
    tracking_id: str
    deadline_ms: int  # as read: the claim succeeds only while it is still this
    state: str  # as read: the message was built from it
    plan: Plan
    waiting: bool = False  # its message is in its stage's queue
    seen: bool = False  # its stage's queue was read on the broker (else a copy is blind)


# A Celery message on kombu's Redis transport is JSON whose headers carry the task id.
_TASK_ID = re.compile(rb'"id": ?"([^"]+)"')
SCAN_CHUNK = 1000
UNSEEN = "its queue unseen (a broker the sweep cannot read)"


def queued_task_ids(client: redis.Redis, queue: str, wanted: set[str]) -> set[str]:
    """Which of `wanted` task ids have a message waiting in `queue` (kombu's Redis list),
    read in chunks from the head. Messages pushed meanwhile shift the list: some are read
    twice, none skipped; one taken meanwhile by a worker is running (its own mark says so)."""
    found: set[str] = set()
    start = 0
    while len(found) < len(wanted):
        chunk: list[bytes] = client.lrange(queue, start, start + SCAN_CHUNK - 1)  # type: ignore[assignment]
        if not chunk:
            break
        for raw in chunk:
            m = _TASK_ID.search(raw)
            if m is not None:
                tid = m.group(1).decode()
                if tid in wanted:
                    found.add(tid)
        start += SCAN_CHUNK
    return found


class Sweeper:
    def __init__(
        self,
        client: redis.Redis,
        *,
        broker: redis.Redis | None,
        deadline_ms: int = 300_000,
        max_deliveries: int = 5,
        batch: int = 500,
        fence: int | None = None,
    ) -> None:
        self.r = client
        self.broker = broker  # where the queues are read; None: a broker it cannot read
        self.deadline_ms = deadline_ms
        self.max_deliveries = max_deliveries
        self.batch = batch
        self.fence = fence  # the beat leader's token the claims check; None: unfenced
        self._claim = script(client, "sweep_claim")

    def sweep(self, app: Celery, *, now_ms: int) -> SweepReport:
        """Re-enqueue (or dead-letter) every entry past its deadline, at most `batch`."""
        return self.apply(app, self.overdue(now_ms), now_ms=now_ms)

    def overdue(self, now_ms: int) -> list[Overdue]:
        """The entries past their deadline (oldest first, at most `batch`), each read with
        the plan its state calls for: two round trips, nothing written."""
        listed: list[tuple[bytes, float]] = self.r.zrangebyscore(  # type: ignore[assignment]
            keys.JOURNAL_OPEN, "-inf", now_ms, start=0, num=self.batch, withscores=True
        )
        if not listed:
            return []
        tracking_ids = [text(m) for m, _ in listed]
        pipe = self.r.pipeline(transaction=False)
        for tid in tracking_ids:
            pipe.hgetall(keys.journal(tid))
            pipe.hget(keys.op(tid), "attempt")
        read = pipe.execute()
        found = []
        for i, (tid, (_, score)) in enumerate(zip(tracking_ids, listed, strict=True)):
            raw, attempt = read[2 * i], read[2 * i + 1]
            entry = {text(k): text(v) for k, v in raw.items()}
            p = (
                plan(tid, entry, None if attempt is None else text(attempt))
                if entry
                else Plan(Queue.ENGAGEMENT, None)  # vanished: its claim unlists it
            )
            found.append(Overdue(tid, int(score), entry.get("state", ""), p))
        return self._mark_waiting(found)

    def _mark_waiting(self, found: list[Overdue]) -> list[Overdue]:
        """Mark the entries whose message is waiting in its stage's queue on the broker."""
        if self.broker is None:
            return found
        by_queue: dict[Queue, set[str]] = {}
        for o in found:
            if o.plan.message is not None and not o.plan.give_up:
                by_queue.setdefault(o.plan.queue, set()).add(task_id(o.tracking_id, o.plan.queue))
        queued: set[str] = set()
        try:
            for queue, wanted in by_queue.items():
                queued |= queued_task_ids(self.broker, queue.value, wanted)
        except Exception:
            # The look only spares copies: a broker that cannot be read (down, or a URL
            # option redis-py refuses) must not stop the sweep that recovers lost messages.
            log.exception("could not read the broker's queues: overdue entries copied unseen")
            return found
        return [
            replace(o, seen=True, waiting=task_id(o.tracking_id, o.plan.queue) in queued)
            for o in found
        ]

    def apply(self, app: Celery, overdue: list[Overdue], *, now_ms: int) -> SweepReport:
        """Claim each entry (compare-and-set on the deadline read), then publish the
        re-enqueues that were claimed: one round trip for every claim."""
        report = SweepReport()
        if not overdue:
            return report
        pipe = self.r.pipeline(transaction=False)
        for o in overdue:
            self._claim(
                keys=self._claim_keys(o), args=self._claim_args(o, now_ms=now_ms), client=pipe
            )
        for o, reply in zip(overdue, pipe.execute(), strict=True):
            self._account(app, o, text(reply[0]), text(reply[1]) if len(reply) > 1 else "", report)
        return report

    @staticmethod
    def _claim_keys(o: Overdue) -> list[str]:
        return [
            keys.journal(o.tracking_id),
            keys.JOURNAL_OPEN,
            keys.deliveries(o.tracking_id),
            keys.JOURNAL_FAILED,
            keys.DLQ,
            keys.dead_letter(task_id(o.tracking_id, o.plan.queue)),
            keys.BEAT_EPOCH,
            keys.running(o.tracking_id, o.plan.queue.value),
        ]

    def _claim_args(self, o: Overdue, *, now_ms: int) -> list[str | int]:
        p = o.plan
        return [
            o.tracking_id,
            o.deadline_ms,
            now_ms + self.deadline_ms,
            o.state,
            p.queue.value,
            self.max_deliveries,
            now_ms,
            task_id(o.tracking_id, p.queue),
            QUEUE_TASK[p.queue].value,
            "" if p.message is None else json.dumps(p.message),
            COUNTER_TTL_MS,
            p.give_up,
            p.error[:2000],
            p.close_as,
            "" if self.fence is None else str(self.fence),
            "1" if o.waiting else "0",
            keys.copies_field(p.queue.value),
            *finals(),
        ]

    def _account(
        self, app: Celery, o: Overdue, verb: str, detail: str, report: SweepReport
    ) -> None:
        """Act on one claim's verb (publish a re-enqueue) and write it into the report."""
        tid = o.tracking_id
        tid_q = task_id(tid, o.plan.queue)
        if verb == "requeue":
            if self._publish(app, o.plan, tid):
                report.requeued.append(tid_q)
                seen = "neither queued" if o.seen else UNSEEN
                log.warning(
                    "re-enqueued %s: past its deadline in state %s, %s nor running "
                    "(%s deliveries started)",
                    tid_q,
                    o.state,
                    seen,
                    detail,
                )
        elif verb == "dead":
            report.dead.append(tid_q)
            log.error(
                "dead-lettered %s (state %s, %s deliveries, %s)",
                tid_q,
                o.state,
                detail,
                o.plan.give_up or "stuck",
            )
        elif verb == "vanished":
            report.vanished.append(tid)
            log.warning("journal entry %s is gone (expired); dropped from the open index", tid)
        elif verb == "closed":
            report.closed.append(tid)
            log.info("%s is final (%s); dropped from the open index", tid, detail)
        elif verb == "waiting":
            report.waiting += 1
        elif verb == "running":
            report.running += 1
        elif verb == "moved":
            report.moved += 1
        elif verb == "fenced":
            report.fenced += 1
        else:
            report.skipped += 1

    def _publish(self, app: Celery, p: Plan, tracking_id: str) -> bool:
        assert p.message is not None
        try:
            publish(app, QUEUE_TASK[p.queue], tracking_id, p.message)
        except Exception:
            # Claimed but not published: its deadline moved, so the next sweep after it
            # tries again (and counts it; the cap still ends a loop of failed publishes).
            log.exception("could not re-enqueue %s", task_id(tracking_id, p.queue))
            return False
        return True


def tick(
    client: redis.Redis,
    app: Celery,
    *,
    broker: redis.Redis | None,
    now_ms: int,
    deadline_ms: int,
    max_deliveries: int,
    batch: int,
    fence: int | None = None,
) -> SweepReport:
    """One beat tick: sweep the overdue journal entries (their queues read on `broker`),
    then release the due parked ones; every write checked against `fence` (the beat
    leader's token) when there is one."""
    report = Sweeper(
        client,
        broker=broker,
        deadline_ms=deadline_ms,
        max_deliveries=max_deliveries,
        batch=batch,
        fence=fence,
    ).sweep(app, now_ms=now_ms)
    report.released = release_due(client, app, now_ms=now_ms, batch=batch, fence=fence)
    return report


class TickDeps(Protocol):
    """What a tick needs of a process's container."""

    settings: Settings
    broker_redis: redis.Redis | None  # before `redis`, whose name would hide the module
    redis: redis.Redis


def counted(report: SweepReport) -> None:
    """A sweep in the metrics, by what it did with each entry it looked at."""
    metrics = telemetry()
    for action, count in (
        ("requeued", len(report.requeued)),
        ("dead_lettered", len(report.dead)),
        ("vanished", len(report.vanished)),
        ("closed", len(report.closed)),
        ("released", report.released),
        ("waiting", report.waiting),
        ("running", report.running),
        ("moved", report.moved),
        ("skipped", report.skipped),
        ("fenced", report.fenced),
    ):
        metrics.swept(action, count)


def run_tick(container: TickDeps, app: Celery, *, fence: int | None = None) -> SweepReport:
    """`tick` with a process's container and its settings (the beat task, embedded mode)."""
    s = container.settings
    report = tick(
        container.redis,
        app,
        broker=container.broker_redis,
        now_ms=clock.now_ms(),
        deadline_ms=s.journal_deadline_ms,
        max_deliveries=s.max_deliveries,
        batch=s.sweep_batch,
        fence=fence,
    )
    counted(report)
    if report.busy:
        log.info(
            "sweep: %d re-enqueued, %d dead-lettered, %d vanished, %d closed, %d released",
            len(report.requeued),
            len(report.dead),
            len(report.vanished),
            len(report.closed),
            report.released,
        )
    if report.waiting or report.running or report.fenced:
        log.info(
            "sweep: %d overdue still queued, %d still running (deadlines moved, not copied), "
            "%d claims fenced off",
            report.waiting,
            report.running,
            report.fenced,
        )
    return report
