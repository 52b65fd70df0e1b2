"""Directedness, facts and fan-out take the `Candidate` contract itself: read by attribute,
never dumped, and judged exactly as its camelCase dict is."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import Candidate, Directedness, Seat, SeatFacts
from pipeline.directedness import prepare, resolve_directed
from pipeline.facts import Known, facts_for, learn, places_of, reads_membership
from pipeline.fanout import Roster, RosterSeat, resolve_all
from tests.pipeline.test_fanout import knowns, messages, seats_st


def board(**kw: Any) -> dict[str, Any]:
    return {
        "family": "board",
        "source": "github",
        "deliveryId": "g1",
        "ids": {"channelId": "acme/api", "issueId": "acme/api#7"},
        "board": {"actorId": "ann", **kw},
        "atMs": 1,
    }


OTHER_FAMILIES = [
    board(action="assigned", assigneeIds=["U0SCOUT"]),
    board(action="review_requested", reviewerIds=["scout"]),
    board(action="commented", ownerIds=[" Scout "]),
    board(action="commented", actorId="scout"),
    {
        "family": "calling",
        "source": "x",
        "deliveryId": "c1",
        "call": {"callerId": "ann", "calleeIds": ["u0scout"]},
        "atMs": 1,
    },
    {
        "family": "calendar",
        "source": "x",
        "deliveryId": "e1",
        "calendar": {"action": "update", "organizerId": "ann", "attendeeIds": ["scout"]},
        "atMs": 1,
    },
    {"family": "calendar", "source": "x", "deliveryId": "e2", "atMs": 1},
]
SEAT = {"memberId": "scout", "aliases": ["U0SCOUT"], "names": ["Scout"], "surfaces": {}}
FACTS = {"visibleRepoIds": ["acme/api"], "ownedItemIds": []}


@settings(max_examples=500, deadline=None)
@given(messages())
def test_a_candidate_prepares_as_its_dict_does(candidate: dict[str, Any]) -> None:
    """Preparing the contract gives the very value preparing its camelCase dict gives."""
    model = Candidate.model_validate(candidate)
    assert prepare(model) == prepare(candidate) == prepare(model.to_wire())


@settings(max_examples=500, deadline=None)
@given(st.data(), seats_st, messages())
def test_every_seat_gets_the_same_verdict_from_the_contract(
    data: st.DataObject, seats: list[RosterSeat], candidate: dict[str, Any]
) -> None:
    """resolve_all, places_of, reads_membership, facts_for and learn read a Candidate exactly
    as they read its dict."""
    known = data.draw(knowns(candidate))
    model = Candidate.model_validate(candidate)
    roster = Roster.of(seats)
    assert places_of(model) == places_of(candidate)
    assert reads_membership(model, known.channel) == reads_membership(candidate, known.channel)
    together = resolve_all(model, roster, known, places_of(model))
    assert together == resolve_all(candidate, roster, known, places_of(candidate))
    for s, got in zip(seats, together, strict=True):
        facts = facts_for(model, s.member_id, s.aliases, known)
        assert facts == facts_for(candidate, s.member_id, s.aliases, known)
        listed = known.channel is not None
        assert learn(model, got.verdict, channel_listed=listed) == learn(
            candidate, got.verdict, channel_listed=listed
        )


@pytest.mark.parametrize("candidate", OTHER_FAMILIES)
def test_board_call_and_calendar_contracts_judge_like_their_dicts(
    candidate: dict[str, Any],
) -> None:
    """Every family's rules read the contract's part as they read the dict's."""
    model = Candidate.model_validate(candidate)
    seat, facts = Seat.model_validate(SEAT), SeatFacts.model_validate(FACTS)
    verdict = resolve_directed(candidate, SEAT, FACTS)
    assert resolve_directed(model, seat, facts) == verdict
    assert resolve_directed(model, SEAT, FACTS) == verdict


def test_the_board_cases_reach_their_rules() -> None:
    """The examples above are directed by their own rows, not all ambient."""
    reasons = [resolve_directed(c, SEAT, FACTS).reason for c in OTHER_FAMILIES]
    assert reasons == [
        "assigned",
        "review_requested",
        "item_activity",
        "own_echo",
        "callee",
        "attendee",
        "ambient",
    ]


def test_a_candidate_is_never_dumped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hot path reads the contract's attributes: no camelCase dump per event."""
    model = Candidate.model_validate(
        {
            "family": "messaging",
            "source": "slack",
            "deliveryId": "d",
            "ids": {"channelId": "D1", "threadRootId": "1.1", "messageId": "2.2"},
            "msg": {"authorId": "U0ANN", "channelKind": "DM", "audienceIds": ["U0SCOUT"]},
            "atMs": 1,
        }
    )

    def no_dump(*_: Any, **__: Any) -> Any:
        raise AssertionError("the candidate was dumped")

    monkeypatch.setattr(Candidate, "model_dump", no_dump)
    seat = RosterSeat("scout", SEAT, frozenset({"scout", "u0scout"}))
    places = places_of(model)
    assert reads_membership(model, None) is True
    [got] = resolve_all(model, Roster.of([seat]), Known(), places)
    assert (got.verdict.reason, got.learned.joined) == ("dm", True)
    assert learn(model, Directedness(directed=True, reason="mention", why=""), channel_listed=True)
