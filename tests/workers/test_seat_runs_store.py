"""The work controller's records against a real Redis: a record's finished turns live in a
list beside its doc, written under the record's compare-and-set and trimmed to the last
`HISTORY`; a full read has them all, the controller's read the last; a record written before
the split moves its turns to the list on its next write, losing none."""

from __future__ import annotations

import json

import pytest
import redis

from contracts.controller import SeatRun, TurnOutcome, TurnRecord
from contracts.org import ControllerOptions
from pipeline.turns import HISTORY
from workers.stores import keys
from workers.stores.seat_runs import Read, SeatRuns

SEAT = "scout"


def _turn(n: int) -> TurnRecord:
    return TurnRecord(
        turn_id=f"{SEAT}:turn:{n}",
        reason="inbox",
        queued_at_ms=n * 1000,
        ended_at_ms=n * 1000 + 5,
        outcome=TurnOutcome(kind="ok", detail=f"turn {n} done"),
    )


def _finish(runs: SeatRuns, n: int) -> None:
    """The seat's `n`th turn finished: its record gains it, as `settle_turn` appends it."""

    def change(run: SeatRun) -> SeatRun:
        return run.model_copy(update={"seq": n, "turns": (*run.turns, _turn(n))[-HISTORY:]})

    assert runs.update(SEAT, change) is not None


@pytest.fixture
def runs(redis_client: redis.Redis) -> SeatRuns:
    return SeatRuns(redis_client)


def test_turns_are_listed_beside_the_doc_and_trimmed(
    runs: SeatRuns, redis_client: redis.Redis
) -> None:
    """Given HISTORY + 3 finished turns written one by one, the doc holds none of them, the
    list holds the last HISTORY in order, and a full read returns exactly those."""
    for n in range(1, HISTORY + 4):
        _finish(runs, n)
    doc = json.loads(redis_client.hget(keys.seat_run(SEAT), "doc") or b"{}")
    assert "turns" not in doc
    assert redis_client.llen(keys.seat_turns(SEAT)) == HISTORY
    read = runs.get(SEAT)
    assert [t.turn_id for t in read.run.turns] == [
        f"{SEAT}:turn:{n}" for n in range(4, HISTORY + 4)
    ]
    assert read.rev == HISTORY + 3
    assert read.listed == {t.turn_id for t in read.run.turns}


def test_the_controller_reads_the_last_turn_only(runs: SeatRuns) -> None:
    """`observe` hands the tick the record with its last finished turn (what an escalation
    quotes); a write of what it read adds nothing to the list but what the tick added."""
    for n in (1, 2, 3):
        _finish(runs, n)
    ((read, _seen),) = runs.observe([SEAT], now_ms=10_000)
    assert [t.turn_id for t in read.run.turns] == [f"{SEAT}:turn:3"]
    after = read.run.model_copy(update={"turns": (*read.run.turns, _turn(4))})
    assert runs.commit([(read, after)]) == [True]
    assert [t.turn_id for t in runs.get(SEAT).run.turns] == [
        f"{SEAT}:turn:{n}" for n in (1, 2, 3, 4)
    ]


def test_a_conflicting_write_adds_no_turn(runs: SeatRuns) -> None:
    """Two writes from the same read: the second loses its compare-and-set, and the turn it
    carried is not listed."""
    _finish(runs, 1)
    read = runs.get(SEAT)
    first = read.run.model_copy(update={"turns": (*read.run.turns, _turn(2))})
    second = read.run.model_copy(update={"turns": (*read.run.turns, _turn(3))})
    assert runs.commit([(read, first)]) == [True]
    assert runs.commit([(read, second)]) == [False]
    assert [t.turn_id for t in runs.get(SEAT).run.turns] == [f"{SEAT}:turn:1", f"{SEAT}:turn:2"]


def test_a_record_of_before_the_split_keeps_its_turns(
    runs: SeatRuns, redis_client: redis.Redis
) -> None:
    """Given a record whose doc still holds its turns (written before they moved to a list),
    both reads see them, and its next write lists them all and empties the doc's."""
    legacy = SeatRun(seat_id=SEAT, seq=2, turns=(_turn(1), _turn(2)))
    redis_client.hset(
        keys.seat_run(SEAT), mapping={"rev": 5, "doc": legacy.model_dump_json(by_alias=True)}
    )
    assert runs.get(SEAT).run.turns == legacy.turns
    ((seen, _),) = runs.observe([SEAT], now_ms=10_000)
    assert seen.run.turns == legacy.turns
    assert runs.control(SEAT, "pause", options=ControllerOptions()).paused
    assert redis_client.llen(keys.seat_turns(SEAT)) == 2
    doc = json.loads(redis_client.hget(keys.seat_run(SEAT), "doc") or b"{}")
    assert "turns" not in doc
    assert runs.get(SEAT).run.turns == legacy.turns
    assert runs.get(SEAT).rev == 6


def test_a_doc_with_turns_beside_a_list_keeps_both(
    runs: SeatRuns, redis_client: redis.Redis
) -> None:
    """Given a list with turn 1 and a doc that holds turn 2 itself (a process of before the
    split wrote it after one of now), a read has both, and the next write lists turn 2."""
    _finish(runs, 1)
    doc = SeatRun(seat_id=SEAT, seq=2, turns=(_turn(2),)).model_dump_json(by_alias=True)
    redis_client.hset(keys.seat_run(SEAT), "doc", doc)
    read = runs.get(SEAT)
    assert [t.turn_id for t in read.run.turns] == [f"{SEAT}:turn:1", f"{SEAT}:turn:2"]
    assert runs.control(SEAT, "pause", options=ControllerOptions()).paused
    assert redis_client.llen(keys.seat_turns(SEAT)) == 2
    assert [t.turn_id for t in runs.get(SEAT).run.turns] == [f"{SEAT}:turn:1", f"{SEAT}:turn:2"]


def test_a_missing_record_reads_as_a_new_one(runs: SeatRuns) -> None:
    """A seat never written reads at revision 0 with no turns, and its first write lands."""
    read = runs.get(SEAT)
    assert read == Read(0, SeatRun(seat_id=SEAT))
    assert runs.commit([(read, read.run.model_copy(update={"seq": 1}))]) == [True]
    assert runs.get(SEAT).rev == 1
