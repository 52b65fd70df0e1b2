"""When each beat-driven tick (the sweep, the steward's run, the controller's tick) last
finished, so that a beat that stopped ticking is seen (`seatwire status`, the
`seatwire_last_tick_timestamp_seconds` metric and the alert on it), not inferred from a
silence."""

from __future__ import annotations

import redis

from workers.stores import keys
from workers.stores.scripts import script, text


class Ticks:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._mark = script(client, "tick_mark")

    def mark(self, tick: str, at_ms: int) -> None:
        """`tick` finished at `at_ms` (kept only if it is the latest)."""
        self._mark(keys=[keys.TICKS], args=[tick, at_ms])

    def read(self) -> dict[str, int]:
        return {text(k): int(v) for k, v in self.r.hgetall(keys.TICKS).items()}
