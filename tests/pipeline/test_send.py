"""Unit tests for the send stage's decisions (pipeline/send.py; docs/architecture.md).

Pure: begin_send replies, gate verdicts and failures are literal contracts, `now_ms` is a
constant and the random draw is an argument. The tables pin every branch the send stage
(workers/stages/send.py) takes through them: its try, its give-up and the `send` task's
retries, number for number; the properties pin the rules that must hold whatever the numbers.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from contracts.guardrails import GuardrailVerdict
from contracts.send import (
    SEND_MODES,
    RetryPlan,
    RetryPolicy,
    SendFailure,
    SendMode,
    SendStart,
    SendStep,
)
from contracts.send_gate import SendGateVerdict
from pipeline.send import after_lookup, after_rereserve, give_up_step, next_step, plan_retry

NOW = 1_800_000_000_000
RESERVED_AT = NOW - 4_000
POLICY = RetryPolicy.for_send_timeout(10.0)  # the in-doubt floor: 20 s

SEND = SendGateVerdict(outcome="send")
BLOCKED = SendGateVerdict(outcome="blocked", rule="credentials_in_body", detail="Slack token")
DEFER = SendGateVerdict(
    outcome="defer", rule="quiet_hours", detail="U1 is in quiet hours", defer_until_ms=NOW + 9e6
)


def start(verb: Any, info: str = "", attempt: int | None = None) -> SendStart:
    return SendStart(verb=verb, info=info, attempt=attempt)


def step(**fields: Any) -> dict[str, Any]:
    """The fields a step is compared on: what the table names, never the prose reason."""
    return fields


def fields_of(value: SendStep | RetryPlan, names: dict[str, Any]) -> dict[str, Any]:
    return {name: getattr(value, name) for name in names}


# ------------------------------------------------------------------ next_step


@pytest.mark.parametrize(
    ("reply", "message_attempt", "rereserved", "expected"),
    [
        (start("done", "engaged", 2), 1, False, step(kind="done", final_state="engaged")),
        (start("done", "refused", 1), 1, False, step(kind="done", final_state="refused")),
        (
            start("busy", str(NOW + 90_000), 1),
            1,
            False,
            step(kind="busy", lease_until_ms=NOW + 90_000),
        ),
        (start("missing"), 1, False, step(kind="missing")),
        (start("expired", "", 1), 1, False, step(kind="rereserve")),
        (start("expired", "", 1), 1, True, step(kind="expiring")),
        (
            start("go", str(RESERVED_AT), 2),
            1,
            False,
            step(kind="deliver", attempt=2, reserved_at_ms=RESERVED_AT),
        ),
        (
            start("go", str(RESERVED_AT), None),
            3,
            False,
            step(kind="deliver", attempt=3, reserved_at_ms=RESERVED_AT),
        ),
        (
            start("go", str(RESERVED_AT), 2),
            1,
            True,
            step(kind="deliver", attempt=2, reserved_at_ms=RESERVED_AT),
        ),
        (
            start("reconcile", str(RESERVED_AT), 2),
            1,
            False,
            step(kind="reconcile", attempt=2, reserved_at_ms=RESERVED_AT),
        ),
    ],
    ids=[
        "done-engaged",
        "done-refused",
        "busy",
        "missing",
        "expired",
        "expired-again",
        "go",
        "go-old-op-without-attempt",
        "go-after-rereserve",
        "reconcile",
    ],
)
def test_next_step_follows_each_verb_of_begin_send(
    reply: SendStart, message_attempt: int, rereserved: bool, expected: dict[str, Any]
) -> None:
    """Given a begin_send reply, when the next step is chosen, then it is the one the send
    stage takes for that verb, with the op's own attempt and reservation time."""
    got = next_step(reply, message_attempt=message_attempt, rereserved=rereserved)
    assert fields_of(got, expected) == expected
    assert got.reason


@given(st.sampled_from(["go", "reconcile"]), st.integers(1, 50), st.integers(1, 50))
def test_the_ask_is_named_by_the_ops_attempt_never_the_messages(
    verb: str, op_attempt: int, message_attempt: int
) -> None:
    """Given an op with its own attempt, when a try begins, then the step carries the op's
    attempt whatever attempt the message carries."""
    got = next_step(start(verb, str(NOW), op_attempt), message_attempt=message_attempt)
    assert got.attempt == op_attempt


# ------------------------------------------------------------------ after_rereserve


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (GuardrailVerdict(allowed=True, attempt=2), step(kind="begin", refusal_code=None)),
        (
            GuardrailVerdict(allowed=False, code="rate_limited_seat", detail="10 this hour"),
            step(kind="refuse", refusal_code="rate_limited_seat"),
        ),
    ],
    ids=["allowed", "refused"],
)
def test_a_lapsed_reservation_begins_again_or_is_refused(
    verdict: GuardrailVerdict, expected: dict[str, Any]
) -> None:
    """Given the guardrails' fresh verdict on a lapsed reservation, when the step is chosen,
    then an allowed one begins the send again and a refused one is `refused` with its code."""
    assert fields_of(after_rereserve(verdict), expected) == expected


# ------------------------------------------------------------------ after_lookup


@pytest.mark.parametrize(
    ("reconciled", "found", "gate", "mode", "expected"),
    [
        (True, True, None, "on", step(kind="found", renew_lease=False)),
        (True, True, BLOCKED, "shadow", step(kind="found")),
        (True, True, DEFER, "off", step(kind="found")),
        (
            False,
            False,
            BLOCKED,
            "shadow",
            step(kind="block", rule="credentials_in_body", detail="Slack token", until_ms=None),
        ),
        (
            True,
            False,
            DEFER,
            "shadow",
            step(kind="defer", rule="quiet_hours", until_ms=NOW + 9_000_000),
        ),
        (False, False, SEND, "shadow", step(kind="shadow", renew_lease=False)),
        (True, False, SEND, "shadow", step(kind="shadow", renew_lease=False)),
        (True, False, SEND, "on", step(kind="post", renew_lease=True)),
        (False, False, SEND, "on", step(kind="post", renew_lease=False)),
        (False, False, SEND, "off", step(kind="post", renew_lease=False)),
    ],
    ids=[
        "found",
        "found-before-the-gate",
        "found-whatever-the-mode",
        "blocked-before-shadow",
        "deferred-before-shadow",
        "shadow",
        "shadow-after-a-look-up",
        "post-after-a-look-up-renews",
        "post",
        "off-posts-as-today",
    ],
)
def test_after_lookup_keeps_todays_order(
    reconciled: bool,
    found: bool,
    gate: SendGateVerdict | None,
    mode: SendMode,
    expected: dict[str, Any],
) -> None:
    """Given what the look-up found, the gate's verdict and the mode, when the step is chosen,
    then it is the send stage's order: the look-up first, then the gate, then shadow, then
    post."""
    got = after_lookup(reconciled=reconciled, found=found, gate=gate, mode=mode)
    assert fields_of(got, expected) == expected


def test_the_gate_step_carries_the_reason_the_shell_records() -> None:
    """Given a blocking gate, when the step is chosen, then its reason is `rule: detail`, the
    text the send stage writes down for a blocked ask and the deferral's release uses."""
    got = after_lookup(reconciled=False, found=False, gate=BLOCKED, mode="on")
    assert got.reason == "credentials_in_body: Slack token"


@pytest.mark.parametrize(
    ("reconciled", "found", "gate"),
    [(False, True, SEND), (False, False, None), (True, False, None)],
    ids=["found-without-a-look-up", "no-gate", "no-gate-after-a-look-up"],
)
def test_after_lookup_refuses_inputs_that_cannot_happen(
    reconciled: bool, found: bool, gate: SendGateVerdict | None
) -> None:
    """Given a find without a look-up, or no gate verdict for an ask not found, when the step
    is chosen, then it is refused rather than guessed."""
    with pytest.raises(ValueError):
        after_lookup(reconciled=reconciled, found=found, gate=gate, mode="on")


GATES = st.sampled_from([SEND, BLOCKED, DEFER])
MODES = st.sampled_from(SEND_MODES)


@given(GATES, MODES)
def test_a_found_ask_is_recorded_whatever_the_gate_and_mode(
    gate: SendGateVerdict, mode: SendMode
) -> None:
    """Given a look-up that found the ask, when the step is chosen under any gate and mode,
    then it is `found`: an ask on the wire is never blocked, deferred, shadowed or re-posted."""
    assert after_lookup(reconciled=True, found=True, gate=gate, mode=mode).kind == "found"


@given(st.booleans(), MODES)
def test_the_gate_refuses_before_shadow_mode_records(reconciled: bool, mode: SendMode) -> None:
    """Given a blocking gate, when the step is chosen under any mode, then it is `block`."""
    got = after_lookup(reconciled=reconciled, found=False, gate=BLOCKED, mode=mode)
    assert got.kind == "block"


@given(st.booleans(), st.booleans(), GATES, MODES)
def test_only_a_post_after_a_look_up_renews_the_lease(
    reconciled: bool, found: bool, gate: SendGateVerdict, mode: SendMode
) -> None:
    """Given any inputs, when the step is chosen, then the lease is renewed exactly on a post
    by a try that looked the ask up first."""
    if found and not reconciled:
        return
    got = after_lookup(reconciled=reconciled, found=found, gate=gate, mode=mode)
    assert got.renew_lease == (got.kind == "post" and reconciled)


# ------------------------------------------------------------------ give_up_step


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (start("reconcile", str(RESERVED_AT), 2), step(kind="abandon")),
        (
            start("go", str(RESERVED_AT), 2),
            step(kind="fail", fenced=True, attempt=2, reserved_at_ms=RESERVED_AT),
        ),
        (
            start("expired", "", None),
            step(kind="fail", fenced=False, attempt=1, reserved_at_ms=None),
        ),
        (start("done", "engaged", 2), step(kind="leave", final_state="engaged")),
        (
            start("busy", str(NOW + 5_000), 2),
            step(kind="leave", lease_until_ms=NOW + 5_000, final_state=None),
        ),
        (start("missing"), step(kind="leave", final_state=None, lease_until_ms=None)),
    ],
    ids=["in-doubt", "go", "expired", "done", "busy", "missing"],
)
def test_give_up_step_fails_only_an_op_that_was_never_sent(
    reply: SendStart, expected: dict[str, Any]
) -> None:
    """Given begin_send's reply to the closing try, when the give-up step is chosen, then it
    is the send stage's give-up: in doubt abandoned, held or lapsed failed, anything else
    left."""
    got = give_up_step(reply, message_attempt=1)
    assert fields_of(got, expected) == expected


# ------------------------------------------------------------------ plan_retry


def not_sent(reason: str = "connection refused") -> SendFailure:
    return SendFailure.never_sent(reason)


def rate_limited(after_s: float, reason: str = "ratelimited") -> SendFailure:
    return SendFailure.never_sent(reason, retry_after_s=after_s)


def maybe_sent(after_s: float | None = None, reason: str = "timeout") -> SendFailure:
    return SendFailure(kind="maybe_sent", reason=reason, retry_after_s=after_s)


def lease_busy(until_ms: int) -> SendFailure:
    return SendFailure(kind="lease_busy", reason="lease held", until_ms=until_ms)


def deferred(until_ms: int) -> SendFailure:
    return SendFailure(kind="deferred", reason="U1 is in quiet hours", until_ms=until_ms)


def countdown(wait_s: float, via: str) -> dict[str, Any]:
    return step(kind="countdown", wait_s=pytest.approx(wait_s), via=via, due_ms=None)


def park(due_ms: int) -> dict[str, Any]:
    return step(kind="park", due_ms=due_ms, via=None)


@pytest.mark.parametrize(
    ("failure", "tries", "u", "policy", "expected"),
    [
        # LeaseBusy: max(1, lease left + 1 s), capped, a broker retry; never parked.
        (lease_busy(NOW + 5_000), 0, 0.5, POLICY, countdown(6.0, "retry")),
        (lease_busy(0), 3, 0.5, POLICY, countdown(1.0, "retry")),
        (lease_busy(NOW + 250), 0, 0.0, POLICY, countdown(1.25, "retry")),
        (lease_busy(NOW + 3_600_000), 0, 0.0, POLICY, countdown(300.0, "retry")),
        (lease_busy(NOW + 5_000), 8, 0.0, POLICY, step(kind="dead_letter")),
        # NotSent: retry_delay(max(0, tries - 1)), a fresh publish; give up at 9.
        (not_sent(), 0, 0.0, POLICY, countdown(1.0, "publish")),
        (not_sent(), 1, 0.0, POLICY, countdown(1.0, "publish")),
        (not_sent(), 2, 0.0, POLICY, countdown(2.0, "publish")),
        (not_sent(), 4, 0.5, POLICY, countdown(12.0, "publish")),
        (not_sent(), 8, 0.0, POLICY, countdown(128.0, "publish")),
        (not_sent(), 8, 0.999, POLICY, countdown(255.872, "publish")),
        (
            not_sent(),
            9,
            0.0,
            POLICY,
            step(kind="give_up", reason="connection refused (after 9 tries)"),
        ),
        # Rate limited: exactly Retry-After plus the draw; its own budget of 60.
        (rate_limited(30), 1, 0.25, POLICY, countdown(30.25, "publish")),
        (rate_limited(30), 59, 0.0, POLICY, countdown(30.0, "publish")),
        (rate_limited(300), 1, 0.0, POLICY, countdown(300.0, "publish")),
        (rate_limited(299.5), 1, 0.75, POLICY, park(NOW + 300_250)),
        (rate_limited(900), 1, 0.0, POLICY, park(NOW + 900_000)),
        (
            rate_limited(30),
            60,
            0.0,
            POLICY,
            step(kind="give_up", reason="ratelimited (after 60 tries)"),
        ),
        # MaybeSent: retry_delay(retries), at least the floor (20 s), a broker retry.
        (maybe_sent(), 0, 0.0, POLICY, countdown(20.0, "retry")),
        (maybe_sent(), 5, 0.5, POLICY, countdown(48.0, "retry")),
        (maybe_sent(), 7, 0.999, POLICY, countdown(255.872, "retry")),
        (maybe_sent(12), 0, 0.5, POLICY, countdown(20.0, "retry")),
        (maybe_sent(40), 0, 0.5, POLICY, countdown(40.5, "retry")),
        (maybe_sent(400), 7, 0.0, POLICY, park(NOW + 400_000)),
        (maybe_sent(), 0, 0.0, RetryPolicy(in_doubt_floor_s=400), park(NOW + 400_000)),
        (maybe_sent(), 8, 0.0, POLICY, step(kind="dead_letter")),
        # Deferred: parked until the gate's time, however long and however many tries.
        (deferred(NOW + 8 * 3_600_000), 0, 0.0, POLICY, park(NOW + 8 * 3_600_000)),
        (deferred(NOW + 1_000), 99, 0.9, POLICY, park(NOW + 1_000)),
    ],
    ids=[
        "busy",
        "busy-taken-over",
        "busy-at-least-a-second",
        "busy-capped",
        "busy-out-of-retries",
        "not-sent-released-by-another",
        "not-sent-first",
        "not-sent-second",
        "not-sent-jittered",
        "not-sent-last",
        "not-sent-last-high-draw",
        "not-sent-out-of-tries",
        "rate-limited",
        "rate-limited-last",
        "rate-limited-at-the-cap",
        "rate-limited-jitter-over-the-cap",
        "rate-limited-long",
        "rate-limited-out-of-tries",
        "maybe-sent-floor",
        "maybe-sent-backoff",
        "maybe-sent-last",
        "maybe-sent-retry-after-under-the-floor",
        "maybe-sent-retry-after",
        "maybe-sent-long-retry-after",
        "maybe-sent-floor-over-the-cap",
        "maybe-sent-out-of-retries",
        "deferred",
        "deferred-whatever-the-tries",
    ],
)
def test_plan_retry_reproduces_the_send_tasks_arithmetic(
    failure: SendFailure, tries: int, u: float, policy: RetryPolicy, expected: dict[str, Any]
) -> None:
    """Given a failed try, its tries and a draw, when its retry is planned, then the plan is
    the one the workers' `send` task makes, number for number."""
    got = plan_retry(failure, tries=tries, policy=policy, u=u, now_ms=NOW)
    assert fields_of(got, expected) == expected


def test_a_parked_retry_keeps_the_failures_reason() -> None:
    """Given a long Retry-After, when its retry is planned, then the park carries the
    failure's own reason, as the parking lot records it."""
    got = plan_retry(
        rate_limited(900, "ratelimited: 900 s"), tries=1, policy=POLICY, u=0, now_ms=NOW
    )
    assert (got.kind, got.reason, got.wait_s) == ("park", "ratelimited: 900 s", 900.0)


@pytest.mark.parametrize(("u", "tries"), [(1.0, 0), (-0.1, 0), (0.5, -1)])
def test_plan_retry_refuses_a_bad_draw_or_count(u: float, tries: int) -> None:
    """Given a draw outside [0, 1) or a negative count, when a retry is planned, then it is
    refused, whatever the kind of failure."""
    with pytest.raises(ValueError):
        plan_retry(deferred(NOW), tries=tries, policy=POLICY, u=u, now_ms=NOW)


# ------------------------------------------------------------------ plan_retry, properties

U = st.floats(min_value=0, max_value=1, exclude_max=True)
TRIES = st.integers(0, 100)
AFTER = st.floats(0, 5_000, allow_nan=False)
FAILURES = st.one_of(
    st.builds(not_sent),
    st.builds(rate_limited, AFTER),
    st.builds(maybe_sent, st.none() | AFTER),
    st.builds(lease_busy, st.integers(0, NOW + 10_000_000)),
    st.builds(deferred, st.integers(NOW - 1_000, NOW + 30 * 86_400_000)),
)
POLICIES = st.fixed_dictionaries(
    {
        "rate_limited_tries": st.integers(1, 80),
        "not_sent_tries": st.integers(1, 12),
        "max_retries": st.integers(0, 10),
        "countdown_cap_s": st.floats(1, 900),
        "in_doubt_floor_s": st.floats(0, 1_200),
    }
).map(lambda fields: RetryPolicy(**fields))


@given(FAILURES, TRIES, U, POLICIES)
def test_a_countdown_never_exceeds_the_cap(
    failure: SendFailure, tries: int, u: float, policy: RetryPolicy
) -> None:
    """Given any failure, tries, draw and policy, when a countdown is planned, then it waits
    at most the cap, and never a negative time."""
    got = plan_retry(failure, tries=tries, policy=policy, u=u, now_ms=NOW)
    if got.kind == "countdown":
        assert got.wait_s is not None
        assert 0 <= got.wait_s <= policy.countdown_cap_s


@given(TRIES, U, st.floats(0, 5_000))
def test_a_retry_after_over_the_cap_is_parked_not_counted_down(
    tries: int, u: float, over_s: float
) -> None:
    """Given a rate limit whose Retry-After is over the cap, when it is planned within its
    tries, then it is parked no earlier than the provider said."""
    after_s = POLICY.countdown_cap_s + 0.001 + over_s
    got = plan_retry(rate_limited(after_s), tries=tries % 60, policy=POLICY, u=u, now_ms=NOW)
    assert got.kind == "park"
    assert got.due_ms is not None and got.due_ms >= NOW + int(after_s * 1000)


@given(st.sampled_from(["not_sent", "rate_limited", "maybe_sent"]), TRIES, U, AFTER, POLICIES)
def test_a_timed_park_is_due_past_the_cap(
    kind: str, tries: int, u: float, after_s: float, policy: RetryPolicy
) -> None:
    """Given a backed-off failure, when it is parked, then it is due more than a cap from now:
    a wait the cap allows is never parked."""
    failure = (
        not_sent()
        if kind == "not_sent"
        else rate_limited(after_s)
        if kind == "rate_limited"
        else maybe_sent(after_s)
    )
    got = plan_retry(failure, tries=tries, policy=policy, u=u, now_ms=NOW)
    if got.kind == "park":
        assert got.wait_s is not None and got.wait_s > policy.countdown_cap_s
        assert got.due_ms == NOW + int(got.wait_s * 1000)


@given(st.integers(0, 59), U, AFTER)
def test_a_rate_limit_never_gives_up_before_its_sixty_tries(
    tries: int, u: float, after_s: float
) -> None:
    """Given a rate-limited failure under 60 tries, when it is planned, then it runs again and
    never waits less than the provider's Retry-After nor more than a second past it."""
    got = plan_retry(rate_limited(after_s), tries=tries, policy=POLICY, u=u, now_ms=NOW)
    assert got.kind in ("countdown", "park")
    wait_s = got.wait_s
    assert wait_s is not None and after_s <= wait_s <= after_s + 1


@given(st.integers(60, 1_000), U, AFTER)
def test_a_rate_limit_gives_up_at_sixty_tries(tries: int, u: float, after_s: float) -> None:
    """Given a rate-limited failure at 60 tries or more, when it is planned, then it gives up
    and says after how many."""
    got = plan_retry(rate_limited(after_s, "429"), tries=tries, policy=POLICY, u=u, now_ms=NOW)
    assert (got.kind, got.reason) == ("give_up", f"429 (after {tries} tries)")


@given(TRIES, U)
def test_not_sent_gives_up_exactly_at_its_budget(tries: int, u: float) -> None:
    """Given a not-sent failure, when it is planned, then it gives up exactly from its 9th try
    on, and is backed off as a fresh publish before that."""
    got = plan_retry(not_sent(), tries=tries, policy=POLICY, u=u, now_ms=NOW)
    assert (got.kind == "give_up") == (tries >= 9)
    if tries < 9:
        assert (got.kind, got.via) == ("countdown", "publish")


@given(st.none() | AFTER, TRIES, U, POLICIES)
def test_a_maybe_sent_never_fails_it_only_dead_letters(
    after_s: float | None, tries: int, u: float, policy: RetryPolicy
) -> None:
    """Given a maybe-sent failure, when it is planned, then it never gives up as send_failed:
    out of the broker's retries it is dead-lettered, before that it runs again."""
    got = plan_retry(maybe_sent(after_s), tries=tries, policy=policy, u=u, now_ms=NOW)
    assert got.kind != "give_up"
    assert (got.kind == "dead_letter") == (tries >= policy.max_retries)


@given(st.none() | AFTER, TRIES, U, POLICIES)
def test_a_maybe_sent_waits_at_least_the_in_doubt_floor(
    after_s: float | None, tries: int, u: float, policy: RetryPolicy
) -> None:
    """Given a maybe-sent failure within its retries, when it is planned, then it waits at
    least the floor (twice the send timeout) and any Retry-After, as a broker retry."""
    got = plan_retry(maybe_sent(after_s), tries=tries, policy=policy, u=u, now_ms=NOW)
    if got.kind == "dead_letter":
        return
    assert got.wait_s is not None
    assert got.wait_s >= policy.in_doubt_floor_s
    assert got.wait_s >= (after_s or 0)
    if got.kind == "countdown":
        assert got.via == "retry"


@given(st.integers(0, NOW + 10_000_000), TRIES, U, POLICIES)
def test_a_busy_lease_is_waited_out_by_a_broker_retry_never_parked(
    until_ms: int, tries: int, u: float, policy: RetryPolicy
) -> None:
    """Given a busy lease, when it is planned within the broker's retries, then it is a
    broker retry of at least a second, until the lease ends or the cap, whichever is first."""
    got = plan_retry(lease_busy(until_ms), tries=tries, policy=policy, u=u, now_ms=NOW)
    if tries >= policy.max_retries:
        assert got.kind == "dead_letter"
        return
    assert (got.kind, got.via) == ("countdown", "retry")
    assert got.wait_s is not None
    left_s = (until_ms - NOW) / 1000
    assert got.wait_s == pytest.approx(min(max(1.0, left_s + 1), policy.countdown_cap_s))


@given(st.integers(NOW - 1_000, NOW + 400 * 86_400_000), TRIES, U)
def test_a_deferral_is_parked_until_the_gate_lets_it_go(
    until_ms: int, tries: int, u: float
) -> None:
    """Given a quiet-hours deferral, when it is planned, then it is parked until exactly the
    gate's time, however far off, and no try is counted against it."""
    got = plan_retry(deferred(until_ms), tries=tries, policy=POLICY, u=u, now_ms=NOW)
    assert (got.kind, got.due_ms, got.wait_s) == ("park", until_ms, None)


# ------------------------------------------------------------------ the contracts


def test_the_policy_defaults_are_todays_budgets() -> None:
    """Given a policy for a 10 s send timeout, then it holds the default budgets and a 20 s
    floor."""
    assert POLICY.model_dump() == {
        "rate_limited_tries": 60,
        "not_sent_tries": 9,
        "max_retries": 8,
        "countdown_cap_s": 300.0,
        "in_doubt_floor_s": 20.0,
    }
    with pytest.raises(ValidationError):
        RetryPolicy()  # the floor has no default


@pytest.mark.parametrize(
    ("failure", "kind", "counter"),
    [
        (SendFailure.never_sent("refused"), "not_sent", "notSent"),
        (SendFailure.never_sent("429", retry_after_s=3), "rate_limited", "rateLimited"),
        (deferred(NOW), "deferred", "deferred"),
        (maybe_sent(), "maybe_sent", None),
        (lease_busy(NOW), "lease_busy", None),
    ],
    ids=["not-sent", "rate-limited", "deferred", "maybe-sent", "lease-busy"],
)
def test_a_failure_names_its_kind_and_the_ops_counter(
    failure: SendFailure, kind: str, counter: str | None
) -> None:
    """Given a failure, then its kind follows the Retry-After as the send task decides, and
    it names the op counter the send stage releases it under."""
    assert (failure.kind, failure.release_counter) == (kind, counter)


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "rate_limited"},
        {"kind": "not_sent", "retry_after_s": 3},
        {"kind": "lease_busy"},
        {"kind": "deferred"},
        {"kind": "maybe_sent", "until_ms": NOW},
        {"kind": "deferred", "until_ms": NOW, "retry_after_s": 1},
    ],
)
def test_a_failure_missing_its_times_is_refused(fields: dict[str, Any]) -> None:
    """Given a failure without the time its kind needs (or with one it cannot have), when it
    is built, then it is refused."""
    with pytest.raises(ValidationError):
        SendFailure(**fields)


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "busy"},
        {"kind": "deliver", "attempt": 1},
        {"kind": "done"},
        {"kind": "missing", "attempt": 1},
        {"kind": "shadow", "renew_lease": True},
        {"kind": "leave", "fenced": True},
        {"kind": "defer", "rule": "quiet_hours"},
    ],
)
def test_a_step_without_the_fields_of_its_kind_is_refused(fields: dict[str, Any]) -> None:
    """Given a step lacking a field its kind needs, or carrying one it has no use for, when it
    is built, then it is refused."""
    with pytest.raises(ValidationError):
        SendStep(reason="x", **fields)


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "countdown", "wait_s": 1.0},
        {"kind": "countdown", "via": "retry"},
        {"kind": "park", "wait_s": 1.0},
        {"kind": "give_up", "via": "publish"},
        {"kind": "dead_letter", "wait_s": 1.0},
        {"kind": "give_up", "due_ms": NOW},
    ],
)
def test_a_plan_without_the_fields_of_its_kind_is_refused(fields: dict[str, Any]) -> None:
    """Given a plan lacking a field its kind needs, or carrying one it has no use for, when it
    is built, then it is refused."""
    with pytest.raises(ValidationError):
        RetryPlan(reason="x", **fields)


def test_a_begin_send_reply_reads_as_the_ledger_gives_it() -> None:
    """Given begin_send's reply as Ledger.begin_send reads it (verb, info, attempt or None),
    when it is validated, then it round-trips and an unknown verb is refused."""
    reply = SendStart(verb="busy", info=str(NOW), attempt=None)
    assert SendStart.model_validate(reply.to_wire()) == reply
    with pytest.raises(ValidationError):
        SendStart.model_validate({"verb": "teleport", "info": ""})
