"""Who exists in the organisation: members, channels, the agent seats and the objectives they
steward (issue 10). Pure data.

They come from the org file, so unknown fields are refused: a misspelt `owns` must stop the
start, not quietly change who gets asked.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from contracts._base import StrictWire
from contracts.goals import Objective
from contracts.money import Enforcement

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


class NoopLauncher(StrictWire):
    """The default: the turn is recorded `ok` at once and no agent runs. The inbox is left for
    the seat to acknowledge (its runtime polling the updates route)."""

    kind: Literal["noop"] = "noop"


class HttpLauncher(StrictWire):
    """POST the turn to an agent runtime; its outcome comes in the reply, or later at
    `POST /v1/seats/{seat}/turns/{turn}/outcome` (a 202 reply)."""

    kind: Literal["http"]
    url: str = Field(pattern=r"^https?://", max_length=2000)
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    token_env: str | None = Field(
        default=None,
        pattern=r"^[A-Z_][A-Z0-9_]*$",
        description="the environment variable holding a bearer token for the runtime",
    )


SessionMode = Literal["session-id", "resume"]
DEFAULT_SESSION_ARGS: dict[SessionMode, tuple[str, ...]] = {
    "session-id": ("--session-id", "{sessionId}"),
    "resume": ("--resume", "{sessionId}"),
}


class CommandLauncher(StrictWire):
    """Run an agent CLI as a subprocess (never through a shell). `argv` and `sessionArgs`
    may hold `{sessionId}`, `{seatId}`, `{turnId}` and `{reason}`; the turn's brief (JSON) is
    written to its stdin. `sessionArgs` says how the CLI is told to start a conversation with
    a given id (`session-id`) and to resume one (`resume`); empty, the CLI keeps no session."""

    kind: Literal["command"]
    argv: tuple[str, ...] = Field(min_length=1)
    session_args: dict[SessionMode, tuple[str, ...]] = Field(
        default_factory=lambda: dict(DEFAULT_SESSION_ARGS)
    )
    output: Literal["claude", "codex", "text"] = "text"
    time_limit_s: float = Field(default=900.0, gt=0, le=86_400)
    cwd: str | None = None
    home_dir: str | None = Field(
        default=None, description="where the CLI keeps its transcripts (default: $HOME)"
    )
    env: dict[str, str] = Field(default_factory=dict)
    # Where to write, before each launch, an MCP config that hands the CLI the seat's tools
    # (`seatwire mcp --seat SEAT` over stdio); `{mcpConfig}` in argv is its path.
    mcp_config: str | None = Field(default=None, min_length=1, max_length=1000)
    # What the CLI's reported cost is: `on` only when it is money actually charged (API
    # billing); a subscription's estimate is `shadow`, recorded and never counted as spend.
    cost_enforcement: Enforcement = "shadow"

    @property
    def keeps_sessions(self) -> bool:
        return bool(self.session_args)

    @field_validator("cost_enforcement", mode="before")
    @classmethod
    def _yaml_on_off(cls, value: object) -> object:
        # YAML 1.1 reads a bare `on` / `off` as a boolean: take it as the word it was.
        if isinstance(value, bool):
            return "on" if value else "off"
        return value


LauncherSpec = Annotated[NoopLauncher | HttpLauncher | CommandLauncher, Field(discriminator="kind")]


class ControllerOptions(StrictWire):
    """The seat's work-controller options (the original controller's names and defaults),
    but for the quiet interval: 0 means a seat runs only when there is a reason."""

    quiet_interval_ms: int = Field(default=0, ge=0)
    quiet_jitter_ms: int | None = Field(default=None, ge=0)
    announcement_jitter_ms: int = Field(default=120_000, ge=0)
    retry_base_ms: int = Field(default=10_000, ge=0)
    max_failures: int = Field(default=3, ge=1, le=100)


class Seat(StrictWire):
    """An agent seat: its own identity (every alias it answers to) and who hears of its faults."""

    member_id: str = Field(min_length=1)
    aliases: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    supervisor_id: str | None = None
    surfaces: dict[str, bool] = Field(default_factory=dict)
    launcher: LauncherSpec = Field(default_factory=NoopLauncher)
    controller: ControllerOptions = Field(default_factory=ControllerOptions)
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


class Project(StrictWire):
    """The project card a seat reads with `get_project` (docs/tools.md): its name, mission, the
    rules the seats work under, the repository, and when it started (Unix ms)."""

    name: str = Field(default="", max_length=200)
    mission: str = Field(default="", max_length=4000)
    rules: tuple[str, ...] = Field(default=(), max_length=100)
    repository: str | None = Field(default=None, max_length=300)
    started_at_ms: int | None = Field(default=None, ge=0)


class DecisionPolicy(StrictWire):
    """How the project decides its directions (issue 13, `open_decision` and friends): who
    owns the project (may end voting early), the countdown a direction may run (seconds),
    who resolves a tie and approves or rejects an outcome (the owner unless named), whether
    an outcome needs that approval, and the channel (one the org file lists) each direction
    is posted in for people, who vote by replying For or Against in its thread. Snapshotted
    into each direction when it opens."""

    owner_id: str = Field(min_length=1)
    min_countdown_seconds: int = Field(default=60, gt=0, le=31_536_000)
    max_countdown_seconds: int = Field(default=7 * 86_400, gt=0, le=31_536_000)
    resolver_id: str | None = Field(default=None, min_length=1)
    requires_approval: bool = False
    channel_id: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _range(self) -> DecisionPolicy:
        if self.min_countdown_seconds > self.max_countdown_seconds:
            raise ValueError(
                f"minCountdownSeconds ({self.min_countdown_seconds}) is above "
                f"maxCountdownSeconds ({self.max_countdown_seconds})"
            )
        return self

    @property
    def resolver(self) -> str:
        """Who resolves ties and approvals: `resolverId`, else the owner."""
        return self.resolver_id or self.owner_id


class Org(StrictWire):
    """The org file: everything Seatwire knows about the organisation at start."""

    project: Project = Field(default_factory=Project)
    members: tuple[Member, ...]
    channels: tuple[Channel, ...] = ()
    seats: tuple[Seat, ...] = ()
    objectives: tuple[Objective, ...] = ()
    decisions: DecisionPolicy | None = None
