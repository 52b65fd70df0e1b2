"""What a process's stages and routes work with: its settings, its Redis and the stores and
adapter built on it, and the broker's Redis when the broker is one. Data only;
`workers/bootstrap.py` is the one place that builds it, and hands it to the tasks when they
are registered and to the ingress when it is created.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis
from celery import Celery

from workers.org import OrgSource
from workers.outbound.base import Outbound
from workers.settings import Settings
from workers.stores.asks import AskStore
from workers.stores.audit import StewardAudit
from workers.stores.backlog import Backlog
from workers.stores.claims import Claims
from workers.stores.costs import Costs
from workers.stores.decisions import Decisions
from workers.stores.dlq import DeadLetters
from workers.stores.inbound import InboundStore
from workers.stores.inbox import Inbox
from workers.stores.intents import Intents
from workers.stores.issues import Issues
from workers.stores.journal import Journal
from workers.stores.ledger import Ledger
from workers.stores.messages import Messages
from workers.stores.overrides import Overrides
from workers.stores.project import ProjectStore
from workers.stores.samples import Samples
from workers.stores.seat_runs import SeatRuns
from workers.stores.work import WorkItems


@dataclass
class Container:
    settings: Settings
    # The Redis the broker's queues are in (the stores' own client when shared); None when
    # the broker is no Redis (workers/bootstrap.py `broker_client`). Declared before `redis`,
    # whose field name would hide the module here.
    broker_redis: redis.Redis | None
    redis: redis.Redis
    journal: Journal
    ledger: Ledger
    org: OrgSource
    outbound: Outbound
    inbox: Inbox
    inbound: InboundStore
    dead_letters: DeadLetters
    samples: Samples
    costs: Costs
    backlog: Backlog
    audit: StewardAudit
    overrides: Overrides
    claims: Claims
    seat_runs: SeatRuns
    project: ProjectStore
    issues: Issues
    intents: Intents
    messages: Messages
    work: WorkItems
    decisions: Decisions
    asks: AskStore
    app: Celery | None = None
