"""Project directions (issue 13): `open_decision`, `vote`, `get_decision`, `list_decisions`,
`decide_direction`. The operations they share with the people's HTTP routes and with a
person's Slack reply are workers/stages/directions.py's.

The rules are pipeline/decisions.py's; each write is one script (workers/stores/decisions.py)
with the actor's receipt for its `client_request_id`. A direction has two options, For (0)
and Against (1); it is opened by a seat under the org file's `decisions:` policy, frozen into
it; opening puts a directed item in every other seat's inbox in the same step, and, when the
policy names a `channelId`, journals the direction's post there (then published to the
guardrail stage, or re-enqueued by the sweeper). A seat's vote weighs 1, a person's 2. Ties
and outcomes that need approval wait for the policy's resolver (`decide_direction`, or the
HTTP route for a person); the owner may end voting early (HTTP).
"""

from __future__ import annotations

import logging
from typing import Any

from contracts import Candidate, EngagementDecision, InboxItem
from contracts.inbound import CandidateIds, MessagePart
from contracts.messages import DecisionEnvelope
from contracts.tools import DecideDirection, GetDecision, ListDecisions, OpenDecision, Vote
from pipeline import decisions as rules
from workers.broker import publish
from workers.queues import Task
from workers.stages.directions import answer, cast_vote, decide_as, page, read, replayed
from workers.stores.decisions import Post
from workers.tools.base import ToolContext, tool

log = logging.getLogger("seatwire.decisions")

SOURCE = "seatwire"
SURFACE = "project_direction"


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
    replay = replayed(c, opener, args.client_request_id, fingerprint)
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
    channel = org.decisions.channel_id
    post = None
    if channel is not None:
        decision = rules.post_decision(doc, channel)
        post = Post(
            tracking_id=rules.post_tracking_id(doc["id"]),
            seat_id=opener,
            payload=rules.post_envelope(doc).model_dump_json(by_alias=True),
            decision=decision.model_dump_json(by_alias=True),
            now_ms=ctx.now_ms,
            deadline_ms=ctx.now_ms + c.settings.journal_deadline_ms,
        )
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
        post=post,
    )
    if post is not None and written.verb == "recorded":
        _publish_post(ctx, post)
    return answer(written, args.client_request_id)


def _publish_post(ctx: ToolContext, post: Post) -> None:
    """The post's guardrail message. The direction is open and its post journalled whatever
    happens here: a publish that fails is the sweeper's to send from `decided`."""
    message = DecisionEnvelope(
        tracking_id=post.tracking_id,
        seat_id=post.seat_id,
        accepted_at_ms=post.now_ms,  # when it was journalled: its accept-to-final starts here
        decision=EngagementDecision.model_validate_json(post.decision),
    )
    try:
        publish(ctx.app, Task.GUARDRAILS, post.tracking_id, message.to_wire())
    except Exception:
        log.exception(
            "could not publish %s; the sweeper sends it after its deadline", post.tracking_id
        )


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
