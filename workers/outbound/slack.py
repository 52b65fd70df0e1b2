"""The `slack` outbound adapter, on slack_sdk's WebClient, against Slack or any server that
speaks its Web API (`SEATWIRE_SLACK_API_URL`).

Slack's `chat.postMessage` has no idempotency key (docs/reliability.md), so exactly-once is
built from three things: the send stage records its intent before this adapter is called; each
post carries the ask's idempotency id in its message `metadata`; and a try whose outcome is
unknown is followed by `reconcile`, which reads the conversation's recent history for that id
before anything is posted again. The posting client has the SDK's retry handlers OFF: its
default handler re-sends after a connection reset, which is a duplicate when the first post
was applied (fault test 18, docs/reliability.md).

Every failure is typed for the send stage:
- `NotSent` (send again, after `retry_after_s` when Slack gave one): 429 and `ratelimited`,
  a connection that failed before the request was written, or any failure of a step before the
  post (opening the DM, creating the room);
- `MaybeSent` (reconcile first): a timeout or reset after the post was written, HTTP 5xx,
  `internal_error`, `fatal_error`, `service_unavailable`, `request_timeout`;
- `PermanentError` (one attempt): `channel_not_found`, `not_in_channel`, `is_archived`,
  `msg_too_long`, `invalid_auth` and every other `ok: false` error.
"""

from __future__ import annotations

import logging
import re
import urllib.error
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler

from contracts.asks import Ask
from contracts.messages import OutboundAsk, SendResult
from pipeline.asks import revocable
from pipeline.slack_buttons import ask_blocks, closed_said, cut, said
from workers.clock import now_ms
from workers.errors import ConfigError, MaybeSent, NotSent, PermanentError
from workers.outbound.base import SendContext, seconds
from workers.telemetry import telemetry

log = logging.getLogger("seatwire.slack")

EVENT_TYPE = "seatwire_ask"  # the message metadata's event_type on every post
# Reconciliation reads history from a little before the first try began: Slack's clock and
# ours may differ, and a post's ts is Slack's.
RECONCILE_SKEW_S = 300
HISTORY_PAGE = 200
RECONCILE_PAGES = 10  # 2,000 messages since the try began; beyond that, give up loudly

# Slack user ids: U… or W… (Enterprise Grid), upper-case letters and digits.
_SLACK_USER = re.compile(r"^[UW][A-Z0-9]{2,}$")
_ROOM_CHARS = re.compile(r"[^a-z0-9_-]+")
_BOLD = re.compile(r"\*\*([^*\n]+)\*\*")

RATE_LIMITED = frozenset({"ratelimited", "rate_limited"})
AMBIGUOUS = frozenset({"internal_error", "fatal_error", "service_unavailable", "request_timeout"})
GONE = ("channel_not_found", "is_archived")  # a conversation nothing can be posted in any more


def slack_user_id(aliases: tuple[str, ...]) -> str | None:
    """A member's Slack user id: the first alias shaped like one."""
    for alias in aliases:
        if _SLACK_USER.match(alias.strip()):
            return alias.strip()
    return None


def render_text(ask: OutboundAsk, users: Mapping[str, str], names: Mapping[str, str]) -> str:
    """The ask in Slack's mrkdwn: `**bold**` becomes `*bold*`, and each person it mentions is
    a real mention `<@U…>` (their `@Display Name` in the text is replaced; a mention with no
    such text is put first). A person with no Slack id keeps the plain name."""
    return mrkdwn(ask.body, [m.member_id for m in ask.mentions], users, names, lead=True)


def mrkdwn(
    body: str,
    member_ids: Iterable[str],
    users: Mapping[str, str],
    names: Mapping[str, str],
    *,
    lead: bool,
) -> str:
    """`body` in mrkdwn with each of `member_ids` a real mention where it is named (and, with
    `lead`, put first where it is not)."""
    text = _BOLD.sub(r"*\1*", body)
    leading: list[str] = []
    for member_id in member_ids:
        uid = users.get(member_id)
        if uid is None:
            continue
        name = names.get(member_id, "")
        token = f"<@{uid}>"
        # `@Ann` but not the start of `@Anna`: the name must end where a word ends.
        named = re.compile(rf"@{re.escape(name)}(?!\w)") if name else None
        if named is not None and named.search(text):
            text = named.sub(token, text)  # a Slack id holds no backslash or group
        elif lead and token not in text:
            leading.append(token)
    return f"{' '.join(leading)} {text}" if leading else text


def slack_date(ms: int) -> str:
    """A time in Slack's date formatting, shown in each reader's own time zone, with the UTC
    time for a client that cannot format it."""
    at = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return f"<!date^{ms // 1000}^{{date_short_pretty}} at {{time}}|{at:%Y-%m-%d %H:%M} UTC>"


def mention(member_id: str, users: Mapping[str, str]) -> str:
    """A member as a Slack mention when the directory has their Slack id, else their id."""
    uid = users.get(member_id)
    return f"<@{uid}>" if uid else member_id


def status_line(ask: Ask, users: Mapping[str, str]) -> str | None:
    """What an ask's message says of where it stands: how it was answered (by whom, when,
    and a consent's end), until when it is snoozed, why it closed, or whom it went up to.
    None for an ask still simply waiting."""
    a = ask.answer
    if ask.state == "answered" and a is not None:
        line = f"*{said(ask.trigger, a.answer)}* by {mention(a.by, users)} on {slack_date(a.at_ms)}"
        if a.consent_revoked_at_ms is not None:
            revoker = mention(a.consent_revoked_by or "?", users)
            line += f" · consent revoked by {revoker} on {slack_date(a.consent_revoked_at_ms)}"
        elif a.consent_expires_at_ms is not None:
            line += f" · consent on record until {slack_date(a.consent_expires_at_ms)}"
        if a.text:
            line += f": “{cut(a.text, 500)}”"
        return line
    if ask.state == "snoozed" and ask.snooze_until_ms is not None:
        by = next((e.by for e in reversed(ask.history) if e.event == "snoozed" and e.by), None)
        who = f" by {mention(by, users)}" if by else ""
        return f"*Snoozed*{who} until {slack_date(ask.snooze_until_ms)}"
    if ask.state == "closed":
        return f"*Closed*: {closed_said(ask.closed)}"
    if ask.escalations:
        step = ask.escalations[-1]
        up = mention(step.target_id, users)
        return f"No answer yet: also asked {up} on {slack_date(step.at_ms)}"
    return None


def room_name(ask: OutboundAsk) -> str:
    """A deterministic Slack channel name for the room of an ask (<= 80 chars)."""
    base = _ROOM_CHARS.sub("-", (ask.room_name or ask.work_id).lower()).strip("-_")[:60]
    return f"{base or 'ask'}-{ask.idempotency_id[-8:].lower()}"


def _error_code(exc: SlackApiError) -> str:
    data = exc.response.data if exc.response is not None else None
    return str(data.get("error") or "") if isinstance(data, dict) else ""


def _retry_after(exc: SlackApiError) -> float | None:
    headers = exc.response.headers if exc.response is not None else {}
    for key in ("Retry-After", "retry-after"):
        value = headers.get(key)
        if isinstance(value, list):
            value = value[0] if value else None
        if value is not None:
            return seconds(value)
    return None


def classify(exc: Exception, *, what: str, posted: bool) -> Exception:
    """The send stage's error for a failed Web API call. `posted`: the call was the post
    itself, so a failure after it left may have been applied."""
    if isinstance(exc, SlackApiError):
        status = exc.response.status_code if exc.response is not None else 0
        code = _error_code(exc)
        if status == 429 or code in RATE_LIMITED:
            telemetry().rate_limited("slack", what)
            return NotSent(f"slack {what}: {code or 'HTTP 429'}", retry_after_s=_retry_after(exc))
        if status >= 500 or code in AMBIGUOUS:
            reason = f"slack {what}: {code or f'HTTP {status}'}"
            return MaybeSent(reason) if posted else NotSent(reason)
        return PermanentError(f"slack {what}: {code or f'HTTP {status}'}")
    if isinstance(exc, urllib.error.URLError):
        # urllib raises URLError only while connecting or writing the request: the server
        # never had a whole request to apply.
        return NotSent(f"slack {what}: cannot reach the API ({exc.reason})")
    reason = f"slack {what}: {type(exc).__name__}: {exc}"
    return MaybeSent(reason) if posted else NotSent(reason)


class Cooldowns(Protocol):
    """Where every worker holds its posts to a conversation after a 429 there
    (workers/stores/cooldowns.py keeps them in Redis)."""

    def remaining_s(self, channel: str) -> float: ...

    def hold(self, channel: str, seconds: float) -> None: ...


class SlackOutbound:
    name = "slack"

    def __init__(
        self,
        *,
        token: str,
        api_url: str,
        timeout_s: float,
        directory: Callable[[], Mapping[str, tuple[tuple[str, ...], str]]],
        cooldowns: Cooldowns | None = None,
        clock_ms: Callable[[], int] = now_ms,
    ) -> None:
        """`directory()` maps member id -> (aliases, display name), read at each send so an
        org file reload is seen; `clock_ms` tells whether a consent shown still holds."""
        self.api_url = api_url
        self.clock_ms = clock_ms
        self.directory = directory
        self.cooldowns = cooldowns
        self.poster = WebClient(
            token=token, base_url=api_url, timeout=int(max(1, timeout_s)), retry_handlers=[]
        )
        # Reads are idempotent: a reset may be retried once by the SDK itself.
        self.reader = WebClient(
            token=token,
            base_url=api_url,
            timeout=int(max(1, timeout_s)),
            retry_handlers=[ConnectionErrorRetryHandler(max_retry_count=1)],
        )
        self.bot_user_id: str | None = None
        self._people_of: (
            tuple[Mapping[str, tuple[tuple[str, ...], str]], tuple[dict[str, str], dict[str, str]]]
            | None
        ) = None
        # What auth.test said the token's bot is (`user_id`, `bot_id`), once `check` ran.
        self.identity: dict[str, str] = {}

    # ---------------------------------------------------------------- start

    def check(self) -> str:
        """auth.test at start: a missing or wrong token, or an API that cannot be reached, is
        refused before the first ask."""
        try:
            reply = self.reader.auth_test()
        except SlackApiError as exc:
            raise ConfigError(
                f"Slack refused the bot token at {self.api_url}: {_error_code(exc) or exc}"
            ) from exc
        except Exception as exc:
            raise ConfigError(f"cannot reach the Slack API at {self.api_url}: {exc}") from exc
        self.bot_user_id = str(reply.get("user_id") or "")
        self.identity = {
            "user_id": self.bot_user_id,
            "bot_id": str(reply.get("bot_id") or ""),
        }
        return f"slack at {self.api_url} as {reply.get('user') or '?'} ({self.bot_user_id})"

    # ---------------------------------------------------------------- send

    def send(self, ask: OutboundAsk, ctx: SendContext) -> SendResult:
        users, names = self._people()
        channel, created = self._channel(ask, ctx, users)
        payload: dict[str, Any] = {
            "channel": channel,
            "text": render_text(ask, users, names),
            "metadata": {
                "event_type": EVENT_TYPE,
                "event_payload": {
                    "idempotency_id": ask.idempotency_id,
                    "tracking_id": ask.tracking_id,
                    "seat_id": ask.seat_id,
                },
            },
            "unfurl_links": False,
            "unfurl_media": False,
        }
        if ask.ask_id:
            # The words again as a section (the `text` stays whole, for notifications and
            # screen readers), then the answers this kind of ask offers.
            payload["blocks"] = ask_blocks(payload["text"], ask.ask_id, ask.trigger)
        if ask.thread_root_id and ask.surface == "reply_in_place":
            payload["thread_ts"] = ask.thread_root_id
        if self.cooldowns is not None:
            wait_s = self.cooldowns.remaining_s(channel)
            if wait_s > 0:
                raise NotSent(f"slack: {channel} is rate-limited", retry_after_s=wait_s)
        try:
            reply = self.poster.chat_postMessage(**payload)
        except Exception as exc:
            failure = classify(exc, what="chat.postMessage", posted=True)
            if isinstance(failure, NotSent) and self.cooldowns is not None:
                self.cooldowns.hold(channel, failure.retry_after_s or 1.0)
            raise failure from exc
        return SendResult(
            channel_id=str(reply.get("channel") or channel),
            message_id=str(reply.get("ts") or ""),
            room_created=created,
        )

    def show_answer(self, ask: Ask) -> bool:
        """The ask's message changed in place (chat.update): its words, and a line saying how
        it was answered, by whom and when (or until when it is snoozed, or why it closed).
        It keeps its buttons while it can still be answered, none once answered or closed,
        except an approved consent's "Revoke consent" while it holds as far as the ask knows
        (a revocation shows the message again, without it); its metadata is left as it is,
        so reconciliation still finds it."""
        landing = ask.landing
        if landing is None or not landing.channel_id or not landing.message_id:
            return False
        users, names = self._people()
        words = mrkdwn(
            ask.body or ask.reason or f"Ask {ask.id}",
            [t.member_id for t in ask.targets],
            users,
            names,
            lead=False,
        )
        line = status_line(ask, users)
        buttons = ask.trigger if ask.is_open else None
        try:
            self.poster.chat_update(
                channel=landing.channel_id,
                ts=landing.message_id,
                text=f"{words}\n\n{line}" if line else words,
                blocks=ask_blocks(
                    words,
                    ask.id,
                    buttons,
                    context=line,
                    revoke=revocable(ask, now_ms=self.clock_ms()),
                ),
            )
        except Exception as exc:
            raise classify(exc, what="chat.update", posted=True) from exc
        return True

    def reconcile(self, ask: OutboundAsk, ctx: SendContext) -> SendResult | None:
        """The earlier post of this ask, or None when it is provably not there."""
        users, _names = self._people()
        try:
            channel = self._existing_channel(ask, ctx, users)
            if channel is None:
                return None  # its room was never created, so nothing was posted in it
            oldest = f"{max(0, ctx.since_ms // 1000 - RECONCILE_SKEW_S)}.000000"
            for message in self._messages(ask, channel, oldest):
                meta = message.get("metadata") or {}
                found = (meta.get("event_payload") or {}).get("idempotency_id")
                if meta.get("event_type") == EVENT_TYPE and found == ask.idempotency_id:
                    return SendResult(
                        channel_id=channel,
                        message_id=str(message.get("ts") or ""),
                        room_created=ask.surface == "new_room",
                    )
        except PermanentError as exc:
            if str(exc).endswith(GONE):
                return None  # the conversation is gone: nothing can be in it, or be posted
            # Slack will not let us look (a missing history scope, revoked access): the ask
            # may be there, so it must not be posted again. A person decides (the DLQ).
            raise PermanentError(
                f"cannot reconcile {ask.idempotency_id}, so it is not sent again: {exc}"
            ) from exc
        except (MaybeSent, NotSent) as exc:
            # A passing fault: the op stays `unknown` and is looked up again, after the wait
            # Slack asked for when it rate-limited the look-up.
            raise MaybeSent(
                f"reconciliation of {ask.idempotency_id} failed: {exc}",
                retry_after_s=exc.retry_after_s,
            ) from exc
        except Exception as exc:
            raise MaybeSent(f"reconciliation of {ask.idempotency_id} failed: {exc!r}") from exc
        return None

    # ---------------------------------------------------------------- helpers

    def _people(self) -> tuple[dict[str, str], dict[str, str]]:
        """Slack user ids and display names by member id, worked out once per directory
        (`directory()` hands back the same mapping until the org file changes)."""
        directory = self.directory()
        if self._people_of is not None and self._people_of[0] is directory:
            return self._people_of[1]
        users: dict[str, str] = {}
        names: dict[str, str] = {}
        for member_id, (aliases, display) in directory.items():
            uid = slack_user_id(aliases)
            if uid is not None:
                users[member_id] = uid
            names[member_id] = display
        self._people_of = (directory, (users, names))
        return users, names

    def _user_ids(self, ask: OutboundAsk, users: Mapping[str, str]) -> list[str]:
        missing = [m for m in ask.member_ids if m not in users]
        if missing:
            raise PermanentError(
                f"no Slack user id for {', '.join(missing)}: add their U… id to the member's "
                "aliases in the org file"
            )
        return [users[m] for m in ask.member_ids]

    def _call(self, what: str, call: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return call(**kwargs)
        except Exception as exc:
            raise classify(exc, what=what, posted=False) from exc

    def _channel(
        self, ask: OutboundAsk, ctx: SendContext, users: Mapping[str, str]
    ) -> tuple[str, bool]:
        if ask.surface == "dm":
            return self._open(ask, users), False
        if ask.surface == "new_room":
            return self._room(ask, ctx, users), True
        if ask.channel_id:
            return ask.channel_id, False
        raise PermanentError(f"surface {ask.surface} needs a channel id")

    def _existing_channel(
        self, ask: OutboundAsk, ctx: SendContext, users: Mapping[str, str]
    ) -> str | None:
        if ask.surface == "dm":
            return self._open(ask, users)  # idempotent: the same conversation again
        if ask.surface == "new_room":
            return ctx.notes.get("room")
        return ask.channel_id

    def _open(self, ask: OutboundAsk, users: Mapping[str, str]) -> str:
        ids = self._user_ids(ask, users)
        if not ids:
            raise PermanentError("a DM needs at least one person")
        reply = self._call(
            "conversations.open", self.poster.conversations_open, users=",".join(ids)
        )
        return str(reply["channel"]["id"])

    def _room(self, ask: OutboundAsk, ctx: SendContext, users: Mapping[str, str]) -> str:
        """A private room for the ask, created once: its id is written down before anyone is
        invited or anything is posted, so a retry reuses it."""
        channel = ctx.notes.get("room")
        name = room_name(ask)
        if channel is None:
            try:
                reply = self.poster.conversations_create(name=name, is_private=True)
                channel = str(reply["channel"]["id"])
            except SlackApiError as exc:
                if _error_code(exc) != "name_taken":
                    raise classify(exc, what="conversations.create", posted=False) from exc
                channel = self._find_room(name)  # an earlier try created it, then died
            except Exception as exc:
                raise classify(exc, what="conversations.create", posted=False) from exc
            ctx.remember(room=channel)
        if not ctx.notes.get("invited"):
            ids = self._user_ids(ask, users)
            try:
                self.poster.conversations_invite(channel=channel, users=",".join(ids))
            except SlackApiError as exc:
                if _error_code(exc) != "already_in_channel":
                    raise classify(exc, what="conversations.invite", posted=False) from exc
            except Exception as exc:
                raise classify(exc, what="conversations.invite", posted=False) from exc
            ctx.remember(invited="1")
        return channel

    def _find_room(self, name: str) -> str:
        cursor: str | None = None
        for _ in range(50):
            reply = self._call(
                "conversations.list",
                self.reader.conversations_list,
                types="private_channel,public_channel",
                exclude_archived=True,
                limit=200,
                cursor=cursor,
            )
            for channel in reply.get("channels") or ():
                if channel.get("name") == name:
                    return str(channel["id"])
            cursor = (reply.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                break
        raise PermanentError(f"Slack says the room {name} exists but it cannot be found")

    def _messages(self, ask: OutboundAsk, channel: str, oldest: str) -> Iterator[dict[str, Any]]:
        """Messages since `oldest` where the ask would be: the thread for a reply (history
        holds only top-level messages), the conversation otherwise."""
        cursor: str | None = None
        for _ in range(RECONCILE_PAGES):
            page = {
                "channel": channel,
                "oldest": oldest,
                "limit": HISTORY_PAGE,
                "cursor": cursor,
                "include_all_metadata": True,
            }
            if ask.thread_root_id and ask.surface == "reply_in_place":
                reply = self._call(
                    "conversations.replies",
                    self.reader.conversations_replies,
                    ts=ask.thread_root_id,
                    **page,
                )
            else:
                reply = self._call(
                    "conversations.history", self.reader.conversations_history, **page
                )
            yield from reply.get("messages") or ()
            cursor = (reply.get("response_metadata") or {}).get("next_cursor") or None
            if not (reply.get("has_more") and cursor):
                return
        raise MaybeSent(
            f"more than {RECONCILE_PAGES * HISTORY_PAGE} messages in {channel} since the try "
            "began: cannot prove the ask is absent"
        )
