"""Issue coordination (issue 13): `get_issue_coordination` and `coordinate_issue`, per issue
number of the project's repository, one owner at a time (workers/stores/issues.py, the rules
in pipeline/issues.py).

The generation rises on every ownership change (claim, release) and only then; every
mutation but claim names it (`expected_generation`) and a stale one is a 409 naming the
current one. Every mutation has a `client_request_id`: the same seat, id and input is a replay
answered with the original receipt (`replayed: true`); the same id with other input is a 409.
A `blocked` report becomes a work report to the engagement stage (report_intake), one work id
per issue and the report's revision, which decides whether anyone must be asked; a replay
re-offers it, and the journal answers `duplicate`. `githubObservation` is what the inbound
stream recorded of the number (never a call to GitHub), or `not_observed`.

This is the one claim system (workers/stores/claims.py): the goal steward's COLLABORATE claim
on an item whose candidate names the issue is a claim here, with its owner and generation;
its owner carries `lease` (`untilMs`, `itemId`) while it is a lease. `claim` is refused
(`issue_owned`) while anyone owns the issue, a lease too, lapsed or not: a collaborator takes
a lapsed lease over through `/v1/seats/{seat}/claims/{item}`.
"""

from __future__ import annotations

from typing import Any

from contracts.tools import CoordinateIssue, GetIssueCoordination
from pipeline import issues as rules
from workers.stages.report_intake import intake_report
from workers.stores.issues import Coordinated, Issues, IssueState
from workers.tools.base import ToolContext, ToolError, tool

REFUSALS: dict[str, tuple[str, str | None]] = {
    # verb -> (error code, the field it is about)
    "owned": ("issue_owned", None),
    "not_owner": ("not_owner", None),
    "is_owner": ("is_owner", "action"),
    "not_participant": ("not_a_participant", None),
    "stale": ("stale_generation", "expected_generation"),
}


def _repository(ctx: ToolContext) -> str | None:
    return ctx.container.org.current()[0].org.project.repository or None


def _store(ctx: ToolContext) -> Issues:
    return ctx.container.issues


def _observation(ctx: ToolContext, number: int) -> dict[str, Any]:
    return rules.observation_wire(_store(ctx).observation(number))


@tool(
    "get_issue_coordination",
    "Who owns the repository issue (one owner at a time), its generation (pass it as "
    "expected_generation to coordinate_issue), the owner's work state, a page of participants "
    "(20, with a `next` cursor) and githubObservation: what Seatwire's inbound stream recorded "
    "of this number (an Issue or a pull request, open or closed, sourceUpdatedAt, observedAt), "
    "or not_observed. GitHub is never called; the copy may be out of date.",
)
def get_issue_coordination(ctx: ToolContext, args: GetIssueCoordination) -> dict[str, Any]:
    n = args.issue_number
    after = None
    if args.cursor is not None:
        after = rules.decode_cursor(args.cursor, n)
        if after is None:
            raise ToolError(
                "invalid_cursor",
                "cursor: not a cursor of this issue's participants; pass the `next` of the "
                "previous page with the same issue_number",
                field="cursor",
                status=422,
            )
    state = _store(ctx).get(n)
    page, last = rules.participants(state.owner, state.members, after=after)
    for entry in page:
        if entry["id"] == state.owner:
            entry["sinceMs"] = entry["sinceMs"] or state.since_ms
            if state.work_state:
                entry["workState"] = _work_state(state)
    return {
        **_coordination(ctx, state),
        "participants": page,
        "next": rules.encode_cursor(n, last) if last else None,
        "you": {"roles": list(rules.roles_of(state.owner, ctx.seat.member_id, _mine(ctx, state)))},
        "githubObservation": _observation(ctx, n),
        "serverTime": ctx.now_ms,
    }


def _mine(ctx: ToolContext, state: IssueState) -> dict[str, Any] | None:
    return state.members.get(ctx.seat.member_id)


def _work_state(state: IssueState) -> dict[str, Any] | None:
    if state.work_state is None:
        return None
    return {
        "state": state.work_state,
        "blocker": state.blocker,
        "reportedBy": state.reported_by,
        "reportedAt": state.reported_at_ms,
    }


def _coordination(ctx: ToolContext, state: IssueState) -> dict[str, Any]:
    owner: dict[str, Any] | None = None
    if state.owner is not None:
        owner = {
            "id": state.owner,
            "sinceMs": state.since_ms,
            "refreshedAtMs": state.refreshed_at_ms,
        }
        if state.until_ms is not None:  # a COLLABORATE lease (workers/stores/claims.py)
            owner["lease"] = {"untilMs": state.until_ms, "itemId": state.lease_item}
    return {
        "issueNumber": state.number,
        "repository": _repository(ctx),
        "owner": owner,
        "generation": state.generation,
        "workState": _work_state(state),
    }


@tool(
    "coordinate_issue",
    "Act as yourself on a repository issue: claim (atomically: one owner), refresh your "
    "ownership after a restart, release, join/leave as contributor, follow/unfollow, or report "
    "your work state (working, waiting, blocked with a blocker, paused, done). Every action but "
    "claim needs expected_generation (from get_issue_coordination); a stale one is refused "
    "with the current one. Every call needs a stable client_request_id: retrying the same input "
    "with it returns the original receipt (replayed: true); the same id with other input is "
    "refused. The generation rises on claim and release only. A blocked report is handed to "
    "Seatwire's engagement stage, which decides whether anyone must be asked. A claim grants "
    "no GitHub permission and no file lock; ownership never expires by itself.",
)
def coordinate_issue(ctx: ToolContext, args: CoordinateIssue) -> dict[str, Any]:
    found = rules.problem_of(args)
    if found is not None:
        raise ToolError(
            "invalid_arguments",
            f"coordinate_issue: {found.field}: {found.message}",
            field=found.field,
            status=422,
        )
    seat = ctx.seat.member_id
    done = _store(ctx).coordinate(seat, args, now_ms=ctx.now_ms)
    _refuse(args, done)
    receipt = done.receipt or {}
    observation = _observation(ctx, args.issue_number)
    result: dict[str, Any] = {
        "receipt": receipt,
        "replayed": done.verb == "replayed",
        "githubObservation": observation,
        "notes": rules.notes_for(args.action, observation),
    }
    if args.action == "report" and args.work_state == "blocked":
        result["engagement"] = _engage(ctx, args, receipt)
    return result


def _refuse(args: CoordinateIssue, done: Coordinated) -> None:
    """A refusal as the ToolError it is (nothing was written)."""
    if done.verb == "conflict":
        raise ToolError(
            "request_conflict",
            f"client_request_id: {args.client_request_id!r} was used for another input; "
            "retry with the input it was first used with, or use a new id",
            field="client_request_id",
            status=409,
        )
    if done.verb not in REFUSALS:
        return
    code, field = REFUSALS[done.verb]
    owner, generation = done.owner, done.generation
    who = f"owned by {owner}" if owner else "owned by nobody"
    messages = {
        "issue_owned": f"issue #{args.issue_number} is already {who} (generation "
        f"{generation}): join it as a contributor, or ask {owner}",
        "not_owner": f"{args.action}: issue #{args.issue_number} is {who} (generation "
        f"{generation}); only its owner may {args.action} it",
        "is_owner": f"action: you own issue #{args.issue_number}; an owner is not also a "
        "contributor (report your work state instead)",
        "not_a_participant": f"report: you are neither the owner nor a contributor of issue "
        f"#{args.issue_number}; claim or join it first (generation {generation})",
        "stale_generation": f"expected_generation: {args.expected_generation} is stale, the "
        f"current generation is {generation} ({who}); read get_issue_coordination and retry",
    }
    raise ToolError(
        code,
        messages[code],
        field=field,
        status=409,
        owner=owner,
        generation=generation,
    )


def _engage(ctx: ToolContext, args: CoordinateIssue, receipt: dict[str, Any]) -> dict[str, Any]:
    """The blocked report as a work report into the engagement stage, once per revision: only
    what the receipt and the input fix goes into it, so a replay is the same report (the
    journal answers `duplicate`)."""
    revision = int(receipt.get("reportRevision") or 0)
    report = rules.blocked_report(
        repository=_repository(ctx),
        number=args.issue_number,
        seat_id=ctx.seat.member_id,
        blocker=(args.blocker or "").strip(),
        revision=revision,
    )
    intake = intake_report(
        ctx.container.journal, ctx.app, ctx.seat.member_id, report, now_ms=ctx.now_ms
    )
    return {"status": intake.status, "trackingId": intake.tracking_id, "workId": report.id}
