"""The ingress's Prometheus metrics, and the one middleware that counts requests by route and
status. A pure ASGI middleware: it wraps `send` and reads the status off the response start,
with no per-request Request object or task (BaseHTTPMiddleware costs both, on the provider
routes' hot path too)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# A route is counted by its (method, endpoint): a 405 on its path is not that route.
RouteLabels = Mapping[tuple[str, object], str]


@dataclass(frozen=True)
class IngressMetrics:
    registry: CollectorRegistry
    requests: Counter
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
        if overflowed is not None:
            registry.register(InboxOverflow(overflowed))
        return cls(registry=registry, requests=requests)

    def count(self, route: str, status: int) -> None:
        key = (route, status)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self.requests.labels(route, str(status))
        child.inc()


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


class RequestMetrics:
    """Counts each answer of a labelled route (`labels`) in `seatwire_ingress_requests`."""

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
                # The router has put the matched endpoint in the scope by now.
                label = self.labels.get((scope["method"], scope.get("endpoint")))
                if label is not None:
                    self.metrics.count(label, message["status"])
            await send(message)

        await self.app(scope, receive, counted)
