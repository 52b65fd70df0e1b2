"""A seat's inbox (DESIGN.md section 5, seed 002's get_updates): directed events held by
integer position until the seat acknowledges them.

A read returns the unacknowledged items oldest first, at most 50 items or 64 KB (at least one
item even if it alone is larger), with `has_more`; the same items come back until they are
acknowledged. Acknowledging a position acknowledges every item up to it; a position that was
never given is refused, because it would silently skip items not yet delivered.
"""

from __future__ import annotations

import redis

from contracts import InboxItem, UpdatesPage
from workers.stores import keys
from workers.stores.scripts import script, text

PAGE_ITEMS = 50
PAGE_BYTES = 64 * 1024


class AckBeyondLast(Exception):
    def __init__(self, position: int, last: int) -> None:
        super().__init__(f"position {position} was never given (the last is {last})")
        self.position = position
        self.last = last


class Inbox:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._ack = script(client, "inbox_ack")

    def updates(self, seat_id: str) -> UpdatesPage:
        """The unacknowledged items, oldest first, one page at a time."""
        meta = {text(k): int(v) for k, v in self.r.hgetall(keys.inbox_meta(seat_id)).items()}
        acked, last = meta.get("acked", 0), meta.get("last", 0)
        entries = (
            self.r.xrange(keys.inbox(seat_id), min=f"{acked + 1}-0", count=PAGE_ITEMS + 1) or []
        )
        items: list[InboxItem] = []
        size = 0
        for _entry_id, fields in entries[:PAGE_ITEMS]:
            if fields is None:  # only a deleted entry read through a group has no fields
                continue
            raw = fields[b"item"] if b"item" in fields else fields["item"]
            if items and size + len(raw) > PAGE_BYTES:
                break
            size += len(raw)
            items.append(InboxItem.model_validate_json(raw))
        position = items[-1].position if items else acked
        return UpdatesPage(
            items=tuple(items), position=position, acknowledged=acked, has_more=position < last
        )

    def ack(self, seat_id: str, position: int) -> UpdatesPage:
        """Acknowledge up to `position`; returns the next page."""
        verb, _acked, last = self._ack(
            keys=[keys.inbox(seat_id), keys.inbox_meta(seat_id)], args=[position]
        )
        if text(verb) == "beyond":
            raise AckBeyondLast(position, int(last))
        return self.updates(seat_id)
