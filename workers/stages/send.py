"""The send stage: put a reserved ask on the wire exactly once, or write down why not.

The op goes `reserved -> sending` under a lease and a fencing token before any wire call; a
try in doubt reconciles before it posts; the send gate decides whether the ask may go
(docs/architecture.md). Every decision is pipeline/send.py's, pure: the handler loads (Redis,
the adapter's look-up, the gate), asks it for the step, and applies the step. The task turns
a try that did not get through into a `SendFailure`, asks `plan_retry` when it runs again,
and applies that plan.

The errors a try raises (workers/errors.py) are never changed once raised: a `NotSent` from
an adapter is answered with a new `NotSent` that carries the count the op keeps.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from celery import Celery

from contracts import GuardrailVerdict, SendGateVerdict, SendPolicy
from contracts.asks import Ask
from contracts.journal import ReleaseCounter
from contracts.messages import OutboundAsk, ReservedEnvelope, SendResult
from contracts.send import SendMode, SendStart, SendStep
from pipeline.asks import DEFAULT_TIMEOUTS_MS, ask_id_for
from pipeline.decisions import thread_ttl_ms
from pipeline.facts import Places, learn_from_send
from pipeline.send import after_lookup, after_rereserve, give_up_step, next_step
from workers.clock import now_ms
from workers.container import Container
from workers.errors import (
    Deferred,
    LeaseBusy,
    MaybeSent,
    NotSent,
    PermanentError,
    TransientError,
)
from workers.org import OrgSource
from workers.outbound.base import Outbound, SendContext
from workers.queues import Task
from workers.recovery.faults import crash_point
from workers.stages.base import Deps, StageTask, Start, refused, register_stage
from workers.stages.guardrails import Guardrails
from workers.stages.links import LINKED_ADAPTERS, AnswerLinks
from workers.stages.rows import stage_row
from workers.stages.send_ask import (
    ask_of,
    gate,
    idempotency_id,
    planned_ask,
    record_ask,
    settle_ask,
    settle_change,
    settle_from_op,
    settle_record,
    settled,
)
from workers.stages.send_retry import retry_send
from workers.stores.asks import AskStore, Created
from workers.stores.dlq import Delivery
from workers.stores.inbound import InboundStore, fact_keys
from workers.stores.ledger import Ledger
from workers.telemetry import telemetry

__all__ = ["Send", "idempotency_id", "register"]

# The outcomes a try of the send stage closes an op with (a refusal is the guardrails').
Closed = Literal["engaged", "shadowed", "send_failed", "send_blocked"]


@dataclass(frozen=True)
class Try:
    """One try's hold on the op: its fencing token, how send_begin answered it, and the ask
    recorded in the same step (the record, and the ask store's answer), when one was."""

    token: str
    start: SendStart
    asked: tuple[Ask, Created] | None = None


@dataclass
class Send:
    ledger: Ledger
    org: OrgSource
    outbound: Outbound
    inbound: InboundStore
    clock_ms: Callable[[], int] = now_ms
    lease_ms: int = 90_000
    new_token: Callable[[], str] = lambda: secrets.token_hex(8)
    mode: SendMode = "on"
    policy: SendPolicy = field(default_factory=SendPolicy)
    # The ask record, written before the post and settled with the op (None: not kept).
    asks: AskStore | None = None
    timeouts: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_TIMEOUTS_MS))
    # The ask records this send wrote before posting, by id: settled without a second read.
    _asked: dict[str, Ask] = field(default_factory=dict, init=False, repr=False)
    # Signs the answer link a `webhook` ask carries (None: no link is offered).
    links: AnswerLinks | None = None

    @classmethod
    def of(cls, c: Container) -> Send:
        s = c.settings
        return cls(
            ledger=c.ledger,
            org=c.org,
            outbound=c.outbound,
            inbound=c.inbound,
            # A live try is killed at the hard time limit; the lease outlasts it a little.
            lease_ms=(s.task_time_limit_s + 10) * 1000,
            mode=s.send_mode,
            policy=s.send_policy,
            asks=c.asks,
            timeouts=s.timeouts_ms,
            links=AnswerLinks.of(s),
        )

    def __call__(self, env: ReservedEnvelope, start: Start | None = None) -> str:
        return self.send(env, start)

    # ------------------------------------------------------------------ a try

    def send(self, env: ReservedEnvelope, start: Start | None = None) -> str:
        """Send the ask exactly once; returns the op's final (or current) state. A try that
        ends the op is counted by its outcome as it is recorded (`_close`); one that will run
        again, by why (`retry_result`). With `start` (a first delivery's: workers/stages/
        base.py `Start`) the script that begins the send runs the start first, and the op is
        not touched unless it is admitted (then this returns the entry's state: `dead`)."""
        try:
            return self._try(env, start)
        except (TransientError, PermanentError) as exc:
            telemetry().sent(self.outbound.name, retry_result(exc))
            raise

    def _try(self, env: ReservedEnvelope, start: Start | None) -> str:
        planned = self._planned(env)
        held = self._begin(env, start, planned)
        if isinstance(held, Delivery):  # the start was not admitted
            return held.state or "dead"
        step = next_step(held.start, message_attempt=env.verdict.attempt)
        if step.kind == "rereserve":
            if self._rereserve(env) == "refuse":
                return "refused"
            held = self._begin(env, None, planned)
            step = next_step(held.start, message_attempt=env.verdict.attempt, rereserved=True)
        if step.kind == "expiring" and self._rereserve(env) == "refuse":
            return "refused"  # lapsed again, and the limits refuse it now
        if step.kind == "done":
            self._settled_before(env)
            return step.final_state or ""
        if step.kind == "busy":
            raise LeaseBusy(step.lease_until_ms or 0)
        if step.kind == "missing":
            raise PermanentError(
                f"no reservation for {env.tracking_id}: the guardrail stage never ran"
            )
        if step.kind == "expiring":
            raise TransientError(
                f"reservation for {env.tracking_id} keeps expiring before the send"
            )
        return self._deliver(env, step, held.token, held.asked)

    def give_up(self, env: ReservedEnvelope, reason: str) -> str:
        """Out of tries for a send that never reached the provider: `send_failed`, with why,
        and its reservation released. Taken under the send lease like any try, so a try that
        may have sent meanwhile is never overwritten."""
        held = self._begin(env)
        step = give_up_step(held.start, message_attempt=env.verdict.attempt)
        if step.kind == "abandon":
            self.ledger.abandon(env.tracking_id, held.token)
            return "unknown"
        if step.kind == "leave":
            return held.start.info  # final already, busy or missing: not ours to fail
        verdict = self._verdict(env, step)
        self._close(
            env,
            verdict,
            ask_of(env, verdict),
            held.token if step.fenced else "",
            outcome="send_failed",
            at_ms=step.reserved_at_ms or self.clock_ms(),
            reason=reason,
            why=f"send failed: {reason}",
        )
        return "send_failed"

    def _rereserve(self, env: ReservedEnvelope) -> str:
        """Check the limits again for a reservation that lapsed before anything was sent:
        `begin` when it holds a place again, `refuse` (written down) when a limit says no."""
        verdict = self.ledger.reserve(
            env.tracking_id,
            decision=env.decision,
            seat_id=env.seat_id,
            tracking_id=env.tracking_id,
        )
        then = after_rereserve(verdict)
        if then.kind == "refuse":
            guard = Guardrails(ledger=self.ledger, clock_ms=self.clock_ms)
            at_ms = guard.refuse(env.tracking_id, env.seat_id, env.decision, verdict)
            metrics = telemetry()
            metrics.refused("send", verdict.code)
            metrics.sent(self.outbound.name, "refused")
            metrics.finished("work", "refused", accepted_at_ms=env.accepted_at_ms, now_ms=at_ms)
        return then.kind

    def _planned(self, env: ReservedEnvelope) -> Ask | None:
        """The ask record this try would write for the message's attempt, recorded by the
        script that begins the send when the op is at that attempt (None: no record kept)."""
        if self.asks is None:
            return None
        ask = ask_of(env, env.verdict)
        return planned_ask(env, ask, timeouts=self.timeouts, now_ms=self.clock_ms())

    @overload
    def _begin(
        self, env: ReservedEnvelope, start: None = None, planned: Ask | None = None
    ) -> Try: ...
    @overload
    def _begin(
        self, env: ReservedEnvelope, start: Start | None, planned: Ask | None = None
    ) -> Try | Delivery: ...

    def _begin(
        self, env: ReservedEnvelope, start: Start | None = None, planned: Ask | None = None
    ) -> Try | Delivery:
        """Begin a try under a new token; with `start`, the start's refusal when it was not
        admitted (the op untouched); with `planned`, that ask recorded in the same step when
        the op begins at its attempt."""
        token = self.new_token()
        args = None if start is None else start.script_args()
        asked: tuple[Ask, Created] | None = None
        if planned is not None and self.asks is not None:
            started, begun, made = self.ledger.begin_send_asking(
                env.tracking_id,
                tracking_id=env.tracking_id,
                token=token,
                lease_ms=self.lease_ms,
                attempt=planned.attempt,
                create=self.asks.create_call(planned),
                start=args,
            )
            if made is not None:
                asked = (planned, self.asks.created(planned, made))
        else:
            started, begun = self.ledger.begin_send_started(
                env.tracking_id,
                tracking_id=env.tracking_id,
                token=token,
                lease_ms=self.lease_ms,
                start=args,
            )
        if refused(start, started):
            assert started is not None
            return started
        assert begun is not None  # admitted (or no start): the op was read and moved
        return Try(token, begun, asked)

    @staticmethod
    def _verdict(env: ReservedEnvelope, step: SendStep) -> GuardrailVerdict:
        # The op's attempt names the ask, not the message's: the message may predate a
        # re-reservation, and a retry under a stale id would reconcile for the wrong ask.
        return env.verdict.model_copy(update={"attempt": step.attempt or env.verdict.attempt})

    # ------------------------------------------------------------------ holding the op

    def _deliver(
        self,
        env: ReservedEnvelope,
        step: SendStep,
        token: str,
        asked: tuple[Ask, Created] | None = None,
    ) -> str:
        """Look the ask up if in doubt, ask the gate, then record, park or post it (`asked`:
        the ask the begin recorded, when it did)."""
        verdict = self._verdict(env, step)
        ask = ask_of(env, verdict)
        ended: str | None = None  # why nobody needs asking any more, when so
        if self.asks is not None:
            now = self.clock_ms()
            if asked is not None and asked[0].id == ask.ask_id:
                record = settle_record(self.asks, *asked, now_ms=now)
            else:
                record = record_ask(self.asks, env, ask, timeouts=self.timeouts, now_ms=now)
            self._asked[record.id] = record
            if not record.is_open:
                # Answered, withdrawn or closed while the send waited (a deferral in someone's
                # quiet hours, a retry): posting it now would ask for what is settled.
                how = record.answer.answer if record.answer else record.closed
                ended = f"ask {record.id} ended before it was sent ({record.state}: {how})"
            if self.links is not None and self.outbound.name in LINKED_ADAPTERS:
                # Signed from the record (its id, targets and creation), so every try of this
                # send carries the same link.
                ask = ask.model_copy(update={"answer_url": self.links.url_for(record)})
        crash_point("send", "after_intent", env.tracking_id)
        reserved_at = step.reserved_at_ms or 0
        reconcile = step.kind == "reconcile"
        ctx = self._context(env.tracking_id, token, reserved_at, ask, reconcile=reconcile)
        try:
            # Reconciled whatever the mode now: a try in doubt may have been sent under `on`.
            found = self._reconcile(ask, ctx) if reconcile else None
            if found is None and ended is not None:
                self._close(
                    env,
                    verdict,
                    ask,
                    token,
                    outcome="send_blocked",
                    at_ms=reserved_at,
                    reason="ask_ended",
                    why=f"{ended}: nobody needs asking",
                )
                return "send_blocked"
            verdict_of_gate = None if found is not None else self._gate(ask)
            then = after_lookup(
                reconciled=reconcile, found=found is not None, gate=verdict_of_gate, mode=self.mode
            )
            return self._apply(env, then, verdict, ask, token, reserved_at, ctx, found)
        except (NotSent, Deferred):
            raise
        except Exception as exc:
            # After the intent, any other failure may have left the ask out or not: mark the
            # op `unknown` so the next try reconciles before it posts anything.
            self.ledger.abandon(env.tracking_id, token)
            if isinstance(exc, TransientError | PermanentError):
                raise  # a PermanentError here is a reconciliation that cannot be done
            raise MaybeSent(f"send of {ask.idempotency_id} interrupted: {exc!r}") from exc

    def _apply(
        self,
        env: ReservedEnvelope,
        step: SendStep,
        verdict: GuardrailVerdict,
        ask: OutboundAsk,
        token: str,
        reserved_at: int,
        ctx: SendContext,
        found: SendResult | None,
    ) -> str:
        """Carry out what `after_lookup` decided."""
        op_id = env.tracking_id
        if step.kind == "found" and found is not None:
            return self._engaged(env, verdict, ask, found, token, reserved_at)
        if step.kind in ("block", "shadow"):
            outcome: Closed = "send_blocked" if step.kind == "block" else "shadowed"
            why = (
                f"send gate {step.rule}: {step.detail}"
                if step.kind == "block"
                else "shadow mode: recorded as what would have been sent; nothing was sent"
            )
            reason = step.reason if step.kind == "block" else env.decision.reason
            self._close(
                env, verdict, ask, token, outcome=outcome, at_ms=reserved_at, reason=reason, why=why
            )
            return outcome
        if step.kind == "defer":
            self.ledger.release(op_id, token, step.reason, kind="deferred")
            raise Deferred(step.until_ms or self.clock_ms(), step.detail)
        if step.renew_lease and not self.ledger.renew(op_id, token, self.lease_ms):
            # The look-up outlived the lease and another try took the op over: it decides.
            raise LeaseBusy(0)
        return self._post(env, verdict, ask, token, reserved_at, ctx)

    def _post(
        self,
        env: ReservedEnvelope,
        verdict: GuardrailVerdict,
        ask: OutboundAsk,
        token: str,
        reserved_at: int,
        ctx: SendContext,
    ) -> str:
        try:
            result = self.outbound.send(ask, ctx)
            crash_point("send", "after_api_ok_before_done", env.tracking_id)
        except NotSent as exc:
            # Provably never applied: the next try sends without reconciling first. Its tries
            # of this kind are counted on the op, and travel on a new error.
            kind: ReleaseCounter = "notSent" if exc.retry_after_s is None else "rateLimited"
            tries = self.ledger.release(env.tracking_id, token, exc.reason, kind=kind)
            raise NotSent(exc.reason, retry_after_s=exc.retry_after_s, tries=tries) from exc
        except PermanentError as exc:
            self._close(
                env,
                verdict,
                ask,
                token,
                outcome="send_failed",
                at_ms=reserved_at,
                reason=str(exc),
                why=f"send failed permanently: {exc}",
            )
            return "send_failed"
        return self._engaged(env, verdict, ask, result, token, reserved_at)

    def _reconcile(self, ask: OutboundAsk, ctx: SendContext) -> SendResult | None:
        adapter = self.outbound.name
        try:
            found = self.outbound.reconcile(ask, ctx)
        except Exception:
            telemetry().reconciled(adapter, "failed")
            raise
        telemetry().reconciled(adapter, "absent" if found is None else "found")
        return found

    def _context(
        self, op_id: str, token: str, reserved_at: int, ask: OutboundAsk, *, reconcile: bool
    ) -> SendContext:
        ctx = SendContext(
            now_ms=self.clock_ms(),
            since_ms=reserved_at,
            record=lambda notes: self._note(op_id, token, notes),
        )
        if reconcile or ask.surface == "new_room":
            state = self.ledger.op_state(op_id)
            ctx.notes.update({k[5:]: v for k, v in state.items() if k.startswith("note:")})
        return ctx

    def _gate(self, ask: OutboundAsk) -> SendGateVerdict:
        return gate(ask, org=self.org, policy=self.policy, now_ms=self.clock_ms())

    def _note(self, op_id: str, token: str, notes: dict[str, str]) -> None:
        if not self.ledger.note(op_id, token, **notes):
            raise LeaseBusy(0)  # another try took the op over; this one must stop here

    # ------------------------------------------------------------------ the record

    def _close(
        self,
        env: ReservedEnvelope,
        verdict: GuardrailVerdict,
        ask: OutboundAsk,
        token: str,
        *,
        outcome: Closed,
        at_ms: int,
        reason: str | None,
        why: str | None,
        result: SendResult | None = None,
    ) -> str:
        """Record a send's final outcome once, with its ledger row (and, engaged, what the
        send taught: the thread and channel the seat spoke in); the script's verb."""
        row = stage_row(
            env.seat_id,
            env.decision,
            verdict,
            env.tracking_id,
            outcome=outcome,
            at_ms=at_ms,
            reason=reason,
            extra_why=why,
            ask=ask,
            result=result,
        )
        now = self.clock_ms()
        said = why or reason or ""
        known = self._asked.pop(ask.ask_id, None) if ask.ask_id is not None else None
        after, commit = self._settling(known, outcome, ask, result, now, said)
        finished = self.ledger.finish(
            env.tracking_id,
            outcome=outcome,
            row=row,
            token=token,
            tracking_id=env.tracking_id,
            now_ms=now,
            message_id=result.message_id if result else "",
            channel_id=result.channel_id if result else "",
            idempotency_id=ask.idempotency_id,
            work_id=ask.work_id,
            sent_ttl_ms=thread_ttl_ms(ask.work_id),
            facts=self._taught(env.seat_id, ask, result) if outcome == "engaged" else (),
            fact_ttl_ms=self.inbound.fact_ttl_ms,
            commit=commit,
        )
        verb = finished.verb
        if verb in ("ok", "done") and self.asks is not None and ask.ask_id is not None:
            if known is not None and after is not None and finished.committed in ("ok", "again"):
                # Written with the outcome: what follows from it.
                stored = after.model_copy(update={"version": known.version + 1})
                settled(self.asks, stored, outcome=outcome, why=said, now_ms=now)
            else:  # not written with it (or raced): read, changed and written on its own
                settle_ask(
                    self.asks,
                    ask.ask_id,
                    outcome=outcome,
                    adapter=self.outbound.name,
                    now_ms=now,
                    result=result,
                    thread_root_id=ask.thread_root_id,
                    why=said,
                    known=None if commit is not None else known,
                )
        if verb == "ok":  # this try ended the op (`done`: an earlier one had)
            metrics = telemetry()
            metrics.sent(self.outbound.name, outcome)
            metrics.finished("work", outcome, accepted_at_ms=env.accepted_at_ms, now_ms=now)
        return verb

    def _settling(
        self,
        known: Ask | None,
        outcome: Closed,
        ask: OutboundAsk,
        result: SendResult | None,
        now: int,
        why: str,
    ) -> tuple[Ask | None, tuple[list[str], list[Any]] | None]:
        """The ask this send wrote before posting, as its outcome changes it, and that
        change's commit, to be written with the outcome (None, None: no record in hand, or
        nothing changes)."""
        if known is None or self.asks is None:
            return None, None
        settling = settle_change(
            outcome,
            adapter=self.outbound.name,
            now_ms=now,
            result=result,
            thread_root_id=ask.thread_root_id,
            why=why,
        )
        if settling is None:
            return None, None
        change, link = settling
        after = change(known)
        if after is None or after == known:
            return None, None
        return after, self.asks.commit_call(known, after, link=link)

    def _settled_before(self, env: ReservedEnvelope) -> None:
        """A redelivered send whose op an earlier try ended: the ask learns how, in case that
        try's worker died before it wrote it (the op holds where the ask landed)."""
        if self.asks is None or not env.decision.dedupe_key:
            return
        state = self.ledger.op_state(env.tracking_id)
        attempt = int(state.get("attempt") or env.verdict.attempt)
        settle_from_op(
            self.asks,
            ask_id_for(env.decision.dedupe_key, attempt),
            state,
            adapter=self.outbound.name,
            now_ms=self.clock_ms(),
            thread_root_id=env.decision.thread_root_id,
        )

    @staticmethod
    def _taught(seat_id: str, ask: OutboundAsk, result: SendResult | None) -> list[str]:
        """The fact sets an engaged send makes the seat a member of (the seat's own message
        echoed back by the provider teaches the thread again)."""
        if result is None:
            return []
        places = Places(channel_id=result.channel_id, thread_root_id=None, item_id=None)
        learned = learn_from_send(ask.thread_root_id, result.message_id)
        return [key for key, _seat in fact_keys(seat_id, places, learned)]

    def _engaged(
        self,
        env: ReservedEnvelope,
        verdict: GuardrailVerdict,
        ask: OutboundAsk,
        result: SendResult,
        token: str,
        reserved_at: int,
    ) -> str:
        verb = self._close(
            env,
            verdict,
            ask,
            token,
            outcome="engaged",
            at_ms=reserved_at,
            reason=env.decision.reason,
            why=None,
            result=result,
        )
        return "engaged" if verb in ("ok", "done") else verb


def retry_result(exc: TransientError | PermanentError) -> str:
    """Why a send try that did not end its op will run again, as its metric's result."""
    if isinstance(exc, Deferred):
        return "deferred"
    if isinstance(exc, LeaseBusy):
        return "busy"
    if isinstance(exc, NotSent):
        return "not_sent" if exc.retry_after_s is None else "rate_limited"
    if isinstance(exc, MaybeSent):
        return "maybe_sent"
    return "error"


# ---------------------------------------------------------------------- the task


TASK = Task.SEND  # this module's row of the stage table


def register(app: Celery, deps: Deps) -> None:
    def send(task: StageTask, env: ReservedEnvelope) -> None:
        container = task.deps()
        stage = Send.of(container)
        try:
            stage(env, task.start_of_request())
        except TransientError as exc:
            if not retry_send(task, container, env, exc, give_up=stage.give_up):
                raise
            return
        crash_point("send", "after_done_before_ack", env.tracking_id)

    # A first delivery's start runs in the script that begins the send.
    register_stage(app, TASK, deps, send, start_in="first")
