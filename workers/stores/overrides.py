"""Operator overrides of the goal steward's gates (issue 10 point 5), in Redis.

`submit` checks a request (`pipeline.goals.overrides.check_override`: objective, member,
candidate, against the objective's playbook and the titles its audit has rejected) and records
it; `active` gives the steward run an objective's unused ones; `consume` marks one used by the
dispatch it enabled; `list` reads them back, newest first. Keys, all derived from
`keys.steward_overrides` (an objective key never starts with ':', so none collides):

    steward_overrides(objective)          hash: candidate key -> its latest override's JSON
                                          (active while usedBy is null); one per candidate
    steward_overrides(":all")             hash: override id -> its JSON, every override ever
    steward_overrides(":order")           zset: override id -> atMs, every objective
    steward_overrides(":order:" + obj)    zset: override id -> atMs, one objective's
    steward_overrides(":used")            hash: dispatch id -> the override id it used

Writes are one MULTI under WATCH of the objective's hash, so two operators racing on one
candidate record one override and the other gets `override_exists` (or `duplicate`), and a
consume racing a new override never uses the new one. Round trips are constant per call.
History is not trimmed: overrides are typed by people, a few a day.

    Exception
    +-- OverrideRefused   carries the `OverrideRefusal` (status, code, field, message);
                          nothing was written
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import redis

from contracts.goals import Gate
from contracts.steward import Override, OverrideRequest
from pipeline.goals.overrides import (
    OverrideRefusal,
    Recorded,
    against_active,
    check_override,
    override_audit_entry,
)
from workers.org import OrgView
from workers.stores import keys
from workers.stores.audit import StewardAudit

ALL = keys.steward_overrides(":all")
ORDER = keys.steward_overrides(":order")
USED = keys.steward_overrides(":used")


def _order_of(objective_key: str) -> str:
    return keys.steward_overrides(":order:" + objective_key)


class OverrideRefused(Exception):
    """An override request refused before anything was written."""

    def __init__(self, refusal: OverrideRefusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


class Overrides:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client

    def submit(
        self, view: OrgView, request: OverrideRequest | Mapping[str, Any], *, now_ms: int
    ) -> tuple[Recorded, Override]:
        """Check and record one override: (`recorded`, it) or (`duplicate`, the stored one);
        `OverrideRefused` for the rest (404 objective, 409 not active or another active one,
        422 member or candidate), having written nothing."""
        req = OverrideRequest.model_validate(request)
        objective = view.objective(req.objective)
        rejected: list[str] = []
        last: dict[str, Gate | None] = {}
        if objective is not None and objective.is_active:
            audit = StewardAudit(self.r)
            rejected, last = audit.rejected_titles(objective.key), audit.last_gates(objective.key)
        member_ids = view.member_by_id.keys()
        checked = check_override(
            req,
            objective,
            member_ids=member_ids,
            rejected_titles=rejected,
            now_ms=now_ms,
            last_gates=last,
        )
        if isinstance(checked, OverrideRefusal):
            raise OverrideRefused(checked)
        current = keys.steward_overrides(checked.objective_key)
        with self.r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(current)  # type: ignore[no-untyped-call]
                    raw = pipe.hget(current, checked.candidate_key)
                    existing = None if raw is None else Override.model_validate_json(raw)
                    status = against_active(checked, existing)
                    if isinstance(status, OverrideRefusal):
                        raise OverrideRefused(status)
                    if status == "duplicate":
                        assert existing is not None
                        return status, self._audited(existing, now_ms)
                    pipe.multi()
                    self._put(pipe, checked, index=True)
                    pipe.execute()
                    return status, self._audited(checked, now_ms)
                except redis.WatchError:
                    continue  # another write on this objective's overrides: look again

    def _audited(self, override: Override, now_ms: int) -> Override:
        """Its line in the steward audit, once per override id: a duplicate (a retry after a
        crash between the two writes, too) writes it only if it is not there yet."""
        entry = override_audit_entry(override)
        StewardAudit(self.r).record(override.id, [entry], now_ms=now_ms)
        return override

    def active(self, objective_key: str) -> list[Override]:
        """The objective's unused overrides, oldest first; one round trip."""
        raw = cast(dict[Any, Any], self.r.hgetall(keys.steward_overrides(objective_key)))
        found = (Override.model_validate_json(v) for v in raw.values())
        return sorted((o for o in found if o.active), key=lambda o: (o.at_ms, o.id))

    def consume(
        self, objective_key: str, candidate_key: str, dispatch_id: str, *, now_ms: int
    ) -> bool:
        """Mark the candidate's active override used by `dispatch_id`. True when it is now
        used by that dispatch (also when this was already done: a repeat is a no-op); False
        when there was none to use."""
        current = keys.steward_overrides(objective_key)
        with self.r.pipeline() as pipe:
            while True:
                try:
                    # Watching the objective's hash alone serialises two consumes of one
                    # dispatch (each would write it); USED is global and would only contend.
                    pipe.watch(current)  # type: ignore[no-untyped-call]
                    if pipe.hexists(USED, dispatch_id):
                        return True  # done already; a newer override is left alone
                    raw = pipe.hget(current, candidate_key)
                    stored = None if raw is None else Override.model_validate_json(raw)
                    if stored is None or not stored.active:
                        return False
                    spent = stored.model_copy(update={"used_by": dispatch_id, "used_at_ms": now_ms})
                    pipe.multi()
                    self._put(pipe, spent, index=False)
                    pipe.hset(USED, dispatch_id, spent.id)
                    pipe.execute()
                    return True
                except redis.WatchError:
                    continue

    def list(self, objective_key: str | None, limit: int) -> list[Override]:
        """The newest `limit` overrides, active or used, of one objective or of all; two round
        trips."""
        order = ORDER if objective_key is None else _order_of(objective_key)
        ids = cast(list[Any], self.r.zrevrange(order, 0, max(limit, 1) - 1))
        if not ids or limit < 1:
            return []
        bodies = cast(list[Any], self.r.hmget(ALL, ids))
        return [Override.model_validate_json(b) for b in bodies if b is not None]

    @staticmethod
    def _put(pipe: Any, override: Override, *, index: bool) -> None:
        body = override.model_dump_json(by_alias=True)
        pipe.hset(keys.steward_overrides(override.objective_key), override.candidate_key, body)
        pipe.hset(ALL, override.id, body)
        if index:
            pipe.zadd(ORDER, {override.id: override.at_ms})
            pipe.zadd(_order_of(override.objective_key), {override.id: override.at_ms})
