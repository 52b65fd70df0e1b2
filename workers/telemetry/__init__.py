"""This process's own figures for Prometheus, each recorded where the thing happens: a stage
task's latency and outcome, decisions by outcome and reason code, guardrail refusals by code,
send outcomes by adapter and result, provider 429s, reconciliations, accept-to-final latency
per kind of event, beat's ticks, the sweeper's work, the steward's gates and dispatches, and
the controller's turns and escalations. The cluster-wide figures (queue depths, the DLQ, the
journal, parked messages, the beat leader) are not here: the ingress reads them from Redis
at each scrape (workers/ingress/metrics.py).

One `Telemetry` per process (`telemetry()`), built on its first record, so a prefork pool
process builds its own after the fork, into the multiprocess files its parent switched on
(serve.py). Every label combination's child is looked up once and kept: a record is a dict
lookup and an increment, no registry look-up and no I/O (in multiprocess mode, a write to a
memory-mapped file). The pure pipeline never records: the shell records what it returns.

Imports prometheus_client and the standard library only, so every room of workers/ may
record. Not pure: process-wide state.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Generic, Literal, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import InfoMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

__all__ = [
    "ACCEPT_TO_FINAL_BUCKETS",
    "MAX_CHILDREN",
    "MULTIPROC_ENV",
    "OTHER",
    "TASK_BUCKETS",
    "BuildInfo",
    "Children",
    "TaskOutcome",
    "Telemetry",
    "process_collectors",
    "reset",
    "telemetry",
]

M = TypeVar("M", bound=MetricWrapperBase)

# Where a prefork worker's pool processes record (serve.py): prometheus_client's variable.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

# A stage task runs for a millisecond or so; a seat's turn for up to twenty minutes.
TASK_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    1200.0,
)
# From the ingress's 2xx to the entry's final state: tens of milliseconds when the pipeline
# keeps up; retries, a provider's Retry-After, quiet hours and backlogs stretch it to hours.
ACCEPT_TO_FINAL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
    21600.0,
)

# How a stage task's call ended: it returned (`ok`), it asked Celery for a retry (`retry`),
# or it raised anything else (`error`: a permanent error, or out of retries).
TaskOutcome = Literal["ok", "retry", "error"]


# Label values this process may make per metric before new ones are counted as `_other`.
# Some values come from what a client sends (a review's kind is free text, and becomes part
# of the reason code `review_required:<kind>`): without a bound, a client could make a
# series per request and exhaust the scraper.
MAX_CHILDREN = 500
OTHER = "_other"


class Children(Generic[M]):
    """A labelled metric's children, each looked up once (`labels()` builds its key and takes
    the metric's lock on every call), at most `cap` of them: past it, a new combination of
    values is counted under one child whose every label is `_other`."""

    __slots__ = ("_cap", "_made", "_metric")

    def __init__(self, metric: M, cap: int = MAX_CHILDREN) -> None:
        self._metric = metric
        self._cap = cap
        self._made: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._made.get(values)
        if child is None:
            if len(self._made) >= self._cap:
                values = (OTHER,) * len(values)
                child = self._made.get(values)
                if child is not None:
                    return child
            child = self._made[values] = self._metric.labels(*values)
        return child


@cache
def seatwire_version() -> str:
    """The installed package's version ('unknown' when it runs from a tree not installed)."""
    try:
        return version("seatwire")
    except PackageNotFoundError:
        return "unknown"


class BuildInfo(Collector):
    """`seatwire_build_info{version}` 1: which Seatwire a process runs (a deploy that left
    one process on the old image shows two versions)."""

    def collect(self) -> Iterator[Metric]:
        info = InfoMetricFamily("seatwire_build", "The Seatwire version this process runs")
        info.add_metric([], {"version": seatwire_version()})
        yield info


def process_collectors(registry: CollectorRegistry) -> None:
    """The process's own figures on `registry`: prometheus_client's process collector (CPU
    seconds, resident and virtual memory, open file descriptors, start time: Linux's /proc),
    its Python version (`python_info`) and `seatwire_build_info`. Every process serves them
    where it serves its metrics (a prefork worker: its parent process's own)."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    registry.register(BuildInfo())


class Telemetry:
    """Every per-process metric, on its own registry (the worker's metrics server, or the
    ingress's /metrics, serves it), with one method per thing recorded."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # Registered in this order, which is the order /metrics lists them in.
        self._pipeline_metrics(self.registry)
        self._tick_metrics(self.registry)
        self._steward_and_controller_metrics(self.registry)
        self._ask_metrics(self.registry)

    def _pipeline_metrics(self, r: CollectorRegistry) -> None:
        """The stages' calls, decisions, refusals and sends, the providers' 429s, the sends
        reconciled, and the time from accept to a final state."""
        self._task = Children(
            Histogram(
                "seatwire_stage_task_seconds",
                "Stage task calls by stage (its queue) and outcome (ok, retry, error), in seconds",
                ["stage", "outcome"],
                buckets=TASK_BUCKETS,
                registry=r,
            )
        )
        self._decisions = Children(
            Counter(
                "seatwire_decisions",
                "Decisions by stage, outcome and reason code: engagement (engage, nobody, "
                "refused, off), directedness per concerned seat (directed, not_directed), "
                "the controller per seat (run, wait, stop)",
                ["stage", "outcome", "reason_code"],
                registry=r,
            )
        )
        self._refusals = Children(
            Counter(
                "seatwire_guardrail_refusals",
                "Asks a guardrail refused, by the stage that refused (engagement's judgement, "
                "the guardrail stage's reservation, send's re-reservation) and the limit's code",
                ["stage", "code"],
                registry=r,
            )
        )
        self._sends = Children(
            Counter(
                "seatwire_send_outcomes",
                "Send tries by adapter and result: a final outcome (engaged, shadowed, "
                "send_failed, send_blocked, refused) or why the try will run again (not_sent, "
                "rate_limited, maybe_sent, deferred, busy, error)",
                ["adapter", "result"],
                registry=r,
            )
        )
        self._rate_limited = Children(
            Counter(
                "seatwire_provider_rate_limited",
                "A provider's 429 (or Slack's ratelimited) by provider and call",
                ["provider", "method"],
                registry=r,
            )
        )
        self._reconciled = Children(
            Counter(
                "seatwire_reconciliations",
                "Look-ups of a send in doubt before anything is posted again, by adapter and "
                "result (found: it had gone out; absent: provably not; failed: the look-up "
                "itself failed)",
                ["adapter", "result"],
                registry=r,
            )
        )
        self._final = Children(
            Histogram(
                "seatwire_accept_to_final_seconds",
                "From the ingress's accept to the journal entry's final state, by kind of event "
                "(work, or an inbound event's family) and final state, in seconds",
                ["kind", "state"],
                buckets=ACCEPT_TO_FINAL_BUCKETS,
                registry=r,
            )
        )

    def _tick_metrics(self, r: CollectorRegistry) -> None:
        """Beat's ticks and the sweeper's work."""
        self._ticks = Children(
            Counter(
                "seatwire_beat_ticks",
                "Beat-driven ticks (sweep, steward, controller) by result: ran, or refused "
                "(a deposed leader's)",
                ["tick", "result"],
                registry=r,
            )
        )
        self._swept = Children(
            Counter(
                "seatwire_sweep_entries",
                "What the sweeper did with overdue journal entries and parked messages, by "
                "action (requeued, dead_lettered, vanished, closed, released, waiting, running, "
                "moved, skipped, fenced)",
                ["action"],
                registry=r,
            )
        )

    def _steward_and_controller_metrics(self, r: CollectorRegistry) -> None:
        """The goal steward's gates and dispatches; the work controller's turns launched, the
        seats' turns settled and their escalations."""
        self._gates = Children(
            Counter(
                "seatwire_steward_candidates",
                "The goal steward's candidates by result (admitted, rejected) and the gate "
                "that refused one ('' when admitted, not_judged when its objective was not run)",
                ["result", "gate"],
                registry=r,
            )
        )
        self._dispatches = Children(
            Counter(
                "seatwire_steward_dispatches",
                "The goal steward's dispatches carried out, by route",
                ["route"],
                registry=r,
            )
        )
        self._launched = Children(
            Counter(
                "seatwire_turns_launched",
                "Turns the work controller put on the turns queue, by the decision's reason",
                ["reason"],
                registry=r,
            )
        )
        self._turns = Children(
            Counter(
                "seatwire_turn_outcomes",
                "Seats' turns settled, by outcome kind",
                ["kind"],
                registry=r,
            )
        )
        self._escalations = Children(
            Counter(
                "seatwire_escalations",
                "Seats escalated to a person after repeated failure, by what the escalation's "
                "work report became (new, requeued, duplicate, conflict; unroutable: nobody "
                "to ask)",
                ["result"],
                registry=r,
            )
        )

    def _ask_metrics(self, r: CollectorRegistry) -> None:
        """Asks answered, their time to an answer, their deadlines, Slack's interactivity
        requests and the nuisance brake's holds."""
        self._answers = Children(
            Counter(
                "seatwire_ask_answers",
                "Answers to asks by where they came from (slack_button, slack_thread, "
                "github_comment, github_review, api, link), what they did (answered, snoozed, "
                "late_answer, refused) and the answer or refusal's code",
                ["via", "outcome", "code"],
                registry=r,
            )
        )
        self._time_to_answer = Children(
            Histogram(
                "seatwire_ask_time_to_answer_seconds",
                "From an ask's landing to its answer, by trigger, in seconds",
                ["trigger"],
                buckets=(60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 172800),
                registry=r,
            )
        )
        self._ask_ends = Children(
            Counter(
                "seatwire_ask_timeouts",
                "Asks whose deadline came, by what it did: woke (a snooze ended), escalated "
                "(asked one rung up), expired (the top of the ladder, or nobody above)",
                ["result"],
                registry=r,
            )
        )
        self._interactions = Children(
            Counter(
                "seatwire_slack_interactions",
                "Signed Slack interactivity requests by payload type and what became of them: "
                "clicked (an ask's button, then counted in seatwire_ask_answers), unknown_member "
                "(the clicker is nobody in the org), ignored (a modal, a shortcut, another "
                "app's button: answered 200, nothing changed)",
                ["type", "result"],
                registry=r,
            )
        )
        self._held = Children(
            Counter(
                "seatwire_asks_held",
                "Seats whose asks were held by the nuisance brake (most recent asks declined "
                "or unanswered)",
                ["seat"],
                registry=r,
            )
        )

    def task_ran(self, stage: str, outcome: TaskOutcome, seconds: float) -> None:
        self._task(stage, outcome).observe(seconds)

    def decided(self, stage: str, outcome: str, reason_code: str | None, count: int = 1) -> None:
        self._decisions(stage, outcome, reason_code or "").inc(count)

    def refused(self, stage: str, code: str | None) -> None:
        self._refusals(stage, code or "").inc()

    def sent(self, adapter: str, result: str) -> None:
        self._sends(adapter, result).inc()

    def rate_limited(self, provider: str, method: str) -> None:
        self._rate_limited(provider, method).inc()

    def reconciled(self, adapter: str, result: Literal["found", "absent", "failed"]) -> None:
        self._reconciled(adapter, result).inc()

    def finished(self, kind: str, state: str, *, accepted_at_ms: int | None, now_ms: int) -> None:
        """An entry reached its final state at `now_ms`; unknown accept times are not observed
        (a message from before its envelope carried one)."""
        if accepted_at_ms:
            self._final(kind, state).observe(max(0, now_ms - accepted_at_ms) / 1000)

    def ticked(self, tick: str, result: Literal["ran", "refused"]) -> None:
        self._ticks(tick, result).inc()

    def swept(self, action: str, count: int) -> None:
        if count:
            self._swept(action).inc(count)

    def judged(self, *, admitted: bool, gate: str | None) -> None:
        self._gates("admitted" if admitted else "rejected", gate or "").inc()

    def dispatched(self, route: str) -> None:
        self._dispatches(route).inc()

    def launched(self, reason: str) -> None:
        self._launched(reason).inc()

    def turn_ended(self, kind: str) -> None:
        self._turns(kind).inc()

    def escalated(self, result: str) -> None:
        self._escalations(result).inc()

    def ask_answered(self, via: str, outcome: str, code: str) -> None:
        self._answers(via, outcome, code).inc()

    def ask_time_to_answer(self, trigger: str, ms: int) -> None:
        self._time_to_answer(trigger).observe(ms / 1000)

    def ask_timed_out(self, result: str) -> None:
        self._ask_ends(result).inc()

    def asks_held(self, seat_id: str) -> None:
        self._held(seat_id).inc()

    def slack_interaction(self, kind: str, result: str) -> None:
        self._interactions(kind, result).inc()


_lock = threading.Lock()
_current: Telemetry | None = None


def telemetry() -> Telemetry:
    """This process's `Telemetry`, built on first use, with the process's own figures
    (`process_collectors`) on its registry."""
    global _current
    current = _current
    if current is None:
        with _lock:
            if _current is None:
                _current = Telemetry()
                process_collectors(_current.registry)
            current = _current
    return current


def reset() -> None:
    """Build a fresh `Telemetry` on the next record: after the value class changed
    (multiprocess mode, serve.py), metrics built before would go on recording in memory."""
    global _current
    with _lock:
        _current = None
