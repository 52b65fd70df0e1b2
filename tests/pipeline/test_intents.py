"""The pure rules of a seat's work intents (pipeline/intents.py) and their place in the work
controller's news (pipeline/turns.py `news_of`)."""

from __future__ import annotations

from typing import Any

from contracts.tools import RecordWorkIntent
from pipeline import intents as rules
from pipeline.turns import Observed, news_of


def write(**over: Any) -> RecordWorkIntent:
    base: dict[str, Any] = {
        "intent_id": "i1",
        "client_request_id": "r1",
        "expected_revision": 0,
        "state": "runnable",
        "next_step": "rebase the billing branch",
    }
    return RecordWorkIntent.model_validate({**base, **over})


def test_a_blocker_exactly_when_blocked_and_never_a_credential() -> None:
    assert rules.refusal(write()) is None
    assert rules.refusal(write(state="blocked", blocker="CI red")) is None
    assert rules.refusal(write(state="blocked")).code == "blocker_required"  # type: ignore[union-attr]
    assert rules.refusal(write(blocker="x")).code == "blocker_not_blocked"  # type: ignore[union-attr]
    leak = rules.refusal(write(next_step="use xoxb-1234567890-abcdefghijkl"))
    assert leak is not None and (leak.field, leak.code) == ("next_step", "credentials_refused")
    assert "abcdefghijkl" not in leak.message
    hidden = rules.refusal(write(state="blocked", blocker="AKIAABCDEFGHIJKLMNOP"))
    assert hidden is not None and hidden.field == "blocker"


def test_the_fingerprint_is_the_input() -> None:
    assert rules.fingerprint(write()) == rules.fingerprint(write())
    assert rules.fingerprint(write()) != rules.fingerprint(write(next_step="other"))
    assert len(rules.fingerprint(write())) == 64


def test_a_record_is_one_revision_past_the_expected() -> None:
    record = rules.record_of(write(expected_revision=4), run_id="scout:turn:3", now_ms=9)
    assert (record["revision"], record["recordedRunId"], record["recordedAt"]) == (
        5,
        "scout:turn:3",
        9,
    )


def test_listing_order_paging_and_scoped_cursors() -> None:
    records = [{"intentId": f"i{n:02d}", "state": "waiting"} for n in range(21)]
    records.append({"intentId": "a0", "state": "done"})
    page = rules.page_of("scout", records, include_completed=False, after=None)
    assert [r["intentId"] for r in page["intents"]] == [f"i{n:02d}" for n in range(20)]
    assert rules.cursor_after(page["next"], "scout", False) == "i19"
    assert rules.cursor_after(page["next"], "sage", False) is None
    assert rules.cursor_after(page["next"], "scout", True) is None
    assert rules.cursor_after("%%%", "scout", False) is None
    every = rules.page_of("scout", records, include_completed=True, after=None)
    assert every["intents"][0]["intentId"] == "a0"


def test_news_work_is_the_backlog_and_the_runnable_intents() -> None:
    assert news_of("s", Observed(), at_ms=1)["work"] == {"runnable": False, "revision": 0}
    seen = Observed(backlog_revision=3, intents_runnable=1, intents_revision=2)
    assert news_of("s", seen, at_ms=1)["work"] == {"runnable": True, "revision": 5}
    done = Observed(backlog_revision=3, intents_runnable=0, intents_revision=2)
    assert news_of("s", done, at_ms=1)["work"]["runnable"] is False
