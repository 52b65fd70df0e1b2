"""Each seat's work intents (issue 13, the tool `record_work_intent`): its durable recovery
checkpoints, and the counters the work controller reads as the seat's durable work.

A seat has a hash `keys.intents(seat)` of intent id -> the intent's record JSON (with its
revision), a hash `keys.intent_meta(seat)` of counters, and one receipt per write,
`keys.intent_request(seat, client_request_id)`: the write's input fingerprint followed by its
receipt, kept `RECEIPT_TTL_MS`. One script, `intent_record`, makes a write all or nothing: a
replay of the same input answers the original receipt (whatever the intent became since),
another input under the same request id is a conflict, the compare-and-set on the intent's
revision and the fixed Issue link are checked, then the record, the counters and the receipt
are written together.

The counters (fields of `keys.intent_meta`): `REVISION_FIELD` rises on every write;
`RUNNABLE_FIELD` is how many of the seat's intents are runnable now; `WORK_FIELD` rises on
every write that leaves an intent runnable (a new or changed runnable intent). The work
controller's tick reads the last two (workers/stores/seat_runs.py `observe`): the seat has
durable work while an intent is runnable, and that work is new when `WORK_FIELD` rose since
the last turn that ended ok.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis

from workers.stores import keys
from workers.stores.scripts import script, text

REVISION_FIELD = "revision"
RUNNABLE_FIELD = "runnable"
WORK_FIELD = "workRevision"
RECEIPT_TTL_MS = 30 * 24 * 3_600_000  # a lost response is retried long before this
REQUEST_REUSED, STALE_REVISION, ISSUE_LINK = 1, 2, 3


@dataclass(frozen=True)
class Recorded:
    """A write recorded now (`replayed` False) or earlier (`replayed` True): its receipt."""

    receipt: dict[str, Any]
    replayed: bool


@dataclass(frozen=True)
class Conflict:
    """A write refused by what is stored: `kind` (REQUEST_REUSED, STALE_REVISION,
    ISSUE_LINK), the intent's current revision and its record (for REQUEST_REUSED, the
    receipt of the write that request id made)."""

    kind: int
    revision: int
    stored: dict[str, Any] | None


class Intents:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._record = script(client, "intent_record")

    def record(
        self,
        seat_id: str,
        *,
        intent_id: str,
        client_request_id: str,
        expected_revision: int,
        fingerprint: str,
        record: dict[str, Any],
        receipt: dict[str, Any],
        runnable: bool,
        runnable_state: str,
    ) -> Recorded | Conflict:
        """Write `record` as the intent's revision `expected_revision + 1`, once per request."""
        issue = record.get("issueNumber")
        reply = self._record(
            keys=[
                keys.intents(seat_id),
                keys.intent_meta(seat_id),
                keys.intent_request(seat_id, client_request_id),
                *keys.CONTROLLER_WAKE,
            ],
            args=[
                intent_id,
                expected_revision,
                fingerprint,
                _json(record),
                _json(receipt),
                "" if issue is None else str(issue),
                runnable_state,
                1 if runnable else 0,
                RECEIPT_TTL_MS,
                REVISION_FIELD,
                RUNNABLE_FIELD,
                WORK_FIELD,
                seat_id,
            ],
        )
        verb = text(reply[0])
        if verb == "recorded":
            return Recorded(receipt, False)
        if verb == "duplicate":
            return Recorded(json.loads(text(reply[1])), True)
        body = text(reply[3])
        return Conflict(int(reply[1]), int(reply[2]), json.loads(body) if body else None)

    def get(self, seat_id: str, intent_id: str) -> dict[str, Any] | None:
        """The seat's intent `intent_id` as last written; None when there is none."""
        body = self.r.hget(keys.intents(seat_id), intent_id)
        return None if body is None else dict(json.loads(text(body)))

    def all(self, seat_id: str) -> list[dict[str, Any]]:
        """Every intent of the seat, in no particular order."""
        return [json.loads(text(b)) for b in self.r.hvals(keys.intents(seat_id))]

    def counters(self, seat_id: str) -> tuple[int, int, int]:
        """The seat's (revision, runnable, work revision) counters."""
        values = self.r.hmget(
            keys.intent_meta(seat_id), [REVISION_FIELD, RUNNABLE_FIELD, WORK_FIELD]
        )
        rev, runnable, work = (0 if v is None else int(text(v)) for v in values)
        return rev, runnable, work


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
