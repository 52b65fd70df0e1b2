"""The engagement ledger's limits. Pure: rows and `now_ms` in, verdict out.

The limits and their order: docs/architecture.md, "Guardrails".

This function is the specification; the Redis path (one Lua script that checks and reserves
atomically) must agree with it on every ledger, which a differential property test proves.

Checks run in a fixed order and the first refusal wins:

    already_engaged      same dedupe key engaged within reengageAfterMs
    rate_limited_ask     maxAttemptsPerAsk asks under one dedupe key, ever
    rate_limited_target  perTargetPerDay engagements of one person, rolling 24 h, ALL seats
    rate_limited_work    perWorkPerDay engagements about one work item, rolling 24 h
    rate_limited_seat    perSeatPerHour engagements by one seat, rolling 1 h
    rate_limited_rooms   roomsPerDay new rooms by one seat, rolling 24 h (only for a new room)

Only rows that hold a place count (`LedgerRow.counts_at`): engaged, a live reservation, or a
send in flight. A row counts in a rolling window when ``at_ms > now_ms - window``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from contracts.guardrails import DAY_MS, HOUR_MS, GuardrailVerdict, LedgerRow, Limits

DEFAULT_LIMITS = Limits()


def _target_id(target: Any) -> str:
    if isinstance(target, BaseModel):
        return str(getattr(target, "member_id", ""))
    if isinstance(target, Mapping):
        return str(target.get("memberId") or target.get("member_id") or "")
    return str(target)


def dedupe_key_for(work_id: str, reason_code: str, targets: Iterable[Any]) -> str:
    """A short stable hash of the work id, the reason code and the SORTED target ids.

    Timeless on purpose: the re-engage window and the attempt cap are enforced against it.
    """
    ids = sorted(_target_id(t) for t in targets)
    material = "\x1f".join([str(work_id), str(reason_code), *ids])
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def _row(raw: LedgerRow | Mapping[str, Any]) -> LedgerRow:
    return raw if isinstance(raw, LedgerRow) else LedgerRow.model_validate(raw)


def _minutes(ms: int) -> str:
    return f"{ms / 60_000:.0f} min"


def _ago(ms: int) -> str:
    return "less than a minute ago" if ms < 30_000 else f"{_minutes(ms)} ago"


@dataclass(frozen=True, slots=True)
class Tally:
    """The counts the limits are judged on. The Redis script produces the same tally."""

    same_key: int
    last_same_at_ms: int | None
    per_target: dict[str, int]
    work: int
    seat: int
    rooms: int

    def counts(self) -> dict[str, Any]:
        return {
            "sameKey": self.same_key,
            "targets": dict(self.per_target),
            "work": self.work,
            "seat": self.seat,
            "rooms": self.rooms,
        }


def target_ids(targets: Iterable[Any]) -> list[str]:
    """Target member ids in their order, each once."""
    return list(dict.fromkeys(_target_id(t) for t in targets))


def tally(
    rows: Iterable[LedgerRow | Mapping[str, Any]],
    *,
    now_ms: int,
    dedupe_key: str,
    work_id: str,
    seat_id: str,
    targets: Sequence[Any],
) -> Tally:
    """Count the rows that hold a place at `now_ms`, per limit."""
    live = [r for r in map(_row, rows) if r.counts_at(now_ms)]
    day_ago, hour_ago = now_ms - DAY_MS, now_ms - HOUR_MS
    same_key = [r for r in live if r.dedupe_key == dedupe_key]
    return Tally(
        same_key=len(same_key),
        last_same_at_ms=max((r.at_ms for r in same_key), default=None),
        per_target={
            t: sum(
                1 for r in live if r.at_ms > day_ago and any(x.member_id == t for x in r.targets)
            )
            for t in target_ids(targets)
        },
        work=sum(1 for r in live if r.at_ms > day_ago and r.work_id == work_id),
        seat=sum(1 for r in live if r.at_ms > hour_ago and r.seat_id == seat_id),
        rooms=sum(1 for r in live if r.at_ms > day_ago and r.seat_id == seat_id and r.room_created),
    )


def judge(
    t: Tally,
    *,
    now_ms: int,
    work_id: str,
    seat_id: str,
    creates_room: bool,
    limits: Limits = DEFAULT_LIMITS,
) -> GuardrailVerdict:
    """Apply the limits in their fixed order to a tally; the first refusal wins."""
    counts = t.counts()
    attempt = t.same_key + 1

    def refuse(code: str, detail: str) -> GuardrailVerdict:
        return GuardrailVerdict(
            allowed=False, code=code, detail=detail, counts=counts, attempt=attempt
        )

    last = t.last_same_at_ms
    if last is not None and last > now_ms - limits.reengage_after_ms:
        return refuse(
            "already_engaged",
            f"this exact ask went out {_ago(now_ms - last)}; the re-engage window "
            f"is {_minutes(limits.reengage_after_ms)}",
        )
    if t.same_key >= limits.max_attempts_per_ask:
        return refuse(
            "rate_limited_ask",
            f"this ask has gone out {t.same_key} times; the cap is "
            f"{limits.max_attempts_per_ask}, and asking again will not make it land",
        )
    for member, n in t.per_target.items():
        if n >= limits.per_target_per_day:
            return refuse(
                "rate_limited_target",
                f"{member} has been engaged {n} times in 24 h by all seats together; "
                f"the limit is {limits.per_target_per_day}",
            )
    if t.work >= limits.per_work_per_day:
        return refuse(
            "rate_limited_work",
            f"work {work_id} has caused {t.work} engagements in 24 h; the limit is "
            f"{limits.per_work_per_day}",
        )
    if t.seat >= limits.per_seat_per_hour:
        return refuse(
            "rate_limited_seat",
            f"seat {seat_id} has engaged people {t.seat} times in the last hour; the limit is "
            f"{limits.per_seat_per_hour}",
        )
    if creates_room and t.rooms >= limits.rooms_per_day:
        return refuse(
            "rate_limited_rooms",
            f"seat {seat_id} has created {t.rooms} rooms in 24 h; the limit is "
            f"{limits.rooms_per_day}",
        )
    return GuardrailVerdict(
        allowed=True, code=None, detail="within every limit", counts=counts, attempt=attempt
    )


def check_guardrails(
    rows: Iterable[LedgerRow | Mapping[str, Any]],
    *,
    now_ms: int,
    dedupe_key: str,
    work_id: str,
    seat_id: str,
    targets: Sequence[Any],
    creates_room: bool,
    limits: Limits = DEFAULT_LIMITS,
) -> GuardrailVerdict:
    """Whether one more ask may go out now, and if not which limit refuses it, with numbers."""
    counted = tally(
        rows,
        now_ms=now_ms,
        dedupe_key=dedupe_key,
        work_id=work_id,
        seat_id=seat_id,
        targets=targets,
    )
    return judge(
        counted,
        now_ms=now_ms,
        work_id=work_id,
        seat_id=seat_id,
        creates_room=creates_room,
        limits=limits,
    )
