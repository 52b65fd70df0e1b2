"""Exclusive claims on COLLABORATE backlog items (issue 10 point 2, DESIGN.md section 9): a
lease in Redis so that two seats can never both drive the same item.

One item's claim is a hash `keys.claim(item)` (holder, ownerId, sinceMs, untilMs) and its
history a stream `keys.claim_history(item)` (one entry per take, renewal, takeover and
release, oldest first). Every write is one Lua script, so the check and the write are one
step: `claim_take` answers `held` to a second seat while the holder's lease is live, whatever
the interleaving, and `claim_release` lets go only for the holder (or for a close).

    take     taken | renewed | takeover (written, recorded)   held | not_open (nothing written)
    release  released (written, recorded)                     not_holder | none (nothing)
    close    the item was closed: whoever holds it is released

A lapsed lease (`untilMs <= now`) is not cleared by time: its holder still holds it, may renew
it (`renewed`) or release it, until another collaborator takes it over (`takeover`, recorded
with the previous holder). A take also needs the item open on its owner's backlog (the zset
`keys.backlog_open(owner)`), checked inside the script, so a claim never outlives a close that
raced it and a steward rerun of a closed item's dispatch claims nothing. The same holder
taking again is `renewed`, so the steward's rerun of a dispatch is safe.

Time is the caller's `now_ms`. Memory is bounded: both keys expire `RETENTION_MS` (30 days)
after the lease ends (`untilMs - now + 30 days`, as a relative PEXPIRE so that a test clock
works), or 30 days after a release; the history keeps at most `HISTORY_CAP` entries. The hash
keeps `ownerId` after a release, so the item is still found by id alone (`owner`).
"""

from __future__ import annotations

from typing import cast

import redis

from contracts.backlog import ClaimEvent, ClaimEventKind, ClaimResult, ClaimState
from contracts.journal import ClaimReleaseVerb, ClaimTakeVerb
from workers.stores import keys
from workers.stores.scripts import script, text

RETENTION_MS = 30 * 86_400_000  # how long a claim and its history outlive the lease
HISTORY_CAP = 256  # history entries kept per item (the oldest are trimmed)


class Claims:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._take = script(client, "claim_take")
        self._release = script(client, "claim_release")

    def take(
        self, item_id: str, seat_id: str, *, owner_id: str, now_ms: int, lease_ms: int
    ) -> ClaimResult:
        """Seat `seat_id` takes, renews or takes over the claim on `item_id` (an item open on
        `owner_id`'s backlog) until `now_ms + lease_ms`; `held` (another seat's live lease,
        named in the result) and `not_open` write nothing."""
        reply = self._take(
            keys=[keys.claim(item_id), keys.claim_history(item_id), keys.backlog_open(owner_id)],
            args=[item_id, seat_id, owner_id, now_ms, lease_ms, RETENTION_MS, HISTORY_CAP],
        )
        verb = cast(ClaimTakeVerb, text(reply[0]))
        if verb == "not_open":
            return ClaimResult(status=verb, item_id=item_id)
        holder, until, since, previous = (text(v) for v in reply[1:5])
        return ClaimResult(
            status=verb,
            item_id=item_id,
            holder_id=holder,
            owner_id=owner_id,
            since_ms=int(since) if since else None,
            until_ms=int(until),
            previous_holder_id=previous or None,
        )

    def release(self, item_id: str, seat_id: str, *, now_ms: int) -> ClaimReleaseVerb:
        """The holder `seat_id` lets the claim go: `released`; `not_holder` when another seat
        holds it, `none` when nobody does (both write nothing)."""
        return self._run_release(item_id, seat_id, seat_id, now_ms)

    def close(self, item_id: str, *, by: str, now_ms: int) -> ClaimReleaseVerb:
        """The item was closed by `by`: whoever holds its claim is released (`released`, the
        history naming `by` and the previous holder), or `none`."""
        return self._run_release(item_id, by, "", now_ms)

    def _run_release(self, item_id: str, by: str, holder: str, now_ms: int) -> ClaimReleaseVerb:
        reply = self._release(
            keys=[keys.claim(item_id), keys.claim_history(item_id)],
            args=[by, holder, now_ms, RETENTION_MS, HISTORY_CAP],
        )
        return cast(ClaimReleaseVerb, text(reply[0]))

    def get(self, item_id: str) -> ClaimState | None:
        """Who holds the claim now, as stored (see `ClaimState.lapsed`); None when nobody."""
        holder, owner, since, until = self.r.hmget(
            keys.claim(item_id), ["holder", "ownerId", "sinceMs", "untilMs"]
        )
        if holder is None or owner is None or since is None or until is None:
            return None
        return ClaimState(
            item_id=item_id,
            holder_id=text(holder),
            owner_id=text(owner),
            since_ms=int(since),
            until_ms=int(until),
        )

    def owner(self, item_id: str) -> str | None:
        """The seat whose backlog holds `item_id`, as its claim recorded it (held or not)."""
        value = self.r.hget(keys.claim(item_id), "ownerId")
        return None if value is None else text(value)

    def history(self, item_id: str) -> list[ClaimEvent]:
        """Every write to the claim still kept, oldest first."""
        events: list[ClaimEvent] = []
        for _id, fields in self.r.xrange(keys.claim_history(item_id)) or []:
            if fields is None:  # only a deleted entry read through a group has no fields
                continue
            f = {text(k): text(v) for k, v in fields.items()}
            events.append(
                ClaimEvent(
                    event=cast(ClaimEventKind, f["event"]),
                    seat_id=f["seatId"],
                    previous_holder_id=f.get("previous") or None,
                    at_ms=int(f["atMs"]),
                    until_ms=int(f["untilMs"]) if f.get("untilMs") else None,
                )
            )
        return events
