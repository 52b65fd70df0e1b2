"""The composition root: the one place that builds clients and wires the stages together.

A worker process builds its container lazily on its first task (after the fork, so no
connection is shared between processes); the embedded mode installs one it built itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import redis
from celery import Celery
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry

from workers.clock import now_ms
from workers.dlq import DeadLetters
from workers.errors import ConfigError
from workers.handlers import Stages
from workers.inbound import InboundStore
from workers.inbox import Inbox
from workers.org import OrgSource
from workers.outbox import FileOutbox, Outbound
from workers.settings import Settings
from workers.stores import Journal, Ledger


def redis_client(url: str) -> redis.Redis:
    """A client with explicit timeouts and retries (redis-py's defaults changed twice)."""
    return redis.Redis.from_url(
        url,
        socket_timeout=2,
        socket_connect_timeout=2,
        health_check_interval=30,
        retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), retries=5),
    )


def outbound_for(settings: Settings, org: OrgSource, client: redis.Redis) -> Outbound:
    """The configured adapter, built without touching the network (`check()` does that, at
    the start of a process that sends)."""
    if settings.outbound == "file":
        return FileOutbox(settings.outbox_path, fsync=settings.outbox_fsync)
    if settings.outbound == "slack":
        from workers.adapters.slack import ChannelCooldowns, SlackOutbound

        def directory() -> dict[str, tuple[tuple[str, ...], str]]:
            view, _degraded = org.current()
            return {m.id: (m.aliases, m.display_name) for m in view.org.members}

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
        from workers.adapters.webhook import WebhookOutbound

        secret = settings.webhook_secret
        assert settings.webhook_url is not None and secret is not None  # Settings.check
        return WebhookOutbound(
            url=settings.webhook_url,
            secret=secret.get_secret_value(),
            timeout_s=settings.send_timeout_s,
        )
    raise ConfigError(f"unknown outbound adapter {settings.outbound!r}")


@dataclass
class Container:
    settings: Settings
    redis: redis.Redis
    journal: Journal
    ledger: Ledger
    org: OrgSource
    outbound: Outbound
    stages: Stages
    inbox: Inbox
    inbound: InboundStore
    dead_letters: DeadLetters
    app: Celery | None = None


def build_container(
    settings: Settings, *, client: redis.Redis | None = None, app: Celery | None = None
) -> Container:
    settings.check()
    if client is None:
        if settings.redis_url is None:
            raise ConfigError("no Redis configured: set SEATWIRE_REDIS_URL or run embedded")
        client = redis_client(settings.redis_url)
    org = OrgSource.open(settings.org_file)
    journal = Journal(client, deadline_ms=settings.journal_deadline_ms)
    ledger = Ledger(client, limits=settings.limits, reservation_ttl_ms=settings.reservation_ttl_ms)
    outbound = outbound_for(settings, org, client)
    inbound = InboundStore(client, retention_ms=settings.inbound_retention_ms)
    stages = Stages(
        journal=journal,
        ledger=ledger,
        org=org,
        outbound=outbound,
        inbound=inbound,
        clock_ms=now_ms,
        # A live try is killed at the hard time limit; the lease outlasts it a little.
        lease_ms=(settings.task_time_limit_s + 10) * 1000,
        mode=settings.send_mode,
        policy=settings.send_policy,
    )
    return Container(
        settings=settings,
        redis=client,
        journal=journal,
        ledger=ledger,
        org=org,
        outbound=outbound,
        stages=stages,
        inbox=Inbox(client),
        inbound=inbound,
        dead_letters=DeadLetters(client, max_deliveries=settings.max_deliveries),
        app=app,
    )


_installed: tuple[int, Container] | None = None


def install(container: Container) -> None:
    global _installed
    _installed = (os.getpid(), container)


def current() -> Container:
    """This process's container, built from the environment on first use."""
    if _installed is None or _installed[0] != os.getpid():
        install(build_container(Settings()))
    assert _installed is not None
    return _installed[1]
