"""The seats' messages in Redis (issue 13): `send_message` and `read_thread`.

One send is one script (workers/stores/lua/message_send.lua): the sender's request record
for its `client_message_id`, its rate, the message, its place in its thread and a directed
item in every recipient's inbox (with the recipient's `notices`, which the work controller
reads) land together or not at all, and a retry of the same send finds the request record
and writes nothing. Messages are kept `MESSAGE_RETENTION_MS` (SEATWIRE_MESSAGE_RETENTION_MS,
90 days) from when they were sent, with their request records; a thread lasts as long as its
newest message, and its places older than that go as a message is added (a read skips any
place whose message has gone in between). A reply to a message that has gone is refused as
unknown. The 60-an-hour limit bounds how fast they grow within the retention.

    msg:{id}              hash: doc (the message's JSON), threadId
    thread:{id}           zset: message id -> its place (creation order, strictly rising)
    msgreq:{seat}:{cid}   hash: fingerprint, doc (the receipt)
    msgrate:{seat}        zset: message id -> when it was sent (the last hour's)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis

from pipeline import messages as rules
from pipeline.paging import fit_alone, longest_fit
from workers.stores import keys
from workers.stores.inbox import DEFAULT_ROOM, InboxRoom
from workers.stores.scripts import script, text


@dataclass(frozen=True)
class Sent:
    """The outcome of a send: `verb` is ok (sent now), duplicate (sent before: the original
    receipt), conflict (the id was used for another send: its receipt), unknown (the message
    replied to does not exist) or limited (`interval_at_ms` / `hourly_at_ms`: when the limit
    that binds lets the next one through; 0 when it does not bind). `full` names the
    recipients of a send made now whose inbox was full (workers/stores/inbox.py): the
    message is in its thread, not in their inboxes, and their ledgers have the row."""

    verb: str
    receipt: dict[str, Any] | None = None
    interval_at_ms: int = 0
    hourly_at_ms: int = 0
    full: tuple[str, ...] = ()


@dataclass(frozen=True)
class Parent:
    """The message a reply answers: its thread and its author."""

    thread_id: str
    author: str


@dataclass(frozen=True)
class Page:
    messages: tuple[dict[str, Any], ...]
    last_score: int | None  # the place of the page's last message
    more: bool


MESSAGE_RETENTION_MS = 90 * 86_400_000


class Messages:
    def __init__(
        self,
        client: redis.Redis,
        *,
        room: InboxRoom = DEFAULT_ROOM,
        retention_ms: int = MESSAGE_RETENTION_MS,
    ) -> None:
        self.r = client
        self.room = room
        self.retention_ms = retention_ms
        self._send = script(client, "message_send")

    def parent(self, message_id: str) -> Parent | None:
        """The thread and author of a message (both fixed once it exists); None if unknown."""
        thread_id, doc = self.r.hmget(keys.message(message_id), ["threadId", "doc"])
        if thread_id is None or doc is None:
            return None
        return Parent(text(thread_id), str(json.loads(doc)["from"]))

    def send(
        self,
        *,
        sender: str,
        client_message_id: str,
        out: rules.Outgoing,
        doc: dict[str, Any],
        receipt: dict[str, Any],
        item_json: str,
        now_ms: int,
    ) -> Sent:
        reply_to = doc["replyTo"] or ""
        message_key = keys.message(out.message_id)
        inbox_keys = [k for seat in out.recipients for k in InboxRoom.seat_keys(seat)]
        reply = self._send(
            keys=[
                keys.message_request(sender, client_message_id),
                message_key,
                keys.thread(doc["threadId"]),
                keys.message_rate(sender),
                keys.message(reply_to) if reply_to else message_key,
                *InboxRoom.KEYS,
                *inbox_keys,
                *keys.CONTROLLER_WAKE,
            ],
            args=[
                now_ms,
                out.fingerprint,
                rules.dumps(receipt),
                rules.dumps(doc),
                item_json,
                doc["threadId"],
                out.message_id,
                reply_to,
                rules.MIN_INTERVAL_MS,
                rules.HOURLY_LIMIT,
                rules.HOUR_MS,
                len(out.recipients),
                *self.room.args(),
                self.retention_ms,
                *out.recipients,
            ],
        )
        verb = text(reply[0])
        if verb == "limited":
            return Sent(verb, interval_at_ms=int(reply[1]), hourly_at_ms=int(reply[2]))
        if verb == "unknown":
            return Sent(verb)
        return Sent(verb, receipt=json.loads(reply[1]), full=tuple(text(s) for s in reply[2:]))

    def place(self, thread_id: str, message_id: str) -> int | None:
        """Where a message sits in a thread; None when it is not one of the thread's."""
        score = self.r.zscore(keys.thread(thread_id), message_id)
        return None if score is None else int(score)

    def page(self, thread_id: str, after: int | None, size: Callable[[Page], int]) -> Page:
        """The thread's messages after place `after` (from the start when None), oldest
        first, one page: at most 50 messages, and as many as fit 64 KB of `size(page)` (the
        page as its reader receives it), at least one; a first message over that alone comes
        cut to fit, marked `truncated` (pipeline/paging.py `fit_alone`), and stays whole
        where it is stored."""
        low = "-inf" if after is None else f"({after}"
        found = cast(
            Sequence[tuple[bytes, float]],
            self.r.zrangebyscore(
                keys.thread(thread_id),
                low,
                "+inf",
                start=0,
                num=rules.PAGE_MESSAGES + 1,
                withscores=True,
            ),
        )
        if not found:
            return Page((), None, False)
        pipe = self.r.pipeline(transaction=False)
        for member, _score in found[: rules.PAGE_MESSAGES]:
            pipe.hget(keys.message(text(member)), "doc")
        # a place whose message outlived its retention since the thread's last add is skipped
        kept = [
            (doc, int(score))
            for (_member, score), doc in zip(found, pipe.execute(), strict=False)
            if doc is not None
        ]
        if not kept:
            return Page((), None, False)
        messages = tuple(json.loads(doc) for doc, _ in kept)

        def page(n: int) -> Page:
            return Page(messages[:n], kept[n - 1][1], len(found) > n)

        n = longest_fit(len(kept), lambda n: size(page(n)), rules.PAGE_BYTES)
        if n != 1:
            return page(n)
        alone = page(1)
        message, _cut = fit_alone(
            messages[0],
            lambda one: size(Page((one,), alone.last_score, alone.more)),
            rules.PAGE_BYTES,
        )
        return Page((message,), alone.last_score, alone.more)
