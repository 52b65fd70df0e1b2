"""A worker's (or beat's) figures served as Prometheus text at /metrics on
SEATWIRE_METRICS_PORT, and prometheus_client's multiprocess mode for a prefork pool; and the
ingress's registry served on that port the same way (`serve_registry`), without the token its
own /metrics route takes.

Celery's prefork pool runs its tasks in child processes, each with its own `Telemetry`; the
parent runs none and serves what they all recorded. So before the pool forks (Celery's
`worker_init`, wired in workers/celery_app.py) the parent makes a directory of its own and
switches multiprocess mode on (`serve(..., forked=True)`): every child then records into
memory-mapped files there, named by its pid, and the parent serves a `MultiProcessCollector`
over them. The pool recycles its processes (every 1,000 tasks), and the library keeps a dead
process's counter and histogram files, which every scrape reads, for ever: so a pool process
that exits folds its own into one archive file per kind (`archive_exited`, under an exclusive
lock that a scrape shares), and the directory holds the live processes' files and the
archive however long the worker runs. A process killed outright leaves its files as they
are, still counted. The directory goes when the worker stops (`MetricsServer.stop`). A solo
or threads pool runs its tasks in the serving process, whose own registry is served as is.

prometheus_client picks its value class (in memory, or multiprocess files) once, when it is
imported, from PROMETHEUS_MULTIPROC_DIR; a worker knows its pool long after that import, so
`use_multiprocess` sets the variable (inherited by every child forked later) and has the
library pick again, as its own multiprocess tests do, before any child builds a metric.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, multiprocess, start_http_server, values
from prometheus_client.core import Metric
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.registry import Collector

from workers import telemetry
from workers.telemetry import MULTIPROC_ENV

log = logging.getLogger("seatwire.telemetry")

# The kinds of file whose values add up key by key, so that a dead process's can be summed
# into an archive (every per-process metric is a counter or a histogram).
ARCHIVED = ("counter", "histogram")


def use_multiprocess(path: Path) -> None:
    """Record into multiprocess files under `path` from here on, in this process and in
    every process forked from it."""
    os.environ[MULTIPROC_ENV] = str(path)
    values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
    telemetry.reset()


@contextmanager
def _locked(path: Path, how: int) -> Iterator[None]:
    """The directory's lock: shared by a scrape, exclusive while an archive changes."""
    with (path / "lock").open("a") as held:
        fcntl.flock(held, how)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


class Archived(Collector):
    """Every process's files under `path`, live and archived, read whole under the lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._files = multiprocess.MultiProcessCollector(None, path=str(path))  # type: ignore[no-untyped-call]

    def collect(self) -> list[Metric]:
        with _locked(self.path, fcntl.LOCK_SH):
            return list(self._files.collect())  # type: ignore[no-untyped-call]


def multiprocess_registry(path: Path) -> CollectorRegistry:
    """A registry that reads what every process recorded under `path`, at each scrape."""
    registry = CollectorRegistry()
    registry.register(Archived(path))
    telemetry.process_collectors(registry)  # the serving (parent) process's own
    return registry


def archive_exited(path: Path, pid: int) -> None:
    """Fold process `pid`'s counter and histogram files under `path` into the archive of
    their kind, and remove them. Run by that process as it exits: nothing of it records any
    more, and no other process can have its pid yet. The new archive is written aside, then
    put in place and the process's file removed under the exclusive lock: a scrape sees the
    values before or after, never half of them, never twice."""
    with _locked(path, fcntl.LOCK_EX):
        for kind in ARCHIVED:
            own = path / f"{kind}_{pid}.db"
            if not own.exists():
                continue
            archive = path / f"{kind}_archive.db"
            totals: dict[str, float] = {}
            for source in (archive, own):
                if source.exists():
                    read = MmapedDict.read_all_values_from_file(str(source))  # type: ignore[no-untyped-call]
                    for key, value, _at, _pos in read:
                        totals[key] = totals.get(key, 0.0) + value
            aside = path / f"{kind}_archive.new"  # not *.db: never read half-written
            aside.unlink(missing_ok=True)
            written = MmapedDict(str(aside))  # type: ignore[no-untyped-call]
            try:
                for key, value in totals.items():
                    written.write_value(key, value, 0.0)  # type: ignore[no-untyped-call]
            finally:
                written.close()  # type: ignore[no-untyped-call]
            os.replace(aside, archive)
            own.unlink()


def process_exited(pid: int) -> None:
    """A process recording into multiprocess files exits (run in it, as it does): the
    library's bookkeeping for live gauges, then its counts folded into the archive. Nothing
    without multiprocess mode."""
    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
        archive_exited(Path(directory), pid)


@dataclass
class MetricsServer:
    """A running /metrics server, and the multiprocess directory it owns (None: in memory)."""

    host: str
    port: int
    directory: Path | None
    server: WSGIServer
    thread: threading.Thread

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


def serve(port: int, host: str, *, forked: bool) -> MetricsServer:
    """Serve this process's figures on `host:port` (port 0: any free one); `forked`: its tasks
    run in child processes forked after this call (a prefork pool), so multiprocess mode goes
    on first. An address that cannot be bound is an OSError, and nothing is left switched on."""
    directory = Path(tempfile.mkdtemp(prefix="seatwire-metrics-")) if forked else None
    try:
        registry = (
            telemetry.telemetry().registry
            if directory is None
            else multiprocess_registry(directory)
        )
        server, thread = start_http_server(port, addr=host, registry=registry)
    except BaseException:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    if directory is not None:
        use_multiprocess(directory)
    bound = int(server.server_address[1])
    log.info(
        "metrics on http://%s:%d/metrics (%s)",
        host,
        bound,
        f"multiprocess, {directory}" if directory else "this process",
    )
    return MetricsServer(host, bound, directory, server, thread)


def serve_registry(registry: CollectorRegistry, port: int, host: str) -> MetricsServer:
    """Serve `registry` as it is on `host:port` (port 0: any free one): the ingress's, whose
    cluster figures are read at each scrape. An address that cannot be bound is an OSError."""
    server, thread = start_http_server(port, addr=host, registry=registry)
    bound = int(server.server_address[1])
    log.info("metrics on http://%s:%d/metrics (the ingress)", host, bound)
    return MetricsServer(host, bound, None, server, thread)
