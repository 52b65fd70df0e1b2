"""The operations on project directions (issue 13) that three callers share: the seats'
decision tools (workers/tools/decisions.py), the people's HTTP routes
(workers/ingress/decisions.py) and the directedness stage, which counts a person's Slack reply
in a direction's thread as their vote (workers/stages/directedness.py).

The rules are pipeline/decisions.py's; each write is one script (workers/stores/decisions.py)
with the actor's receipt for its `client_request_id`. The result is computed from the clock at
every read and write once the deadline has passed, and recorded once (`close_if_due`); no beat
is needed. A replay of any write answers its original receipt; another input under the same
request id is a 409.
"""

from __future__ import annotations

from typing import Any

from contracts.inbound import Candidate
from contracts.tools import ToolError
from pipeline import decisions as rules
from workers.container import Container
from workers.errors import TransientError
from workers.stores.decisions import Snapshot, Written

CLOSE_ATTEMPTS = 20  # a closure's compare-and-set loses only to a vote that came first


def unknown(direction_id: str) -> ToolError:
    return ToolError(
        "unknown_direction",
        f"direction_id: there is no direction {direction_id}; pass an id open_decision or "
        "list_decisions returned",
        field="direction_id",
        status=404,
    )


def _request_conflict(client_request_id: str, original: dict[str, Any] | None) -> ToolError:
    return ToolError(
        "request_conflict",
        f"client_request_id: {client_request_id} was already used for a different write; a "
        "retry must repeat its input exactly, and a new write needs a new client_request_id. "
        "Nothing was written",
        field="client_request_id",
        status=409,
        original=original,
    )


def replayed(
    c: Container, actor: str, client_request_id: str, fingerprint: str
) -> dict[str, Any] | None:
    """The original receipt when this request was made before with this input; a 409 when
    it was made with another; None when it is new."""
    found = c.decisions.request(actor, client_request_id)
    if found is None:
        return None
    stored, receipt = found
    if stored != fingerprint:
        raise _request_conflict(client_request_id, receipt)
    return {**receipt, "replayed": True}


def answer(written: Written, client_request_id: str) -> dict[str, Any]:
    """The receipt of a write the script recorded or replayed (a conflict is a 409)."""
    if written.verb == "conflict":
        raise _request_conflict(client_request_id, written.receipt)
    assert written.receipt is not None
    return {**written.receipt, "replayed": written.verb == "duplicate"}


# ------------------------------------------------------------------ reading and closing


def close_if_due(c: Container, direction_id: str, now_ms: int) -> Snapshot:
    """The direction now, with its result recorded first when its deadline has passed and
    none is (the votes are final then, so every caller records the same result)."""
    for _ in range(CLOSE_ATTEMPTS):
        snap = c.decisions.read(direction_id)
        if snap is None:
            raise unknown(direction_id)
        if snap.result is not None or now_ms < snap.deadline_ms:
            return snap
        result = rules.close(snap.votes.values(), snap.doc["policy"], snap.deadline_ms)
        written = c.decisions.settle(
            direction_id,
            expected_revision=snap.revision,
            result=result,
            log=rules.log_entry(
                "closed", None, now_ms, state=result["state"], winner=result["winner"]
            ),
            now_ms=now_ms,
            closing=True,
        )
        if written.verb == "recorded":
            return Snapshot(snap.doc, snap.deadline_ms, written.revision, result, snap.votes)
        if written.verb == "missing":
            raise unknown(direction_id)
        # closed by another caller, or a vote landed first: read again
    raise ToolError(
        "busy",
        "direction_id: the direction changed under every attempt to record its result; call again",
        field="direction_id",
        status=503,
    )


def view_of(snap: Snapshot, viewer: str | None, now_ms: int) -> dict[str, Any]:
    """What `get_decision` answers: the direction and the viewer's own vote."""
    mine = None if viewer is None else snap.votes.get(viewer)
    direction = rules.view(
        snap.doc,
        deadline_ms=snap.deadline_ms,
        revision=snap.revision,
        result=snap.result,
        now_ms=now_ms,
    )
    return {
        "direction": direction,
        "yourVote": mine,
        "yourVoteRevision": 0 if mine is None else int(mine["revision"]),
        "voteCount": len(snap.votes),
        "serverTime": now_ms,
    }


def read(c: Container, direction_id: str, viewer: str | None, now_ms: int) -> dict[str, Any]:
    return view_of(close_if_due(c, direction_id, now_ms), viewer, now_ms)


def page(c: Container, viewer: str, cursor: str | None, now_ms: int) -> dict[str, Any]:
    """Up to 20 directions in id order after the cursor (scoped to `viewer`), each closed
    first when due."""
    after = None if cursor is None else rules.cursor_after(cursor, viewer)
    ids = c.decisions.ids(after, rules.PAGE + 1)
    shown = ids[: rules.PAGE]
    directions = []
    for direction_id in shown:
        full = view_of(close_if_due(c, direction_id, now_ms), viewer, now_ms)
        directions.append(
            {**rules.summary(full["direction"]), "yourVoteRevision": full["yourVoteRevision"]}
        )
    more = len(ids) > rules.PAGE
    return {
        "directions": directions,
        "next": rules.cursor_of(viewer, shown[-1]) if more and shown else None,
        "serverTime": now_ms,
    }


# ------------------------------------------------------------------ writes


def cast_vote(
    c: Container,
    direction_id: str,
    *,
    member_id: str,
    kind: str,
    option: int,
    reason: str,
    expected_revision: int,
    client_request_id: str,
    now_ms: int,
) -> dict[str, Any]:
    """Cast or change `member_id`'s own vote (a seat's weighs 1, a person's 2)."""
    rules.check_text([("reason", reason)])
    vote = rules.vote_doc(
        member_id=member_id,
        kind=kind,
        option=option,
        reason=reason,
        revision=expected_revision + 1,
        now_ms=now_ms,
    )
    written = c.decisions.vote(
        direction_id,
        member_id=member_id,
        client_request_id=client_request_id,
        fingerprint=rules.fingerprint(
            "vote", rules.vote_fields(direction_id, option, reason, expected_revision)
        ),
        expected_revision=expected_revision,
        vote=vote,
        receipt=rules.vote_receipt(direction_id, client_request_id, vote),
        log=rules.log_entry(
            "voted",
            member_id,
            now_ms,
            option=option,
            weight=vote["weight"],
            kind=kind,
            revision=vote["revision"],
            reason=reason,
        ),
        now_ms=now_ms,
    )
    if written.verb == "missing":
        raise unknown(direction_id)
    if written.verb == "closed":
        close_if_due(c, direction_id, now_ms)
        raise rules.closed_refusal(written.deadline_ms, now_ms, written.recorded)
    if written.verb == "stale":
        raise rules.stale_vote(written.current, expected_revision)
    return answer(written, client_request_id)


def end_voting(
    c: Container, direction_id: str, *, by: str, client_request_id: str, reason: str, now_ms: int
) -> dict[str, Any]:
    """The owner ends voting now: the deadline moves to `now_ms`, and the result is recorded."""
    snap = c.decisions.read(direction_id)
    if snap is None:
        raise unknown(direction_id)
    refused = rules.end_refusal(snap.doc["policy"], by)
    if refused is not None:
        raise refused
    receipt = {
        "directionId": direction_id,
        "clientRequestId": client_request_id,
        "endedBy": by,
        "deadlineMs": now_ms,
        "scheduledDeadlineMs": snap.doc["scheduledDeadlineMs"],
    }
    written = c.decisions.end(
        direction_id,
        by=by,
        client_request_id=client_request_id,
        fingerprint=rules.fingerprint("end", {"directionId": direction_id, "reason": reason}),
        receipt=receipt,
        log=rules.log_entry("ended", by, now_ms, reason=reason),
        now_ms=now_ms,
    )
    if written.verb == "missing":
        raise unknown(direction_id)
    if written.verb == "closed":
        close_if_due(c, direction_id, now_ms)
        raise ToolError(
            "voting_closed",
            f"voting on this direction already ended at {written.deadline_ms} (Unix ms); "
            "read the result. Nothing was written",
            status=409,
            deadlineMs=written.deadline_ms,
        )
    receipt = answer(written, client_request_id)
    close_if_due(c, direction_id, now_ms)
    return receipt


def decide_as(
    c: Container,
    direction_id: str,
    *,
    actor: str,
    action: str,
    option: int | None,
    reason: str,
    expected_revision: int,
    client_request_id: str,
    now_ms: int,
) -> dict[str, Any]:
    """The policy's resolver resolves a tie, or approves or rejects an outcome."""
    fingerprint = rules.fingerprint(
        "decide", rules.decide_fields(direction_id, expected_revision, action, option, reason)
    )
    replay = replayed(c, actor, client_request_id, fingerprint)
    if replay is not None:
        return replay
    rules.check_text([("reason", reason)])
    snap = close_if_due(c, direction_id, now_ms)
    refused = rules.decide_refusal(
        policy=snap.doc["policy"],
        result=snap.result,
        revision=snap.revision,
        deadline_ms=snap.deadline_ms,
        actor=actor,
        action=action,
        option=option,
        expected_revision=expected_revision,
    )
    if refused is not None:
        raise refused
    assert snap.result is not None
    after = rules.decide(
        snap.result, actor=actor, action=action, option=option, reason=reason, now_ms=now_ms
    )
    receipt = {
        "directionId": direction_id,
        "clientRequestId": client_request_id,
        "action": action,
        "revision": expected_revision + 1,
        "result": after,
    }
    written = c.decisions.settle(
        direction_id,
        expected_revision=expected_revision,
        result=after,
        log=rules.log_entry(
            action, actor, now_ms, option=option, reason=reason, state=after["state"]
        ),
        now_ms=now_ms,
        closing=False,
        actor=actor,
        client_request_id=client_request_id,
        fingerprint=fingerprint,
        receipt=receipt,
    )
    if written.verb == "missing":
        raise unknown(direction_id)
    if written.verb == "stale":
        raise ToolError(
            "revision_conflict",
            f"expected_revision: the direction changed meanwhile (revision {written.revision}); "
            "read it again and decide on the current revision. Nothing was written",
            field="expected_revision",
            status=409,
            currentRevision=written.revision,
        )
    return answer(written, client_request_id)


# ------------------------------------------------------------------ a person's reply


REPLY_ATTEMPTS = 5  # a reply's compare-and-set loses only to the same person's other reply


def vote_by_reply(c: Container, candidate: Candidate, *, now_ms: int) -> str | None:
    """Count a reply in the thread of a direction's post as its author's vote (weight 2).

    None when the event is no such reply. Otherwise what became of it, which the direction's
    audit log also holds: `counted` (the `voted` line), `replayed` (this delivery was counted
    before), or why it was not counted (`not_a_vote`, `not_a_member`, `seat_not_person`,
    `superseded` by a later reply already counted, `voting_closed`), with the reply's place.

    A reply is judged at the time it was written (its message ts, never later than now), not
    when it is processed: one written before the deadline counts though a backlog delayed it, unless
    the result was recorded meanwhile. A passing failure (a race lost every time, a closure
    that could not be recorded) is a TransientError: the stage's task retries, and the record
    of the event it already wrote is not written twice."""
    ids, msg = candidate.ids, candidate.msg
    root = ids.thread_root_id
    if candidate.family != "messaging" or msg is None or not ids.channel_id or not root:
        return None
    if root == ids.message_id:
        return None  # the post itself (or a thread's root), not a reply to it
    sent = c.ledger.sent_at(ids.channel_id, root)
    direction = None if sent is None else rules.direction_of(sent.get("workId", ""))
    if direction is None:
        return None
    view, _degraded = c.org.current()
    person, refused = rules.person_of(
        msg.author_id or "", view.org.members, (s.member_id for s in view.org.seats)
    )
    parsed = rules.reply_vote(msg.body)
    if not refused and parsed is None:
        refused = "not_a_vote"
    if refused or person is None or parsed is None:
        _not_counted(c, direction, candidate, person, refused or "not_a_member", now_ms)
        return refused or "not_a_member"
    option, reason = parsed
    request_id = rules.reply_request_id(candidate.delivery_id)
    if c.decisions.request(person, request_id) is not None:
        return "replayed"
    written_at = rules.reply_written_ms(candidate.at_ms, ids.message_id, now_ms)
    for _ in range(REPLY_ATTEMPTS):
        try:
            snap = close_if_due(c, direction, written_at)  # a result recorded stays so
        except ToolError as exc:
            if exc.code == "busy":
                raise TransientError(f"{direction}: {exc.message}") from exc
            _not_counted(c, direction, candidate, person, exc.code, now_ms)
            return exc.code
        mine = snap.votes.get(person)
        if mine is not None and int(mine.get("atMs", 0)) > written_at:
            _not_counted(c, direction, candidate, person, "superseded", now_ms)
            return "superseded"
        try:
            cast_vote(
                c,
                direction,
                member_id=person,
                kind=rules.HUMAN,
                option=option,
                reason=reason,
                expected_revision=0 if mine is None else int(mine["revision"]),
                client_request_id=request_id,
                now_ms=written_at,
            )
        except ToolError as exc:
            if exc.code == "revision_conflict":
                continue  # their other reply landed first: judge this one against it
            _not_counted(c, direction, candidate, person, exc.code, now_ms)
            return exc.code
        return "counted"
    raise TransientError(f"{person}'s vote on {direction} lost {REPLY_ATTEMPTS} races in a row")


def _not_counted(
    c: Container,
    direction: str,
    candidate: Candidate,
    person: str | None,
    code: str,
    now_ms: int,
) -> None:
    """Write down a reply that was not counted, and why."""
    msg = candidate.msg
    c.decisions.note(
        direction,
        rules.log_entry(
            "reply_not_counted",
            person,
            now_ms,
            code=code,
            authorId=msg.author_id if msg else None,
            channelId=candidate.ids.channel_id,
            messageId=candidate.ids.message_id,
            deliveryId=candidate.delivery_id,
        ),
    )
