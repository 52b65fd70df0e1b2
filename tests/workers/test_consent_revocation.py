"""Revoking a consent on a real Redis: written in one step with the revocation on its ask's
answer and the seat's one `consent_revoked` inbox item; a second revocation (a retry, another
person, two racing) writes nothing more; a consent that outlived its ask is still revoked and
told; and after a revocation the next report needing that consent asks its person again,
through the real stages, as a new ask."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis

from contracts import WorkReport
from contracts.asks import ConsentRecord
from contracts.messages import DecisionEnvelope, ReservedEnvelope, WorkEnvelope
from pipeline.asks import AnswerIn, revoke_consent
from tests.ask_records import CONSENT, make_ask
from tests.fakes import Clock, FakeOutbound, stages_on
from tests.workers.test_slack_interactions import snapshot
from workers.stages import Stages
from workers.stores import keys
from workers.stores.asks import AskStore
from workers.stores.inbox import Inbox, InboxRoom
from workers.stores.scripts import text

pytestmark = pytest.mark.redis

NOW = 1_800_000_000_000
HOUR_MS = 3_600_000


def approved(store: AskStore, key: str = "k-consent") -> ConsentRecord:
    ask = make_ask(store, key=key, trigger=CONSENT, targets=("ben", "chloe"), now_ms=NOW)
    got = store.answer(ask.id, AnswerIn("approved", "ben", "api"), now_ms=NOW + 10)
    assert got.outcome.consent is not None
    return got.outcome.consent


def kinds(r: redis.Redis, seat: str = "scout") -> list[str | None]:
    return [i.kind for i in Inbox(r).updates(seat).items]


def test_a_revocation_is_written_once_with_the_seats_item(redis_client: redis.Redis) -> None:
    store = AskStore(redis_client)
    consent = approved(store)
    got = store.revoke_consent(consent.id, by="chloe", now_ms=NOW + 100)
    assert got is not None and got.revocation.outcome == "revoked"
    assert got.position == 2  # after the approval's ask_answered item
    assert kinds(redis_client) == ["ask_answered", "consent_revoked"]
    stored = store.get(consent.ask_id)
    assert stored is not None and stored.answer is not None
    assert (stored.answer.consent_revoked_by, stored.answer.consent_revoked_at_ms) == (
        "chloe",
        NOW + 100,
    )
    assert got.revocation.ask is not None and got.revocation.ask.version == stored.version
    kept = store.consent(consent.id)
    assert kept is not None and kept.revoked_by == "chloe"
    # Kept as long as when it was written: its expiry and the retention after it.
    until = redis_client.pexpiretime(keys.consent(consent.id))
    assert until == consent.expires_at_ms + store.retention_ms

    before = snapshot(redis_client)
    again = store.revoke_consent(consent.id, by="ben", now_ms=NOW + 200)
    assert again is not None and again.revocation.reason_code == "already_revoked"
    assert store.revoke(consent.id, by="gus", now_ms=NOW + 300) == kept  # the operator's too
    assert snapshot(redis_client) == before


def test_only_the_people_asked_may_revoke_unless_an_operator_does(
    redis_client: redis.Redis,
) -> None:
    store = AskStore(redis_client)
    consent = approved(store)
    before = snapshot(redis_client)
    refused = store.revoke_consent(consent.id, by="jo", now_ms=NOW + 100)
    assert refused is not None and refused.revocation.reason_code == "not_a_revoker"
    assert "only ben, chloe can revoke" in refused.revocation.why
    assert snapshot(redis_client) == before
    revoked = store.revoke(consent.id, by="jo", now_ms=NOW + 100)  # an operator, for jo
    assert revoked is not None and revoked.revoked_by == "jo"
    assert kinds(redis_client) == ["ask_answered", "consent_revoked"]


def test_revocations_racing_make_one(redis_client: redis.Redis) -> None:
    store = AskStore(redis_client)
    consent = approved(store)

    def revoke(n: int) -> Any:
        by = "ben" if n % 2 else "chloe"
        return store.revoke_consent(consent.id, by=by, now_ms=NOW + 100 + n)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(revoke, range(16)))
    outcomes = [r.revocation.outcome for r in results if r is not None]
    assert outcomes.count("revoked") == 1 and len(outcomes) == 16
    assert kinds(redis_client).count("consent_revoked") == 1
    stored = store.get(consent.ask_id)
    assert stored is not None
    assert [e.event for e in stored.history].count("revoked") == 1


def test_a_revocation_sent_again_after_a_lost_reply_is_written_once(
    redis_client: redis.Redis,
) -> None:
    """The script sent twice with the same arguments (redis-py re-sends it after a reply
    lost on the wire): `again`, with nothing written the second time."""
    store = AskStore(redis_client)
    consent = approved(store)
    raw = redis_client.get(keys.consent(consent.id))
    ask = store.get(consent.ask_id)
    assert raw is not None and ask is not None
    got = revoke_consent(consent, ask, by="ben", now_ms=NOW + 100)
    assert got.ask is not None and got.item is not None
    names = [
        keys.consent(consent.id),
        keys.ask(ask.id),
        *InboxRoom.KEYS,
        *InboxRoom.seat_keys("scout"),
        *keys.CONTROLLER_WAKE,
    ]
    args = [
        raw,
        got.consent.model_dump_json(by_alias=True),
        ask.version,
        got.ask.model_dump_json(by_alias=True),
        "op-1",
        got.item.model_dump_json(by_alias=True).replace('"position":1', '"position":0', 1),
        *store.room.args(),
        "scout",
        consent.expires_at_ms + store.retention_ms,
    ]
    first = store._revoke(keys=names, args=args)
    after = snapshot(redis_client)
    again = store._revoke(keys=names, args=args)
    assert [text(v) for v in first] == ["ok", "2"] and [text(v) for v in again] == ["again", "0"]
    assert snapshot(redis_client) == after
    assert kinds(redis_client) == ["ask_answered", "consent_revoked"]


def test_a_consent_that_outlived_its_ask_is_still_revoked_and_told(
    redis_client: redis.Redis,
) -> None:
    store = AskStore(redis_client)
    consent = approved(store)
    redis_client.delete(keys.ask(consent.ask_id))  # its record's retention ended first
    got = store.revoke_consent(consent.id, by="ben", now_ms=NOW + 100)
    assert got is not None and got.revocation.outcome == "revoked"
    assert got.revocation.ask is None
    [item] = [i for i in Inbox(redis_client).updates("scout").items if i.consent]
    assert item.consent is not None and item.consent.ask_id == consent.ask_id
    assert store.get(consent.ask_id) is None  # nothing written where the ask was
    assert store.revoke_consent("consent-nothing", by="ben", now_ms=NOW) is None


# ------------------------------------------------------------------ through the stages

REPORT: dict[str, Any] = {
    "id": "drop-legacy-table",
    "title": "Drop the legacy invoices table",
    "scope": "billing database",
    "risk": {"irreversible": True},
    "approverId": "ben",
}


def _report(stages: Stages, clock: Clock, tracking: str) -> DecisionEnvelope | None:
    stages.journal.accept(
        tracking, kind="work", seat_id="scout", payload="{}", now_ms=clock.ms, fingerprint="f"
    )
    env = WorkEnvelope(
        tracking_id=tracking,
        seat_id="scout",
        accepted_at_ms=clock.ms,
        report=WorkReport.model_validate(REPORT),
    )
    return stages.engagement(env)


def _send(stages: Stages, decided: DecisionEnvelope | None) -> None:
    assert isinstance(decided, DecisionEnvelope)
    reserved = stages.guardrails(decided)
    assert isinstance(reserved, ReservedEnvelope)
    assert stages.send(reserved) == "engaged"


def test_after_a_revocation_the_same_report_engages_its_person_again(
    redis_client: redis.Redis,
) -> None:
    """Consent on record before the revocation; after it, neither `consent_on_record` nor
    `already_answered` (the same ask, the same revision, was answered approved): the
    decision engages ben again. (The guardrails' re-engage window, measured on Redis's
    own clock, still spaces the send out: that is theirs to judge.)"""
    clock = Clock(NOW)
    stages = stages_on(redis_client, clock, FakeOutbound())
    asks = stages.asks
    assert asks is not None
    _send(stages, _report(stages, clock, "t-1"))
    [first] = asks.of_work(REPORT["id"])
    got = asks.answer(first.id, AnswerIn("approved", "ben", "api"), now_ms=NOW + 10)
    assert got.outcome.consent is not None
    clock.ms = NOW + HOUR_MS
    assert _report(stages, clock, "t-2") is None  # on record
    assert asks.revoke_consent(got.outcome.consent.id, by="ben", now_ms=clock.ms) is not None

    clock.ms = NOW + 2 * HOUR_MS
    again = _report(stages, clock, "t-3")
    rows = {r.tracking_id: r.reason_code for r in stages.ledger.read()}
    assert rows["t-2"] == "consent_on_record"
    assert isinstance(again, DecisionEnvelope) and again.decision.engage
    assert again.decision.reason_code not in ("consent_on_record", "already_answered")
    assert [t.member_id for t in again.decision.targets] == ["ben"]
    assert again.decision.dedupe_key == first.dedupe_key  # the same ask, asked again
