"""Settings, from the environment (prefix SEATWIRE_). One typed object; read once at start.

With neither SEATWIRE_REDIS_URL nor SEATWIRE_BROKER_URL set, Seatwire runs embedded: an
in-process Redis stand-in and an in-memory broker. Setting SEATWIRE_REDIS_URL alone uses that
Redis for both the stores and the broker.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    AliasChoices,
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from contracts import Limits, SendPolicy
from workers.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parent.parent
BUNDLED_ORG = REPO_ROOT / "examples" / "org.yaml"
EMBEDDED_TOKEN = "seatwire-embedded-dev-token"
# Embedded mode signs and checks its bundled webhook stream with these; a real deployment
# sets the providers' own secrets, and a provider without one has its webhook route refused.
EMBEDDED_SLACK_SECRET = "seatwire-embedded-slack-signing-secret"
EMBEDDED_GITHUB_SECRET = "seatwire-embedded-github-webhook-secret"


class Settings(BaseSettings):
    # An invalid value is never echoed: a refused URL may hold a password.
    model_config = SettingsConfigDict(
        env_prefix="SEATWIRE_",
        env_nested_delimiter="__",
        extra="ignore",
        populate_by_name=True,
        hide_input_in_errors=True,
    )

    redis_url: str | None = None
    broker_url: str | None = None
    org_file: Path = BUNDLED_ORG
    api_token: SecretStr | None = None
    # Outbound: which adapter sends asks, and whether anything is sent at all.
    outbound: Literal["file", "slack", "webhook"] = "file"
    send_mode: Literal["off", "shadow", "on"] = "on"
    send_timeout_s: float = Field(default=10.0, gt=0, le=30)
    slack_bot_token: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("SEATWIRE_SLACK_BOT_TOKEN", "SLACK_BOT_TOKEN"),
    )
    slack_api_url: str = Field(
        default="https://slack.com/api/",
        validation_alias=AliasChoices("SEATWIRE_SLACK_API_URL", "SLACK_API_URL"),
    )
    send_policy: SendPolicy = Field(default_factory=SendPolicy)  # the send gate's rules
    webhook_url: str | None = None
    webhook_secret: SecretStr | None = None  # Standard Webhooks: `whsec_` + base64
    outbox_path: Path = Path(".seatwire/outbox.jsonl")
    outbox_fsync: bool = True
    limits: Limits = Field(default_factory=Limits)
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)
    # Prometheus: each `seatwire worker` and `seatwire beat` serves its own figures at
    # /metrics on this port (unset: it serves none; the ingress serves its own and the
    # cluster's on its `port`), on all interfaces by default, for a scraper elsewhere.
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    metrics_host: str = "0.0.0.0"
    visibility_timeout_s: int = Field(default=900, ge=30)
    task_time_limit_s: int = Field(default=60, ge=5)
    # Celery task events (Flower, `celery events`): on from each worker's start. They cost
    # throughput (four events a task; bench/README.md measures it); off, Flower shows workers
    # and queues but no tasks.
    task_events: bool = True
    reservation_ttl_ms: int = Field(default=1_800_000, ge=1000)
    journal_deadline_ms: int = Field(default=300_000, ge=1000)
    # Recovery (docs/reliability.md): how often beat sweeps the journal for overdue entries
    # and releases due parked messages, how many entries one tick takes at most, and how
    # many deliveries of one stage's message run before it goes to the dead-letter queue.
    sweep_interval_s: float = Field(default=15.0, gt=0)
    sweep_batch: int = Field(default=500, ge=1)
    max_deliveries: int = Field(default=5, ge=1)
    # Beat's leader lease (workers/recovery/leader.py): renewed every quarter of it, so a
    # standby beat takes over at most 1.25 leases after the leader's last renewal.
    beat_lease_ms: int = Field(default=20_000, ge=1000)
    # The goal steward (docs/architecture.md): how often beat runs it over every objective, how
    # long one objective's run lease and a COLLABORATE claim last, and the optional proposer
    # endpoint asked for candidates besides the playbook (its failures are audited).
    steward_interval_s: float = Field(default=300.0, gt=0)
    steward_lease_ms: int = Field(default=60_000, ge=1000)
    claim_lease_ms: int = Field(default=86_400_000, ge=1000)
    proposer_url: str | None = None
    proposer_timeout_s: float = Field(default=5.0, gt=0, le=30)
    # The work controller (docs/architecture.md): how often beat decides every seat's next
    # turn; the longest a turn may run (a launcher's own limit is cut to fit inside it, and
    # a turn still running past it plus the grace is settled as failed: its worker is gone);
    # and after how long a turn queued but never started is published again.
    controller_interval_s: float = Field(default=1.0, gt=0)
    # The event-driven controller (issue 27): at most this many due seats are decided per
    # tick (the oldest-due first; when more are due, the next tick follows at once, so a
    # tick stays short: ~40-60 ms at 300 seats); and how long the reconciliation pass takes
    # to look at every seat once (it finds a wake-up a crash lost), in steps of
    # `RECONCILE_SLICE` seats (workers/stages/controller_tick.py).
    controller_tick_seats: int = Field(default=300, ge=1)
    controller_reconcile_s: float = Field(default=900.0, gt=0)
    # Where agent runtimes reach this Seatwire's ingress (the `http` launcher's brief names its
    # MCP endpoint); default http://{host}:{port}.
    public_url: str | None = Field(default=None, pattern=r"^https?://")
    turn_time_limit_s: int = Field(default=1200, ge=30)
    turn_lease_grace_ms: int = Field(default=60_000, ge=1000)
    turn_republish_after_ms: int = Field(default=30_000, ge=1000)
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    ingress_budget_s: float = Field(default=2.5, gt=0)
    # How long the ingress keeps an idle HTTP connection open. Above what a client or load
    # balancer keeps one for (httpx 5 s, AWS ALB 60 s): a server that closes first races the
    # client's next request on that connection, which then meets a reset (uvicorn's own 5 s
    # equals httpx's, and lost requests to it under load).
    keep_alive_s: int = Field(default=75, ge=1, le=3600)
    # Slack gives up on an answer after 3 s and retries; answer (503 at worst) well inside it.
    webhook_budget_s: float = Field(default=1.5, gt=0, le=2.5)
    # The per-source rate limit on the writing routes (workers/ingress/ratelimit.py): a source
    # (a Slack team, a GitHub installation or repository, a /v1 caller) may send `burst`
    # requests at once and `rate_per_s` a second after that; beyond it, 429 with Retry-After.
    # 0 turns it off (the default: a deployment sizes it; see docs/security.md).
    ingress_rate_per_s: float = Field(default=0.0, ge=0)
    ingress_rate_burst: int = Field(default=200, ge=1)
    inbound_retention_ms: int = Field(default=7 * 86_400_000, ge=3 * 86_400_000)
    # How long a seat's ledger rows (the audit of every engagement, refusal and considered
    # 'nobody') are kept, on top of their per-seat cap. Counting never reads them (the
    # guardrails count in their own windowed sets, two days at most), so any bound is safe
    # for the limits; two days keeps at least what a guardrail window covers.
    ledger_retention_ms: int = Field(default=30 * 86_400_000, ge=2 * 86_400_000)
    # How many unread items (given, not yet acknowledged) a seat's inbox holds; an item that
    # finds it full is not put in it but written down: a ledger row `inbox_full`, the count
    # the seat's next read of its updates reports, and the metric (workers/stores/inbox.py).
    inbox_cap: int = Field(default=5_000, ge=1)
    # How long a message between seats (and its request record) is kept; a thread lasts as
    # long as its newest message (workers/stores/messages.py).
    message_retention_ms: int = Field(default=90 * 86_400_000, ge=86_400_000)
    # The ask record (workers/stores/asks.py): how long an ask waits for its answer before it
    # goes one rung up, per trigger (JSON, ms; a trigger not named keeps its default:
    # pipeline/asks.py DEFAULT_TIMEOUTS_MS); how long an approved consent holds; how long an
    # ended ask is kept.
    ask_timeouts: dict[str, int] = Field(default_factory=dict)
    # How often beat runs the asks tick (due asks wake, go one rung up or expire): a
    # fraction of the shortest timeout (a minute), so an ask goes up close to its deadline.
    asks_interval_s: float = Field(default=15.0, gt=0)
    consent_ttl_ms: int = Field(default=86_400_000, ge=60_000)
    ask_retention_ms: int = Field(default=30 * 86_400_000, ge=86_400_000)
    # The key answer links are signed with (POST /v1/asks/{id}/answer?token=...); without
    # one, links are signed with a key derived from the operator token, and without that
    # no link is offered.
    answer_link_secret: SecretStr | None = None
    slack_signing_secret: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("SEATWIRE_SLACK_SIGNING_SECRET", "SLACK_SIGNING_SECRET"),
    )
    github_webhook_secret: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("SEATWIRE_GITHUB_WEBHOOK_SECRET", "GITHUB_WEBHOOK_SECRET"),
    )
    # Alerts (docs/alerts.md): Alertmanager's webhook posts to /v1/alerts/alertmanager with
    # this bearer token (good on that route only); each firing alert becomes an ask of the
    # on-call member (a member id of the org file, a person), reported as the work of the
    # alerts seat (a seat of the org file). All three or none: unset, the route is refused.
    alerts_token: SecretStr | None = None
    oncall_member: str | None = None
    alerts_seat: str | None = None

    @field_validator("ask_timeouts")
    @classmethod
    def _known_triggers(cls, value: dict[str, int]) -> dict[str, int]:
        """Only the four triggers have a timeout, each at least a second (a demo's or a
        test's; a deployment's are hours)."""
        from pipeline.engagement.triggers import TRIGGERS

        for trigger, ms in value.items():
            if trigger not in TRIGGERS:
                raise ValueError(f"unknown trigger {trigger!r}: one of {', '.join(TRIGGERS)}")
            if ms < 1_000:
                raise ValueError(f"the timeout of {trigger} is {ms} ms: at least 1000")
        return value

    @property
    def timeouts_ms(self) -> dict[str, int]:
        """Each trigger's ask timeout: the defaults, with what SEATWIRE_ASK_TIMEOUTS names."""
        from pipeline.asks import DEFAULT_TIMEOUTS_MS

        return {**DEFAULT_TIMEOUTS_MS, **self.ask_timeouts}

    @property
    def ingress_url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    @field_validator("limits", "send_policy", mode="before")
    @classmethod
    def _no_unknown_keys(cls, value: object, info: ValidationInfo) -> object:
        """A JSON setting names only its model's fields (camelCase or snake_case): a
        misspelt key would otherwise be dropped and its limit left at the default."""
        if not isinstance(value, dict):
            return value
        model = cls.model_fields[str(info.field_name)].annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        names = {*model.model_fields}
        names |= {f.alias for f in model.model_fields.values() if f.alias}
        for key in value:
            if key not in names:
                close = difflib.get_close_matches(str(key), sorted(names), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"unknown key {key!r}{hint}")
        return value

    @field_validator(
        "redis_url", "broker_url", "proposer_url", "oncall_member", "alerts_seat", mode="before"
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("redis_url", "broker_url")
    @classmethod
    def _credentials_end_at_the_host(cls, value: str | None) -> str | None:
        """A password with `/`, `?` or `#` unencoded ends the URL's host part early: the
        driver would reach another host, and a printed URL would show the password's tail as
        its path. Refused, without echoing any of the URL."""
        if value is None or "@" not in value:
            return value
        parts = urlsplit(value)
        if "@" not in parts.netloc or not parts.hostname:
            raise ValueError(
                "the URL has an '@' after its host part: a user or password holding '/', "
                "'?' or '#' ends the host part early; percent-encode them (`/` as %2F) or use "
                "letters and digits"
            )
        return value

    @property
    def embedded(self) -> bool:
        return self.redis_url is None and self.broker_url is None

    @property
    def resolved_broker_url(self) -> str:
        return self.broker_url or self.redis_url or "memory://"

    def token(self) -> str:
        """The bootstrap operator token for /v1 (the token store issues more, and the seats'
        own: workers/stores/tokens.py). Embedded mode has a fixed development token."""
        if self.api_token is not None and self.api_token.get_secret_value().strip():
            return self.api_token.get_secret_value()
        if self.embedded:
            return EMBEDDED_TOKEN
        raise ConfigError(
            "SEATWIRE_API_TOKEN is not set: with a real Redis or broker configured the API "
            "needs a bearer token of your own"
        )

    def slack_secret(self) -> str | None:
        """Slack's signing secret; embedded mode has its own; None turns the route off."""
        return _secret(self.slack_signing_secret, EMBEDDED_SLACK_SECRET if self.embedded else None)

    def github_secret(self) -> str | None:
        """GitHub's webhook secret; embedded mode has its own; None turns the route off."""
        return _secret(
            self.github_webhook_secret, EMBEDDED_GITHUB_SECRET if self.embedded else None
        )

    def alerts(self) -> tuple[str, str, str] | None:
        """(token, on-call member, alerts seat) when alerts are configured, else None."""
        token = _secret(self.alerts_token, None)
        if token is None or self.oncall_member is None or self.alerts_seat is None:
            return None
        return token, self.oncall_member.strip(), self.alerts_seat.strip()

    def check(self, environ: Mapping[str, str] | None = None) -> None:
        """Refuse, at start, a configuration that can only fail later: an unknown
        `SEATWIRE_*` variable of `environ` (the process's by default) among it."""
        unknown = unknown_variables(os.environ if environ is None else environ)
        if unknown:
            raise ConfigError("; ".join(unknown))
        if self.broker_url is not None and self.redis_url is None:
            raise ConfigError(
                "SEATWIRE_BROKER_URL is set without SEATWIRE_REDIS_URL: the journal and the "
                "ledger need a real Redis whenever the broker is shared between processes"
            )
        if self.task_time_limit_s * 1000 + 300_000 >= self.visibility_timeout_s * 1000:
            raise ConfigError(
                "visibility_timeout_s must exceed the task time limit plus the 300 s retry cap, "
                "or the broker redelivers tasks that are still running"
            )
        self.token()
        alerting = {
            "SEATWIRE_ALERTS_TOKEN": _secret(self.alerts_token, None) is not None,
            "SEATWIRE_ONCALL_MEMBER": self.oncall_member is not None,
            "SEATWIRE_ALERTS_SEAT": self.alerts_seat is not None,
        }
        if any(alerting.values()) and not all(alerting.values()):
            missing = ", ".join(name for name, given in alerting.items() if not given)
            raise ConfigError(
                f"alerts need SEATWIRE_ALERTS_TOKEN, SEATWIRE_ONCALL_MEMBER and "
                f"SEATWIRE_ALERTS_SEAT together: {missing} not set (docs/alerts.md)"
            )
        if self.outbound == "slack" and not _secret(self.slack_bot_token, None):
            raise ConfigError(
                "SEATWIRE_OUTBOUND=slack needs a bot token: set SEATWIRE_SLACK_BOT_TOKEN "
                "(or SLACK_BOT_TOKEN)"
            )
        quiet = self.send_policy.quiet_hours
        if quiet is not None:
            from workers.timezones import offset_of

            offset_of(quiet.default_timezone)  # an unknown zone is refused here
        if self.outbound == "webhook":
            if not (self.webhook_url or "").startswith(("http://", "https://")):
                raise ConfigError(
                    "SEATWIRE_OUTBOUND=webhook needs SEATWIRE_WEBHOOK_URL, an http(s) URL"
                )
            if not _secret(self.webhook_secret, None):
                raise ConfigError(
                    "SEATWIRE_OUTBOUND=webhook needs SEATWIRE_WEBHOOK_SECRET to sign with "
                    "(Standard Webhooks: whsec_ followed by base64)"
                )


def _secret(value: SecretStr | None, fallback: str | None) -> str | None:
    if value is not None and value.get_secret_value().strip():
        return value.get_secret_value()
    return fallback


def masked(url: str | None) -> str:
    """`url` fit to print: its password (and a user that is a token) replaced by `***`, and
    so is every query value whose name says it is a secret (`?token=...`, `api_key`, `sig`).
    `redis://:s3cret@host:6379/0` -> `redis://:***@host:6379/0`."""
    if not url:
        return ""
    parts = urlsplit(url)
    query = "&".join(
        f"{name}=***" if _SECRET_NAME.search(name) else f"{name}={value}" if sep else name
        for name, sep, value in (pair.partition("=") for pair in parts.query.split("&") if pair)
    )
    parts = parts._replace(query=query)
    if parts.password is None and not parts.username:
        return urlunsplit(parts)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    secret = "***" if parts.password is not None else ""
    auth = f"{user}:{secret}" if secret else ("***" if user else "")
    return urlunsplit(parts._replace(netloc=f"{auth}@{host}"))


_SECRET_NAME = re.compile(r"token|key|secret|pass|sig|auth", re.IGNORECASE)


# Variables with the prefix that are not settings: what a launcher hands a seat's agent for its
# turn (workers/outbound/launchers.py; an agent may run `seatwire mcp` with them set), the
# fault-injection switch (workers/recovery/faults.py), and the test suite's own two.
OTHER_VARIABLES = frozenset(
    {
        "SEATWIRE_SEAT",
        "SEATWIRE_TURN",
        "SEATWIRE_TURN_REASON",
        "SEATWIRE_SESSION_ID",
        "SEATWIRE_SESSION_MODE",
        "SEATWIRE_FAULTPOINTS",
        "SEATWIRE_TEST_REDIS_URL",
        "SEATWIRE_HYPOTHESIS_SCALE",
    }
)
PREFIX = "SEATWIRE_"


def _variables() -> dict[str, str]:
    """Every settings variable with the prefix, to the field it sets."""
    found: dict[str, str] = {}
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias or ""]
        named = [str(c) for c in choices if isinstance(c, str) and c.startswith(PREFIX)]
        for variable in named or ([] if alias else [PREFIX + name.upper()]):
            found[variable] = name
    return found


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """One line for each `SEATWIRE_*` variable that sets nothing, with the closest known one:
    a misspelt variable (`SEATWIRE_REDIS_ULR`) would otherwise leave its setting at its
    default, silently (embedded, in that case). A nested one (`SEATWIRE_LIMITS__X`) must
    name a field of its setting's model."""
    variables = _variables()
    known = [*variables, *OTHER_VARIABLES]
    out: list[str] = []
    for key in sorted(k for k in environ if k.upper().startswith(PREFIX)):
        name = key.upper()
        head, _, sub = name.partition("__")
        if name in variables or name in OTHER_VARIABLES:
            continue
        field = variables.get(head)
        annotation = Settings.model_fields[field].annotation if field and sub else None
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            fields = [f.upper() for f in annotation.model_fields]
            if sub in fields:
                continue
            close = difflib.get_close_matches(sub, fields, n=1)
            hint = f"; did you mean {head}__{close[0]}?" if close else ""
            out.append(f"{key} is not a field of {head}{hint}")
            continue
        bare = {k.removeprefix(PREFIX): k for k in known}  # the prefix would match anything
        close = difflib.get_close_matches(name.removeprefix(PREFIX), list(bare), n=1)
        hint = f"; did you mean {bare[close[0]]}?" if close else ""
        out.append(f"{key} is not a Seatwire setting{hint}")
    return out


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings of the environment, checked (`Settings.check`), or a `ConfigError` whose
    one line names each variable at fault and what is wrong with it: a JSON setting's parse
    error with its position, a value pydantic refused with its reason."""
    unknown = unknown_variables(os.environ if environ is None else environ)
    if unknown:  # first: a misspelt nested variable is named as the user wrote it
        raise ConfigError("; ".join(unknown))
    try:
        settings = Settings()
    except SettingsError as exc:
        raise ConfigError(_describe_parse_error(exc)) from exc
    except ValidationError as exc:
        raise ConfigError(_describe_validation(exc)) from exc
    settings.check(environ)
    return settings


def _variable(field: object) -> str:
    info = Settings.model_fields.get(str(field))
    alias = info.validation_alias if info is not None else None
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias] if alias else []
    named = [c for c in choices if isinstance(c, str)]
    return named[0] if named else PREFIX + str(field).upper()


def _describe_parse_error(exc: SettingsError) -> str:
    found = re.search(r'field "([^"]+)"', str(exc))
    variable = _variable(found.group(1)) if found else "a SEATWIRE_* setting"
    cause = exc.__cause__
    if isinstance(cause, json.JSONDecodeError):
        return (
            f"{variable} is not valid JSON: {cause.msg} at line {cause.lineno} column "
            f"{cause.colno} (character {cause.pos})"
        )
    return f"{variable} cannot be read: {cause or exc}"


def _describe_validation(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        loc = [str(x) for x in error["loc"]]
        where = _variable(loc[0]) if loc else "a SEATWIRE_* setting"
        inner = f" ({'.'.join(loc[1:])})" if len(loc) > 1 else ""
        message = str(error["msg"]).removeprefix("Value error, ")
        lines.append(f"{where}{inner}: {message}")
    return "; ".join(lines)


def scrubbed(message: object, *urls: str | None) -> str:
    """`message` (an error's text) with the password of each of `urls` replaced by `***`: a
    driver's error may quote the URL it was given."""
    found = str(message)
    for url in urls:
        if not url:
            continue
        parts = urlsplit(url)
        secrets = [parts.password] + [
            value
            for name, _, value in (pair.partition("=") for pair in parts.query.split("&"))
            if _SECRET_NAME.search(name)
        ]
        for secret in secrets:
            if secret:
                found = found.replace(secret, "***")
    return found
