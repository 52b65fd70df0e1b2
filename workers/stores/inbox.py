"""A seat's inbox (docs/architecture.md, "Directedness"; the tool `get_updates`): directed
events held by integer position until the seat acknowledges them.

A read returns the unacknowledged items oldest first, with `has_more`: at most 50 items, and at
most 64 KB as the reader receives the page (the whole page in its transport's encoding, which
the caller names; compact JSON, as the HTTP routes send it, by default), and at least one
item. An item larger than that on its own comes alone, its longest fields cut so that the
page fits and marked `truncated` (pipeline/paging.py `fit_alone`), at its own position: it is
acknowledged as any other, and the stored item stays whole. The same items come back until
they are acknowledged.
Acknowledging a position acknowledges every item up to it; a position that was never given
is refused, because it would silently skip items not yet delivered.

An inbox is bounded: it holds at most `InboxRoom.cap` unread items (SEATWIRE_INBOX_CAP). The
unread items are kept until acknowledged; one that finds the inbox full is not put in it, and
is written down instead (inbox_common.lua): a ledger row `inbox_full` naming its delivery, the
inbox's `overflowed` count, which the next read reports until the seat acknowledges, and the
deployment's `inboxOverflowed` count (the metric `seatwire_inbox_overflowed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import redis

from contracts import InboxItem, LedgerRow, UpdatesPage
from pipeline.paging import Measure, fit_alone, json_bytes, longest_fit
from workers.stores import keys
from workers.stores.journal import LEDGER_RETENTION_MS, LEDGER_STREAM_CAP
from workers.stores.scripts import script, text

PAGE_ITEMS = 50
PAGE_BYTES = 64 * 1024
INBOX_CAP = 5_000  # unread items per seat (SEATWIRE_INBOX_CAP)
INBOX_FULL = "inbox_full"  # the reason code of the ledger row of an item refused for it


@dataclass(frozen=True)
class InboxRoom:
    """The bound every script that puts items in inboxes applies (inbox_common.lua): the cap
    of unread items, and how the ledger row of an item refused for it is kept."""

    cap: int = INBOX_CAP
    ledger_retention_ms: int = LEDGER_RETENTION_MS
    ledger_cap: int = LEDGER_STREAM_CAP

    def args(self) -> list[int | str]:
        """The script arguments `inbox_room` reads, in its order."""
        return [self.cap, self.ledger_retention_ms, self.ledger_cap, self.row]

    @cached_property
    def row(self) -> str:
        """The ledger row of an item refused for the cap, with its time, seat and work id (the
        item's delivery id) for the script to fill in."""
        return LedgerRow(
            at_ms=0,
            seat_id="",
            work_id="",
            trigger="inbox",
            reason_code=INBOX_FULL,
            reason=f"the inbox held {self.cap} unread items (its cap): the item of this "
            "delivery was not put in it",
        ).model_dump_json(by_alias=True, exclude_defaults=True)

    KEYS = (keys.STATS, keys.LEDGER_SEATS)  # the keys `inbox_room` reads, in its order

    @staticmethod
    def seat_keys(seat_id: str, *, notices: bool = True) -> list[str]:
        """A seat's keys for `inbox_put`: its inbox, the inbox's meta, its counters (when the
        item counts as a notice) and its ledger stream."""
        counters = [keys.seat_state(seat_id)] if notices else []
        return [
            keys.inbox(seat_id),
            keys.inbox_meta(seat_id),
            *counters,
            keys.ledger_stream(seat_id),
        ]


class AckBeyondLast(Exception):
    def __init__(self, position: int, last: int) -> None:
        super().__init__(f"position {position} was never given (the last is {last})")
        self.position = position
        self.last = last


DEFAULT_ROOM = InboxRoom()


class Inbox:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._ack = script(client, "inbox_ack")

    def updates(self, seat_id: str, measure: Measure = json_bytes) -> UpdatesPage:
        """The unacknowledged items, oldest first, one page at a time: as many as fit
        PAGE_BYTES of `measure(page.to_wire())`, the page as its reader receives it; a first
        item over that alone comes cut to fit (`fit_alone`)."""
        meta = {text(k): int(v) for k, v in self.r.hgetall(keys.inbox_meta(seat_id)).items()}
        acked, last = meta.get("acked", 0), meta.get("last", 0)
        overflowed = meta.get("overflowed", 0) - meta.get("overflowSeen", 0)
        entries = (
            self.r.xrange(keys.inbox(seat_id), min=f"{acked + 1}-0", count=PAGE_ITEMS + 1) or []
        )
        items: list[InboxItem] = []
        for _entry_id, fields in entries[:PAGE_ITEMS]:
            if fields is None:  # only a deleted entry read through a group has no fields
                continue
            raw = fields[b"item"] if b"item" in fields else fields["item"]
            items.append(InboxItem.model_validate_json(raw))

        def page(n: int) -> UpdatesPage:
            position = items[n - 1].position if n else acked
            return UpdatesPage(
                items=tuple(items[:n]),
                position=position,
                acknowledged=acked,
                has_more=position < last,
                overflowed=overflowed,
            )

        n = longest_fit(len(items), lambda n: measure(page(n).to_wire()), PAGE_BYTES)
        if n != 1:
            return page(n)
        alone = page(1)
        wire = alone.to_wire()
        item, cut = fit_alone(
            wire["items"][0], lambda one: measure({**wire, "items": [one]}), PAGE_BYTES
        )
        if cut is None:
            return alone
        return alone.model_copy(update={"items": (InboxItem.model_validate(item),)})

    def overflowed(self) -> int | None:
        """How many items every seat's inbox has refused for being full (None when Redis does
        not answer: a metric read, not a decision)."""
        try:
            value = self.r.hget(keys.STATS, "inboxOverflowed")
        except redis.RedisError:
            return None
        return int(value or 0)

    def ack(self, seat_id: str, position: int, measure: Measure = json_bytes) -> UpdatesPage:
        """Acknowledge up to `position`; returns the next page (sized by `measure`, as
        `updates`)."""
        verb, _acked, last = self._ack(
            keys=[keys.inbox(seat_id), keys.inbox_meta(seat_id), *keys.CONTROLLER_WAKE],
            args=[position, seat_id],
        )
        if text(verb) == "beyond":
            raise AckBeyondLast(position, int(last))
        return self.updates(seat_id, measure)
