"""A Redis or broker URL's password never reaches what Seatwire prints or answers, even when a
driver's error quotes the URL it was given: the readiness answer (which anyone may ask), a
container's health check and the operator commands' refusal."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, NoReturn, cast

import pytest
import redis

from workers import healthcheck
from workers.cli import steward as steward_cli
from workers.ingress.deps import IngressDeps
from workers.ingress.ops import probe
from workers.settings import Settings

PASSWORD = "pw-Zq81xK"
URL = f"redis://:{PASSWORD}@127.0.0.1:1/0"


class Quoting:
    """Raises, on any call, an error whose text quotes the URL with its password."""

    def __init__(self, error: type[Exception]) -> None:
        self.error = error

    def __call__(self, *_: Any, **__: Any) -> NoReturn:
        raise self.error(f"Error connecting to {URL}: refused")


class Connection:
    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    ensure_connection = Quoting(redis.ConnectionError)


def test_readiness_names_what_is_down_without_the_password() -> None:
    """Given Redis and the broker both failing with errors that quote the URL, when /readyz
    probes them, then each check says `down` with the password replaced by ***."""
    deps = SimpleNamespace(
        settings=Settings(redis_url=URL, api_token="t"),
        container=SimpleNamespace(redis=SimpleNamespace(ping=Quoting(redis.ConnectionError))),
        celery=SimpleNamespace(connection_for_write=Connection),
    )
    checks = probe(cast(IngressDeps, deps))
    assert checks["redis"].startswith("down: ") and checks["broker"].startswith("down: ")
    for check in checks.values():
        assert PASSWORD not in check and ":***@127.0.0.1:1" in check, check


def test_the_health_check_names_the_broker_without_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given a broker whose ping fails with an error quoting the URL, when a container's
    check asks for its node, then the reason it gives carries no password."""
    app = SimpleNamespace(control=SimpleNamespace(ping=Quoting(OSError)), close=lambda: None)
    monkeypatch.setattr(healthcheck, "new_app", lambda _settings: app)
    problem = healthcheck.node_problem(
        Settings(redis_url=URL, api_token="t"), "send@%h", timeout_s=0.1
    )
    assert problem is not None and "cannot reach the broker" in problem
    assert PASSWORD not in problem and ":***@127.0.0.1:1" in problem


def test_an_operator_command_refuses_an_unanswering_redis_without_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given a Redis whose ping fails with an error quoting the URL, when an operator command
    (`seatwire status`, `steward`, `seats`) builds its container, then its refusal names
    Redis with the password masked, and nothing else of it."""
    monkeypatch.setenv("SEATWIRE_REDIS_URL", URL)
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
    monkeypatch.setattr(redis.Redis, "ping", Quoting(redis.ConnectionError))
    refusals: list[str] = []

    def refuse(message: object) -> NoReturn:
        refusals.append(str(message))
        raise SystemExit(2)

    with pytest.raises(SystemExit):
        steward_cli.redis_container(refuse, embedded="embedded")
    [refusal] = refusals
    assert refusal.startswith("Redis at redis://:***@127.0.0.1:1/0 does not answer")
    assert PASSWORD not in refusal


def test_a_refused_url_is_not_echoed_by_the_settings_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings built directly (as `celery -A workers.app` does) refuse a URL whose password
    holds a '/' without the error text carrying the URL."""
    from pydantic import ValidationError

    from workers.settings import Settings

    monkeypatch.setenv("SEATWIRE_REDIS_URL", "redis://:se/cret@redis:6379/0")
    with pytest.raises(ValidationError) as caught:
        Settings()
    assert "se/cret" not in str(caught.value)
