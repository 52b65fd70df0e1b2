"""Turn cost frames per seat (issue 10): written by `POST /v1/seats/{seat}/cost`, read back
per seat, and summed per objective across every seat for the goal steward's budget gate.

Each seat has a zset `keys.cost_frames(seat)` of frame ids scored by `atMs` (so a budget window
is one range read) and a hash `keys.cost_frame_ids(seat)` of id -> the frame's canonical JSON
(so a frame posted again is one). `SEATS` lists the seats that have frames, and a zset per
objective (`keys.cost_by_objective`) names its frames across seats, so the budget gate's
spend is two round trips whatever the number of seats and objectives. One Lua script
(`cost_record`) writes all of them at once, or nothing.

A frame's id is its `turnId` when it has one, else the SHA-256 of its canonical JSON; the same
id with the same JSON is a duplicate, with other JSON a conflict (`FrameConflict`).

Retention: a seat keeps the frames of the last `RETENTION_MS` (62 days, two of the longest,
monthly, budget windows) and at most `MAX_FRAMES_PER_SEAT`, trimmed oldest first on every
write; a frame stamped before the horizon is not recorded (`FrameExpired`), since it could
never count in any budget window.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import redis

from contracts.money import CostFrame
from pipeline.money import charge_of, spend_in_window
from workers.stores import keys
from workers.stores.scripts import script, text

DAY_MS = 86_400_000
RETENTION_MS = 62 * DAY_MS
MAX_FRAMES_PER_SEAT = 100_000
# The index of seats with frames, under the frames' own prefix; a seat id never starts with ':'.
SEATS = keys.cost_frames(":seats")
OBJECTIVE_MEMBER_SEP = "\x1f"  # in a member of an objective's index: seat US frame id


class FrameConflict(Exception):
    def __init__(self, frame_id: str, stored: CostFrame) -> None:
        super().__init__(f"frame {frame_id!r} was already recorded with other content")
        self.frame_id = frame_id
        self.stored = stored


class FrameExpired(Exception):
    def __init__(self, at_ms: int, horizon_ms: int) -> None:
        super().__init__(f"atMs {at_ms} is before the retention horizon {horizon_ms}")
        self.at_ms = at_ms
        self.horizon_ms = horizon_ms


@dataclass(frozen=True)
class Recorded:
    status: Literal["recorded", "duplicate"]
    frame_id: str
    frame: CostFrame


def canonical(frame: CostFrame) -> str:
    """The frame's JSON with sorted keys and no spaces: equal frames have equal text."""
    return json.dumps(frame.to_wire(), sort_keys=True, separators=(",", ":"))


def frame_id_of(frame: CostFrame) -> str:
    """Its `turnId`, else a hash of its canonical JSON."""
    if frame.turn_id is not None:
        return f"turn:{frame.turn_id}"
    return f"sha256:{hashlib.sha256(canonical(frame).encode()).hexdigest()}"


class Costs:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._record = script(client, "cost_record")

    def record(self, seat_id: str, frame: CostFrame, *, now_ms: int) -> Recorded:
        """Record `frame` (its `seatId` set to `seat_id`) once; `FrameConflict` when its id
        was recorded with other content, `FrameExpired` when it is older than retention."""
        frame = frame.model_copy(update={"seat_id": seat_id})
        frame_id, body = frame_id_of(frame), canonical(frame)
        horizon = now_ms - RETENTION_MS
        reply = self._record(
            keys=[
                keys.cost_frames(seat_id),
                keys.cost_frame_ids(seat_id),
                SEATS,
                keys.cost_by_objective(frame.objective or ""),
            ],
            args=[
                frame_id,
                body,
                frame.at_ms,
                horizon,
                MAX_FRAMES_PER_SEAT,
                seat_id,
                "1" if frame.objective is not None else "0",
                f"{seat_id}{OBJECTIVE_MEMBER_SEP}{frame_id}",
            ],
        )
        verb = text(reply[0])
        if verb == "conflict":
            raise FrameConflict(frame_id, CostFrame.model_validate_json(reply[1]))
        if verb == "expired":
            raise FrameExpired(frame.at_ms, horizon)
        return Recorded("duplicate" if verb == "duplicate" else "recorded", frame_id, frame)

    def frames(
        self, seat_id: str, *, since_ms: int = 0, until_ms: int | None = None
    ) -> list[CostFrame]:
        """A seat's frames with `atMs` in `[since_ms, until_ms)`, newest first."""
        return self._read([seat_id], since_ms, until_ms)

    def spend(self, objective: str, *, since_ms: int, until_ms: int) -> int:
        """The charges of `objective`'s frames, every seat's, with `atMs` in the window: its
        index's range, then each seat's frames in one pipeline (two round trips)."""
        members = self.r.zrangebyscore(keys.cost_by_objective(objective), since_ms, f"({until_ms}")
        by_seat: dict[str, list[str]] = {}
        for member in members:
            seat, _, frame_id = text(member).partition(OBJECTIVE_MEMBER_SEP)
            by_seat.setdefault(seat, []).append(frame_id)
        if not by_seat:
            return 0
        with self.r.pipeline(transaction=False) as pipe:
            for seat, ids in by_seat.items():
                pipe.hmget(keys.cost_frame_ids(seat), ids)
            replies = pipe.execute()
        frames = [CostFrame.model_validate_json(b) for r in replies for b in r if b is not None]
        return spend_in_window(frames, objective=objective, since_ms=since_ms, until_ms=until_ms)

    def _read(self, seats: Iterable[str], since_ms: int, until_ms: int | None) -> list[CostFrame]:
        upper = "+inf" if until_ms is None else f"({until_ms}"
        found: list[CostFrame] = []
        for seat in seats:
            reply = self.r.zrevrangebyscore(keys.cost_frames(seat), upper, since_ms)
            ids = [text(i) for i in reply]
            if ids:
                bodies = self.r.hmget(keys.cost_frame_ids(seat), ids)
                found.extend(CostFrame.model_validate_json(b) for b in bodies if b is not None)
        found.sort(key=lambda f: f.at_ms, reverse=True)
        return found


def totals(
    frames: Iterable[CostFrame], *, objective: str | None, since_ms: int, until_ms: int
) -> tuple[int, int]:
    """`(spend, shadow)` micros of the frames (of `objective`, when given) in the window."""
    chosen = [f for f in frames if objective is None or f.objective == objective]
    if objective is not None:
        spend = spend_in_window(chosen, objective=objective, since_ms=since_ms, until_ms=until_ms)
    else:
        spend = sum(charge_of(f) for f in chosen if since_ms <= f.at_ms < until_ms)
    shadow = sum(f.shadow_cost_micros or 0 for f in chosen if since_ms <= f.at_ms < until_ms)
    return spend, shadow
