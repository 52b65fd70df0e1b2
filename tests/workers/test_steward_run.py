"""One steward run on a real Redis and the sample org: its backlog dispatch lands once, its
audit is written once, a proposed objective is audited as not run, a held lease skips its
objective, an escalation is one journalled work report with one engagement message that
the engagement stage turns into an ask of the named owner, and an objective has one open
"restore the measurement" item whatever made it drift, a run that died part-way included."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery

from contracts.goals import Sample
from contracts.messages import WorkEnvelope
from tests.fakes import queued
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.queues import Queue, Task, task_id, tracking_id_for
from workers.settings import Settings
from workers.stages.engagement import Engagement
from workers.stages.steward_run import StewardRun
from workers.stores.audit import StewardAudit
from workers.stores.keys import steward_lease

pytestmark = pytest.mark.redis

NOW = 1_800_000_000_000
DAY = 86_400_000
KEY = "review-turnaround"  # active, stewarded by seat scout, owner gus, target 24 h (down)
SEAT = "scout"


@pytest.fixture
def container(redis_client: redis.Redis, redis_url: str, tmp_path: Any) -> Iterator[Container]:
    settings = Settings(redis_url=redis_url, api_token="t", outbox_path=tmp_path / "o.jsonl")
    yield bootstrap.build_container(settings, client=redis_client)


@pytest.fixture
def app(container: Container) -> Celery:
    return create_app(container.settings, register=False)


@pytest.fixture
def steward(container: Container, app: Celery) -> StewardRun:
    return StewardRun.of(container, app)


def post(container: Container, value: float, at_ms: int) -> None:
    sample = Sample.model_validate({"value": value, "source": "method", "atMs": at_ms})
    container.samples.record(KEY, sample)


def audit_of(audit: StewardAudit, key: str) -> list[str]:
    return [r.entry.kind for r in audit.read(key, 100)]


def test_a_run_dispatches_to_the_backlog_once_and_audits_each_decision_once(
    container: Container, steward: StewardRun
) -> None:
    """Given one off-target sample, a run puts the playbook item on scout's backlog; the next
    run, with that item in flight, adds nothing and audits its own (different) decision; a
    third run deciding the same as the second writes nothing again."""
    post(container, 40, NOW - 1_000)
    first = steward(KEY, now_ms=NOW)
    (dispatch,) = first.plan.dispatches
    assert dispatch.kind == "backlog"
    # The sample org names ben as a reviewer, so the playbook item is NEEDS_REVIEW, not SELF.
    assert dispatch.route == "NEEDS_REVIEW"
    assert first.dispatched == {dispatch.id: "added"}
    assert [e.id for e in container.backlog.open_items(SEAT)] == [dispatch.id]
    assert container.backlog.revision(SEAT) == 1
    assert first.audited == 2
    assert audit_of(container.audit, KEY) == ["candidate", "gap_decision"]

    again = steward(KEY, now_ms=NOW + 60_000)
    assert again.plan.dispatches == ()  # one item in flight, trend unknown: log
    assert again.audited == 2
    assert [e.id for e in container.backlog.open_items(SEAT)] == [dispatch.id]
    assert container.backlog.revision(SEAT) == 1

    third = steward(KEY, now_ms=NOW + 120_000)
    assert third.plan.dispatches == () and third.audited == 0
    assert len(audit_of(container.audit, KEY)) == 4


def test_a_proposed_objective_is_audited_as_not_run(
    container: Container, steward: StewardRun
) -> None:
    """The proposed objective of the sample org is not run, and the audit says so."""
    result = steward(now_ms=NOW)
    outcomes = {o.objective_key: o.status for o in result.plan.outcomes}
    assert outcomes["invoices-paid-on-time"] == "not_run"
    assert audit_of(container.audit, "invoices-paid-on-time") == ["not_run"]


def test_a_held_lease_skips_the_objective(
    container: Container, steward: StewardRun, redis_client: redis.Redis
) -> None:
    """An objective whose lease another run holds is skipped, said so, and left untouched."""
    post(container, 40, NOW - 1_000)
    redis_client.set(steward_lease(KEY), "someone-else", px=60_000)
    result = steward(KEY, now_ms=NOW)
    assert [(s.objective_key, s.reason) for s in result.skipped] == [
        (KEY, "another steward run holds its lease")
    ]
    assert result.plan.outcomes == ()
    assert container.backlog.open_items(SEAT) == []
    assert redis_client.get(steward_lease(KEY)) == b"someone-else"


def test_a_run_releases_its_own_lease(
    container: Container, steward: StewardRun, redis_client: redis.Redis
) -> None:
    """After a run, the objective's lease is free for the next run."""
    steward(KEY, now_ms=NOW)
    assert redis_client.get(steward_lease(KEY)) is None


def test_an_escalation_is_one_work_report_and_one_engagement_message(
    container: Container, steward: StewardRun, redis_client: redis.Redis
) -> None:
    """With its item in flight and a flat trend, the run escalates: one work report is
    journalled and one engagement message enqueued; a rerun adds neither."""
    post(container, 40, NOW - 15 * DAY)  # two weekly periods back: a flat trend
    post(container, 40, NOW - 1_000)
    steward(KEY, now_ms=NOW)  # create: the backlog item is now in flight
    result = steward(KEY, now_ms=NOW + 1_000)
    (dispatch,) = result.plan.dispatches
    assert (dispatch.route, dispatch.target_id) == ("escalate", "gus")
    assert result.dispatched == {dispatch.id: "new"}
    tracking = tracking_id_for(SEAT, dispatch.id, 1)
    entry = container.journal.get(tracking)
    assert entry is not None and entry["state"] == "accepted"
    messages = queued(redis_client, Queue.ENGAGEMENT)
    assert [(m["task"], m["id"]) for m in messages] == [
        (Task.ENGAGEMENT.value, task_id(tracking, Queue.ENGAGEMENT))
    ]

    # The next run on the same sample knows the escalation was carried out: it is not
    # planned again (the journal would refuse it as a duplicate anyway).
    rerun = steward(KEY, now_ms=NOW + 2_000)
    assert rerun.dispatched == {} and rerun.plan.dispatches == ()
    (gap_line,) = [e for e in rerun.plan.audit if e.kind == "gap_decision"]
    assert gap_line.action == "escalate" and gap_line.dispatch_id == dispatch.id
    assert gap_line.note == f"already dispatched under {dispatch.id} on this sample"
    assert len(queued(redis_client, Queue.ENGAGEMENT)) == 1


def test_the_engagement_stage_asks_the_named_owner(
    container: Container, steward: StewardRun, redis_client: redis.Redis
) -> None:
    """The escalation's work report, run through the engagement stage, engages gus."""
    post(container, 40, NOW - 15 * DAY)  # two weekly periods back: a flat trend
    post(container, 40, NOW - 1_000)
    steward(KEY, now_ms=NOW)
    steward(KEY, now_ms=NOW + 1_000)
    (message,) = queued(redis_client, Queue.ENGAGEMENT)
    env = WorkEnvelope.model_validate(message["arg"])
    assert env.report.blocker is not None and env.report.blocker.kind == "decision"
    decision = Engagement.of(container)(env)
    assert decision is not None and decision.decision.engage
    assert [t.member_id for t in decision.decision.targets] == ["gus"]
    assert decision.decision.targets[0].rung == "explicit"


def open_drift(container: Container) -> list[str]:
    return [e.id for e in container.backlog.open_items(SEAT) if e.route == "drift"]


def test_an_objective_drifting_for_another_reason_keeps_its_one_restore_item(
    container: Container, steward: StewardRun
) -> None:
    """A restore item opened for "no measurement" is the only one after the objective later
    drifts for "sensor is stale", and the run's audit names the item already open."""
    first = steward(KEY, now_ms=NOW)
    (restore,) = first.plan.dispatches
    assert restore.route == "drift" and open_drift(container) == [restore.id]
    post(container, 40, NOW - 21 * DAY)  # three weekly periods old: a stale sensor
    later = steward(KEY, now_ms=NOW + 60_000)
    assert later.plan.dispatches == () and later.dispatched == {}
    (gap_line,) = [e for e in later.plan.audit if e.kind == "gap_decision"]
    assert gap_line.action == "drift" and gap_line.reason.startswith("sensor is stale")
    assert gap_line.note == f"restore item {restore.id} is already open"
    assert open_drift(container) == [restore.id]


class Crash(BaseException):
    """A run killed at a crash point: nothing after it in that run happens."""


def test_a_run_that_died_before_its_drift_dispatch_leaves_one_restore_item(
    container: Container, steward: StewardRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that planned the "no measurement" item and died before adding it: the rerun,
    now on a stale sample, adds that planned item and no second one, and so does the next."""
    from workers.stages import steward_run

    def crash(stage: str, point: str, tracking: str) -> None:
        if point == "after_audit":
            raise Crash(tracking)

    monkeypatch.setattr(steward_run, "crash_point", crash)
    with pytest.raises(Crash):
        steward(KEY, now_ms=NOW)
    (planned,) = container.audit.pending(KEY)
    assert planned.route == "drift" and open_drift(container) == []
    monkeypatch.undo()
    post(container, 40, NOW - 21 * DAY)
    rerun = steward(KEY, now_ms=NOW + 60_000)
    assert rerun.dispatched == {planned.id: "added"} and rerun.plan.dispatches == ()
    assert open_drift(container) == [planned.id]
    assert steward(KEY, now_ms=NOW + 120_000).plan.dispatches == ()
    assert open_drift(container) == [planned.id] and container.audit.pending(KEY) == []
