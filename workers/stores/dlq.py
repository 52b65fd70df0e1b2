"""The dead-letter queue: every message Seatwire gave up on, with why, for a person to replay.

Redis has no dead-letter exchange (`Reject(requeue=False)` on Redis deletes the message), and
`task_reject_on_worker_lost` requeues a message that kills its process forever (celery#9082).
So the cap and the queue are Seatwire's own (docs/reliability.md):

- A stage message is dead-lettered after `max_deliveries` deliveries that a worker STARTED
  (`worker_lost_loop`: kombu marks a message it puts back `redelivered`; `stuck`: a sweeper
  copy), counted before the body runs; a message that only waited in its queue, however
  long, counts nothing (so an outage of a stage pool dead-letters nothing). Also when its
  retries run out (`max_retries`) or at once on a permanent error (`permanent:<error type>`).
- Every start marks the message running (`keys.running`, for the task time limit): the
  sweeper copies no message that is waiting in its queue or running.
- A letter is a hash (`keys.dead_letter(id)`) listed in a sorted set by time (`keys.DLQ`),
  not a stream: its id is the message's task id (`{trackingId}:{stage}`), so a give-up
  written twice (a re-sent script, a sweep racing the stage) is one letter, a replay removes
  it by id, and a replayed letter stays behind as a tombstone that makes a second replay a
  no-op. Alert on `ZCARD sw:dlq` > 0.
- The journal entry of a dead letter is closed (`dead`; `failed` when a stage gave up) and
  leaves the open index, so the sweeper (workers/recovery/sweeper.py) leaves it alone until
  it is replayed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis

from workers.queues import FINAL_STATES, QUEUE_TASK, STAGE_STATES, TASK_QUEUE, Queue, Task, task_id
from workers.stores import keys
from workers.stores.scripts import script, text

COUNTER_TTL_MS = 7 * 86_400_000  # a delivery counter outlives any retry chain of its message
TOMBSTONE_TTL_MS = 7 * 86_400_000  # how long a replayed letter answers "already replayed"
# How long a started message counts as running when the caller does not say (its task time
# limit, 60 s by default, and a margin): the sweeper copies it only after that.
RUNNING_MS = 75_000
# The state a replayed entry returns to when it does not remember its own (an entry failed by
# an older release's `journal.fail`): the state its stage's message is re-enqueued from by the
# sweeper.
STAGE_ENTRY_STATE = {stage: states[0] for stage, states in STAGE_STATES.items()}
# A redelivered message at the cap whose entry is in none of its stage's states (nor
# `failed`) is a stale copy (its entry moved on): acked unrun, the entry left alone.
STAGE_OWNS = {stage: (*states, "failed") for stage, states in STAGE_STATES.items()}


def finals() -> list[str]:
    return sorted(FINAL_STATES)


@dataclass(frozen=True)
class DeadLetter:
    id: str
    tracking_id: str
    stage: str
    task: str
    reason: str
    error: str
    deliveries: int
    at_ms: int
    message: dict[str, Any] | None
    replayed_at_ms: int | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "trackingId": self.tracking_id,
            "stage": self.stage,
            "reason": self.reason,
            "error": self.error,
            "deliveries": self.deliveries,
            "atMs": self.at_ms,
            "message": self.message,
        }


@dataclass(frozen=True)
class Delivery:
    verb: str  # run | dead (dead-lettered now) | done (already dead or final: ack, skip)
    deliveries: int | None = None
    state: str | None = None

    @property
    def run(self) -> bool:
        return self.verb == "run"


@dataclass(frozen=True)
class Replay:
    verb: str  # ok | final | replayed | unknown | missing | nomessage
    letter: DeadLetter | None = None
    detail: str = ""
    # On `ok`: the message to publish again, under its deterministic task id.
    republish: tuple[Task, str, dict[str, Any]] | None = None


def _letter(dlq_id: str, raw: dict[Any, Any]) -> DeadLetter | None:
    if not raw:
        return None
    f = {text(k): text(v) for k, v in raw.items()}
    message = f.get("message", "")
    return DeadLetter(
        id=dlq_id,
        tracking_id=f.get("trackingId", ""),
        stage=f.get("stage", ""),
        task=f.get("task", ""),
        reason=f.get("reason", ""),
        error=f.get("error", ""),
        deliveries=int(f.get("deliveries") or 0),
        at_ms=int(f.get("atMs") or 0),
        message=json.loads(message) if message else None,
        replayed_at_ms=int(f["replayedAtMs"]) if f.get("replayedAtMs") else None,
    )


def delivery(reply: Any) -> Delivery:
    """A start's answer, from stage_start.lua's reply ({verb, deliveries | state})."""
    verb, n = text(reply[0]), reply[1]
    if verb == "done":
        return Delivery(verb, state=text(n))
    return Delivery(verb, deliveries=int(n))


class DeadLetters:
    """The delivery cap and the dead-letter queue, on one Redis."""

    def __init__(self, client: redis.Redis, *, max_deliveries: int = 5) -> None:
        self.r = client
        self.max_deliveries = max_deliveries
        self._start_fixed: dict[Queue, tuple[str, ...]] = {}
        self._count = script(client, "delivery_count")
        self._give_up = script(client, "stage_give_up")
        self._replay = script(client, "dlq_replay")

    # ------------------------------------------------------------------ writing

    def count_redelivery(
        self, tracking_id: str, *, queue: Queue, message: Any, now_ms: int
    ) -> Delivery:
        """Count a redelivered message before its body runs; at the cap, dead-letter it."""
        return self.start(tracking_id, queue=queue, message=message, now_ms=now_ms)

    def start(
        self,
        tracking_id: str,
        *,
        queue: Queue,
        message: Any,
        now_ms: int,
        redelivered: bool = True,
        running_ms: int = RUNNING_MS,
    ) -> Delivery:
        """A worker starts a stage's message: mark it running for `running_ms`, and count it
        when it is a redelivery (kombu's `redelivered`, or a sweeper copy); at the cap,
        dead-letter it instead."""
        k, a = self.start_of(
            tracking_id,
            queue=queue,
            message=message,
            now_ms=now_ms,
            redelivered=redelivered,
            running_ms=running_ms,
        )
        return delivery(self._count(keys=k, args=a))

    def start_of(
        self,
        tracking_id: str,
        *,
        queue: Queue,
        message: Any,
        now_ms: int,
        redelivered: bool,
        running_ms: int,
    ) -> tuple[list[str], list[str]]:
        """The keys and arguments of `start` (stage_start.lua), for a script that runs the
        start first itself (guard_reserve.lua), in the same round trip as its own work."""
        dlq_id = task_id(tracking_id, queue)
        fixed = self._start_fixed.get(queue)
        if fixed is None:
            fixed = self._start_fixed[queue] = self._fixed_start_args(queue)
        return (
            [
                keys.deliveries(tracking_id),
                keys.journal(tracking_id),
                keys.JOURNAL_OPEN,
                keys.JOURNAL_FAILED,
                keys.DLQ,
                keys.dead_letter(dlq_id),
                keys.running(tracking_id, queue.value),
            ],
            [
                *fixed[:3],
                str(now_ms),
                tracking_id,
                dlq_id,
                fixed[3],
                json.dumps(message),
                *fixed[4:6],
                "1" if redelivered else "0",
                fixed[6],
                str(running_ms),
                *fixed[7:],
            ],
        )

    def _fixed_start_args(self, queue: Queue) -> tuple[str, ...]:
        """The arguments of `start_of` that only depend on the stage (made once per stage):
        ARGV 1-3, 7, 9, 10, 12 and 14 onwards of delivery_count.lua, in that order."""
        n = self.max_deliveries
        return (
            queue.value,
            str(n),
            str(COUNTER_TTL_MS),
            QUEUE_TASK[queue].value,
            f"redelivered {n} times without finishing: its worker process died (or was lost) "
            "on it each time",
            ",".join(STAGE_OWNS[queue.value]),
            keys.copies_field(queue.value),
            f"re-enqueued by the sweeper and started {n} times without its entry moving on",
            *finals(),
        )

    def give_up(
        self,
        tracking_id: str,
        *,
        queue: Queue,
        reason: str,
        error: str,
        message: Any,
        now_ms: int,
        task: Task | None = None,
    ) -> str:
        """A stage gave up: close the entry as `failed` and dead-letter its message. Returns
        'dead', 'missing' (no entry; the letter is kept) or the final state the entry keeps.
        `task` names the message's task for a stage without journal entries (the turns)."""
        dlq_id = task_id(tracking_id, queue)
        verdict = self._give_up(
            keys=[
                keys.journal(tracking_id),
                keys.JOURNAL_OPEN,
                keys.JOURNAL_FAILED,
                keys.DLQ,
                keys.dead_letter(dlq_id),
                keys.deliveries(tracking_id),
            ],
            args=[
                tracking_id,
                queue.value,
                (task or QUEUE_TASK[queue]).value,
                reason,
                error[:2000],
                now_ms,
                dlq_id,
                json.dumps(message),
                *finals(),
            ],
        )
        return text(verdict)

    # ------------------------------------------------------------------ reading

    def count(self) -> int:
        return int(self.r.zcard(keys.DLQ))

    def list(self, limit: int = 100) -> list[DeadLetter]:
        """The dead letters, newest first."""
        ids = [text(i) for i in self.r.zrevrange(keys.DLQ, 0, limit - 1)]
        if not ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        for dlq_id in ids:
            pipe.hgetall(keys.dead_letter(dlq_id))
        letters = (_letter(i, raw) for i, raw in zip(ids, pipe.execute(), strict=True))
        return [x for x in letters if x is not None]

    def get(self, dlq_id: str) -> DeadLetter | None:
        return _letter(dlq_id, self.r.hgetall(keys.dead_letter(dlq_id)))

    # ------------------------------------------------------------------ replaying

    def reopen(self, dlq_id: str, *, deadline_ms: int, now_ms: int) -> Replay:
        """Take a dead letter out of the queue for a replay: reopen its entry and answer the
        message to publish again (workers/recovery/replay.py publishes it).

        Reopening an unknown id changes nothing; reopening a letter again is a no-op."""
        letter = self.get(dlq_id)
        if letter is None:
            return Replay("unknown", detail=f"no dead letter {dlq_id!r}")
        if letter.replayed_at_ms is not None:
            return Replay("replayed", letter, detail=f"already replayed at {letter.replayed_at_ms}")
        if letter.message is None:
            return Replay(
                "nomessage",
                letter,
                detail=f"{dlq_id} holds no message to replay: its entry could not be read "
                f"({letter.error}); nothing changed",
            )
        reply = self._replay(
            keys=[
                keys.DLQ,
                keys.dead_letter(dlq_id),
                keys.journal(letter.tracking_id),
                keys.JOURNAL_OPEN,
                keys.JOURNAL_FAILED,
                keys.deliveries(letter.tracking_id),
            ],
            args=[
                dlq_id,
                now_ms,
                now_ms + deadline_ms,
                STAGE_ENTRY_STATE.get(letter.stage, "accepted"),
                TOMBSTONE_TTL_MS,
                *finals(),
            ],
        )
        verb = text(reply[0])
        if verb == "replayed":
            return Replay(verb, letter, detail=f"already replayed at {text(reply[1])}")
        if verb == "unknown":
            return Replay(verb, detail=f"no dead letter {dlq_id!r}")
        if verb == "missing":
            return Replay(
                verb,
                letter,
                detail=f"the journal entry of {letter.tracking_id} is gone (expired): "
                "nothing to reopen",
            )
        if verb == "final":
            return Replay(
                verb,
                letter,
                detail=f"{letter.tracking_id} has ended meanwhile ({text(reply[1])}): "
                "removed from the queue, nothing re-published",
            )
        task, tracking_id, message = Task(text(reply[1])), text(reply[2]), text(reply[3])
        return Replay(
            "ok",
            letter,
            detail=f"re-published {task_id(tracking_id, TASK_QUEUE[task])}",
            republish=(task, tracking_id, json.loads(message) if message else {}),
        )
