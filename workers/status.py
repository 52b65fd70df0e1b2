"""Read what an operator asks of a running deployment, in one place for the CLI (`seatwire
status`, `seatwire work`) and the ingress (its scrape-time metrics, `GET /v1/work/...`),
the ask record's figures included (`ask_figures`).

Reads only: the queues' depths from the broker (through Celery's own connection, so a
Redis, RabbitMQ or in-memory broker alike), the rest from the stores' Redis in one
pipeline. Not pure: Redis and the broker.
"""

from __future__ import annotations

from typing import Any

import redis
from celery import Celery
from kombu.exceptions import ChannelError

from contracts.ops import ClusterStatus, WorkerSeen, WorkSend, WorkStatus
from pipeline.ask_figures import AskFigures, bounded, figures
from workers.container import Container
from workers.queues import STAGES
from workers.recovery.leader import status as leader_status
from workers.stores import keys
from workers.stores.scripts import text
from workers.stores.ticks import Ticks

# The ask figures' window: the asks created in the last week (every still-open ask besides),
# at most the newest ASK_WINDOW of them and ASK_OPEN_CAP open ones read at a scrape.
ASK_WINDOW_MS = 7 * 86_400_000
ASK_WINDOW = 2_000
ASK_OPEN_CAP = 5_000
# How many of a work's asks `seatwire work` and GET /v1/work/... show, newest first.
WORK_ASKS = 20

# Every queue of the stage table, beat's own included, in table order.
QUEUES: tuple[str, ...] = tuple(dict.fromkeys(s.queue.value for s in STAGES))


def queue_depths(app: Celery, queues: tuple[str, ...] = QUEUES) -> dict[str, int]:
    """Messages waiting in each queue (not those a worker holds unacknowledged). A queue the
    broker does not know (nothing was ever sent to it, or all of it was taken) holds none."""
    depths: dict[str, int] = {}
    with app.connection_for_read() as conn:
        channel = conn.channel()
        try:
            for queue in queues:
                try:
                    depths[queue] = int(channel.queue_declare(queue=queue, passive=True)[1])
                except ChannelError:
                    depths[queue] = 0
                    # An AMQP broker closes the channel on a passive declare that fails.
                    channel.close()
                    channel = conn.channel()
        finally:
            channel.close()
    return depths


def workers_seen(app: Celery, *, timeout_s: float = 1.0) -> tuple[WorkerSeen, ...]:
    """The workers that answer `inspect active_queues` within `timeout_s`."""
    replies: dict[str, list[dict[str, Any]]] | None = app.control.inspect(
        timeout=timeout_s
    ).active_queues()
    return tuple(
        WorkerSeen(name=name, queues=tuple(sorted(q["name"] for q in queues)))
        for name, queues in sorted((replies or {}).items())
    )


def cluster_status(
    container: Container, *, now_ms: int, ask_workers: bool = False
) -> ClusterStatus:
    """The deployment's figures at `now_ms` (`ask_workers`: also who answers an inspect)."""
    app = container.app
    if app is None:
        raise ValueError("cluster_status needs a container built with its Celery app")
    r = container.redis
    pipe = r.pipeline(transaction=False)
    pipe.zcard(keys.DLQ)
    pipe.zcard(keys.JOURNAL_OPEN)
    pipe.zcount(keys.JOURNAL_OPEN, "-inf", f"({now_ms}")
    pipe.zcard(keys.JOURNAL_FAILED)
    pipe.zcard(keys.PARKED)
    pipe.zcard(keys.CONTROLLER_DUE)
    pipe.zcount(keys.CONTROLLER_DUE, "-inf", now_ms)
    dlq, open_, overdue, failed, parked, due, due_now = pipe.execute()
    leader = leader_status(r, terms=1)
    used, limit = redis_memory(r)
    return ClusterStatus(
        at_ms=now_ms,
        queues=queue_depths(app),
        dlq=int(dlq),
        journal_open=int(open_),
        journal_overdue=int(overdue),
        journal_failed=int(failed),
        parked=int(parked),
        beat_leader=leader.holder,
        beat_token=leader.token,
        ticks=Ticks(r).read(),
        workers=workers_seen(app) if ask_workers else None,
        controller_due=int(due),
        controller_overdue=int(due_now),
        redis_used_memory_bytes=used,
        redis_maxmemory_bytes=limit,
    )


def redis_memory(r: redis.Redis) -> tuple[int | None, int | None]:
    """Redis's `used_memory` and `maxmemory` (0: no limit) from INFO memory; None for a
    figure it does not report (the embedded stand-in, a Redis that refuses INFO)."""
    try:
        info = r.info("memory")
    except redis.ResponseError:
        return None, None

    def figure(name: str) -> int | None:
        value = info.get(name)
        return value if isinstance(value, int) and value >= 0 else None

    return figure("used_memory"), figure("maxmemory")


def ask_figures(container: Container, *, now_ms: int) -> AskFigures:
    """Asks by state, and per seat and per person the concluded asks' unanswered and declined
    counts (pipeline/ask_figures.py says what counts), their labels bounded to the org's
    seats and members. Three round trips: the index reads, then the documents in one."""
    r = container.redis
    since = now_ms - ASK_WINDOW_MS
    pipe = r.pipeline(transaction=False)
    pipe.zrevrangebyscore(keys.ASKS_ALL, "+inf", since, 0, ASK_WINDOW)
    pipe.zrange(keys.ASKS_OPEN, 0, ASK_OPEN_CAP - 1)
    recent, still_open = pipe.execute()
    ids = list(dict.fromkeys(text(i) for i in [*recent, *still_open]))
    found = figures(container.asks.many(ids), since_ms=since)
    view = container.org.current()[0]
    return AskFigures(
        by_state=found.by_state,
        seats=bounded(found.seats, [s.member_id for s in view.org.seats]),
        persons=bounded(found.persons, view.member_by_id),
    )


def work_status(container: Container, tracking_id: str) -> WorkStatus | None:
    """Where the work journalled as `tracking_id` stands, with the asks of its work (newest
    first); None when nothing was accepted so."""
    entry = container.journal.get(tracking_id)
    if entry is None:
        return None
    op = container.ledger.op_state(tracking_id)
    send = {
        k: op[k]
        for k in ("state", "attempt", "idempotencyId", "messageId", "channelId")
        if op.get(k)
    }
    decision = entry.get("decision")
    work_id = decision.get("workId") if isinstance(decision, dict) else None
    asks = container.asks.of_work(work_id, limit=WORK_ASKS) if work_id else []
    return WorkStatus(
        tracking_id=tracking_id,
        state=entry.get("state"),
        seat_id=entry.get("seatId"),
        accepted_at_ms=int(entry.get("acceptedAtMs", 0)),
        decision=decision,
        send=WorkSend.model_validate(send) if send else None,
        failed_stage=entry.get("failedStage"),
        error=entry.get("error"),
        asks=tuple(asks),
    )
