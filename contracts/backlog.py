"""A seat's backlog entry (issue 10 point 2): what the goal steward dispatched to a seat, as
the backlog store keeps it and `GET /v1/seats/{seat}/backlog` returns it. Pure data.

The id is the steward's dispatch id (`pipeline.goals.dispatch_ids`), so a dispatch repeated
after a crash names the same entry. The route is the dispatch's: SELF, COLLABORATE (with its
`claim`), NEEDS_REVIEW (with its `review`), or `drift` (restore the measurement).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt, field_validator

from contracts._base import Wire
from contracts.goals import WorkCandidate
from contracts.steward import BacklogItem, BacklogState, Claim, ReviewRequirement

BacklogRoute = Literal["SELF", "COLLABORATE", "NEEDS_REVIEW", "drift"]
# What `GET .../backlog?state=` shows: one state, or every entry.
BacklogView = Literal["open", "done", "all"]
BacklogAddVerb = Literal["added", "duplicate"]
BacklogDoneVerb = Literal["done", "already_done", "unknown"]


class BacklogEntry(Wire):
    """One item on a seat's backlog; `doneAtMs` and `doneBy` are set when the seat closes it."""

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
        )
