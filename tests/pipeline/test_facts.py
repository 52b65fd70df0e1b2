"""A seat's facts for one event (from the org file, what was learned, and the delivery's
audience), and what an event teaches: the membership and thread rules of directedness
(docs/architecture.md)."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import Channel, Directedness
from pipeline.directedness import aliases_of, resolve_directed
from pipeline.facts import (
    Known,
    Learned,
    facts_for,
    learn,
    learn_from_send,
    places_of,
    reads_membership,
)

SEAT: dict[str, Any] = {"memberId": "scout", "aliases": ["U0SCOUT"], "names": ["Scout"]}
ME = aliases_of(SEAT)
PUBLIC = Channel(id="C1", kind="PUBLIC", member_ids=("ann",))
PRIVATE = Channel(id="G1", kind="PRIVATE", member_ids=("ann", "scout"))
PRIVATE_ELSEWHERE = Channel(id="G2", kind="PRIVATE", member_ids=("ann",))


def msg(channel: str = "C1", kind: str = "PUBLIC", **kw: Any) -> dict[str, Any]:
    ids = {
        "channelId": channel,
        "messageId": kw.pop("ts", "100.1"),
        "threadRootId": kw.pop("thread", None),
    }
    return {
        "family": "messaging",
        "source": "slack",
        "deliveryId": "d",
        "ids": ids,
        "msg": {"authorId": "U0ANN", "body": "", "channelKind": kind, **kw},
        "atMs": 1,
    }


def facts(candidate: dict[str, Any], known: Known) -> dict[str, Any]:
    return dict(facts_for(candidate, "scout", ME, known))


def reason(candidate: dict[str, Any], known: Known) -> str:
    return resolve_directed(candidate, SEAT, facts(candidate, known)).reason


def test_a_listed_public_channel_is_visible_but_not_joined() -> None:
    assert facts(msg(), Known(channel=PUBLIC)) == {
        "visibleChannelIds": ["C1"],
        "memberChannelIds": [],
    }


def test_a_listed_private_channel_is_visible_only_to_its_members() -> None:
    """The org file lists who may read a private channel: anyone else must not act on it."""
    mine = msg("G1", "PRIVATE", mentions=["U0SCOUT"])
    theirs = msg("G2", "PRIVATE", mentions=["U0SCOUT"])
    assert facts(mine, Known(channel=PRIVATE))["visibleChannelIds"] == ["G1"]
    assert facts(theirs, Known(channel=PRIVATE_ELSEWHERE))["visibleChannelIds"] == []
    assert reason(mine, Known(channel=PRIVATE)) == "mention"
    assert reason(theirs, Known(channel=PRIVATE_ELSEWHERE)) == "not_visible"


def test_a_channel_the_org_file_does_not_list_is_unknown_and_never_blocks() -> None:
    """Neither hidden nor joined: the keys are absent, which `SeatFacts` reads as unknown."""
    assert facts(msg("C9", mentions=["U0SCOUT"]), Known()) == {}
    assert reason(msg("C9", mentions=["U0SCOUT"]), Known()) == "mention"


def test_the_org_file_decides_for_a_channel_it_lists() -> None:
    """What was learned (a send, a delivery's audience) never overrides the org file: a seat
    taken out of a private channel there is out of it at once."""
    learned = Known(channel=PRIVATE_ELSEWHERE, channel_seats=frozenset({"scout"}))
    mentioned = msg("G2", "PRIVATE", mentions=["U0SCOUT"], audienceIds=["U0SCOUT"])
    assert facts(mentioned, learned) == {"visibleChannelIds": [], "memberChannelIds": []}
    assert reason(mentioned, learned) == "not_visible"
    listed_dm = Channel(id="D1", kind="DM", member_ids=("ann", "ben"))
    to_me = msg("D1", "DM", body="hi", audienceIds=["U0SCOUT"])
    assert reason(to_me, Known(channel=listed_dm)) == "not_visible"


def test_learned_membership_makes_an_unlisted_dm_mine() -> None:
    """A seat that sent to a conversation the org file does not list belongs to it."""
    dm = msg("D7", "DM", body="are you there?")
    assert reason(dm, Known(channel_seats=frozenset({"scout"}))) == "dm"
    assert facts(dm, Known(channel_seats=frozenset({"scout"}))) == {"memberChannelIds": ["D7"]}


def test_an_unlisted_dm_is_mine_only_when_delivered_to_me() -> None:
    """A DM the org file does not list: the delivery's audience (Slack's authorizations)
    names the seat's own user, or the DM is not known to be the seat's."""
    to_me = msg("D7", "DM", body="are you there?", audienceIds=["u0scout"])
    to_other = msg("D7", "DM", body="are you there?", audienceIds=["U0TALLY"])
    bare = msg("D7", "DM", body="are you there?")
    assert facts(to_me, Known()) == {"memberChannelIds": ["D7"]}
    assert reason(to_me, Known()) == "dm"
    assert facts(to_other, Known()) == {} and reason(to_other, Known()) == "ambient"
    assert reason(bare, Known()) == "ambient"
    # The audience counts only for direct conversations, never for a public channel.
    public = msg("C9", "PUBLIC", body="hello", audienceIds=["U0SCOUT"])
    assert facts(public, Known()) == {}


@pytest.mark.parametrize("kind", ["PUBLIC", "PRIVATE", "DM", "GROUP_DM"])
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"mentions": ["U0ANN"]},
        {"body": "Scout, look"},
        {"thread": "9.9"},
        {"authorId": "scout"},
    ],
)
def test_learned_membership_is_read_only_where_it_can_change_a_verdict(
    kind: str, extra: dict[str, Any]
) -> None:
    """The stage skips the read of learned membership unless `reads_membership` says it can
    count; for every other event, knowing the seat belongs to the channel changes nothing."""
    candidate = msg("C9", kind, **extra)
    member = Known(channel_seats=frozenset({"scout"}))
    differs = reason(candidate, member) != reason(candidate, Known())
    assert reads_membership(candidate, None) == (kind in ("DM", "GROUP_DM"))
    if not reads_membership(candidate, None):
        assert not differs
    assert not reads_membership(candidate, PUBLIC)  # a listed channel: the org file decides


def test_a_group_dm_listed_with_the_seat_is_mine() -> None:
    group = Channel(id="M1", kind="GROUP_DM", member_ids=("ann", "ben", "scout"))
    assert reason(msg("M1", "GROUP_DM", body="thoughts?"), Known(channel=group)) == "dm"


def test_threads_the_seat_spoke_or_was_named_in_are_known_per_thread() -> None:
    reply = msg(thread="50.0", ts="60.0", body="and then?")
    assert facts(reply, Known(spoke=frozenset({"scout"})))["spokenThreadIds"] == ["50.0"]
    assert facts(reply, Known(named=frozenset({"scout"})))["namedThreadIds"] == ["50.0"]
    assert facts(reply, Known(spoke=frozenset({"tally"})))["spokenThreadIds"] == []
    assert reason(reply, Known(named=frozenset({"scout"}))) == "thread_participant"
    assert reason(reply, Known(spoke=frozenset({"tally"}))) == "ambient"


def test_an_owned_board_item_is_a_fact_only_for_its_item() -> None:
    comment = {
        "family": "board",
        "source": "github",
        "deliveryId": "g",
        "ids": {"channelId": "acme/api", "issueId": "acme/api#7"},
        "board": {"action": "commented", "actorId": "ann", "body": "any news?"},
        "atMs": 1,
    }
    assert places_of(comment).item_id == "acme/api#7"
    owned = Known(item_seats=frozenset({"scout"}))
    assert facts(comment, owned)["ownedItemIds"] == ["acme/api#7"]
    assert "ownedItemIds" not in facts(comment, Known())
    assert reason(comment, owned) == "item_activity"
    assert reason(comment, Known()) == "ambient"


def verdict(directed: bool, reason_code: str) -> Directedness:
    return Directedness(directed=directed, reason=reason_code, why="w")


@pytest.mark.parametrize(
    ("candidate", "given", "listed", "expected"),
    [
        # The seat's own message: it has spoken in that thread, or in the thread it may start.
        (msg(thread="50.0", ts="60.0"), verdict(False, "own_echo"), True, Learned(spoke_in="50.0")),
        (msg(ts="70.0"), verdict(False, "own_echo"), True, Learned(spoke_in="70.0")),
        # A reply to the seat's message: the seat spoke in that thread.
        (msg(thread="50.0"), verdict(True, "reply_to_me"), True, Learned(spoke_in="50.0")),
        # Named or mentioned: replies in that thread (or under that message) concern it.
        (msg(thread="50.0"), verdict(True, "mention"), True, Learned(named_in="50.0")),
        (msg(ts="80.0"), verdict(True, "named"), True, Learned(named_in="80.0")),
        # A DM the org file does not list becomes the seat's; a listed one teaches nothing.
        (msg("D7", "DM"), verdict(True, "dm"), False, Learned(joined=True)),
        (msg("D7", "DM"), verdict(True, "dm"), True, Learned()),
        # Nothing is learned from what does not concern the seat.
        (msg(thread="50.0"), verdict(False, "ambient"), True, Learned()),
        (msg(thread="50.0"), verdict(False, "surface_disabled"), True, Learned()),
    ],
)
def test_what_a_message_teaches(
    candidate: dict[str, Any], given: Directedness, listed: bool, expected: Learned
) -> None:
    assert learn(candidate, given, channel_listed=listed) == expected


@pytest.mark.parametrize(
    "given",
    [
        verdict(True, "assigned"),
        verdict(True, "review_requested"),
        verdict(True, "mention"),
        verdict(False, "own_echo"),
    ],
)
def test_a_board_item_the_seat_is_involved_in_is_followed(given: Directedness) -> None:
    """Assigned, asked to review, @mentioned, or its own change (a comment, an issue it opened):
    the seat follows the item from then on."""
    item = {"family": "board", "ids": {"channelId": "acme/api", "issueId": "acme/api#7"}}
    assert learn(item, given, channel_listed=False) == Learned(owns_item=True)


@pytest.mark.parametrize(
    "given",
    [
        verdict(False, "ambient"),
        verdict(False, "surface_disabled"),
        verdict(False, "not_visible"),
        verdict(True, "item_activity"),
        verdict(True, "review_request_removed"),
    ],
)
def test_other_board_verdicts_teach_nothing(given: Directedness) -> None:
    """Activity the seat merely hears of, or cannot read, does not make it follow the item."""
    item = {"family": "board", "ids": {"channelId": "acme/api", "issueId": "acme/api#7"}}
    assert not learn(item, given, channel_listed=False)


def test_a_send_teaches_membership_and_the_thread() -> None:
    assert learn_from_send("50.0", "60.0") == Learned(spoke_in="50.0", joined=True)
    assert learn_from_send(None, "60.0") == Learned(spoke_in="60.0", joined=True)
