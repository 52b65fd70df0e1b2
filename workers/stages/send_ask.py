"""What the send stage puts on the wire and asks the send gate: the ask built from a reserved
decision (with the idempotency id that makes it exactly-once), and the gate's verdict on it
with each reached person's time zone from the org file."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from contracts import EngagementDecision, GuardrailVerdict, SendGateVerdict, SendPolicy
from contracts.asks import Ask, AskClose, AskLanding
from contracts.messages import AskContext, OutboundAsk, ReservedEnvelope, SendResult
from pipeline.asks import (
    NEVER_SENT,
    ask_id_for,
    closed_as,
    landed,
    new_ask,
    reopened,
    rung_landed,
    rung_unasked,
    send_ended,
    withdrawn,
)
from pipeline.send_gate import check_send, reached_member_ids
from workers.errors import ConfigError
from workers.org import OrgSource
from workers.stores.asks import AskStore, Created
from workers.timezones import offset_of

log = logging.getLogger("seatwire.send")


def idempotency_id(decision: EngagementDecision, attempt: int) -> str:
    """`engage-{dedupeKey}-{attempt}`: the attempt keeps a later re-ask from colliding."""
    return f"engage-{decision.dedupe_key}-{attempt}"


def ask_of(env: ReservedEnvelope, verdict: GuardrailVerdict) -> OutboundAsk:
    """The ask of a reserved decision, for the attempt its op holds."""
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
        ask_id=ask_id_for(d.dedupe_key or "", verdict.attempt),
        trigger=d.trigger,
    )


def planned_ask(
    env: ReservedEnvelope,
    ask: OutboundAsk,
    *,
    timeouts: Mapping[str, int],
    now_ms: int,
) -> Ask:
    """The record `ask` is written as before anything is posted."""
    asking = env.asking or AskContext()
    return new_ask(
        env.decision,
        seat_id=env.seat_id,
        tracking_id=env.tracking_id,
        attempt=ask.attempt,
        now_ms=now_ms,
        timeouts=timeouts,
        revision=asking.revision,
        scope=asking.scope,
        risk_kinds=asking.risk_kinds,
        escalates=asking.escalates,
        level=asking.level,
        item_id=asking.item_id,
    )


def record_ask(
    asks: AskStore,
    env: ReservedEnvelope,
    ask: OutboundAsk,
    *,
    timeouts: Mapping[str, int],
    now_ms: int,
) -> Ask:
    """The ask's record, written before anything is posted (kept as it is when a try before
    this one wrote it)."""
    record = planned_ask(env, ask, timeouts=timeouts, now_ms=now_ms)
    return settle_record(asks, record, asks.create(record), now_ms=now_ms)


def settle_record(asks: AskStore, record: Ask, created: Created, *, now_ms: int) -> Ask:
    """The stored ask once `record` was created (`created`: the ask store's answer, from
    `create` or from the script that began the send): an earlier try's released attempt
    taken again, the ask it supersedes withdrawn, a rung whose ask ended meanwhile closed."""
    new, stored, before = created
    if not new and stored.closed in NEVER_SENT and stored.tracking_id != record.tracking_id:
        # An attempt a failed send released, taken by this send: its ask again.
        again = asks.update(stored.id, lambda old: reopened(old, record))
        stored = again if again is not None else stored
    if before is not None and before != stored.id:
        # The seat reported the work anew (a later revision) and it is asked again: the
        # earlier ask under the same key is superseded, never left to time out and escalate.
        why = f"superseded by ask {stored.id} (revision {stored.revision} of the work)"
        ended = asks.update(before, lambda a: withdrawn(a, why, now_ms=now_ms))
        if ended is not None and ended.state == "closed":
            asks.close_escalations(ended, now_ms=now_ms)
    if new and stored.escalates is not None:
        # A rung raised just before the ask it escalates ended (answered, withdrawn): that
        # ask closed the rungs it knew of, and this one was not yet among them.
        root = asks.get(stored.escalates)
        if root is not None and not root.is_open:
            end: AskClose = "answered_elsewhere" if root.state == "answered" else "expired"
            if root.closed == "withdrawn":
                end = "withdrawn"
            closed = asks.update(stored.id, lambda a: closed_as(a, end, root, now_ms=now_ms))
            return closed or stored
    return stored


# How a send's outcome changes its ask, and whether the change points the message it landed
# as at the ask (for its clicks and replies).
Settling = tuple[Callable[[Ask], Ask | None], bool]
CLOSED_AS: dict[str, AskClose] = {
    "send_failed": "send_failed",
    "send_blocked": "send_blocked",
    "shadowed": "shadowed",
}


def settle_change(
    outcome: str,
    *,
    adapter: str,
    now_ms: int,
    result: SendResult | None = None,
    thread_root_id: str | None = None,
    why: str = "",
) -> Settling | None:
    """How a send that ended `outcome` changes its ask: landed (open, with where), or closed
    because nobody was asked; None when the outcome changes nothing."""
    if outcome == "engaged" and result is not None:
        landing = AskLanding(
            adapter=adapter,
            channel_id=result.channel_id,
            message_id=result.message_id,
            thread_root_id=thread_root_id or result.message_id,
            at_ms=now_ms,
        )
        return (lambda a: landed(a, landing, now_ms=now_ms)), True
    if outcome not in CLOSED_AS:
        return None
    end = CLOSED_AS[outcome]
    return (lambda a: send_ended(a, end, why or outcome, now_ms=now_ms)), False


def settle_ask(
    asks: AskStore,
    ask_id: str,
    *,
    outcome: str,
    adapter: str,
    now_ms: int,
    result: SendResult | None = None,
    thread_root_id: str | None = None,
    why: str = "",
    known: Ask | None = None,
) -> Ask | None:
    """Write on the ask how its send ended: landed (open, with where; its message linked for
    clicks and replies), or closed because nobody was asked. None when there is no record
    (an op older than the ask record)."""
    settling = settle_change(
        outcome,
        adapter=adapter,
        now_ms=now_ms,
        result=result,
        thread_root_id=thread_root_id,
        why=why,
    )
    if settling is None:
        return asks.get(ask_id)
    change, link = settling
    stored = asks.update(ask_id, change, known=known, link=link)
    return settled(asks, stored, outcome=outcome, why=why, now_ms=now_ms)


def settled(
    asks: AskStore, stored: Ask | None, *, outcome: str, why: str, now_ms: int
) -> Ask | None:
    """What follows once a send's ask is written as it ended: a rung that reached its person
    starts the wait of the ask it escalates; a rung whose send asked nobody lets that ask go
    on without it."""
    if stored is None or stored.escalates is None:
        return stored
    level = stored.level
    if outcome == "engaged":
        # The rung reached its person: the ask it escalates waits from now.
        asks.update(stored.escalates, lambda r: rung_landed(r, level, now_ms=now_ms))
        return stored
    end = CLOSED_AS.get(outcome)
    if end is not None and stored.closed == end:
        # A rung whose send asked nobody: the ask it escalates goes on without it.
        said = why or outcome
        asks.update(stored.escalates, lambda r: rung_unasked(r, level, end, said, now_ms=now_ms))
    return stored


def settle_from_op(
    asks: AskStore,
    ask_id: str,
    op: Mapping[str, str],
    *,
    adapter: str,
    now_ms: int,
    thread_root_id: str | None = None,
) -> Ask | None:
    """An ask still `pending` whose send's op has ended: written as the op says (landed where
    the op holds, or closed), in case the try that ended the op died before it wrote the
    ask. The send stage calls this for a redelivered send, the asks tick for an ask pending
    longer than a send lease. None when there is no such ask; the ask as it is when it is
    not pending or the op has not ended."""
    record = asks.get(ask_id)
    if record is None or record.state != "pending":
        return record
    outcome = op.get("state", "")
    if outcome == "refused":
        # A lapsed reservation the guardrails refused when it was taken again: the ask
        # recorded by an earlier try was never posted.
        why = "the guardrails refused it when its lapsed reservation was taken again"
        return settle_ask(
            asks, ask_id, outcome="send_blocked", adapter=adapter, now_ms=now_ms, why=why
        )
    result = None
    if outcome == "engaged" and op.get("messageId"):
        result = SendResult(channel_id=op.get("channelId", ""), message_id=op["messageId"])
    return settle_ask(
        asks,
        ask_id,
        outcome=outcome,
        adapter=adapter,
        now_ms=now_ms,
        result=result,
        thread_root_id=thread_root_id,
        why=f"its send ended {outcome}",
    )


def gate(ask: OutboundAsk, *, org: OrgSource, policy: SendPolicy, now_ms: int) -> SendGateVerdict:
    """The send gate's verdict on `ask`, in each reached person's own time zone."""
    view, _degraded = org.current()
    members = view.member_by_id
    quiet = policy.quiet_hours
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
        policy=policy,
        members=members,
        timezones=zones,
        default_tz=offset_of(default),
        now_ms=now_ms,
    )
