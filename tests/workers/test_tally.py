"""The engagement stage's read-only tally agrees with the pure tally of the same rows."""

from __future__ import annotations

import redis

from contracts import EngagementDecision, Limits
from pipeline.asks import AskRecordView
from pipeline.guardrails import tally
from workers.stores.asks import AskStore
from workers.stores.journal import Journal
from workers.stores.ledger import Ledger

NOW = 1_800_000_000_000


def _decision(work: str, key: str, targets: list[str], surface: str = "dm") -> EngagementDecision:
    return EngagementDecision.model_validate(
        {
            "engage": True,
            "workId": work,
            "dedupeKey": key,
            "surface": surface,
            "targets": [{"memberId": t} for t in targets],
            "nowMs": NOW,
        }
    )


def test_tally_subtracts_expired_reservations_and_matches_rows(redis_client: redis.Redis) -> None:
    """Engaged ops and live reservations count; a lapsed reservation does not, before or
    after anyone purges it; the read-only tally equals the pure tally of the counted rows."""
    ledger = Ledger(redis_client, limits=Limits(), reservation_ttl_ms=60_000)
    Journal(redis_client)
    ask = _decision("w-new", "k1", ["ben", "ava"], surface="new_room")
    setups = [  # op id, decision, reserved at, finish as engaged?
        ("op-1", _decision("w1", "k1", ["ben"]), NOW - 7 * 3_600_000, True),
        ("op-2", _decision("w2", "k2", ["ben", "ava"], "new_room"), NOW - 3_000_000, True),
        ("op-3", _decision("w3", "k1", ["ben"]), NOW - 600_000, False),  # lapses at NOW-540 s
        ("op-4", _decision("w-new", "k4", ["ava"]), NOW - 30_000, False),  # still live
    ]
    for op_id, decision, at, engage in setups:
        verdict = ledger.reserve(
            op_id, decision=decision, seat_id="scout", tracking_id=op_id, now_ms=at
        )
        assert verdict.allowed, (op_id, verdict)
        if engage:
            assert (
                ledger.begin_send(
                    op_id,
                    tracking_id=op_id,
                    token="t",
                    lease_ms=1000,
                    now_ms=at,
                ).verb
                == "go"
            )
    counted = ledger.tally(decision=ask, seat_id="scout", now_ms=NOW)
    rows = ledger.rows_for(
        dedupe_key="k1", targets=list(ask.targets), work_id="w-new", seat_id="scout"
    )
    expected = tally(
        rows, now_ms=NOW, dedupe_key="k1", work_id="w-new", seat_id="scout", targets=ask.targets
    )
    assert counted == expected
    assert counted.same_key == 1 and counted.last_same_at_ms == NOW - 7 * 3_600_000
    assert counted.per_target == {"ben": 2, "ava": 2}
    assert (counted.work, counted.seat, counted.rooms) == (1, 2, 1)

    # Read with the ask record in one script, the tally is the same.
    asks = AskStore(redis_client)
    view, together = asks.view_and_tally(ask, "scout", ledger, counted_as="scout", now_ms=NOW)
    assert together == counted
    assert view == asks.view(ask, "scout") == AskRecordView()
