"""Who exists in the organisation: members, channels, the agent seats and the objectives they
steward (issue 10). Pure data.

They come from the org file, so unknown fields are refused: a misspelt `owns` must stop the
start, not quietly change who gets asked.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, field_validator

from contracts._base import StrictWire
from contracts.goals import Objective

ENGAGEABLE_STATUSES = frozenset({"active", "online", "busy"})


class ChannelKind(StrEnum):
    DM = "DM"
    GROUP_DM = "GROUP_DM"
    PUBLIC = "PUBLIC"
    PRIVATE = "PRIVATE"


class Member(StrictWire):
    """A person or seat in the directory. Only active/online/busy members are engageable."""

    id: str = Field(min_length=1)
    display_name: str = ""
    slug: str = ""
    status: str = "active"
    role_title: str = ""
    tagline: str = ""
    team_name: str = ""
    owns: tuple[str, ...] = ()
    escalation_path: str = ""
    supervisor_id: str | None = None
    aliases: tuple[str, ...] = ()
    timezone: str | None = None

    @property
    def engageable_status(self) -> bool:
        status = self.status.strip().lower()
        return not status or status in ENGAGEABLE_STATUSES


class Channel(StrictWire):
    id: str = Field(min_length=1)
    kind: ChannelKind = ChannelKind.PUBLIC
    name: str = ""
    member_ids: tuple[str, ...] = ()

    @field_validator("kind", mode="before")
    @classmethod
    def _upper_kind(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value


class LauncherSpec(StrictWire):
    """How a seat's turn is launched (section 10). `noop` is the embedded default."""

    kind: str = "noop"
    command: tuple[str, ...] = ()
    url: str | None = None


class Seat(StrictWire):
    """An agent seat: its own identity (every alias it answers to) and who hears of its faults."""

    member_id: str = Field(min_length=1)
    aliases: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    supervisor_id: str | None = None
    surfaces: dict[str, bool] = Field(default_factory=dict)
    launcher: LauncherSpec = Field(default_factory=LauncherSpec)
    operator_id: str | None = None
    slack_bot_user_id: str | None = Field(
        default=None,
        min_length=1,
        description="the user id of this seat's Slack app's bot (`auth.test` user_id): what "
        "it posts is its own echo",
    )
    slack_bot_id: str | None = Field(
        default=None,
        min_length=1,
        description="the `bot_id` of this seat's Slack app (`auth.test` bot_id): a post that "
        "carries only it (a response_url or incoming-webhook post) is its own echo too",
    )

    @property
    def own_identities(self) -> tuple[str, ...]:
        """The provider identities this seat posts as, besides its aliases."""
        return tuple(i for i in (self.slack_bot_user_id, self.slack_bot_id) if i)

    def answers_to(self, ident: str) -> bool:
        """True when `ident` is this seat's member id or one of its aliases (case-insensitive)."""
        probe = ident.strip().lower()
        return bool(probe) and probe in {a.strip().lower() for a in (self.member_id, *self.aliases)}


class Org(StrictWire):
    """The org file: everything Seatwire knows about the organisation at start."""

    members: tuple[Member, ...]
    channels: tuple[Channel, ...] = ()
    seats: tuple[Seat, ...] = ()
    objectives: tuple[Objective, ...] = ()
