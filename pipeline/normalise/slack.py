"""Slack Events API envelopes become messaging `Candidate`s. Pure, lenient, never raises.

Slack delivers one user message that mentions the app twice: as an `app_mention` and as a
`message` event, with different event_ids but the same channel and ts. Both map to the same
`deliveryId` (`slack:{team}:{channel}:{ts}`), so downstream they collapse into one decision
per seat; the Slack event_id stays in `ids.eventId`. An edit is a delivery of its own:
`slack:{team}:{channel}:{ts}:edit:{edited.ts}`, where `edited.ts` is the one both the
`message_changed` event and an edited `app_mention` carry.

Bot messages are kept (the author is the bot's user id, else its bot_id): the directedness
stage recognises the seat's own echo; dropping them here would hide other bots' requests.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from pipeline.normalise import (
    Normalised,
    Skipped,
    as_list,
    as_mapping,
    as_str,
    build,
    clip,
    dig,
    unique,
)

ChannelKind = Literal["DM", "GROUP_DM", "PUBLIC", "PRIVATE"]

MESSAGE_EVENTS = frozenset({"message", "app_mention"})

# Subtypes that carry something a person (or bot) said; `None` is a plain message.
CONTENT_SUBTYPES = frozenset({"bot_message", "thread_broadcast", "file_share", "me_message"})

# Membership, settings and housekeeping notices: nobody is speaking to anyone.
SYSTEM_SUBTYPES = frozenset(
    {
        "channel_join",
        "channel_leave",
        "channel_topic",
        "channel_purpose",
        "channel_name",
        "channel_archive",
        "channel_unarchive",
        "channel_convert_to_private",
        "channel_convert_to_public",
        "channel_posting_permissions",
        "group_join",
        "group_leave",
        "group_topic",
        "group_purpose",
        "group_name",
        "group_archive",
        "group_unarchive",
        "bot_add",
        "bot_remove",
        "bot_enable",
        "bot_disable",
        "pinned_item",
        "unpinned_item",
        "reminder_add",
        "ekm_access_denied",
        "message_replied",
        "tombstone",
        "huddle_thread",
        "sh_room_created",
        "assistant_app_thread",
    }
)

CHANNEL_TYPES: Mapping[str, ChannelKind] = {
    "im": "DM",
    "mpim": "GROUP_DM",
    "channel": "PUBLIC",
    "group": "PRIVATE",
}
# When `channel_type` is absent (app_mention never carries it). `G` is a private channel or
# a legacy group DM; a message event does not carry the name that would tell them apart.
CHANNEL_PREFIXES: Mapping[str, ChannelKind] = {"D": "DM", "G": "PRIVATE", "C": "PUBLIC"}

# `<@U024BE7LH>` or `<@U024BE7LH|bob>`; W… ids are Enterprise Grid users.
# The label stops at `<` too (Slack escapes a literal one as &lt;): otherwise every unclosed
# `<@U1|` would scan to the end of the text, quadratic in a 40,000-character message.
USER_TOKEN = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^<>]*)?>")


def normalise_slack(envelope: Mapping[str, Any], *, received_at_ms: int) -> Normalised:
    """The messaging Candidate for one Events API envelope, or why there is none."""
    if not isinstance(envelope, Mapping):
        return Skipped("unsupported_envelope", "the body is not a JSON object")
    kind = envelope.get("type")
    if kind == "url_verification":
        return Skipped("url_verification", "answered by the ingress with the challenge")
    if kind != "event_callback":
        return Skipped("unsupported_envelope", f"envelope type {kind!r}")

    event = as_mapping(envelope.get("event"))
    if event is None:
        return Skipped("missing_field:event", "event_callback without an event object")
    event_type = event.get("type")
    if not isinstance(event_type, str) or event_type not in MESSAGE_EVENTS:
        return Skipped(f"unsupported_event:{_label(event_type)}", "not a message event")

    subtype = event.get("subtype")
    message: Mapping[str, Any] = event
    if subtype == "message_changed":
        edited = as_mapping(event.get("message"))
        if edited is None:
            return Skipped("missing_field:event.message", "message_changed without the message")
        previous = as_mapping(event.get("previous_message"))
        if previous is not None and _text(previous) == _text(edited):
            # Unfurls and thread reply counters also arrive as message_changed; re-deciding
            # an unchanged text would notify everyone it addressed a second time.
            return Skipped("edit_without_text_change", "message_changed with the same text")
        message, subtype = edited, edited.get("subtype")
    refused = _refuse_subtype(subtype)
    if refused is not None:
        return refused

    team = as_str(envelope.get("team_id")) or as_str(envelope.get("context_team_id"))
    team = team or as_str(event.get("team"))
    channel = as_str(event.get("channel")) or as_str(message.get("channel"))
    ts = _ts(message.get("ts"))
    if ts is None and event is not message:
        # message_changed: the edited message is the previous one, same ts, whichever of the
        # two carries it.
        ts = _ts(dig(event, "previous_message", "ts"))
    if team is None:
        return Skipped("missing_field:team_id", "no workspace id on the envelope")
    if channel is None:
        return Skipped("missing_field:event.channel", "no channel id on the event")
    if ts is None:
        return Skipped("missing_field:event.ts", "no message ts on the event")

    delivery_id = f"slack:{team}:{channel}:{ts}"
    edited_at = _ts(dig(message, "edited", "ts"))
    if event is not message:  # message_changed: the edit's own ts when `edited` is absent
        edited_at = edited_at or _ts(event.get("event_ts")) or _ts(event.get("ts"))
    if edited_at is not None:
        delivery_id += f":edit:{edited_at}"

    thread_ts = _ts(message.get("thread_ts"))
    text = _text(message)
    # A reply names its parent's author; a thread_broadcast may carry only the root message.
    parent = as_str(message.get("parent_user_id")) or as_str(dig(message, "root", "user"))
    return build(
        {
            "family": "messaging",
            "source": "slack",
            "delivery_id": delivery_id,
            "ids": {
                "channel_id": channel,
                "message_id": ts,
                "thread_root_id": thread_ts if thread_ts != ts else None,
                "event_id": as_str(envelope.get("event_id")),
            },
            "msg": {
                "author_id": as_str(message.get("user")) or as_str(message.get("bot_id")),
                "body": clip(text),
                "mentions": unique([*USER_TOKEN.findall(text), *_block_users(message)]),
                "channel_kind": channel_kind(event.get("channel_type"), channel),
                "parent_author_id": parent,
                "audience_ids": unique(_audience(envelope)),
            },
            "at_ms": _event_ms(envelope.get("event_time"), received_at_ms),
        }
    )


def channel_kind(channel_type: object, channel_id: str) -> ChannelKind | None:
    """The conversation kind from Slack's `channel_type`, else from the channel id's prefix."""
    if isinstance(channel_type, str) and channel_type in CHANNEL_TYPES:
        return CHANNEL_TYPES[channel_type]
    return CHANNEL_PREFIXES.get(channel_id[:1])


def _refuse_subtype(subtype: object) -> Skipped | None:
    """Why a message of this subtype is not a Candidate, or None when it carries speech."""
    if subtype is None or (isinstance(subtype, str) and subtype in CONTENT_SUBTYPES):
        return None
    if subtype == "message_deleted":
        return Skipped("message_deleted", "a deletion addresses nobody")
    if isinstance(subtype, str) and subtype in SYSTEM_SUBTYPES:
        return Skipped(f"system_message:{subtype}", "a membership or system notice")
    return Skipped(f"unsupported_subtype:{_label(subtype)}", "a message subtype we do not know")


def _block_users(message: Mapping[str, Any]) -> Iterator[str]:
    """User ids of rich-text `user` elements anywhere in the message's blocks, in order."""
    stack: list[Any] = list(reversed(as_list(message.get("blocks"))))
    while stack:
        node = as_mapping(stack.pop())
        if node is None:
            continue
        user_id = as_str(node.get("user_id"))
        if node.get("type") == "user" and user_id is not None:
            yield user_id
        stack.extend(reversed(as_list(node.get("elements"))))


def _audience(envelope: Mapping[str, Any]) -> Iterator[str]:
    """The users this delivery was made for: `authorizations[].user_id` (Slack's current field,
    one installation per delivery), else the older `authed_users`."""
    for auth in as_list(envelope.get("authorizations")):
        user_id = as_str(dig(auth, "user_id"))
        if user_id is not None:
            yield user_id
    for user_id in as_list(envelope.get("authed_users")):
        if as_str(user_id) is not None:
            yield user_id


def _ts(value: object) -> str | None:
    """A Slack timestamp as the string Slack uses for it ("1355517523.000005")."""
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.6f}"
    return None


def _event_ms(event_time: object, received_at_ms: int) -> int:
    """Slack's `event_time` (epoch seconds) in ms, else the time the ingress received it."""
    if isinstance(event_time, bool) or not isinstance(event_time, int | float):
        return received_at_ms
    if not math.isfinite(event_time) or not 0 <= event_time < 10**11:
        return received_at_ms
    return int(event_time * 1000)


def _text(message: Mapping[str, Any]) -> str:
    text = message.get("text")
    return text if isinstance(text, str) else ""


def _label(value: object) -> str:
    """A short printable name for a type or subtype field, whatever its JSON type."""
    return value[:64] if isinstance(value, str) else type(value).__name__
