"""The work controller (issue 12 point 1; docs/architecture.md). Pure.

One test per reason a decision can give, the rules around them (quiet interval and its
jitter, the retry backoff, the failure limit, `retryable=False`, the announcement jitter, the
unacknowledged-inbox rule), and a stateful property over random sequences of calls.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from contracts.controller import ControllerDecision, ControllerState
from pipeline.controller import WorkController

T0 = 1_760_000_000_000
_ids = itertools.count()


def news(
    *,
    started: bool = True,
    paused: bool = False,
    pending: int = 0,
    acknowledged: int = 0,
    runnable: bool = False,
    revision: int = 0,
    project_only: bool = False,
    oid: str | None = None,
    **project: Any,
) -> dict[str, Any]:
    """A fresh observation (a new id unless one is given)."""
    return {
        "observationId": oid or f"obs-{next(_ids)}",
        "project": {"started": started, "paused": paused, **project},
        "work": {"runnable": runnable, "revision": revision},
        "pending": pending,
        "acknowledged": acknowledged,
        "project_only": project_only,
    }


def half() -> float:
    return 0.5


def decided(c: WorkController, n: object, **kw: Any) -> tuple[str, str]:
    kw.setdefault("now_ms", T0)
    kw.setdefault("rng", half)
    d = c.decide(n, **kw)
    return d.action, d.reason


def after_first(**options: Any) -> WorkController:
    """A controller whose first turn ran and ended ok with nothing pending."""
    c = WorkController(now_ms=T0, **options)
    n = news()
    c.begin_turn(n)
    c.record_outcome("ok", news=n, now_ms=T0, rng=half)
    return c


# ------------------------------------------------------------------ run reasons


def test_first_decision_runs_first() -> None:
    """A new controller runs at once, with reason `first`."""
    assert decided(WorkController(), news()) == ("run", "first")


def test_steering_runs_even_on_the_fresh_observation() -> None:
    """An operator's steering runs a turn even on the news the last turn ended with."""
    c = WorkController()
    n = news()
    c.begin_turn(n)
    c.record_outcome("ok", news=n, now_ms=T0)
    assert decided(c, n) == ("wait", "fresh_observation")
    assert decided(c, n, steering=True) == ("run", "steering")


def test_retry_after_failure_once_backoff_elapsed() -> None:
    """A failed turn is retried with reason `retry` once its backoff has passed."""
    c = after_first()
    c.begin_turn(news())
    c.record_outcome("failed", now_ms=T0, rng=half)
    retry_at = c.status()["retryAt"]
    assert retry_at == T0 + 10_000 * 1 * (0.8 + 0.5 * 0.4)
    d = c.decide(news(), now_ms=T0 + 1, rng=half)
    assert (d.action, d.reason, d.retry_at_ms) == ("wait", "retry_backoff", retry_at)
    assert decided(c, news(), now_ms=retry_at) == ("run", "retry")


def test_continuation_requested_by_the_turn() -> None:
    """A turn that ends asking to continue runs again with reason `continuation`."""
    c = after_first()
    c.begin_turn(news())
    c.record_outcome("ok", continuation=True, now_ms=T0)
    assert decided(c, news()) == ("run", "continuation")


def test_send_deferred_continues() -> None:
    """A `send_deferred` outcome counts as a continuation: the seat runs again next."""
    c = after_first()
    c.begin_turn(news())
    c.record_outcome("send_deferred", now_ms=T0)
    assert decided(c, news()) == ("run", "continuation")


def test_durable_work_newer_than_handled_revision() -> None:
    """Runnable work at a revision newer than the last handled runs as `durable`, once."""
    c = after_first()
    n = news(runnable=True, revision=4)
    assert decided(c, n) == ("run", "durable")
    c.begin_turn(n)
    c.record_outcome("ok", now_ms=T0)
    assert c.status()["handledRevision"] == 4
    assert decided(c, news(runnable=True, revision=4)) == ("wait", "idle")
    assert decided(c, news(runnable=False, revision=9)) == ("wait", "idle")
    assert decided(c, news(runnable=True, revision=5)) == ("run", "durable")


def test_durable_needs_a_safe_integer_revision() -> None:
    """A fractional, negative, string or huge revision is no durable work."""
    c = after_first()
    for revision in (1.5, -1, "7", 2**53, True):
        n = news(runnable=True)
        n["work"]["revision"] = revision
        assert decided(c, n) == ("wait", "idle"), revision
    n = news(runnable=True)
    n["work"]["revision"] = 3.0  # Number.isSafeInteger(3.0) is true
    assert decided(c, n) == ("run", "durable")


def test_notices_run() -> None:
    """Notices since the last turn run a turn."""
    assert decided(after_first(), news(), notices=2) == ("run", "notices")


def test_inbox_with_items_runs() -> None:
    """Items in the inbox run a turn with reason `inbox`."""
    assert decided(after_first(), news(pending=3)) == ("run", "inbox")


def test_project_change_runs() -> None:
    """A changed project card (any key of it) runs a turn."""
    c = after_first()
    assert decided(c, news()) == ("wait", "idle")
    assert decided(c, news(mission="ship it")) == ("run", "project_change")


def test_fingerprint_is_canonical_json_of_project() -> None:
    """Key order does not change the fingerprint."""
    c = WorkController()
    a = news(mission="m", name="n")
    c.begin_turn(a)
    c.record_outcome("ok", now_ms=T0)
    reordered = news()
    reordered["project"] = {"name": "n", "mission": "m", "paused": False, "started": True}
    assert decided(c, reordered) == ("wait", "idle")


def test_quiet_interval_elapsed_runs() -> None:
    """With a quiet interval, an idle seat runs again once it (and its jitter) have passed."""
    c = after_first(quiet_interval_ms=60_000)
    quiet_at = c.status()["quietAt"]
    assert quiet_at == T0 + 60_000 + 0.5 * 6_000  # jitter defaults to a tenth
    assert decided(c, news(), now_ms=quiet_at - 1) == ("wait", "idle")
    assert decided(c, news(), now_ms=quiet_at) == ("run", "quiet")


def test_quiet_at_creation_and_never() -> None:
    """quietAt starts at creation + interval; without an interval it is never (None)."""
    assert WorkController(quiet_interval_ms=5, now_ms=T0).status()["quietAt"] == T0 + 5
    assert WorkController().status()["quietAt"] is None
    with pytest.raises(ValueError, match="now_ms"):
        WorkController(quiet_interval_ms=5)


# ------------------------------------------------------------------ waits and stops


def test_deadline_stops() -> None:
    """At or past the deadline the controller stops, before anything else."""
    c = WorkController(deadline_ms=T0)
    assert decided(c, news(), now_ms=T0 - 1) == ("run", "first")
    assert decided(c, news(), now_ms=T0) == ("stop", "deadline")


def test_failure_limit_stops_until_continuation_requested() -> None:
    """Three failures block; only request_continuation clears it."""
    c = WorkController()
    for _ in range(3):
        c.begin_turn(news())
        c.record_outcome("failed", now_ms=T0, rng=half)
    assert c.status()["blocked"] is True
    assert c.status()["retryAt"] is None
    assert decided(c, news(), steering=True, notices=5) == ("stop", "failure_limit")
    c.request_continuation()
    assert c.status()["failures"] == 0
    assert decided(c, news()) == ("run", "continuation")


def test_not_retryable_blocks_at_once() -> None:
    """A failure marked not retryable blocks on the first one."""
    c = WorkController()
    c.begin_turn(news())
    c.record_outcome("failed", retryable=False, now_ms=T0, rng=half)
    assert decided(c, news()) == ("stop", "failure_limit")


@pytest.mark.parametrize(
    "project",
    [None, {}, {"started": 1, "paused": False}, {"started": True, "paused": "false"}],
)
def test_unreadable_project_is_unknown_contact(project: Any) -> None:
    """Without boolean started/paused the controller waits as `unknown_contact`."""
    n = news()
    n["project"] = project
    assert decided(WorkController(), n) == ("wait", "unknown_contact")
    assert decided(WorkController(), None) == ("wait", "unknown_contact")


def test_paused_always_carries_interrupt() -> None:
    """Paused (project not started, paused, or the seat paused) waits, interrupting a turn."""
    c = WorkController()
    d = c.decide(news(started=False), now_ms=T0)
    assert (d.action, d.reason, d.interrupt) == ("wait", "paused", False)
    c.begin_turn(news())
    cases: list[tuple[dict[str, Any], dict[str, Any]]] = [
        (news(paused=True), {}),
        (news(), {"paused": True}),
    ]
    for n, kw in cases:
        d = c.decide(n, now_ms=T0, **kw)
        assert (d.reason, d.interrupt) == ("paused", True)
        assert d.to_wire() == {"action": "wait", "reason": "paused", "interrupt": True}


def test_active_turn_waits() -> None:
    """While a turn runs, no other starts."""
    c = WorkController()
    c.begin_turn(news())
    assert decided(c, news(pending=9), steering=True) == ("wait", "active")


def test_pending_delivery_waits() -> None:
    """The seat's asks still being delivered hold the next turn."""
    assert decided(WorkController(), news(), pending_deliveries=1) == ("wait", "pending_delivery")


def test_unacknowledged_inbox_counts_failures_and_stops() -> None:
    """An ok turn that leaves its inbox unacknowledged is a failure; at the limit it stops."""
    c = WorkController()
    t: float = T0
    for i in range(3):
        n = news(pending=2, acknowledged=0)
        c.begin_turn(n)
        c.record_outcome("ok", now_ms=t, rng=half)
        d = c.decide(news(pending=2, acknowledged=0), now_ms=t, rng=half)
        if i < 2:
            assert (d.action, d.reason) == ("wait", "retry_backoff")
            t = d.retry_at_ms or 0
            assert decided(c, news(pending=2), now_ms=t) == ("run", "retry")
        else:
            assert (d.action, d.reason) == ("stop", "unacknowledged_inbox")
    assert decided(c, news()) == ("stop", "failure_limit")


def test_acknowledged_inbox_resets_failures() -> None:
    """When the seat acknowledges after the turn, the failure count clears."""
    c = WorkController()
    c.begin_turn(news(pending=2, acknowledged=0))
    c.record_outcome("ok", now_ms=T0, rng=half)
    assert decided(c, news(pending=0, acknowledged=2)) == ("wait", "idle")
    assert c.status()["failures"] == 0


def test_fresh_observation_waits() -> None:
    """The observation a turn ended with is no reason for another turn."""
    c = after_first()
    n = news(pending=3)
    c.begin_turn(n)
    c.record_outcome("ok", news={**n, "acknowledged": 3}, now_ms=T0)
    assert decided(c, {**n, "acknowledged": 3}) == ("wait", "fresh_observation")
    assert decided(c, news(pending=3, acknowledged=3)) == ("run", "inbox")


def test_announcement_backoff_for_project_only_news() -> None:
    """Project-only inbox items wait a random delay, drawn once, then run."""
    c = after_first()
    draws = iter([0.25])
    d = c.decide(news(pending=1, project_only=True, x=1), now_ms=T0, rng=lambda: next(draws))
    assert (d.reason, d.retry_at_ms) == ("announcement_backoff", T0 + 30_000)
    d2 = c.decide(news(pending=1, project_only=True, x=1), now_ms=T0 + 29_999)
    assert d2.reason == "announcement_backoff"  # no second draw (rng omitted)
    assert decided(c, news(pending=1, project_only=True, x=1), now_ms=T0 + 30_000) == (
        "run",
        "inbox",
    )


def test_project_only_news_already_seen_is_not_inbox() -> None:
    """Project-only items whose card the last turn saw are no inbox reason."""
    c = WorkController()
    c.begin_turn(news(x=1))
    c.record_outcome("ok", now_ms=T0)
    assert decided(c, news(pending=1, project_only=True, x=1)) == ("wait", "idle")


def test_idle() -> None:
    """With no reason at all the controller waits as `idle`."""
    assert decided(after_first(), news()) == ("wait", "idle")


def test_interrupted_turn_continues_without_counting() -> None:
    """An interrupted turn is neither a failure nor an outcome: it continues."""
    c = WorkController()
    c.begin_turn(news())
    c.record_outcome("interrupted", now_ms=T0)
    s = c.status()
    assert (s["first"], s["continuation"], s["failures"], s["active"]) == (True, True, 0, False)


def test_draw_order_quiet_then_retry() -> None:
    """A failed outcome draws the quiet jitter first, then the retry jitter."""
    c = WorkController(quiet_interval_ms=1_000, now_ms=T0)
    draws = iter([0.0, 1.0])
    c.begin_turn(news())
    c.record_outcome("failed", now_ms=T0, rng=lambda: next(draws))
    assert c.status()["quietAt"] == T0 + 1_000
    assert c.status()["retryAt"] == T0 + 10_000 * 1.2


def test_rng_is_clamped() -> None:
    """An rng outside [0, 1] is clamped into it by the jitter."""
    c = WorkController()
    c.begin_turn(news())
    c.record_outcome("failed", now_ms=T0, rng=lambda: 7.0)
    assert c.status()["retryAt"] == T0 + 10_000 * 1.2


def test_bad_input_is_refused() -> None:
    """An unknown outcome kind and a missing rng where one is drawn are clear errors."""
    c = WorkController()
    with pytest.raises(ValueError, match="unknown outcome kind"):
        c.record_outcome("exploded", now_ms=T0)
    c.begin_turn(news())
    with pytest.raises(ValueError, match="rng"):
        c.record_outcome("failed", now_ms=T0)
    with pytest.raises(ValueError, match="max_failures"):
        WorkController(max_failures=0)


def test_state_round_trips_through_the_wire() -> None:
    """to_state's wire JSON, read back, resumes the same controller without a clock."""
    c = WorkController(quiet_interval_ms=1_000, now_ms=T0)
    c.begin_turn(news(pending=2, runnable=True, revision=3))
    wire = c.to_state().to_wire()
    back = WorkController.from_state(wire, quiet_interval_ms=1_000)
    assert back.to_state() == c.to_state()
    assert back.status() == c.status()
    assert ControllerState.model_validate(wire) == c.to_state()


def test_decision_wire_shape() -> None:
    """A decision's wire form carries retryAtMs only when there is one."""
    assert ControllerDecision(action="run", reason="first").to_wire() == {
        "action": "run",
        "reason": "first",
    }


# ------------------------------------------------------------------ stateful property

BASE = 10_000


class ControllerMachine(RuleBasedStateMachine):
    """Random calls on a controller, checked against a twin resumed from its state."""

    def __init__(self) -> None:
        super().__init__()
        self.options: dict[str, Any] = {
            "quiet_interval_ms": 30_000,
            "retry_base_ms": BASE,
            "max_failures": 3,
        }
        self.c = WorkController(now_ms=T0, **self.options)
        self.now = T0
        self.running = False
        self.blocked_since_continuation = False
        self.failed_at: float | None = None
        self.failures_at_fail = 0
        self.last_news: dict[str, Any] = news()

    def twin(self) -> WorkController:
        return WorkController.from_state(self.c.to_state().to_wire(), **self.options)

    @rule(
        dt=st.integers(0, 120_000),
        pending=st.integers(0, 3),
        acknowledged=st.integers(0, 3),
        runnable=st.booleans(),
        revision=st.integers(-1, 5),
        notices=st.integers(0, 2),
        steering=st.booleans(),
        paused=st.booleans(),
        deliveries=st.integers(0, 1),
        reuse=st.booleans(),
        draw=st.floats(0, 1),
    )
    def decide(self, **a: Any) -> None:
        self.now += a["dt"]
        n = (
            self.last_news
            if a["reuse"]
            else news(
                pending=a["pending"],
                acknowledged=a["acknowledged"],
                runnable=a["runnable"],
                revision=a["revision"],
            )
        )
        kw = {
            "pending_deliveries": a["deliveries"],
            "notices": a["notices"],
            "steering": a["steering"],
            "paused": a["paused"],
            "now_ms": self.now,
            "rng": lambda: a["draw"],
        }
        twin = self.twin()
        d = self.c.decide(n, **kw)
        assert twin.decide(n, **kw) == d
        assert twin.to_state() == self.c.to_state()
        if self.c.status()["blocked"]:
            self.blocked_since_continuation = True
        if d.action != "run":
            return
        assert not self.running, "two turns at once"
        assert not self.blocked_since_continuation, "a blocked controller ran"
        if d.reason == "retry" and self.failed_at is not None:
            assert self.now >= self.failed_at + 0.8 * BASE * 2 ** (self.failures_at_fail - 1)
        self.c.begin_turn(n)
        self.running = True
        self.last_news = n

    @precondition(lambda self: self.running)
    @rule(
        kind=st.sampled_from(["ok", "failed", "interrupted", "send_deferred"]),
        cont=st.booleans(),
        retryable=st.booleans(),
        with_news=st.booleans(),
        draw=st.floats(0, 1),
        dt=st.integers(0, 60_000),
    )
    def outcome(self, **a: Any) -> None:
        self.now += a["dt"]
        outcome_news = self.last_news if a["with_news"] else None
        twin = self.twin()
        kw = {
            "continuation": a["cont"],
            "news": outcome_news,
            "retryable": a["retryable"],
            "now_ms": self.now,
            "rng": lambda: a["draw"],
        }
        self.c.record_outcome(a["kind"], **kw)
        twin.record_outcome(a["kind"], **kw)
        assert twin.to_state() == self.c.to_state()
        self.running = False
        if a["kind"] == "failed":
            self.failed_at = self.now
            self.failures_at_fail = self.c.status()["failures"]
        if self.c.status()["blocked"]:
            self.blocked_since_continuation = True

    @rule()
    def continuation(self) -> None:
        self.c.request_continuation()
        self.blocked_since_continuation = False

    @invariant()
    def active_matches(self) -> None:
        assert self.c.status()["active"] == self.running


ControllerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40)
test_controller_properties = ControllerMachine.TestCase
