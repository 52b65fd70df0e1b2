"""What an operator reads about a running deployment: the cluster's figures (`seatwire
status`, the scrape-time metrics) and where one piece of reported work stands (`seatwire
work`, `GET /v1/work/{trackingId}`). Pure data."""

from __future__ import annotations

from typing import Any

from contracts._base import Wire
from contracts.asks import Ask


class WorkerSeen(Wire):
    """A Celery worker that answered `inspect active_queues`, and the queues it consumes."""

    name: str
    queues: tuple[str, ...]


class ClusterStatus(Wire):
    """The deployment at `at_ms`, as Redis and the broker hold it.

    `queues`: messages waiting on the broker per stage-table queue. `journal_overdue`: open
    entries past their deadline (the sweeper's work). `ticks`: when each beat-driven tick
    (`sweep`, `steward`, `controller`) last finished; a tick never run is absent. `workers`
    is None when the workers were not asked (the metrics scrape does not ask them: each
    worker is its own scrape target), and empty when they were asked and none answered.
    `controller_due`: seats in the work controller's due index, of which
    `controller_overdue` are due by `at_ms` (a tick decides them next; a number that stays
    high means the ticks are not keeping up, or not running).
    """

    at_ms: int
    queues: dict[str, int]
    dlq: int
    journal_open: int
    journal_overdue: int
    journal_failed: int
    parked: int
    beat_leader: str | None
    beat_token: int | None
    ticks: dict[str, int]
    workers: tuple[WorkerSeen, ...] | None = None
    controller_due: int = 0
    controller_overdue: int = 0
    # Redis's INFO memory: bytes used, and its maxmemory (0: no limit); None: not reported.
    redis_used_memory_bytes: int | None = None
    redis_maxmemory_bytes: int | None = None


class WorkSend(Wire):
    """The send of one piece of work, as far as it got."""

    state: str | None = None
    attempt: int | None = None
    idempotency_id: str | None = None
    message_id: str | None = None
    channel_id: str | None = None


class WorkStatus(Wire):
    """Where one reported piece of work stands: its journal state, decision and send, and
    the asks of its work (newest first), each with its state and answer."""

    tracking_id: str
    state: str | None
    seat_id: str | None
    accepted_at_ms: int
    decision: dict[str, Any] | None = None
    send: WorkSend | None = None
    failed_stage: str | None = None
    error: str | None = None
    asks: tuple[Ask, ...] = ()
