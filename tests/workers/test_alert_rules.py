"""deploy/prometheus and deploy/grafana against the code: every metric an alert, its unit
test or a dashboard panel names is one the code exports, the scrape config names every
compose service that serves metrics, and (where promtool is on the PATH) the rules and the
config are valid and each alert fires on the series that should fire it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.ops import ClusterStatus
from tests.conftest import IN_CI
from workers.ingress.metrics import ClusterFigures, IngressMetrics
from workers.settings import REPO_ROOT
from workers.telemetry import Telemetry, telemetry

PROMETHEUS = REPO_ROOT / "deploy" / "prometheus"
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "dashboards" / "seatwire.json"
NAMED = re.compile(r"\bseatwire_[a-z0-9_]+\b")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}


def exported() -> set[str]:
    """Every sample name the workers' and the ingress's /metrics can serve."""

    def unread() -> ClusterStatus:
        raise AssertionError("describe() reads nothing")

    families = [
        *Telemetry().registry.collect(),
        *IngressMetrics.create(overflowed=lambda: 0).registry.collect(),
        *ClusterFigures(unread, budget_s=1.0).describe(),
    ]
    return {f.name + suffix for f in families for suffix in SUFFIXES.get(f.type, ("",))}


def rules() -> list[dict[str, Any]]:
    spec = yaml.safe_load((PROMETHEUS / "alerts.yaml").read_text())
    return [rule for group in spec["groups"] for rule in group["rules"]]


def unknown(exprs: list[str]) -> list[str]:
    names = exported()
    return sorted({n for e in exprs for n in NAMED.findall(e)} - names)


def test_the_export_is_walked() -> None:
    """The exported names hold the cluster's, the ingress's and a worker's own, so the checks
    below cannot pass on an empty set."""
    assert {
        "seatwire_dlq_messages",
        "seatwire_ingress_requests_total",
        "seatwire_stage_task_seconds_bucket",
        "seatwire_accept_to_final_seconds_count",
    } <= exported()


def test_every_alert_names_only_exported_metrics_and_says_what_to_do() -> None:
    """Each rule is an alert with a severity, a summary and a description, and its expression
    reads only metrics the code exports (up aside)."""
    found = rules()
    assert {r["alert"] for r in found} >= {
        "SeatwireDeadLetters",
        "SeatwireJournalOverdue",
        "SeatwireQueueGrowing",
        "SeatwireSendFailures",
        "SeatwireNoBeatTick",
        "SeatwireTargetDown",
    }
    for rule in found:
        assert rule["labels"]["severity"] in {"page", "warning", "info"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    assert unknown([r["expr"] for r in found]) == []


def test_the_alerts_unit_test_feeds_only_exported_series() -> None:
    """alerts.test.yaml's input series are metrics the code exports, so a passing promtool run
    says something about the real series."""
    spec = yaml.safe_load((PROMETHEUS / "alerts.test.yaml").read_text())
    series = [s["series"] for t in spec["tests"] for s in t["input_series"]]
    assert series and unknown(series) == []


def test_every_dashboard_panel_reads_exported_metrics() -> None:
    """The Grafana dashboard's panels read only exported metrics, through its datasource
    variable, and it covers the figures an operator needs first."""
    board = json.loads(DASHBOARD.read_text())
    targets = [t for p in board["panels"] for t in p.get("targets", [])]
    exprs = [t["expr"] for t in targets]
    assert {t["datasource"]["uid"] for t in targets} == {"${datasource}"}
    assert unknown(exprs) == []
    read = {n for e in exprs for n in NAMED.findall(e)}
    assert {
        "seatwire_queue_depth",
        "seatwire_dlq_messages",
        "seatwire_journal_entries",
        "seatwire_stage_task_seconds_bucket",
        "seatwire_decisions_total",
        "seatwire_send_outcomes_total",
        "seatwire_provider_rate_limited_total",
        "seatwire_accept_to_final_seconds_bucket",
    } <= read


def test_prometheus_scrapes_every_compose_service_that_serves_metrics() -> None:
    """prometheus.yml loads alerts.yaml, scrapes the ingress on 9808 (its metrics port, not
    the published one, which wants a token) and, by DNS so that each replica is a target,
    every compose service that runs a worker or beat on 9808."""
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    assert config["rule_files"] == ["alerts.yaml"]
    jobs = {
        job["job_name"]: job["dns_sd_configs"]
        for job in config["scrape_configs"]
        if "dns_sd_configs" in job
    }
    assert jobs["seatwire-ingress"] == [
        {"names": ["ingress"], "type": "A", "port": 9808, "refresh_interval": "30s"}
    ]
    [workers] = jobs["seatwire-workers"]
    assert (workers["type"], workers["port"]) == ("A", 9808)
    services = yaml.safe_load((REPO_ROOT / "compose.yaml").read_text())["services"]
    serving = {
        name
        for name, svc in services.items()
        if (svc.get("command") or [])[:2] in (["seatwire", "worker"], ["seatwire", "beat"])
    }
    assert serving and set(workers["names"]) == serving


ALERTMANAGER = REPO_ROOT / "deploy" / "alertmanager"
RUNBOOKS = REPO_ROOT / "docs" / "alerts.md"


def anchors() -> set[str]:
    """The GitHub anchors of docs/alerts.md's headings (lower case, spaces as dashes)."""
    found = set()
    for line in RUNBOOKS.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return found


def test_every_alert_has_its_runbook_section() -> None:
    """Each rule's runbook_url is its own section of docs/alerts.md, which exists and says
    what it means, what to check and how to fix it."""
    sections = anchors()
    text = RUNBOOKS.read_text()
    for rule in rules():
        name = rule["alert"]
        assert rule["annotations"]["runbook_url"] == f"docs/alerts.md#{name.lower()}", name
        assert name.lower() in sections, name
        section = text.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
        for part in ("What it means", "What to check", "How to fix"):
            assert f"**{part}**" in section, (name, part)


def test_the_rules_operators_miss_are_there() -> None:
    """The ingress's 5xx, a stage's failed tasks, a stopped seat and Redis near maxmemory."""
    exprs = {r["alert"]: r["expr"] for r in rules()}
    assert 'status=~"5.."' in exprs["SeatwireIngressErrors"]
    assert 'outcome="error"' in exprs["SeatwireStageErrors"]
    assert 'reason_code="failure_limit"' in exprs["SeatwireSeatStopped"]
    assert "seatwire_redis_memory_max_bytes" in exprs["SeatwireRedisMemoryHigh"]


def test_every_alert_has_a_unit_test_that_fires_it_and_one_that_does_not() -> None:
    spec = yaml.safe_load((PROMETHEUS / "alerts.test.yaml").read_text())
    cases = [case for t in spec["tests"] for case in t["alert_rule_test"]]
    for rule in rules():
        mine = [c for c in cases if c["alertname"] == rule["alert"]]
        assert any(c["exp_alerts"] for c in mine), f"{rule['alert']} never fires in a test"
        assert any(not c["exp_alerts"] for c in mine), f"{rule['alert']} always fires"


def test_alerts_go_to_alertmanager_and_on_to_the_ingress() -> None:
    """prometheus.yml sends alerts to compose's alertmanager service, whose one receiver
    posts every alert, resolutions too, to the ingress's alerts route with a bearer token
    read from the file the alertmanager service writes SEATWIRE_ALERTS_TOKEN to."""
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    [manager] = config["alerting"]["alertmanagers"]
    [static] = manager["static_configs"]
    assert static["targets"] == ["alertmanager:9093"]
    compose = yaml.safe_load((REPO_ROOT / "compose.yaml").read_text())
    service = compose["services"]["alertmanager"]
    assert service["image"].startswith("prom/alertmanager:v")
    assert "./deploy/alertmanager:/etc/alertmanager:ro" in service["volumes"]
    am = yaml.safe_load((ALERTMANAGER / "alertmanager.yml").read_text())
    receivers = {r["name"]: r for r in am["receivers"]}
    [hook] = receivers[am["route"]["receiver"]]["webhook_configs"]
    assert hook["url"] == "http://ingress:8080/v1/alerts/alertmanager"
    assert hook["send_resolved"] is True and hook["max_alerts"] == 0
    auth = hook["http_config"]["authorization"]
    assert auth["type"] == "Bearer"
    script = " ".join(service["command"])
    assert f"> {auth['credentials_file']}" in script and "$$SEATWIRE_ALERTS_TOKEN" in script
    assert "--config.file=/etc/alertmanager/alertmanager.yml" in script
    env = compose["x-seatwire-env"]
    assert {"SEATWIRE_ALERTS_TOKEN", "SEATWIRE_ONCALL_MEMBER", "SEATWIRE_ALERTS_SEAT"} <= set(env)
    assert service["environment"]["SEATWIRE_ALERTS_TOKEN"] == env["SEATWIRE_ALERTS_TOKEN"]


def tool(name: str, package: str) -> str:
    """The path of `name`; without it the test skips locally, saying so, and fails under CI
    (.ci/run unpacks it from Debian's `package`)."""
    found = shutil.which(name)
    if found is None:
        message = f"{name} is not on the PATH (Debian: the {package} package ships it)"
        if IN_CI:
            pytest.fail(f"{message}: CI must run the alert rules' tests", pytrace=False)
        pytest.skip(f"SKIPPED: {message}")
    return found


def test_amtool_accepts_the_alertmanager_config() -> None:
    found = tool("amtool", "prometheus-alertmanager")
    done = subprocess.run(
        [found, "check-config", "alertmanager.yml"],
        cwd=ALERTMANAGER,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_process_serves_its_cpu_memory_and_version() -> None:
    """The process collector, python_info and seatwire_build_info are on each process's
    registry (a worker's, the ingress's, and a prefork worker's parent's)."""
    from workers.telemetry.serve import multiprocess_registry

    def names(registry: Any) -> set[str]:
        return {m.name for m in registry.collect()}

    wanted = {"process_cpu_seconds", "process_resident_memory_bytes", "seatwire_build"}
    assert wanted <= names(telemetry().registry)
    assert wanted <= names(IngressMetrics.create(overflowed=lambda: 0).registry)
    with tempfile.TemporaryDirectory() as tmp:
        assert wanted <= names(multiprocess_registry(Path(tmp)))


def promtool() -> str:
    return tool("promtool", "prometheus")


@pytest.mark.parametrize(
    "args",
    [
        ["check", "rules", "alerts.yaml"],
        ["check", "config", "prometheus.yml"],
        ["test", "rules", "alerts.test.yaml"],
    ],
)
def test_promtool_accepts_the_rules_the_config_and_the_alerts_unit_test(args: list[str]) -> None:
    """promtool finds the rules and the config valid, and each alert fires as its unit test
    expects."""
    done = subprocess.run(
        [promtool(), *args], cwd=Path(PROMETHEUS), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
