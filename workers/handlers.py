"""The stages as plain handlers: load, decide, persist, and return the next message.

No Celery here: a task unpacks its message, calls one of these, and publishes what comes back.
Every handler is safe to run twice for the same message (redelivery is normal on Redis).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from contracts import EngagementDecision, GuardrailVerdict, LedgerRow, SendGateVerdict, SendPolicy
from contracts.messages import (
    DecisionEnvelope,
    InboundEnvelope,
    OutboundAsk,
    ReservedEnvelope,
    SendResult,
    WorkEnvelope,
)
from pipeline.engagement import apply_guardrail, decide_engagement
from pipeline.facts import Places, learn_from_send, places_of, reads_membership
from pipeline.fanout import resolve_all
from pipeline.guardrails import judge
from pipeline.send_gate import check_send, reached_member_ids
from workers.errors import (
    ConfigError,
    Deferred,
    LeaseBusy,
    MaybeSent,
    NotSent,
    PermanentError,
    TransientError,
)
from workers.faults import crash_point
from workers.inbound import InboundStore, Recorded
from workers.org import OrgSource
from workers.outbox import Outbound, SendContext
from workers.stores import Journal, Ledger
from workers.timezones import offset_of

log = logging.getLogger("seatwire.handlers")


def idempotency_id(decision: EngagementDecision, attempt: int) -> str:
    """`engage-{dedupeKey}-{attempt}`: the attempt keeps a later re-ask from colliding."""
    return f"engage-{decision.dedupe_key}-{attempt}"


def ledger_row(
    seat_id: str,
    decision: EngagementDecision,
    tracking_id: str,
    *,
    outcome: str,
    at_ms: int,
    reason_code: str | None,
    reason: str | None,
    attempt: int | None = None,
    extra_why: str | None = None,
    ask: OutboundAsk | None = None,
    result: SendResult | None = None,
) -> LedgerRow:
    """The ledger row of one outcome of one decision."""
    return LedgerRow(
        at_ms=at_ms,
        seat_id=seat_id,
        work_id=decision.work_id,
        trigger=decision.trigger,
        reason_code=reason_code,
        reason=reason,
        dedupe_key=decision.dedupe_key,
        attempt=attempt,
        engaged=outcome == "engaged",
        outcome=outcome,  # type: ignore[arg-type]
        surface=decision.surface,
        channel_id=result.channel_id if result else decision.channel_id,
        message_id=result.message_id if result else None,
        room_created=bool(result and result.room_created),
        targets=decision.targets,
        why=(*decision.why, *([extra_why] if extra_why else [])),
        idempotency_id=ask.idempotency_id if ask else None,
        tracking_id=tracking_id,
    )


def nonengagement_row(seat_id: str, decision: EngagementDecision, tracking_id: str) -> LedgerRow:
    """A considered 'nobody', written down with the code that says why."""
    if decision.guardrail is not None:
        outcome = decision.guardrail.code
    elif decision.reason_code == "unroutable":
        outcome = "unroutable"
    else:
        outcome = "none"
    return ledger_row(
        seat_id,
        decision,
        tracking_id,
        outcome=outcome,
        at_ms=decision.now_ms,
        reason_code=decision.reason_code,
        reason=decision.reason,
    )


@dataclass
class Stages:
    journal: Journal
    ledger: Ledger
    org: OrgSource
    outbound: Outbound
    inbound: InboundStore
    clock_ms: Callable[[], int]
    lease_ms: int = 90_000
    new_token: Callable[[], str] = lambda: secrets.token_hex(8)
    # DESIGN.md section 8: `off` decides nothing, `shadow` decides and records what it would
    # have sent without sending, `on` sends. Each is written down, never silent.
    mode: str = "on"
    policy: SendPolicy = field(default_factory=SendPolicy)

    # ------------------------------------------------------------------ directedness

    def directedness(self, env: InboundEnvelope) -> Recorded:
        """Resolve one inbound event for every seat and record all of it at once."""
        view, _degraded = self.org.current()
        wire = env.candidate.to_wire()
        places = places_of(wire)
        channel = view.channel_by_id.get(places.channel_id) if places.channel_id else None
        known = self.inbound.known(places, channel, membership=reads_membership(wire, channel))
        resolved = resolve_all(wire, view.roster, known, places)
        return self.inbound.record(
            env.tracking_id, env.candidate, resolved, places, now_ms=self.clock_ms()
        )

    # ------------------------------------------------------------------ engagement

    def engagement(self, env: WorkEnvelope) -> DecisionEnvelope | None:
        view, degraded = self.org.current()
        seat = view.seat(env.seat_id)
        if seat is None:
            raise PermanentError(f"seat {env.seat_id} is not in the org file")
        if self.mode == "off":
            self._off(env, seat.member_id)
            return None
        ctx = {
            "me": seat.member_id,
            "directory": view.directory,
            "channels": view.rooms,
            "supervisorId": seat.supervisor_id,
            "nowMs": self.clock_ms(),
            "degraded": degraded,
            "limits": self.ledger.limits,
        }
        decision = decide_engagement(env.report, ctx)
        if decision.engage:
            # Judge every seat's counts that bear on this ask, as the seed does with its rows.
            # The guardrail stage re-checks atomically; this makes the record say why.
            try:
                counted = self.ledger.tally(
                    decision=decision, seat_id=seat.member_id, now_ms=decision.now_ms
                )
            except redis.RedisError as exc:
                failed = f"ledger_read_failed:{type(exc).__name__}"
                decision = decision.model_copy(update={"degraded": (*decision.degraded, failed)})
            else:
                verdict = judge(
                    counted,
                    now_ms=decision.now_ms,
                    work_id=decision.work_id,
                    seat_id=seat.member_id,
                    creates_room=decision.surface == "new_room",
                    limits=self.ledger.limits,
                )
                decision = apply_guardrail(decision, verdict)
        row = (
            None
            if decision.engage
            else nonengagement_row(seat.member_id, decision, env.tracking_id)
        )
        stored = self.journal.record_decision(
            env.tracking_id,
            seat_id=seat.member_id,
            decision=decision,
            row=row,
            now_ms=decision.now_ms,
        )
        if not stored.engage:
            return None
        return DecisionEnvelope(
            tracking_id=env.tracking_id, seat_id=seat.member_id, decision=stored
        )

    def _off(self, env: WorkEnvelope, seat_id: str) -> None:
        """Send mode `off`: the report is received and written down as not decided."""
        now = self.clock_ms()
        decision = EngagementDecision(
            engage=False,
            reason_code="mode_off",
            reason="Seatwire's send mode is off (SEATWIRE_SEND_MODE=off): nothing is decided",
            work_id=env.report.id,
            now_ms=now,
        )
        row = ledger_row(
            seat_id,
            decision,
            env.tracking_id,
            outcome="off",
            at_ms=now,
            reason_code="mode_off",
            reason=decision.reason,
        )
        self.journal.record_decision(
            env.tracking_id,
            seat_id=seat_id,
            decision=decision,
            row=row,
            now_ms=now,
            final_state="off",
        )

    # ------------------------------------------------------------------ guardrails

    def guardrails(self, env: DecisionEnvelope) -> ReservedEnvelope | None:
        verdict = self.ledger.reserve(
            env.tracking_id,
            decision=env.decision,
            seat_id=env.seat_id,
            tracking_id=env.tracking_id,
        )
        if verdict.allowed:
            return ReservedEnvelope(
                tracking_id=env.tracking_id,
                seat_id=env.seat_id,
                decision=env.decision,
                verdict=verdict,
            )
        self._refuse(env.tracking_id, env.seat_id, env.decision, verdict)
        return None

    def _refuse(
        self,
        tracking_id: str,
        seat_id: str,
        decision: EngagementDecision,
        verdict: GuardrailVerdict,
    ) -> None:
        row = _row(
            seat_id,
            decision,
            verdict,
            tracking_id,
            outcome=verdict.code or "",
            at_ms=self.clock_ms(),
            reason=verdict.detail,
            extra_why=f"guardrail {verdict.code}: {verdict.detail}",
        )
        self.ledger.finish(
            tracking_id, outcome="refused", row=row, tracking_id=tracking_id, now_ms=row.at_ms
        )

    # ------------------------------------------------------------------ send

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
                    self._refuse(env.tracking_id, env.seat_id, decision, verdict)
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
        row = _row(
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


def _row(
    seat_id: str,
    decision: EngagementDecision,
    verdict: GuardrailVerdict,
    tracking_id: str,
    *,
    outcome: str,
    at_ms: int,
    reason: str | None,
    extra_why: str | None = None,
    ask: OutboundAsk | None = None,
    result: SendResult | None = None,
) -> LedgerRow:
    """A row of the guardrail or send stage: the decision's code when engaged, else the outcome."""
    return ledger_row(
        seat_id,
        decision,
        tracking_id,
        outcome=outcome,
        at_ms=at_ms,
        reason_code=decision.reason_code if outcome == "engaged" else outcome,
        reason=reason,
        attempt=verdict.attempt,
        extra_why=extra_why,
        ask=ask,
        result=result,
    )
