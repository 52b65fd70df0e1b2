"""A seat's work intents (issue 13, `record_work_intent` / `list_work_intents`):
the rules a write must pass before it reaches Redis, the record and receipt it writes, and
the order and cursor of a listing. Pure: the seat, the time and the run id arrive as
arguments.

An intent is a seat's own durable recovery checkpoint: an id, a revision (1 on create, one
more per write, compare-and-set on `expected_revision`), a state, a concrete next step, an
optional Issue link fixed at creation, and a blocker exactly when it is `blocked`. Neither
the next step nor the blocker may hold a credential (the send gate's patterns,
`pipeline/send_gate.py`). A `runnable` intent is the seat's durable work: the work
controller runs the seat for it (`news.work`, reason `durable`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contracts.tools import RecordWorkIntent
from pipeline.cursors import digest, pack, unpack
from pipeline.send_gate import find_credentials

RUNNABLE = "runnable"
PENDING = frozenset({"runnable", "waiting", "blocked"})
COMPLETED = frozenset({"done", "cancelled"})
PAGE = 20


@dataclass(frozen=True)
class Refused:
    """A write refused before anything is written: the field, a stable code, the fix."""

    field: str
    code: str
    message: str


def refusal(args: RecordWorkIntent) -> Refused | None:
    """Why this write cannot be recorded as given, or None: a blocked intent names its
    blocker and only a blocked one has one; no credential in the next step or the blocker."""
    if args.state == "blocked" and args.blocker is None:
        return Refused(
            "blocker",
            "blocker_required",
            "blocker: a blocked intent says what blocks it; give `blocker` (1-500 characters) "
            "or choose another state",
        )
    if args.state != "blocked" and args.blocker is not None:
        return Refused(
            "blocker",
            "blocker_not_blocked",
            f"blocker: only a blocked intent has a blocker, and this one is {args.state}; "
            "drop `blocker` or set state `blocked`",
        )
    for name, text in (("next_step", args.next_step), ("blocker", args.blocker)):
        hits = find_credentials(text or "")
        if hits:
            found = "; ".join(f"{h.kind} ({h.shown}) at offset {h.at}" for h in hits[:3])
            return Refused(
                name,
                "credentials_refused",
                f"{name}: holds {len(hits)} credential{'s' if len(hits) != 1 else ''} "
                f"({found}); an intent is stored and shown again, so it never holds a secret: "
                "describe the step without it. Nothing was written",
            )
    return None


def fingerprint(args: RecordWorkIntent) -> str:
    """The write's input, as the 64 hex digits that tell a replay from a different write
    under the same `client_request_id`."""
    return digest(args.model_dump(mode="json"))


def record_of(args: RecordWorkIntent, *, run_id: str | None, now_ms: int) -> dict[str, Any]:
    """The intent as this write leaves it (its revision one more than the expected one)."""
    return {
        "intentId": args.intent_id,
        "revision": args.expected_revision + 1,
        "state": args.state,
        "nextStep": args.next_step,
        "issueNumber": args.issue_number,
        "blocker": args.blocker,
        "recordedRunId": run_id,
        "recordedAt": now_ms,
    }


def receipt_of(args: RecordWorkIntent, record: Mapping[str, Any]) -> dict[str, Any]:
    """What the write answers (and a replay of it answers again, whatever changed since)."""
    return {
        "intent": dict(record),
        "clientRequestId": args.client_request_id,
        "created": args.expected_revision == 0,
        "note": "a recovery checkpoint: it authorizes no project action and claims no Issue",
    }


def listed(
    records: Iterable[Mapping[str, Any]], *, include_completed: bool, after: str | None
) -> tuple[list[Mapping[str, Any]], bool]:
    """One page of the seat's intents, by intent id: pending ones (all, with
    `include_completed`) after the cursor's id; and whether there is more."""
    states = PENDING | COMPLETED if include_completed else PENDING
    chosen = sorted(
        (r for r in records if r.get("state") in states), key=lambda r: str(r["intentId"])
    )
    if after is not None:
        chosen = [r for r in chosen if str(r["intentId"]) > after]
    return chosen[:PAGE], len(chosen) > PAGE


def cursor_of(seat_id: str, include_completed: bool, last_id: str) -> str:
    """An opaque cursor, scoped to the seat and to whether completed intents are listed."""
    return pack([seat_id, include_completed, last_id])


def cursor_after(cursor: str, seat_id: str, include_completed: bool) -> str | None:
    """The intent id a cursor resumes after; None when it is not this listing's cursor."""
    parts = unpack(cursor)
    if not isinstance(parts, list) or len(parts) != 3:
        return None
    seat, completed, last = parts
    if seat != seat_id or completed is not include_completed or not isinstance(last, str):
        return None
    return last


def page_of(
    seat_id: str,
    records: Sequence[Mapping[str, Any]],
    *,
    include_completed: bool,
    after: str | None,
) -> dict[str, Any]:
    """The listing's answer: the page and the `next` cursor (None on the last page)."""
    page, more = listed(records, include_completed=include_completed, after=after)
    nxt = cursor_of(seat_id, include_completed, str(page[-1]["intentId"])) if more else None
    return {
        "intents": [dict(r) for r in page],
        "next": nxt,
        "note": "your own reports, not verified Issue progress; an old recordedRunId is "
        "history: reconcile GitHub and local state before acting",
    }
