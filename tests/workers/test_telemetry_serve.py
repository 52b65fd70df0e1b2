"""A worker's /metrics server, and Prometheus's multiprocess mode as a prefork worker uses it:
the parent switches it on before it forks, its children record and exit, and the parent
serves what they all recorded."""

from __future__ import annotations

import os
import socket
import warnings
from collections.abc import Callable, Iterator

import httpx
import pytest
from prometheus_client import values
from prometheus_client.parser import text_string_to_metric_families

from workers import telemetry
from workers.outbound.launchers import Launchers
from workers.telemetry import MULTIPROC_ENV
from workers.telemetry.serve import process_exited, serve


@pytest.fixture
def in_memory_afterwards() -> Iterator[None]:
    """Whatever a test switches on, this process records in memory again after it."""
    saved = values.ValueClass
    yield
    os.environ.pop(MULTIPROC_ENV, None)
    values.ValueClass = saved
    telemetry.reset()


def forked(record: Callable[[], None]) -> int:
    """Fork a child that runs `record` and exits; its exit code."""
    with warnings.catch_warnings():
        # Python 3.12 warns on a fork beside running threads (the server's, as in a worker's
        # parent): the child only records and exits.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            record()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def scraped(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def test_what_forked_children_record_is_served_summed_by_their_parent(
    in_memory_afterwards: None,
) -> None:
    """Given a server started for a prefork pool, when three children forked after it each
    record a decision and a task call and exit, then the parent's /metrics serves all three
    of each, the directory holds one archive per kind instead of the children's own files,
    and stopping the server removes the directory."""

    def record() -> None:
        metrics = telemetry.telemetry()
        metrics.decided("engagement", "nobody", "self_contained")
        metrics.task_ran("engagement", "ok", 0.004)
        process_exited(os.getpid())

    server = serve(0, "127.0.0.1", forked=True)
    try:
        assert server.directory is not None and os.environ[MULTIPROC_ENV] == str(server.directory)
        assert [forked(record) for _ in range(3)] == [0, 0, 0]
        found = scraped(server.port)
        files = sorted(p.name for p in server.directory.iterdir())
    finally:
        server.stop()
    decided = (("outcome", "nobody"), ("reason_code", "self_contained"), ("stage", "engagement"))
    assert found[("seatwire_decisions_total", decided)] == 3
    ran = (("outcome", "ok"), ("stage", "engagement"))
    assert found[("seatwire_stage_task_seconds_count", ran)] == 3
    assert found[("seatwire_stage_task_seconds_bucket", (("le", "0.005"), *ran))] == 3
    assert found[("seatwire_stage_task_seconds_bucket", (("le", "0.0025"), *ran))] == 0
    assert files == ["counter_archive.db", "histogram_archive.db", "lock"]
    assert not server.directory.exists()


def test_a_process_killed_outright_is_still_counted_beside_the_archive(
    in_memory_afterwards: None,
) -> None:
    """Given one child that exits as a pool process does and one that dies without a word,
    then both are served: one from the archive, one from its own files."""

    def exits() -> None:
        telemetry.telemetry().escalated("new")
        process_exited(os.getpid())

    def dies() -> None:
        telemetry.telemetry().escalated("new")

    server = serve(0, "127.0.0.1", forked=True)
    assert server.directory is not None
    try:
        assert forked(exits) == 0 and forked(dies) == 0
        found = scraped(server.port)
        kept = sorted(p.name.split("_")[1] for p in server.directory.glob("counter_*.db"))
    finally:
        server.stop()
    assert found[("seatwire_escalations_total", (("result", "new"),))] == 2
    assert len(kept) == 2 and "archive.db" in kept


def test_a_solo_pool_serves_its_own_process_as_it_is() -> None:
    """Given a server for a pool that runs tasks in its own process, when this process
    records, then /metrics serves it, with no multiprocess directory."""
    server = serve(0, "127.0.0.1", forked=False)
    try:
        before = scraped(server.port).get(
            ("seatwire_escalations_total", (("result", "unroutable"),)), 0.0
        )
        telemetry.telemetry().escalated("unroutable")
        after = scraped(server.port)[("seatwire_escalations_total", (("result", "unroutable"),))]
    finally:
        server.stop()
    assert server.directory is None and after == before + 1


def test_a_port_that_cannot_be_bound_switches_nothing_on(in_memory_afterwards: None) -> None:
    """Given a port another socket holds, when a prefork pool's server is started on it, then
    the OSError says so and this process still records in memory."""
    saved = values.ValueClass
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        with pytest.raises(OSError):
            serve(held.getsockname()[1], "127.0.0.1", forked=True)
    assert MULTIPROC_ENV not in os.environ and values.ValueClass is saved


def test_an_agents_turn_is_not_handed_the_pool_processs_metrics_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given a pool process recording in multiprocess mode, when it builds the launchers of a
    turn, then the environment a command launcher hands the agent has every variable but
    that directory's (an agent on prometheus_client would write into the worker's figures)."""
    monkeypatch.setenv(MULTIPROC_ENV, "/tmp/seatwire-metrics-x")
    monkeypatch.setenv("AGENT_OWN_SETTING", "kept")
    environ = Launchers(time_limit_s=60).environ
    assert MULTIPROC_ENV not in environ and environ["AGENT_OWN_SETTING"] == "kept"
