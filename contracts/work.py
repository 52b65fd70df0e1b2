"""A seat's work report: the `work` object the engagement decision reads (`decide_engagement`),
plus seatId and revision.

Inbound, so unknown fields are refused: a misspelt `selfServeExhausted` must be a 422, not a
quietly different decision. Pure data.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from contracts._base import StrictWire

WorkState = Literal["in_progress", "blocked", "failed", "done"]
BlockerKind = Literal["decision", "access", "information", "approval", "capacity"]


class Origin(StrictWire):
    surface: str | None = None
    channel_id: str | None = None
    thread_root_id: str | None = None
    requester_id: str | None = None


class Blocker(StrictWire):
    kind: BlockerKind | None = None
    scope: str | None = None
    detail: str | None = None
    owner_id: str | None = None


class Risk(StrictWire):
    irreversible: bool = False
    external: bool = False
    financial: bool = False


class Review(StrictWire):
    required: bool = False
    requested: bool = False
    kind: str | None = None
    scope: str | None = None
    detail: str | None = None
    reviewer_id: str | None = None


class Commitment(StrictWire):
    to_member_id: str | None = None
    due_at_ms: int | None = None
    at_risk: bool = False


class WorkReport(StrictWire):
    """One piece of a seat's work, as the seat reports it."""

    id: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
    title: str = Field(default="", max_length=500)
    # The ask's first line in place of its trigger's template headline: for a report whose
    # first sentence must be its verdict (the work controller's escalation, issue 12).
    headline: str | None = Field(default=None, max_length=500)
    summary: str | None = Field(default=None, max_length=8000)
    scope: str | None = Field(default=None, max_length=500)
    question: str | None = Field(default=None, max_length=2000)
    options: tuple[str, ...] = Field(default=(), max_length=20)
    link: str | None = Field(default=None, max_length=2000)
    tried: tuple[str, ...] = Field(default=(), max_length=50)
    state: WorkState = "in_progress"
    origin: Origin | None = None
    blocker: Blocker | None = None
    self_serve_exhausted: bool = False
    risk: Risk | None = None
    review: Review | None = None
    commitment: Commitment | None = None
    interested_parties: tuple[str, ...] = Field(default=(), max_length=100)
    durable: bool = False
    approver_id: str | None = None
    seat_id: str | None = None
    revision: int = Field(default=1, ge=0)
