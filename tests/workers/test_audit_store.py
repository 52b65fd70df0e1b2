"""The steward audit store against a real Redis: a run is written once, to its objective's
stream and the global one, read back newest first, and a refused run writes nothing."""

from __future__ import annotations

import pytest
import redis

from contracts.steward import AuditEntry
from workers.stores import keys
from workers.stores.audit import RUNS, StewardAudit

NOW = 1_700_000_000_000


def _entry(objective: str, reason: str, **fields: object) -> AuditEntry:
    return AuditEntry.model_validate(
        {"objectiveKey": objective, "kind": "candidate", "reason": reason, **fields}
    )


def test_a_run_is_written_to_its_objective_and_the_global_stream(redis_client: redis.Redis) -> None:
    """Each entry lands once in its objective's stream and once in the global stream."""
    audit = StewardAudit(redis_client)
    entries = [_entry("a", "one", admitted=True), _entry("b", "two", gate="budget")]
    assert audit.record("run-1", entries, now_ms=NOW) == 2
    assert redis_client.xlen(keys.STEWARD_AUDIT) == 2
    assert redis_client.xlen(keys.steward_audit("a")) == 1
    assert redis_client.xlen(keys.steward_audit("b")) == 1
    (only_b,) = audit.read("b", 10)
    assert only_b.run_id == "run-1" and only_b.at_ms == NOW and only_b.entry == entries[1]


def test_a_run_recorded_twice_is_written_once(redis_client: redis.Redis) -> None:
    """The same run id again, as after a crash, writes nothing and answers 0."""
    audit = StewardAudit(redis_client)
    entries = [_entry("a", "one")]
    audit.record("run-1", entries, now_ms=NOW)
    assert audit.record("run-1", entries, now_ms=NOW + 5) == 0
    assert redis_client.xlen(keys.STEWARD_AUDIT) == 1
    assert redis_client.zscore(RUNS, "run-1") == NOW


def test_reads_are_newest_first_and_limited(redis_client: redis.Redis) -> None:
    """Entries of later runs come first, and `limit` caps how many come back."""
    audit = StewardAudit(redis_client)
    for i in range(3):
        audit.record(f"run-{i}", [_entry("a", f"r{i}")], now_ms=NOW + i)
    assert [r.entry.reason for r in audit.read(None, 10)] == ["r2", "r1", "r0"]
    assert [r.run_id for r in audit.read("a", 2)] == ["run-2", "run-1"]
    assert audit.read("missing", 10) == []


@pytest.mark.parametrize(("run_id", "objective"), [("", "a"), ("run-1", ":runs")])
def test_a_refused_run_writes_nothing(
    redis_client: redis.Redis, run_id: str, objective: str
) -> None:
    """An empty run id or an objective key that could name the marker is refused, no key left."""
    audit = StewardAudit(redis_client)
    with pytest.raises(ValueError):
        audit.record(run_id, [_entry("a", "fine"), _entry(objective, "bad")], now_ms=NOW)
    assert list(redis_client.scan_iter(match=f"{keys.STEWARD_AUDIT}*")) == []


def test_the_last_gap_decision_of_each_objective_is_one_read(redis_client: redis.Redis) -> None:
    """`last_decisions` answers each objective's latest gap decision (candidates are not
    decisions), and nothing for an objective never run."""
    audit = StewardAudit(redis_client)
    for i, action in enumerate(["create", "escalate"]):
        decision = AuditEntry.model_validate(
            {"objectiveKey": "a", "kind": "gap_decision", "reason": f"r{i}", "action": action}
        )
        audit.record(f"run-{i}", [decision, _entry("a", f"c{i}")], now_ms=NOW + i)
    found = audit.last_decisions(["a", "b"])
    assert list(found) == ["a"]
    assert found["a"].run_id == "run-1" and found["a"].at_ms == NOW + 1
    assert found["a"].entry.action == "escalate" and found["a"].entry.reason == "r1"
    assert audit.last_decisions([]) == {}
