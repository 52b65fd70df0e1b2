"""The inbound side's Redis store: what an event's places are known for, the per-seat record
of one resolved event, the trace of an event, and what a seat's sends teach.

One event is recorded for the seats it concerns in one script
(workers/stores/lua/inbound_record.lua): their verdicts, the inbox items, the notices, the
facts and the journal's final state land together or not at all, and only once — a
redelivered event finds the entry resolved and changes nothing, which is what makes the stage
idempotent per (event, seat). What an event costs in Redis does not grow with the seats it
does not concern: their verdicts are derived on read, by `trace`, from the event and the org
version it was decided against (one snapshot per org version, `keys.org_snapshot`, kept as
long as the last event decided against it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import redis

from contracts import Candidate, Directedness, InboxItem, SeatVerdict, Trace
from contracts.org import Channel
from pipeline.facts import Known, Learned, Places, places_of
from pipeline.fanout import Resolved, snapshot_channel, unconcerned_verdict
from workers.errors import PermanentError
from workers.stores import keys
from workers.stores.inbox import DEFAULT_ROOM, InboxRoom
from workers.stores.scripts import script, text

INBOUND_RETENTION_MS = 7 * 86_400_000  # above Slack's 24 h and GitHub's 72 h dedupe windows
FACT_TTL_MS = 30 * 86_400_000  # a thread nobody touched for a month is no longer followed


def inbound_tracking_id(delivery_id: str) -> str:
    """Deterministic: every delivery of one event (retries, Slack's app_mention twin) is one
    journal entry, so the entry is also the dedupe record."""
    return f"ev-{hashlib.sha256(delivery_id.encode()).hexdigest()[:24]}"


@dataclass(frozen=True)
class Recorded:
    new: bool  # False when an earlier delivery of the message had already recorded it
    state: str  # directed | ambient (or whatever final state the entry already had)
    positions: dict[str, int]  # seat -> inbox position, for the seats it was directed to
    # the seats it was directed to whose inbox was full: it is not in their inbox (their
    # ledgers have the row, workers/stores/inbox.py)
    full: tuple[str, ...] = ()


def _members(values: Iterable[Any]) -> frozenset[str]:
    return frozenset(text(v) for v in values)


def fact_keys(seat_id: str, places: Places, learned: Learned) -> list[tuple[str, str]]:
    """The (set key, seat id) additions that record what one event taught about one seat."""
    out: list[tuple[str, str]] = []
    channel = places.channel_id
    if channel is not None:
        if learned.spoke_in:
            out.append((keys.spoke_in(channel, learned.spoke_in), seat_id))
        if learned.named_in:
            out.append((keys.named_in(channel, learned.named_in), seat_id))
        if learned.joined:
            out.append((keys.channel_seats(channel), seat_id))
    if learned.owns_item and places.item_id:
        out.append((keys.item_seats(places.item_id), seat_id))
    return out


class InboundStore:
    def __init__(
        self,
        client: redis.Redis,
        *,
        retention_ms: int = INBOUND_RETENTION_MS,
        fact_ttl_ms: int = FACT_TTL_MS,
        room: InboxRoom = DEFAULT_ROOM,
    ) -> None:
        self.r = client
        self.room = room
        self.retention_ms = retention_ms
        self.fact_ttl_ms = fact_ttl_ms
        self._record = script(client, "inbound_record")
        self._snapshots: set[str] = set()  # org versions this store has written

    def known(self, places: Places, channel: Channel | None, *, membership: bool) -> Known:
        """What the stores know about an event's places, for every seat: at most one round
        trip, none when nothing stored bears on it. Learned membership is read only when it
        can count (`membership`: a conversation the org file does not list)."""
        pipe = self.r.pipeline(transaction=False)
        reads: list[str] = []
        if places.channel_id is not None:
            if membership:
                pipe.smembers(keys.channel_seats(places.channel_id))
                reads.append("channel")
            if places.thread_root_id is not None:
                pipe.smembers(keys.spoke_in(places.channel_id, places.thread_root_id))
                pipe.smembers(keys.named_in(places.channel_id, places.thread_root_id))
                reads += ["spoke", "named"]
        if places.item_id is not None:
            pipe.smembers(keys.item_seats(places.item_id))
            reads.append("item")
        got = dict(zip(reads, pipe.execute(), strict=True)) if reads else {}
        return Known(
            channel=channel,
            channel_seats=_members(got.get("channel", ())),
            spoke=_members(got.get("spoke", ())),
            named=_members(got.get("named", ())),
            item_seats=_members(got.get("item", ())),
        )

    def record(
        self,
        tracking_id: str,
        candidate: Candidate,
        resolved: Sequence[Resolved],
        places: Places,
        *,
        now_ms: int,
        org: tuple[str, str],
        seats: int,
    ) -> Recorded:
        """Record the event for the seats it concerns (`resolved`) at once, against `org`
        (its version and snapshot JSON, `OrgView.snapshot`) of `seats` seats in all; a repeat
        changes nothing."""
        item_keys: list[str] = []
        seat_args: list[str] = []
        facts: list[tuple[str, str]] = []
        directed = 0
        for r in resolved:
            v = r.verdict
            verdict = _seat_prefix(r.seat_id) + _verdict_fields(v)

            item = ""
            if v.directed:
                directed += 1
                item = _item_json(candidate, v)
                item_keys += InboxRoom.seat_keys(r.seat_id)
            seat_args += [r.seat_id, verdict, item]
            if r.learned:
                facts += fact_keys(r.seat_id, places, r.learned)
        state = "directed" if directed else "ambient"
        summary = json.dumps({"seats": seats, "concerned": len(resolved), "directed": directed})
        version, snapshot = org

        def run(send_snapshot: bool) -> list[Any]:
            reply: list[Any] = self._record(
                keys=[
                    keys.journal(tracking_id),
                    keys.JOURNAL_OPEN,
                    keys.JOURNAL_FAILED,
                    keys.seat_verdicts(tracking_id),
                    keys.org_snapshot(version),
                    *InboxRoom.KEYS,
                    *item_keys,
                    *(k for k, _ in facts),
                    *keys.CONTROLLER_WAKE,
                ],
                args=[
                    now_ms,
                    self.retention_ms,
                    self.fact_ttl_ms,
                    state,
                    summary,
                    len(resolved),
                    len(facts),
                    tracking_id,
                    version,
                    snapshot if send_snapshot else "",
                    *self.room.args(),
                    *seat_args,
                    *(seat for _, seat in facts),
                ],
            )
            return reply

        try:
            reply = run(version not in self._snapshots)
            if text(reply[0]) == "snapshot":  # expired, or lost with a Redis that restarted
                reply = run(True)
        except redis.ResponseError as exc:
            if "NOENTRY" in str(exc):
                raise PermanentError(str(exc)) from exc
            raise
        self._snapshots.add(version)
        verb, final, *pairs = (text(x) for x in reply)
        placed = {pairs[i]: int(pairs[i + 1]) for i in range(0, len(pairs), 2)}
        return Recorded(
            new=verb == "ok",
            state=final,
            positions={seat: p for seat, p in placed.items() if p > 0},
            full=tuple(seat for seat, p in placed.items() if p == 0),
        )

    def notices(self, seat_id: str) -> int:
        """Directed events ever placed in the seat's inbox (the work controller's notices)."""
        value = self.r.hget(keys.seat_state(seat_id), "notices")
        return int(value) if value is not None else 0

    def trace(self, delivery_id: str) -> Trace | None:
        """Every recorded decision about one inbound event, per seat; None when never seen."""
        tracking_id = inbound_tracking_id(delivery_id)
        pipe = self.r.pipeline(transaction=False)
        pipe.hgetall(keys.journal(tracking_id))
        pipe.hgetall(keys.seat_verdicts(tracking_id))
        entry_raw, verdicts_raw = pipe.execute()
        if not entry_raw:
            return None
        entry = {text(k): text(v) for k, v in entry_raw.items()}
        payload = json.loads(entry.get("payload") or "{}")
        candidate = payload.get("candidate") if isinstance(payload, dict) else None
        candidate = candidate if isinstance(candidate, dict) else {}
        stored = [SeatVerdict.model_validate_json(v) for v in verdicts_raw.values()]
        version = entry.get("orgVersion")
        derived = self._derived(candidate, version, {v.seat_id for v in stored})
        seats = sorted([*stored, *derived], key=lambda s: (not s.directed, s.seat_id))
        resolved_at = entry.get("resolvedAtMs")
        return Trace(
            delivery_id=delivery_id,
            tracking_id=tracking_id,
            state=entry.get("state", "unknown"),
            source=candidate.get("source") or payload.get("source"),
            family=candidate.get("family"),
            accepted_at_ms=int(entry.get("acceptedAtMs", 0)),
            resolved_at_ms=int(resolved_at) if resolved_at else None,
            deliveries=max(1, int(entry.get("deliveries", 1))),
            reason=entry.get("reason"),
            detail=entry.get("detail"),
            failed_stage=entry.get("failedStage"),
            error=entry.get("error"),
            org_version=version,
            seats=tuple(seats),
        )

    def _derived(
        self, candidate: dict[str, Any], version: str | None, stored: set[str]
    ) -> list[SeatVerdict]:
        """The verdicts of the seats the event did not concern, derived as the stage would
        have given them, from the snapshot of the org version it was decided against."""
        if not version or not candidate:
            return []
        raw = self.r.get(keys.org_snapshot(version))
        if raw is None:
            return []  # the snapshot outlives every entry decided against it; this one is gone
        snapshot = json.loads(raw)
        channel = snapshot_channel(snapshot, places_of(candidate).channel_id)
        out = []
        for seat_id in snapshot.get("seats") or ():
            if seat_id in stored:
                continue
            v = unconcerned_verdict(candidate, channel, seat_id)
            out.append(
                SeatVerdict(
                    seat_id=seat_id,
                    directed=v.directed,
                    surface=v.surface,
                    reason=v.reason,
                    why=v.why,
                    derived=True,
                )
            )
        return out


@lru_cache(maxsize=4096)
def _seat_prefix(seat_id: str) -> str:
    """`{"seatId":"<seat>",`: the start of a seat's verdict, encoded once per seat."""
    return json.dumps({"seatId": seat_id}, separators=(",", ":"))[:-1] + ","


@lru_cache(maxsize=1024)
def _verdict_fields(verdict: Directedness) -> str:
    """A `SeatVerdict`'s JSON after its seatId (with "position":0 for the script to fill in
    when directed): an event asks the same few verdicts of every seat, so each is encoded
    once."""
    whole = SeatVerdict(
        seat_id="",
        directed=verdict.directed,
        surface=verdict.surface,
        reason=verdict.reason,
        why=verdict.why,
        position=0 if verdict.directed else None,
    ).model_dump_json(by_alias=True, exclude={"inbox_full"})  # the script adds it if full
    prefix = '{"seatId":"",'
    assert whole.startswith(prefix)
    return whole[len(prefix) :]


def _item_json(candidate: Candidate, verdict: Directedness) -> str:
    """An inbox item with position 0, which the script replaces with the item's place."""
    item = InboxItem.model_construct(
        position=0,
        delivery_id=candidate.delivery_id,
        family=candidate.family,
        source=candidate.source,
        surface=verdict.surface,
        reason=verdict.reason,
        why=verdict.why,
        at_ms=candidate.at_ms,
        candidate=candidate,
    )
    return item.model_dump_json(by_alias=True)
