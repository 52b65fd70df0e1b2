"""The goal steward's audit (issue 10): every gap decision and candidate, with its gate.

One steward run writes its `AuditEntry` lines with `record`: each goes, in order, to its
objective's stream `keys.steward_audit(objective)` and to the stream of all objectives
`keys.STEWARD_AUDIT`, as `{runId, atMs, entry}` (the entry's JSON). A run is written at most
once per run id: `RUNS`, a zset of run id -> atMs, is the `done` marker, checked and set in
the same MULTI (under WATCH) as the writes, so a run repeated after a crash writes nothing
twice and a run that died before EXEC wrote nothing at all.

Retention, approximate (`XADD MAXLEN ~`, so Redis trims whole nodes and a stream may hold a
little more): `MAX_GLOBAL` entries in the global stream, `MAX_PER_OBJECTIVE` in each
objective's. A run id is remembered for `RUN_MEMORY_MS` (30 days), far longer than a crashed
run takes to be retried; after that the same id would be written again.

A run's planned dispatches are written in the same MULTI (`keys.steward_pending`, one hash
per objective) and each is taken out once done: a run that dies part-way leaves the rest
there, and the next run of the objective finishes them before it plans again (planning anew
would see the half-done run's own items as work in flight and refuse the rest). A done
dispatch's id is remembered (`keys.steward_dispatched`), and a run is told which of its
possible ids were carried out: closed work or a handoff is never planned again on the same
sample, and never holds a place under the per-run cap.

`LAST` holds each objective's latest gap decision, written in the same MULTI as its run, so
`last_decisions` is one read whatever the audit's length. `rejected_titles` reads the titles
of an objective's newest refused candidates, which an operator's override may name
(`workers.stores.overrides`); one round trip.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis
from redis.client import Pipeline

from contracts.goals import Gate
from contracts.steward import AuditEntry, Dispatch
from workers.stores import keys
from workers.stores.scripts import text

MAX_GLOBAL = 100_000
MAX_PER_OBJECTIVE = 10_000
RUN_MEMORY_MS = 30 * 86_400_000
# A sample decides for at most two cadence periods (then it is stale: drift), 60 days at the
# longest; a carried-out dispatch id is remembered a little longer than that.
DISPATCHED_MEMORY_MS = 62 * 86_400_000
REJECTED_SCAN = 1_000  # how many of an objective's newest lines `rejected_titles` reads
# The run ids already written, under the audit's own prefix; an objective key never starts
# with ':', so no objective's stream can be this key (`record` refuses one that does).
RUNS = keys.steward_audit(":runs")
# Each objective's latest gap decision, {runId, atMs, entry}, written with its run.
LAST = keys.steward_audit(":last")


@dataclass(frozen=True)
class AuditRecord:
    """One stored audit line: the run that wrote it, when, and the entry."""

    run_id: str
    at_ms: int
    entry: AuditEntry

    def to_wire(self) -> dict[str, Any]:
        return {"runId": self.run_id, "atMs": self.at_ms, "entry": self.entry.to_wire()}


class StewardAudit:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client

    def record(
        self,
        run_id: str,
        entries: Sequence[AuditEntry],
        *,
        now_ms: int,
        pending: Sequence[Dispatch] = (),
    ) -> int:
        """Write one run's entries, all or none, once per `run_id`; how many were written
        (0 when this run id was already recorded). `pending` are the run's planned
        dispatches, written with it (`keys.steward_pending`) until each is done (`done`)."""
        if not run_id:
            raise ValueError("a steward run needs a run id")
        for entry in entries:
            if not entry.objective_key or entry.objective_key.startswith(":"):
                raise ValueError(f"objective key {entry.objective_key!r} cannot be audited")
        rows = [(e.objective_key, e.model_dump_json(by_alias=True)) for e in entries]

        with self.r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(RUNS)  # type: ignore[no-untyped-call]
                    if pipe.zscore(RUNS, run_id) is not None:
                        return 0
                    pipe.multi()
                    self._write(pipe, run_id, rows, now_ms)
                    for d in pending:
                        body = d.model_dump_json(by_alias=True)
                        pipe.hset(keys.steward_pending(d.objective_key), d.id, body)
                    pipe.execute()
                    return len(rows)
                except redis.WatchError:
                    continue  # another run was recorded meanwhile: check this one again

    @staticmethod
    def _write(pipe: Pipeline, run_id: str, rows: list[tuple[str, str]], now_ms: int) -> None:
        for objective, body in rows:
            fields: dict[Any, Any] = {"runId": run_id, "atMs": now_ms, "entry": body}
            stream = keys.steward_audit(objective)
            pipe.xadd(stream, fields, maxlen=MAX_PER_OBJECTIVE, approximate=True)
            pipe.xadd(keys.STEWARD_AUDIT, fields, maxlen=MAX_GLOBAL, approximate=True)
            if AuditEntry.model_validate_json(body).kind == "gap_decision":
                pipe.hset(LAST, objective, json.dumps({**fields, "entry": json.loads(body)}))
        pipe.zadd(RUNS, {run_id: now_ms})
        pipe.zremrangebyscore(RUNS, "-inf", f"({now_ms - RUN_MEMORY_MS}")

    def read(self, objective: str | None, limit: int) -> list[AuditRecord]:
        """The newest `limit` entries, newest first: one objective's, or every objective's."""
        stream = keys.STEWARD_AUDIT if objective is None else keys.steward_audit(objective)
        found: list[AuditRecord] = []
        reply = cast(list[tuple[Any, dict[Any, Any]]], self.r.xrevrange(stream, count=limit))
        for _id, raw in reply:
            fields = {text(k): v for k, v in raw.items()}
            found.append(
                AuditRecord(
                    run_id=text(fields["runId"]),
                    at_ms=int(text(fields["atMs"])),
                    entry=AuditEntry.model_validate_json(fields["entry"]),
                )
            )
        return found

    def pending(self, objective: str) -> list[Dispatch]:
        """The objective's planned dispatches that a run wrote and did not finish."""
        raw = cast(dict[Any, Any], self.r.hgetall(keys.steward_pending(objective)))
        return sorted((Dispatch.model_validate_json(v) for v in raw.values()), key=lambda d: d.id)

    def done(self, dispatch: Dispatch, *, now_ms: int) -> None:
        """One planned dispatch is done: no longer pending, and remembered as carried out
        (for `DISPATCHED_MEMORY_MS`), so no later run plans it again; one round trip."""
        done = keys.steward_dispatched(dispatch.objective_key)
        with self.r.pipeline(transaction=True) as pipe:
            pipe.hdel(keys.steward_pending(dispatch.objective_key), dispatch.id)
            pipe.zadd(done, {dispatch.id: now_ms})
            pipe.zremrangebyscore(done, "-inf", f"({now_ms - DISPATCHED_MEMORY_MS}")
            pipe.execute()

    def dispatched(self, objective: str, ids: Sequence[str]) -> set[str]:
        """Which of `ids` the objective's runs have carried out; one round trip."""
        if not ids:
            return set()
        scores = self.r.zmscore(keys.steward_dispatched(objective), list(ids))
        return {i for i, score in zip(ids, scores, strict=True) if score is not None}

    def last_decisions(self, objectives: Sequence[str]) -> dict[str, AuditRecord]:
        """The latest gap decision of each objective that has one; one round trip."""
        if not objectives:
            return {}
        found: dict[str, AuditRecord] = {}
        for key, raw in zip(objectives, self.r.hmget(LAST, list(objectives)), strict=True):
            if raw is not None:
                data = json.loads(raw)
                entry = AuditEntry.model_validate(data["entry"])
                found[key] = AuditRecord(data["runId"], int(data["atMs"]), entry)
        return found

    def last_gates(self, objective: str, scan: int = REJECTED_SCAN) -> dict[str, Gate | None]:
        """Per candidate key among the objective's newest `scan` lines, the gate its newest
        line refused it at (None when that line was no gate's refusal)."""
        found: dict[str, Gate | None] = {}
        for record in self.read(objective, scan):
            entry = record.entry
            if entry.kind == "candidate" and entry.candidate_key:
                found.setdefault(entry.candidate_key, entry.gate)
        return found

    def rejected_titles(self, objective: str, scan: int = REJECTED_SCAN) -> list[str]:
        """The distinct titles of refused candidates among the objective's newest `scan`
        lines, newest first."""
        found: dict[str, None] = {}
        for record in self.read(objective, scan):
            entry = record.entry
            if entry.kind == "candidate" and entry.admitted is False and entry.candidate_title:
                found.setdefault(entry.candidate_title, None)
        return list(found)
