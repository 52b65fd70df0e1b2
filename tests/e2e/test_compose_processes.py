"""End to end, as production runs it: the commands of compose.yaml started as processes (the
ingress and one Celery worker pool per stage queue) against a real Redis; work reports posted
over HTTP; the ledger and the outbox checked; each service's health check run as a process
against them, healthy and stopped; and Redis run with compose's own command, its password
required, which the processes reach through their URL and print nowhere."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis
import yaml

from contracts import EngagementDecision, GuardrailVerdict
from contracts.messages import ReservedEnvelope
from tests.e2e.cluster import (
    SEATWIRE,
    TOKEN,
    Cluster,
    compose_commands,
    needs_redis_server,
    start_cluster,
    wait_final,
)
from tests.fakes import BLOCKED_REPORT
from tests.test_deploy import REQUIRED, resolved
from workers import bootstrap
from workers.broker import publish
from workers.celery_app import create_app
from workers.demo import SCENARIO, _check, _steps
from workers.embedded import free_port
from workers.healthcheck import node_problem
from workers.outbound.file import read_outbox
from workers.queues import Task
from workers.settings import REPO_ROOT, Settings
from workers.stores import keys

pytestmark = pytest.mark.e2e


@pytest.fixture
def cluster(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[Cluster]:
    """compose.yaml's ingress and stage workers, as processes, on a flushed test Redis."""
    with start_cluster(compose_commands(), redis_url, tmp_path) as c:
        yield c


def test_compose_runs_ingress_and_one_worker_pool_per_stage() -> None:
    """compose.yaml runs the ingress, a worker for each stage queue, one for the steward, one
    for the work controller's tick and one for seats' turns, plus Redis, Flower, Prometheus
    and Grafana."""
    spec = yaml.safe_load((REPO_ROOT / "compose.yaml").read_text())
    services = spec["services"]
    assert {"redis", "ingress", "flower", "prometheus", "grafana"} <= set(services)
    queues = sorted(
        c[c.index("--queues") + 1] for c in compose_commands().values() if c[1] == "worker"
    )
    assert queues == [
        "controller",
        "directedness",
        "engagement",
        "guardrails",
        "send",
        "steward",
        "turns",
    ]
    redis_cmd = " ".join(services["redis"]["command"])
    assert "--appendonly yes" in redis_cmd and "--maxmemory-policy noeviction" in redis_cmd


def health_checks() -> dict[str, list[str]]:
    """Each service's health check as the command compose execs in its container (the `CMD`
    form's arguments), `python` being this interpreter."""
    spec = yaml.safe_load((REPO_ROOT / "compose.yaml").read_text())
    checks: dict[str, list[str]] = {}
    for name, service in spec["services"].items():
        test = service["healthcheck"]["test"]
        assert test[0] == "CMD", f"{name}: a check compose runs without a shell"
        checks[name] = [sys.executable if a == "python" else a for a in test[1:]]
    return checks


def run_check(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def wait_started(env: dict[str, str], checks: dict[str, list[str]]) -> None:
    """Until every node a check pings answers, asked from this process (cheap: a check as a
    process costs a second or two of CPU, which the starting workers need), as Docker waits
    out a start period. The ingress is up when the cluster starts; a worker may still be
    connecting."""
    settings = Settings(redis_url=env["SEATWIRE_REDIS_URL"], api_token=TOKEN)
    pending = {a[a.index("workers.healthcheck") + 1] for a in checks.values() if "-m" in a}
    deadline = time.monotonic() + 60
    while pending and time.monotonic() < deadline:
        pending = {n for n in pending if node_problem(settings, n, timeout_s=1) is not None}
    assert not pending, f"never answered: {sorted(pending)}"


# The services whose health checks run as processes: the ingress, two worker pools and beat.
# The other pools' checks are the same command under their own node name, which
# tests/test_deploy.py holds to each pool's `--hostname`; starting them too would double the
# test's time for nothing more.
HEALTH_SUBJECTS = ("ingress", "worker-engagement", "worker-send", "beat")


def test_health_checks_pass_on_their_processes_and_fail_when_they_stop(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Each health check of compose's ingress, two worker pools and beat, run as compose runs
    it, passes against their processes. Once the send worker and beat are stopped (SIGSTOP:
    alive, consuming nothing) and beat's lease is gone, their checks fail, the live worker's
    still passes, and the same check asking for a leader fails for want of one."""
    commands = {name: compose_commands()[name] for name in HEALTH_SUBJECTS}
    with start_cluster(commands, redis_url, tmp_path) as cluster:
        checks = {
            name: [a.replace("http://127.0.0.1:8080", cluster.base) for a in health_checks()[name]]
            for name in HEALTH_SUBJECTS
        }
        procs = dict(zip(commands, cluster.procs, strict=True))
        healthy, stopped = _health_checks_around_a_stop(
            cluster, checks, [procs["worker-send"], procs["beat"]], redis_client
        )
    for name, result in healthy.items():
        assert result.returncode == 0, (name, result.stdout, result.stderr)
    send, beat, engagement, leaderless = stopped
    assert send.returncode == 1 and "no Celery node send@" in send.stderr, send.stderr
    assert beat.returncode == 1 and "no Celery node beat-*@" in beat.stderr, beat.stderr
    assert engagement.returncode == 0, engagement.stderr
    assert leaderless.returncode == 1 and "no beat holds the leader lease" in leaderless.stderr


def _health_checks_around_a_stop(
    cluster: Cluster,
    checks: dict[str, list[str]],
    stop: list[subprocess.Popen[bytes]],
    redis_client: redis.Redis,
) -> tuple[dict[str, subprocess.CompletedProcess[str]], list[subprocess.CompletedProcess[str]]]:
    """Every check once the cluster answers; then, with `stop` stopped and the lease gone,
    the send worker's, beat's, the engagement worker's and the latter's with --leader."""
    wait_started(cluster.env, checks)
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {n: pool.submit(run_check, argv, cluster.env) for n, argv in checks.items()}
    healthy = {name: run.result() for name, run in runs.items()}
    for p in stop:
        os.kill(p.pid, signal.SIGSTOP)
    try:
        redis_client.delete(keys.BEAT_LEADER)
        argvs = [
            checks["worker-send"],
            checks["beat"],
            checks["worker-engagement"],
            [*checks["worker-engagement"], "--leader"],
        ]
        with ThreadPoolExecutor(max_workers=4) as pool:
            stopped = [pool.submit(run_check, argv, cluster.env) for argv in argvs]
        return healthy, [run.result() for run in stopped]
    finally:
        for p in stop:
            os.kill(p.pid, signal.SIGCONT)


def _compose_client() -> list[str] | None:
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run(
            [docker, "compose", "version"], capture_output=True, check=False
        ).returncode
        == 0
    ):
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_compose_file_is_valid_where_a_client_exists() -> None:
    """`compose config` accepts the file with the required variables set, and refuses it
    without any one of them, naming it."""
    client = _compose_client()
    if client is None:
        pytest.skip("no docker compose client on this machine")
    args = [*client, "-f", str(REPO_ROOT / "compose.yaml"), "config", "--quiet"]
    env = {k: v for k, v in os.environ.items() if k not in REQUIRED}
    ok = subprocess.run(args, env={**env, **REQUIRED}, capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    for name in REQUIRED:
        given = {**env, **{k: v for k, v in REQUIRED.items() if k != name}}
        missing = subprocess.run(args, env=given, capture_output=True, text=True, check=False)
        assert missing.returncode != 0 and name in missing.stderr, name


def test_scenario_end_to_end(cluster: Cluster) -> None:
    """Every scenario case ends as it must; the ledger has a row for each and the outbox holds
    exactly the engaged asks, once each (the re-posted report included)."""
    steps = _steps(yaml.safe_load(SCENARIO.read_text()), suffix="")
    engaged_ids, tracking_ids = set(), []
    with cluster.http() as http:
        for step in steps:
            resp = http.post(f"/v1/seats/{step['seat']}/work", json=step["report"])
            assert resp.status_code == 202, resp.text
            posted = resp.json()
            final = wait_final(http, posted["trackingId"])
            assert _check(step.get("expect", {}), posted, final), (step["name"], final)
            if posted["status"] == "accepted":
                tracking_ids.append(posted["trackingId"])
            if final["state"] == "engaged":
                engaged_ids.add(final["send"]["idempotencyId"])
        rows = http.get("/v1/ledger", params={"limit": 1000}).json()["rows"]
    assert sorted(r["trackingId"] for r in rows) == sorted(tracking_ids)
    engaged_rows = [r for r in rows if r["outcome"] == "engaged"]
    assert {r["idempotencyId"] for r in engaged_rows} == engaged_ids
    lines = read_outbox(cluster.outbox)
    assert sorted(str(x["idempotencyId"]) for x in lines) == sorted(engaged_ids)
    by_code = {r["reasonCode"]: r for r in rows}
    assert by_code["unroutable"]["outcome"] == "unroutable"
    assert by_code["already_engaged"]["outcome"] == "already_engaged"
    assert by_code["self_contained"]["outcome"] == "none"


def test_send_task_delivered_twice_writes_one_line(
    cluster: Cluster, redis_url: str, tmp_path: Path
) -> None:
    """The same send task delivered twice, concurrently and then again after it finished,
    puts exactly one line in the outbox."""
    settings = Settings(redis_url=redis_url, api_token=TOKEN, outbox_path=tmp_path / "unused.jsonl")
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    decision = EngagementDecision.model_validate(
        {
            "engage": True,
            "trigger": "blocked_on_other",
            "reasonCode": "blocked:access",
            "targets": [{"memberId": "ben", "name": "Ben Lindqvist", "rung": "explicit"}],
            "surface": "dm",
            "memberIds": ["ben"],
            "mentions": [{"memberId": "ben"}],
            "body": "**Blocked:** twice",
            "workId": "twice",
            "dedupeKey": "twice-key",
            "attempt": 1,
            "nowMs": 1,
        }
    )
    tracking = "wr-send-twice"
    container.journal.accept(
        tracking,
        kind="work",
        seat_id="scout",
        payload="{}",
        now_ms=bootstrap.now_ms(),
        fingerprint="x",
    )
    verdict = container.ledger.reserve(
        tracking, decision=decision, seat_id="scout", tracking_id=tracking
    )
    assert verdict.allowed
    message = ReservedEnvelope(
        tracking_id=tracking,
        seat_id="scout",
        decision=decision,
        verdict=GuardrailVerdict(allowed=True, attempt=verdict.attempt),
    )
    barrier = threading.Barrier(2)

    def deliver() -> None:
        barrier.wait()
        publish(app, Task.SEND, tracking, message.to_wire())

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with cluster.http() as http:
        assert wait_final(http, tracking)["state"] == "engaged"
        publish(app, Task.SEND, tracking, message.to_wire())
        time.sleep(1.0)  # give the redelivery time to run (it must be a no-op)
        rows = http.get("/v1/ledger", params={"workId": "twice"}).json()["rows"]
    lines = [x for x in read_outbox(cluster.outbox) if x["workId"] == "twice"]
    assert len(lines) == 1, json.dumps(lines)
    assert [r["outcome"] for r in rows] == ["engaged"]


def test_a_stage_that_gives_up_writes_it_down(
    cluster: Cluster, redis_url: str, tmp_path: Path
) -> None:
    """A message no retry can help (its seat is not in the org) is not dropped: the journal
    entry ends `failed` with the stage and the reason, after exactly one attempt."""
    from contracts import WorkReport
    from contracts.messages import WorkEnvelope

    settings = Settings(redis_url=redis_url, api_token=TOKEN, outbox_path=tmp_path / "unused.jsonl")
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    tracking = "wr-ghost-seat"
    container.journal.accept(
        tracking,
        kind="work",
        seat_id="ghost",
        payload="{}",
        now_ms=bootstrap.now_ms(),
        fingerprint="x",
    )
    envelope = WorkEnvelope(
        tracking_id=tracking,
        seat_id="ghost",
        accepted_at_ms=1,
        report=WorkReport(id="w", title="t"),
    )
    publish(app, Task.ENGAGEMENT, tracking, envelope.to_wire())
    with cluster.http() as http:
        final = wait_final(http, tracking)
    assert final["state"] == "failed"
    assert final["failedStage"] == "engagement"
    assert "ghost" in (final["error"] or "")
    assert tracking in container.journal.failed()


PASSWORD = "e2e-redis-pw-Zq81xK"


def compose_flower() -> list[str]:
    """The command of compose's flower service."""
    spec = yaml.safe_load((REPO_ROOT / "compose.yaml").read_text())
    command: list[str] = spec["services"]["flower"]["command"]
    return command


def wait_logged(log: Path, text: str, proc: subprocess.Popen[bytes]) -> None:
    """Until `log` holds `text`, while `proc` runs (60 s at most)."""
    deadline = time.monotonic() + 60
    while text not in log.read_text(errors="replace"):
        assert proc.poll() is None, f"{proc.args!r} exited: {log.read_text(errors='replace')}"
        assert time.monotonic() < deadline, f"{text!r} never logged in {log}"
        time.sleep(0.1)


@pytest.fixture
def locked_redis(tmp_path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """Redis started with compose's own command (its password required, REDIS_PASSWORD
    being PASSWORD) on a free local port: the port and compose's environment of the redis
    service (redis-cli's password)."""
    needs_redis_server()
    env = {**REQUIRED, "REDIS_PASSWORD": PASSWORD}
    service = resolved(yaml.safe_load((REPO_ROOT / "compose.yaml").read_text()), env)
    redis_service = service["services"]["redis"]
    port = free_port()
    data = tmp_path / "redis"
    data.mkdir()
    command = redis_service["command"]
    binary = shutil.which(command[0])
    assert binary is not None
    args = [binary, *command[1:], "--port", str(port), "--bind", "127.0.0.1"]
    args += ["--dir", str(data), "--save", "", "--logfile", "redis.log"]
    proc = subprocess.Popen(args, start_new_session=True)
    try:
        client = redis.Redis(port=port, password=PASSWORD, socket_connect_timeout=1)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert proc.poll() is None and time.monotonic() < deadline, "redis never answered"
                time.sleep(0.05)
        client.close()
        yield port, redis_service["environment"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def test_compose_runs_on_a_redis_that_requires_its_password(
    locked_redis: tuple[int, dict[str, str]], tmp_path: Path
) -> None:
    """Given Redis run with compose's command, its password required: compose's redis health
    check passes with the environment compose gives it and fails without the password or
    with another (redis-cli exits 0 on those refusals); the ingress and a stage pool, with the
    password in their URL, take a report to its end, the pool's health check passes and
    compose's Flower command reaches the broker; `seatwire
    status` reads the cluster; a worker given a wrong password refuses to start (exit 2); and
    the password is in nothing any of them printed, the URLs shown masked."""
    port, redis_env = locked_redis
    check = health_checks()["redis"]
    check = [a.replace("redis-cli", f"redis-cli -p {port}") for a in check]
    bare = {k: v for k, v in os.environ.items() if k != "REDISCLI_AUTH"}
    redis_checks = [
        run_check(check, {**bare, **env})
        for env in (redis_env, {}, {"REDISCLI_AUTH": "not-the-password"})
    ]
    assert [c.returncode for c in redis_checks] == [0, 1, 1], redis_checks

    url = f"redis://:{PASSWORD}@127.0.0.1:{port}/0"
    pool = ["seatwire", "worker", "--queues", "engagement,guardrails,send"]
    flower = [str(Path(sys.executable).parent / "celery"), *compose_flower()[1:]]
    flower = [f"--port={free_port()}" if a.startswith("--port=") else a for a in flower]
    flower = ["--address=127.0.0.1" if a.startswith("--address=") else a for a in flower]
    commands = {
        "ingress": compose_commands()["ingress"],
        "worker": [*pool, "--concurrency", "1", "--hostname", "send@%h"],
        "flower": flower,
    }
    with start_cluster(commands, url, tmp_path, FLOWER_BASIC_AUTH="ops:pw") as cluster:
        with cluster.http() as http:
            posted = http.post("/v1/seats/scout/work", json=BLOCKED_REPORT)
            assert posted.status_code == 202, posted.text
            final = wait_final(http, posted.json()["trackingId"], timeout=60)
        wait_started(cluster.env, {"worker-send": health_checks()["worker-send"]})
        wait_logged(cluster.logs[2], "Broker: ", cluster.procs[2])
        printed = [
            run_check(health_checks()["worker-send"], cluster.env),
            run_check([SEATWIRE, "status"], cluster.env),
            run_check(
                [SEATWIRE, *pool[1:]],
                {**cluster.env, "SEATWIRE_REDIS_URL": url.replace(PASSWORD, "wrong-pw-9")},
            ),
        ]
    logs = [log.read_text(errors="replace") for log in cluster.logs]
    assert final["state"] == "engaged", final
    health, status, refused = printed
    assert health.returncode == 0, health.stderr
    assert status.returncode == 0 and f"redis://:***@127.0.0.1:{port}/0" in status.stdout
    assert refused.returncode == 2 and "redis://:***@127.0.0.1" in refused.stderr
    assert "wrong-pw-9" not in refused.stdout + refused.stderr
    # Celery's banner and Flower name the broker, masked their own way.
    assert f"redis://:**@127.0.0.1:{port}/0" in logs[1], logs[1]
    assert f"Broker: redis://:**@127.0.0.1:{port}/0" in logs[2], logs[2]
    for text in [*logs, *(p.stdout + p.stderr for p in printed)]:
        assert PASSWORD not in text
