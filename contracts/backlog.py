"""A seat's backlog entry (issue 10 point 2): what the goal steward dispatched to a seat, as
the backlog store keeps it and `GET /v1/seats/{seat}/backlog` returns it. Pure data.

The id is the steward's dispatch id (`pipeline.goals.dispatch_ids`), so a dispatch repeated
after a crash names the same entry. The route is the dispatch's: SELF, COLLABORATE (with its
`claim`), NEEDS_REVIEW (with its `review`), or `drift` (restore the measurement).

A COLLABORATE item's exclusive claim (`workers.stores.claims`, the one claim system: on the
item itself, or on the repository issue its candidate names) is described here too: the verbs
its scripts answer, its stored state and its history events. `untilMs` is null only when the
claim's subject is an issue owned by a standing claim (`coordinate_issue`), which never lapses;
`generation` is the subject's, as `get_issue_coordination` shows it for an issue.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt, field_validator

from contracts._base import Wire
from contracts.goals import WorkCandidate
from contracts.journal import ClaimTakeVerb
from contracts.steward import BacklogItem, BacklogState, Claim, ReviewRequirement

BacklogRoute = Literal["SELF", "COLLABORATE", "NEEDS_REVIEW", "drift"]
# What `GET .../backlog?state=` shows: one state, or every entry.
BacklogView = Literal["open", "done", "all"]
BacklogAddVerb = Literal["added", "duplicate"]
BacklogDoneVerb = Literal["done", "already_done", "unknown"]


class BacklogEntry(Wire):
    """One item on a seat's backlog; `doneAtMs` and `doneBy` are set when the seat closes it.
    `forMemberId` names the person the item is for when that is not the seat itself: the
    objective's owner on a drift item ("restore the measurement"), the reviewer or the
    collaborator on reviewed and shared work."""

    id: str = Field(min_length=1)
    seat_id: str = Field(min_length=1)
    objective_key: str = Field(min_length=1)
    title: str = ""
    route: BacklogRoute
    state: BacklogState = "open"
    added_at_ms: StrictInt = Field(ge=0)
    done_at_ms: StrictInt | None = Field(default=None, ge=0)
    done_by: str | None = None
    review: ReviewRequirement | None = None
    claim: Claim | None = None
    candidate: WorkCandidate | None = None
    for_member_id: str | None = None

    @field_validator("id")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        # The store keeps the seat's revision in the same hash under a ':'-prefixed field.
        if value.startswith(":"):
            raise ValueError("a backlog id must not start with ':' (reserved)")
        return value

    @property
    def is_open(self) -> bool:
        return self.state == "open"

    def shown_in(self, view: BacklogView) -> bool:
        """Whether this entry belongs in `view` (`all`, or its own state)."""
        return view == "all" or view == self.state

    def closed(self, *, by: str, now_ms: int) -> BacklogEntry:
        """This entry, done by `by` at `now_ms`."""
        return self.model_copy(update={"state": "done", "done_at_ms": now_ms, "done_by": by})

    def as_item(self) -> BacklogItem:
        """What the steward's planner reads of it (`openItems`, coverage)."""
        return BacklogItem(
            id=self.id,
            title=self.title,
            objective_key=self.objective_key,
            seat_id=self.seat_id,
            state=self.state,
            route=self.route,
        )


# --------------------------------------------------------------------- claims

# `Claims.take` and `Claims.release` answer their scripts' verbs (contracts/journal.py).
# What a claim's history records, one event per write.
ClaimEventKind = Literal["taken", "renewed", "takeover", "released"]


class ClaimState(Wire):
    """Who holds an item's claim now, as stored: raw, with no clock in it (see `lapsed`)."""

    item_id: str
    holder_id: str
    owner_id: str  # the seat whose backlog holds the item
    since_ms: StrictInt  # when this holder took it (a renewal keeps it)
    until_ms: StrictInt | None  # when the lease lapses unless renewed (None: it never does)
    generation: StrictInt | None = None  # the subject's: +1 on every change of owner
    subject: str | None = None  # `item:<id>` or `issue:<n>`
    issue_number: StrictInt | None = None  # the issue the claim is on, if any

    def lapsed(self, now_ms: int) -> bool:
        """Whether another collaborator may take the claim over at `now_ms` (a standing
        issue claim, with no `untilMs`, never lapses)."""
        return self.until_ms is not None and self.until_ms <= now_ms


class ClaimResult(Wire):
    """What one take did. `holderId`/`untilMs` are the claim after it (the other seat's on
    `held`); `previousHolderId` is the lapsed holder on `takeover`; `not_open` has neither."""

    status: ClaimTakeVerb
    item_id: str
    holder_id: str | None = None
    owner_id: str | None = None
    since_ms: StrictInt | None = None
    until_ms: StrictInt | None = None
    previous_holder_id: str | None = None
    generation: StrictInt | None = None  # the subject's after the take (the holder's on `held`)
    subject: str | None = None  # `item:<id>` or `issue:<n>`
    issue_number: StrictInt | None = None

    @property
    def holds(self) -> bool:
        """Whether the caller holds the claim after this take."""
        return self.status in ("taken", "renewed", "takeover")


class ClaimEvent(Wire):
    """One write to a claim: who did it (`seatId`), whose it was before (`previousHolderId`:
    the lapsed holder of a takeover, the released holder of a release), and when."""

    event: ClaimEventKind
    seat_id: str
    previous_holder_id: str | None = None
    at_ms: StrictInt
    until_ms: StrictInt | None = None  # the lease end a take or renewal set
    generation: StrictInt | None = None  # the subject's after this write (None: written before)
