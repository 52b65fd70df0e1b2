"""The claims store against a real Redis: a COLLABORATE item's claim is taken, renewed, held
against a second seat, taken over once its lease lapses (recorded with the previous holder)
and released; two seats never hold it at once, and its keys expire after the lease."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from contracts.backlog import BacklogEntry, ClaimResult
from workers.stores import keys
from workers.stores.backlog import Backlog
from workers.stores.claims import HISTORY_CAP, RETENTION_MS, Claims

OWNER = "scout"
ITEM = "stw_collab"
LEASE = 60_000
T0 = 1_000_000


def _entry(item_id: str = ITEM) -> BacklogEntry:
    wire: dict[str, Any] = {
        "id": item_id,
        "seatId": OWNER,
        "objectiveKey": "activation",
        "title": "Pair on the onboarding flow",
        "route": "COLLABORATE",
        "addedAtMs": 1_000,
        "claim": {"holderId": OWNER, "contributors": ["tally", "jo"]},
    }
    return BacklogEntry.model_validate(wire)


@pytest.fixture
def backlog(redis_client: redis.Redis) -> Backlog:
    store = Backlog(redis_client)
    store.add(_entry())
    return store


@pytest.fixture
def claims(redis_client: redis.Redis, backlog: Backlog) -> Claims:
    return Claims(redis_client)


def _take(claims: Claims, seat: str, now_ms: int, item_id: str = ITEM) -> ClaimResult:
    return claims.take(item_id, seat, owner_id=OWNER, now_ms=now_ms, lease_ms=LEASE)


def _claim_keys(r: redis.Redis) -> dict[bytes, Any]:
    return {k: r.dump(k) for k in sorted(r.scan_iter(match="sw:claim*"))}


def test_an_unclaimed_item_is_taken(claims: Claims) -> None:
    """The first take is `taken`: the caller holds it from now until now + lease, and the
    history records the take."""
    result = _take(claims, OWNER, T0)
    assert result.status == "taken" and result.holds
    assert (result.holder_id, result.since_ms, result.until_ms) == (OWNER, T0, T0 + LEASE)
    assert result.previous_holder_id is None
    state = claims.get(ITEM)
    assert state is not None and state.holder_id == OWNER and state.owner_id == OWNER
    assert (state.since_ms, state.until_ms) == (T0, T0 + LEASE)
    assert not state.lapsed(T0 + LEASE - 1) and state.lapsed(T0 + LEASE)
    [event] = claims.history(ITEM)
    assert (event.event, event.seat_id, event.at_ms, event.until_ms) == (
        "taken",
        OWNER,
        T0,
        T0 + LEASE,
    )


def test_the_holder_taking_again_renews_and_never_shortens(claims: Claims) -> None:
    """The holder's second take (the steward's rerun) is `renewed`: `sinceMs` stays, the lease
    is extended; a renewal with an earlier clock keeps the later end."""
    _take(claims, OWNER, T0)
    renewed = _take(claims, OWNER, T0 + 10_000)
    assert renewed.status == "renewed" and renewed.holds
    assert (renewed.since_ms, renewed.until_ms) == (T0, T0 + 10_000 + LEASE)
    earlier = _take(claims, OWNER, T0 + 5_000)
    assert earlier.status == "renewed" and earlier.until_ms == T0 + 10_000 + LEASE
    assert [e.event for e in claims.history(ITEM)] == ["taken", "renewed", "renewed"]


def test_another_seat_is_held_off_and_nothing_is_written(
    claims: Claims, redis_client: redis.Redis
) -> None:
    """While the holder's lease is live, another seat's take is `held`, naming the holder
    and when the lease ends, and the claim's keys are byte-for-byte unchanged."""
    _take(claims, OWNER, T0)
    before = _claim_keys(redis_client)
    held = _take(claims, "tally", T0 + LEASE - 1)
    assert held.status == "held" and not held.holds
    assert (held.holder_id, held.until_ms) == (OWNER, T0 + LEASE)
    assert _claim_keys(redis_client) == before


def test_a_lapsed_lease_is_taken_over_and_the_takeover_recorded(claims: Claims) -> None:
    """At `untilMs` the lease has lapsed: another seat's take is `takeover`, it holds the
    claim from now, and the history names it and the previous holder."""
    _take(claims, OWNER, T0)
    over = _take(claims, "tally", T0 + LEASE)
    assert over.status == "takeover" and over.previous_holder_id == OWNER
    assert (over.holder_id, over.since_ms, over.until_ms) == ("tally", T0 + LEASE, T0 + 2 * LEASE)
    state = claims.get(ITEM)
    assert state is not None and state.holder_id == "tally" and state.owner_id == OWNER
    last = claims.history(ITEM)[-1]
    assert (last.event, last.seat_id, last.previous_holder_id, last.at_ms) == (
        "takeover",
        "tally",
        OWNER,
        T0 + LEASE,
    )
    assert _take(claims, OWNER, T0 + LEASE + 1).status == "held"


def test_a_lapsed_holder_nobody_took_over_from_renews(claims: Claims) -> None:
    """A lapsed lease is not cleared by time: its holder taking again is `renewed`."""
    _take(claims, OWNER, T0)
    assert _take(claims, OWNER, T0 + 5 * LEASE).status == "renewed"


def test_release_by_the_holder_only(claims: Claims, redis_client: redis.Redis) -> None:
    """Another seat's release is `not_holder` and writes nothing; the holder's is `released`
    (recorded); then `none`, and the next take is a fresh `taken` with the owner kept."""
    _take(claims, OWNER, T0)
    before = _claim_keys(redis_client)
    assert claims.release(ITEM, "tally", now_ms=T0 + 1) == "not_holder"
    assert _claim_keys(redis_client) == before
    assert claims.release(ITEM, OWNER, now_ms=T0 + 2) == "released"
    assert claims.get(ITEM) is None and claims.owner(ITEM) == OWNER
    last = claims.history(ITEM)[-1]
    assert (last.event, last.seat_id, last.previous_holder_id, last.until_ms) == (
        "released",
        OWNER,
        OWNER,
        None,
    )
    before = _claim_keys(redis_client)
    assert claims.release(ITEM, OWNER, now_ms=T0 + 3) == "none"
    assert _claim_keys(redis_client) == before
    assert _take(claims, "tally", T0 + 4).status == "taken"


def test_a_close_releases_whoever_holds_it(claims: Claims) -> None:
    """`close` releases the holder whoever closes the item, and the history names both."""
    _take(claims, "tally", T0)
    assert claims.close(ITEM, by=OWNER, now_ms=T0 + 1) == "released"
    last = claims.history(ITEM)[-1]
    assert (last.event, last.seat_id, last.previous_holder_id) == ("released", OWNER, "tally")
    assert claims.close(ITEM, by=OWNER, now_ms=T0 + 2) == "none"


def test_an_item_not_open_is_not_claimed(
    claims: Claims, backlog: Backlog, redis_client: redis.Redis
) -> None:
    """A take of an item not on the owner's backlog, or closed, is `not_open` and writes
    nothing: a steward rerun cannot revive a closed item's claim."""
    assert _take(claims, OWNER, T0, item_id="stw_nowhere").status == "not_open"
    assert _claim_keys(redis_client) == {}
    backlog.done(OWNER, ITEM, by=OWNER, now_ms=T0)
    assert _take(claims, OWNER, T0 + 1).status == "not_open"
    assert _claim_keys(redis_client) == {}


def test_the_keys_expire_after_the_lease_and_the_history_is_capped(
    claims: Claims, redis_client: redis.Redis
) -> None:
    """Both keys carry a TTL of the lease plus the retention (30 days), kept after a
    release; the history never exceeds `HISTORY_CAP` entries."""
    _take(claims, OWNER, T0)
    for k in (keys.claim(ITEM), keys.claim_history(ITEM)):
        ttl = redis_client.pttl(k)
        assert LEASE + RETENTION_MS - 5_000 < ttl <= LEASE + RETENTION_MS
    claims.release(ITEM, OWNER, now_ms=T0 + 1)
    for k in (keys.claim(ITEM), keys.claim_history(ITEM)):
        assert RETENTION_MS - 5_000 < redis_client.pttl(k) <= RETENTION_MS
    for i in range(HISTORY_CAP + 10):
        _take(claims, OWNER, T0 + i)
    assert redis_client.xlen(keys.claim_history(ITEM)) == HISTORY_CAP
    assert len(claims.history(ITEM)) == HISTORY_CAP


def test_many_concurrent_takers_never_both_hold_it(claims: Claims, redis_url: str) -> None:
    """Given 16 seats taking at once in each of 6 lease periods (each period starting when the
    last lapses), then exactly one holds the claim per period and every other is `held`
    naming that one; the history has one entry per period."""
    seats = [f"seat{i}" for i in range(16)]
    periods = 6
    barrier = threading.Barrier(len(seats))
    results: dict[int, list[ClaimResult]] = {p: [] for p in range(periods)}
    lock = threading.Lock()

    def run(seat: str) -> None:
        client = redis.Redis.from_url(redis_url)
        mine = Claims(client)
        for p in range(periods):
            barrier.wait()
            result = _take(mine, seat, T0 + p * LEASE)
            with lock:
                results[p].append(result)
            barrier.wait()
        client.close()

    threads = [threading.Thread(target=run, args=(s,)) for s in seats]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    previous = None
    for p in range(periods):
        winners = [r for r in results[p] if r.holds]
        assert len(winners) == 1, results[p]
        [winner] = winners
        expected = "taken" if p == 0 else "renewed" if winner.holder_id == previous else "takeover"
        assert winner.status == expected
        losers = [r for r in results[p] if not r.holds]
        assert len(losers) == len(seats) - 1
        assert all(r.status == "held" and r.holder_id == winner.holder_id for r in losers)
        previous = winner.holder_id
    assert len(claims.history(ITEM)) == periods
