"""A seat's work intents (issue 13): `record_work_intent`, `list_work_intents`.

Always the calling seat's own intents (the seat from its credentials, never an argument).
A write is one atomic script (workers/stores/intents.py): its receipt, the compare-and-set on
`expected_revision` (0 creates), the fixed Issue link and the seat's counters together. The
rules on the input (a blocker exactly for `blocked`, no credential in the next step or the
blocker) are pipeline/intents.py's, checked before anything is written. Allowed while the
seat or the project is paused: it records recovery state and authorizes nothing. A runnable
intent is the seat's durable work: the work controller's next tick runs the seat for it with
reason `durable`, once per change (pipeline/turns.py `news_of`).
"""

from __future__ import annotations

from typing import Any

from contracts.tools import ListWorkIntents, RecordWorkIntent
from pipeline import intents as rules
from workers.stores.intents import ISSUE_LINK, REQUEST_REUSED, Conflict, Intents
from workers.tools.base import ToolContext, ToolError, tool


def _store(ctx: ToolContext) -> Intents:
    return ctx.container.intents


@tool(
    "record_work_intent",
    "Persist your own unfinished work as a recovery checkpoint: stable intent_id and "
    "client_request_id; expected_revision 0 creates, later writes give the current revision "
    "(a stale one is refused with the current). States runnable, waiting, blocked (with a "
    "blocker; only then), done, cancelled. The Issue link is fixed at creation. Never "
    "credentials. A replay of the same request returns its original receipt. Allowed while "
    "paused; a runnable intent makes the work controller run you (reason durable).",
)
def record_work_intent(ctx: ToolContext, args: RecordWorkIntent) -> dict[str, Any]:
    refused = rules.refusal(args)
    if refused is not None:
        raise ToolError(refused.code, refused.message, field=refused.field, status=422)
    seat = ctx.seat.member_id
    active = ctx.container.seat_runs.get(seat).run.active
    record = rules.record_of(
        args, run_id=active.turn_id if active is not None else None, now_ms=ctx.now_ms
    )
    receipt = rules.receipt_of(args, record)
    outcome = _store(ctx).record(
        seat,
        intent_id=args.intent_id,
        client_request_id=args.client_request_id,
        expected_revision=args.expected_revision,
        fingerprint=rules.fingerprint(args),
        record=record,
        receipt=receipt,
        runnable=args.state == rules.RUNNABLE,
        runnable_state=rules.RUNNABLE,
    )
    if isinstance(outcome, Conflict):
        raise _conflict(args, outcome)
    return {**outcome.receipt, "replayed": outcome.replayed}


def _conflict(args: RecordWorkIntent, c: Conflict) -> ToolError:
    if c.kind == REQUEST_REUSED:
        return ToolError(
            "request_conflict",
            f"client_request_id: {args.client_request_id} was already used for a different "
            "write; a retry must repeat its input exactly, and a new write needs a new "
            "client_request_id. Nothing was written",
            field="client_request_id",
            status=409,
        )
    if c.kind == ISSUE_LINK:
        linked = (c.stored or {}).get("issueNumber")
        what = "no Issue" if linked is None else f"Issue #{linked}"
        return ToolError(
            "issue_link_changed",
            f"issue_number: intent {args.intent_id} is linked to {what}, and the link never "
            f"changes; give {'no issue_number' if linked is None else linked} (or record "
            "another intent). Nothing was written",
            field="issue_number",
            status=409,
            currentRevision=c.revision,
            issueNumber=linked,
        )
    if c.revision == 0:
        why = f"intent {args.intent_id} does not exist; create it with expected_revision 0"
    elif args.expected_revision == 0:
        why = (
            f"intent {args.intent_id} exists already (revision {c.revision}); update it "
            f"with expected_revision {c.revision}, or choose another intent_id"
        )
    else:
        why = (
            f"intent {args.intent_id} is at revision {c.revision}, not "
            f"{args.expected_revision}; read it (list_work_intents), reconcile, and write "
            f"with expected_revision {c.revision}"
        )
    return ToolError(
        "revision_conflict",
        f"expected_revision: {why}. Nothing was written",
        field="expected_revision",
        status=409,
        currentRevision=c.revision,
        intent=c.stored,
    )


@tool(
    "list_work_intents",
    "Your own recovery checkpoints, by intent id: up to 20 pending (runnable, waiting, "
    "blocked) a page with a `next` cursor; include_completed adds done and cancelled. "
    "These are your reports, not verified Issue progress; an old recordedRunId is history.",
)
def list_work_intents(ctx: ToolContext, args: ListWorkIntents) -> dict[str, Any]:
    seat = ctx.seat.member_id
    completed = bool(args.include_completed)
    after: str | None = None
    if args.cursor is not None:
        after = rules.cursor_after(args.cursor, seat, completed)
        if after is None:
            raise ToolError(
                "invalid_cursor",
                "cursor: not a cursor of this listing; pass the `next` of the previous page, "
                "with the same include_completed",
                field="cursor",
                status=422,
            )
    records = _store(ctx).all(seat)
    return rules.page_of(seat, records, include_completed=completed, after=after)
