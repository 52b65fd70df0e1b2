"""The ask store on a real Redis: answers racing from threads leave one answer and one inbox
item; a commit re-sent after a lost reply is not applied twice; a stale read never
overwrites a newer answer; indexes and retention."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from contracts.asks import AskLanding
from contracts.engagement import EngagementDecision, Target
from pipeline.asks import DEFAULT_TIMEOUTS_MS, AnswerIn, answer_ask, answered_item, landed, new_ask
from workers.stores import keys
from workers.stores.asks import AskMissing, AskStore
from workers.stores.inbox import Inbox

NOW = 1_800_000_000_000


def _decision(key: str = "k1", trigger: str = "blocked_on_other") -> EngagementDecision:
    return EngagementDecision(
        engage=True,
        trigger=trigger,
        reason_code="blocked:access",
        targets=(Target(member_id="ben"), Target(member_id="chloe")),
        surface="dm",
        work_id="w-1",
        dedupe_key=key,
        attempt=1,
        now_ms=NOW,
    )


def _opened(store: AskStore, key: str = "k1") -> str:
    ask = new_ask(
        _decision(key),
        seat_id="scout",
        tracking_id="t",
        attempt=1,
        now_ms=NOW,
        timeouts=DEFAULT_TIMEOUTS_MS,
    )
    assert store.create(ask)[0]
    landing = AskLanding(adapter="slack", channel_id="D1", message_id=f"{key}.1", at_ms=NOW + 1)
    stored = store.update(ask.id, lambda a: landed(a, landing, now_ms=NOW + 1))
    assert stored is not None
    store.link(stored)
    return ask.id


def test_create_is_idempotent_and_indexes_the_ask(redis_client: redis.Redis) -> None:
    store = AskStore(redis_client)
    ask_id = _opened(store)
    ask = new_ask(
        _decision(),
        seat_id="scout",
        tracking_id="t",
        attempt=1,
        now_ms=NOW + 50,
        timeouts=DEFAULT_TIMEOUTS_MS,
    )
    new, stored, _before = store.create(ask)
    assert not new and stored.state == "open"  # the first record stands
    assert [a.id for a in store.listing(seat_id="scout")] == [ask_id]
    assert [a.id for a in store.listing(person="chloe")] == [ask_id]
    assert [a.id for a in store.listing(state="open")] == [ask_id]
    assert store.by_message("D1", "k1.1") == ask_id
    assert store.latest("k1") is not None
    assert store.due(NOW + 1 + DEFAULT_TIMEOUTS_MS["blocked_on_other"]) == [ask_id]


def test_answers_racing_from_threads_leave_one_answer_and_one_item(
    redis_client: redis.Redis,
) -> None:
    store = AskStore(redis_client)
    ask_id = _opened(store)
    start = threading.Barrier(8)

    def answer(i: int) -> str:
        start.wait()
        by = "ben" if i % 2 else "chloe"
        return store.answer(
            ask_id, AnswerIn("done", by, "api"), now_ms=NOW + 10 + i
        ).outcome.outcome

    with ThreadPoolExecutor(8) as pool:
        outcomes = sorted(pool.map(answer, range(8)))
    assert outcomes == ["answered"] + ["late_answer"] * 7
    items = Inbox(redis_client).updates("scout").items
    assert [i.kind for i in items] == ["ask_answered"]
    stored = store.get(ask_id)
    assert stored is not None
    assert [e.event for e in stored.history].count("late_answer") == 7
    assert stored.version == 1 + 8  # landed, then each answer once


def test_a_commit_resent_after_a_lost_reply_is_applied_once(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = AskStore(redis_client)
    ask_id = _opened(store)
    before = store.get(ask_id)
    assert before is not None
    got = answer_ask(before, AnswerIn("done", "ben", "api"), now_ms=NOW + 5)
    monkeypatch.setattr("workers.stores.asks.secrets.token_hex", lambda _n: "same-op")
    item = answered_item(got)
    assert store.commit(before, got.ask, item=item)[0] == "ok"
    assert store.commit(before, got.ask, item=item)[0] == "again"  # the re-sent script
    assert len(Inbox(redis_client).updates("scout").items) == 1


def test_a_stale_read_never_overwrites_a_newer_answer(redis_client: redis.Redis) -> None:
    store = AskStore(redis_client)
    ask_id = _opened(store)
    stale = store.get(ask_id)
    assert stale is not None
    store.answer(ask_id, AnswerIn("done", "ben", "api"), now_ms=NOW + 5)
    mine = answer_ask(stale, AnswerIn("declined", "chloe", "api"), now_ms=NOW + 6)
    assert store.commit(stale, mine.ask)[0] == "conflict"
    stored = store.get(ask_id)
    assert stored is not None and stored.answer is not None and stored.answer.by == "ben"


def test_an_unknown_ask_is_refused(redis_client: redis.Redis) -> None:
    with pytest.raises(AskMissing):
        AskStore(redis_client).answer("ask-nope-1", AnswerIn("done", "ben", "api"), now_ms=NOW)


def test_an_ended_ask_is_kept_for_its_retention_then_left_out_of_the_indexes(
    redis_client: redis.Redis,
) -> None:
    store = AskStore(redis_client, retention_ms=86_400_000)
    ask_id = _opened(store)
    store.answer(ask_id, AnswerIn("done", "ben", "api"), now_ms=NOW + 5)
    ttl = redis_client.pttl(keys.ask(ask_id))
    assert 0 < ttl <= 86_400_000
    assert not redis_client.zscore(keys.ASKS_OPEN, ask_id)
    assert not redis_client.zscore(keys.ASKS_DUE, ask_id)
    redis_client.delete(keys.ask(ask_id))  # what Redis does when the retention passes
    assert store.trim(NOW + 2 * 86_400_000) >= 1
    assert store.listing(seat_id="scout") == []


def test_two_judgements_at_once_hold_a_seat_once(redis_client: redis.Redis) -> None:
    from contracts.asks import AskBrake

    store = AskStore(redis_client)
    start = threading.Barrier(6)

    def hold(i: int) -> bool:
        start.wait()
        brake = AskBrake(seat_id="scout", held=True, since_ms=NOW + i, why="3 of 5")
        return store.hold(brake)

    with ThreadPoolExecutor(6) as pool:
        held = list(pool.map(hold, range(6)))
    assert held.count(True) == 1
    lifted = store.lift("scout", by="gus", now_ms=NOW + 99)
    assert lifted is not None and not lifted.held
    assert store.hold(AskBrake(seat_id="scout", held=True, since_ms=NOW + 100, why="again"))


def _opened_as(store: AskStore, key: str, trigger: str) -> str:
    ask = new_ask(
        _decision(key, trigger),
        seat_id="scout",
        tracking_id=f"t-{key}",
        attempt=1,
        now_ms=NOW,
        timeouts=DEFAULT_TIMEOUTS_MS,
    )
    assert store.create(ask)[0]
    return ask.id


def test_the_view_reads_the_latest_ask_consents_declines_and_brake_in_one_script(
    redis_client: redis.Redis,
) -> None:
    """`view` (ask_view.lua) and `view_and_tally` (engage_read.lua) read the same record: the
    latest ask under the key at its version, the work's consents and declines, the brake."""
    from contracts import Limits
    from contracts.asks import AskBrake
    from pipeline.asks import AskRecordView
    from workers.stores.ledger import Ledger

    store = AskStore(redis_client)
    consent = "irreversible_or_external"
    approved = _opened_as(store, "k-yes", consent)
    store.answer(approved, AnswerIn("approved", "ben", "api"), now_ms=NOW + 5)
    declined = _opened_as(store, "k-no", consent)
    store.answer(declined, AnswerIn("declined", "chloe", "api"), now_ms=NOW + 6)
    assert store.hold(AskBrake(seat_id="scout", held=True, since_ms=NOW + 7, why="3 of 5"))
    plan = _decision("k-yes", consent)

    view = store.view(plan, "scout")
    latest = store.latest("k-yes")
    assert latest is not None and view.latest == latest and latest.version > 0
    assert [c.ask_id for c in view.consents] == [approved]
    assert [d.ask_id for d in view.declines] == [declined]
    assert view.brake is not None and view.brake.held
    ledger = Ledger(redis_client, limits=Limits())
    together, counted = store.view_and_tally(
        plan, "scout", ledger, counted_as="scout", now_ms=NOW + 8
    )
    assert together == view
    assert counted == ledger.tally(decision=plan, seat_id="scout", now_ms=NOW + 8)
    # A consent whose record expired is left out; nothing on record reads as empty.
    redis_client.delete(keys.consent(view.consents[0].id))
    assert store.view(plan, "scout").consents == ()
    assert store.view(_decision("k-none"), "nobody") == AskRecordView(declines=view.declines)
