"""compose.yaml, the Dockerfile, .dockerignore and Grafana's provisioning, read as files: the
production shape holds (health checks, shutdown, Redis's memory limit and password, what is
published where, required secrets, log rotation, memory limits), without a Docker engine.
tests/e2e/test_compose_processes.py runs the commands and the health checks as processes."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from workers.broker import new_app
from workers.healthcheck import PING_TIMEOUT_S
from workers.settings import Settings, unknown_variables

ROOT = Path(__file__).resolve().parent.parent
SPEC: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES: dict[str, dict[str, Any]] = SPEC["services"]
# What compose needs set, and nothing more: every other variable has a default.
REQUIRED = {
    "SEATWIRE_API_TOKEN": "t",
    "REDIS_PASSWORD": "redis-pw-0123",
    "FLOWER_BASIC_AUTH": "ops:pw",
    "GRAFANA_ADMIN_PASSWORD": "pw",
}


class MissingVariable(Exception):
    """A `${VAR:?message}` whose variable is unset or empty: compose refuses the file."""


_VARIABLE = re.compile(r"\$\$|\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)")


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """`value` as compose interpolates it from `env`: `$$`, `$VAR`, `${VAR}`, `${VAR:-default}`,
    `${VAR-default}`, `${VAR:?error}` and `${VAR?error}`."""

    def one(found: re.Match[str]) -> str:
        if found.group(0) == "$$":
            return "$"
        name = found.group(1) or found.group(4)
        op, arg = found.group(2), found.group(3) or ""
        present = name in env
        value = env.get(name, "")
        unset = not value if op and op.startswith(":") else not present
        if op in (":-", "-"):
            return arg if unset else value
        if op in (":?", "?"):
            if unset:
                raise MissingVariable(f"{name}: {arg}")
            return value
        return value

    return _VARIABLE.sub(one, value)


def resolved(node: Any, env: Mapping[str, str]) -> Any:
    """Every string of a parsed compose node interpolated."""
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [resolved(x, env) for x in node]
    if isinstance(node, dict):
        return {k: resolved(v, env) for k, v in node.items()}
    return node


def seconds(duration: str) -> float:
    """A compose duration (`30s`, `1m30s`, `500ms`) in seconds."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(float(n) * units[u] for n, u in parts)


def command(name: str) -> list[str]:
    return list(SERVICES[name].get("command") or [])


def celery_services() -> list[str]:
    """The services that run a Celery worker: the stage pools and beat."""
    return [n for n in SERVICES if command(n)[:2] in (["seatwire", "worker"], ["seatwire", "beat"])]


def seatwire_services() -> list[str]:
    return [n for n in SERVICES if command(n)[:1] == ["seatwire"]]


def test_the_file_resolves_with_the_required_variables_and_refuses_each_missing_one() -> None:
    """With the four required variables set every value interpolates; without any one of
    them compose would refuse the file, naming it."""
    resolved(SPEC, REQUIRED)
    for name in REQUIRED:
        with pytest.raises(MissingVariable, match=name):
            resolved(SPEC, {k: v for k, v in REQUIRED.items() if k != name})


def test_every_service_has_a_health_check_within_its_interval() -> None:
    """Each service has a health check, whose timeout is inside its interval."""
    for name, service in SERVICES.items():
        check = service.get("healthcheck")
        assert check and check.get("test"), f"{name} has no health check"
        assert seconds(check["timeout"]) < seconds(check["interval"]), name


def test_each_celery_service_checks_its_own_node() -> None:
    """A worker's health check pings the node name it runs under; beat's pings its own node
    and asks for a leader; each check's ping timeout fits in the check's timeout."""
    for name in celery_services():
        test = SERVICES[name]["healthcheck"]["test"]
        assert test[:4] == ["CMD", "python", "-m", "workers.healthcheck"], name
        assert seconds(SERVICES[name]["healthcheck"]["timeout"]) > 2 * PING_TIMEOUT_S, name
        cmd = command(name)
        if cmd[1] == "worker":
            assert test[4:] == [cmd[cmd.index("--hostname") + 1]], name
        else:
            assert test[4:] == ["beat-*@%h", "--leader"], name


def test_celery_services_stop_with_a_soft_shutdown_inside_their_grace() -> None:
    """Every worker and beat stops on SIGQUIT (Celery's soft, then cold, shutdown) with a
    grace period longer than the soft shutdown the app is configured with."""
    soft = new_app(Settings(redis_url="redis://127.0.0.1:1/0")).conf.worker_soft_shutdown_timeout
    assert soft > 0
    for name in celery_services():
        service = SERVICES[name]
        assert service.get("stop_signal") == "SIGQUIT", name
        assert seconds(service["stop_grace_period"]) > soft, name


def test_redis_has_a_memory_limit_overridable_from_the_environment_and_never_evicts() -> None:
    """Redis runs with AOF, a stated maxmemory (REDIS_MAXMEMORY overrides it) and noeviction."""
    cmd = command("redis")
    default = resolved(cmd, REQUIRED)
    assert default[default.index("--maxmemory") + 1] == "2gb"
    assert default[default.index("--maxmemory-policy") + 1] == "noeviction"
    assert default[default.index("--appendonly") + 1] == "yes"
    overridden = resolved(cmd, {**REQUIRED, "REDIS_MAXMEMORY": "4gb"})
    assert overridden[overridden.index("--maxmemory") + 1] == "4gb"


def test_only_the_ingress_is_published_beyond_the_loopback() -> None:
    """Every published port but the ingress's is bound to 127.0.0.1; the metrics port is set
    for every process, exposed on the compose network by the ingress and every worker and
    beat (where Prometheus scrapes them), and published nowhere."""
    for name, service in SERVICES.items():
        for port in resolved(service.get("ports", []), REQUIRED):
            assert name == "ingress" or port.startswith("127.0.0.1:"), (name, port)
            assert "9808" not in port, (name, port)
    env = SPEC["x-seatwire-env"]
    assert env["SEATWIRE_METRICS_PORT"] == "9808"
    for name in seatwire_services():
        assert SERVICES[name]["expose"] == ["9808"], name


def test_redis_requires_the_password_every_client_is_given() -> None:
    """Redis runs with --requirepass REDIS_PASSWORD; every Seatwire process (Flower too)
    reaches it with that password in its URL; its health check authenticates from the
    environment (not argv) and is healthy only on PONG, since redis-cli exits 0 on NOAUTH."""
    password = REQUIRED["REDIS_PASSWORD"]
    cmd = resolved(command("redis"), REQUIRED)
    assert cmd[cmd.index("--requirepass") + 1] == password
    redis = resolved(SERVICES["redis"], REQUIRED)
    assert redis["environment"]["REDISCLI_AUTH"] == password
    test = redis["healthcheck"]["test"]
    assert test[0] == "CMD" and "redis-cli ping" in test[-1] and "grep -qx PONG" in test[-1]
    assert password not in " ".join(test)
    for name in [*seatwire_services(), "flower"]:
        env = resolved(SERVICES[name]["environment"], REQUIRED)
        url = urlsplit(env["SEATWIRE_REDIS_URL"])
        assert (url.password, url.hostname, url.port) == (password, "redis", 6379), name
        assert "SEATWIRE_BROKER_URL" not in env, name  # the broker is that same URL


def test_every_service_rotates_its_log() -> None:
    """Every service logs with json-file, rotated by size, and keeps a bounded number of
    files: no log grows without bound on the host's disk."""
    for name, service in SERVICES.items():
        logging = service.get("logging")
        assert logging and logging["driver"] == "json-file", name
        options = logging["options"]
        assert re.fullmatch(r"\d+[km]", options["max-size"]), name
        assert int(options["max-file"]) >= 2, name


def _bytes(size: str) -> int:
    """A compose byte value (`512m`, `4g`) in bytes; Redis's `2gb` too."""
    found = re.fullmatch(r"(\d+)([kmg])b?", size.lower())
    assert found, size
    scale: int = 1024 ** ("kmg".index(found.group(2)) + 1)
    return int(found.group(1)) * scale


def test_every_service_has_a_memory_limit_and_redis_room_to_fork() -> None:
    """Every service has a memory limit; Redis's, at the defaults and at a REDIS_MAXMEMORY
    raised with REDIS_MEM_LIMIT as the comment says, is at least twice its maxmemory (the AOF
    rewrite's fork), and the turns pool's can be raised for its agents."""
    for name, service in SERVICES.items():
        assert _bytes(resolved(service["mem_limit"], REQUIRED)) >= 256 * 1024**2, name
    for env in (REQUIRED, {**REQUIRED, "REDIS_MAXMEMORY": "4gb", "REDIS_MEM_LIMIT": "8g"}):
        cmd = resolved(command("redis"), env)
        maxmemory = _bytes(cmd[cmd.index("--maxmemory") + 1])
        assert _bytes(resolved(SERVICES["redis"]["mem_limit"], env)) >= 2 * maxmemory
    turns = {**REQUIRED, "TURNS_MEM_LIMIT": "16g"}
    assert resolved(SERVICES["worker-turns"]["mem_limit"], turns) == "16g"


def test_every_seatwire_variable_compose_sets_is_a_setting() -> None:
    """The shared environment names only variables Seatwire knows: a processes refuses to
    start on an unknown SEATWIRE_* variable."""
    env = resolved(SPEC["x-seatwire-env"], REQUIRED)
    assert unknown_variables(env) == []


def test_flower_runs_the_seatwire_app_on_the_loopback_behind_required_basic_auth() -> None:
    """Flower is `celery -A workers.app flower` from the seatwire image, published on
    127.0.0.1 only, with FLOWER_BASIC_AUTH required."""
    flower = SERVICES["flower"]
    assert flower["image"] == SERVICES["ingress"]["image"]
    assert command("flower")[:4] == ["celery", "-A", "workers.app", "flower"]
    assert flower["ports"] == ["127.0.0.1:5555:5555"]
    assert resolved(flower["environment"], REQUIRED)["FLOWER_BASIC_AUTH"] == "ops:pw"
    with pytest.raises(MissingVariable, match="FLOWER_BASIC_AUTH"):
        resolved(flower["environment"], {k: v for k, v in REQUIRED.items() if "FLOWER" not in k})


def test_the_org_file_is_mounted_read_only_where_the_settings_read_it() -> None:
    """Every Seatwire process mounts the host's org file (ORG_FILE, ./examples/org.yaml by
    default) read-only at SEATWIRE_ORG_FILE, and a missing one is not created as a dir."""
    target = SPEC["x-seatwire-env"]["SEATWIRE_ORG_FILE"]
    for name in seatwire_services():
        binds = [
            v for v in SERVICES[name]["volumes"] if isinstance(v, dict) and v["target"] == target
        ]
        assert len(binds) == 1, name
        bind = binds[0]
        assert bind["type"] == "bind" and bind["read_only"] is True, name
        assert bind["bind"]["create_host_path"] is False, name
        assert (ROOT / interpolate(bind["source"], {})).is_file()
        assert interpolate(bind["source"], {"ORG_FILE": "/srv/org.yaml"}) == "/srv/org.yaml"


def _image_tag(image: str) -> str:
    name, _, tag = image.rpartition(":")
    assert name and re.fullmatch(r"v?\d+\.\d+\.\d+", tag), f"{image} is not pinned"
    return tag


def test_prometheus_and_grafana_are_pinned_and_provisioned_from_deploy() -> None:
    """Prometheus reads deploy/prometheus/; Grafana's admin password is required and it reads
    its provisioning from deploy/grafana/, whose data source is the prometheus service and
    whose dashboard provider reads where the dashboards are mounted."""
    prometheus, grafana = SERVICES["prometheus"], SERVICES["grafana"]
    assert prometheus["image"].startswith("prom/prometheus:")
    assert grafana["image"].startswith("grafana/grafana:")
    _image_tag(prometheus["image"])
    _image_tag(grafana["image"])
    assert "./deploy/prometheus:/etc/prometheus:ro" in prometheus["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    mounts = dict(v.rsplit(":", 1)[0].split(":", 1) for v in grafana["volumes"] if "./" in v)
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    with pytest.raises(MissingVariable, match="GRAFANA_ADMIN_PASSWORD"):
        resolved(grafana["environment"], {})
    provisioning = ROOT / "deploy" / "grafana" / "provisioning"
    sources = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())
    [source] = sources["datasources"]
    port = prometheus["ports"][0].rsplit(":", 1)[1]
    assert source["type"] == "prometheus" and source["url"] == f"http://prometheus:{port}"
    providers = yaml.safe_load((provisioning / "dashboards" / "seatwire.yaml").read_text())
    [provider] = providers["providers"]
    assert provider["options"]["path"] == mounts["./deploy/grafana/dashboards"]


# ------------------------------------------------------------------------------ the image

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    lines = [line.strip() for line in joined.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_the_image_pins_the_uv_ci_installs() -> None:
    """The Dockerfile copies uv from ghcr.io/astral-sh/uv at one exact version, and CI, when it
    has to install uv, installs that same version: the image and CI resolve the lock alike."""
    froms = [arg for op, arg in _instructions() if op == "FROM"]
    pins = [
        m.group(1) for f in froms if (m := re.fullmatch(r"ghcr\.io/astral-sh/uv:(\S+) AS uv", f))
    ]
    assert len(pins) == 1 and re.fullmatch(r"\d+\.\d+\.\d+", pins[0]), froms
    ci = (ROOT / ".ci" / "run").read_text()
    installs = re.findall(r"pip install --quiet (uv\S*)", ci)
    assert installs and all(i == f"uv=={pins[0]}" for i in installs), installs
    assert "pip install" not in DOCKERFILE


def test_the_image_installs_the_lock_without_any_group_and_keeps_no_cache() -> None:
    """Every `uv sync` is --frozen --no-default-groups (neither dev's tools nor the demo's
    stand-in) and asks for no group, with the uv cache in a build cache mount (or off), and
    the image ends as a user that is not root."""
    instructions = _instructions()
    syncs = [arg for op, arg in instructions if op == "RUN" and "uv sync" in arg]
    assert syncs
    no_cache = any(op == "ENV" and "UV_NO_CACHE=1" in arg for op, arg in instructions)
    for run in syncs:
        assert "--frozen" in run and "--no-default-groups" in run, run
        assert not re.search(r"--(group|all-groups|dev\b|only-group)", run), run
        assert no_cache or "--mount=type=cache,target=/root/.cache/uv" in run, run
    users = [arg for op, arg in instructions if op == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert instructions[-1][0] == "CMD"


def _locked_closure(roots: list[str], lock: dict[str, Any]) -> set[str]:
    """Every package of uv.lock that `roots` need, directly or not, on any platform."""
    packages = {p["name"]: p for p in lock["package"]}
    found: set[str] = set()
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in found:
            continue
        found.add(name)
        package = packages[name]
        needed = list(package.get("dependencies", []))
        for extra in package.get("optional-dependencies", {}).values():
            needed += extra  # over-counts what an extra adds: only ever more, never less
        pending += [d["name"] for d in needed]
    return found


def test_the_image_holds_no_package_only_the_demo_or_the_tests_need() -> None:
    """What a sync with no dependency group installs (the image's, by uv.lock) holds every
    runtime dependency (Flower's included, which compose runs from the image) and none of
    the demo's stand-in (fakeredis, lupa) nor the dev tools; `uv run` on a clone syncs both
    groups by default, so the README's `uv run seatwire demo` and `uv run pytest` find theirs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    [seatwire] = [p for p in lock["package"] if p["name"] == "seatwire"]
    image = _locked_closure([d["name"] for d in seatwire["dependencies"]], lock)
    groups = seatwire["dev-dependencies"]
    assert {"celery", "redis", "fastapi", "mcp", "flower", "tenacity", "uvicorn"} <= image
    assert {d["name"] for d in groups["demo"]} == {"fakeredis"}
    left_out = {"fakeredis", "lupa", "pytest", "mypy", "ruff", "hypothesis", "schemathesis"}
    assert not image & left_out, image & left_out
    assert left_out <= _locked_closure([d["name"] for g in groups.values() for d in g], lock)
    assert set(project["tool"]["uv"]["default-groups"]) == {"dev", "demo"}


def test_the_build_context_leaves_out_what_the_image_does_not_need() -> None:
    """.dockerignore keeps git, venvs and caches out, and nothing the Dockerfile copies."""
    patterns = [
        p.strip()
        for p in (ROOT / ".dockerignore").read_text().splitlines()
        if p.strip() and not p.startswith("#")
    ]
    for needed in (".git", ".venv", ".mypy_cache", ".pytest_cache", "**/__pycache__"):
        assert needed in patterns, needed
    copied = [
        source
        for op, arg in _instructions()
        if op == "COPY" and not arg.startswith("--from")
        for source in arg.split()[:-1]
    ]
    assert {"uv.lock", "pyproject.toml", "workers"} <= set(copied)
    for source in copied:
        for pattern in patterns:
            bare = pattern.removeprefix("/").removeprefix("**/")
            assert not fnmatch.fnmatch(source, bare), f".dockerignore {pattern} drops {source}"
