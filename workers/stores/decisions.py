"""The project's directions in Redis (issue 13): `open_decision`, `vote`, `get_decision`,
`list_decisions`, `decide_direction`, and the people's votes over HTTP.

    dir:{id}                hash: doc (the fixed part, with the frozen policy), fingerprint and
                            receipt (of the open), deadlineMs, rev, result (once recorded),
                            vote:{member} (each member's vote JSON, with its own revision)
    dir:{id}:log            stream: the direction's audit log, one `event` JSON per change
    dir:index               zset: every direction id, score 0 (id order)
    dirreq:{actor}:{rid}    string: the request's fingerprint (64 hex), then its receipt

Each write is one script, all or nothing, with the actor's receipt for its
`client_request_id` (a replay answers the original receipt, another input under the same id
is a conflict): `direction_open` (the direction, its index entry, its first log line and a
directed item in every other seat's inbox with the seat's notices), `direction_vote` (the
deadline, the compare-and-set on the voter's own vote revision), `direction_end` (the
deadline moved to now) and `direction_settle` (the result, on a compare-and-set of the
direction's revision: the closure, recorded once by whoever reads or writes first after the
deadline, and the resolver's decisions). Every change bumps `rev` and adds a log line.
Directions are the project's record: they do not expire; receipts are kept `RECEIPT_TTL_MS`
(an open's receipt is also kept on the direction itself).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import redis

from workers.stores import keys
from workers.stores.inbox import DEFAULT_ROOM, InboxRoom
from workers.stores.scripts import script, text

RECEIPT_TTL_MS = 30 * 24 * 3_600_000
VOTE_PREFIX = "vote:"


def log_key(direction_id: str) -> str:
    """The direction's audit log (a stream next to its hash)."""
    return keys.direction_log(direction_id)


@dataclass(frozen=True)
class Snapshot:
    """A direction as stored: its fixed part, current deadline, revision, recorded result
    (None while there is none) and every member's vote by member id."""

    doc: dict[str, Any]
    deadline_ms: int
    revision: int
    result: dict[str, Any] | None
    votes: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Written:
    """A script's answer: `verb` (recorded, duplicate, conflict, missing, closed, stale) and
    what came with it."""

    verb: str
    receipt: dict[str, Any] | None = None
    revision: int = 0
    deadline_ms: int = 0
    recorded: bool = False  # closed: a result is recorded
    current: dict[str, Any] | None = None  # stale vote: the member's current vote
    result: dict[str, Any] | None = None  # closed settle: the recorded result


def _receipt_reply(verb: str, reply: Sequence[Any]) -> Written:
    return Written(verb, receipt=json.loads(text(reply[1])))


@dataclass(frozen=True)
class Post:
    """A direction's post to the project's channel, journalled as it opens."""

    tracking_id: str
    seat_id: str
    payload: str  # the entry's WorkEnvelope JSON
    decision: str  # its EngagementDecision JSON
    now_ms: int
    deadline_ms: int  # the entry's journal deadline


class Decisions:
    def __init__(self, client: redis.Redis, *, room: InboxRoom = DEFAULT_ROOM) -> None:
        self.r = client
        self.room = room
        self._open = script(client, "direction_open")
        self._vote = script(client, "direction_vote")
        self._end = script(client, "direction_end")
        self._settle = script(client, "direction_settle")

    def open(
        self,
        *,
        opener: str,
        client_request_id: str,
        fingerprint: str,
        doc: dict[str, Any],
        receipt: dict[str, Any],
        log: str,
        item_json: str,
        notify: Sequence[str],
        post: Post | None = None,
    ) -> Written:
        """Open a direction once, notifying `notify`'s inboxes and, with `post`, journalling
        its post to the project's channel in the same step."""
        direction_id = str(doc["id"])
        inbox_keys = [k for seat in notify for k in InboxRoom.seat_keys(seat)]
        reply = self._open(
            keys=[
                keys.direction_request(opener, client_request_id),
                keys.direction(direction_id),
                keys.DIRECTIONS,
                log_key(direction_id),
                keys.journal(post.tracking_id if post else ""),
                keys.JOURNAL_OPEN,
                *InboxRoom.KEYS,
                *inbox_keys,
                *keys.CONTROLLER_WAKE,
            ],
            args=[
                fingerprint,
                _dumps(receipt),
                _dumps(doc),
                int(doc["scheduledDeadlineMs"]),
                direction_id,
                log,
                item_json,
                len(notify),
                RECEIPT_TTL_MS,
                *(
                    ("", "", "", "", 0, 0)
                    if post is None
                    else (
                        post.tracking_id,
                        post.seat_id,
                        post.payload,
                        post.decision,
                        post.now_ms,
                        post.deadline_ms,
                    )
                ),
                *self.room.args(),
                *notify,
            ],
        )
        return _receipt_reply(text(reply[0]), reply)

    def vote(
        self,
        direction_id: str,
        *,
        member_id: str,
        client_request_id: str,
        fingerprint: str,
        expected_revision: int,
        vote: dict[str, Any],
        receipt: dict[str, Any],
        log: str,
        now_ms: int,
    ) -> Written:
        reply = self._vote(
            keys=[
                keys.direction_request(member_id, client_request_id),
                keys.direction(direction_id),
                log_key(direction_id),
            ],
            args=[
                fingerprint,
                now_ms,
                VOTE_PREFIX + member_id,
                expected_revision,
                _dumps(vote),
                _dumps(receipt),
                log,
                RECEIPT_TTL_MS,
            ],
        )
        verb = text(reply[0])
        if verb in ("duplicate", "conflict"):
            return _receipt_reply(verb, reply)
        if verb == "closed":
            return Written(verb, deadline_ms=int(reply[1]), recorded=int(reply[2]) == 1)
        if verb == "stale":
            body = text(reply[1])
            return Written(verb, current=json.loads(body) if body else None)
        if verb == "recorded":
            return Written(verb, receipt=receipt, revision=int(reply[1]))
        return Written(verb)

    def end(
        self,
        direction_id: str,
        *,
        by: str,
        client_request_id: str,
        fingerprint: str,
        receipt: dict[str, Any],
        log: str,
        now_ms: int,
    ) -> Written:
        reply = self._end(
            keys=[
                keys.direction_request(by, client_request_id),
                keys.direction(direction_id),
                log_key(direction_id),
            ],
            args=[fingerprint, now_ms, _dumps(receipt), log, RECEIPT_TTL_MS],
        )
        verb = text(reply[0])
        if verb in ("duplicate", "conflict"):
            return _receipt_reply(verb, reply)
        if verb == "closed":
            return Written(verb, deadline_ms=int(reply[1]), recorded=int(reply[2]) == 1)
        if verb == "recorded":
            return Written(verb, receipt=receipt, revision=int(reply[1]))
        return Written(verb)

    def settle(
        self,
        direction_id: str,
        *,
        expected_revision: int,
        result: dict[str, Any],
        log: str,
        now_ms: int,
        closing: bool,
        actor: str | None = None,
        client_request_id: str | None = None,
        fingerprint: str = "",
        receipt: dict[str, Any] | None = None,
    ) -> Written:
        """Record `result` on revision `expected_revision`: a closure (`closing`, no
        request: another closure first answers `closed` with its result) or a decision."""
        request = (
            keys.direction_request(actor, client_request_id)
            if actor is not None and client_request_id is not None
            else keys.direction(direction_id)
        )
        reply = self._settle(
            keys=[request, keys.direction(direction_id), log_key(direction_id)],
            args=[
                fingerprint if receipt is not None else "",
                "" if receipt is None else _dumps(receipt),
                RECEIPT_TTL_MS,
                expected_revision,
                now_ms,
                1 if closing else 0,
                _dumps(result),
                log,
            ],
        )
        verb = text(reply[0])
        if verb in ("duplicate", "conflict"):
            return _receipt_reply(verb, reply)
        if verb == "closed":
            return Written(verb, result=json.loads(text(reply[1])))
        if verb in ("stale", "recorded"):
            return Written(verb, receipt=receipt, revision=int(reply[1]))
        return Written(verb)

    def request(self, actor: str, client_request_id: str) -> tuple[str, dict[str, Any]] | None:
        """The (fingerprint, receipt) an actor's request id already wrote; None if unused."""
        return _peek(self.r, actor, client_request_id)

    def read(self, direction_id: str) -> Snapshot | None:
        """The direction as stored now; None when there is none."""
        raw = cast(dict[bytes, bytes], self.r.hgetall(keys.direction(direction_id)))
        found = {text(k): text(v) for k, v in raw.items()}
        if "doc" not in found:
            return None
        result = found.get("result")
        votes = {
            name[len(VOTE_PREFIX) :]: json.loads(body)
            for name, body in found.items()
            if name.startswith(VOTE_PREFIX)
        }
        return Snapshot(
            doc=json.loads(found["doc"]),
            deadline_ms=int(found["deadlineMs"]),
            revision=int(found["rev"]),
            result=None if result is None else json.loads(result),
            votes=votes,
        )

    def ids(self, after: str | None, count: int) -> list[str]:
        """Up to `count` direction ids after `after` (from the first when None), in id order."""
        low = "-" if after is None else f"({after}"
        found = self.r.zrangebylex(keys.DIRECTIONS, low, "+", start=0, num=count)
        return [text(i) for i in cast(Sequence[bytes], found)]

    def note(self, direction_id: str, log: str) -> None:
        """Append one line to the direction's audit log (what happened to a reply that was
        not counted as a vote, and why)."""
        self.r.xadd(log_key(direction_id), {"event": log})

    def log(self, direction_id: str) -> list[dict[str, Any]]:
        """The direction's audit log, oldest first."""
        rows = cast(
            Sequence[tuple[bytes, dict[bytes, bytes]]], self.r.xrange(log_key(direction_id))
        )
        return [json.loads(fields[b"event"]) for _id, fields in rows]


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _peek(
    client: redis.Redis, actor: str, client_request_id: str
) -> tuple[str, dict[str, Any]] | None:
    body = client.get(keys.direction_request(actor, client_request_id))
    if body is None:
        return None
    raw = text(body)
    return raw[:64], json.loads(raw[64:])
