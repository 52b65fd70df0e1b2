"""The per-process metrics move where things happen, with the labels an operator reads: the
stage handlers' decisions, refusals, send outcomes, reconciliations and accept-to-final
times on a real Redis; a stage task's and a beat tick's latency and outcome through Celery;
a provider's 429 in the adapters; the sweeper's work, the steward's gates and dispatches, the
controller's decisions and launches."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from celery.exceptions import Retry
from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

from contracts import WorkReport
from contracts.goals import Sample
from contracts.messages import DecisionEnvelope, OutboundAsk, ReservedEnvelope, WorkEnvelope
from tests.fakes import BLOCKED_REPORT, Clock, FakeOutbound, stages_on
from workers import bootstrap
from workers.celery_app import create_app
from workers.errors import NotSent, TransientError
from workers.outbound.base import SendContext
from workers.outbound.slack import classify
from workers.outbound.webhook import WebhookOutbound
from workers.queues import Task
from workers.recovery.sweeper import SweepReport, counted
from workers.settings import Settings
from workers.stages import Stages
from workers.stages.base import timed
from workers.stages.controller_tick import ControllerTick
from workers.stages.report_intake import intake_report
from workers.telemetry import telemetry

NOW = 1_800_000_000_000
ASK = OutboundAsk(
    idempotency_id="engage-k-1",
    tracking_id="t",
    seat_id="scout",
    work_id="w",
    attempt=1,
    surface="dm",
    member_ids=("ben",),
    body="May I?",
)


def samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of this process's metrics now."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for metric in telemetry().registry.collect()
        for sample in metric.samples
    }


class Moved:
    """How far a sample moved since this was made: the metrics are process-wide, so a test
    reads differences, never absolute values."""

    def __init__(self) -> None:
        self.before = samples()

    def __call__(self, name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return samples().get(key, 0.0) - self.before.get(key, 0.0)


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW)


@pytest.fixture
def outbound() -> FakeOutbound:
    return FakeOutbound()


@pytest.fixture
def stages(redis_client: redis.Redis, clock: Clock, outbound: FakeOutbound) -> Stages:
    return stages_on(redis_client, clock, outbound)


def _post(stages: Stages, report: dict[str, Any], tracking: str) -> WorkEnvelope:
    stages.journal.accept(
        tracking, kind="work", seat_id="scout", payload="{}", now_ms=NOW, fingerprint="f"
    )
    return WorkEnvelope(
        tracking_id=tracking,
        seat_id="scout",
        accepted_at_ms=NOW,
        report=WorkReport.model_validate(report),
    )


def _reserved(stages: Stages, report: dict[str, Any], tracking: str) -> ReservedEnvelope:
    decided = stages.engagement(_post(stages, report, tracking))
    assert isinstance(decided, DecisionEnvelope)
    reserved = stages.guardrails(decided)
    assert isinstance(reserved, ReservedEnvelope)
    return reserved


@pytest.mark.redis
def test_an_engaged_ask_is_counted_at_each_stage_with_its_accept_to_final_time(
    stages: Stages, clock: Clock
) -> None:
    """Given a blocked report with a named owner, when it is decided, reserved and sent 1.5 s
    after it was accepted, then its decision counts by reason code, its send as engaged on the
    adapter, and its accept-to-final time is 1.5 s under work/engaged."""
    decided = stages.engagement(_post(stages, dict(BLOCKED_REPORT), "t-1"))
    assert decided is not None and decided.accepted_at_ms == NOW
    code = decided.decision.reason_code or ""
    moved = Moved()
    decided = stages.engagement(_post(stages, dict(BLOCKED_REPORT, id="w-2"), "t-2"))
    assert decided is not None
    reserved = stages.guardrails(decided)
    assert reserved is not None and reserved.accepted_at_ms == NOW
    clock.ms = NOW + 1500
    assert stages.send(reserved) == "engaged"
    assert stages.send(reserved) == "engaged"  # a redelivery of a finished send counts nothing
    assert (
        moved("seatwire_decisions_total", stage="engagement", outcome="engage", reason_code=code)
        == 1
    )
    assert moved("seatwire_send_outcomes_total", adapter="fake", result="engaged") == 1
    assert moved("seatwire_accept_to_final_seconds_count", kind="work", state="engaged") == 1
    # A delta of a float sum that other tests in this process fed first: equal up to rounding.
    seconds = moved("seatwire_accept_to_final_seconds_sum", kind="work", state="engaged")
    assert seconds == pytest.approx(1.5, abs=1e-9)


@pytest.mark.redis
def test_nobody_and_a_refusal_are_counted_by_their_reason_codes(stages: Stages) -> None:
    """Given a report that needs nobody and five asks of one person judged before any is
    reserved, then `nobody` counts under its reason code, and the fifth reservation counts as
    the guardrail stage's refusal by its limit's code, each ending its entry."""
    moved = Moved()
    assert stages.engagement(_post(stages, {"id": "tidy", "title": "Tidy"}, "t-n")) is None
    decided = [
        stages.engagement(_post(stages, dict(BLOCKED_REPORT, id=f"w{i}"), f"t-{i}"))
        for i in range(5)
    ]
    reserved = [stages.guardrails(d) for d in decided if d is not None]
    assert [r is None for r in reserved] == [False] * 4 + [True]
    assert (
        moved(
            "seatwire_decisions_total",
            stage="engagement",
            outcome="nobody",
            reason_code="self_contained",
        )
        == 1
    )
    assert moved("seatwire_accept_to_final_seconds_count", kind="work", state="nobody") == 1
    assert (
        moved("seatwire_guardrail_refusals_total", stage="guardrails", code="rate_limited_target")
        == 1
    )
    assert moved("seatwire_accept_to_final_seconds_count", kind="work", state="refused") == 1


@pytest.mark.redis
def test_a_send_that_will_run_again_counts_why_and_its_reconciliation(
    stages: Stages, outbound: FakeOutbound
) -> None:
    """Given a send refused with a Retry-After, then one that fails in doubt, when each is
    tried again, then the tries count as rate_limited and error, the in-doubt one's next try
    reconciles (absent: it had not gone out) before it is engaged."""
    reserved = _reserved(stages, dict(BLOCKED_REPORT), "t-1")
    moved = Moved()
    outbound.script = ["not_sent", "transient"]
    with pytest.raises(NotSent):
        stages.send(reserved)
    with pytest.raises(TransientError):
        stages.send(reserved)
    assert stages.send(reserved) == "engaged"
    assert moved("seatwire_send_outcomes_total", adapter="fake", result="rate_limited") == 1
    assert moved("seatwire_send_outcomes_total", adapter="fake", result="error") == 1
    assert moved("seatwire_send_outcomes_total", adapter="fake", result="engaged") == 1
    assert moved("seatwire_reconciliations_total", adapter="fake", result="absent") == 1


@pytest.mark.redis
def test_a_stage_task_and_a_beat_tick_are_timed_by_stage_and_outcome(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Given the registered tasks on a real Redis, when an engagement task runs a report and
    another runs one for a seat the org does not know, and beat's sweep ticks, then each is a
    task call of its stage (ok, error), and the tick counts as ran."""
    settings = Settings(
        redis_url=redis_url, api_token="t", outbox_path=tmp_path / "o.jsonl", outbox_fsync=False
    )
    container = bootstrap.build_container(settings, client=redis_client)
    app = create_app(settings, container=container)
    container.app = app
    moved = Moved()
    report = WorkReport.model_validate(BLOCKED_REPORT)
    tracking = intake_report(container.journal, app, "scout", report, now_ms=NOW).tracking_id
    entry = container.journal.get(tracking)
    assert entry is not None
    engagement = app.tasks["seatwire.engagement"]
    engagement.apply(args=[entry["payload"]])
    ghost = dict(entry["payload"], seatId="ghost", trackingId="wr-ghost")
    engagement.apply(args=[ghost])
    app.tasks["seatwire.sweep"].apply()
    assert moved("seatwire_stage_task_seconds_count", stage="engagement", outcome="ok") == 1
    assert moved("seatwire_stage_task_seconds_count", stage="engagement", outcome="error") == 1
    assert moved("seatwire_stage_task_seconds_count", stage="beat", outcome="ok") == 1
    assert moved("seatwire_beat_ticks_total", tick="sweep", result="ran") == 1


def test_a_call_that_asks_for_a_retry_is_timed_as_retry() -> None:
    """Given a task body that raises Celery's Retry, when it is timed, then the call counts
    under retry and the Retry goes on to Celery."""
    moved = Moved()

    def retrying() -> None:
        raise Retry("again")

    with pytest.raises(Retry):
        timed("send", retrying)
    assert moved("seatwire_stage_task_seconds_count", stage="send", outcome="retry") == 1


def _slack_429() -> SlackApiError:
    response = SlackResponse(
        client=None,
        http_verb="POST",
        api_url="https://slack.example/api/chat.postMessage",
        req_args={},
        data={"ok": False, "error": "ratelimited"},
        headers={"Retry-After": "3"},
        status_code=429,
    )
    return SlackApiError("ratelimited", response)  # type: ignore[no-untyped-call]


def test_a_providers_429_is_counted_by_provider_and_call() -> None:
    """Given Slack's ratelimited answer to chat.postMessage and a webhook receiver's 429, then
    each counts once under its provider and call, and both stay `NotSent` for the send."""
    moved = Moved()
    assert isinstance(classify(_slack_429(), what="chat.postMessage", posted=True), NotSent)
    client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(429)))
    hook = WebhookOutbound(
        url="https://hooks.example/ask",
        secret="whsec_" + base64.b64encode(b"k" * 32).decode(),
        timeout_s=5,
        client=client,
    )
    with pytest.raises(NotSent):
        hook.send(ASK, SendContext(now_ms=NOW, since_ms=NOW))
    assert (
        moved("seatwire_provider_rate_limited_total", provider="slack", method="chat.postMessage")
        == 1
    )
    assert moved("seatwire_provider_rate_limited_total", provider="webhook", method="post") == 1


def test_a_sweep_is_counted_by_what_it_did() -> None:
    """Given a sweep that re-enqueued two entries and released one parked message, then those
    actions move by those counts and an action it did not take does not."""
    moved = Moved()
    counted(SweepReport(requeued=["a:engagement", "b:send"], released=1))
    assert moved("seatwire_sweep_entries_total", action="requeued") == 2
    assert moved("seatwire_sweep_entries_total", action="released") == 1
    assert moved("seatwire_sweep_entries_total", action="dead_lettered") == 0


STEWARD_ORG = """
members:
  - {id: owner}
  - {id: seat}
seats: [{memberId: seat}]
objectives:
  - key: solo
    state: active
    ownerId: owner
    seatId: seat
    target: 10
    direction: up
    tolerance: 1
    cadence: weekly
    playbook:
      - {title: Write the first guide, advances: [solo], why: {reason: none exists}}
      - {title: Record a walkthrough video, advances: [solo], why: {reason: people ask}}
      - {title: Translate the onboarding page, advances: [solo], why: {reason: two markets}}
"""


@pytest.mark.redis
def test_the_stewards_gates_dispatches_and_tick_are_counted(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Given an objective off target with three playbook items and a cap of two new ones a
    run, when the steward's tick runs, then two candidates count as admitted and dispatched
    to the seat's backlog, one as rejected by the wip gate, and the tick as ran."""
    org = tmp_path / "org.yaml"
    org.write_text(STEWARD_ORG)
    settings = Settings(
        redis_url=redis_url, api_token="t", org_file=org, outbox_path=tmp_path / "o.jsonl"
    )
    container = bootstrap.build_container(settings, client=redis_client)
    sample = Sample.model_validate({"value": 2, "source": "method", "atMs": NOW - 1_000})
    container.samples.record("solo", sample)
    app = create_app(settings, container=container)
    container.app = app
    moved = Moved()
    assert app.tasks[Task.STEWARD.value].apply().successful()
    assert moved("seatwire_steward_candidates_total", result="admitted", gate="") == 2
    assert moved("seatwire_steward_candidates_total", result="rejected", gate="wip") == 1
    assert moved("seatwire_steward_dispatches_total", route="SELF") == 2
    assert moved("seatwire_beat_ticks_total", tick="steward", result="ran") == 1


@pytest.mark.redis
def test_the_controllers_decisions_and_launches_are_counted(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Given the bundled org's seats, when the work controller ticks once, then each seat's
    decision counts under its action and reason, and each turn it began under its reason."""
    settings = Settings(redis_url=redis_url, api_token="t", outbox_path=tmp_path / "o.jsonl")
    container = bootstrap.build_container(settings, client=redis_client)
    app = create_app(settings, register=False)
    container.app = app
    seats = container.org.current()[0].org.seats
    moved = Moved()
    report = ControllerTick(container, app, rng=lambda: 0.5)(now_ms=NOW)
    assert report.seats == len(seats) and sum(report.decisions.values()) == len(seats)
    for decided, count in report.decisions.items():
        action, _, reason = decided.partition(":")
        said = {"stage": "controller", "outcome": action, "reason_code": reason}
        assert moved("seatwire_decisions_total", **said) == count
    assert moved("seatwire_turns_launched_total", reason="first") == len(report.published) > 0


def test_label_values_a_client_controls_cannot_grow_the_series_without_bound() -> None:
    """A review's kind is free text and becomes part of a reason code: past the cap, new
    values are counted under `_other` instead of making a series each."""
    from prometheus_client import CollectorRegistry, Counter

    from workers.telemetry import OTHER, Children

    counter = Counter("t_decisions", "t", ["stage", "reason_code"], registry=CollectorRegistry())
    children = Children(counter, cap=3)
    for i in range(10):
        children("engagement", f"review_required:kind-{i}").inc()
    samples = {
        (s.labels["stage"], s.labels["reason_code"]): s.value
        for m in counter.collect()
        for s in m.samples
        if s.name.endswith("_total")
    }
    assert len(samples) == 4
    assert samples[(OTHER, OTHER)] == 7
    assert samples[("engagement", "review_required:kind-0")] == 1
    children("engagement", "review_required:kind-1").inc()  # a kept one still counts as itself
    assert children("engagement", "review_required:kind-1")._value.get() == 2
