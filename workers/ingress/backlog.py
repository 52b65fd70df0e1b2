"""A seat's backlog (issue 10): what the goal steward (workers/stages/steward_run.py)
dispatched to the seat, the seat closing an item, and the exclusive claim on COLLABORATE
items. The seat acts as itself, with its own token (v1.py `require_seat`: another seat's
token is 403 `wrong_seat`, an operator token 403 `seat_only`).

    GET    /v1/seats/{seat}/backlog?state=open|done|all   its items, oldest first, and revision
    POST   /v1/seats/{seat}/backlog/{item}/done           close one item, once (and its claim)
    POST   /v1/seats/{seat}/claims/{item}                 take, renew or take over the claim
    DELETE /v1/seats/{seat}/claims/{item}                 release it
           (both with an optional ?expectedGeneration=N: 409 `stale_generation` otherwise)
    GET    /v1/seats/{seat}/claims/{item}                 who holds it, and its history

`revision` is the seat's work revision: it rises by one for each item added, so a seat that
saw the same revision has seen every item.

A claim is found by the item id alone: `{seat}` is the seat taking it, which is usually not
the seat whose backlog holds the item (its owner: found in the backlog's owner index, one
lookup however large the org, issue 27; an item whose claim recorded its owner is found there
too). Only the item's named holder or
one of its contributors may take it, only while the item is open; the lease lasts
`claim_lease_ms`. The refusals, in order, each writing nothing: 404 `unknown_seat`, 404
`unknown_item`, 409 `not_claimable` (no claim: not COLLABORATE work), 409 `item_done`, 403
`not_a_collaborator`, 409 `claim_held` (another seat's live lease, naming its holder and
`untilMs`); a release by another seat than the holder is 409 `not_holder`.

These routes are one door of the one claim system (workers/stores/claims.py, which holds the
decisions); `coordinate_issue` is the other. An item whose candidate names a repository issue
(`claim.issueNumber`) claims that issue: its holder is the issue's owner in
get_issue_coordination, a seat that claimed the issue there holds the item off (409
`claim_held` with `untilMs` null: a standing issue claim never lapses), and a release here
releases the issue. Every result carries the subject's `generation`, which rises on every
change of owner through either door.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from contracts import Seat
from contracts.api import BacklogClosed, BacklogPage, ClaimReleased, ClaimStanding, ClaimTaken
from contracts.backlog import BacklogEntry, BacklogView
from workers.ingress.deps import Deps
from workers.ingress.docs import GUARDED, answers
from workers.ingress.http import Refusal, problem
from workers.ingress.v1 import require_seat

router = APIRouter(prefix="/v1", dependencies=[Depends(require_seat)])

UNKNOWN = {404: "no seat of that name (`unknown_seat`), or no such item (`unknown_item`)"}
CLAIM_REFUSED = {
    **UNKNOWN,
    403: "a token of the wrong role or seat, or a seat that is neither the item's holder nor a "
    "contributor (`not_a_collaborator`)",
    409: "`not_claimable` (not COLLABORATE work), `item_done`, `claim_held` (with `holderId`, "
    "`untilMs`, `generation`), `not_holder` or `stale_generation`",
}


@router.get(
    "/seats/{seat}/backlog",
    response_model=BacklogPage,
    responses=answers({}, *GUARDED, 404, 422, why=UNKNOWN),
)
async def get_backlog(
    seat: str, deps: Deps, view: Annotated[BacklogView, Query(alias="state")] = "open"
) -> Response:
    """The seat's items in the state asked for (open by default), oldest first, and its work
    revision."""
    known = deps.seat(seat)
    store = deps.container.backlog
    items = await run_in_threadpool(store.items, known.member_id, view)
    revision = await run_in_threadpool(store.revision, known.member_id)
    return JSONResponse(
        {"items": [e.to_wire() for e in items], "count": len(items), "revision": revision}
    )


@router.post(
    "/seats/{seat}/backlog/{item}/done",
    response_model=BacklogClosed,
    responses=answers({}, *GUARDED, 404, 429, why=UNKNOWN),
)
async def post_done(seat: str, item: str, deps: Deps) -> Response:
    """Close one of the seat's items: 200 `done` the first time, 200 `already_done` after
    (the first close stands), 404 when the seat has no such item."""
    known = deps.seat(seat)
    closed = await run_in_threadpool(
        lambda: deps.container.backlog.done(
            known.member_id, item, by=known.member_id, now_ms=deps.clock_ms()
        )
    )
    if closed.entry is None:
        return problem(404, "unknown_item", f"no item {item!r} on the backlog of {seat!r}")
    claim = closed.entry.claim
    if claim is not None:
        # On `already_done` too: a close whose release was lost (a crash, a dropped reply)
        # releases when it is repeated.
        await run_in_threadpool(
            lambda: deps.container.claims.close(
                item, by=known.member_id, now_ms=deps.clock_ms(), issue_number=claim.issue_number
            )
        )
    return JSONResponse({"status": closed.status, "item": closed.entry.to_wire()})


# ------------------------------------------------------------------ claims


def _find_item(deps: Deps, item: str) -> BacklogEntry | None:
    """The backlog entry `item`, by id alone: on the seat the backlog's owner index names
    (one lookup at any size of org; the org's seats' backlogs written before the index are
    indexed once, on the first miss), else on the owner its claim recorded (a seat that has
    left the org since)."""
    view = deps.container.org.current()[0]
    backlog = deps.container.backlog
    entry = backlog.find(item, version=view.seat_set_version, seats=lambda: view.seat_ids)
    if entry is not None:
        return entry
    owner = deps.container.claims.owner(item)
    return None if owner is None else backlog.get(owner, item)


def index_backlogs(deps: Deps) -> int | None:
    """Index the org's backlogs written before the owner index existed, once per seat set
    (nothing but one lookup when that was done): the ingress runs it as it starts. None when
    nothing was to do; else how many items it indexed."""
    view = deps.container.org.current()[0]
    return deps.container.backlog.ensure_indexed(view.seat_ids, view.seat_set_version)


async def _claimable(deps: Deps, seat: str, item: str) -> tuple[Seat, BacklogEntry]:
    """The seat and the item it names, or the refusal: 404 for either unknown, 409
    `not_claimable` for an item that carries no claim."""
    known = deps.seat(seat)
    entry = await run_in_threadpool(_find_item, deps, item)
    if entry is None:
        raise Refusal(problem(404, "unknown_item", f"no backlog item {item!r}"))
    if entry.claim is None:
        raise Refusal(
            problem(409, "not_claimable", f"item {item!r} is {entry.route} work, not COLLABORATE")
        )
    return known, entry


ExpectedGeneration = Annotated[int | None, Query(alias="expectedGeneration", ge=1)]


def _stale(item: str, expected: int | None, generation: int | None, holder: str | None) -> Response:
    return problem(
        409,
        "stale_generation",
        f"expectedGeneration: {expected} is stale, the claim on item {item!r} is at generation "
        f"{generation} (held by {holder or 'nobody'}); read it with GET and retry",
        holderId=holder,
        generation=generation,
    )


@router.post(
    "/seats/{seat}/claims/{item}",
    response_model=ClaimTaken,
    responses=answers({}, *GUARDED, 404, 409, 422, 429, why=CLAIM_REFUSED),
)
async def post_claim(
    seat: str, item: str, deps: Deps, expected: ExpectedGeneration = None
) -> Response:
    """The seat takes, renews or takes over the claim on an open COLLABORATE item: 200 with
    the status and the claim; 409 `claim_held` while another seat's lease is live, 409
    `stale_generation` when `expectedGeneration` is given and is not the claim's."""
    known, entry = await _claimable(deps, seat, item)
    assert entry.claim is not None
    if not entry.is_open:
        return problem(409, "item_done", f"item {item!r} is done: there is nothing to claim")
    if known.member_id not in (entry.claim.holder_id, *entry.claim.contributors):
        return problem(
            403,
            "not_a_collaborator",
            f"{seat!r} is neither the holder nor a contributor of item {item!r}",
        )
    result = await run_in_threadpool(
        lambda: deps.container.claims.take(
            item,
            known.member_id,
            owner_id=entry.seat_id,
            now_ms=deps.clock_ms(),
            lease_ms=deps.settings.claim_lease_ms,
            issue_number=entry.claim.issue_number if entry.claim else None,
            expected_generation=expected,
        )
    )
    if result.status == "stale":
        return _stale(item, expected, result.generation, result.holder_id or None)
    if result.status == "held":
        until = (
            f"until {result.until_ms}"
            if result.until_ms is not None
            else f"as a claim on issue #{result.issue_number}, which does not lapse"
        )
        return problem(
            409,
            "claim_held",
            f"item {item!r} is claimed by {result.holder_id!r} {until}",
            holderId=result.holder_id,
            untilMs=result.until_ms,
            generation=result.generation,
        )
    if result.status == "not_open":  # closed between the read above and the take
        return problem(409, "item_done", f"item {item!r} is done: there is nothing to claim")
    return JSONResponse({"status": result.status, "claim": result.to_wire()})


@router.delete(
    "/seats/{seat}/claims/{item}",
    response_model=ClaimReleased,
    responses=answers({}, *GUARDED, 404, 409, 422, why=CLAIM_REFUSED),
)
async def delete_claim(
    seat: str, item: str, deps: Deps, expected: ExpectedGeneration = None
) -> Response:
    """The holder lets the claim go: 200 `released` (or `none` when nobody holds it); 409
    `not_holder` when another seat holds it, 409 `stale_generation` when
    `expectedGeneration` is given and is not the claim's."""
    known, entry = await _claimable(deps, seat, item)
    claims = deps.container.claims
    issue = entry.claim.issue_number if entry.claim else None
    verb = await run_in_threadpool(
        lambda: claims.release(
            item,
            known.member_id,
            now_ms=deps.clock_ms(),
            issue_number=issue,
            expected_generation=expected,
        )
    )
    if verb == "stale":
        now = await run_in_threadpool(
            lambda: claims.get(item, issue_number=issue, owner_id=entry.seat_id)
        )
        generation = await run_in_threadpool(lambda: claims.generation(item, issue_number=issue))
        return _stale(item, expected, generation, None if now is None else now.holder_id)
    if verb == "not_holder":
        holder = await run_in_threadpool(
            lambda: claims.get(item, issue_number=issue, owner_id=entry.seat_id)
        )
        return problem(
            409,
            "not_holder",
            f"{seat!r} does not hold the claim on item {item!r}",
            holderId=None if holder is None else holder.holder_id,
        )
    return JSONResponse({"status": verb, "itemId": item})


@router.get(
    "/seats/{seat}/claims/{item}",
    response_model=ClaimStanding,
    responses=answers({}, *GUARDED, 404, 409, why=CLAIM_REFUSED),
)
async def get_claim(seat: str, item: str, deps: Deps) -> Response:
    """Who holds the claim (null when nobody), whether its lease has lapsed, and its history,
    oldest first."""
    _known, entry = await _claimable(deps, seat, item)
    claims = deps.container.claims
    issue = entry.claim.issue_number if entry.claim else None
    state = await run_in_threadpool(
        lambda: claims.get(item, issue_number=issue, owner_id=entry.seat_id)
    )
    history = await run_in_threadpool(lambda: claims.history(item, issue_number=issue))
    now = deps.clock_ms()
    return JSONResponse(
        {
            "itemId": item,
            "subject": entry.claim.subject(item) if entry.claim else None,
            "issueNumber": issue,
            "ownerId": entry.seat_id,
            "collaborators": entry.claim.to_wire() if entry.claim else None,
            "claim": None if state is None else state.to_wire(),
            "lapsed": None if state is None else state.lapsed(now),
            "history": [e.to_wire() for e in history],
        }
    )
