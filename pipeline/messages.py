"""The rules of the seats' messages (issue 13, the tools `send_message` and `read_thread`).
Pure: no I/O, no clock; the store (workers/stores/messages.py) and the tools
(workers/tools/messages.py) apply them.

A send names 1 to 20 seats of the org by member id (a duplicate counts once; the sender
itself is skipped, never delivered to, and a send to nobody else is refused), a body of 1 to
2,000 characters, and a `client_message_id` of 1 to 64 letters, digits, hyphens or
underscores. The message's id is derived from (sender, client_message_id), so a retry is the
same message; the request's fingerprint (recipients as a set, body, thread) tells a replay
from a conflicting reuse of the id. A thread is named by any of its messages; its id is the id
of its first message. A page of a thread is at most 50 messages or 64 KB as its reader
receives it (at least one message; one over that alone comes cut to fit and marked, as
pipeline/paging.py `fit_alone` says), continued by an opaque cursor.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts import Candidate, InboxItem
from contracts.inbound import CandidateIds, MessagePart
from contracts.tools import ToolError
from pipeline.cursors import digest, pack, unpack
from pipeline.send_gate import find_credentials

MAX_RECIPIENTS = 20
MAX_BODY = 2000
MIN_INTERVAL_MS = 5_000  # one message every 5 s per sending seat ...
HOURLY_LIMIT = 60  # ... and 60 in any hour
HOUR_MS = 3_600_000
PAGE_MESSAGES = 50
PAGE_BYTES = 64 * 1024
PROJECT = "project"  # `to: ["project"]`: the whole project (agents of admins only)
SOURCE = "seatwire"  # the inbox item's source: a message between seats
SURFACE = "seat_message"
CLIENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


# A refusal of these rules is the tools' own error, 422 unless said otherwise.
Refused = ToolError


def refused(code: str, message: str, *, field: str, status: int = 422, **extra: Any) -> ToolError:
    """A refusal naming its field (422 by default)."""
    return ToolError(code, message, field=field, status=status, **extra)


@dataclass(frozen=True)
class Outgoing:
    """A send the rules allow: who gets it, its id and its fingerprint."""

    message_id: str
    recipients: tuple[str, ...]  # in the order named, without duplicates or the sender
    fingerprint: str
    skipped: tuple[str, ...] = field(default=())  # the sender, when it named itself


def message_id(sender: str, client_message_id: str) -> str:
    """Deterministic: a retry of one send is the same message, whoever runs it."""
    hashed = hashlib.sha256(json.dumps([sender, client_message_id]).encode()).hexdigest()
    return f"msg-{hashed[:32]}"


def fingerprint(recipients: Iterable[str], body: str, thread_id: str | None) -> str:
    """What a reuse of a `client_message_id` must repeat: the recipients (as a set), the body
    and the thread it replies in."""
    return digest([sorted(set(recipients)), body, thread_id])


def check_client_message_id(value: str) -> None:
    if CLIENT_ID.fullmatch(value) is None:
        raise refused(
            "invalid_client_message_id",
            "client_message_id: use 1 to 64 letters, digits, hyphens or underscores "
            f"(got {len(value)} characters{_first_bad(value)}); make one up per message and "
            "reuse it only to retry that message",
            field="client_message_id",
        )


def _first_bad(value: str) -> str:
    bad = next((c for c in value if not (c.isascii() and (c.isalnum() or c in "_-"))), None)
    return f", {bad!r} is not allowed" if bad is not None else ""


def check_body(body: str) -> None:
    if not body.strip():
        raise refused(
            "empty_body", "body: the message is empty; write 1 to 2000 characters", field="body"
        )
    if len(body) > MAX_BODY:
        raise refused(
            "body_too_long",
            f"body: {len(body)} characters is more than {MAX_BODY}; shorten it or split it "
            "into several messages (one every 5 seconds)",
            field="body",
            limit=MAX_BODY,
            length=len(body),
        )
    hits = find_credentials(body)
    if hits:
        listed = "; ".join(f"{h.kind} ({h.shown})" for h in hits[:3])
        raise refused(
            "credential_in_body",
            f"body: it holds a credential ({listed}); a secret sent to other agents is "
            "leaked, so nothing was sent: remove it and send again",
            field="body",
        )


def check_recipients(to: Sequence[str], sender: str, seat_ids: Collection[str]) -> Outgoing:
    """The recipients of a send by `sender` among the org's `seat_ids`; message_id and
    fingerprint are filled in by `plan`."""
    if not to:
        raise refused(
            "no_recipients",
            "to: name 1 to 20 agent ids (from find_agents)",
            field="to",
        )
    if len(to) > MAX_RECIPIENTS:
        raise refused(
            "too_many_recipients",
            f"to: {len(to)} agent ids is more than {MAX_RECIPIENTS}; send to at most "
            f"{MAX_RECIPIENTS} (split the list, or start a thread and reply to the rest)",
            field="to",
            limit=MAX_RECIPIENTS,
        )
    if PROJECT in to and PROJECT not in seat_ids:
        raise refused(
            "project_send_not_allowed",
            'to: ["project"] sends to the whole project only for agents of admins, and the '
            "org file names no admins; name the agents (their ids from find_agents), at most "
            f"{MAX_RECIPIENTS} a message",
            field="to",
            status=403,
        )
    unknown = sorted({t for t in to if t not in seat_ids})
    if unknown:
        raise refused(
            "unknown_recipient",
            f"to: {', '.join(repr(u) for u in unknown)} {'is' if len(unknown) == 1 else 'are'}"
            " not an agent of this project; use the ids find_agents returns",
            field="to",
            unknown=unknown,
        )
    seen: dict[str, None] = {}
    for t in to:
        if t != sender:
            seen.setdefault(t)
    if not seen:
        raise refused(
            "only_yourself",
            "to: you named only yourself, and your own message is never delivered to you; "
            "name the agents it is for",
            field="to",
        )
    skipped = (sender,) if sender in to else ()
    return Outgoing(message_id="", recipients=tuple(seen), fingerprint="", skipped=skipped)


def plan(
    *,
    sender: str,
    to: Sequence[str],
    body: str,
    thread_id: str | None,
    client_message_id: str,
    seat_ids: Collection[str],
) -> Outgoing:
    """Every rule of a send that needs no stored state, in the order a caller fixes them."""
    check_client_message_id(client_message_id)
    check_body(body)
    out = check_recipients(to, sender, seat_ids)
    return Outgoing(
        message_id=message_id(sender, client_message_id),
        recipients=out.recipients,
        fingerprint=fingerprint(to, body, thread_id),
        skipped=out.skipped,
    )


def message_doc(
    *,
    message_id: str,
    thread_id: str,
    reply_to: str | None,
    sender: str,
    recipients: Sequence[str],
    body: str,
    sent_at_ms: int,
) -> dict[str, Any]:
    """A message as `read_thread` returns it."""
    return {
        "id": message_id,
        "threadId": thread_id,
        "replyTo": reply_to,
        "from": sender,
        "to": list(recipients),
        "body": body,
        "sentAtMs": sent_at_ms,
    }


def receipt(doc: dict[str, Any], client_message_id: str, skipped: Sequence[str]) -> dict[str, Any]:
    """What `send_message` answers, and answers again for a replay of the same send."""
    return {
        "messageId": doc["id"],
        "threadId": doc["threadId"],
        "replyTo": doc["replyTo"],
        "to": doc["to"],
        "skipped": list(skipped),
        "clientMessageId": client_message_id,
        "sentAtMs": doc["sentAtMs"],
    }


def dumps(value: Any) -> str:
    """Compact JSON, UTF-8 kept (a page's 64 KB are these bytes)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def inbox_item(doc: dict[str, Any], parent_author: str | None) -> InboxItem:
    """The directed item each recipient's inbox gets (position 0, for the store to fill in)."""
    recipients = tuple(doc["to"])
    candidate = Candidate(
        family="messaging",
        source=SOURCE,
        delivery_id=doc["id"],
        ids=CandidateIds(
            channel_id="seatwire:messages",
            message_id=doc["id"],
            thread_root_id=doc["threadId"],
        ),
        msg=MessagePart(
            author_id=doc["from"],
            body=doc["body"],
            mentions=recipients,
            channel_kind="DM" if len(recipients) == 1 else "GROUP_DM",
            parent_author_id=parent_author,
            audience_ids=recipients,
        ),
        at_ms=doc["sentAtMs"],
    )
    how = "a reply in a thread" if doc["replyTo"] else "a message"
    return InboxItem.model_construct(
        position=0,
        delivery_id=doc["id"],
        family="messaging",
        source=SOURCE,
        surface=SURFACE,
        reason="addressed",
        why=f"{how} from {doc['from']} (send_message) that names you in `to`; read the "
        f"thread with read_thread thread_id={doc['threadId']}",
        at_ms=doc["sentAtMs"],
        candidate=candidate,
    )


def rate_refusal(now_ms: int, interval_at_ms: int, hourly_at_ms: int) -> ToolError:
    """The 429 for a send the rate limits hold back: when the next one is allowed."""
    next_at = max(interval_at_ms, hourly_at_ms, now_ms)
    if hourly_at_ms >= interval_at_ms:
        why = f"you sent {HOURLY_LIMIT} messages in the last hour"
    else:
        why = "you sent a message less than 5 seconds ago"
    return refused(
        "rate_limited",
        f"{why}; nothing was sent: send again (with the same client_message_id) at "
        f"{next_at} (Unix ms), in {next_at - now_ms} ms",
        field="client_message_id",
        status=429,
        retryAfterMs=next_at - now_ms,
        nextAllowedAtMs=next_at,
        limits={"minIntervalMs": MIN_INTERVAL_MS, "perHour": HOURLY_LIMIT},
    )


# ------------------------------------------------------------------ reading a thread


def encode_cursor(thread_id: str, score: int) -> str:
    return pack([thread_id, score])


def decode_cursor(cursor: str, thread_id: str) -> int:
    """The position a cursor continues after, in the thread `thread_id`."""
    data = unpack(cursor)
    got_thread, score = data if isinstance(data, list) and len(data) == 2 else (None, None)
    if not (isinstance(got_thread, str) and type(score) is int):
        raise refused(
            "invalid_cursor",
            "cursor: not a cursor read_thread gave; pass the `next` of the previous page",
            field="cursor",
        )
    if got_thread != thread_id:
        raise refused(
            "invalid_cursor",
            "cursor: it continues another thread; pass the `next` of this thread's last page",
            field="cursor",
        )
    return int(score)
