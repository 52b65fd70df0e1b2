"""Messages between seats (issue 13): `send_message` and `read_thread`.

`send_message` checks the send against the rules (pipeline/messages.py: recipients, body,
client id), then sends it in one atomic step (workers/stores/messages.py): each recipient
gets a directed item in its inbox, read with `get_updates`, and a notice that makes the work
controller run it; the sender never gets its own message. A retry with the same
`client_message_id` and the same content answers the original receipt and sends nothing; the
same id with another recipient set, body or thread is a 409. A sender is held to one message
every 5 seconds and 60 an hour, and a 429 says when the next one is allowed. `read_thread`
pages a thread, oldest first, for any seat of the project; a message too large for a page on
its own comes cut and marked `truncated` (a body within the 2,000 characters fits a page
alone; the cap is kept for whatever a stored message holds, not by trusting that limit).
"""

from __future__ import annotations

import logging
from typing import Any

from contracts.tools import ReadThread, SendMessage
from pipeline import messages as rules
from workers.stores.messages import Page
from workers.tools.base import ToolContext, ToolError, tool

log = logging.getLogger(__name__)


def _unknown_thread(thread_id: str, field: str) -> ToolError:
    return ToolError(
        "unknown_thread",
        f"{field}: there is no message {thread_id!r}; pass the id of a message in the thread "
        "(a `messageId` or `threadId` send_message or read_thread returned), or leave "
        "thread_id out to start a new thread",
        field=field,
        status=404,
    )


@tool(
    "send_message",
    "Sends a message to the agents in `to` (1 to 20 agent ids from find_agents; your own id "
    "is skipped: your message never reaches your own inbox). Each gets it in get_updates. To "
    "reply, pass `thread_id` (any message of the thread) and name whom the reply is for. If "
    "you are not sure a call worked, call again with the same `client_message_id` (1 to 64 "
    "letters, digits, hyphens or underscores): you get the original receipt and nothing is "
    "sent twice; the same id with other content is refused. Limits: 2000 characters, one "
    "message every 5 seconds, 60 an hour; a refusal says when the next is allowed.",
)
def send_message(ctx: ToolContext, args: SendMessage) -> dict[str, Any]:
    sender = ctx.seat.member_id
    seat_ids = {s.member_id for s in ctx.container.org.current()[0].org.seats}
    out = rules.plan(
        sender=sender,
        to=args.to,
        body=args.body,
        thread_id=args.thread_id,
        client_message_id=args.client_message_id,
        seat_ids=seat_ids,
    )
    store = ctx.container.messages
    parent = None
    if args.thread_id is not None:
        parent = store.parent(args.thread_id)
    doc = rules.message_doc(
        message_id=out.message_id,
        thread_id=parent.thread_id if parent is not None else out.message_id,
        reply_to=args.thread_id,
        sender=sender,
        recipients=out.recipients,
        body=args.body,
        sent_at_ms=ctx.now_ms,
    )
    item = rules.inbox_item(doc, parent.author if parent is not None else None)
    sent = store.send(
        sender=sender,
        client_message_id=args.client_message_id,
        out=out,
        doc=doc,
        receipt=rules.receipt(doc, args.client_message_id, out.skipped),
        item_json=item.model_dump_json(by_alias=True),
        now_ms=ctx.now_ms,
    )
    if sent.verb == "unknown":
        raise _unknown_thread(args.thread_id or "", "thread_id")
    if sent.verb == "limited":
        raise rules.rate_refusal(ctx.now_ms, sent.interval_at_ms, sent.hourly_at_ms)
    assert sent.receipt is not None
    if sent.verb == "conflict":
        raise ToolError(
            "client_message_id_conflict",
            f"client_message_id: {args.client_message_id!r} was already used for another "
            "message (other recipients, body or thread_id); nothing was sent: make up a new "
            "id for a new message, or repeat the first send exactly to get its receipt",
            field="client_message_id",
            status=409,
            original=sent.receipt,
        )
    if sent.full:
        log.warning(
            "message %s from %s is not in the inbox of %s: full (ledger row inbox_full)",
            sent.receipt.get("messageId"),
            sender,
            ", ".join(sent.full),
        )
    return sent.receipt


@tool(
    "read_thread",
    "Returns a page of a thread, oldest first: up to 50 messages or 64 KB as you receive it "
    "(at least one; a message larger than that on its own comes alone and cut to fit, with "
    "`truncated` listing each cut field and its full length, and no call returns the rest), "
    "and a `next` cursor when there are more. `thread_id` is the id of any message in the "
    "thread. "
    "Use after_message_id (a message of the thread) to skip what you have read, without "
    "cursor; continue with `next`. Any agent of the project may read any thread; new "
    "deliveries still come through get_updates.",
)
def read_thread(ctx: ToolContext, args: ReadThread) -> dict[str, Any]:
    store = ctx.container.messages
    if args.cursor is not None and args.after_message_id is not None:
        raise ToolError(
            "cursor_with_after_message_id",
            "after_message_id: use it without cursor (to start after a message you know), "
            "then continue with only the `next` cursor",
            field="after_message_id",
            status=422,
        )
    parent = store.parent(args.thread_id)
    if parent is None:
        raise _unknown_thread(args.thread_id, "thread_id")
    thread_id = parent.thread_id
    after: int | None = None
    if args.cursor is not None:
        after = rules.decode_cursor(args.cursor, thread_id)
    elif args.after_message_id is not None:
        after = store.place(thread_id, args.after_message_id)
        if after is None:
            raise ToolError(
                "unknown_message",
                f"after_message_id: {args.after_message_id!r} is not a message of the thread "
                f"{thread_id}; pass the id of one of its messages, or leave it out to read "
                "from the start",
                field="after_message_id",
                status=404,
            )

    def result(page: Page) -> dict[str, Any]:
        nxt = (
            rules.encode_cursor(thread_id, page.last_score)
            if page.more and page.last_score is not None
            else None
        )
        return {"threadId": thread_id, "messages": list(page.messages), "next": nxt}

    # the page is fitted to its cap as this caller receives the whole result
    return result(store.page(thread_id, after, lambda page: ctx.measure(result(page))))
