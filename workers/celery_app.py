"""The Celery app of a process: `workers/broker.py`'s settings with the stage tasks
registered on it, each handed the container it works with.

`create_app` builds an app for given settings without connecting anywhere; the workers, the
ingress and the embedded mode each build their own. `register=False` gives an app that only
publishes (the ingress, the CLI, the benchmarks). A worker's app with SEATWIRE_METRICS_PORT
set serves its figures there once its worker starts (`serve_metrics`).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from celery import Celery, bootsteps
from celery.concurrency import get_implementation
from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.signals import worker_init, worker_process_shutdown, worker_shutdown

from workers.bootstrap import Container, Provider
from workers.broker import new_app
from workers.errors import ConfigError
from workers.org import OrgSource
from workers.settings import Settings
from workers.stages import register_tasks
from workers.telemetry.serve import MetricsServer, process_exited, serve

log = logging.getLogger("seatwire.worker")


def create_app(
    settings: Settings, *, register: bool = True, container: Container | None = None
) -> Celery:
    """An app for `settings`; with `register`, every stage of the stage table registered on
    it, working with `container` when given, else with one built in each process on first
    use (`Provider`), and its metrics served once its worker starts."""
    app = new_app(settings)
    if register:
        provider = (
            Provider.of(container)
            if container is not None
            else Provider.from_settings(settings, app=app)
        )
        register_tasks(app, provider)
        if container is None:
            serve_metrics(app, settings)
            share_org(app, settings)
    return app


ORG_RECHECK_S = 5.0  # how often a prefork worker's main process looks at the org file


def share_org(app: Celery, settings: Settings) -> None:
    """The worker that runs `app` loads the org file in its main process before its pool
    starts (`SharedOrg`): every pool process, forked from it at start and each time one is
    recycled (every 1,000 tasks), then finds that version loaded (workers/org.py
    `shared_view`: a read and a digest, where it loaded the file itself, 1.4 s at 10,000
    seats; issue 27). A prefork worker's main process also looks at the file every
    `ORG_RECHECK_S` seconds, on its event loop, between the pool's forks, and loads a
    changed file once there, so a process forked after a change inherits the new version
    (a pool process that already runs loads it itself, once, as it did). A solo or threads
    pool's one process loads it as it goes."""

    class SharedOrg(bootsteps.StartStopStep):  # type: ignore[misc]
        requires = ("celery.worker.components:Timer",)

        def __init__(self, parent: Any, **kwargs: Any) -> None:
            super().__init__(parent, **kwargs)
            self.source: OrgSource | None = None
            self.recheck: Any = None

        def create(self, w: Any) -> None:  # in the blueprint's apply: before the pool forks
            if w.app is not app:
                return
            try:
                self.source = OrgSource.open(settings.org_file)
            except ConfigError as exc:  # each pool process meets it and reports it
                log.warning("the org file could not be loaded before the pool started: %s", exc)

        def start(self, w: Any) -> None:
            forked = issubclass(get_implementation(w.pool_cls), PreforkPool)
            if self.source is not None and forked:
                self.recheck = w.timer.call_repeatedly(ORG_RECHECK_S, self.source.current)

        def stop(self, w: Any) -> None:
            if self.recheck is not None:
                self.recheck.cancel()
                self.recheck = None

    app.steps["worker"].add(SharedOrg)


def serve_metrics(app: Celery, settings: Settings) -> None:
    """With SEATWIRE_METRICS_PORT set, the worker that runs `app` (`seatwire worker`, and
    `seatwire beat`'s own) serves its figures there from its start until it stops
    (workers/telemetry/serve.py): a prefork pool's children in multiprocess mode, set up
    before the pool forks them; a solo or threads pool's process as it is. Nothing else that
    builds an app (a CLI command in the same container, say) binds the port. A port that
    cannot be bound stops the worker at its start (exit code 2), naming the port."""
    port = settings.metrics_port
    if port is None:
        return
    running: list[MetricsServer] = []

    def start(sender: Any, **_: Any) -> None:
        if sender.app is not app:
            return
        forked = issubclass(get_implementation(sender.pool_cls), PreforkPool)
        try:
            running.append(serve(port, settings.metrics_host, forked=forked))
        except OSError as exc:
            # Celery logs and swallows an Exception from a signal handler: this stops it, with
            # the exit code of every refusal at start.
            print(
                f"cannot serve metrics on {settings.metrics_host}:{port} "
                f"(SEATWIRE_METRICS_PORT): {exc}",
                file=sys.stderr,
            )
            raise SystemExit(2) from exc

    def stop(sender: Any, **_: Any) -> None:
        if sender.app is app:
            while running:
                running.pop().stop()

    def exited(pid: int, **_: Any) -> None:  # sent in the pool process itself, as it exits
        process_exited(pid)

    uid = f"seatwire.metrics.{id(app)}"
    worker_init.connect(start, weak=False, dispatch_uid=uid)
    worker_shutdown.connect(stop, weak=False, dispatch_uid=uid)
    worker_process_shutdown.connect(exited, weak=False, dispatch_uid=uid)
