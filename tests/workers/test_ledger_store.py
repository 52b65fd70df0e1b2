"""Behaviour of the engagement ledger store (`workers.stores.Ledger`) against a REAL Redis.

Every time is explicit (`now_ms`), so reservation expiry, send leases and the rolling windows
are exercised exactly. docs/architecture.md ("Guardrails", "The send stage") and
docs/reliability.md; fault test 12 there (a re-sent EVALSHA must not reserve twice).
"""

from __future__ import annotations

import json
import time
from typing import Any, cast

import pytest
import redis

from contracts import EngagementDecision, GuardrailVerdict, LedgerRow, Limits
from contracts.guardrails import DAY_MS, HOUR_MS
from contracts.journal import OpFinalState
from pipeline.guardrails import check_guardrails
from workers.stores import keys
from workers.stores.journal import Journal
from workers.stores.ledger import Ledger

NOW = 1_700_000_000_000
TTL = 60_000  # reservation ttl used by these tests
LEASE = 30_000  # send lease used by these tests


def decision(
    work: str = "w1",
    key: str = "dk1",
    targets: tuple[str, ...] = ("ana",),
    *,
    surface: str = "dm",
) -> EngagementDecision:
    """An engaging decision in the wire's camelCase."""
    return EngagementDecision.model_validate(
        {
            "engage": True,
            "workId": work,
            "dedupeKey": key,
            "targets": [{"memberId": t} for t in targets],
            "surface": surface,
            "reasonCode": "blocked",
        }
    )


def ledger(client: redis.Redis, **limits: Any) -> Ledger:
    return Ledger(client, limits=Limits(**limits), reservation_ttl_ms=TTL)


def reserve(
    lg: Ledger, op_id: str, d: EngagementDecision, *, seat: str = "seat-a", now: int = NOW
) -> GuardrailVerdict:
    return lg.reserve(op_id, decision=d, seat_id=seat, tracking_id=f"t-{op_id}", now_ms=now)


def begin(lg: Ledger, op_id: str, *, token: str, now: int) -> tuple[str, str]:
    start = lg.begin_send(
        op_id,
        tracking_id=f"t-{op_id}",
        token=token,
        lease_ms=LEASE,
        now_ms=now,
    )
    return start.verb, start.info


def row_for(
    d: EngagementDecision, *, seat: str = "seat-a", outcome: str, at: int = NOW, op_id: str = ""
) -> LedgerRow:
    """The ledger row an outcome writes; a refusal's row carries its refusal code."""
    return LedgerRow.model_validate(
        {
            "atMs": at,
            "seatId": seat,
            "workId": d.work_id,
            "dedupeKey": d.dedupe_key,
            "engaged": outcome == "engaged",
            "outcome": "rate_limited_target" if outcome == "refused" else outcome,
            "surface": d.surface,
            "roomCreated": d.surface == "new_room",
            "targets": [t.to_wire() for t in d.targets],
            "trackingId": f"t-{op_id}",
        }
    )


def finish(
    lg: Ledger,
    op_id: str,
    d: EngagementDecision,
    *,
    outcome: str,
    token: str = "",
    now: int = NOW,
    seat: str = "seat-a",
    at: int | None = None,
) -> str:
    return lg.finish(
        op_id,
        outcome=cast(OpFinalState, outcome),  # the tests pass it final states only
        row=row_for(d, seat=seat, outcome=outcome, at=NOW if at is None else at, op_id=op_id),
        tracking_id=f"t-{op_id}",
        token=token,
        now_ms=now,
    ).verb


def target_count(client: redis.Redis, member: str) -> int:
    return int(client.zcard(keys.by_target(member)))


# --------------------------------------------------------------------------- reserve


def test_reserve_replay_returns_the_same_verdict_without_a_second_reservation(
    redis_client: redis.Redis,
) -> None:
    """The same op id reserved again (a re-sent EVALSHA) gets the first verdict, counted once."""
    lg = ledger(redis_client)
    d = decision()
    first = reserve(lg, "op1", d)
    assert first.allowed and first.code is None and first.attempt == 1
    op = lg.op_state("op1")
    assert op["state"] == "reserved" and int(op["atMs"]) == NOW
    assert int(op["expiresAtMs"]) == NOW + TTL

    again = reserve(lg, "op1", d, now=NOW + 5_000)
    later = reserve(lg, "op1", d, now=NOW + 10_000)
    assert again == first and later == first
    assert target_count(redis_client, "ana") == 1
    assert redis_client.zcard(keys.by_dedupe_key("dk1")) == 1
    assert redis_client.zcard(keys.by_work("w1")) == 1
    assert redis_client.zcard(keys.by_seat("seat-a")) == 1
    assert redis_client.zcard(keys.PENDING) == 1
    assert lg.op_state("op1")["atMs"] == str(NOW)


def test_a_refused_op_replays_its_refusal(redis_client: redis.Redis) -> None:
    """A refused op id asked again returns the same refusal and never reserves."""
    lg = ledger(redis_client, per_target_per_day=1)
    assert reserve(lg, "op1", decision("w1", "dk1")).allowed
    refused = reserve(lg, "op2", decision("w2", "dk2"), now=NOW + 1)
    assert refused.code == "rate_limited_target"
    # Even after the blocking reservation has lapsed, op2's answer is the one it was given.
    assert reserve(lg, "op2", decision("w2", "dk2"), now=NOW + TTL + 5) == refused
    assert lg.op_state("op2")["state"] == "refused"
    assert redis_client.zscore(keys.by_target("ana"), "op2") is None


def _refusal_setup(
    code: str,
) -> tuple[dict[str, int], list[tuple[EngagementDecision, int]], EngagementDecision]:
    """Limits, the asks that fill one limit (decision, time), and the ask it then refuses."""
    if code == "already_engaged":
        return {}, [(decision("w1", "K"), NOW - HOUR_MS)], decision("w1", "K", ("bo",))
    if code == "rate_limited_ask":
        return (
            {"reengage_after_ms": HOUR_MS, "max_attempts_per_ask": 2},
            [(decision("w1", "K"), NOW - 3 * HOUR_MS), (decision("w1", "K"), NOW - 2 * HOUR_MS)],
            decision("w1", "K"),
        )
    if code == "rate_limited_target":
        return (
            {"per_target_per_day": 2},
            [(decision("w1", "k1"), NOW - 20 * HOUR_MS), (decision("w2", "k2"), NOW - 2 * HOUR_MS)],
            decision("w3", "k3", ("bo", "ana")),
        )
    if code == "rate_limited_work":
        return (
            {"per_work_per_day": 2},
            [
                (decision("w1", "k1", ("x",)), NOW - 5 * HOUR_MS),
                (decision("w1", "k2", ("y",)), NOW - HOUR_MS),
            ],
            decision("w1", "k3", ("z",)),
        )
    if code == "rate_limited_seat":
        return (
            {"per_seat_per_hour": 2},
            [
                (decision("w1", "k1", ("x",)), NOW - 30 * 60_000),
                (decision("w2", "k2", ("y",)), NOW - 60_000),
            ],
            decision("w3", "k3", ("z",)),
        )
    assert code == "rate_limited_rooms"
    return (
        {"rooms_per_day": 1},
        [(decision("w1", "k1", ("x",), surface="new_room"), NOW - 10 * HOUR_MS)],
        decision("w2", "k2", ("y",), surface="new_room"),
    )


@pytest.mark.parametrize(
    "code",
    [
        "already_engaged",
        "rate_limited_ask",
        "rate_limited_target",
        "rate_limited_work",
        "rate_limited_seat",
        "rate_limited_rooms",
    ],
)
def test_each_refusal_code_is_reachable_through_the_store(
    redis_client: redis.Redis, code: str
) -> None:
    """Filling one limit with engaged asks makes the script refuse the next ask with its code."""
    limits, earlier, ask = _refusal_setup(code)
    lg = Ledger(redis_client, limits=Limits(**limits), reservation_ttl_ms=DAY_MS)
    for i, (d, at) in enumerate(earlier):
        op = f"old{i}"
        assert reserve(lg, op, d, now=at).allowed, f"setup ask {i} was refused"
        assert begin(lg, op, token="t", now=at + 1)[0] == "go"
        assert finish(lg, op, d, outcome="engaged", token="t", now=at + 2, at=at) == "ok"
    before = {k: redis_client.zcard(k) for k in redis_client.scan_iter("sw:g:[tdwsr]*")}

    verdict = reserve(lg, "new", ask)
    assert not verdict.allowed
    assert verdict.code == code
    assert lg.op_state("new")["state"] == "refused"
    # A refusal holds no place anywhere.
    assert {k: redis_client.zcard(k) for k in redis_client.scan_iter("sw:g:[tdwsr]*")} == before
    assert redis_client.zscore(keys.PENDING, "new") is None


def test_a_new_room_is_refused_by_the_rooms_limit_but_a_dm_is_not(
    redis_client: redis.Redis,
) -> None:
    """The rooms limit applies only to an ask that creates a room."""
    lg = ledger(redis_client, rooms_per_day=1)
    assert reserve(lg, "r1", decision("w1", "k1", ("x",), surface="new_room")).allowed
    assert redis_client.zscore(keys.rooms_of("seat-a"), "r1") == NOW
    assert (
        reserve(lg, "r2", decision("w2", "k2", ("y",), surface="new_room"), now=NOW + 1).code
        == "rate_limited_rooms"
    )
    assert reserve(lg, "d1", decision("w3", "k3", ("z",)), now=NOW + 2).allowed
    assert redis_client.zscore(keys.rooms_of("seat-a"), "d1") is None


def test_refused_row_is_written_once_even_if_finish_is_called_twice(
    redis_client: redis.Redis,
) -> None:
    """finish(outcome="refused") twice leaves exactly one ledger row for the refused op."""
    lg = ledger(redis_client, per_target_per_day=1)
    assert reserve(lg, "op1", decision("w1", "k1")).allowed
    d = decision("w2", "k2")
    assert reserve(lg, "op2", d, now=NOW + 1).code == "rate_limited_target"

    assert finish(lg, "op2", d, outcome="refused", now=NOW + 2) == "ok"
    assert finish(lg, "op2", d, outcome="refused", now=NOW + 3) in ("ok", "done")
    assert redis_client.xlen(keys.ledger_stream("seat-a")) == 1
    rows = lg.read(seat_ids=["seat-a"])
    assert len(rows) == 1 and rows[0].outcome == "rate_limited_target"
    assert rows[0].work_id == "w2" and rows[0].tracking_id == "t-op2"
    assert lg.op_state("op2")["state"] == "refused"


def test_finish_refused_on_an_allowed_op_is_an_error(redis_client: redis.Redis) -> None:
    """An allowed (reserved) op cannot be written down as refused."""
    lg = ledger(redis_client)
    d = decision()
    assert reserve(lg, "op1", d).allowed
    with pytest.raises(redis.ResponseError, match="BADSTATE"):
        finish(lg, "op1", d, outcome="refused")
    assert redis_client.xlen(keys.ledger_stream("seat-a")) == 0


# --------------------------------------------------------------------------- send states


def test_begin_send_go_then_busy_under_a_live_lease_then_reconcile_after_it(
    redis_client: redis.Redis,
) -> None:
    """A second begin_send is busy while the lease lives and reconciles once it has lapsed."""
    lg = ledger(redis_client)
    assert reserve(lg, "op1", decision()).allowed
    assert begin(lg, "op1", token="A", now=NOW + 10) == ("go", str(NOW))
    op = lg.op_state("op1")
    assert op["state"] == "sending" and op["token"] == "A"
    assert int(op["leaseUntilMs"]) == NOW + 10 + LEASE
    assert op["attempt"] == "1"  # the ask's idempotency id is built from the op's attempt
    assert redis_client.zscore(keys.PENDING, "op1") is None  # a send in flight never expires

    assert begin(lg, "op1", token="B", now=NOW + 10 + LEASE - 1) == ("busy", str(NOW + 10 + LEASE))
    assert lg.op_state("op1")["token"] == "A"

    assert begin(lg, "op1", token="C", now=NOW + 10 + LEASE) == ("reconcile", str(NOW))
    op = lg.op_state("op1")
    assert op["token"] == "C" and int(op["leaseUntilMs"]) == NOW + 10 + 2 * LEASE
    # The send still holds its place, long after the reservation ttl.
    assert target_count(redis_client, "ana") == 1


def test_begin_send_on_unknown_and_final_and_missing_ops(redis_client: redis.Redis) -> None:
    """begin_send says done for a final op and missing for an op that was never reserved."""
    lg = ledger(redis_client)
    d = decision()
    assert begin(lg, "nope", token="A", now=NOW) == ("missing", "")
    assert reserve(lg, "op1", d).allowed
    assert begin(lg, "op1", token="A", now=NOW + 1)[0] == "go"
    assert finish(lg, "op1", d, outcome="engaged", token="A", now=NOW + 2) == "ok"
    assert begin(lg, "op1", token="B", now=NOW + 3) == ("done", "engaged")


def test_an_expired_reservation_stops_counting_and_begin_send_says_expired(
    redis_client: redis.Redis,
) -> None:
    """Past its ttl a reservation frees its place and begin_send reports expired."""
    lg = ledger(redis_client, per_target_per_day=1)
    d = decision("w1", "k1")
    assert reserve(lg, "op1", d).allowed
    assert reserve(lg, "op2", decision("w2", "k2"), now=NOW + TTL - 1).code == "rate_limited_target"

    # At exactly now == expiresAtMs the reservation no longer counts.
    v = reserve(lg, "op3", decision("w3", "k3"), now=NOW + TTL)
    assert v.allowed and v.counts["targets"] == {"ana": 0}
    assert lg.op_state("op1")["state"] == "expired"
    assert redis_client.zrange(keys.by_target("ana"), 0, -1) == [b"op3"]
    assert redis_client.zcard(keys.by_dedupe_key("k1")) == 0
    assert redis_client.zscore(keys.PENDING, "op1") is None

    assert begin(lg, "op1", token="A", now=NOW + TTL + 1) == ("expired", "")
    assert lg.op_state("op1")["state"] == "expired"


def test_begin_send_itself_expires_a_lapsed_reservation(redis_client: redis.Redis) -> None:
    """begin_send past the ttl (no reserve ran in between) releases the place and says expired."""
    lg = ledger(redis_client)
    d = decision()
    assert reserve(lg, "op1", d).allowed
    assert begin(lg, "op1", token="A", now=NOW + TTL) == ("expired", "")
    assert lg.op_state("op1")["state"] == "expired"
    assert target_count(redis_client, "ana") == 0
    assert redis_client.zcard(keys.PENDING) == 0
    assert redis_client.zcard(keys.by_dedupe_key("dk1")) == 0

    # The send stage then re-checks: the same op id is judged again at the new time.
    again = reserve(lg, "op1", d, now=NOW + TTL + 5)
    assert again.allowed and again.attempt == 1
    assert int(lg.op_state("op1")["atMs"]) == NOW + TTL + 5
    assert redis_client.zscore(keys.by_target("ana"), "op1") == NOW + TTL + 5
    assert begin(lg, "op1", token="B", now=NOW + TTL + 6) == ("go", str(NOW + TTL + 5))


def test_finish_with_a_stale_token_returns_stale(redis_client: redis.Redis) -> None:
    """A worker whose lease was taken over cannot record the outcome."""
    lg = ledger(redis_client)
    d = decision()
    assert reserve(lg, "op1", d).allowed
    assert begin(lg, "op1", token="A", now=NOW + 1)[0] == "go"
    assert begin(lg, "op1", token="B", now=NOW + 1 + LEASE)[0] == "reconcile"

    assert finish(lg, "op1", d, outcome="engaged", token="A", now=NOW + LEASE + 2) == "stale"
    assert lg.op_state("op1")["state"] == "sending"
    assert redis_client.xlen(keys.ledger_stream("seat-a")) == 0

    assert finish(lg, "op1", d, outcome="engaged", token="B", now=NOW + LEASE + 3) == "ok"
    assert finish(lg, "op1", d, outcome="engaged", token="B", now=NOW + LEASE + 4) == "done"
    assert redis_client.xlen(keys.ledger_stream("seat-a")) == 1


def test_send_failed_releases_the_reservation_while_engaged_keeps_it(
    redis_client: redis.Redis,
) -> None:
    """A definite failure gives the place back; an engagement keeps it."""
    lg = ledger(redis_client, per_target_per_day=1)
    failed, kept = decision("w1", "k1"), decision("w2", "k2")

    assert reserve(lg, "f", failed).allowed
    assert begin(lg, "f", token="A", now=NOW + 1)[0] == "go"
    assert target_count(redis_client, "ana") == 1
    assert finish(lg, "f", failed, outcome="send_failed", token="A", now=NOW + 2) == "ok"
    assert target_count(redis_client, "ana") == 0
    assert redis_client.zcard(keys.by_dedupe_key("k1")) == 0
    assert redis_client.zcard(keys.by_work("w1")) == 0
    assert redis_client.zcard(keys.by_seat("seat-a")) == 0
    assert lg.op_state("f")["state"] == "send_failed"

    assert reserve(lg, "e", kept, now=NOW + 3).allowed
    assert begin(lg, "e", token="B", now=NOW + 4)[0] == "go"
    assert finish(lg, "e", kept, outcome="engaged", token="B", now=NOW + 5) == "ok"
    assert target_count(redis_client, "ana") == 1
    assert lg.op_state("e")["state"] == "engaged"
    # The engagement still counts long after the reservation ttl would have lapsed.
    late = reserve(lg, "z", decision("w3", "k3"), now=NOW + 23 * HOUR_MS)
    assert late.code == "rate_limited_target"
    # ...and stops counting once it has left the rolling 24 h window.
    assert reserve(lg, "y", decision("w4", "k4"), now=NOW + 3 + DAY_MS).allowed


def test_an_op_finished_engaged_straight_from_reserved_keeps_counting_past_the_ttl(
    redis_client: redis.Redis,
) -> None:
    """The expiry sweep frees only reservations, never an engagement still listed as pending."""
    lg = ledger(redis_client, per_target_per_day=1)
    d = decision()
    assert reserve(lg, "op1", d).allowed
    # finish without a token skips the lease check, so it may follow the reservation directly.
    assert finish(lg, "op1", d, outcome="engaged", now=NOW + 1) == "ok"

    later = reserve(lg, "op2", decision("w2", "k2"), now=NOW + TTL + 1)
    assert later.code == "rate_limited_target"
    assert lg.op_state("op1")["state"] == "engaged"
    assert redis_client.zrange(keys.by_target("ana"), 0, -1) == [b"op1"]
    assert redis_client.zcard(keys.PENDING) == 0


def test_send_blocked_also_releases_and_finish_is_idempotent(redis_client: redis.Redis) -> None:
    """send_blocked frees the place, and a second finish of any outcome is `done`."""
    lg = ledger(redis_client)
    d = decision()
    assert reserve(lg, "op1", d).allowed
    assert finish(lg, "op1", d, outcome="send_blocked", now=NOW + 1) == "ok"
    assert target_count(redis_client, "ana") == 0
    assert finish(lg, "op1", d, outcome="engaged", now=NOW + 2) == "done"
    assert lg.op_state("op1")["state"] == "send_blocked"
    assert redis_client.xlen(keys.ledger_stream("seat-a")) == 1


def test_abandon_moves_sending_to_unknown_so_the_next_begin_reconciles(
    redis_client: redis.Redis,
) -> None:
    """An ambiguous failure marks the op unknown; the next begin_send reconciles, even at once."""
    lg = ledger(redis_client, per_target_per_day=1)
    d = decision()
    assert reserve(lg, "op1", d).allowed
    assert begin(lg, "op1", token="A", now=NOW + 1)[0] == "go"

    assert lg.abandon("op1", "WRONG") is False
    assert lg.op_state("op1")["state"] == "sending"
    assert lg.abandon("op1", "A") is True
    op = lg.op_state("op1")
    assert op["state"] == "unknown" and op["leaseUntilMs"] == "0"
    assert lg.abandon("op1", "A") is False  # only a send in flight can be abandoned

    # Still counted: the ask may already be in someone's DMs.
    assert target_count(redis_client, "ana") == 1
    assert reserve(lg, "op2", decision("w2", "k2"), now=NOW + 2 * TTL).code == (
        "rate_limited_target"
    )
    assert begin(lg, "op1", token="B", now=NOW + 2) == ("reconcile", str(NOW))
    assert lg.op_state("op1")["token"] == "B"


def test_a_reconciling_send_holds_the_lease_and_can_be_abandoned_again(
    redis_client: redis.Redis,
) -> None:
    """While one worker reconciles an unknown op another is busy; a new ambiguity is recorded."""
    lg = ledger(redis_client)
    d = decision()
    assert reserve(lg, "op1", d).allowed
    assert begin(lg, "op1", token="A", now=NOW + 1)[0] == "go"
    assert lg.abandon("op1", "A")

    assert begin(lg, "op1", token="B", now=NOW + 2) == ("reconcile", str(NOW))
    # A concurrent try must not reconcile too (both would find nothing and both would post).
    assert begin(lg, "op1", token="C", now=NOW + 3) == ("busy", str(NOW + 2 + LEASE))
    assert lg.op_state("op1")["token"] == "B"
    # The reconciling try fails ambiguously again: that is recorded, and the next try reconciles.
    assert lg.abandon("op1", "B") is True
    assert lg.op_state("op1")["state"] == "unknown"
    assert begin(lg, "op1", token="D", now=NOW + 4) == ("reconcile", str(NOW))
    assert finish(lg, "op1", d, outcome="engaged", token="B", now=NOW + 5) == "stale"
    assert finish(lg, "op1", d, outcome="engaged", token="D", now=NOW + 5) == "ok"


# --------------------------------------------------------------------------- reading


def test_rows_for_is_judged_by_check_guardrails_as_the_script_judges(
    redis_client: redis.Redis,
) -> None:
    """The rows `rows_for` returns give the pure check the script's verdict, tally and attempt."""
    lim = {"per_target_per_day": 3, "per_work_per_day": 5, "reengage_after_ms": 4 * HOUR_MS}
    lg = ledger(redis_client, **lim)
    # op: (decision, seat, reserved at, what happens next)
    history = {
        "eng": (decision("w1", "K", ("ana", "bo")), "seat-a", NOW - 3 * HOUR_MS, "engaged"),
        "unk": (decision("w1", "k2", ("ana",)), "seat-b", NOW - 2 * HOUR_MS, "unknown"),
        "snd": (
            decision("w2", "k3", ("ana",), surface="new_room"),
            "seat-a",
            NOW - HOUR_MS,
            "sending",
        ),
        "fail": (decision("w1", "k4", ("bo",)), "seat-a", NOW - 50 * 60_000, "send_failed"),
        "live": (decision("w4", "k6", ("cy",)), "seat-a", NOW - 50_000, "reserved"),
        # Reserved with a 20 s ttl: lapsed at NOW - 10 s, but no script has swept it yet.
        "lapsed": (decision("w3", "k5", ("bo",)), "seat-a", NOW - 30_000, "reserved"),
    }
    short = Ledger(redis_client, limits=Limits(**lim), reservation_ttl_ms=20_000)
    for op, (d, seat, at, then) in history.items():
        assert reserve(short if op == "lapsed" else lg, op, d, seat=seat, now=at).allowed, op
        if then == "reserved":
            continue
        assert begin(lg, op, token="T", now=at + 1)[0] == "go"
        if then == "unknown":
            assert lg.abandon(op, "T")
        elif then != "sending":
            assert finish(lg, op, d, outcome=then, token="T", now=at + 2, seat=seat, at=at) == "ok"

    everything = decision("w1", "K", ("ana", "bo", "cy"))
    rows = {
        r.tracking_id: r
        for r in lg.rows_for(
            dedupe_key="K",
            targets=list(everything.targets),
            work_id="w1",
            seat_id="seat-a",
        )
    }
    assert {op: r.outcome for op, r in rows.items()} == {
        "t-eng": "engaged",
        "t-unk": "unknown",
        "t-snd": "sending",
        "t-lapsed": "reserved",
        "t-live": "reserved",
    }
    assert not rows["t-lapsed"].counts_at(NOW) and rows["t-live"].counts_at(NOW)
    assert rows["t-snd"].room_created and not rows["t-eng"].room_created
    assert [t.member_id for t in rows["t-eng"].targets] == ["ana", "bo"]
    assert rows["t-unk"].seat_id == "seat-b" and rows["t-eng"].at_ms == NOW - 3 * HOUR_MS

    asks = [
        decision("w1", "K", ("dd",)),  # already_engaged
        decision("w9", "k9", ("ana",), surface="new_room"),  # rate_limited_target
        decision("w1", "k8", ("bo",)),  # allowed (the lapsed reservation no longer counts)
        decision("w5", "k7", ("cy",), surface="new_room"),  # allowed: 1 room of 2
    ]
    codes = []
    for i, ask in enumerate(asks):
        rows_now = lg.rows_for(
            dedupe_key=ask.dedupe_key or "",
            targets=list(ask.targets),
            work_id=ask.work_id,
            seat_id="seat-a",
        )
        pure = check_guardrails(
            rows_now,
            now_ms=NOW,
            dedupe_key=ask.dedupe_key or "",
            work_id=ask.work_id,
            seat_id="seat-a",
            targets=list(ask.targets),
            creates_room=ask.surface == "new_room",
            limits=Limits(**lim),
        )
        verdict = reserve(lg, f"ask{i}", ask, now=NOW)
        assert verdict == pure, ask
        codes.append(verdict.code)
        if verdict.allowed:  # give the place back, so the next ask sees the same ledger
            assert finish(lg, f"ask{i}", ask, outcome="send_blocked", now=NOW) == "ok"
    assert codes == ["already_engaged", "rate_limited_target", None, None]


def test_rows_for_on_an_empty_ledger_is_empty(redis_client: redis.Redis) -> None:
    """No indexed ops means no rows."""
    lg = ledger(redis_client)
    d = decision()
    assert (
        lg.rows_for(dedupe_key="dk1", targets=list(d.targets), work_id="w1", seat_id="seat-a") == []
    )


def test_read_returns_rows_newest_first_filtered_by_seat_and_work(
    redis_client: redis.Redis,
) -> None:
    """`read` merges the seats' streams newest first and filters by seat and by work."""
    lg = ledger(redis_client, per_target_per_day=100, per_seat_per_hour=100, per_work_per_day=100)
    written = [
        ("a1", "seat-a", "w1", NOW + 1_000),
        ("b1", "seat-b", "w2", NOW + 2_000),
        ("a2", "seat-a", "w2", NOW + 3_000),
        ("c1", "seat-c", "w1", NOW + 500),
        ("b2", "seat-b", "w1", NOW + 4_000),
    ]
    for op, seat, work, at in written:
        d = decision(work, f"k-{op}", (f"p-{op}",))
        assert reserve(lg, op, d, seat=seat, now=at).allowed
        assert begin(lg, op, token="T", now=at + 1)[0] == "go"
        assert finish(lg, op, d, outcome="engaged", token="T", now=at + 2, seat=seat, at=at) == "ok"

    def ops(rows: list[LedgerRow]) -> list[str]:
        return [(r.tracking_id or "")[2:] for r in rows]

    assert ops(lg.read()) == ["b2", "a2", "b1", "a1", "c1"]
    assert ops(lg.read(seat_ids=["seat-a"])) == ["a2", "a1"]
    assert ops(lg.read(seat_ids=["seat-a", "seat-b"])) == ["b2", "a2", "b1", "a1"]
    assert ops(lg.read(work_id="w1")) == ["b2", "a1", "c1"]
    assert ops(lg.read(seat_ids=["seat-b"], work_id="w1")) == ["b2"]
    assert ops(lg.read(limit=2)) == ["b2", "a2"]
    assert ops(lg.read(work_id="w1", limit=2)) == ["b2", "a1"]
    assert lg.read(seat_ids=["nobody"]) == []
    assert all(r.outcome == "engaged" and r.engaged for r in lg.read())
    assert json.loads(cast(bytes, redis_client.hget(keys.op("a1"), "targets"))) == ["p-a1"]


def test_begin_send_replayed_with_its_own_token_answers_go_again(
    redis_client: redis.Redis,
) -> None:
    """redis-py re-sending a begin_send whose reply was lost gets `go`, not `busy`."""
    lg = ledger(redis_client)
    assert reserve(lg, "op1", decision()).allowed
    assert begin(lg, "op1", token="A", now=NOW + 10) == ("go", str(NOW))
    assert begin(lg, "op1", token="A", now=NOW + 11) == ("go", str(NOW))
    assert begin(lg, "op1", token="B", now=NOW + 12)[0] == "busy"


# Long enough that the rows one step adds (and the TTL read after them) all fall inside it on a
# loaded machine, where a Redis round trip can take hundreds of milliseconds.
RETENTION_MS = 1500


def test_ledger_rows_are_kept_for_the_audit_retention_and_no_longer(
    redis_client: redis.Redis,
) -> None:
    """A row older than the ledger's retention is trimmed when the next row is added (its
    stream id is the Redis time it was added at); a younger one stays. The rows of the
    engagement stage's decisions are trimmed by the same rule."""
    lg = Ledger(
        redis_client,
        limits=Limits(per_target_per_day=1),
        reservation_ttl_ms=TTL,
        ledger_retention_ms=RETENTION_MS,
    )
    stream = keys.ledger_stream("seat-a")
    assert reserve(lg, "op1", decision("w1", "k1")).allowed
    d2 = decision("w2", "k2")
    assert reserve(lg, "op2", d2, now=NOW + 1).code == "rate_limited_target"
    assert finish(lg, "op2", d2, outcome="refused", now=NOW + 2) == "ok"
    assert redis_client.xlen(stream) == 1
    time.sleep(RETENTION_MS / 1000 + 0.1)
    d3 = decision("w3", "k3")
    assert reserve(lg, "op3", d3, now=NOW + 3).code == "rate_limited_target"
    assert finish(lg, "op3", d3, outcome="refused", now=NOW + 4) == "ok"
    assert [r.work_id for r in lg.read(seat_ids=["seat-a"])] == ["w3"]  # w2 aged out

    journal = Journal(redis_client, ledger_retention_ms=RETENTION_MS)
    time.sleep(RETENTION_MS / 1000 + 0.1)
    for tracking in ("t-a", "t-b"):
        journal.accept(
            tracking, kind="work", seat_id="seat-a", payload="{}", now_ms=NOW, fingerprint=""
        )
        nobody = EngagementDecision(engage=False, reason_code="no_blocker", work_id=tracking)
        row = LedgerRow(at_ms=NOW, seat_id="seat-a", work_id=tracking, reason_code="no_blocker")
        journal.record_decision(tracking, seat_id="seat-a", decision=nobody, row=row, now_ms=NOW)
    assert [r.work_id for r in lg.read(seat_ids=["seat-a"])] == ["t-b", "t-a"]
    # the stream lasts as long as its rows: one no row is added to expires with them
    ttl = redis_client.pttl(stream)
    assert 0 < ttl <= RETENTION_MS


def test_a_final_entry_gives_up_its_payload_and_still_knows_a_repeat(
    redis_client: redis.Redis,
) -> None:
    """A work entry that ends (a decision that is final, or the ask's outcome) keeps its
    state, decision and fingerprint, and only the size of its payload; an entry still open
    keeps the payload its next stage reads; a repeat of the ended report is a duplicate and a
    changed one a conflict, from the fingerprint alone."""
    journal = Journal(redis_client)
    payload = json.dumps({"report": "x" * 500})
    for tracking in ("t-final", "t-open"):
        journal.accept(
            tracking, kind="work", seat_id="seat-a", payload=payload, now_ms=NOW, fingerprint="f1"
        )
    nobody = EngagementDecision(engage=False, reason_code="no_blocker", work_id="t-final")
    row = LedgerRow(at_ms=NOW, seat_id="seat-a", work_id="t-final", reason_code="no_blocker")
    journal.record_decision("t-final", seat_id="seat-a", decision=nobody, row=row, now_ms=NOW)
    engage = decision("t-open", "k-open")
    journal.record_decision("t-open", seat_id="seat-a", decision=engage, row=None, now_ms=NOW)

    final = journal.get("t-final")
    assert final is not None and "payload" not in final
    assert final["state"] == "nobody" and final["payloadBytes"] == str(len(payload))
    assert final["decision"]["reasonCode"] == "no_blocker" and final["fingerprint"] == "f1"
    still = journal.get("t-open")
    assert still is not None and still["state"] == "decided"
    assert still["payload"] == json.loads(payload)

    again = journal.accept(
        "t-final", kind="work", seat_id="seat-a", payload=payload, now_ms=NOW, fingerprint="f1"
    )
    assert (again.new, again.state, again.fingerprint) == (False, "nobody", "f1")
    other = journal.accept(
        "t-final", kind="work", seat_id="seat-a", payload="{}", now_ms=NOW, fingerprint="f2"
    )
    assert other.fingerprint == "f1"  # the caller refuses it as a conflict

    # the ask's outcome ends an engaging entry the same way
    lg = ledger(redis_client)
    assert reserve(lg, "open", engage).allowed  # its tracking id is t-open
    assert finish(lg, "open", engage, outcome="engaged") == "ok"
    ended = journal.get("t-open")
    assert ended is not None and ended["state"] == "engaged" and "payload" not in ended
    assert ended["payloadBytes"] == str(len(payload))
