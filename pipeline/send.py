"""The send stage's decisions (docs/architecture.md, "The send stage"): which step an op
calls for, and when a failed try runs again. Pure: replies, verdicts, `now_ms` and the
random draw `u` come in as arguments; frozen values with a reason go out.

One try of the send stage meets Redis or the wire between its decisions, so the flow has
one function per decision point, each named for what it has just learnt:

    begin_send -> next_step            done | busy | missing | deliver | reconcile
                                       | rereserve -> reserve -> after_rereserve
                                           refuse | begin -> begin_send -> next_step
                                             (rereserved=True: expired again is `expiring`)
    deliver/reconcile -> [look-up] -> gate -> after_lookup
                                       found | block | defer | shadow | post
    a try failed -> plan_retry         countdown | park | give_up | dead_letter
    give_up -> begin_send -> give_up_step   fail | abandon | leave

The send stage (workers/stages/send.py) applies these decisions. The order inside a try: a
try in doubt is looked up first whatever the mode (it may have been sent under `on`), then
the gate, then shadow mode, then the wire.
"""

from __future__ import annotations

from contracts.guardrails import GuardrailVerdict
from contracts.send import (
    RetryPlan,
    RetryPolicy,
    SendFailure,
    SendMode,
    SendStart,
    SendStep,
)
from contracts.send_gate import SendGateVerdict
from pipeline.backoff import retry_delay

# ------------------------------------------------------------------ the steps


def next_step(start: SendStart, *, message_attempt: int, rereserved: bool = False) -> SendStep:
    """What begin_send's reply calls for.

    `message_attempt` is the attempt the message carries, used only when the op has none of
    its own (the op's wins: the message may predate a re-reservation). `rereserved` says this
    reply follows a re-reservation in the same try: expiring twice in a row is `expiring`,
    left to the broker's retries rather than re-reserved in a loop.
    """
    verb = start.verb
    if verb == "done":
        return SendStep(
            kind="done", final_state=start.info, reason=f"the op is final already: {start.info}"
        )
    if verb == "busy":
        return SendStep(
            kind="busy",
            lease_until_ms=int(start.info),
            reason=f"another try holds the send lease until {start.info}",
        )
    if verb == "missing":
        return SendStep(kind="missing", reason="no reservation: the guardrail stage never ran")
    if verb == "expired":
        if rereserved:
            return SendStep(
                kind="expiring", reason="the reservation keeps expiring before the send"
            )
        return SendStep(
            kind="rereserve",
            reason="the reservation lapsed before anything was sent: check the limits again",
        )
    return SendStep(
        kind="deliver" if verb == "go" else "reconcile",
        attempt=start.attempt or message_attempt,
        reserved_at_ms=int(start.info),
        reason=(
            "reserved and never tried: to the send gate"
            if verb == "go"
            else "a previous try may have sent it: look it up before anything is posted"
        ),
    )


def after_rereserve(verdict: GuardrailVerdict) -> SendStep:
    """What the guardrails' fresh verdict on a lapsed reservation calls for."""
    if verdict.allowed:
        return SendStep(kind="begin", reason="reserved again: begin the send again")
    return SendStep(
        kind="refuse",
        refusal_code=verdict.code or "",
        reason=f"the limits refuse it now: {verdict.code}: {verdict.detail}",
    )


def after_lookup(
    *, reconciled: bool, found: bool, gate: SendGateVerdict | None, mode: SendMode
) -> SendStep:
    """What a try that holds the op does once it knows whether the ask is on the wire.

    `reconciled`: this try looked the ask up (it began as `reconcile`); `found`: the look-up
    found it. `gate` is the send gate's verdict, needed unless the ask was found. Mode `off`
    posts like `on`: switching sends off is the engagement stage's to apply, and an ask
    reserved before it stops is still delivered.
    """
    if found and not reconciled:
        raise ValueError("only a look-up finds an ask")
    if found:
        return SendStep(kind="found", reason="the look-up found the ask: recorded, not posted")
    if gate is None:
        raise ValueError("the send gate's verdict is needed for an ask that is not on the wire")
    rule, detail = gate.rule or None, gate.detail
    if gate.outcome == "blocked":
        return SendStep(kind="block", rule=rule, detail=detail, reason=f"{rule}: {detail}")
    if gate.outcome == "defer":
        return SendStep(
            kind="defer",
            rule=rule,
            detail=detail,
            until_ms=gate.defer_until_ms,
            reason=f"{rule}: {detail}",
        )
    if mode == "shadow":
        return SendStep(kind="shadow", reason="shadow mode: recorded as what would have been sent")
    return SendStep(
        kind="post",
        renew_lease=reconciled,
        reason=(
            "provably absent after the look-up: renew the lease, then post"
            if reconciled
            else "the gate lets it go: post"
        ),
    )


def give_up_step(start: SendStart, *, message_attempt: int) -> SendStep:
    """How a send out of tries ends, given begin_send's reply to its closing try.

    It is taken under the send lease like any try, so a try that may have sent meanwhile is
    never overwritten: in doubt it is left `unknown` for a reconciling try.
    """
    verb = start.verb
    if verb == "reconcile":
        return SendStep(kind="abandon", reason="in doubt: left unknown for a try to reconcile")
    if verb in ("go", "expired"):
        return SendStep(
            kind="fail",
            attempt=start.attempt or message_attempt,
            reserved_at_ms=int(start.info) if start.info else None,
            fenced=verb == "go",
            reason=(
                "out of tries and never sent: send_failed"
                if verb == "go"
                else "the reservation lapsed meanwhile: nothing holds the op; closed unfenced"
            ),
        )
    return SendStep(
        kind="leave",
        final_state=start.info if verb == "done" else None,
        lease_until_ms=int(start.info) if verb == "busy" else None,
        reason=f"{verb}: not this try's to fail",
    )


# ------------------------------------------------------------------ the retries


def plan_retry(
    failure: SendFailure, *, tries: int, policy: RetryPolicy, u: float, now_ms: int
) -> RetryPlan:
    """When a failed try runs again, or why it never will.

    `tries` is, for `not_sent` and `rate_limited`, the count of that kind kept on the op
    (this one included: send_release's reply); for `maybe_sent` and `lease_busy`, the
    broker's retries so far (Celery's `request.retries`); unused for `deferred`. `u` is a
    uniform draw in [0, 1), `now_ms` the time of the failure.

    - lease_busy: after the lease (at least 1 s), capped, never parked; a broker retry.
    - not_sent / rate_limited: out of its own budget, `give_up` (`send_failed`); else backoff
      (or exactly the Retry-After plus jitter) as a fresh publish, parked past the cap.
    - maybe_sent: out of the broker's retries, `dead_letter` with the op left `unknown`; else
      backoff, never under the in-doubt floor, as a broker retry, parked past the cap.
    - deferred: parked until the gate's time, however long; no try spent.
    """
    if not 0 <= u < 1:
        raise ValueError(f"u must be in [0, 1), not {u}")
    if tries < 0:
        raise ValueError(f"tries cannot be negative, not {tries}")
    cap = policy.countdown_cap_s
    kind = failure.kind
    if kind == "deferred":
        assert failure.until_ms is not None  # the contract requires it
        return RetryPlan(kind="park", due_ms=failure.until_ms, reason=failure.reason)
    if kind == "lease_busy":
        assert failure.until_ms is not None
        if tries >= policy.max_retries:  # what Celery's self.retry does at this count
            return _dead_letter(failure, tries)
        wait_s = max(1.0, (failure.until_ms - now_ms) / 1000 + 1)
        return RetryPlan(
            kind="countdown", wait_s=min(wait_s, cap), via="retry", reason=failure.reason
        )
    if kind == "maybe_sent":
        if tries >= policy.max_retries:
            return _dead_letter(failure, tries)
        wait_s = max(
            retry_delay(tries, retry_after_s=failure.retry_after_s, u=u, cap_s=cap),
            policy.in_doubt_floor_s,
        )
        if wait_s > cap:
            return _park(failure, wait_s, now_ms)
        return RetryPlan(kind="countdown", wait_s=wait_s, via="retry", reason=failure.reason)
    budget = policy.rate_limited_tries if kind == "rate_limited" else policy.not_sent_tries
    if tries >= budget:
        return RetryPlan(kind="give_up", reason=f"{failure.reason} (after {tries} tries)")
    wait_s = retry_delay(max(0, tries - 1), retry_after_s=failure.retry_after_s, u=u, cap_s=cap)
    if wait_s > cap:
        return _park(failure, wait_s, now_ms)
    return RetryPlan(kind="countdown", wait_s=wait_s, via="publish", reason=failure.reason)


def _park(failure: SendFailure, wait_s: float, now_ms: int) -> RetryPlan:
    # Longer than a countdown may be: past the visibility timeout the message would run twice.
    return RetryPlan(
        kind="park", wait_s=wait_s, due_ms=now_ms + int(wait_s * 1000), reason=failure.reason
    )


def _dead_letter(failure: SendFailure, tries: int) -> RetryPlan:
    return RetryPlan(kind="dead_letter", reason=f"{failure.reason} (out of retries after {tries})")
