"""The send stage's decisions as values (docs/architecture.md, "The send stage"): what
pipeline/send.py takes and gives. Pure data.

    SendStart    what send_begin.lua answered (Ledger.begin_send), as it answered it
    SendStep     what the send stage does next with the op
    SendFailure  how a try failed (the shell's NotSent / MaybeSent / LeaseBusy / Deferred)
    RetryPolicy  the budgets of tries and the cap on a countdown
    RetryPlan    when and how a failed try runs again, or that it never will
"""

from __future__ import annotations

from typing import Literal, Self, get_args

from pydantic import Field, model_validator

from contracts._base import Wire
from contracts.journal import ReleaseCounter, SendBeginVerb
from contracts.send_gate import SendRule

# The send mode (docs/architecture.md, "Engagement"): `off` decides nothing, `shadow`
# decides and records what it would have sent without sending, `on` sends. `off` is the
# engagement stage's to apply: an ask already reserved when the mode went off is still
# delivered (the send stage posts it as `on`).
SendMode = Literal["off", "shadow", "on"]
SEND_MODES: tuple[SendMode, ...] = get_args(SendMode)


class SendStart(Wire):
    """send_begin.lua's reply, field for field as `Ledger.begin_send` reads it.

    `info` is what the verb says it is: the op's reservation time (ms) for `go` and
    `reconcile`, the end of the other try's lease (ms) for `busy`, the op's state for `done`,
    '' for `expired` and `missing`. `attempt` is the op's own (None on an older op without
    one): the ask's idempotency id is built from it, never from the message's.
    """

    verb: SendBeginVerb
    info: str = ""
    attempt: int | None = None


# next_step: what the begin_send reply calls for.
StartKind = Literal[
    "deliver",  # go: the ask was never tried; straight to the gate
    "reconcile",  # a try may have sent it: look it up first, then the gate
    "rereserve",  # expired: check the limits again (after_rereserve decides)
    "expiring",  # expired again right after a re-reservation: retried by the broker
    "done",  # the op is final: its state is the stage's answer
    "busy",  # another try holds a live lease: run again after it
    "missing",  # no op at all: the guardrail stage never ran (permanent)
]
# after_rereserve: what the fresh verdict calls for.
RereserveKind = Literal[
    "begin",  # allowed again: begin the send again
    "refuse",  # a limit says no now: the op is `refused`
]
# after_lookup: what to do with a try that holds the op, once the look-up (if any) is done.
LookupKind = Literal[
    "found",  # the look-up found the ask on the wire: record it engaged, post nothing
    "block",  # the send gate refused: `send_blocked`, the place released
    "defer",  # quiet hours: released as `deferred` and parked until `until_ms`
    "shadow",  # send mode shadow: `shadowed`, nothing on the wire
    "post",  # onto the wire (renewing the lease first when the try looked it up)
]
# give_up_step: how a try out of budget ends the op.
GiveUpKind = Literal[
    "fail",  # `send_failed` with why, the place released
    "abandon",  # in doubt: marked `unknown` for the next try to reconcile, never failed
    "leave",  # final already, busy or missing: not this try's to fail
]
SendStepKind = Literal[StartKind, RereserveKind, LookupKind, GiveUpKind]

_NEEDS: dict[str, frozenset[str]] = {
    "deliver": frozenset({"attempt", "reserved_at_ms"}),
    "reconcile": frozenset({"attempt", "reserved_at_ms"}),
    "done": frozenset({"final_state"}),
    "busy": frozenset({"lease_until_ms"}),
    "refuse": frozenset({"refusal_code"}),
    "block": frozenset({"rule"}),
    "defer": frozenset({"rule", "until_ms"}),
    "fail": frozenset({"attempt"}),
}
_OPTIONAL: dict[str, frozenset[str]] = {
    "fail": frozenset({"reserved_at_ms"}),  # none after an expiry: the shell stamps now
    "leave": frozenset({"final_state", "lease_until_ms"}),  # what the reply said, if anything
}
_FIELDS = (
    "attempt",
    "reserved_at_ms",
    "final_state",
    "lease_until_ms",
    "refusal_code",
    "rule",
    "until_ms",
)


class SendStep(Wire):
    """What the send stage does next with one op, and why.

    Which fields are set is fixed by `kind` (checked): `attempt` and `reserved_at_ms` for
    `deliver` and `reconcile`, `attempt` (and `reserved_at_ms` unless it lapsed) for `fail`;
    `final_state` for `done`; `lease_until_ms` for `busy`; on a `leave`, whichever of the two
    the reply carried; `refusal_code` for `refuse`; `rule`
    (and `detail`) for `block` and `defer`, with `until_ms` for `defer`. `renew_lease` is
    True only on a `post` after a look-up, `fenced` only on a `fail` of an op this try holds.
    """

    kind: SendStepKind
    reason: str
    attempt: int | None = None
    reserved_at_ms: int | None = None
    final_state: str | None = None
    lease_until_ms: int | None = None
    refusal_code: str | None = None
    rule: SendRule | None = None
    detail: str = ""
    until_ms: int | None = None
    renew_lease: bool = False
    fenced: bool = False

    @model_validator(mode="after")
    def _fields_of_kind(self) -> Self:
        needed = _NEEDS.get(self.kind, frozenset())
        allowed = needed | _OPTIONAL.get(self.kind, frozenset())
        for name in _FIELDS:
            value = getattr(self, name)
            if name in needed and value is None:
                raise ValueError(f"a {self.kind} step needs {name}")
            if name not in allowed and value is not None:
                raise ValueError(f"a {self.kind} step has no {name}")
        if self.renew_lease and self.kind != "post":
            raise ValueError("only a post renews the lease")
        if self.fenced and self.kind != "fail":
            raise ValueError("only a fail is fenced")
        return self


FailureKind = Literal[
    "not_sent",  # provably never applied (a refused connection): backs off, 9 tries
    "rate_limited",  # never applied, the provider said when (429 Retry-After): 60 tries
    "maybe_sent",  # may have been applied (timeout, reset, 5xx): reconciled next time
    "lease_busy",  # another try holds the op until `until_ms` (0: it took the op over)
    "deferred",  # the send gate holds it until `until_ms` (quiet hours)
]


class SendFailure(Wire):
    """How one try of a send failed: the shell's error, as a value.

    `retry_after_s` is the provider's wait: required for `rate_limited`, absent for
    `not_sent`, optional for `maybe_sent` (a rate-limited look-up). `until_ms` is required for
    `lease_busy` and `deferred` and absent otherwise.
    """

    kind: FailureKind
    reason: str = ""
    retry_after_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    until_ms: int | None = None

    @classmethod
    def never_sent(cls, reason: str, *, retry_after_s: float | None = None) -> SendFailure:
        """A NotSent: rate limited exactly when the provider gave a Retry-After."""
        kind: FailureKind = "not_sent" if retry_after_s is None else "rate_limited"
        return cls(kind=kind, reason=reason, retry_after_s=retry_after_s)

    @property
    def release_counter(self) -> ReleaseCounter | None:
        """The op's counter send_release bumps for this failure (None: the op is not
        released; a maybe-sent is abandoned to `unknown` instead)."""
        return _RELEASE_COUNTER.get(self.kind)

    @model_validator(mode="after")
    def _fields_of_kind(self) -> Self:
        if self.kind == "rate_limited" and self.retry_after_s is None:
            raise ValueError("a rate_limited failure needs retryAfterS")
        if self.kind in ("not_sent", "lease_busy", "deferred") and self.retry_after_s is not None:
            raise ValueError(f"a {self.kind} failure has no retryAfterS")
        if (self.kind in ("lease_busy", "deferred")) != (self.until_ms is not None):
            raise ValueError("untilMs is set exactly when the failure is lease_busy or deferred")
        return self


_RELEASE_COUNTER: dict[FailureKind, ReleaseCounter] = {
    "rate_limited": "rateLimited",
    "not_sent": "notSent",
    "deferred": "deferred",
}


class RetryPolicy(Wire):
    """The budgets of a send's tries and the longest countdown the send task may wait.

    `rate_limited_tries` and `not_sent_tries` are counted on the op (send_release), so every
    kind of retry does not share the broker's count; `max_retries` is the broker's, which
    `maybe_sent` and `lease_busy` tries spend. A wait longer than `countdown_cap_s` is parked:
    a longer countdown outlives the broker's visibility timeout and runs twice.
    `in_doubt_floor_s` is the least a maybe-sent waits before its look-up, so that a post the
    provider applies late is visible: twice the send call's timeout (`for_send_timeout`).
    """

    rate_limited_tries: int = Field(default=60, ge=1)
    not_sent_tries: int = Field(default=9, ge=1)
    max_retries: int = Field(default=8, ge=0)
    countdown_cap_s: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    in_doubt_floor_s: float = Field(ge=0, allow_inf_nan=False)

    @classmethod
    def for_send_timeout(cls, send_timeout_s: float) -> RetryPolicy:
        """The default budgets, with the floor at twice the send call's timeout."""
        return cls(in_doubt_floor_s=2 * send_timeout_s)


RetryKind = Literal[
    "countdown",  # run again in `wait_s` (at most the cap), `via` the broker
    "park",  # wait in the parking lot until `due_ms`; beat re-publishes it
    "give_up",  # out of tries, provably never sent: `send_failed` with `reason`
    "dead_letter",  # out of the broker's retries: raise, so the stage's give-up
    # dead-letters the message (a maybe-sent keeps its op `unknown`, never sent blind)
]
# How a countdown runs: `retry` is Celery's self.retry (spends one of the broker's
# `max_retries`: lease_busy, maybe_sent); `publish` is a fresh message with a countdown (the
# tries are counted on the op: not_sent, rate_limited), after moving the entry's deadline.
RetryVia = Literal["retry", "publish"]


class RetryPlan(Wire):
    """When and how a failed send runs again, or why it never will.

    `wait_s` and `via` are set exactly on a `countdown`; `due_ms` exactly on a `park`, with
    the `wait_s` it came from unless it is a deferral's own time. `reason` is what the shell
    writes down: the parked message's reason, the give-up's `send_failed` reason.
    """

    kind: RetryKind
    reason: str
    wait_s: float | None = None
    due_ms: int | None = None
    via: RetryVia | None = None

    @model_validator(mode="after")
    def _fields_of_kind(self) -> Self:
        if (self.kind == "countdown") != (self.via is not None):
            raise ValueError("via is set exactly on a countdown")
        if self.kind == "countdown" and self.wait_s is None:
            raise ValueError("a countdown needs waitS")
        if (self.kind == "park") != (self.due_ms is not None):
            raise ValueError("dueMs is set exactly on a park")
        if self.kind in ("give_up", "dead_letter") and self.wait_s is not None:
            raise ValueError(f"a {self.kind} has no waitS")
        return self
