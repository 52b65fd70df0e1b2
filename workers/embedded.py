"""Seatwire in one process: the ingress, in-process Celery workers and, with no Redis
configured, an in-process Redis stand-in (fakeredis, with Lua) and kombu's in-memory broker.

For trying Seatwire and for demos. With SEATWIRE_REDIS_URL set the same process uses the real
Redis (and broker), so `seatwire up` is also a one-box deployment.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass, field

import redis
import uvicorn
from celery import Celery
from celery.worker import WorkController
from fastapi import FastAPI

from workers import bootstrap
from workers.celery_app import create_app
from workers.errors import ConfigError
from workers.ingress.app import create_ingress
from workers.queues import BEAT_STAGES, WORKER_QUEUES, Stage, Task
from workers.settings import Settings
from workers.stages.controller_tick import idle_gate

log = logging.getLogger("seatwire.embedded")


def stand_in_redis() -> redis.Redis:
    """The in-process Redis stand-in of embedded mode. fakeredis is in the `demo` dependency
    group, which a clone's `uv run` installs and the production image leaves out (it always
    runs on a real Redis): without it, a clear refusal rather than an ImportError."""
    try:
        import fakeredis
    except ImportError as exc:
        raise ConfigError(
            "embedded mode (no SEATWIRE_REDIS_URL) needs fakeredis, which is not installed "
            "here (the production image leaves it out): set SEATWIRE_REDIS_URL to a Redis, or "
            "install the demo group (`uv sync --group demo`)"
        ) from exc
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class EmbeddedSystem:
    settings: Settings
    concurrency: int = 4
    container: bootstrap.Container | None = None
    _worker: WorkController | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _server: uvicorn.Server | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)

    def start(self) -> FastAPI:
        client = None
        if self.settings.redis_url is None:
            client = stand_in_redis()
        self.container = bootstrap.build_container(self.settings, client=client)
        learned = bootstrap.learn_own_identity(self.container)  # the Slack bot's own posts
        if learned:
            log.info("%s", learned)
        app = create_app(self.settings, container=self.container)
        self.container.app = app
        # The pool threads run each task through Celery's *default* app (as `celery worker`
        # arranges in its own process): make it this one, whose tasks are registered.
        app.set_default()
        self._worker = WorkController(
            app=app,
            pool_cls="threads",
            concurrency=self.concurrency,
            queues=[q.value for q in WORKER_QUEUES],
            loglevel="WARNING",
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            hostname=f"embedded-{free_port()}@localhost",
        )
        worker_thread = threading.Thread(
            target=self._worker.start, name="celery-worker", daemon=True
        )
        worker_thread.start()
        self._threads.append(worker_thread)
        # Beat, in-process (there is no beat here): every beat row of the stage table (the
        # sweeper and the parking lot, the goal steward) ticks at its cadence, in its thread.
        for stage in BEAT_STAGES:
            name = stage.task.value.removeprefix("seatwire.")
            ticker = threading.Thread(target=self._tick, args=(app, stage), name=name, daemon=True)
            ticker.start()
            self._threads.append(ticker)
        return create_ingress(self.container, app)

    def _tick(self, app: Celery, stage: Stage) -> None:
        """Run one beat row's task every interval, here and now, as beat's worker would."""
        assert stage.cadence is not None
        every = float(getattr(self.settings, stage.cadence))
        assert self.container is not None  # started
        gate = idle_gate(self.container) if stage.task is Task.CONTROLLER else None
        while not self._stopping.wait(every):
            if gate is not None and not gate():  # no seat due: no tick, as beat's
                continue
            result = app.tasks[stage.task.value].apply()
            if result.failed():  # the next tick tries again, as beat's would
                log.error("%s tick failed: %r", stage.task.value, result.result)

    def serve_in_background(self, api: FastAPI, host: str, port: int) -> str:
        config = uvicorn.Config(
            api,
            host=host,
            port=port,
            log_level="warning",
            lifespan="off",
            timeout_keep_alive=self.settings.keep_alive_s,
        )
        self._server = uvicorn.Server(config)
        thread = threading.Thread(target=self._server.run, name="ingress", daemon=True)
        thread.start()
        self._threads.append(thread)
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError(f"the ingress did not start on {host}:{port}")
            time.sleep(0.01)
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._worker is not None:
            self._worker.stop(in_sighandler=False)
        for thread in self._threads:
            thread.join(timeout=5)
