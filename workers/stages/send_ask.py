"""What the send stage puts on the wire and asks the send gate: the ask built from a reserved
decision (with the idempotency id that makes it exactly-once), and the gate's verdict on it
with each reached person's time zone from the org file."""

from __future__ import annotations

import logging

from contracts import EngagementDecision, GuardrailVerdict, SendGateVerdict, SendPolicy
from contracts.messages import OutboundAsk, ReservedEnvelope
from pipeline.send_gate import check_send, reached_member_ids
from workers.errors import ConfigError
from workers.org import OrgSource
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
