"""The ledger search (`Ledger.search`) on a real Redis, against a brute-force reading of the
same streams: paging through every page, with small pages and a small look-at budget, finds
exactly the matching rows, each once, newest first by (entry id, seat), whatever ids the seats
share; a search that stops at its budget says where, and the next page goes on from there."""

from __future__ import annotations

import random

import pytest
import redis

from contracts import LedgerRow, Limits, Target
from workers.stores import keys
from workers.stores.ledger import Ledger, LedgerCursor

NOW = 1_800_000_000_000
SEATS = ["ada", "bo", "cy", "dee"]
PEOPLE = ["ben", "gus", "ivy"]


def seed(r: redis.Redis, rng: random.Random, n: int) -> list[tuple[str, str, LedgerRow]]:
    """`n` rows over the seats, at times that collide across seats; (seat, entry id, row)."""
    written = []
    clock = dict.fromkeys(SEATS, NOW)
    for i in range(n):
        seat = rng.choice(SEATS)
        clock[seat] += rng.choice([0, 0, 1, 5, 60_000])  # same ms (seq), or later
        row = LedgerRow(
            at_ms=clock[seat] - rng.choice([0, 0, 30_000]),  # recorded at or after its time
            seat_id=seat,
            work_id=f"w{i}",
            outcome=rng.choice(["engaged", "none", "rate_limited_target"]),
            reason_code=rng.choice(["a", "b"]),
            targets=(Target(member_id=rng.choice(PEOPLE)),),
            surface="dm",
        )
        entry = r.xadd(
            keys.ledger_stream(seat),
            {"row": row.model_dump_json(by_alias=True)},
            id=f"{clock[seat]}-*",
        )
        r.sadd(keys.LEDGER_SEATS, seat)
        written.append((seat, entry.decode() if isinstance(entry, bytes) else entry, row))
    return written


def order(found: tuple[str, str, LedgerRow]) -> tuple[int, int, str]:
    return LedgerCursor(found[1], found[0]).key()


@pytest.mark.parametrize("seed_no", range(6))
def test_paging_finds_every_matching_row_once_newest_first(
    redis_client: redis.Redis, seed_no: int
) -> None:
    rng = random.Random(seed_no)
    written = seed(redis_client, rng, 300)
    ledger = Ledger(redis_client, limits=Limits())
    person = rng.choice(PEOPLE)
    outcome = rng.choice(["engaged", "none", ""])
    since = NOW + rng.choice([0, 600_000, 3_000_000])

    def match(row: LedgerRow) -> bool:
        return (
            row.targets[0].member_id == person
            and (not outcome or row.outcome == outcome)
            and row.at_ms >= since
        )

    expected = sorted((w for w in written if match(w[2])), key=order, reverse=True)
    hint = f'"memberId":"{person}"'.encode()
    pages, before, budget_stops = [], None, 0
    for _ in range(1_000):
        got = ledger.search(
            match,
            before=before,
            since_ms=since,
            hint=hint if seed_no % 2 else None,
            limit=rng.choice([1, 3, 7]),
            budget=rng.choice([5, 20, 1_000]),
        )
        pages.extend(got.rows)
        budget_stops += not got.complete
        if got.next is None:
            break
        before = got.next
    assert [(s, e) for s, e, _ in pages] == [(s, e) for s, e, _ in expected]
    assert budget_stops > 0 or len(expected) < 20  # the budget did stop some searches


def test_one_seat_and_a_page_that_ends_exactly_at_the_last_row(redis_client: redis.Redis) -> None:
    written = seed(redis_client, random.Random(9), 40)
    ledger = Ledger(redis_client, limits=Limits())
    mine = sorted((w for w in written if w[0] == "bo"), key=order, reverse=True)
    got = ledger.search(lambda _row: True, seat_ids=["bo"], limit=len(mine))
    assert [e for _, e, _ in got.rows] == [e for _, e, _ in mine]
    assert got.next is None and got.complete  # nothing older left: no empty Older page
    assert ledger.search(lambda _row: True, seat_ids=["nobody"]).rows == []


def test_a_cursor_is_checked() -> None:
    assert LedgerCursor.parse("1-2~bo") == LedgerCursor("1-2", "bo")
    for bad in ("", "1-2", "x~bo", "1~bo", "1-2~"):
        with pytest.raises(ValueError):
            LedgerCursor.parse(bad)
