"""Every Redis key Seatwire writes, in one place (arq's habit). Nothing else builds key names.

Seatwire needs ONE Redis primary (not a cluster): the guardrail script touches keys it
discovers while running (expired reservations), which a cluster would refuse.
"""

from __future__ import annotations

PREFIX = "sw:"

JOURNAL_OPEN = f"{PREFIX}j:open"  # zset trackingId -> deadline ms, every non-final entry
JOURNAL_FAILED = f"{PREFIX}j:failed"  # zset trackingId -> ms, entries a stage gave up on
LEDGER_SEATS = f"{PREFIX}ledger:seats"  # set of seat ids that have a ledger stream
PENDING = f"{PREFIX}g:pending"  # zset opId -> reservation expiry ms
OP_PREFIX = f"{PREFIX}g:op:"


def journal(tracking_id: str) -> str:
    return f"{PREFIX}j:{tracking_id}"


def ledger_stream(seat_id: str) -> str:
    return f"{PREFIX}ledger:{seat_id}"


def op(op_id: str) -> str:
    return f"{OP_PREFIX}{op_id}"


def by_dedupe_key(dedupe_key: str) -> str:
    return f"{PREFIX}g:dk:{dedupe_key}"


def by_target(member_id: str) -> str:
    return f"{PREFIX}g:target:{member_id}"


def by_work(work_id: str) -> str:
    return f"{PREFIX}g:work:{work_id}"


def by_seat(seat_id: str) -> str:
    return f"{PREFIX}g:seat:{seat_id}"


def rooms_of(seat_id: str) -> str:
    return f"{PREFIX}g:rooms:{seat_id}"


def inbox(seat_id: str) -> str:
    """A seat's inbox: a stream whose entry ids are the items' positions (`{position}-0`)."""
    return f"{PREFIX}inbox:{seat_id}"


def inbox_meta(seat_id: str) -> str:
    """A seat's inbox counters: `last` (highest position given) and `acked`."""
    return f"{PREFIX}inbox:{seat_id}:meta"


def inbox_seen(seat_id: str, delivery_id: str) -> str:
    """Marks that one delivery already has its place in a seat's inbox (idempotent append)."""
    return f"{PREFIX}inbox:{seat_id}:seen:{delivery_id}"
