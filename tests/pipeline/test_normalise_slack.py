"""Slack Events API envelopes, shaped as Slack documents them, become messaging Candidates.

Pure: fixtures are JSON files under fixtures/slack, the receive time is a constant.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import Candidate
from pipeline.normalise import MAX_BODY_CHARS, Skipped
from pipeline.normalise.slack import SYSTEM_SUBTYPES, normalise_slack
from tests.pipeline.strategies import JSON, JSON_SCALARS

FIXTURES = Path(__file__).parent / "fixtures" / "slack"
RECEIVED = 1_718_060_000_000


def load(name: str) -> dict[str, Any]:
    """A fresh copy of one fixture envelope."""
    loaded: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return loaded


def normalised(envelope: dict[str, Any]) -> Candidate | Skipped:
    return normalise_slack(envelope, received_at_ms=RECEIVED)


def candidate(envelope: dict[str, Any]) -> Candidate:
    out = normalised(envelope)
    assert isinstance(out, Candidate), out
    return out


def skipped(envelope: dict[str, Any]) -> Skipped:
    out = normalised(envelope)
    assert isinstance(out, Skipped), out
    return out


# ---------------------------------------------------------------- plain messages


def test_channel_message_with_mentions_becomes_a_full_messaging_candidate() -> None:
    """A channel message maps every field: ids, author, text, mentions, kind and event time."""
    c = candidate(load("message_channel_mention"))
    assert c.to_wire() == {
        "family": "messaging",
        "source": "slack",
        "deliveryId": "slack:T0ACME0001:C0ENG00001:1718049600.123456",
        "ids": {
            "channelId": "C0ENG00001",
            "messageId": "1718049600.123456",
            "threadRootId": None,
            "issueId": None,
            "callId": None,
            "eventId": "Ev0MSG000001",
        },
        "msg": {
            "authorId": "U0ALICE001",
            "body": "<@U0SEATBOT> can you review the billing migration with <@U0BOB00002>?",
            "mentions": ["U0SEATBOT", "U0BOB00002"],
            "channelKind": "PUBLIC",
            "parentAuthorId": None,
            "audienceIds": ["U0SEATBOT"],
        },
        "board": None,
        "call": None,
        "calendar": None,
        "atMs": 1_718_049_600_000,
    }


def test_the_audience_is_the_user_the_delivery_was_made_for() -> None:
    """`authorizations[].user_id` (else the older `authed_users`) says whose delivery this is:
    how a DM the org file does not list is known to include a seat."""
    im = load("message_im")
    assert candidate(im).msg is not None
    assert candidate(im).msg.audience_ids == ("U0SEATBOT",)  # type: ignore[union-attr]
    legacy = {k: v for k, v in im.items() if k != "authorizations"}
    legacy["authed_users"] = ["U0OTHERBOT", 7]
    assert candidate(legacy).msg.audience_ids == ("U0OTHERBOT",)  # type: ignore[union-attr]
    bare = {k: v for k, v in im.items() if k != "authorizations"}
    assert candidate(bare).msg.audience_ids == ()  # type: ignore[union-attr]


def test_app_mention_and_its_message_twin_share_one_delivery_id() -> None:
    """The app_mention and message events for one user message collapse to one deliveryId."""
    as_message = candidate(load("message_channel_mention"))
    as_mention = candidate(load("app_mention"))
    assert as_mention.delivery_id == as_message.delivery_id
    assert as_mention.ids.message_id == as_message.ids.message_id
    assert as_mention.msg == as_message.msg
    assert (as_mention.ids.event_id, as_message.ids.event_id) == ("Ev0MENTION01", "Ev0MSG000001")


def test_a_root_message_whose_thread_ts_is_its_own_ts_has_no_thread_root() -> None:
    """A thread's root message carries thread_ts == ts and is not itself a reply."""
    envelope = load("message_channel_mention")
    envelope["event"]["thread_ts"] = envelope["event"]["ts"]
    assert candidate(envelope).ids.thread_root_id is None


def test_a_thread_reply_names_its_root_and_its_parent_author() -> None:
    """A reply's thread_ts becomes threadRootId and parent_user_id becomes parentAuthorId."""
    c = candidate(load("message_thread_reply"))
    assert c.ids.thread_root_id == "1718049600.123456"
    assert c.ids.message_id == "1718050100.000500"
    assert c.msg is not None and c.msg.parent_author_id == "U0SEATBOT"


@pytest.mark.parametrize("subtype", ["file_share", "me_message"])
def test_file_shares_and_me_messages_are_speech(subtype: str) -> None:
    """A message with a file or a /me action is someone speaking, so it is a Candidate."""
    envelope = load("message_channel_mention")
    envelope["event"]["subtype"] = subtype
    c = candidate(envelope)
    assert c.msg is not None and c.msg.mentions == ("U0SEATBOT", "U0BOB00002")


# ---------------------------------------------------------------- mentions


def test_mentions_are_taken_from_name_qualified_text_tokens() -> None:
    """A `<@U…|name>` token in the text is a mention of that user id."""
    c = candidate(load("message_bot_message"))
    assert c.msg is not None and c.msg.mentions == ("U0ALICE001",)


def test_mentions_are_taken_from_nested_rich_text_blocks() -> None:
    """User elements inside a rich-text list count even when the plain text names nobody."""
    c = candidate(load("message_own_bot"))
    assert c.msg is not None and c.msg.mentions == ("U0BOB00002", "U0ALICE001")


def test_mentions_from_text_and_blocks_are_deduplicated_in_order() -> None:
    """The same user in text and blocks is one mention; text order comes first."""
    envelope = load("message_channel_mention")
    envelope["event"]["text"] = "<@U0BOB00002> and <@W0GRID0001|eve>"
    c = candidate(envelope)
    assert c.msg is not None and c.msg.mentions == ("U0BOB00002", "W0GRID0001", "U0SEATBOT")


def test_broadcast_and_channel_tokens_are_not_user_mentions() -> None:
    """`<!here>`, `<!channel>` and user groups address no single user."""
    envelope = load("message_im")
    envelope["event"]["text"] = "<!here> <!channel> <!subteam^S0ONCALL|@oncall> ping"
    c = candidate(envelope)
    assert c.msg is not None and c.msg.mentions == ()


# ---------------------------------------------------------------- channel kind


@pytest.mark.parametrize(
    ("fixture", "kind"),
    [
        ("message_im", "DM"),
        ("message_mpim", "GROUP_DM"),
        ("message_channel_mention", "PUBLIC"),
        ("message_private_channel", "PRIVATE"),  # a C… id, but channel_type says private
    ],
)
def test_channel_kind_comes_from_channel_type(fixture: str, kind: str) -> None:
    """Slack's channel_type decides the kind, even over the channel id's prefix."""
    c = candidate(load(fixture))
    assert c.msg is not None and c.msg.channel_kind == kind


@pytest.mark.parametrize(
    ("channel", "kind"),
    [("D0ALICEBOT", "DM"), ("G0LEGACY01", "PRIVATE"), ("C0ENG00001", "PUBLIC"), ("Z0ODD", None)],
)
def test_channel_kind_falls_back_to_the_channel_id_prefix(channel: str, kind: str | None) -> None:
    """Without channel_type (app_mention never has one) the id prefix decides, else unknown."""
    envelope = load("app_mention")
    envelope["event"]["channel"] = channel
    assert "channel_type" not in envelope["event"]
    c = candidate(envelope)
    assert c.msg is not None and c.msg.channel_kind == kind


def test_an_unknown_channel_type_falls_back_to_the_prefix() -> None:
    """A channel_type Slack adds later does not erase what the id prefix tells."""
    envelope = load("message_im")
    envelope["event"]["channel_type"] = "app_home"
    c = candidate(envelope)
    assert c.msg is not None and c.msg.channel_kind == "DM"


# ---------------------------------------------------------------- edits


def test_an_edit_is_the_new_message_under_a_delivery_of_its_own() -> None:
    """message_changed yields the edited text, author and mentions, as a distinct delivery."""
    original = candidate(load("message_channel_mention"))
    edit = candidate(load("message_changed"))
    assert edit.delivery_id == (
        "slack:T0ACME0001:C0ENG00001:1718049600.123456:edit:1718049700.000000"
    )
    assert edit.delivery_id != original.delivery_id
    assert edit.ids.message_id == original.ids.message_id == "1718049600.123456"
    assert edit.ids.event_id == "Ev0EDIT00001"
    assert edit.msg is not None
    assert edit.msg.author_id == "U0ALICE001"
    assert edit.msg.body == "<@U0SEATBOT> can you review the billing migration today?"
    assert edit.msg.mentions == ("U0SEATBOT",)
    assert edit.msg.channel_kind == "PUBLIC"


def test_an_edited_app_mention_and_its_message_changed_twin_share_one_delivery_id() -> None:
    """Both deliveries of one edit carry `edited.ts`, so they collapse like the original pair."""
    assert candidate(load("app_mention_edited")).delivery_id == (
        candidate(load("message_changed")).delivery_id
    )


def test_an_edit_without_edited_stamp_is_keyed_by_the_change_event_ts() -> None:
    """A message_changed lacking `edited` still gets a distinct delivery from its event_ts."""
    envelope = load("message_changed")
    del envelope["event"]["message"]["edited"]
    assert candidate(envelope).delivery_id.endswith(":1718049600.123456:edit:1718049700.000100")


def test_an_edit_whose_message_lacks_its_ts_takes_the_previous_messages() -> None:
    """The edited message is the previous one: when only `previous_message` carries the ts
    (bolt's text_edit fixture), the edit is read under it, not refused."""
    envelope = load("message_changed")
    del envelope["event"]["message"]["ts"]
    envelope["event"]["previous_message"]["ts"] = "1718049600.123456"
    c = candidate(envelope)
    assert c.ids.message_id == "1718049600.123456"
    assert c.delivery_id.startswith("slack:T0ACME0001:C0ENG00001:1718049600.123456:edit:")


def test_an_edit_inside_a_thread_keeps_its_thread() -> None:
    """The edited message's own thread_ts names the thread root."""
    envelope = load("message_changed")
    envelope["event"]["message"]["thread_ts"] = "1718040000.000001"
    envelope["event"]["message"]["parent_user_id"] = "U0BOB00002"
    c = candidate(envelope)
    assert c.ids.thread_root_id == "1718040000.000001"
    assert c.msg is not None and c.msg.parent_author_id == "U0BOB00002"


def test_a_change_that_leaves_the_text_alone_is_skipped() -> None:
    """An unfurl or reply-count update is not re-decided, so nobody is notified twice."""
    envelope = load("message_changed")
    envelope["event"]["previous_message"]["text"] = envelope["event"]["message"]["text"]
    assert skipped(envelope).reason == "edit_without_text_change"


def test_a_change_without_the_message_is_skipped_with_the_missing_field() -> None:
    """message_changed without its `message` object names what is missing."""
    envelope = load("message_changed")
    del envelope["event"]["message"]
    assert skipped(envelope).reason == "missing_field:event.message"


def test_an_edit_to_a_tombstoned_message_is_a_system_notice() -> None:
    """A thread parent replaced by a tombstone is housekeeping, not speech."""
    envelope = load("message_changed")
    envelope["event"]["message"]["subtype"] = "tombstone"
    envelope["event"]["message"]["text"] = "This message was deleted."
    assert skipped(envelope).reason == "system_message:tombstone"


# ---------------------------------------------------------------- bots and broadcasts


def test_a_legacy_bot_message_is_kept_with_the_bot_id_as_author() -> None:
    """A bot_message without a user is authored by its bot_id, never dropped here."""
    c = candidate(load("message_bot_message"))
    assert c.msg is not None and c.msg.author_id == "B0DEPLOYBT"


def test_our_own_bot_post_is_kept_with_its_bot_user_as_author() -> None:
    """A post with both user and bot_id is authored by the user id, for own-echo downstream."""
    c = candidate(load("message_own_bot"))
    assert c.msg is not None and c.msg.author_id == "U0SEATBOT"
    assert c.msg.body == "Review checklist for the billing migration"


def test_a_thread_broadcast_is_a_reply_in_its_thread() -> None:
    """A reply also sent to the channel names the thread root and the root's author."""
    c = candidate(load("message_thread_broadcast"))
    assert c.ids.thread_root_id == "1718049600.123456"
    assert c.ids.message_id == "1718050200.000600"
    assert c.msg is not None
    assert (c.msg.author_id, c.msg.parent_author_id) == ("U0BOB00002", "U0ALICE001")


# ---------------------------------------------------------------- skips


def test_a_deleted_message_is_skipped() -> None:
    """A deletion addresses nobody and says so."""
    assert skipped(load("message_deleted")).reason == "message_deleted"


@pytest.mark.parametrize(
    "subtype", ["channel_join", "channel_leave", "channel_topic", "group_join", "pinned_item"]
)
def test_membership_and_system_notices_are_skipped_with_their_subtype(subtype: str) -> None:
    """Joins, leaves, topic changes and pins are system notices, named by subtype."""
    envelope = load("message_channel_join")
    envelope["event"]["subtype"] = subtype
    assert subtype in SYSTEM_SUBTYPES
    assert skipped(envelope).reason == f"system_message:{subtype}"


def test_the_channel_join_fixture_is_a_system_notice_despite_its_mention_token() -> None:
    """'<@U…> has joined the channel' is not a mention of anyone."""
    assert skipped(load("message_channel_join")).reason == "system_message:channel_join"


def test_an_unknown_subtype_is_skipped_and_named() -> None:
    """A subtype Slack adds later is refused with its name, not guessed at."""
    envelope = load("message_channel_mention")
    envelope["event"]["subtype"] = "canvas_spell_cast"
    assert skipped(envelope).reason == "unsupported_subtype:canvas_spell_cast"


def test_url_verification_is_left_to_the_ingress() -> None:
    """The handshake envelope is not an event."""
    assert skipped(load("url_verification")).reason == "url_verification"


def test_other_envelope_types_are_unsupported() -> None:
    """app_rate_limited and anything else that is not event_callback is refused."""
    assert skipped(load("app_rate_limited")).reason == "unsupported_envelope"
    assert normalise_slack([], received_at_ms=RECEIVED) == Skipped(  # type: ignore[arg-type]
        "unsupported_envelope", "the body is not a JSON object"
    )


def test_non_message_events_are_skipped_with_their_type() -> None:
    """A reaction is not a message and is refused by name."""
    assert skipped(load("reaction_added")).reason == "unsupported_event:reaction_added"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        (("event",), "missing_field:event"),
        (("team_id",), "missing_field:team_id"),
        (("event", "channel"), "missing_field:event.channel"),
        (("event", "ts"), "missing_field:event.ts"),
    ],
)
def test_a_message_missing_an_identifying_field_is_skipped(
    path: tuple[str, ...], reason: str
) -> None:
    """Without workspace, channel or ts there is no delivery id, and the skip says which."""
    envelope = load("message_channel_mention")
    envelope.pop("context_team_id")
    envelope["event"].pop("team")
    parent = envelope
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    assert skipped(envelope).reason == reason


def test_a_message_without_any_author_is_still_a_candidate() -> None:
    """A missing user is not a crash; the author is simply unknown."""
    envelope = load("message_channel_mention")
    del envelope["event"]["user"]
    c = candidate(envelope)
    assert c.msg is not None and c.msg.author_id is None


def test_a_delivery_id_over_the_contract_limit_is_skipped_as_invalid() -> None:
    """An absurd channel id gives an invalid_candidate skip naming the field, not an error."""
    envelope = load("message_channel_mention")
    envelope["event"]["channel"] = "C" + "X" * 300
    out = skipped(envelope)
    assert out.reason == "invalid_candidate"
    assert out.detail.startswith("delivery_id")


# ---------------------------------------------------------------- time and size


@pytest.mark.parametrize("event_time", [None, "1718049600", -5, True, 1e300, float("nan")])
def test_without_a_usable_event_time_the_receive_time_is_used(event_time: object) -> None:
    """A missing or nonsensical event_time falls back to when the ingress received it."""
    envelope = load("message_channel_mention")
    envelope["event_time"] = event_time
    assert candidate(envelope).at_ms == RECEIVED


def test_a_huge_text_is_clipped_but_a_trailing_mention_still_counts() -> None:
    """Text beyond the body limit is cut; a mention past the cut is still extracted."""
    envelope = load("message_channel_mention")
    envelope["event"]["text"] = "x" * (MAX_BODY_CHARS + 10) + " <@U0LATE0001>"
    envelope["event"]["blocks"] = []
    c = candidate(envelope)
    assert c.msg is not None
    assert len(c.msg.body) == MAX_BODY_CHARS
    assert c.msg.mentions == ("U0LATE0001",)


# ---------------------------------------------------------------- never raises

SLACK_KEYS = st.sampled_from(
    [
        "type",
        "event",
        "team_id",
        "event_id",
        "event_time",
        "subtype",
        "channel",
        "channel_type",
        "ts",
        "thread_ts",
        "user",
        "bot_id",
        "text",
        "blocks",
        "elements",
        "user_id",
        "message",
        "previous_message",
        "edited",
        "root",
        "parent_user_id",
    ]
)
SLACK_VALUES = st.sampled_from(
    ["event_callback", "message", "app_mention", "message_changed", "bot_message", "user"]
)
SLACK_JSON = st.recursive(
    JSON_SCALARS | SLACK_VALUES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(SLACK_KEYS, inner, max_size=6),
    max_leaves=30,
)
FIXTURE_NAMES = sorted(p.stem for p in FIXTURES.glob("*.json"))


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON document."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths(value, (*prefix, index))
    return found


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=10), JSON, max_size=6) | SLACK_JSON)
def test_arbitrary_json_never_raises(envelope: Any) -> None:
    """Any JSON value, shaped like Slack's or not, gives a Candidate or a Skipped."""
    assert isinstance(normalise_slack(envelope, received_at_ms=RECEIVED), Candidate | Skipped)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FIXTURE_NAMES), st.data())
def test_real_envelopes_with_any_field_replaced_never_raise(name: str, data: st.DataObject) -> None:
    """A real envelope with one field anywhere replaced by any JSON value never raises."""
    envelope = load(name)
    path = data.draw(st.sampled_from(paths(envelope)[1:]))
    mutated = copy.deepcopy(envelope)
    parent: Any = mutated
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = data.draw(JSON | SLACK_JSON)
    assert isinstance(normalise_slack(mutated, received_at_ms=RECEIVED), Candidate | Skipped)
