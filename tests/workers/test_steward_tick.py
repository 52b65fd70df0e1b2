"""The goal steward as beat runs it, on a real Redis: the tick task runs every objective;
COLLABORATE work is dispatched with its exclusive claim; an operator's override lets one
refused candidate through once and is used up by its dispatch; a failing proposer is audited
while the playbook is still used; a dry run writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from contracts.goals import Sample
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.outbound.proposer import Proposer
from workers.queues import Task
from workers.settings import Settings
from workers.stages.steward_run import StewardRun

pytestmark = pytest.mark.redis

NOW = 1_800_000_000_000
ORG = """
members:
  - {id: owner}
  - {id: pal}
  - {id: seat}
seats: [{memberId: seat}]
objectives:
  - key: pairs
    state: active
    ownerId: owner
    seatId: seat
    target: 10
    direction: up
    tolerance: 1
    cadence: weekly
    collaborators: [{memberId: pal, role: contributor}]
    playbook:
      - {title: Pair on the importer, advances: [pairs], why: {reason: two hands}}
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


@pytest.fixture
def container(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[Container]:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url, api_token="t", org_file=org, outbox_path=tmp_path / "o.jsonl"
    )
    yield bootstrap.build_container(settings, client=redis_client)


@pytest.fixture
def app(container: Container) -> Celery:
    return create_app(container.settings, register=False)


def sample(container: Container, key: str, value: float) -> None:
    s = Sample.model_validate({"value": value, "source": "method", "atMs": NOW - 1_000})
    container.samples.record(key, s)


def test_the_tick_task_runs_every_objective(container: Container) -> None:
    """`seatwire.steward.tick`, on the `steward` queue, run as its worker would, plans and
    dispatches every objective."""
    sample(container, "solo", 2)
    app = create_app(container.settings, container=container)
    container.app = app
    task = app.tasks[Task.STEWARD.value]
    assert task.queue == "steward" and task.max_retries == 0
    result = task.apply()
    assert result.successful(), result.result
    # solo: two new per run; pairs has no sample yet: its "restore the measurement" item.
    assert sorted((e.objective_key, e.route) for e in container.backlog.open_items("seat")) == [
        ("pairs", "drift"),
        ("solo", "SELF"),
        ("solo", "SELF"),
    ]


def test_collaborate_work_is_dispatched_with_its_claim(container: Container, app: Celery) -> None:
    """A candidate with a named contributor is COLLABORATE: on the backlog, with the steward
    seat holding its claim; a rerun renews it and adds nothing."""
    sample(container, "pairs", 2)
    steward = StewardRun.of(container, app)
    first = steward("pairs", now_ms=NOW)
    (dispatch,) = first.plan.dispatches
    assert dispatch.route == "COLLABORATE"
    assert first.dispatched == {dispatch.id: "added, claim taken"}
    claim = container.claims.get(dispatch.id)
    assert claim is not None and claim.holder_id == "seat"
    assert claim.until_ms == NOW + container.settings.claim_lease_ms
    again = StewardRun.of(container, app)._dispatch(dispatch, NOW + 5)  # a rerun's dispatch
    assert again == "duplicate, claim renewed"
    assert [e.id for e in container.backlog.open_items("seat")] == [dispatch.id]


def test_an_override_lets_one_refused_candidate_through_once(
    container: Container, app: Celery
) -> None:
    """The third playbook item is refused by the per-run cap; overridden by a named member,
    the next run dispatches it, the audit says who and why, and the override is used up."""
    sample(container, "solo", 2)
    steward = StewardRun.of(container, app)
    first = steward("solo", now_ms=NOW)
    refused = [e for e in first.plan.audit if e.kind == "candidate" and not e.admitted]
    assert [(e.candidate_title, e.gate) for e in refused] == [
        ("Translate the onboarding page", "wip")
    ]
    view = container.org.current()[0]
    request: dict[str, Any] = {
        "objective": "solo",
        "candidate": "Translate the onboarding page",
        "by": "owner",
        "reason": "the launch needs it this week",
    }
    status, override = container.overrides.submit(view, request, now_ms=NOW + 1)
    assert status == "recorded"
    second = steward("solo", now_ms=NOW + 2)
    line = next(
        e for e in second.plan.audit if e.candidate_title == "Translate the onboarding page"
    )
    assert line.admitted and line.override is not None
    assert (line.override.by, line.override.reason) == ("owner", "the launch needs it this week")
    # Two items in flight now: the gap decision is `escalate`, which the trend gate refuses
    # and the override passes; the WIP caps (3 open, 2 new) are not reached.
    assert line.override.gates == ("trend",)
    assert line.dispatch_id in second.dispatched
    assert container.overrides.active("solo") == []
    (used,) = container.overrides.list("solo", 10)
    assert used.id == override.id and used.used_by == line.dispatch_id
    assert len(container.backlog.open_items("seat", "solo")) == 3


def test_a_failing_proposer_is_audited_and_the_playbook_still_used(
    container: Container, app: Celery
) -> None:
    """With nothing listening at the proposer's address, the run audits `proposer_failed`
    with its reason and still dispatches from the playbook."""
    sample(container, "solo", 2)
    steward = StewardRun.of(container, app)
    steward.proposer = Proposer("http://127.0.0.1:9/propose", timeout_s=0.5)
    result = steward("solo", now_ms=NOW)
    failed = [e for e in result.plan.audit if e.kind == "proposer_failed"]
    assert len(failed) == 1 and "connection refused" in failed[0].reason
    assert "playbook is still used" in (failed[0].note or "")
    assert len(result.plan.dispatches) == 2


def test_a_dry_run_writes_nothing(
    container: Container, app: Celery, redis_client: redis.Redis
) -> None:
    """`preview` plans the same as a run would, and Redis is byte for byte unchanged."""
    sample(container, "solo", 2)
    before = {k: redis_client.dump(k) for k in redis_client.keys("*")}
    preview = StewardRun.of(container, app).preview(now_ms=NOW)
    after = {k: redis_client.dump(k) for k in redis_client.keys("*")}
    assert before == after
    assert preview.plan.totals.dispatches == 3  # solo's two, pairs' drift (no sample)
    run = StewardRun.of(container, app)(now_ms=NOW)
    assert [d.id for d in run.plan.dispatches] == [d.id for d in preview.plan.dispatches]


def test_a_run_that_dies_part_way_is_finished_by_the_next(
    container: Container, app: Celery, redis_client: redis.Redis
) -> None:
    """A run that dies after its first dispatch leaves the second pending; the next run does
    it before planning (which would now refuse it: the first is in flight), and nothing is
    done twice or audited twice."""
    sample(container, "solo", 2)
    steward = StewardRun.of(container, app)
    real = steward._dispatch
    calls: list[str] = []

    def dies_after_one(d: Any, now_ms: int) -> str:
        if calls:
            raise SystemExit("killed")  # as a SIGKILL between two dispatches
        calls.append(d.id)
        return real(d, now_ms)

    steward._dispatch = dies_after_one  # type: ignore[method-assign]
    with pytest.raises(SystemExit):
        steward("solo", now_ms=NOW)
    (planned,) = [d for d in container.audit.pending("solo") if d.id not in calls]
    assert len(container.backlog.open_items("seat", "solo")) == 1

    again = StewardRun.of(container, app)("solo", now_ms=NOW + 1)
    assert again.dispatched[planned.id] == "added"
    assert container.audit.pending("solo") == []
    ids = sorted(e.id for e in container.backlog.open_items("seat", "solo"))
    assert ids == sorted([calls[0], planned.id])
    assert container.backlog.revision("seat") == 2
    lines = [(r.run_id, r.entry.model_dump_json()) for r in container.audit.read("solo", 100)]
    assert len(lines) == len(set(lines))


def test_closed_work_is_not_planned_again_on_the_same_sample(
    container: Container, app: Celery
) -> None:
    """Once the seat closes the two items a sample produced, the next run on that sample does
    not admit them again (they were carried out) and they hold no place under the per-run
    cap: the third candidate, refused by the cap before, is admitted now."""
    sample(container, "solo", 2)
    steward = StewardRun.of(container, app)
    first = steward("solo", now_ms=NOW)
    done_ids = [d.id for d in first.plan.dispatches]
    assert len(done_ids) == 2
    for item_id in done_ids:
        container.backlog.done("seat", item_id, by="seat", now_ms=NOW + 1)
    second = steward("solo", now_ms=NOW + 2)
    lines = {e.candidate_title: e for e in second.plan.audit if e.kind == "candidate"}
    assert lines["Write the first guide"].reason.startswith("not judged: already dispatched")
    assert lines["Record a walkthrough video"].dispatch_id in done_ids
    third = lines["Translate the onboarding page"]
    assert third.admitted and third.dispatch_id in second.dispatched
    assert second.dispatched == {third.dispatch_id: "added"}


def test_one_objective_failing_is_written_down_and_the_tick_goes_on(
    container: Container, app: Celery
) -> None:
    """An objective whose run raises is skipped with the error; the others still run."""
    sample(container, "solo", 2)
    steward = StewardRun.of(container, app)
    real = steward._plan

    def broken(obj: Any, now_ms: int) -> Any:
        if obj.key == "pairs":
            raise RuntimeError("the samples store is on fire")
        return real(obj, now_ms)

    steward._plan = broken  # type: ignore[method-assign]
    result = steward(now_ms=NOW)
    assert [(s.objective_key, s.reason) for s in result.skipped] == [
        ("pairs", "its run failed: RuntimeError: the samples store is on fire")
    ]
    assert [o.objective_key for o in result.plan.outcomes] == ["solo"]
    assert len(result.plan.dispatches) == 2


def test_a_long_title_is_clipped_to_fit_a_work_report() -> None:
    """A HANDOFF of a 600-character title becomes a work report whose title fits its 500."""
    from contracts.steward import Dispatch
    from workers.stages.steward_run import work_report_of

    d = Dispatch.model_validate(
        {
            "id": "stw_1",
            "kind": "engagement",
            "route": "HANDOFF",
            "objectiveKey": "k" * 600,
            "seatId": "seat",
            "targetId": "owner",
            "title": "t" * 600,
            "reason": "why",
        }
    )
    report = work_report_of(d)
    assert len(report.title) == 500 and report.title.endswith("…")
    assert report.scope is not None and len(report.scope) == 500
