"""The project's own state and its project-wide items (issue 13, in `get_updates`):
start, pause, resume and announcements, each put in front of every seat at once.

The flags live in `keys.PROJECT` (`started`, `paused`); they are what `get_project` shows and
what the work controller reads as `news.project`. Each change, and each announcement, is an
item in every seat's inbox, written with the flag in one script (`project_notify.lua`), so a
seat never sees the project paused without the item that says so. Project items are not
directed events: they do not count as the seat's notices, and an inbox holding only them is
project-only news (the controller's announcement jitter spreads the seats' turns).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import redis

from contracts import Candidate, InboxItem, MessagePart
from workers.stores import keys
from workers.stores.inbox import DEFAULT_ROOM, InboxRoom
from workers.stores.scripts import script
from workers.stores.scripts import text as as_text

ProjectEvent = Literal["start", "pause", "resume", "announcement", "card"]
SOURCE = "seatwire"
SURFACE = "project"
FLAGS: dict[ProjectEvent, tuple[str, str]] = {
    "start": ("started", "1"),
    "pause": ("paused", "1"),
    "resume": ("paused", "0"),
}
WORDS: dict[ProjectEvent, str] = {
    "start": "The project has started.",
    "pause": "The project is paused: hold new work until it resumes.",
    "resume": "The project has resumed.",
}


@dataclass(frozen=True)
class Notified:
    """A project item and the seats whose inbox was full (workers/stores/inbox.py): it is not
    in theirs, and their ledgers have the row."""

    item: InboxItem
    full: tuple[str, ...] = ()


class ProjectStore:
    def __init__(self, client: redis.Redis, *, room: InboxRoom = DEFAULT_ROOM) -> None:
        self.r = client
        self.room = room
        self._notify = script(client, "project_notify")

    def notify(
        self,
        event: ProjectEvent,
        seat_ids: Sequence[str],
        *,
        by: str,
        now_ms: int,
        body: str | None = None,
        card: str | None = None,
    ) -> Notified:
        """Set the flag `event` changes (if any) and put its item in every seat's inbox. A
        `card` event carries the card's fingerprint and is announced once per fingerprint."""
        text = body if event in ("announcement", "card") and body else WORDS.get(event, "")
        delivery = (
            "project:"
            + hashlib.sha256(f"{event}\x1f{by}\x1f{now_ms}\x1f{text}".encode()).hexdigest()[:24]
        )
        item = InboxItem(
            position=1,
            delivery_id=delivery,
            family="messaging",
            source=SOURCE,
            surface=SURFACE,
            reason=f"project_{event}",
            why=f"a project-wide {event} by {by}",
            at_ms=now_ms,
            candidate=Candidate(
                family="messaging",
                source=SOURCE,
                delivery_id=delivery,
                msg=MessagePart(author_id=by, body=text),
                at_ms=now_ms,
            ),
        )
        template = item.model_dump_json(by_alias=True).replace('"position":1', '"position":0', 1)
        field, value = ("card", card or "") if event == "card" else FLAGS.get(event, ("", ""))
        seat_keys = [k for s in seat_ids for k in InboxRoom.seat_keys(s, notices=False)]
        once = "1" if event == "card" else "0"
        full = self._notify(
            keys=[keys.PROJECT, *InboxRoom.KEYS, *seat_keys, *keys.CONTROLLER_WAKE],
            args=[field, value, template, len(seat_ids), once, *self.room.args(), *seat_ids],
        )
        return Notified(item, tuple(as_text(s) for s in full))

    def card(self) -> str | None:
        """The fingerprint of the project card last announced (None: none yet)."""
        found = self.r.hget(keys.PROJECT, "card")
        return None if found is None else as_text(found)

    def card_changed(self, seat_ids: Sequence[str], *, card: str, name: str, now_ms: int) -> None:
        """Announce a new project card (its fingerprint `card`) to every seat, once; the first
        card ever seen is recorded without an announcement (a new deployment is no change)."""
        if self.r.hget(keys.PROJECT, "card") is None:
            self.notify("card", [], by="seatwire", now_ms=now_ms, card=card)
            return
        words = f"The project card changed{': ' + name if name else ''}: read it with get_project."
        self.notify("card", seat_ids, by="seatwire", now_ms=now_ms, body=words, card=card)
