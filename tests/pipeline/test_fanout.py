"""One event resolved for every seat at once gives exactly the per-seat verdicts: the same
rules (`resolve_directed` with each seat's `facts_for`), run only for the seats it can concern."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import Channel
from pipeline.directedness import aliases_of, own_ids_of, resolve_directed
from pipeline.facts import Known, facts_for, learn, places_of
from pipeline.fanout import Resolved, Roster, RosterSeat, resolve_all

MEMBERS = ["scout", "tally", "ann", "bob"]
ALIASES = ["U0SCOUT", "U0TALLY", "u0ann", "Scout", "bob", "github:bob", " U0X "]
# Names and words whose case a regex compares differently from `str.lower` (`ſ` is an `s`,
# `K` a Kelvin sign, `İ`) or that have no word character take the index's slow paths.
NAMES = ["Scout", "Tally", "Ann", "Ann Lee", "Bo", "scout.bot", "José", "@bot", "R2-D2", "!!"]
WORDS = ["hello", "@Scout", "Ann-Lee", "scout.bot.", "x@Tally", ",", "JOSÉ", "ſcout", "SCOUT"]
WORDS += ["\u212aelvin", "İ", "ann lee", "bot", "r2-d2", "!!", "\U0001f600", "“Tally”"]
KINDS = ["PUBLIC", "PRIVATE", "DM", "GROUP_DM"]
SURFACES = ["mention", "thread_reply", "dm", "assigned"]
OWN_IDS = ["B0SCOUTAPP", "B0SHARED", "U0SCOUT"]  # a Slack app's bot_id, or a shared bot user


def seat(
    member: str, aliases: list[str], names: list[str], off: list[str], own: tuple[str, ...] = ()
) -> RosterSeat:
    wire = {
        "memberId": member,
        "aliases": aliases,
        "names": tuple(names),
        "surfaces": {s: False for s in off},
        "ownIds": list(own),
    }
    return RosterSeat(member, wire, aliases_of(wire), own_ids_of(wire))


seats_st = st.lists(
    st.builds(
        seat,
        st.sampled_from(MEMBERS),
        st.lists(st.sampled_from(ALIASES), max_size=3),
        st.lists(st.sampled_from(NAMES), max_size=2),
        st.lists(st.sampled_from(SURFACES), max_size=2),
        st.lists(st.sampled_from(OWN_IDS), max_size=2).map(tuple),
    ),
    max_size=5,
    unique_by=lambda s: s.member_id,
)
ident_st = st.sampled_from([*MEMBERS, *ALIASES, *OWN_IDS, "U0OTHER", ""])
body_st = st.lists(st.sampled_from([*NAMES, *WORDS]), max_size=5).map(" ".join)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    thread = draw(st.sampled_from([None, "100.1", "200.2"]))
    family = draw(st.sampled_from(["messaging"] * 6 + ["board", "calling", "calendar"]))
    return {
        "family": family,
        "source": "slack",
        "deliveryId": "d",
        "ids": {
            "channelId": draw(st.sampled_from(["C1", "G1", "D1", ""])),
            "messageId": "300.3",
            "threadRootId": thread,
            "issueId": draw(st.sampled_from([None, "42"])),
        },
        "msg": {
            "authorId": draw(ident_st),
            "parentAuthorId": draw(st.none() | ident_st),
            "mentions": draw(st.lists(ident_st, max_size=2)),
            "body": draw(body_st),
            "channelKind": draw(st.sampled_from(KINDS)),
            "audienceIds": draw(st.lists(ident_st, max_size=2)),
        },
        "board": {
            "action": draw(st.sampled_from(BOARD_ACTIONS)),
            "actorId": draw(ident_st),
            "assigneeIds": draw(st.lists(ident_st, max_size=2)),
            "reviewerIds": draw(st.lists(ident_st, max_size=2)),
            "ownerIds": draw(st.lists(ident_st, max_size=2)),
            "mentions": draw(st.lists(ident_st, max_size=2)),
        },
        "call": {
            "callerId": draw(ident_st),
            "calleeIds": draw(st.lists(ident_st, max_size=2)),
        },
        "calendar": {
            "organizerId": draw(ident_st),
            "action": draw(st.sampled_from(["invite", "update", "cancel", "rsvp"])),
            "attendeeIds": draw(st.lists(ident_st, max_size=2)),
        },
        "atMs": 1,
    }


BOARD_ACTIONS = ["assigned", "commented", "review_requested", "review_request_removed"]
BOARD_ACTIONS += ["reviewed", "opened", ""]
members_st = st.frozensets(st.sampled_from(MEMBERS))


@st.composite
def knowns(draw: st.DrawFn, candidate: dict[str, Any]) -> Known:
    channel = None
    if draw(st.booleans()) and candidate["ids"]["channelId"]:
        channel = Channel(
            id=candidate["ids"]["channelId"],
            kind=draw(st.sampled_from(KINDS)),
            member_ids=tuple(draw(members_st)),
        )
    return Known(
        channel=channel,
        channel_seats=draw(members_st),
        spoke=draw(members_st),
        named=draw(members_st),
        item_seats=draw(members_st),
    )


def one_by_one(candidate: dict[str, Any], seats: list[RosterSeat], known: Known) -> list[Any]:
    places = places_of(candidate)
    out = []
    for s in seats:
        facts = facts_for(candidate, s.member_id, s.aliases, known, places=places)
        verdict = resolve_directed(candidate, s.wire, facts)
        taught = learn(candidate, verdict, channel_listed=known.channel is not None)
        out.append(Resolved(s.member_id, verdict, taught))
    return out


@settings(max_examples=1500, deadline=None)
@given(st.data(), seats_st, messages())
def test_every_seat_gets_the_verdict_it_gets_alone(
    data: st.DataObject, seats: list[RosterSeat], candidate: dict[str, Any]
) -> None:
    known = data.draw(knowns(candidate))
    together = resolve_all(candidate, Roster.of(seats), known, places_of(candidate))
    assert together == one_by_one(candidate, seats, known)


def message(body: str = "", **msg: Any) -> dict[str, Any]:
    return {
        "family": "messaging",
        "source": "slack",
        "deliveryId": "d",
        "ids": {"channelId": "C1", "messageId": "1.1", "threadRootId": msg.pop("thread", None)},
        "msg": {"authorId": "U0ANN", "body": body, "channelKind": "PUBLIC", **msg},
        "atMs": 1,
    }


ROSTER = Roster.of(
    [
        seat("ann", ["U0ANN"], ["Ann"], []),
        seat("lee", ["U0LEE"], ["Ann Lee"], []),
        seat("scout", ["U0SCOUT"], ["Scout"], []),
    ]
)


def reasons(candidate: dict[str, Any], known: Known | None = None) -> dict[str, str]:
    got = resolve_all(candidate, ROSTER, known or Known(), places_of(candidate))
    return {r.seat_id: r.verdict.reason for r in got}


def test_a_longer_name_does_not_hide_a_shorter_one() -> None:
    """The roster's one pattern only says whether anybody is named; each seat's own pattern
    decides, so "Ann Lee" names both the seat called Ann Lee and the one called Ann."""
    assert reasons(message("Ann Lee, can you look?", authorId="U0BOB")) == {
        "ann": "named",
        "lee": "named",
        "scout": "ambient",
    }


def test_the_seats_an_event_concerns_are_found_by_alias_and_thread() -> None:
    assert reasons(message("hi", mentions=["u0scout "])) == {
        "ann": "own_echo",
        "lee": "ambient",
        "scout": "mention",
    }
    in_thread = Known(spoke=frozenset({"lee"}))
    assert reasons(message("ok", thread="9.9", authorId="U0BOB"), in_thread)["lee"] == (
        "thread_participant"
    )


def test_a_private_listed_channel_is_hidden_from_seats_outside_it() -> None:
    private = Known(channel=Channel(id="C1", kind="PRIVATE", member_ids=("scout",)))
    assert reasons(message("standup notes", authorId="U0BOB"), private) == {
        "ann": "not_visible",
        "lee": "not_visible",
        "scout": "ambient",
    }


def test_a_message_by_a_seats_app_is_found_as_its_echo() -> None:
    """A message whose author is only a seat's bot_id (ownIds) is that seat's own echo in the
    fan-out, though it names the seat and nobody is mentioned."""
    roster = Roster.of([seat("scout", ["U0SCOUT"], ["Scout"], [], ("B0SCOUTAPP",))])
    message = {
        "family": "messaging",
        "source": "slack",
        "deliveryId": "d",
        "ids": {"channelId": "C1", "messageId": "1.0"},
        "msg": {"authorId": "B0SCOUTAPP", "body": "Scout here: done.", "channelKind": "PUBLIC"},
        "atMs": 1,
    }
    [resolved] = resolve_all(message, roster, Known(), places_of(message))
    assert resolved.verdict.reason == "own_echo"


EVERY_NAME = [seat(f"s{i}", [f"U0S{i}"], [name], []) for i, name in enumerate(NAMES)]
EVERY_NAME.append(seat("kelvin", ["U0K"], ["\u212aelvin"], []))  # a name with a Kelvin sign


@pytest.mark.parametrize("first", [*NAMES, *WORDS, "kelvin"])
def test_every_name_is_found_as_its_own_pattern_finds_it(first: str) -> None:
    """Each name and word, alone and before and after every other: the roster's index finds
    exactly the seats the per-seat loop names (`ſcout` is a `Scout`, `kelvin` a `Kelvin`,
    `JOSÉ` a `José`, `ann lee` both `Ann` and `Ann Lee`)."""
    roster = Roster.of(EVERY_NAME)
    for other in ["", *NAMES, *WORDS]:
        for body in (first, f"{first} {other}", f"{other} {first}"):
            candidate = message(body, authorId="U0NOBODY")
            got = resolve_all(candidate, roster, Known(), places_of(candidate))
            assert got == one_by_one(candidate, EVERY_NAME, Known()), body
