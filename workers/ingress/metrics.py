"""The ingress's Prometheus metrics: its own (requests by route and status, its own 429s),
this process's stage figures (workers/telemetry: embedded mode runs the stages here), the
cluster's, read from Redis and the broker at each scrape (`ClusterFigures`), and the ask
record's, read from Redis at each scrape too (`AskFigureFamilies`). The one
middleware that counts requests is a pure ASGI middleware: it wraps `send` and reads the
status off the response start, with no per-request Request object or task
(BaseHTTPMiddleware costs both, on the provider routes' hot path too)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from typing import Any

import redis
from celery import Celery
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.backoff import NoBackoff
from redis.retry import Retry
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from contracts.ops import ClusterStatus
from pipeline.ask_figures import AskFigures, Tally
from workers.container import Container
from workers.status import ask_figures, cluster_status
from workers.stores.asks import AskStore
from workers.telemetry import telemetry

log = logging.getLogger("seatwire.metrics")

# A route is counted by its (method, endpoint): a 405 on its path is not that route.
RouteLabels = Mapping[tuple[str, object], str]

# How long a scrape waits for the cluster's figures, well inside Prometheus's default
# scrape timeout (10 s): past it the scrape goes on without them.
CLUSTER_BUDGET_S = 2.0


@dataclass(frozen=True)
class IngressMetrics:
    registry: CollectorRegistry
    requests: Counter
    rate_limited: Counter
    # One Prometheus child per (route, status), looked up once (labels() is not free).
    _children: dict[tuple[str, int], Any] = field(default_factory=dict)

    @classmethod
    def create(cls, *, overflowed: Callable[[], int | None] | None = None) -> IngressMetrics:
        registry = CollectorRegistry()
        requests = Counter(
            "seatwire_ingress_requests",
            "Ingress requests by route and status",
            ["route", "status"],
            registry=registry,
        )
        rate_limited = Counter(
            "seatwire_ingress_rate_limited",
            "Requests the ingress's per-source rate limit answered 429, before any route",
            registry=registry,
        )
        if overflowed is not None:
            registry.register(InboxOverflow(overflowed))
        registry.register(Served(telemetry().registry))
        return cls(registry=registry, requests=requests, rate_limited=rate_limited)

    def count(self, route: str, status: int) -> None:
        key = (route, status)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self.requests.labels(route, str(status))
        child.inc()


class Served(Collector):
    """Another registry's metrics, served in this one (this process's stage figures)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterable[Metric]:
        return self.registry.collect()


class InboxOverflow(Collector):
    """`seatwire_inbox_overflowed_total`: the items directed to a seat whose inbox held its cap
    of unread items (workers/stores/inbox.py). The scripts that refuse them count them in
    Redis, whichever process ran them, so the figure is read there at each scrape; when Redis
    cannot answer (`read` gives None) the scrape goes on without it."""

    def __init__(self, read: Callable[[], int | None]) -> None:
        self.read = read

    def collect(self) -> Iterator[Metric]:
        value = self.read()
        if value is None:
            return
        yield CounterMetricFamily(
            "seatwire_inbox_overflowed",
            "Items directed to a seat whose inbox was full: not put in it (each is a ledger "
            "row with reason code inbox_full)",
            value=value,
        )


def cluster_families(status: ClusterStatus | None) -> list[Metric]:
    """The cluster's figures as metric families; with no status (it could not be read), only
    `seatwire_cluster_status_up` 0, so a missing figure is seen as missing, never as 0."""
    up = GaugeMetricFamily(
        "seatwire_cluster_status_up",
        "1 when this scrape read the cluster's figures from Redis and the broker, else 0",
        value=0 if status is None else 1,
    )
    if status is None:
        return [up]
    queues = GaugeMetricFamily(
        "seatwire_queue_depth", "Messages waiting on the broker, by queue", labels=["queue"]
    )
    for queue, depth in sorted(status.queues.items()):
        queues.add_metric([queue], depth)
    journal = GaugeMetricFamily(
        "seatwire_journal_entries",
        "Journal entries by state: open (not final yet), overdue (open past their deadline: "
        "the sweeper's), failed (a stage gave up)",
        labels=["state"],
    )
    journal.add_metric(["open"], status.journal_open)
    journal.add_metric(["overdue"], status.journal_overdue)
    journal.add_metric(["failed"], status.journal_failed)
    ticks = GaugeMetricFamily(
        "seatwire_last_tick_timestamp_seconds",
        "When each beat-driven tick (sweep, steward, controller) last finished, Unix seconds",
        labels=["tick"],
    )
    for tick, at_ms in sorted(status.ticks.items()):
        ticks.add_metric([tick], at_ms / 1000)
    due = GaugeMetricFamily(
        "seatwire_controller_due_seats",
        "Seats in the work controller's due index: due now (a tick decides them next), or "
        "later (a timer of theirs comes)",
        labels=["when"],
    )
    due.add_metric(["now"], status.controller_overdue)
    due.add_metric(["later"], status.controller_due - status.controller_overdue)
    memory = []
    if status.redis_used_memory_bytes is not None:
        memory.append(
            GaugeMetricFamily(
                "seatwire_redis_memory_used_bytes",
                "Bytes the stores' Redis uses (INFO memory used_memory)",
                value=status.redis_used_memory_bytes,
            )
        )
    if status.redis_maxmemory_bytes is not None:
        memory.append(
            GaugeMetricFamily(
                "seatwire_redis_memory_max_bytes",
                "The stores' Redis's maxmemory (INFO memory maxmemory; 0: no limit): at it, "
                "with noeviction, every write is refused",
                value=status.redis_maxmemory_bytes,
            )
        )
    return [
        up,
        queues,
        GaugeMetricFamily(
            "seatwire_dlq_messages", "Messages in the dead-letter queue", value=status.dlq
        ),
        journal,
        GaugeMetricFamily(
            "seatwire_parked_messages",
            "Stage messages parked until they are due (beat re-enqueues them)",
            value=status.parked,
        ),
        GaugeMetricFamily(
            "seatwire_beat_leader",
            "1 while a beat holds the leader lease, else 0",
            value=0 if status.beat_leader is None else 1,
        ),
        ticks,
        due,
        *memory,
    ]


class ClusterFigures(Collector):
    """The cluster-wide figures (workers/status.py `cluster_status`): queue depth per queue,
    the DLQ, open, overdue and failed journal entries, parked messages, the beat leader and
    each tick's last finish. Every process shares them, so they are read once, here, at each
    scrape. A read that fails or outlasts `budget_s` is logged and the scrape goes on with
    `seatwire_cluster_status_up` 0; while a slow read is still running, the next scrape waits
    for that one rather than starting another."""

    def __init__(self, read: Callable[[], ClusterStatus], *, budget_s: float) -> None:
        self.read = read
        self.budget_s = budget_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seatwire-cluster")
        self._pending: Future[ClusterStatus] | None = None

    def describe(self) -> list[Metric]:
        """The families' names without a read: the registry checks them for clashes."""
        blank = ClusterStatus(
            at_ms=0,
            queues={},
            dlq=0,
            journal_open=0,
            journal_overdue=0,
            journal_failed=0,
            parked=0,
            beat_leader=None,
            beat_token=None,
            ticks={},
            redis_used_memory_bytes=0,
            redis_maxmemory_bytes=0,
        )
        return cluster_families(blank)

    def collect(self) -> Iterator[Metric]:
        yield from cluster_families(self._status())

    def _status(self) -> ClusterStatus | None:
        pending = self._pending
        if pending is None or pending.done():
            pending = self._pending = self._pool.submit(self.read)
        try:
            return pending.result(timeout=self.budget_s)
        except FutureTimeout:
            log.warning("the cluster's figures took over %.1f s: not scraped", self.budget_s)
        except Exception as exc:
            log.warning("could not read the cluster's figures: %s: %s", type(exc).__name__, exc)
        return None


def scrape_client(container: Container) -> redis.Redis:
    """A Redis client for a scrape's reads that gives up at once (the stores' client retries
    for seconds, longer than a scrape may wait); embedded, the in-process stand-in."""
    settings = container.settings
    if settings.redis_url is None:
        return container.redis
    return redis.Redis.from_url(
        settings.redis_url,
        socket_timeout=1.0,
        socket_connect_timeout=1.0,
        retry=Retry(NoBackoff(), retries=0),
    )


def cluster_reader(
    container: Container, app: Celery, clock_ms: Callable[[], int]
) -> Callable[[], ClusterStatus]:
    """The scrape's read of the cluster's figures (the queues through `app`'s broker), on a
    Redis client of its own that gives up at once."""
    reading = replace(container, redis=scrape_client(container), app=app)

    def read() -> ClusterStatus:
        return cluster_status(reading, now_ms=clock_ms())

    return read


def ask_reader(container: Container, clock_ms: Callable[[], int]) -> Callable[[], AskFigures]:
    """The scrape's read of the ask figures (workers/status.py `ask_figures`), on a Redis
    client of its own that gives up at once."""
    client = scrape_client(container)
    store = container.asks
    asks = AskStore(
        client,
        retention_ms=store.retention_ms,
        consent_ttl_ms=store.consent_ttl_ms,
        room=store.room,
    )
    reading = replace(container, redis=client, asks=asks)

    def read() -> AskFigures:
        return ask_figures(reading, now_ms=clock_ms())

    return read


def _tally_families(
    kind: str, label: str, tallies: Mapping[str, Tally], whose: str
) -> list[Metric]:
    concluded = GaugeMetricFamily(
        f"seatwire_{kind}_asks_concluded",
        f"Concluded asks {whose} in the last 7 days (answered, declined, or expired "
        "unanswered): the ratios' denominator",
        labels=[label],
    )
    unanswered = GaugeMetricFamily(
        f"seatwire_{kind}_ask_unanswered_ratio",
        f"Of the concluded asks {whose} in the last 7 days, the share that expired unanswered",
        labels=[label],
    )
    declined = GaugeMetricFamily(
        f"seatwire_{kind}_ask_declined_ratio",
        f"Of the concluded asks {whose} in the last 7 days, the share that was declined",
        labels=[label],
    )
    for name, t in sorted(tallies.items()):
        concluded.add_metric([name], t.concluded)
        if t.unanswered_ratio is not None:
            unanswered.add_metric([name], t.unanswered_ratio)
        if t.declined_ratio is not None:
            declined.add_metric([name], t.declined_ratio)
    return [concluded, unanswered, declined]


def ask_families(found: AskFigures | None) -> list[Metric]:
    """The ask record's figures as metric families; with none (they could not be read) only
    `seatwire_ask_figures_up` 0, so a missing figure is never read as 0."""
    up = GaugeMetricFamily(
        "seatwire_ask_figures_up",
        "1 when this scrape read the ask record's figures from Redis, else 0",
        value=0 if found is None else 1,
    )
    if found is None:
        return [up]
    states = GaugeMetricFamily(
        "seatwire_asks",
        "Asks by state: every ask still waiting (pending, open, snoozed, escalated), and the "
        "asks of the last 7 days that ended (answered, closed)",
        labels=["state"],
    )
    for state, count in found.by_state.items():
        states.add_metric([state], count)
    return [
        up,
        states,
        *_tally_families("seat", "seat", found.seats, "of a seat"),
        *_tally_families("person", "person", found.persons, "put to a person"),
    ]


class AskFigureFamilies(Collector):
    """The ask record's figures (`ask_families`), read at each scrape within `budget_s`; a
    read that fails or is slow is logged and the scrape goes on without them, and a slow one
    still running is waited for rather than started again (as `ClusterFigures`)."""

    def __init__(self, read: Callable[[], AskFigures], *, budget_s: float) -> None:
        self.read = read
        self.budget_s = budget_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seatwire-asks")
        self._pending: Future[AskFigures] | None = None

    def describe(self) -> list[Metric]:
        return ask_families(AskFigures(by_state={}))

    def collect(self) -> Iterator[Metric]:
        yield from ask_families(self._figures())

    def _figures(self) -> AskFigures | None:
        pending = self._pending
        if pending is None or pending.done():
            pending = self._pending = self._pool.submit(self.read)
        try:
            return pending.result(timeout=self.budget_s)
        except FutureTimeout:
            log.warning("the ask figures took over %.1f s: not scraped", self.budget_s)
        except Exception as exc:
            log.warning("could not read the ask figures: %s: %s", type(exc).__name__, exc)
        return None


class RequestMetrics:
    """Counts each answer of a labelled route (`labels`) in `seatwire_ingress_requests`, and
    each 429 the rate limit answered before routing in `seatwire_ingress_rate_limited`."""

    def __init__(self, app: ASGIApp, *, metrics: IngressMetrics, labels: RouteLabels) -> None:
        self.app = app
        self.metrics = metrics
        self.labels = labels

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                # The router has put the matched endpoint in the scope by now, unless the
                # rate limit answered before it ran.
                endpoint = scope.get("endpoint")
                label = self.labels.get((scope["method"], endpoint))
                if label is not None:
                    self.metrics.count(label, message["status"])
                elif endpoint is None and message["status"] == 429:
                    self.metrics.rate_limited.inc()
            await send(message)

        await self.app(scope, receive, counted)
