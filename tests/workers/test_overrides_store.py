"""The overrides store against a real Redis: submit records once (duplicate, conflict), a
refusal writes nothing, consume uses an override up once, and list reads them newest first."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from contracts.steward import AuditEntry
from pipeline.goals.dispatch_ids import candidate_key
from workers.org import OrgView, load_org
from workers.stores.audit import StewardAudit
from workers.stores.overrides import OverrideRefused, Overrides

NOW = 1_700_000_000_000
REVIEW, INVOICES = "review-turnaround", "invoices-paid-on-time"
NUDGE = "Nudge reviewers on pull requests waiting over a day"
KEY = candidate_key(NUDGE)
ORG = Path(__file__).resolve().parents[2] / "examples" / "org.yaml"


@pytest.fixture(scope="module")
def view() -> OrgView:
    return OrgView.of(load_org(ORG))


def body(**over: Any) -> dict[str, Any]:
    return {"objective": REVIEW, "candidate": NUDGE, "by": "ava", "reason": "release week", **over}


def snapshot(r: redis.Redis) -> dict[bytes, Any]:
    return {k: r.dump(k) for k in sorted(cast("list[bytes]", r.keys("*")))}


def test_submit_records_once_then_answers_duplicate(
    redis_client: redis.Redis, view: OrgView
) -> None:
    """A new override is recorded and active; the same one again is a duplicate of it."""
    store = Overrides(redis_client)
    status, ov = store.submit(view, body(gates=["wip"]), now_ms=NOW)
    assert status == "recorded" and ov.candidate_key == KEY and ov.gates == ("wip",)
    again, same = store.submit(view, body(gates=["wip"]), now_ms=NOW + 10)
    assert again == "duplicate" and same == ov
    assert store.active(REVIEW) == [ov] and store.list(REVIEW, 10) == [ov]
    assert store.list(None, 10) == [ov]


def test_a_different_active_override_of_the_candidate_is_a_409(
    redis_client: redis.Redis, view: OrgView
) -> None:
    """Another active override of that candidate is refused and nothing changes."""
    store = Overrides(redis_client)
    store.submit(view, body(), now_ms=NOW)
    before = snapshot(redis_client)
    with pytest.raises(OverrideRefused) as refused:
        store.submit(view, body(by="ben"), now_ms=NOW + 1)
    r = refused.value.refusal
    assert (r.status, r.code, r.field) == (409, "override_exists", "candidate")
    assert snapshot(redis_client) == before


@pytest.mark.parametrize(
    ("over", "status", "code", "field"),
    [
        ({"objective": "nope"}, 404, "unknown_objective", "objective"),
        ({"objective": INVOICES}, 409, "objective_not_active", "objective"),
        ({"by": "nobody"}, 422, "unknown_member", "by"),
        ({"candidate": "Rewrite the billing system"}, 422, "unknown_candidate", "candidate"),
    ],
)
def test_each_refusal_writes_nothing(
    redis_client: redis.Redis,
    view: OrgView,
    over: dict[str, Any],
    status: int,
    code: str,
    field: str,
) -> None:
    """Unknown objective, proposed objective, unknown member or candidate: refused, no write."""
    with pytest.raises(OverrideRefused) as refused:
        Overrides(redis_client).submit(view, body(**over), now_ms=NOW)
    r = refused.value.refusal
    assert (r.status, r.code, r.field) == (status, code, field)
    assert redis_client.keys("*") == []


def test_a_candidate_the_audit_rejected_can_be_overridden(
    redis_client: redis.Redis, view: OrgView
) -> None:
    """A proposer's candidate, known from a rejected audit line, is accepted by its title."""
    entry = AuditEntry.model_validate(
        {
            "objectiveKey": REVIEW,
            "kind": "candidate",
            "reason": "cap",
            "candidateTitle": "Pair on the oldest review",
            "admitted": False,
            "gate": "wip",
        }
    )
    StewardAudit(redis_client).record("run-1", [entry], now_ms=NOW - 5)
    status, ov = Overrides(redis_client).submit(
        view, body(candidate="pair on the OLDEST review"), now_ms=NOW
    )
    assert status == "recorded" and ov.candidate_title == "Pair on the oldest review"


def test_consume_uses_it_once_and_frees_the_candidate(
    redis_client: redis.Redis, view: OrgView
) -> None:
    """Consumed: no longer active, a repeat is a no-op, and a new override may be recorded,
    which a repeat of the old dispatch's consume does not use up."""
    store = Overrides(redis_client)
    _, ov = store.submit(view, body(), now_ms=NOW)
    assert store.consume(REVIEW, KEY, "stw_1", now_ms=NOW + 1) is True
    assert store.active(REVIEW) == []
    assert store.consume(REVIEW, KEY, "stw_1", now_ms=NOW + 2) is True
    assert store.consume(REVIEW, KEY, "stw_2", now_ms=NOW + 2) is False
    (used,) = store.list(REVIEW, 10)
    assert used.id == ov.id and used.used_by == "stw_1" and used.used_at_ms == NOW + 1
    status, fresh = store.submit(view, body(by="ben"), now_ms=NOW + 3)
    assert status == "recorded"
    assert store.consume(REVIEW, KEY, "stw_1", now_ms=NOW + 4) is True
    assert store.active(REVIEW) == [fresh]
    assert [o.id for o in store.list(None, 10)] == [fresh.id, ov.id]
    assert [o.id for o in store.list(REVIEW, 1)] == [fresh.id]


def test_consume_without_an_override_is_false(redis_client: redis.Redis) -> None:
    """Nothing to consume: False, and nothing is written."""
    assert Overrides(redis_client).consume(REVIEW, KEY, "stw_1", now_ms=NOW) is False
    assert redis_client.keys("*") == []


def test_racing_operators_record_one_override(redis_client: redis.Redis, view: OrgView) -> None:
    """Eight operators at once on one candidate: one is recorded, the others refused 409."""

    def attempt(i: int) -> str:
        store = Overrides(redis.Redis(connection_pool=redis_client.connection_pool))
        try:
            return store.submit(view, body(reason=f"reason {i}"), now_ms=NOW + i)[0]
        except OverrideRefused as refused:
            return refused.refusal.code

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = sorted(pool.map(attempt, range(8)))
    assert results == ["override_exists"] * 7 + ["recorded"]
    assert len(Overrides(redis_client).active(REVIEW)) == 1
    assert len(Overrides(redis_client).list(None, 100)) == 1
