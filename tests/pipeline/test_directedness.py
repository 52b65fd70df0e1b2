"""Directedness: every rule (docs/architecture.md, "Directedness"), in order, against the seat's
alias set."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts import Candidate, Seat, SeatFacts
from pipeline.directedness import aliases_of, resolve_directed

SEAT: dict[str, Any] = {
    "memberId": "scout",
    "aliases": ["U0SCOUT", "Scout@Example.com", " github-scout "],
    "names": ["Scout"],
}
FACTS: dict[str, Any] = {
    "visibleChannelIds": ["C1", "D1", "G1"],
    "memberChannelIds": ["D1", "G1", "C1"],
    "spokenThreadIds": ["t-spoke"],
    "namedThreadIds": ["t-named"],
}


def msg(**kw: Any) -> dict[str, Any]:
    ids = {"channelId": kw.pop("channel", "C1"), "threadRootId": kw.pop("thread", None)}
    return {
        "family": "messaging",
        "source": "slack",
        "deliveryId": "d1",
        "ids": ids,
        "msg": {"authorId": "U0ANN", "body": "", "mentions": [], "channelKind": "PUBLIC", **kw},
        "atMs": 1,
    }


def board(**kw: Any) -> dict[str, Any]:
    return {
        "family": "board",
        "source": "github",
        "deliveryId": "g1",
        "ids": {"channelId": kw.pop("repo", "acme/api"), "issueId": kw.pop("issue", "acme/api#7")},
        "board": {"actorId": "ann", **kw},
        "atMs": 1,
    }


def decide(
    candidate: dict[str, Any],
    seat: dict[str, Any] | None = None,
    facts: dict[str, Any] | None = FACTS,
) -> tuple[bool, str | None, str]:
    d = resolve_directed(candidate, seat or SEAT, facts)
    return d.directed, d.surface, d.reason


# ---------------------------------------------------------------- messaging, rule by rule


def test_own_message_echoed_back_is_own_echo_by_any_alias() -> None:
    """A message the seat wrote, under any of its aliases, is its own echo."""
    for author in ("scout", "U0SCOUT", "u0scout", "scout@example.com", "github-scout"):
        assert decide(msg(authorId=author, mentions=["U0SCOUT"])) == (False, None, "own_echo")


def test_channel_the_seat_may_not_read_is_not_visible() -> None:
    """A channel outside the seat's visible set is never acted on, even with a mention."""
    assert decide(msg(channel="C-SECRET", mentions=["U0SCOUT"])) == (False, None, "not_visible")


def test_unknown_visibility_never_blocks() -> None:
    """Without visibility facts, a mention still reaches the seat."""
    assert decide(msg(channel="C9", mentions=["U0SCOUT"]), facts={}) == (True, "mention", "mention")


@pytest.mark.parametrize("kind,channel", [("DM", "D1"), ("GROUP_DM", "G1")])
def test_direct_conversation_the_seat_is_in_is_dm(kind: str, channel: str) -> None:
    """A DM or group DM the seat is a member of is directed, whatever it says."""
    assert decide(msg(channel=channel, channelKind=kind, body="hi")) == (True, "dm", "dm")


def test_dm_channel_the_seat_is_not_a_member_of_is_not_a_dm() -> None:
    """Membership must be known: a DM channel the seat is not in falls through to ambient."""
    facts = {**FACTS, "memberChannelIds": ["C1"]}
    assert decide(msg(channel="D1", channelKind="DM"), facts=facts) == (False, None, "ambient")


def test_reply_to_my_message_is_a_thread_reply() -> None:
    """A reply whose parent the seat wrote is directed as reply_to_me."""
    got = decide(msg(parentAuthorId="U0SCOUT", thread="t-x"))
    assert got == (True, "thread_reply", "reply_to_me")


def test_structured_mention_by_provider_id_reaches_a_seat_configured_by_slug() -> None:
    """mentions[] keyed by the Slack id reaches the seat whose member id is its slug."""
    assert decide(msg(mentions=["U0ANN", "U0SCOUT"])) == (True, "mention", "mention")


def test_structured_mention_by_slug_reaches_the_seat_too() -> None:
    """mentions[] keyed by the member id (slug) matches case-insensitively."""
    assert decide(msg(mentions=["SCOUT"])) == (True, "mention", "mention")


def test_name_in_prose_counts_only_when_nobody_is_mentioned() -> None:
    """'@Scout' in the text is a mention of last resort, reason named."""
    assert decide(msg(body="can @Scout look at this?")) == (True, "mention", "named")
    assert decide(msg(body="Scout, are you there")) == (True, "mention", "named")


def test_prose_naming_me_is_ignored_when_mentions_name_someone_else() -> None:
    """A populated mentions[] says who it is for: prose naming the seat does not override."""
    assert decide(msg(body="ask Scout later", mentions=["U0ANN"])) == (False, None, "ambient")


@pytest.mark.parametrize(
    "body",
    ["scouting the area", "mail scout@example.com", "see Scout.md", "@scoutbot do it", "boy-scout"],
)
def test_name_inside_other_words_is_not_naming_the_seat(body: str) -> None:
    """Only the whole name counts: not a longer word, an address, a path or a handle."""
    assert decide(msg(body=body)) == (False, None, "ambient")


def test_thread_the_seat_spoke_or_was_named_in_is_a_thread_reply() -> None:
    """Later messages in a thread the seat took part in are directed to it."""
    assert decide(msg(thread="t-spoke")) == (True, "thread_reply", "thread_participant")
    assert decide(msg(thread="t-named")) == (True, "thread_reply", "thread_participant")


def test_anything_else_is_ambient() -> None:
    """Chatter that addresses nobody, or others, is ambient."""
    assert decide(msg(body="lunch?")) == (False, None, "ambient")
    assert decide(msg(mentions=["U0ANN"])) == (False, None, "ambient")


def test_rule_order_first_match_wins() -> None:
    """Own echo beats visibility, visibility beats DM, DM beats reply, reply beats mention."""
    assert decide(msg(authorId="scout", channel="C-SECRET")) == (False, None, "own_echo")
    assert decide(msg(channel="C-SECRET", channelKind="DM"))[2] == "not_visible"
    dm = msg(channel="D1", channelKind="DM", parentAuthorId="scout", mentions=["scout"])
    assert decide(dm)[2] == "dm"
    assert decide(msg(parentAuthorId="scout", mentions=["scout"]))[2] == "reply_to_me"
    assert decide(msg(mentions=["scout"], body="Scout", thread="t-spoke"))[2] == "mention"


@pytest.mark.parametrize(
    "candidate,surface",
    [
        (msg(channel="D1", channelKind="DM"), "dm"),
        (msg(mentions=["U0SCOUT"]), "mention"),
        (msg(body="@Scout"), "mention"),
        (msg(thread="t-spoke"), "thread_reply"),
    ],
)
def test_disabled_surface_turns_yes_into_surface_disabled(
    candidate: dict[str, Any], surface: str
) -> None:
    """A seat that switched a surface off is told so, never silently addressed."""
    seat = {**SEAT, "surfaces": {surface: False}}
    assert decide(candidate, seat=seat) == (False, None, "surface_disabled")
    seat = {**SEAT, "surfaces": {surface: True}}
    assert decide(candidate, seat=seat)[0] is True


# ---------------------------------------------------------------- board, calling, calendar


def test_board_rules_in_order() -> None:
    """Board: own echo, visibility, assigned, review requested, mention, activity, ambient."""
    facts = {"visibleRepoIds": ["acme/api"], "ownedItemIds": ["acme/api#9"]}
    assert (
        decide(
            board(actorId="github-scout", action="assigned", assigneeIds=["scout"]), facts=facts
        )[2]
        == "own_echo"
    )
    assert (
        decide(board(repo="acme/secret", action="assigned", assigneeIds=["scout"]), facts=facts)[2]
        == "not_visible"
    )
    assert decide(board(action="assigned", assigneeIds=["SCOUT"]), facts=facts) == (
        True,
        "assigned",
        "assigned",
    )
    assert decide(board(action="review_requested", reviewerIds=["u0scout"]), facts=facts) == (
        True,
        "review_request",
        "review_requested",
    )
    assert decide(board(action="commented", mentions=["github-scout"]), facts=facts) == (
        True,
        "mention",
        "mention",
    )
    assert decide(board(action="commented", issue="acme/api#9"), facts=facts) == (
        True,
        "thread_reply",
        "item_activity",
    )
    assert decide(board(action="commented", ownerIds=["scout"]), facts=facts)[2] == (
        "item_activity"
    )
    assert decide(board(action="commented", assigneeIds=["scout"]), facts=facts)[2] == (
        "item_activity"
    )
    assert decide(board(action="assigned", assigneeIds=["ann"]), facts=facts) == (
        False,
        None,
        "ambient",
    )
    assert decide(board(action="commented"), facts=facts) == (False, None, "ambient")


def test_a_review_of_the_seats_own_or_assigned_pull_request_is_a_review() -> None:
    """pull_request_review submitted on a PR the seat opened or is assigned: `review`, whatever
    its state; on a PR the seat only follows, a thread reply; on any other, ambient."""
    facts = {"ownedItemIds": ["acme/api#9"]}
    for involved in ({"ownerIds": ["scout"]}, {"assigneeIds": ["U0SCOUT"]}):
        review = board(action="reviewed", reviewState="changes_requested", **involved)
        assert decide(review, facts=facts) == (True, "review", "review_submitted")
    followed = board(action="reviewed", issue="acme/api#9", ownerIds=["bob"])
    assert decide(followed, facts=facts) == (True, "thread_reply", "item_activity")
    assert decide(board(action="reviewed", ownerIds=["bob"]), facts=facts) == (
        False,
        None,
        "ambient",
    )
    # The seat's own review of its own pull request is its echo, not a review for it.
    own = board(action="reviewed", actorId="github-scout", ownerIds=["scout"])
    assert decide(own, facts=facts)[2] == "own_echo"


def test_a_withdrawn_review_request_reaches_the_seat_it_was_asked_of() -> None:
    """review_request_removed naming the seat is a follow-up on the review_request surface;
    naming someone else, it is ambient."""
    removed = board(action="review_request_removed", reviewerIds=["scout"])
    assert decide(removed) == (True, "review_request", "review_request_removed")
    other = board(action="review_request_removed", reviewerIds=["ann"])
    assert decide(other) == (False, None, "ambient")


def test_a_followed_item_hears_of_comments_and_reviews_but_not_of_edits() -> None:
    """An item in ownedItemIds (followed): comments and reviews are thread replies; an edit
    without a new mention of the seat is ambient."""
    facts = {"ownedItemIds": ["acme/api#9"]}
    for action in ("commented", "reviewed"):
        assert decide(board(action=action, issue="acme/api#9"), facts=facts)[1] == ("thread_reply")
    assert decide(board(action="edited", issue="acme/api#9"), facts=facts)[2] == "ambient"
    assert decide(board(action="edited", mentions=["scout"]), facts=facts)[2] == "mention"


@pytest.mark.parametrize(
    "candidate",
    [
        msg(authorId="B0SCOUTAPP", body="Scout here: done.", channelKind="DM"),
        msg(authorId="b0scoutapp", mentions=["U0SCOUT"]),
        board(actorId="B0SCOUTAPP", action="commented", mentions=["scout"]),
    ],
)
def test_a_post_by_any_identity_of_the_seats_app_is_own_echo(candidate: dict[str, Any]) -> None:
    """The seat's app's `bot_id` (ownIds) authors its own posts: `own_echo` whatever the post
    says, even naming or mentioning the seat, in a DM or on a board."""
    seat = {**SEAT, "ownIds": ["B0SCOUTAPP"]}
    assert decide(candidate, seat=seat)[2] == "own_echo"


def test_an_own_identity_is_never_a_mention() -> None:
    """ownIds mark an echo only: a mention of one addresses nobody."""
    seat = {**SEAT, "ownIds": ["U0SHAREDBOT"]}
    assert decide(msg(mentions=["U0SHAREDBOT"]), seat=seat)[2] == "ambient"


def test_a_seat_contracts_bot_identities_count() -> None:
    """A `Seat` with slackBotId is read by attribute: its bot's post is its own echo."""
    seat = Seat.model_validate({"memberId": "scout", "slackBotId": "B0SCOUTAPP"})
    assert resolve_directed(msg(authorId="B0SCOUTAPP", body="scout"), seat).reason == "own_echo"


def test_calling_rules() -> None:
    """Calling: the seat's own call is an echo; being a callee is directed; else ambient."""

    def call(**kw: Any) -> dict[str, Any]:
        return {
            "family": "calling",
            "source": "voip",
            "deliveryId": "c1",
            "call": {"action": "ring", **kw},
            "atMs": 1,
        }

    assert decide(call(callerId="scout", calleeIds=["scout"]))[2] == "own_echo"
    assert decide(call(callerId="ann", calleeIds=["U0SCOUT"])) == (True, "call", "callee")
    assert decide(call(callerId="ann", calleeIds=["bob"])) == (False, None, "ambient")


@pytest.mark.parametrize("action", ["invite", "update", "cancel"])
def test_calendar_rules(action: str) -> None:
    """Calendar: own change is an echo; an attendee of an invite, update or cancel is directed."""

    def cal(**kw: Any) -> dict[str, Any]:
        return {
            "family": "calendar",
            "source": "gcal",
            "deliveryId": "e1",
            "calendar": {"action": action, **kw},
            "atMs": 1,
        }

    assert decide(cal(organizerId="scout@example.com", attendeeIds=["scout"]))[2] == "own_echo"
    assert decide(cal(organizerId="ann", attendeeIds=["scout"])) == (True, "invite", "attendee")
    assert decide(cal(organizerId="ann", attendeeIds=["bob"])) == (False, None, "ambient")


def test_unknown_family_is_an_explicit_no() -> None:
    """A dict with a family the rules do not know gets a reason, not a silent default."""
    assert decide({"family": "fax"}) == (False, None, "unsupported_family")


# ---------------------------------------------------------------- shapes


def test_contracts_and_dicts_give_the_same_verdict() -> None:
    """The function accepts the contracts as well as their camelCase dicts."""
    candidate = msg(mentions=["U0SCOUT"], thread="t-1")
    as_models = resolve_directed(
        Candidate.model_validate(candidate),
        Seat.model_validate(SEAT),
        SeatFacts.model_validate(FACTS),
    )
    assert as_models == resolve_directed(candidate, SEAT, FACTS)
    assert as_models.why


def test_alias_set_is_trimmed_and_case_insensitive() -> None:
    """The seat's identity is its member id plus every alias, trimmed and case-folded."""
    assert aliases_of(SEAT) == {"scout", "u0scout", "scout@example.com", "github-scout"}


@given(st.lists(st.sampled_from(["U0ANN", "U0BOB", "bob", "C1"]), max_size=4), st.text(max_size=40))
def test_never_directed_without_addressing_the_seat(mentions: list[str], body: str) -> None:
    """A public message by someone else, outside any known thread, that neither mentions nor
    names the seat is never directed to it."""
    body = body.replace("Scout", "").replace("scout", "")
    assert decide(msg(mentions=mentions, body=body))[0] is False
