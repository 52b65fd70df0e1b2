"""A fleet (bench/chaos.py `Fleet`: the ingress, two workers, beat) whose workers reach Redis
through a `RespProxy` (tests/e2e/proxy.py) while the ingress and beat reach it directly: the
loss-window tests break only the network between a worker and Redis.

Also what those tests read after a run: the per-person guardrail overshoot for a given
limit, and how often a worker log says something.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.chaos import SEATWIRE, WORKER, Fleet, Proc, RedisServer, fleet_env
from workers.outbound.file import read_outbox


@dataclass
class ProxiedFleet(Fleet):
    """A `Fleet` whose worker processes get `worker_env` over the fleet's environment."""

    worker_env: dict[str, str] = field(default_factory=dict)

    def spawn(self, name: str, args: list[str]) -> Proc:
        env = {**self.env, **self.worker_env} if name.startswith("worker-") else self.env
        self.starts[name] += 1
        log = self.workdir / f"{name}-{self.starts[name]}.log"
        with log.open("wb") as fh:
            popen = subprocess.Popen(
                [SEATWIRE, *args],
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = self.procs[name] = Proc(name, args, popen, log)
        return proc

    def logged(self, text: str, prefix: str = "worker-") -> int:
        """How many times `text` appears in the logs of the processes named `prefix`..."""
        return sum(
            log.read_text(errors="replace").count(text)
            for log in self.workdir.glob(f"{prefix}*.log")
        )

    def lines(self, *parts: str, prefix: str = "worker-") -> int:
        """How many log lines of the processes named `prefix`... hold every one of `parts`."""
        return sum(
            1
            for log in self.workdir.glob(f"{prefix}*.log")
            for line in log.read_text(errors="replace").splitlines()
            if all(part in line for part in parts)
        )


@contextmanager
def proxied_fleet(
    server: RedisServer,
    workdir: Path,
    *,
    worker_env: dict[str, str],
    broker_db: int | None = None,
    **env: str,
) -> Iterator[ProxiedFleet]:
    """The ingress, two workers (with `worker_env`: the proxy's URLs) and beat on `server`.
    With `broker_db`, the broker is that database of `server` for the ingress and beat
    (the workers' `worker_env` says where theirs is), not the stores' own."""
    base = fleet_env(server, workdir, **env)
    if broker_db is not None:
        base["SEATWIRE_BROKER_URL"] = f"redis://127.0.0.1:{server.port}/{broker_db}"
    f = ProxiedFleet(redis=server, workdir=workdir, env=base, worker_env=worker_env)
    try:
        f.spawn("ingress", ["ingress", "--host", "127.0.0.1", "--port", str(f.port)])
        for i in range(2):
            f.spawn(f"worker-{i}", WORKER)
        f.spawn("beat", ["beat"])
        f.wait_ready()
        f.supervise()
        yield f
    finally:
        f.stop()


def sends_per_person(outbox: Path) -> Counter[str]:
    """How many asks the outbox holds for each person."""
    per_person: Counter[str] = Counter()
    for line in read_outbox(outbox) if outbox.exists() else []:
        members = line["memberIds"]
        if isinstance(members, list):
            per_person.update(str(m) for m in members)
    return per_person


def overshoot(outbox: Path, limit: int) -> int:
    """G for a per-person daily `limit`: the most any person was asked past it."""
    return max([0, *(n - limit for n in sends_per_person(outbox).values())])
