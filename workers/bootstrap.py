"""The composition root: the one place that builds clients and wires the stages together.

A worker process builds its container lazily on its first task (after the fork, so no
connection is shared between processes): `Provider` does that, and is what the tasks are
handed when they are registered (workers/celery_app.py). The embedded mode and the tests
hand them a container they built themselves.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from urllib.parse import urlsplit

import redis
from celery import Celery
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry

from workers.broker import shares_broker
from workers.clock import now_ms
from workers.container import Container
from workers.errors import ConfigError
from workers.org import OrgSource
from workers.outbound.base import Outbound
from workers.outbound.file import FileOutbox
from workers.settings import Settings
from workers.stores.asks import AskStore
from workers.stores.audit import StewardAudit
from workers.stores.backlog import Backlog
from workers.stores.claims import Claims
from workers.stores.costs import Costs
from workers.stores.decisions import Decisions
from workers.stores.dlq import DeadLetters
from workers.stores.inbound import InboundStore
from workers.stores.inbox import Inbox, InboxRoom
from workers.stores.intents import Intents
from workers.stores.issues import Issues
from workers.stores.journal import Journal
from workers.stores.ledger import Ledger
from workers.stores.messages import Messages
from workers.stores.overrides import Overrides
from workers.stores.project import ProjectStore
from workers.stores.samples import Samples
from workers.stores.seat_runs import SeatRuns
from workers.stores.work import WorkItems

log = logging.getLogger("seatwire.bootstrap")

__all__ = ["Container", "Provider", "broker_client", "build_container", "now_ms", "redis_client"]


def redis_client(url: str) -> redis.Redis:
    """A client with explicit timeouts and retries (redis-py's defaults changed twice)."""
    return redis.Redis.from_url(
        url,
        socket_timeout=2,
        socket_connect_timeout=2,
        health_check_interval=30,
        retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), retries=5),
    )


def broker_client(settings: Settings, client: redis.Redis) -> redis.Redis | None:
    """The Redis that holds the broker's queues, for the sweeper to look for a waiting
    message in: `client` when the broker is the stores' own database, a client of its own
    when it is another Redis database or server, None when the broker is nothing a Redis
    client can read (AMQP, a failover list of URLs, Sentinel, the embedded in-memory one)."""
    if shares_broker(settings):
        return client
    url = settings.broker_url
    if url is None or ";" in url or urlsplit(url).scheme not in ("redis", "rediss"):
        return None
    return redis_client(url)


def outbound_for(settings: Settings, org: OrgSource, client: redis.Redis) -> Outbound:
    """The configured adapter, built without touching the network (`check()` does that, at
    the start of a process that sends)."""
    if settings.outbound == "file":
        return FileOutbox(settings.outbox_path, fsync=settings.outbox_fsync)
    if settings.outbound == "slack":
        from workers.outbound.slack import SlackOutbound
        from workers.stores.cooldowns import ChannelCooldowns

        def directory() -> dict[str, tuple[tuple[str, ...], str]]:
            view, _degraded = org.current()
            return view.people

        token = settings.slack_bot_token
        assert token is not None  # Settings.check refuses slack without one
        return SlackOutbound(
            token=token.get_secret_value(),
            api_url=settings.slack_api_url,
            timeout_s=settings.send_timeout_s,
            directory=directory,
            cooldowns=ChannelCooldowns(client),
        )
    if settings.outbound == "webhook":
        from workers.outbound.webhook import WebhookOutbound

        secret = settings.webhook_secret
        assert settings.webhook_url is not None and secret is not None  # Settings.check
        return WebhookOutbound(
            url=settings.webhook_url,
            secret=secret.get_secret_value(),
            timeout_s=settings.send_timeout_s,
        )
    raise ConfigError(f"unknown outbound adapter {settings.outbound!r}")


def build_container(
    settings: Settings, *, client: redis.Redis | None = None, app: Celery | None = None
) -> Container:
    settings.check()
    if client is None:
        if settings.redis_url is None:
            raise ConfigError("no Redis configured: set SEATWIRE_REDIS_URL or run embedded")
        client = redis_client(settings.redis_url)
    org = OrgSource.open(settings.org_file)
    journal = Journal(
        client,
        deadline_ms=settings.journal_deadline_ms,
        ledger_retention_ms=settings.ledger_retention_ms,
    )
    ledger = Ledger(
        client,
        limits=settings.limits,
        reservation_ttl_ms=settings.reservation_ttl_ms,
        ledger_retention_ms=settings.ledger_retention_ms,
    )
    outbound = outbound_for(settings, org, client)
    room = InboxRoom(cap=settings.inbox_cap, ledger_retention_ms=settings.ledger_retention_ms)
    inbound = InboundStore(client, retention_ms=settings.inbound_retention_ms, room=room)
    return Container(
        settings=settings,
        redis=client,
        broker_redis=broker_client(settings, client),
        journal=journal,
        ledger=ledger,
        org=org,
        outbound=outbound,
        inbox=Inbox(client),
        inbound=inbound,
        dead_letters=DeadLetters(client, max_deliveries=settings.max_deliveries),
        samples=Samples(client),
        costs=Costs(client),
        backlog=Backlog(client),
        audit=StewardAudit(client),
        overrides=Overrides(client),
        claims=Claims(client),
        seat_runs=SeatRuns(client),
        project=ProjectStore(client, room=room),
        issues=Issues(client),
        intents=Intents(client),
        messages=Messages(client, room=room, retention_ms=settings.message_retention_ms),
        work=WorkItems(client),
        decisions=Decisions(client, room=room),
        asks=AskStore(
            client,
            retention_ms=settings.ask_retention_ms,
            consent_ttl_ms=settings.consent_ttl_ms,
            room=room,
        ),
        app=app,
    )


def learn_own_identity(container: Container) -> str | None:
    """With the Slack adapter, what `auth.test` says the token's bot is (its user and its
    `bot_id`) becomes a seat's own identity, so its posts are `own_echo` in this process's
    directedness (workers/org.py `learn_slack_identity`). None with another adapter. A
    failing `auth.test` is reported, not raised: the org file's `slackBotUserId` and
    `slackBotId` still hold, and a send worker refuses to start on it anyway."""
    if container.settings.outbound != "slack":
        return None
    from workers.org import learn_slack_identity
    from workers.outbound.slack import SlackOutbound

    outbound = container.outbound
    assert isinstance(outbound, SlackOutbound)
    try:
        if not outbound.identity:
            outbound.check()
    except ConfigError as exc:
        log.warning("could not learn the Slack bot's identity: %s", exc)
        return f"could not learn the Slack bot's identity: {exc}"
    return learn_slack_identity(container.org, outbound.identity)


def _with_identity(container: Container) -> Container:
    learned = learn_own_identity(container)
    if learned:
        log.info("%s", learned)
    return container


class Provider:
    """This process's container, built on first use and again after a fork (a prefork pool
    process must not share its parent's connections), or a container given up front."""

    def __init__(
        self, build: Callable[[], Container], *, container: Container | None = None
    ) -> None:
        self._build = build
        self._fixed = container
        self._built: tuple[int, Container] | None = None

    @classmethod
    def of(cls, container: Container) -> Provider:
        """A provider that always answers `container` (embedded mode, the tests)."""
        return cls(lambda: container, container=container)

    @classmethod
    def from_settings(cls, settings: Settings, app: Celery | None = None) -> Provider:
        """Each worker process's own container, with the Slack bot's identity learned."""
        return cls(lambda: _with_identity(build_container(settings, app=app)))

    def __call__(self) -> Container:
        if self._fixed is not None:
            return self._fixed
        if self._built is None or self._built[0] != os.getpid():
            self._built = (os.getpid(), self._build())
        return self._built[1]
