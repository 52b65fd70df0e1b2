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


def seat_verdicts(tracking_id: str) -> str:
    """An inbound event's verdict per seat (hash seatId -> SeatVerdict JSON): its audit rows."""
    return f"{PREFIX}j:{tracking_id}:seats"


def seat_state(seat_id: str) -> str:
    """A seat's counters: `notices` (directed events ever put in its inbox)."""
    return f"{PREFIX}seat:{seat_id}"


def spoke_in(channel_id: str, root_id: str) -> str:
    """Seats that have spoken in one thread (set of seat ids)."""
    return f"{PREFIX}f:spoke:{channel_id}:{root_id}"


def named_in(channel_id: str, root_id: str) -> str:
    """Seats that have been named or mentioned in one thread (set of seat ids)."""
    return f"{PREFIX}f:named:{channel_id}:{root_id}"


def channel_seats(channel_id: str) -> str:
    """Seats learned to belong to a channel: they sent there, or a DM was delivered to them."""
    return f"{PREFIX}f:chan:{channel_id}"


def item_seats(item_id: str) -> str:
    """Seats a board item belongs to (assigned to them)."""
    return f"{PREFIX}f:item:{item_id}"
