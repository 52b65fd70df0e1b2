"""Contracts accept plain camelCase JSON (as a seat or a gateway sends it) and give it back
unchanged."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts import Channel, LedgerRow, Member, WorkReport

SEED_WORK = {
    "id": "w1",
    "title": "Deploy",
    "headline": None,
    "summary": "s",
    "scope": "billing",
    "question": "q?",
    "options": ["a", "b"],
    "link": "https://x",
    "tried": ["t"],
    "state": "blocked",
    "origin": {"surface": "chat", "channelId": "C1", "threadRootId": "1.2", "requesterId": "m"},
    "blocker": {"kind": "access", "scope": "db", "detail": "d", "ownerId": "o"},
    "selfServeExhausted": True,
    "risk": {"irreversible": True, "external": False, "financial": False},
    "review": {
        "required": True,
        "requested": False,
        "kind": "security",
        "scope": None,
        "detail": None,
        "reviewerId": "r",
    },
    "commitment": {"toMemberId": "m", "dueAtMs": 5, "atRisk": True},
    "interestedParties": ["x"],
    "durable": True,
    "approverId": "a",
    "seatId": "scout",
    "revision": 2,
}


def test_work_report_round_trips_camel_case() -> None:
    """A plain camelCase work object dumps back to the same camelCase JSON."""
    assert WorkReport.model_validate(SEED_WORK).model_dump(by_alias=True, mode="json") == SEED_WORK


def test_work_report_refuses_unknown_fields() -> None:
    """A misspelt field is an error, not a silently different decision."""
    with pytest.raises(ValidationError, match="selfServeExhaused"):
        WorkReport.model_validate({"id": "w", "selfServeExhaused": True})


def test_member_and_channel_accept_seed_shapes() -> None:
    """Members and channels read their camelCase keys; channel kinds are case-insensitive."""
    m = Member.model_validate(
        {
            "id": "a",
            "displayName": "A",
            "roleTitle": "R",
            "owns": ["x"],
            "supervisorId": "b",
            "status": "archived",
        }
    )
    assert (m.display_name, m.role_title, m.owns, m.engageable_status) == ("A", "R", ("x",), False)
    assert Channel.model_validate({"id": "C", "kind": "group_dm", "memberIds": ["a"]}).kind == (
        "GROUP_DM"
    )


def test_reservation_counts_only_until_it_expires() -> None:
    """A reserved row holds a place until its expiry and not after."""
    row = LedgerRow.model_validate(
        {"atMs": 0, "seatId": "s", "workId": "w", "outcome": "reserved", "expiresAtMs": 100}
    )
    assert row.counts_at(99) and not row.counts_at(100)
