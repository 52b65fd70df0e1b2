"""The event journal: every accepted work report and inbound event, from `accepted` to a
final state, so nothing is dropped unseen; and the open index the sweeper walks.

Every multi-key change is one Lua script, and every script is idempotent for its operation
id, because redis-py may re-send a command whose reply was lost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis

from contracts import EngagementDecision, LedgerRow
from workers.errors import PermanentError
from workers.stores import keys
from workers.stores.dlq import Delivery, delivery
from workers.stores.onward import NO_ONWARD, Onward
from workers.stores.scripts import script, text

RETENTION_MS = 30 * 86_400_000  # final journal entries and guardrail ops are kept this long
LEDGER_STREAM_CAP = 100_000  # rows kept per seat stream (approximate trimming)
LEDGER_RETENTION_MS = 30 * 86_400_000  # and none older than this (SEATWIRE_LEDGER_RETENTION_MS)


@dataclass(frozen=True)
class Accepted:
    new: bool
    state: str
    enqueued: bool
    fingerprint: str


class Journal:
    """Every accepted event, from `accepted` to a final state, so nothing is dropped unseen."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        deadline_ms: int = 300_000,
        retention_ms: int = RETENTION_MS,
        ledger_retention_ms: int = LEDGER_RETENTION_MS,
    ) -> None:
        self.r = client
        self.deadline_ms = deadline_ms
        self.retention_ms = retention_ms
        self.ledger_retention_ms = ledger_retention_ms
        self._accept = script(client, "journal_accept")
        self._skip = script(client, "journal_skip")
        self._decide = script(client, "decision_record")

    def accept(
        self,
        tracking_id: str,
        *,
        kind: str,
        seat_id: str,
        payload: str,
        now_ms: int,
        fingerprint: str,
    ) -> Accepted:
        """Journal an event once; an existing entry is returned as it stands."""
        state, enqueued, stored = self._accept(
            keys=[keys.journal(tracking_id), keys.JOURNAL_OPEN],
            args=[
                tracking_id,
                kind,
                seat_id,
                payload,
                now_ms,
                now_ms + self.deadline_ms,
                fingerprint,
            ],
        )
        state = text(state)
        if state == "new":
            return Accepted(new=True, state="accepted", enqueued=False, fingerprint=fingerprint)
        return Accepted(
            new=False, state=state, enqueued=bool(text(enqueued)), fingerprint=text(stored)
        )

    def skip(
        self,
        tracking_id: str,
        *,
        kind: str,
        payload: str,
        reason: str,
        detail: str,
        now_ms: int,
        retention_ms: int,
    ) -> bool:
        """Journal, as final state `skipped`, an event that addresses nobody, with its reason;
        True when this is the first delivery of it."""
        (verb,) = self._skip(
            keys=[keys.journal(tracking_id)],
            args=[tracking_id, kind, payload, now_ms, reason, detail[:500], retention_ms],
        )
        return text(verb) == "new"

    def mark_enqueued(self, tracking_id: str, now_ms: int) -> None:
        self.r.hset(keys.journal(tracking_id), "enqueuedAtMs", now_ms)

    def failed(self, limit: int = 100) -> list[str]:
        """Tracking ids a stage gave up on, newest first."""
        return [text(t) for t in self.r.zrevrange(keys.JOURNAL_FAILED, 0, limit - 1)]

    def get(self, tracking_id: str) -> dict[str, Any] | None:
        raw = self.r.hgetall(keys.journal(tracking_id))
        if not raw:
            return None
        entry = {text(k): text(v) for k, v in raw.items()}
        for field in ("payload", "decision"):
            if field in entry:
                entry[field] = json.loads(entry[field])
        return entry

    def record_decision(
        self,
        tracking_id: str,
        *,
        seat_id: str,
        decision: EngagementDecision,
        row: LedgerRow | None,
        now_ms: int,
        final_state: str | None = None,
        onward: Onward | None = None,
    ) -> EngagementDecision:
        """Store the decision once; a non-engagement also writes its ledger row and ends here
        (in `final_state`, by default `refused` or `nobody`). An engaging decision stored now
        pushes `onward` (the guardrail stage's message) in the same step; one found stored
        pushes nothing (workers/stores/onward.py)."""
        _, stored = self.record_decision_started(
            tracking_id,
            seat_id=seat_id,
            decision=decision,
            row=row,
            now_ms=now_ms,
            final_state=final_state,
            onward=onward,
        )
        assert stored is not None  # no start to refuse it
        return stored

    def record_decision_started(
        self,
        tracking_id: str,
        *,
        seat_id: str,
        decision: EngagementDecision,
        row: LedgerRow | None,
        now_ms: int,
        final_state: str | None = None,
        onward: Onward | None = None,
        start: tuple[list[str], list[str]] | None = None,
    ) -> tuple[Delivery | None, EngagementDecision | None]:
        """`record_decision`, with the stage's start run first in the same script (`start`,
        its keys and arguments: workers/stores/dlq.py `start_of`): the start's answer (None
        without one) and the stored decision, None when the start was not admitted (nothing
        recorded)."""
        final = "" if row is None else ("refused" if decision.guardrail else "nobody")
        if row is not None and final_state is not None:
            final = final_state
        queue = [] if onward is None or row is not None else [onward.queue]
        decided = decision.model_dump_json(by_alias=True)
        try:
            stored = self._decide(
                keys=[
                    keys.journal(tracking_id),
                    keys.JOURNAL_OPEN,
                    keys.ledger_stream(seat_id),
                    keys.LEDGER_SEATS,
                    *([] if start is None else start[0]),
                    *queue,
                ],
                args=[
                    decided,
                    "" if row is None else row.model_dump_json(by_alias=True),
                    final,
                    now_ms,
                    seat_id,
                    tracking_id,
                    self.retention_ms,
                    LEDGER_STREAM_CAP,
                    self.ledger_retention_ms,
                    *(onward.args() if queue and onward is not None else NO_ONWARD),
                    "" if start is None else json.dumps(start[1]),
                ],
            )
        except redis.ResponseError as exc:
            if "NOENTRY" in str(exc):
                raise PermanentError(str(exc)) from exc
            raise
        if isinstance(stored, list):  # the start was not admitted: nothing recorded
            return delivery(stored[1:]), None
        admitted = None if start is None else Delivery("run")
        # The decision made now comes back as it was sent: no need to read it back.
        if text(stored) == decided:
            return admitted, decision
        return admitted, EngagementDecision.model_validate_json(stored)


def postpone(client: redis.Redis, tracking_id: str, *, until_ms: int) -> None:
    """Move an open entry's deadline later (never earlier, never reopening a closed one)."""
    client.zadd(keys.JOURNAL_OPEN, {tracking_id: until_ms}, xx=True, gt=True)
