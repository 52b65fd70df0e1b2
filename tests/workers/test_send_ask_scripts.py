"""The send stage's two scripts that carry its ask (real Redis): the begin records the ask in
the same step only when the op begins (`go`, `reconcile`) at the ask's attempt, and the
finish writes the ask's change with the outcome only when the outcome is recorded (`ok`,
`done`), under the ask's own compare-and-set."""

from __future__ import annotations

from typing import Any

import redis

from contracts import EngagementDecision, LedgerRow, Limits
from contracts.asks import Ask, AskLanding
from contracts.send import SendStart
from pipeline.asks import DEFAULT_TIMEOUTS_MS, landed, new_ask
from workers.stores.asks import AskStore
from workers.stores.ledger import Ledger

NOW = 1_800_000_000_000


def _decision() -> EngagementDecision:
    return EngagementDecision.model_validate(
        {
            "engage": True,
            "trigger": "blocked_on_other",
            "reasonCode": "blocked:access",
            "workId": "w-1",
            "dedupeKey": "k-1",
            "surface": "dm",
            "targets": [{"memberId": "ben"}],
            "nowMs": NOW,
        }
    )


def _reserved(r: redis.Redis) -> tuple[Ledger, AskStore, int]:
    ledger = Ledger(r, limits=Limits(), reservation_ttl_ms=60_000)
    verdict = ledger.reserve(
        "op-1", decision=_decision(), seat_id="scout", tracking_id="op-1", now_ms=NOW
    )
    assert verdict.allowed
    return ledger, AskStore(r), int(ledger.op_state("op-1")["attempt"])


def _ask(attempt: int) -> Ask:
    return new_ask(
        _decision(),
        seat_id="scout",
        tracking_id="op-1",
        attempt=attempt,
        now_ms=NOW,
        timeouts=DEFAULT_TIMEOUTS_MS,
    )


def _begin(
    ledger: Ledger, asks: AskStore, token: str, ask: Ask, now_ms: int, lease_ms: int = 1_000
) -> tuple[SendStart | None, list[Any] | None]:
    _, begun, made = ledger.begin_send_asking(
        "op-1",
        tracking_id="op-1",
        token=token,
        lease_ms=lease_ms,
        attempt=ask.attempt,
        create=asks.create_call(ask),
        now_ms=now_ms,
    )
    return begun, made


def test_the_begin_records_the_ask_only_when_it_begins_at_the_asks_attempt(
    redis_client: redis.Redis,
) -> None:
    ledger, asks, attempt = _reserved(redis_client)
    other = _ask(attempt + 1)
    begun, made = _begin(ledger, asks, "a", other, NOW + 1)
    assert begun is not None and begun.verb == "go" and begun.attempt == attempt
    assert made is None and asks.get(other.id) is None  # the op is at another attempt

    mine = _ask(attempt)
    busy, made = _begin(ledger, asks, "b", mine, NOW + 2)
    assert busy is not None and busy.verb == "busy"
    assert made is None and asks.get(mine.id) is None  # another try holds the op

    assert ledger.abandon("op-1", "a")  # that try died in doubt
    again, made = _begin(ledger, asks, "c", mine, NOW + 3)
    assert again is not None and again.verb == "reconcile" and made is not None
    new, stored, before = asks.created(mine, made)
    assert new and stored == mine and before is None
    assert asks.get(mine.id) == mine

    # The same call re-sent after a lost reply: the same begin, the ask found as it stands.
    resent, made = _begin(ledger, asks, "c", mine, NOW + 4)
    assert resent is not None and resent.verb == "reconcile" and made is not None
    assert asks.created(mine, made) == (False, mine, None)


def _row(outcome: str) -> LedgerRow:
    return LedgerRow.model_validate(
        {
            "seatId": "scout",
            "trackingId": "op-1",
            "workId": "w-1",
            "outcome": outcome,
            "atMs": NOW,
        }
    )


def test_the_finish_writes_the_asks_change_only_with_a_recorded_outcome(
    redis_client: redis.Redis,
) -> None:
    ledger, asks, attempt = _reserved(redis_client)
    mine = _ask(attempt)
    begun, made = _begin(ledger, asks, "t", mine, NOW + 1, lease_ms=60_000)
    assert begun is not None and begun.verb == "go" and made is not None
    landing = AskLanding(adapter="file", channel_id="D1", message_id="m-1", at_ms=NOW + 5)
    after = landed(mine, landing, now_ms=NOW + 5)
    commit = asks.commit_call(mine, after, link=True)

    stale = ledger.finish(
        "op-1",
        outcome="engaged",
        row=_row("engaged"),
        tracking_id="op-1",
        token="not-mine",
        now_ms=NOW + 5,
        commit=commit,
    )
    assert stale == ("stale", None)
    assert asks.get(mine.id) == mine  # another try holds the op: the ask is untouched

    # Someone changed the ask meanwhile: the outcome is recorded, the commit is refused.
    bumped = asks.update(mine.id, lambda a: a.model_copy(update={"body": "edited"}))
    assert bumped is not None and bumped.version == 1
    raced = ledger.finish(
        "op-1",
        outcome="engaged",
        row=_row("engaged"),
        tracking_id="op-1",
        token="t",
        now_ms=NOW + 5,
        message_id="m-1",
        channel_id="D1",
        commit=commit,
    )
    assert raced == ("ok", "conflict")
    assert ledger.op_state("op-1")["state"] == "engaged"
    assert asks.get(mine.id) == bumped and asks.by_message("D1", "m-1") is None

    # A finish that finds the op final (`done`) still writes the ask's change.
    now_read = asks.get(mine.id)
    assert now_read is not None
    done = ledger.finish(
        "op-1",
        outcome="engaged",
        row=_row("engaged"),
        tracking_id="op-1",
        token="t",
        now_ms=NOW + 6,
        commit=asks.commit_call(now_read, landed(now_read, landing, now_ms=NOW + 6), link=True),
    )
    assert done == ("done", "ok")
    stored = asks.get(mine.id)
    assert stored is not None and stored.state == "open" and stored.version == 2
    assert asks.by_message("D1", "m-1") == mine.id
