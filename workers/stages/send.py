"""The send stage: put a reserved ask on the wire exactly once, or write down why not.

The op goes `reserved -> sending` under a lease and a fencing token before any wire call;
a try in doubt reconciles before it posts; the send gate decides whether the ask may go
(DESIGN.md section 8). Its task applies the retry plan of a try that did not get through.
"""

from __future__ import annotations

import logging
import random
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
from celery import Celery

from contracts import EngagementDecision, GuardrailVerdict, SendGateVerdict, SendPolicy
from contracts.messages import OutboundAsk, ReservedEnvelope, SendResult
from pipeline.backoff import retry_delay
from pipeline.facts import Places, learn_from_send
from pipeline.send_gate import check_send, reached_member_ids
from workers.broker import RETRY_BACKOFF_MAX_S, publish
from workers.clock import now_ms
from workers.container import Container
from workers.errors import (
    ConfigError,
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
from workers.stages.base import Deps, register_stage
from workers.stages.guardrails import Guardrails
from workers.stages.rows import stage_row
from workers.stores.inbound import InboundStore
from workers.stores.journal import postpone
from workers.stores.ledger import Ledger
from workers.stores.parking import park
from workers.timezones import offset_of

log = logging.getLogger("seatwire.send")


def idempotency_id(decision: EngagementDecision, attempt: int) -> str:
    """`engage-{dedupeKey}-{attempt}`: the attempt keeps a later re-ask from colliding."""
    return f"engage-{decision.dedupe_key}-{attempt}"


@dataclass
class Send:
    ledger: Ledger
    org: OrgSource
    outbound: Outbound
    inbound: InboundStore
    clock_ms: Callable[[], int] = now_ms
    lease_ms: int = 90_000
    new_token: Callable[[], str] = lambda: secrets.token_hex(8)
    mode: str = "on"
    policy: SendPolicy = field(default_factory=SendPolicy)

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
        )

    def _guardrails(self) -> Guardrails:
        return Guardrails(ledger=self.ledger, clock_ms=self.clock_ms)

    def __call__(self, env: ReservedEnvelope) -> str:
        return self.send(env)

    def send(self, env: ReservedEnvelope) -> str:
        """Send the ask exactly once; returns the op's final (or current) state."""
        decision, op_id = env.decision, env.tracking_id
        for _ in range(2):
            token = self.new_token()
            start = self.ledger.begin_send(
                op_id, tracking_id=env.tracking_id, token=token, lease_ms=self.lease_ms
            )
            if start.verb == "done":
                return start.info
            if start.verb == "busy":
                raise LeaseBusy(int(start.info))
            if start.verb == "missing":
                raise PermanentError(f"no reservation for {op_id}: the guardrail stage never ran")
            if start.verb == "expired":
                # The reservation lapsed before anything was sent: check the limits again.
                verdict = self.ledger.reserve(
                    op_id, decision=decision, seat_id=env.seat_id, tracking_id=env.tracking_id
                )
                if not verdict.allowed:
                    self._guardrails().refuse(env.tracking_id, env.seat_id, decision, verdict)
                    return "refused"
                continue
            # The op's attempt names the ask, not the message's: the message may predate a
            # re-reservation, and a retry under a stale id would reconcile for the wrong ask.
            attempt = start.attempt or env.verdict.attempt
            verdict = env.verdict.model_copy(update={"attempt": attempt})
            return self._deliver(
                env, verdict, token, int(start.info), reconcile=start.verb == "reconcile"
            )
        raise TransientError(f"reservation for {op_id} keeps expiring before the send")

    def give_up(self, env: ReservedEnvelope, reason: str) -> str:
        """Out of tries for a send that never reached the provider: `send_failed`, with why,
        and its reservation released. Taken under the send lease like any try, so a try that
        may have sent meanwhile is never overwritten."""
        token = self.new_token()
        start = self.ledger.begin_send(
            env.tracking_id, tracking_id=env.tracking_id, token=token, lease_ms=self.lease_ms
        )
        if start.verb == "reconcile":
            self.ledger.abandon(env.tracking_id, token)  # in doubt: leave it to reconcile
            return "unknown"
        if start.verb == "expired":
            token = ""  # the reservation lapsed meanwhile: nothing holds the op; close it
        elif start.verb != "go":
            return start.info  # final already, busy or missing: not ours to fail
        verdict = env.verdict.model_copy(update={"attempt": start.attempt or env.verdict.attempt})
        ask = self._ask(env, verdict)
        self._close(
            env,
            verdict,
            ask,
            token,
            outcome="send_failed",
            at_ms=int(start.info) if start.info else self.clock_ms(),
            reason=reason,
            why=f"send failed: {reason}",
        )
        return "send_failed"

    def _deliver(
        self,
        env: ReservedEnvelope,
        verdict: GuardrailVerdict,
        token: str,
        reserved_at: int,
        *,
        reconcile: bool,
    ) -> str:
        ask = self._ask(env, verdict)
        crash_point("send", "after_intent", env.tracking_id)
        op_id = env.tracking_id
        ctx = SendContext(
            now_ms=self.clock_ms(),
            since_ms=reserved_at,
            record=lambda notes: self._note(op_id, token, notes),
        )
        if reconcile or ask.surface == "new_room":
            state = self.ledger.op_state(op_id)
            ctx.notes.update({k[5:]: v for k, v in state.items() if k.startswith("note:")})
        try:
            # Reconciled whatever the mode now: a try in doubt may have been sent under `on`.
            found = self.outbound.reconcile(ask, ctx) if reconcile else None
            if found is not None:
                return self._engaged(env, verdict, ask, found, token, reserved_at)
            # Not on the wire (never sent, or provably absent): the gate decides if it may go.
            gate = self._gate(ask)
            if gate.outcome == "blocked":
                return self._blocked(env, verdict, ask, gate, token, reserved_at)
            if gate.outcome == "defer":
                self.ledger.release(op_id, token, f"{gate.rule}: {gate.detail}", kind="deferred")
                raise Deferred(gate.defer_until_ms or self.clock_ms(), gate.detail)
            if self.mode == "shadow":
                return self._shadowed(env, verdict, ask, token, reserved_at)
            if reconcile and not self.ledger.renew(op_id, token, self.lease_ms):
                # The look-up outlived the lease and another try took the op over: it decides.
                raise LeaseBusy(0)
            try:
                result = self.outbound.send(ask, ctx)
                crash_point("send", "after_api_ok_before_done", env.tracking_id)
            except NotSent as exc:
                # Provably never applied: the next try sends without reconciling first.
                kind = "rateLimited" if exc.retry_after_s is not None else "notSent"
                exc.tries = self.ledger.release(op_id, token, exc.reason, kind=kind)
                raise
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
        except (NotSent, Deferred):
            raise
        except Exception as exc:
            # After the intent, any other failure may have left the ask out or not: mark the
            # op `unknown` so the next try reconciles before it posts anything.
            self.ledger.abandon(env.tracking_id, token)
            if isinstance(exc, TransientError | PermanentError):
                raise  # a PermanentError here is a reconciliation that cannot be done
            raise MaybeSent(f"send of {ask.idempotency_id} interrupted: {exc!r}") from exc

    def _gate(self, ask: OutboundAsk) -> SendGateVerdict:
        view, _degraded = self.org.current()
        members = {m.id: m for m in view.org.members}
        quiet = self.policy.quiet_hours
        default = quiet.default_timezone if quiet is not None else "UTC"
        zones = {}
        for member_id in reached_member_ids(ask):
            zone = members[member_id].timezone if member_id in members else None
            if zone:
                try:
                    zones[member_id] = offset_of(zone)
                except ConfigError:  # a typo in the org file: the default zone, said aloud
                    log.warning("member %s has an unknown time zone %r", member_id, zone)
        return check_send(
            ask,
            policy=self.policy,
            members=members,
            timezones=zones,
            default_tz=offset_of(default),
            now_ms=self.clock_ms(),
        )

    def _blocked(
        self,
        env: ReservedEnvelope,
        verdict: GuardrailVerdict,
        ask: OutboundAsk,
        gate: SendGateVerdict,
        token: str,
        reserved_at: int,
    ) -> str:
        """The send gate refused the ask: `send_blocked` with the rule, the place released."""
        self._close(
            env,
            verdict,
            ask,
            token,
            outcome="send_blocked",
            at_ms=reserved_at,
            reason=f"{gate.rule}: {gate.detail}",
            why=f"send gate {gate.rule}: {gate.detail}",
        )
        return "send_blocked"

    def _shadowed(
        self,
        env: ReservedEnvelope,
        verdict: GuardrailVerdict,
        ask: OutboundAsk,
        token: str,
        reserved_at: int,
    ) -> str:
        """Send mode `shadow`: the ask is recorded as what would have been sent, and kept
        against the limits as `on` would keep it; nothing goes on the wire."""
        self._close(
            env,
            verdict,
            ask,
            token,
            outcome="shadowed",
            at_ms=reserved_at,
            reason=env.decision.reason,
            why="shadow mode: recorded as what would have been sent; nothing was sent",
        )
        return "shadowed"

    def _close(
        self,
        env: ReservedEnvelope,
        verdict: GuardrailVerdict,
        ask: OutboundAsk,
        token: str,
        *,
        outcome: str,
        at_ms: int,
        reason: str | None,
        why: str | None,
        result: SendResult | None = None,
    ) -> str:
        """Record a send's final outcome once, with its ledger row; the script's verb."""
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
        return self.ledger.finish(
            env.tracking_id,
            outcome=outcome,
            row=row,
            token=token,
            tracking_id=env.tracking_id,
            now_ms=self.clock_ms(),
            message_id=result.message_id if result else "",
            channel_id=result.channel_id if result else "",
            idempotency_id=ask.idempotency_id,
        )

    def _note(self, op_id: str, token: str, notes: dict[str, str]) -> None:
        if not self.ledger.note(op_id, token, **notes):
            raise LeaseBusy(0)  # another try took the op over; this one must stop here

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
        # After the outcome, and best-effort: the ask is out and recorded whatever happens
        # here; the seat's own message echoed back by the provider teaches the thread again.
        try:
            self.inbound.learn(
                env.seat_id,
                Places(channel_id=result.channel_id, thread_root_id=None, item_id=None),
                learn_from_send(ask.thread_root_id, result.message_id),
            )
        except redis.RedisError as exc:
            log.warning("could not record what %s's send taught: %s", env.seat_id, exc)
        return "engaged" if verb in ("ok", "done") else verb

    def _ask(self, env: ReservedEnvelope, verdict: GuardrailVerdict) -> OutboundAsk:
        d = env.decision
        return OutboundAsk(
            idempotency_id=idempotency_id(d, verdict.attempt),
            tracking_id=env.tracking_id,
            seat_id=env.seat_id,
            work_id=d.work_id,
            attempt=verdict.attempt,
            surface=d.surface,
            channel_id=d.channel_id,
            thread_root_id=d.thread_root_id,
            room_name=d.room_name,
            durable_channel=d.durable_channel,
            member_ids=d.member_ids or tuple(t.member_id for t in d.targets),
            mentions=d.mentions,
            targets=d.targets,
            body=d.body or "",
            reason_code=d.reason_code,
        )


# A send's budgets of tries, kept on its op (not in the broker's retry count, which every kind
# of retry shares): waiting out rate limits is not failing, so it has a budget of its own.
RATE_LIMITED_TRIES = 60
NOT_SENT_TRIES = 9


def _again(app: Celery, c: Container, env: ReservedEnvelope, wait_s: float, reason: str) -> None:
    """Run the send again in `wait_s`: a fresh message with a countdown when the wait fits
    under the cap (a longer countdown outlives the broker's visibility timeout and runs
    twice), else parked in Redis for beat to re-publish when due. The entry's deadline moves
    past the wait, so the sweeper leaves it alone meanwhile."""
    now = now_ms()
    if wait_s > RETRY_BACKOFF_MAX_S:
        park(
            c.redis,
            Task.SEND,
            env.tracking_id,
            env.to_wire(),
            due_ms=now + int(wait_s * 1000),
            reason=reason,
        )
        return
    postpone(
        c.redis,
        env.tracking_id,
        until_ms=now + int(wait_s * 1000) + c.settings.journal_deadline_ms,
    )
    publish(app, Task.SEND, env.tracking_id, env.to_wire(), countdown=wait_s)


def register(app: Celery, deps: Deps) -> None:
    def send(self: Any, message: dict[str, Any]) -> None:
        env = ReservedEnvelope.model_validate(message)
        container = deps()
        stage = Send.of(container)
        try:
            stage(env)
        except LeaseBusy as busy:
            wait_s = max(1.0, (busy.until_ms - now_ms()) / 1000 + 1)
            raise self.retry(countdown=min(wait_s, RETRY_BACKOFF_MAX_S), exc=busy) from busy
        except NotSent as refused:
            rate_limited = refused.retry_after_s is not None
            budget = RATE_LIMITED_TRIES if rate_limited else NOT_SENT_TRIES
            if refused.tries >= budget:
                stage.give_up(env, f"{refused.reason} (after {refused.tries} tries)")
                return
            wait_s = retry_delay(
                max(0, refused.tries - 1),
                retry_after_s=refused.retry_after_s,
                u=random.random(),
                cap_s=RETRY_BACKOFF_MAX_S,
            )
            _again(self.app, container, env, wait_s, refused.reason)
            return
        except Deferred as held:
            park(
                container.redis,
                Task.SEND,
                env.tracking_id,
                env.to_wire(),
                due_ms=held.until_ms,
                reason=held.reason,
            )
            return
        except MaybeSent as unsure:
            if self.request.retries >= self.max_retries:
                raise
            wait_s = max(
                retry_delay(
                    self.request.retries,
                    retry_after_s=unsure.retry_after_s,
                    u=random.random(),
                    cap_s=RETRY_BACKOFF_MAX_S,
                ),
                2 * container.settings.send_timeout_s,
            )
            if wait_s > RETRY_BACKOFF_MAX_S:
                _again(self.app, container, env, wait_s, unsure.reason)
                return
            raise self.retry(countdown=wait_s, exc=unsure) from unsure
        crash_point("send", "after_done_before_ack", env.tracking_id)

    register_stage(app, Task.SEND, deps, send)
