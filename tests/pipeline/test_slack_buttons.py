"""An ask's buttons and a click read back, pure: every button's value reads back as what it
says, and nothing that is not exactly one of them does."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.slack_buttons import (
    ASK_BLOCK,
    BUTTONS,
    CONSENT_BLOCK,
    REVOKE_ACTION,
    WEEK_MS,
    Click,
    Ignored,
    RevokeClick,
    ask_blocks,
    read_interaction,
    read_revoke,
    read_value,
)


def click(action: dict[str, Any], **payload: Any) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": "U0BEN"},
        "container": {"type": "message", "channel_id": "D1", "message_ts": "1.000100"},
        "response_url": "https://hooks.slack.com/actions/T/1/x",
        "actions": [action],
        **payload,
    }


@pytest.mark.parametrize("trigger", sorted(BUTTONS))
def test_every_button_reads_back_as_what_it_says(trigger: str) -> None:
    [*_, actions] = ask_blocks("words", "ask-k-1", trigger)
    assert actions["block_id"] == f"{ASK_BLOCK}ask-k-1"
    for element, button in zip(actions["elements"], BUTTONS[trigger], strict=True):
        action = {**element, "block_id": actions["block_id"], "action_ts": "1800000001.1"}
        got = read_interaction(click(action))
        assert got == Click(
            ask_id="ask-k-1",
            verb=button.verb,
            consent_ttl_ms=button.consent_ttl_ms,
            user_id="U0BEN",
            channel_id="D1",
            message_ts="1.000100",
            response_url="https://hooks.slack.com/actions/T/1/x",
            action_id=button.action_id,
            action_ts="1800000001.1",
        )


@pytest.mark.parametrize(
    ("block", "action", "value"),
    [
        ("seatwire_ask:a-1", "seatwire_answer:approved", "a-2|approved"),  # another ask
        ("seatwire_ask:a-1", "seatwire_answer:done", "a-1|approved"),  # verb disagrees
        ("seatwire_ask:a-1", "seatwire_answer:replied", "a-1|replied"),  # no such button
        ("seatwire_ask:a-1", "seatwire_answer:done", "a-1|done|604800000"),  # ttl on done
        ("seatwire_ask:a-1", "seatwire_answer:approved", "a-1|approved|59999"),  # too short
        ("seatwire_ask:a-1", "seatwire_answer:approved", "a-1|approved|2592000001"),
        ("seatwire_ask:a-1", "seatwire_answer:approved", "a-1|approved|x"),
        ("seatwire_ask:a-1", "seatwire_answer:approved", "a-1"),
        ("b", "seatwire_answer:approved", "a-1|approved"),  # another block
        ("seatwire_ask:a-1", "a", "a-1|approved"),  # another action
        (None, "seatwire_answer:approved", "a-1|approved"),
    ],
)
def test_anything_but_exactly_one_of_our_buttons_is_not_ours(
    block: str | None, action: str, value: str
) -> None:
    with pytest.raises(ValueError):
        read_value(block, action, value)
    got = read_interaction(click({"block_id": block, "action_id": action, "value": value}))
    assert isinstance(got, Ignored) and got.reason == "no action of an ask's buttons"


def test_a_week_long_approval_carries_its_time() -> None:
    got = read_value("seatwire_ask:a-1", "seatwire_answer:approved:week", f"a-1|approved|{WEEK_MS}")
    assert got == ("a-1", "approved", WEEK_MS)


def test_our_button_where_no_message_is_changes_nothing() -> None:
    ours = {
        "block_id": "seatwire_ask:a-1",
        "action_id": "seatwire_answer:done",
        "value": "a-1|done",
    }
    in_view = read_interaction(click(ours, container={"type": "view", "view_id": "V1"}))
    assert isinstance(in_view, Ignored) and "view" in in_view.reason
    nowhere = read_interaction(click(ours, container={}))
    assert isinstance(nowhere, Ignored) and "no channel" in nowhere.reason
    nobody = read_interaction(click(ours, user=None))
    assert isinstance(nobody, Ignored) and "no user" in nobody.reason
    # The channel and ts may come from the payload's channel and message instead.
    moved = read_interaction(
        click(ours, container={"type": "message"}, channel={"id": "C9"}, message={"ts": "2.0"})
    )
    assert isinstance(moved, Click) and (moved.channel_id, moved.message_ts) == ("C9", "2.0")


@pytest.mark.parametrize("kind", ["view_submission", "view_closed", "shortcut", "message_action"])
def test_other_interactions_are_ignored_by_type(kind: str) -> None:
    assert read_interaction({"type": kind}) == Ignored(kind, f"a {kind} interaction answers no ask")


def test_a_section_is_cut_to_slacks_cap() -> None:
    [section] = ask_blocks("x" * 5_000, "a-1", None)
    assert len(section["text"]["text"]) == 3_000 and section["text"]["text"].endswith("…")


def test_the_revoke_button_sits_in_its_own_block_and_reads_back() -> None:
    blocks = ask_blocks("words", "ask-k-1", None, context="*Approved*", revoke="consent-k-1")
    assert [b["type"] for b in blocks] == ["section", "context", "actions"]
    [element] = blocks[-1]["elements"]
    assert blocks[-1]["block_id"] == f"{CONSENT_BLOCK}consent-k-1"
    assert (element["action_id"], element["value"], element["style"]) == (
        REVOKE_ACTION,
        "consent-k-1|ask-k-1",
        "danger",
    )
    assert element["confirm"]["deny"]["text"] == "Cancel"
    action = {**element, "block_id": blocks[-1]["block_id"], "action_ts": "1800000002.5"}
    assert read_interaction(click(action)) == RevokeClick(
        consent_id="consent-k-1",
        ask_id="ask-k-1",
        user_id="U0BEN",
        channel_id="D1",
        message_ts="1.000100",
        response_url="https://hooks.slack.com/actions/T/1/x",
        action_ts="1800000002.5",
    )
    # An ask's buttons and its revoke button are never offered together by the adapter, but
    # each reads back as what it is.
    both = ask_blocks("words", "ask-k-1", "irreversible_or_external", revoke="consent-k-1")
    assert [b.get("block_id") for b in both[1:]] == [
        f"{ASK_BLOCK}ask-k-1",
        f"{CONSENT_BLOCK}consent-k-1",
    ]


@pytest.mark.parametrize(
    ("block", "action", "value"),
    [
        ("seatwire_consent:c-1", "seatwire_revoke", "c-2|ask-1"),  # another consent
        ("seatwire_consent:c-1", "seatwire_revoke", "c-1"),  # no ask
        ("seatwire_consent:c-1", "seatwire_revoke", "c-1|ask-1|x"),
        ("seatwire_consent:c-1", "seatwire_revoke", "c-1|"),
        ("seatwire_consent:c-1", "seatwire_revoke:x", "c-1|ask-1"),  # another action
        ("seatwire_ask:c-1", "seatwire_revoke", "c-1|ask-1"),  # an ask's block
        (None, "seatwire_revoke", "c-1|ask-1"),
    ],
)
def test_anything_but_exactly_a_revoke_button_is_not_one(
    block: str | None, action: str, value: str
) -> None:
    with pytest.raises(ValueError):
        read_revoke(block, action, value)
    got = read_interaction(click({"block_id": block, "action_id": action, "value": value}))
    assert isinstance(got, Ignored) and got.reason == "no action of an ask's buttons"
