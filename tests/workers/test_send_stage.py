"""The send stage's shell around its pure core: the words of its refusals, the error values
its retry plan reads, and how a task is handed its container."""

from __future__ import annotations

import math
from typing import Any

import pytest
import redis
from celery import Celery

from contracts import EngagementDecision, GuardrailVerdict, Limits, Target
from contracts.messages import ReservedEnvelope
from tests.fakes import FakeOutbound
from workers.errors import Deferred, LeaseBusy, MaybeSent, NotSent, PermanentError
from workers.org import OrgSource
from workers.settings import BUNDLED_ORG
from workers.stages import register_tasks
from workers.stages.send import Send
from workers.stages.send_retry import failure_of
from workers.stores.inbound import InboundStore
from workers.stores.ledger import Ledger

NOW = 1_800_000_000_000


def _reserved(tracking_id: str) -> ReservedEnvelope:
    decision = EngagementDecision(
        engage=True,
        work_id="w-1",
        dedupe_key="k-1",
        surface="dm",
        member_ids=("U1",),
        targets=(Target(member_id="U1"),),
        body="Please grant access.",
        now_ms=NOW,
    )
    return ReservedEnvelope(
        tracking_id=tracking_id,
        seat_id="scout",
        decision=decision,
        verdict=GuardrailVerdict(allowed=True, attempt=1),
    )


@pytest.mark.redis
def test_a_send_with_no_reservation_is_refused_in_its_words(redis_client: redis.Redis) -> None:
    """Given no guardrail op for an ask, when the send stage runs it, then the permanent
    error names the tracking id and why, as the journal and the DLQ will record it."""
    stage = Send(
        ledger=Ledger(redis_client, limits=Limits()),
        org=OrgSource.open(BUNDLED_ORG),
        outbound=FakeOutbound(),
        inbound=InboundStore(redis_client),
        clock_ms=lambda: NOW,
    )
    with pytest.raises(PermanentError) as refused:
        stage(_reserved("t-none"))
    assert str(refused.value) == "no reservation for t-none: the guardrail stage never ran"


@pytest.mark.parametrize(
    ("exc", "kind", "wait"),
    [
        (NotSent("refused"), "not_sent", None),
        (NotSent("429", retry_after_s=-3.0), "rate_limited", 0.0),
        (NotSent("429", retry_after_s=math.inf), "rate_limited", 3600.0),
        (MaybeSent("timeout", retry_after_s=math.nan), "maybe_sent", None),
        (MaybeSent("reset", retry_after_s=12.5), "maybe_sent", 12.5),
    ],
)
def test_a_providers_wait_is_clamped_before_it_is_planned(
    exc: NotSent | MaybeSent, kind: str, wait: float | None
) -> None:
    """Given an adapter's error with any Retry-After, when it becomes a failure value, then
    its wait is finite and within [0, an hour], never an error of its own."""
    failure = failure_of(exc)
    assert failure is not None
    assert (failure.kind, failure.retry_after_s) == (kind, wait)


def test_lease_and_quiet_hours_errors_carry_their_times() -> None:
    """A busy lease and a deferral become failures with the time they wait for."""
    busy, held = failure_of(LeaseBusy(NOW + 5)), failure_of(Deferred(NOW + 9, "quiet hours"))
    assert busy is not None and (busy.kind, busy.until_ms) == ("lease_busy", NOW + 5)
    assert held is not None and (held.kind, held.until_ms) == ("deferred", NOW + 9)


def test_a_plain_function_can_hand_the_tasks_their_container() -> None:
    """Given a plain function as the container source, when the tasks are registered, then
    each task calls it (it is not bound as a method of the task)."""
    calls: list[int] = []

    def deps() -> Any:
        calls.append(1)
        return "the container"

    app = Celery("t", set_as_current=False)
    register_tasks(app, deps)
    assert app.tasks["seatwire.send"].deps() == "the container"
    assert calls == [1]
