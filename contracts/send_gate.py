"""The send gate's policy and verdict (docs/architecture.md, "The send stage"). Pure data.

The policy comes from configuration, so unknown keys are refused: a misspelt
`deniedChannelIds` must stop the start, not quietly let every channel through.
"""

from __future__ import annotations

import re
from typing import Literal, Self, get_args

from pydantic import Field, field_validator, model_validator

from contracts._base import StrictWire, Wire

# Slack truncates a message's text beyond 40,000 characters; nothing above that can be sent.
SLACK_HARD_LIMIT_CHARS = 40_000

SendOutcome = Literal["send", "blocked", "defer"]

# Every reason the gate can give, in the order the gate checks them (first match wins).
SendRule = Literal[
    "body_empty",
    "body_too_short",
    "body_too_long",
    "credentials_in_body",
    "no_target",
    "target_not_engageable",
    "unknown_surface",
    "channel_denied",
    "dm_not_allowed",
    "new_room_not_allowed",
    "no_channel",
    "channel_not_allowed",
    "quiet_hours",
]
SEND_RULES: tuple[SendRule, ...] = get_args(SendRule)

Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
WEEKDAYS: tuple[Weekday, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

_HH_MM = re.compile(r"(\d{2}):(\d{2})")
# The shape of an IANA key ("UTC", "Europe/London", "Etc/GMT+5"). Whether the zone exists is
# known only to the tz database, which the workers read when they resolve it at start.
_IANA_KEY = re.compile(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*")


def minute_of_day(hh_mm: str) -> int:
    """Minutes after local midnight of an "HH:MM" (24-hour) time."""
    match = _HH_MM.fullmatch(hh_mm)
    if match is None or int(match[1]) > 23 or int(match[2]) > 59:
        raise ValueError(f"must be a 24-hour 'HH:MM' between 00:00 and 23:59, got {hh_mm!r}")
    return int(match[1]) * 60 + int(match[2])


class QuietHours(StrictWire):
    """A nightly window in which nobody is asked, judged in each asked person's own time.

    `start` is inside the window and `end` is not; `end` before `start` wraps midnight
    (22:00-07:00). `days` names the local weekdays on which a window STARTS (the night of
    Friday 22:00 to Saturday 07:00 belongs to Friday); None means every day.
    """

    start: str = "22:00"
    end: str = "07:00"
    days: tuple[Weekday, ...] | None = None
    default_timezone: str = "UTC"

    @field_validator("start", "end")
    @classmethod
    def _hh_mm(cls, value: str) -> str:
        minute_of_day(value)
        return value

    @field_validator("days", mode="before")
    @classmethod
    def _lower_days(cls, value: object) -> object:
        if isinstance(value, list | tuple):
            return [v.strip().lower()[:3] if isinstance(v, str) else v for v in value]
        return value

    @field_validator("days")
    @classmethod
    def _some_days(cls, value: tuple[Weekday, ...] | None) -> tuple[Weekday, ...] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("an empty list of days never applies; omit quietHours instead")
        return tuple(d for d in WEEKDAYS if d in value)

    @field_validator("default_timezone")
    @classmethod
    def _iana_key(cls, value: str) -> str:
        if not _IANA_KEY.fullmatch(value) or ".." in value:
            raise ValueError(f"must be an IANA time zone name like 'Europe/London', got {value!r}")
        return value

    @model_validator(mode="after")
    def _not_empty_or_whole_day(self) -> Self:
        if minute_of_day(self.start) == minute_of_day(self.end):
            raise ValueError(
                f"quiet hours start and end are both {self.start}: that window could mean "
                "never or all day; omit quietHours to switch them off"
            )
        return self

    @property
    def start_minute(self) -> int:
        return minute_of_day(self.start)

    @property
    def end_minute(self) -> int:
        return minute_of_day(self.end)


class SendPolicy(StrictWire):
    """What the send gate lets onto the wire. The defaults are what an org wants on day one.

    `max_body_chars` is 3,000: the ask template (headline, summary, where it stopped, five
    things tried, one question, five options, a link) fits in well under 1,500; Slack asks
    for message text under 4,000 and truncates at 40,000. An ask longer than two screens is a
    log or a diff pasted by an agent, and belongs behind the link.

    `allowed_channel_ids` (None = any) governs EXISTING conversations only (a reply in place
    or a post in an existing channel); a DM or a new room that Seatwire opens itself is
    governed by `allow_dm` / `allow_new_rooms`. `denied_channel_ids` always refuses and wins
    over the allow list. Quiet hours are off unless configured: in an org whose members have
    no timezone yet, a default window would silently hold every ask for UTC's night.
    """

    max_body_chars: int = Field(default=3_000, ge=1, le=SLACK_HARD_LIMIT_CHARS)
    min_body_chars: int = Field(default=1, ge=1)
    allowed_channel_ids: tuple[str, ...] | None = None
    denied_channel_ids: tuple[str, ...] = ()
    allow_dm: bool = True
    allow_new_rooms: bool = True
    quiet_hours: QuietHours | None = None
    block_credentials: bool = True

    @model_validator(mode="after")
    def _min_not_above_max(self) -> Self:
        if self.min_body_chars > self.max_body_chars:
            raise ValueError(
                f"minBodyChars ({self.min_body_chars}) is above maxBodyChars "
                f"({self.max_body_chars}): no body could pass"
            )
        return self


class SendGateVerdict(Wire):
    """Whether an ask may go onto the wire now, and if not the rule that said no.

    `blocked` is recorded as `send_blocked` with `rule`; `defer` is re-queued for
    `defer_until_ms` and re-checked then. `detail` never quotes a credential: it names the
    kind, the position and a fixed prefix such as `xoxb-…`. `checked_member_ids` are the
    people the ask reaches (its targets, then any other member it is opened with).
    """

    outcome: SendOutcome
    rule: SendRule | Literal[""] = ""
    detail: str = ""
    defer_until_ms: int | None = None
    checked_member_ids: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if (self.outcome == "send") != (self.rule == ""):
            raise ValueError("a rule is named exactly when the outcome is not send")
        if (self.outcome == "defer") != (self.defer_until_ms is not None):
            raise ValueError("deferUntilMs is set exactly when the outcome is defer")
        return self
