"""Project directions (issue 13): `open_decision`, `vote`, `get_decision`, `list_decisions`,
`decide_direction`, and the operations the people's HTTP routes share with them
(workers/ingress/decisions.py).

The rules are pipeline/decisions.py's; each write is one script (workers/stores/decisions.py)
with the actor's receipt for its `client_request_id`. A direction has two options, For (0)
and Against (1); it is opened by a seat under the org file's `decisions:` policy, frozen into
it; opening puts a directed item in every other seat's inbox in the same step. A seat's vote
weighs 1, a person's 2. The result is computed from the clock at every read and write once
the deadline has passed, and recorded once (`close_if_due`); no beat is needed. Ties and
outcomes that need approval wait for the policy's resolver (`decide_direction`, or the HTTP
route for a person); the owner may end voting early (HTTP). A replay of any write answers its
original receipt; another input under the same request id is a 409.
"""

from __future__ import annotations

from typing import Any

from contracts import Candidate, InboxItem
from contracts.inbound import CandidateIds, MessagePart
from contracts.tools import DecideDirection, GetDecision, ListDecisions, OpenDecision, Vote
from pipeline import decisions as rules
from workers.container import Container
from workers.stores.decisions import Snapshot, Written
from workers.tools.base import ToolContext, ToolError, tool

SOURCE = "seatwire"
SURFACE = "project_direction"
CLOSE_ATTEMPTS = 20  # a closure's compare-and-set loses only to a vote that came first


def _unknown(direction_id: str) -> ToolError:
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


def _replayed(
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


def _answer(written: Written, client_request_id: str) -> dict[str, Any]:
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
            raise _unknown(direction_id)
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
            raise _unknown(direction_id)
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
        raise _unknown(direction_id)
    if written.verb == "closed":
        close_if_due(c, direction_id, now_ms)
        raise rules.closed_refusal(written.deadline_ms, now_ms, written.recorded)
    if written.verb == "stale":
        raise rules.stale_vote(written.current, expected_revision)
    return _answer(written, client_request_id)


def end_voting(
    c: Container, direction_id: str, *, by: str, client_request_id: str, reason: str, now_ms: int
) -> dict[str, Any]:
    """The owner ends voting now: the deadline moves to `now_ms`, and the result is recorded."""
    snap = c.decisions.read(direction_id)
    if snap is None:
        raise _unknown(direction_id)
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
        raise _unknown(direction_id)
    if written.verb == "closed":
        close_if_due(c, direction_id, now_ms)
        raise ToolError(
            "voting_closed",
            f"voting on this direction already ended at {written.deadline_ms} (Unix ms); "
            "read the result. Nothing was written",
            status=409,
            deadlineMs=written.deadline_ms,
        )
    answer = _answer(written, client_request_id)
    close_if_due(c, direction_id, now_ms)
    return answer


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
    replay = _replayed(c, actor, client_request_id, fingerprint)
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
        raise _unknown(direction_id)
    if written.verb == "stale":
        raise ToolError(
            "revision_conflict",
            f"expected_revision: the direction changed meanwhile (revision {written.revision}); "
            "read it again and decide on the current revision. Nothing was written",
            field="expected_revision",
            status=409,
            currentRevision=written.revision,
        )
    return _answer(written, client_request_id)


def _notice(doc: dict[str, Any], recipients: tuple[str, ...]) -> str:
    candidate = Candidate(
        family="messaging",
        source=SOURCE,
        delivery_id=f"direction:{doc['id']}",
        ids=CandidateIds(
            channel_id="seatwire:directions", message_id=doc["id"], thread_root_id=doc["id"]
        ),
        msg=MessagePart(
            author_id=doc["openedBy"],
            body=f"{doc['title']}\n\n{doc['body']}",
            mentions=recipients,
            audience_ids=recipients,
        ),
        at_ms=doc["openedAtMs"],
    )
    item = InboxItem.model_construct(
        position=0,
        delivery_id=f"direction:{doc['id']}",
        family="messaging",
        source=SOURCE,
        surface=SURFACE,
        reason="addressed",
        why=rules.notice_why(doc),
        at_ms=doc["openedAtMs"],
        candidate=candidate,
    )
    return item.model_dump_json(by_alias=True)


# ------------------------------------------------------------------ the tools


@tool(
    "open_decision",
    "Open a project direction: a title, a body, a countdown within the project's permitted "
    "range (refused outside it, naming the range) and a stable client_request_id; optional "
    "affected_issues. Every direction has exactly two options, For (0) and Against (1): an "
    "`options` field (or any unknown field) is refused. The project's decision policy and "
    "repository are frozen into it. Every other seat gets it in get_updates. A replay of the "
    "same request answers its original receipt.",
)
def open_decision(ctx: ToolContext, args: OpenDecision) -> dict[str, Any]:
    c, opener = ctx.container, ctx.seat.member_id
    affected = list(dict.fromkeys(args.affected_issues))
    fingerprint = rules.fingerprint(
        "open", rules.open_fields(args.title, args.body, args.countdown_seconds, affected)
    )
    replay = _replayed(c, opener, args.client_request_id, fingerprint)
    if replay is not None:
        return replay
    org = c.org.current()[0].org
    if org.decisions is None:
        raise rules.no_policy()
    rules.check_countdown(org.decisions, args.countdown_seconds)
    rules.check_text([("title", args.title), ("body", args.body)])
    doc = rules.open_doc(
        opener=opener,
        client_request_id=args.client_request_id,
        title=args.title,
        body=args.body,
        countdown_seconds=args.countdown_seconds,
        affected_issues=affected,
        policy=rules.policy_snapshot(org.decisions, org.project.repository),
        now_ms=ctx.now_ms,
    )
    recipients = tuple(s.member_id for s in org.seats if s.member_id != opener)
    written = c.decisions.open(
        opener=opener,
        client_request_id=args.client_request_id,
        fingerprint=fingerprint,
        doc=doc,
        receipt=rules.open_receipt(doc, args.client_request_id),
        log=rules.log_entry(
            "opened",
            opener,
            ctx.now_ms,
            deadlineMs=doc["scheduledDeadlineMs"],
            notified=list(recipients),
        ),
        item_json=_notice(doc, recipients),
        notify=recipients,
    )
    return _answer(written, args.client_request_id)


@tool(
    "vote",
    "Cast or change your own vote on a direction (weight 1; a person's vote weighs 2): "
    "option 0 (For) or 1 (Against), an optional reason, expected_revision = your vote's "
    "current revision (0 for your first vote; get_decision's yourVoteRevision), and a "
    "stable client_request_id. Strictly before the current deadline (the owner may move it "
    "earlier): a vote at or after it is refused. A replay answers the original receipt.",
)
def vote(ctx: ToolContext, args: Vote) -> dict[str, Any]:
    return cast_vote(
        ctx.container,
        args.direction_id,
        member_id=ctx.seat.member_id,
        kind=rules.AGENT,
        option=args.option,
        reason=args.reason,
        expected_revision=args.expected_revision,
        client_request_id=args.client_request_id,
        now_ms=ctx.now_ms,
    )


@tool(
    "get_decision",
    "One direction and your own vote: its options, frozen policy, current deadline (the "
    "owner may have moved it earlier), revision, state (open, tied, awaiting_approval, "
    "decided, rejected), tally and result (null while voting is open), and the server time.",
)
def get_decision(ctx: ToolContext, args: GetDecision) -> dict[str, Any]:
    return read(ctx.container, args.direction_id, ctx.seat.member_id, ctx.now_ms)


@tool(
    "list_decisions",
    "Up to 20 directions in id order, each with its state, deadline, revision and your "
    "vote's revision; pass `next` as cursor for the next page (a cursor is yours only).",
)
def list_decisions(ctx: ToolContext, args: ListDecisions) -> dict[str, Any]:
    return page(ctx.container, ctx.seat.member_id, args.cursor, ctx.now_ms)


@tool(
    "decide_direction",
    "For the member the direction's frozen policy names (resolverId) only: resolve_tie "
    "with the winning option on a tied result, or approve / reject an outcome "
    "awaiting_approval; with the direction's current revision, a reason and a stable "
    "client_request_id. Tie resolution does not approve. Records a direction only.",
)
def decide_direction(ctx: ToolContext, args: DecideDirection) -> dict[str, Any]:
    return decide_as(
        ctx.container,
        args.direction_id,
        actor=ctx.seat.member_id,
        action=args.action,
        option=args.option,
        reason=args.reason,
        expected_revision=args.expected_revision,
        client_request_id=args.client_request_id,
        now_ms=ctx.now_ms,
    )
