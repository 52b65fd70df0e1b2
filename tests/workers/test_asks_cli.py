"""`seatwire asks`, `ask`, `asks release`, `consents` and `consents revoke` against a real
Redis (issue 26): the JSON is the API's, the text one fact per line with identifiers whole
(free text wrapped at 80 columns), and a wrong id, seat or member is refused saying so. The
ledger and `seatwire work` show an ask's standing beside its decision."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner

from contracts.ask_api import AskDetail
from contracts.asks import AskBrake
from contracts.ops import WorkStatus
from pipeline.asks import AnswerIn
from tests.ask_records import CONSENT, make_ask
from workers.cli import cli
from workers.cli.asks import ask_lines, detail_lines
from workers.cli.ops import work_lines
from workers.stores.asks import AskStore

pytestmark = pytest.mark.redis
runner = CliRunner()
NOW = 1_800_000_000_000


@pytest.fixture
def store(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AskStore:
    monkeypatch.setenv("SEATWIRE_REDIS_URL", redis_url)
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "test-token")
    monkeypatch.setenv("SEATWIRE_OUTBOX_PATH", str(tmp_path / "o.jsonl"))
    return AskStore(redis_client)


def run(args: list[str], code: int = 0) -> str:
    done = runner.invoke(cli, args)
    assert done.exit_code == code, done.output
    return done.output


def test_asks_lists_newest_first_with_each_answer(store: AskStore) -> None:
    a = make_ask(store, key="k-a", now_ms=NOW)
    long_words = "yes, go ahead with the migration; " * 8
    b = make_ask(store, key="k-b", targets=("chloe",), now_ms=NOW + 10)
    store.answer(b.id, AnswerIn("done", "chloe", "api", text=long_words), now_ms=NOW + 20)
    c = make_ask(store, seat="tally", key="k-c", targets=("devi",), now_ms=NOW + 30)

    listed = json.loads(run(["asks", "--json"]))
    assert [x["id"] for x in listed["asks"]] == [c.id, b.id, a.id]
    assert [x["id"] for x in json.loads(run(["asks", "--open", "--json"]))["asks"]] == [
        c.id,
        a.id,
    ]
    assert [x["id"] for x in json.loads(run(["asks", "--person", "chloe", "--json"]))["asks"]] == [
        b.id
    ]
    assert [x["id"] for x in json.loads(run(["asks", "--seat", "tally", "--json"]))["asks"]] == [
        c.id
    ]

    text = run(["asks", "--seat", "scout"]).splitlines()
    assert text[0] == f"{b.id}  answered  scout -> chloe"
    assert text[1] == "  work billing-migration (blocked_on_other:test)"
    assert text[2].startswith("  done by chloe via api, ")
    assert all(len(line) <= 80 for line in text[3:] if line.startswith("  said")), text
    said = " ".join(line.strip() for line in text if line.startswith("   "))
    assert "go ahead with the migration" in said
    assert f"{a.id}  open  scout -> ben" in text
    assert any(line.startswith("  waiting, due ") for line in text)
    assert run(["asks", "--person", "nobody"]).strip() == "no asks for that filter"


def test_ask_shows_one_ask_whole(store: AskStore) -> None:
    ask = make_ask(store, key="k-consent", trigger=CONSENT, now_ms=NOW)
    store.answer(ask.id, AnswerIn("approved", "ben", "link", text="fine"), now_ms=NOW + 5)
    whole = json.loads(run(["ask", ask.id, "--json"]))
    assert whole["ask"]["id"] == ask.id and whole["escalationAsks"] == []
    text = run(["ask", ask.id]).splitlines()
    assert text[0] == f"ask {ask.id}: answered"
    assert f"  {'asked':<13}ben (explicit)" in text
    assert any(line.startswith(f"  {'answer':<13}approved by ben via link, ") for line in text)
    assert any(line.startswith(f"  {'consent':<13}consent-") for line in text)
    assert "  history" in text
    assert all(len(line) <= 80 or " " not in line.strip() for line in text), text
    missing = runner.invoke(cli, ["ask", "ask-nothing-1"])
    assert missing.exit_code == 1 and "there is no ask 'ask-nothing-1'" in missing.output


def test_release_lifts_a_held_seat_once(store: AskStore) -> None:
    store.hold(AskBrake(seat_id="scout", held=True, since_ms=NOW, why="3 of its last 5"))
    refused = runner.invoke(cli, ["asks", "release", "scout", "--by", "somebody"])
    assert refused.exit_code == 2 and "'somebody' is not a member" in refused.output
    assert "scout asks again" in run(["asks", "release", "scout", "--by", "gus"])
    brake = store.brake("scout")
    assert brake is not None and not brake.held and brake.lifted_by == "gus"
    again = runner.invoke(cli, ["asks", "release", "scout", "--by", "gus"])
    assert again.exit_code == 1 and "not held" in again.output
    unknown = runner.invoke(cli, ["asks", "release", "nobody", "--by", "gus"])
    assert unknown.exit_code == 2 and "'nobody' is not a seat" in unknown.output


def test_consents_are_listed_and_revoked(store: AskStore) -> None:
    now = int(time.time() * 1000)  # the command lists what holds now
    ask = make_ask(store, key="k-consent", trigger=CONSENT, now_ms=now)
    got = store.answer(ask.id, AnswerIn("approved", "ben", "api"), now_ms=now)
    consent = got.outcome.consent
    assert consent is not None
    listed: dict[str, Any] = json.loads(run(["consents", "--json"]))
    assert [c["id"] for c in listed["consents"]] == [consent.id]
    text = run(["consents"]).splitlines()
    assert text[0].startswith(f"{consent.id}  holds until ")
    assert text[2].startswith("  approved by ben for seat scout, ")
    assert "revoked by ava" in run(["consents", "revoke", consent.id, "--by", "ava"])
    assert run(["consents"]).strip() == "no consent records hold now"
    every = json.loads(run(["consents", "--all", "--json"]))
    assert [c["revokedBy"] for c in every["consents"]] == ["ava"]
    again = runner.invoke(cli, ["consents", "revoke", consent.id, "--by", "ava"])
    assert again.exit_code == 1 and "revoked already" in again.output
    missing = runner.invoke(cli, ["consents", "revoke", "consent-nothing", "--by", "ava"])
    assert missing.exit_code == 1 and "no consent 'consent-nothing'" in missing.output


def test_the_work_view_and_the_ledger_show_the_answer(store: AskStore) -> None:
    ask = make_ask(store, now_ms=NOW)
    store.answer(ask.id, AnswerIn("done", "ben", "api"), now_ms=NOW + 5)
    status = WorkStatus(
        tracking_id="t-1",
        state="engaged",
        seat_id="scout",
        accepted_at_ms=NOW,
        decision={"engage": True, "workId": ask.work_id, "reasonCode": "blocked:access"},
        asks=tuple(store.of_work(ask.work_id)),
    )
    lines = work_lines(status)
    assert "  asks         1 of this work, newest first" in lines
    assert any(line.startswith(f"    ask {ask.id}: done by ben via api, ") for line in lines)


def test_the_text_keeps_identifiers_whole(store: AskStore) -> None:
    ask = make_ask(store, key="k-" + "x" * 90, body="word " * 200, now_ms=NOW)
    listing = ask_lines(ask)
    assert listing[0].startswith(f"{ask.id}  open") and len(listing[0]) > 80  # whole
    detail = detail_lines(AskDetail(ask=ask, escalations=ask.escalations))
    words = [line for line in detail if line.strip().startswith("word")]
    assert len(words) > 5 and all(len(line) <= 80 for line in words)
