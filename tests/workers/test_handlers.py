"""The stage handlers on a real Redis with a fake outbound: exactly-once through crashes,
faults, redelivery and expiry, and every outcome written down."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import redis

from contracts import WorkReport
from contracts.messages import DecisionEnvelope, ReservedEnvelope, WorkEnvelope
from pipeline.asks import withdrawn
from tests.fakes import BLOCKED_REPORT, Clock, Crash, FakeOutbound, stages_on
from workers.errors import (
    Deferred,
    LeaseBusy,
    MaybeSent,
    NotSent,
    PermanentError,
    TransientError,
)
from workers.org import OrgSource
from workers.settings import BUNDLED_ORG
from workers.stages import Stages

NOW = 1_800_000_000_000
BLOCKED = dict(BLOCKED_REPORT)


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW)


@pytest.fixture
def outbound() -> FakeOutbound:
    return FakeOutbound()


@pytest.fixture
def stages(redis_client: redis.Redis, clock: Clock, outbound: FakeOutbound) -> Stages:
    return stages_on(redis_client, clock, outbound)


def _post(
    stages: Stages, report: dict[str, Any], tracking: str = "t-1", seat: str = "scout"
) -> WorkEnvelope:
    stages.journal.accept(
        tracking, kind="work", seat_id=seat, payload="{}", now_ms=NOW, fingerprint="f"
    )
    return WorkEnvelope(
        tracking_id=tracking,
        seat_id=seat,
        accepted_at_ms=NOW,
        report=WorkReport.model_validate(report),
    )


def _journal(stages: Stages, tracking: str) -> dict[str, Any]:
    """The journal entry of `tracking`, which the test knows exists."""
    entry = stages.journal.get(tracking)
    assert entry is not None, f"no journal entry for {tracking}"
    return entry


def _through_guardrails(
    stages: Stages, report: dict[str, Any], tracking: str = "t-1", now: int | None = None
) -> ReservedEnvelope:
    decided = stages.engagement(_post(stages, report, tracking))
    assert isinstance(decided, DecisionEnvelope)
    reserved = stages.guardrails(decided)
    assert isinstance(reserved, ReservedEnvelope)
    return reserved


def test_engaged_ask_flows_through_and_is_recorded(stages: Stages, outbound: FakeOutbound) -> None:
    """A blocked report with a named owner is decided, reserved, sent once and recorded."""
    reserved = _through_guardrails(stages, BLOCKED)
    assert stages.send(reserved) == "engaged"
    assert [a.member_ids for a in outbound.applied] == [("ben",)]
    [row] = stages.ledger.read()
    assert row.outcome == "engaged" and row.engaged and row.attempt == 1
    assert row.idempotency_id == f"engage-{reserved.decision.dedupe_key}-1"
    assert _journal(stages, "t-1")["state"] == "engaged"
    assert stages.journal.r.pttl("sw:j:t-1") > 0


def test_nobody_is_written_down_with_its_reason(stages: Stages, outbound: FakeOutbound) -> None:
    """A report that needs nobody ends in the ledger as a row with its reason, nothing sent."""
    env = _post(stages, {"id": "tidy", "title": "Tidy dashboards", "interestedParties": ["gus"]})
    assert stages.engagement(env) is None
    [row] = stages.ledger.read()
    assert (row.reason_code, row.outcome, row.engaged) == ("self_contained", "none", False)
    assert any("considered and not messaged" in w for w in row.why)
    assert _journal(stages, "t-1")["state"] == "nobody"
    assert outbound.applied == []
    assert stages.journal.r.pttl("sw:j:t-1") > 0  # a final entry is kept for a while, not forever


def test_redelivered_engagement_reuses_the_first_decision(stages: Stages) -> None:
    """Running the engagement stage twice for one event stores one decision and one row."""
    env = _post(stages, {"id": "tidy", "title": "Tidy dashboards"})
    stages.engagement(env)
    stages.engagement(env)
    assert len(stages.ledger.read()) == 1


def test_send_redelivered_after_success_sends_nothing(
    stages: Stages, outbound: FakeOutbound
) -> None:
    """A second delivery of a finished send is a no-op."""
    reserved = _through_guardrails(stages, BLOCKED)
    stages.send(reserved)
    assert stages.send(reserved) == "engaged"
    assert outbound.sends == 1 and len(stages.ledger.read()) == 1


def test_crash_after_apply_is_reconciled_not_resent(stages: Stages, outbound: FakeOutbound) -> None:
    """The worker dies after the ask was applied but before it was recorded: the redelivery
    waits out the lease, finds the ask by its idempotency id and records it, sending nothing."""
    # Leases run on Redis TIME. 2 s: the second delivery below lands inside it even on a
    # loaded machine; the redelivery after it is retried until Redis has expired it.
    stages.lease_ms = 2000
    reserved = _through_guardrails(stages, BLOCKED)
    outbound.script = ["apply_then_crash"]
    with pytest.raises(Crash):
        stages.send(reserved)
    with pytest.raises(LeaseBusy):
        stages.send(reserved)  # the dead worker's lease is still live
    deadline = time.monotonic() + 30
    while True:
        try:
            outcome = stages.send(reserved)
            break
        except LeaseBusy:
            assert time.monotonic() < deadline, "the dead worker's lease never ran out"
            time.sleep(0.05)
    assert outcome == "engaged"
    assert outbound.count(f"engage-{reserved.decision.dedupe_key}-1") == 1
    assert outbound.reconciles == 1


def test_transient_failure_reconciles_then_sends_once(
    stages: Stages, outbound: FakeOutbound
) -> None:
    """A transient fault leaves the op `unknown`; the retry reconciles, finds nothing, sends."""
    reserved = _through_guardrails(stages, BLOCKED)
    outbound.script = ["transient"]
    with pytest.raises(TransientError):
        stages.send(reserved)
    assert stages.ledger.op_state("t-1")["state"] == "unknown"
    assert stages.send(reserved) == "engaged"
    assert outbound.reconciles == 1 and len(outbound.applied) == 1


def test_permanent_failure_is_recorded_and_releases_the_reservation(
    stages: Stages, outbound: FakeOutbound
) -> None:
    """A permanent fault is one attempt, a send_failed row, and the person's quota back."""
    reserved = _through_guardrails(stages, BLOCKED)
    outbound.script = ["permanent"]
    assert stages.send(reserved) == "send_failed"
    [row] = stages.ledger.read()
    assert row.outcome == "send_failed" and "channel_not_found" in (row.reason or "")
    assert (
        stages.ledger.rows_for(
            dedupe_key=reserved.decision.dedupe_key or "",
            targets=list(reserved.decision.targets),
            work_id="billing-migration",
            seat_id="scout",
        )
        == []
    )
    assert outbound.sends == 1


def test_expired_reservation_is_checked_again_before_sending(
    stages: Stages, outbound: FakeOutbound
) -> None:
    """A reservation that lapsed before the send is re-checked, then sent once."""
    reserved = _through_guardrails(stages, BLOCKED)
    # The scripts read Redis TIME: make the reservation lapse by moving its expiry back.
    stages.ledger.r.hset("sw:g:op:t-1", "expiresAtMs", 1)
    assert stages.send(reserved) == "engaged"
    assert len(outbound.applied) == 1


def test_guardrail_refusal_is_a_row_not_a_send(stages: Stages, outbound: FakeOutbound) -> None:
    """Two seats asking the same person past the daily limit: the fifth ask is refused."""
    for i in range(5):
        report = {**BLOCKED, "id": f"w{i}", "title": f"Work {i}"}
        decided = stages.engagement(_post(stages, report, tracking=f"t-{i}"))
        if decided is None:
            break
        reserved = stages.guardrails(decided)
        if reserved is not None:
            stages.send(reserved)
    outcomes = [r.outcome for r in reversed(stages.ledger.read())]
    assert outcomes == ["engaged"] * 4 + ["rate_limited_target"]
    assert len(outbound.applied) == 4


def test_unknown_seat_is_permanent(stages: Stages) -> None:
    """A message for a seat the org does not know cannot be retried into success."""
    env = _post(stages, BLOCKED, seat="ghost")
    with pytest.raises(PermanentError):
        stages.engagement(env)


def test_unreadable_org_keeps_the_last_good_one_and_says_so(
    stages: Stages, tmp_path: Path, redis_client: redis.Redis
) -> None:
    """An org file that breaks after start is degraded, not an empty org."""
    org = tmp_path / "org.yaml"
    org.write_text(BUNDLED_ORG.read_text())
    stages.org = OrgSource.open(org)
    org.write_text("members: [")
    env = _post(stages, BLOCKED)
    decided = stages.engagement(env)
    assert decided is not None
    assert decided.decision.targets[0].member_id == "ben"
    assert any(d.startswith("directory_read_failed") for d in decided.decision.degraded)


def test_retry_after_a_re_reservation_reconciles_the_ask_actually_sent(
    stages: Stages, outbound: FakeOutbound
) -> None:
    """The message says attempt 3 but the lapsed reservation was re-made as attempt 2 and
    applied before a fault: the retry reconciles attempt 2 and sends nothing more."""
    from contracts import Limits

    stages.ledger.limits = Limits(reengage_after_ms=0, max_attempts_per_ask=10)
    first = _through_guardrails(stages, BLOCKED, tracking="t-a")
    assert stages.send(first) == "engaged"  # attempt 1
    # Its ask ends unanswered (the top of its ladder), so the same ask may go out again.
    assert stages.asks is not None
    [asked] = stages.asks.of_work(BLOCKED["id"])
    stages.asks.update(asked.id, lambda a: withdrawn(a, "expired for the test", now_ms=NOW))
    second = _through_guardrails(stages, {**BLOCKED, "revision": 2}, tracking="t-c")
    third = _through_guardrails(stages, {**BLOCKED, "revision": 3}, tracking="t-b")
    assert (second.verdict.attempt, third.verdict.attempt) == (2, 3)
    outbound.script = ["permanent"]
    assert stages.send(second) == "send_failed"  # releases its place under the key
    stages.ledger.r.hset("sw:g:op:t-b", "expiresAtMs", 1)  # the third's reservation lapses
    outbound.script = ["apply_then_transient"]
    with pytest.raises(TransientError):
        stages.send(third)  # re-reserved as attempt 2, applied, then the fault
    assert stages.send(third) == "engaged"  # the same (stale) message, redelivered
    key = first.decision.dedupe_key
    assert [a.idempotency_id for a in outbound.applied] == [f"engage-{key}-1", f"engage-{key}-2"]
    assert stages.ledger.op_state("t-b")["idempotencyId"] == f"engage-{key}-2"


def test_unexpected_error_after_the_intent_is_retried_through_reconciliation(
    stages: Stages, outbound: FakeOutbound
) -> None:
    """A bug-shaped error after the intent leaves the op `unknown` (never stuck in `sending`)
    and the retry reconciles, then sends once."""
    reserved = _through_guardrails(stages, BLOCKED)
    outbound.script = ["boom"]
    with pytest.raises(TransientError, match="scripted bug"):
        stages.send(reserved)
    assert stages.ledger.op_state("t-1")["state"] == "unknown"
    assert stages.send(reserved) == "engaged"
    assert outbound.reconciles == 1 and len(outbound.applied) == 1


def test_second_revision_decided_before_the_first_is_reserved_is_refused_at_guardrails(
    stages: Stages, outbound: FakeOutbound
) -> None:
    """Both revisions pass the engagement stage's read; the atomic check lets the first
    through and refuses the second as already_engaged, written down as a row."""
    first = stages.engagement(_post(stages, BLOCKED, "t-1"))
    second = stages.engagement(_post(stages, {**BLOCKED, "revision": 2}, "t-2"))
    assert first is not None and second is not None
    reserved = stages.guardrails(first)
    assert reserved is not None
    assert stages.guardrails(second) is None
    stages.send(reserved)
    rows = {r.tracking_id: r for r in stages.ledger.read()}
    assert rows["t-2"].outcome == "already_engaged" and not rows["t-2"].engaged
    assert _journal(stages, "t-2")["state"] == "refused"
    assert len(outbound.applied) == 1


def test_a_send_that_provably_never_left_is_retried_without_reconciling(
    stages: Stages, outbound: FakeOutbound
) -> None:
    """A 429 (NotSent) gives the op back to `reserved`: the next try posts at once, once."""
    reserved = _through_guardrails(stages, BLOCKED)
    outbound.script = ["not_sent"]
    with pytest.raises(NotSent) as refused:
        stages.send(reserved)
    assert refused.value.retry_after_s == 2
    op = stages.ledger.op_state("t-1")
    assert op["state"] == "reserved" and op["rateLimited"] == "1"
    assert stages.send(reserved) == "engaged"
    assert outbound.reconciles == 0 and len(outbound.applied) == 1


def test_a_send_that_may_have_left_is_reconciled_not_resent(
    stages: Stages, outbound: FakeOutbound
) -> None:
    """MaybeSent (applied, reply lost) leaves the op `unknown`; the retry finds the post."""
    reserved = _through_guardrails(stages, BLOCKED)
    outbound.script = ["maybe"]
    with pytest.raises(MaybeSent):
        stages.send(reserved)
    assert stages.ledger.op_state("t-1")["state"] == "unknown"
    assert stages.send(reserved) == "engaged"
    assert outbound.reconciles == 1 and len(outbound.applied) == 1


def test_out_of_tries_for_a_send_that_never_left_is_send_failed_with_why(
    stages: Stages, outbound: FakeOutbound
) -> None:
    reserved = _through_guardrails(stages, BLOCKED)
    outbound.script = ["not_sent"]
    with pytest.raises(NotSent):
        stages.send(reserved)
    assert stages.give_up(reserved, "slack chat.postMessage: ratelimited (after 9 tries)") == (
        "send_failed"
    )
    [row] = stages.ledger.read()
    assert row.outcome == "send_failed" and "after 9 tries" in (row.reason or "")
    assert _journal(stages, "t-1")["state"] == "send_failed"
    assert outbound.applied == []


def test_giving_up_never_overwrites_a_send_in_doubt(stages: Stages, outbound: FakeOutbound) -> None:
    reserved = _through_guardrails(stages, BLOCKED)
    outbound.script = ["maybe"]
    with pytest.raises(MaybeSent):
        stages.send(reserved)
    assert stages.give_up(reserved, "out of tries") == "unknown"
    assert stages.ledger.op_state("t-1")["state"] == "unknown"  # still to be reconciled
    assert stages.ledger.read() == []


def test_shadow_mode_records_what_would_have_been_sent_and_sends_nothing(
    stages: Stages, outbound: FakeOutbound
) -> None:
    stages.mode = "shadow"
    reserved = _through_guardrails(stages, BLOCKED)
    assert stages.send(reserved) == "shadowed"
    assert outbound.sends == 0
    [row] = stages.ledger.read()
    assert row.outcome == "shadowed" and row.idempotency_id
    assert "nothing was sent" in " ".join(row.why)
    assert _journal(stages, "t-1")["state"] == "shadowed"
    assert stages.send(reserved) == "shadowed"  # redelivered: final, nothing more


def test_off_mode_writes_down_that_nothing_was_decided(
    stages: Stages, outbound: FakeOutbound
) -> None:
    stages.mode = "off"
    assert stages.engagement(_post(stages, BLOCKED)) is None
    [row] = stages.ledger.read()
    assert row.outcome == "off" and row.reason_code == "mode_off"
    assert _journal(stages, "t-1")["state"] == "off"
    assert outbound.sends == 0


def test_the_send_gate_blocks_with_its_rule_and_sends_nothing(
    stages: Stages, outbound: FakeOutbound
) -> None:
    from contracts import SendPolicy

    stages.policy = SendPolicy(max_body_chars=20)
    reserved = _through_guardrails(stages, BLOCKED)
    assert stages.send(reserved) == "send_blocked"
    assert outbound.sends == 0
    [row] = stages.ledger.read()
    assert row.outcome == "send_blocked" and (row.reason or "").startswith("body_too_long")
    assert _journal(stages, "t-1")["state"] == "send_blocked"
    assert stages.ledger.r.zcard("sw:g:target:ben") == 0  # the place is given back


def test_quiet_hours_defer_the_ask_to_the_end_of_the_window_never_drop_it(
    stages: Stages, outbound: FakeOutbound, clock: Clock
) -> None:
    from contracts import SendPolicy

    # NOW is 08:00 UTC; ben's zone is Europe/Stockholm (09:00 there, in January).
    stages.policy = SendPolicy.model_validate({"quietHours": {"start": "07:00", "end": "10:00"}})
    reserved = _through_guardrails(stages, BLOCKED)
    with pytest.raises(Deferred) as held:
        stages.send(reserved)
    assert held.value.until_ms == NOW + 3_600_000  # 10:00 in Stockholm
    assert stages.ledger.op_state("t-1")["state"] == "reserved" and outbound.sends == 0
    clock.ms = held.value.until_ms
    assert stages.send(reserved) == "engaged"


def test_a_begin_resent_after_its_reply_was_lost_still_reconciles(stages: Stages) -> None:
    """redis-py re-sends a script whose reply was lost: the op that began in doubt must be
    answered `reconcile` again, never `go` (which would post a second time)."""
    _through_guardrails(stages, BLOCKED)
    one = stages.ledger.begin_send("t-1", tracking_id="t-1", token="U", lease_ms=30_000)
    two = stages.ledger.begin_send("t-1", tracking_id="t-1", token="U", lease_ms=30_000)
    assert (one.verb, two.verb) == ("go", "go")
    stages.ledger.abandon("t-1", "U")  # the try died in doubt
    first = stages.ledger.begin_send("t-1", tracking_id="t-1", token="T", lease_ms=30_000)
    again = stages.ledger.begin_send("t-1", tracking_id="t-1", token="T", lease_ms=30_000)
    assert (first.verb, again.verb) == ("reconcile", "reconcile")


def test_refusals_are_counted_on_the_op_by_kind(stages: Stages, outbound: FakeOutbound) -> None:
    """The send task's budgets read these counts, not the broker's shared retry count."""
    reserved = _through_guardrails(stages, BLOCKED)
    outbound.script = ["not_sent", "not_sent"]
    tries = []
    for _ in range(2):
        with pytest.raises(NotSent) as refused:
            stages.send(reserved)
        tries.append(refused.value.tries)
    assert tries == [1, 2]
    assert stages.ledger.op_state("t-1")["rateLimited"] == "2"


def test_giving_up_after_the_reservation_lapsed_still_writes_send_failed(
    stages: Stages, outbound: FakeOutbound
) -> None:
    reserved = _through_guardrails(stages, BLOCKED)
    stages.ledger.r.hset("sw:g:op:t-1", "expiresAtMs", 1)
    assert stages.give_up(reserved, "ratelimited (after 60 tries)") == "send_failed"
    assert _journal(stages, "t-1")["state"] == "send_failed"
    [row] = stages.ledger.read()
    assert row.outcome == "send_failed" and "after 60 tries" in (row.reason or "")


def test_a_try_whose_lease_was_taken_during_the_look_up_does_not_post(
    stages: Stages, outbound: FakeOutbound
) -> None:
    """A long reconciliation (threads or solo pool: no hard time limit) lost the op to another
    try: the renewal before the post fails, and nothing is posted."""
    reserved = _through_guardrails(stages, BLOCKED)
    outbound.script = ["maybe"]
    with pytest.raises(MaybeSent):
        stages.send(reserved)
    outbound.applied.clear()  # the first post never landed after all

    def taken(ask: Any, ctx: Any) -> None:
        stages.ledger.r.hset("sw:g:op:t-1", "token", "someone-else")
        return None

    outbound.reconcile = taken  # type: ignore[method-assign]
    with pytest.raises(LeaseBusy):
        stages.send(reserved)
    assert outbound.applied == []
