"""The metrics of a running deployment, as processes: the ingress's metrics, served without a
token on its SEATWIRE_METRICS_PORT and refused without the operator's on its public port, read
the cluster (work waiting in its queue, then drained), and a stage worker's own /metrics on
SEATWIRE_METRICS_PORT, a prefork pool's children recording in multiprocess mode, counts what
it did with the work: task calls per stage, decisions by reason code, sends, accept-to-final."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.cluster import (
    SEATWIRE,
    TOKEN,
    Cluster,
    compose_commands,
    start_cluster,
    stop_processes,
    wait_final,
)
from tests.fakes import BLOCKED_REPORT
from workers.embedded import free_port

pytestmark = pytest.mark.e2e

NOBODY = {"id": "tidy", "title": "Tidy dashboards", "interestedParties": ["gus"]}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(base: str, headers: dict[str, str] | None = None) -> Samples:
    resp = httpx.get(f"{base}/metrics", headers=headers, timeout=10)
    assert resp.status_code == 200, resp.text
    body = resp.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def at(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def start_worker(cluster: Cluster, port: int, tmp: Path) -> subprocess.Popen[bytes]:
    """compose's stage pools as one prefork worker serving its metrics: one pool process,
    recycled every 3 tasks, its temporary files under `tmp`."""
    env = {
        **cluster.env,
        "SEATWIRE_METRICS_PORT": str(port),
        "SEATWIRE_METRICS_HOST": "127.0.0.1",
        "TMPDIR": str(tmp),
    }
    args = [SEATWIRE, "worker", "--queues", "engagement,guardrails,send", "--concurrency", "1"]
    args += ["--", "--max-tasks-per-child", "3"]
    log = tmp / "worker.log"
    with log.open("wb") as fh:
        return subprocess.Popen(
            args, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )


def test_both_metrics_endpoints_move_as_work_goes_through(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Given four work reports accepted with no worker running (three ask the same owner, one
    needs nobody), the ingress's scrape of its metrics port (no token) shows them waiting in
    the engagement queue and open in the journal, its public port refusing the same scrape
    without the operator's token and serving it with; once a worker has taken them all, the
    queue and the journal are empty, and
    the worker's scrape counts four engagement calls, three guardrail and three send calls,
    the decisions by their reason codes, three engaged sends on the file adapter and each
    entry's accept-to-final time by its final state, though its pool process was replaced
    every 3 tasks (each folded its counts into the archive as it exited); the worker removes
    its multiprocess directory when it stops."""
    ingress = {"ingress": compose_commands()["ingress"]}
    internal = free_port()
    with (
        start_cluster(
            ingress,
            redis_url,
            tmp_path,
            SEATWIRE_METRICS_PORT=str(internal),
            SEATWIRE_METRICS_HOST="127.0.0.1",
        ) as cluster,
        cluster.http() as http,
    ):
        reports = [dict(BLOCKED_REPORT, id=f"metrics-{i}") for i in range(3)] + [NOBODY]
        posted = [http.post("/v1/seats/scout/work", json=r) for r in reports]
        assert [p.status_code for p in posted] == [202] * 4, [p.text for p in posted]
        metrics_port = f"http://127.0.0.1:{internal}"
        waiting = scrape(metrics_port)
        public = httpx.get(f"{cluster.base}/metrics", timeout=10)
        operator = scrape(cluster.base, {"Authorization": f"Bearer {TOKEN}"})
        port, tmp = free_port(), tmp_path / "tmp"
        tmp.mkdir()
        worker = start_worker(cluster, port, tmp)
        try:
            finals = [wait_final(http, p.json()["trackingId"], timeout=60) for p in posted]
            done = scrape(f"http://127.0.0.1:{port}")
            drained = scrape(metrics_port)
            [directory] = tmp.glob("seatwire-metrics-*")
            files = {p.name for p in directory.iterdir()}
        finally:
            stop_processes([worker])
        log = (tmp / "worker.log").read_text(errors="replace")

    assert public.status_code == 401 and "seatwire_" not in public.text
    assert at(operator, "seatwire_queue_depth", queue="engagement") == 4
    assert at(waiting, "seatwire_cluster_status_up") == 1
    assert at(waiting, "seatwire_queue_depth", queue="engagement") == 4
    assert at(waiting, "seatwire_journal_entries", state="open") == 4
    assert at(drained, "seatwire_queue_depth", queue="engagement") == 0
    assert at(drained, "seatwire_journal_entries", state="open") == 0
    assert at(drained, "seatwire_ingress_requests_total", route="work", status="202") == 4

    assert [f["state"] for f in finals] == ["engaged"] * 3 + ["nobody"], log
    engaged_code = finals[0]["decision"]["reasonCode"]
    # The parent serving them runs no task: these are its pool processes', summed from the
    # multiprocess files, most of them from the archive.
    assert {"counter_archive.db", "histogram_archive.db"} <= files, files
    assert not directory.exists()
    for stage, calls in (("engagement", 4), ("guardrails", 3), ("send", 3)):
        assert at(done, "seatwire_stage_task_seconds_count", stage=stage, outcome="ok") == calls
    decided = "seatwire_decisions_total"
    assert at(done, decided, stage="engagement", outcome="engage", reason_code=engaged_code) == 3
    assert (
        at(done, decided, stage="engagement", outcome="nobody", reason_code="self_contained") == 1
    )
    assert at(done, "seatwire_send_outcomes_total", adapter="file", result="engaged") == 3
    final = "seatwire_accept_to_final_seconds_count"
    assert at(done, final, kind="work", state="engaged") == 3
    assert at(done, final, kind="work", state="nobody") == 1


@pytest.mark.parametrize(
    "command",
    [
        ["worker", "--queues", "engagement", "--concurrency", "1"],
        ["ingress", "--host", "127.0.0.1", "--port", "0"],
    ],
    ids=["worker", "ingress"],
)
def test_a_process_whose_metrics_port_is_taken_refuses_to_start(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, command: list[str]
) -> None:
    """Given SEATWIRE_METRICS_PORT held by another socket, when a worker or the ingress
    starts, then it exits with code 2 at its start, naming the port, rather than running
    unseen."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        env = {
            **os.environ,
            "SEATWIRE_REDIS_URL": redis_url,
            "SEATWIRE_API_TOKEN": "t",
            "SEATWIRE_OUTBOX_PATH": str(tmp_path / "outbox.jsonl"),
            "SEATWIRE_METRICS_PORT": str(port),
            "SEATWIRE_METRICS_HOST": "127.0.0.1",
        }
        done = subprocess.run(
            [SEATWIRE, *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port} (SEATWIRE_METRICS_PORT)" in done.stderr
