"""An ask's answer buttons in Slack (Block Kit), and a click on one read back. Pure: no
network, no clock; the Slack adapter (workers/outbound/slack.py) renders with it and the
interactivity route (workers/ingress/interactions.py) reads clicks with it.

Which buttons an ask carries depends on its trigger: a consent (`irreversible_or_external`)
Approve / Approve for a week / Decline (with a confirm dialog) / Snooze; a review Approve /
Request changes; a blocked ask or a commitment at risk Done / Snooze. A trigger not in the
table gets no buttons (an answer whose meaning was never written down is worse than none).

Every button of an ask sits in one actions block whose `block_id` is `seatwire_ask:<ask id>`;
each button's `action_id` is `seatwire_answer:<verb>` (`:week` added for the week-long
approval) and its `value` is `<ask id>|<verb>` (`|<consent ttl ms>` added when it has one).
A click is ours only when all three agree; anything else Slack posts (a modal, a shortcut,
another app's button) is read as `Ignored`, with the reason.

An answered consent whose approval still holds carries one more button, in an actions block of
its own (`block_id` `seatwire_consent:<consent id>`): "Revoke consent" (`action_id`
`seatwire_revoke`, `value` `<consent id>|<ask id>`, with a confirm dialog), read back as a
`RevokeClick`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pipeline.normalise import as_list, as_str, dig

ASK_BLOCK = "seatwire_ask:"  # the actions block's block_id prefix
ANSWER_ACTION = "seatwire_answer:"  # each button's action_id prefix
CONSENT_BLOCK = "seatwire_consent:"  # the revoke button's block_id prefix
REVOKE_ACTION = "seatwire_revoke"  # and its action_id
SECTION_MAX = 3_000  # Slack's cap on a section's text
CONTEXT_MAX = 3_000  # and on a context element's
DAY_MS = 86_400_000
WEEK_MS = 7 * DAY_MS
MIN_TTL_MS = 60_000
MAX_TTL_MS = 30 * DAY_MS  # the answer route's bound on a consent's time

ButtonVerb = Literal["approved", "declined", "done", "snoozed"]
_VERBS: dict[str, ButtonVerb] = {
    "approved": "approved",
    "declined": "declined",
    "done": "done",
    "snoozed": "snoozed",
}
Style = Literal["primary", "danger"]


@dataclass(frozen=True)
class Button:
    verb: ButtonVerb
    label: str
    suffix: str = ""  # makes the action_id unique when two buttons share a verb
    consent_ttl_ms: int | None = None
    style: Style | None = None
    confirm: bool = False

    @property
    def action_id(self) -> str:
        return f"{ANSWER_ACTION}{self.verb}" + (f":{self.suffix}" if self.suffix else "")


APPROVE = Button("approved", "Approve", style="primary")
SNOOZE = Button("snoozed", "Snooze")
DONE = Button("done", "Done", style="primary")

BUTTONS: dict[str, tuple[Button, ...]] = {
    "irreversible_or_external": (
        APPROVE,
        Button("approved", "Approve for a week", suffix="week", consent_ttl_ms=WEEK_MS),
        Button("declined", "Decline", style="danger", confirm=True),
        SNOOZE,
    ),
    "mandatory_review": (APPROVE, Button("declined", "Request changes")),
    "blocked_on_other": (DONE, SNOOZE),
    "commitment_at_risk": (DONE, SNOOZE),
}

# How an answer reads on the message, per trigger where it differs ("Request changes" is a
# review's decline).
_SAID: dict[tuple[str, str], str] = {("mandatory_review", "declined"): "Changes requested"}

_CLOSED: dict[str, str] = {
    "expired": "nobody answered in time",
    "withdrawn": "the work moved on",
    "send_failed": "it could not be sent",
    "send_blocked": "it was not sent",
    "shadowed": "shadow mode: it was not sent",
    "answered_elsewhere": "it was answered at another rung",
}


def buttons_for(trigger: str | None) -> tuple[Button, ...]:
    return BUTTONS.get(trigger or "", ())


def value_of(ask_id: str, button: Button) -> str:
    parts = [ask_id, button.verb]
    if button.consent_ttl_ms is not None:
        parts.append(str(button.consent_ttl_ms))
    return "|".join(parts)


def said(trigger: str | None, verb: str) -> str:
    """An answer as the message says it: `Approved`, `Changes requested`, ..."""
    return _SAID.get((trigger or "", verb), verb.capitalize())


def closed_said(closed: str | None) -> str:
    return _CLOSED.get(closed or "", closed or "closed")


def cut(text: str, limit: int) -> str:
    """`text` within `limit` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": True}


def button_json(ask_id: str, button: Button) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "button",
        "action_id": button.action_id,
        "text": _plain(button.label),
        "value": value_of(ask_id, button),
    }
    if button.style is not None:
        element["style"] = button.style
    if button.confirm:
        element["confirm"] = {
            "title": _plain("Decline this?"),
            "text": {
                "type": "mrkdwn",
                "text": "The seat will not take this step, and will not ask again until the "
                "work changes.",
            },
            "confirm": _plain("Decline"),
            "deny": _plain("Cancel"),
            "style": "danger",
        }
    return element


def revoke_json(consent_id: str, ask_id: str) -> dict[str, Any]:
    """The actions block with the "Revoke consent" button of consent `consent_id`, given on
    the message of ask `ask_id`."""
    return {
        "type": "actions",
        "block_id": f"{CONSENT_BLOCK}{consent_id}",
        "elements": [
            {
                "type": "button",
                "action_id": REVOKE_ACTION,
                "text": _plain("Revoke consent"),
                "value": f"{consent_id}|{ask_id}",
                "style": "danger",
                "confirm": {
                    "title": _plain("Revoke this consent?"),
                    "text": {
                        "type": "mrkdwn",
                        "text": "The seat is told at once, and must not take this step on "
                        "it; a later step needing it asks again.",
                    },
                    "confirm": _plain("Revoke"),
                    "deny": _plain("Cancel"),
                    "style": "danger",
                },
            }
        ],
    }


def ask_blocks(
    words: str,
    ask_id: str,
    trigger: str | None,
    *,
    context: str | None = None,
    revoke: str | None = None,
) -> list[dict[str, Any]]:
    """The message's blocks: its words (mrkdwn, cut to a section's cap), a context line when
    there is one (how it was answered, snoozed or closed), its buttons (`trigger` None:
    none, as on an answered or closed ask), and the button that revokes consent `revoke`
    (an approved consent that still holds)."""
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": cut(words, SECTION_MAX)}}
    ]
    if context:
        blocks.append(
            {"type": "context", "elements": [{"type": "mrkdwn", "text": cut(context, CONTEXT_MAX)}]}
        )
    buttons = buttons_for(trigger)
    if buttons:
        blocks.append(
            {
                "type": "actions",
                "block_id": f"{ASK_BLOCK}{ask_id}",
                "elements": [button_json(ask_id, b) for b in buttons],
            }
        )
    if revoke is not None:
        blocks.append(revoke_json(revoke, ask_id))
    return blocks


# ---------------------------------------------------------------------- reading a click


@dataclass(frozen=True)
class Click:
    """A click on one of an ask's buttons, in a message."""

    ask_id: str
    verb: ButtonVerb
    consent_ttl_ms: int | None
    user_id: str
    channel_id: str
    message_ts: str
    response_url: str | None
    action_id: str
    # When Slack stamped the click (the action's `action_ts`): one click delivered twice
    # carries the same one, two clicks two.
    action_ts: str | None = None


@dataclass(frozen=True)
class RevokeClick:
    """A click on an answered consent's "Revoke consent" button, in a message."""

    consent_id: str
    ask_id: str  # the ask whose message was clicked (an escalation's own, or the seat's)
    user_id: str
    channel_id: str
    message_ts: str
    response_url: str | None
    action_ts: str | None = None


@dataclass(frozen=True)
class Ignored:
    """An interaction that answers no ask: its payload type and why it is not one."""

    kind: str
    reason: str


def read_value(
    block_id: object, action_id: object, value: object
) -> tuple[str, ButtonVerb, int | None]:
    """(ask id, verb, consent ttl) of one of our buttons; ValueError when it is not one."""
    block, action, raw = as_str(block_id), as_str(action_id), as_str(value)
    if block is None or action is None or raw is None:
        raise ValueError("a button of ours has a block_id, an action_id and a value")
    if not block.startswith(ASK_BLOCK) or not action.startswith(ANSWER_ACTION):
        raise ValueError(f"block {block[:60]!r} / action {action[:60]!r} is not an ask's button")
    parts = raw.split("|")
    if len(parts) not in (2, 3):
        raise ValueError(f"value {raw[:60]!r} is not <ask id>|<verb>[|<ttl ms>]")
    ask_id, word = parts[0], parts[1]
    if not ask_id or ask_id != block.removeprefix(ASK_BLOCK):
        raise ValueError(f"value names ask {ask_id[:60]!r}, its block {block[:60]!r}")
    verb = _VERBS.get(word)
    if verb is None or action.removeprefix(ANSWER_ACTION).split(":")[0] != verb:
        raise ValueError(f"{word[:20]!r} is not a button's answer (action {action[:60]!r})")
    ttl: int | None = None
    if len(parts) == 3:
        if verb != "approved" or not parts[2].isdigit():
            raise ValueError(f"a consent's time belongs on an approval: {raw[:60]!r}")
        ttl = int(parts[2])
        if not MIN_TTL_MS <= ttl <= MAX_TTL_MS:
            raise ValueError(f"a consent holds {MIN_TTL_MS} to {MAX_TTL_MS} ms, not {ttl}")
    return ask_id, verb, ttl


def read_revoke(block_id: object, action_id: object, value: object) -> tuple[str, str]:
    """(consent id, ask id) of a "Revoke consent" button; ValueError when it is not one."""
    block, action, raw = as_str(block_id), as_str(action_id), as_str(value)
    if block is None or action is None or raw is None:
        raise ValueError("a button of ours has a block_id, an action_id and a value")
    if not block.startswith(CONSENT_BLOCK) or action != REVOKE_ACTION:
        raise ValueError(f"block {block[:60]!r} / action {action[:60]!r} is not a revoke button")
    parts = raw.split("|")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise ValueError(f"value {raw[:60]!r} is not <consent id>|<ask id>")
    consent_id, ask_id = parts
    if consent_id != block.removeprefix(CONSENT_BLOCK):
        raise ValueError(f"value names consent {consent_id[:60]!r}, its block {block[:60]!r}")
    return consent_id, ask_id


Read = tuple[str, ButtonVerb, int | None] | tuple[str, str]


def _ours(actions: Sequence[Any]) -> tuple[Any, Read] | None:
    """The first action that is one of an ask's buttons or a revoke button, and what it
    says."""
    for action in actions:
        fields = [dig(action, name) for name in ("block_id", "action_id", "value")]
        for reader in (read_value, read_revoke):
            try:
                return action, reader(*fields)
            except ValueError:
                continue
    return None


def read_interaction(payload: Mapping[str, Any]) -> Click | RevokeClick | Ignored:
    """A click on an ask's button (or an answered consent's revoke button), or why this
    interaction is none: another type (a modal submitted or closed, a shortcut, a message
    action), another app's or block's action, a button in a view (no message to answer in
    place), or one without a clicker or message."""
    kind = as_str(payload.get("type")) or "unknown"
    if kind != "block_actions":
        return Ignored(kind[:40], f"a {kind[:40]} interaction answers no ask")
    found = _ours(as_list(payload.get("actions")))
    if found is None:
        return Ignored(kind, "no action of an ask's buttons")
    action, read = found
    if dig(payload, "container", "type") == "view" or payload.get("view") is not None:
        return Ignored(kind, "a button in a view, not on an ask's message")
    channel = as_str(dig(payload, "channel", "id")) or as_str(
        dig(payload, "container", "channel_id")
    )
    ts = as_str(dig(payload, "container", "message_ts")) or as_str(dig(payload, "message", "ts"))
    if channel is None or ts is None:
        return Ignored(kind, "a button with no channel or message to answer in")
    user = as_str(dig(payload, "user", "id"))
    if user is None:
        return Ignored(kind, "a click with no user who clicked")
    if len(read) == 2:
        consent_id, clicked = read
        return RevokeClick(
            consent_id=consent_id,
            ask_id=clicked,
            user_id=user,
            channel_id=channel,
            message_ts=ts,
            response_url=as_str(payload.get("response_url")),
            action_ts=as_str(dig(action, "action_ts")),
        )
    ask_id, verb, ttl = read
    return Click(
        ask_id=ask_id,
        verb=verb,
        consent_ttl_ms=ttl,
        user_id=user,
        channel_id=channel,
        message_ts=ts,
        response_url=as_str(payload.get("response_url")),
        action_id=str(dig(action, "action_id")),
        action_ts=as_str(dig(action, "action_ts")),
    )
