"""The stages, one module each (handler and task), over the base task in `base.py`.

`register_tasks` registers the task of every row of the stage table (workers/queues.py) on
an app, each handed the process's container: each module here that names its row (`TASK`)
registers it (`register`); a row without a module, or a module without a row, is refused at
once. `Stages` is the four handlers over one set of stores, for callers that drive the
pipeline without Celery (the tests, the benchmarks).
"""

from __future__ import annotations

import importlib
import pkgutil
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from celery import Celery

from contracts import SendPolicy
from contracts.messages import DecisionEnvelope, InboundEnvelope, ReservedEnvelope, WorkEnvelope
from contracts.send import SendMode
from workers.clock import now_ms
from workers.org import OrgSource
from workers.outbound.base import Outbound
from workers.queues import STAGES, Task
from workers.stages.base import Deps, ready_pool_process
from workers.stages.directedness import Directedness
from workers.stages.engagement import Engagement
from workers.stages.guardrails import Guardrails
from workers.stages.links import AnswerLinks
from workers.stages.send import Send
from workers.stores.asks import AskStore
from workers.stores.inbound import InboundStore, Recorded
from workers.stores.journal import Journal
from workers.stores.ledger import Ledger

Register = Callable[[Celery, Deps], None]


def stage_modules() -> dict[Task, Register]:
    """Every module of this package that declares a stage (its `TASK`, a row of the stage
    table, and its `register`), found by walking the package: adding a stage is its row in
    workers/queues.py and its module here, nothing else."""
    found: dict[Task, Register] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        task = getattr(module, "TASK", None)
        if isinstance(task, Task):
            if task in found:
                raise RuntimeError(f"two modules declare the stage {task.value}")
            found[task] = module.register
    return found


def register_tasks(app: Celery, deps: Deps) -> None:
    """Every stage's task on `app`, working with the container `deps` gives. A row of the
    table without a module, or a module without a row, is refused at once."""
    modules = stage_modules()
    rows = {s.task for s in STAGES}
    if set(modules) != rows:
        missing = sorted(t.value for t in rows - set(modules))
        extra = sorted(t.value for t in set(modules) - rows)
        raise RuntimeError(f"stage table and modules disagree: no module {missing}, no row {extra}")
    ready_pool_process(deps)
    for stage in STAGES:
        modules[stage.task](app, deps)


@dataclass
class Stages:
    """The four pipeline handlers over one set of stores."""

    journal: Journal
    ledger: Ledger
    org: OrgSource
    outbound: Outbound
    inbound: InboundStore
    clock_ms: Callable[[], int] = now_ms
    lease_ms: int = 90_000
    new_token: Callable[[], str] = lambda: secrets.token_hex(8)
    mode: SendMode = "on"
    policy: SendPolicy = field(default_factory=SendPolicy)

    # The ask record the engagement and send stages keep; by default on the ledger's Redis.
    asks: AskStore | None = None
    # Signs the answer links the send stage puts on `webhook` asks (None: none offered).
    links: AnswerLinks | None = None

    def __post_init__(self) -> None:
        if self.asks is None:
            self.asks = AskStore(self.ledger.r)

    def directedness(self, env: InboundEnvelope) -> Recorded:
        return Directedness(self.org, self.inbound, self.clock_ms)(env)

    def engagement(self, env: WorkEnvelope) -> DecisionEnvelope | None:
        stage = Engagement(
            self.journal, self.ledger, self.org, self.clock_ms, self.mode, asks=self.asks
        )
        return stage(env)

    def guardrails(self, env: DecisionEnvelope) -> ReservedEnvelope | None:
        return Guardrails(self.ledger, self.clock_ms)(env)

    def send(self, env: ReservedEnvelope) -> str:
        return self._send().send(env)

    def give_up(self, env: ReservedEnvelope, reason: str) -> str:
        return self._send().give_up(env, reason)

    def _send(self) -> Send:
        return Send(
            ledger=self.ledger,
            org=self.org,
            outbound=self.outbound,
            inbound=self.inbound,
            clock_ms=self.clock_ms,
            lease_ms=self.lease_ms,
            new_token=self.new_token,
            mode=self.mode,
            policy=self.policy,
            asks=self.asks,
            links=self.links,
        )
