"""The GitHub work the inbound stream observed, for `find_work` (issue 13): one summary per
(kind, number) of the project's repository, newest GitHub `updated_at` first. The reading of
a webhook, the filters, cursors and the page are pipeline/work_items.py's.

    keys.work_item(kind, n)            hash: doc (the summary, JSON), sourceUpdatedAtMs,
                                       fingerprint, indexes (the index keys it is in, JSON),
                                       draft and merged ('1'/'0', pull requests, as known)
    keys.work_index(kind, state)       zset: item key -> number, every item in that state
    keys.work_label(kind, state, l)    zset: the same, of the items carrying label l
    keys.work_milestone(kind, state, m) zset: the same, of the items in milestone m
    keys.work_expiry(kind)             zset: closed or removed item key -> when it is dropped

One Lua script (work_observe) writes an observation: the staleness check, leaving the old
indexes and entering the new ones, the expiry and the sweep land together or not at all.

Bounded: a closed item is kept `CLOSED_RETENTION_MS` (30 days) after Seatwire observed it
closed, a removed one (deleted, transferred) as a tombstone for as long; at most
`CLOSED_CAP` closed or removed items a kind (the earliest to drop go first) and `OPEN_CAP`
open ones (the lowest numbers go first). Each summary is bounded too (title 500 characters,
100 labels of at most 100). Expired items are swept by the next observations, a few each.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import redis

from pipeline.work_items import Filters, WorkSummary, wire
from workers.stores import keys
from workers.stores.scripts import script, text

CLOSED_RETENTION_MS = 30 * 86_400_000
CLOSED_CAP = 5_000
OPEN_CAP = 10_000
SWEEP_BATCH = 20
SCAN_BATCH = 50  # index entries read at a time while filling a page


def _flag(value: bool | None) -> str:
    return "" if value is None else ("1" if value else "0")


class WorkItems:
    def __init__(
        self,
        client: redis.Redis,
        *,
        closed_retention_ms: int = CLOSED_RETENTION_MS,
        closed_cap: int = CLOSED_CAP,
        open_cap: int = OPEN_CAP,
    ) -> None:
        self.r = client
        self.closed_retention_ms = closed_retention_ms
        self.closed_cap = closed_cap
        self.open_cap = open_cap
        self._observe = script(client, "work_observe")

    @staticmethod
    def indexes_of(summary: WorkSummary) -> list[str]:
        """The index keys the summary belongs in (none for a removed item)."""
        if summary.removed:
            return []
        kind, state = summary.kind, summary.state
        found = [keys.work_index(kind, state)]
        found += [keys.work_label(kind, state, label) for label in summary.labels]
        if summary.milestone is not None:
            found.append(keys.work_milestone(kind, state, summary.milestone))
        return found

    def observe(self, summary: WorkSummary) -> str:
        """Record one observation: `observed`, `older` or `duplicate` (nothing written)."""
        drop_at = "" if summary.is_open else summary.observed_at_ms + self.closed_retention_ms
        reply = self._observe(
            keys=[
                keys.work_item(summary.kind, summary.number),
                keys.work_expiry(summary.kind),
                keys.work_index(summary.kind, "open"),
            ],
            args=[
                summary.number,
                summary.source_updated_at_ms,
                summary.fingerprint(),
                json.dumps(summary.doc(), separators=(",", ":")),
                json.dumps(self.indexes_of(summary)),
                _flag(summary.draft),
                _flag(summary.merged),
                drop_at,
                summary.observed_at_ms,
                self.closed_cap,
                self.open_cap,
                SWEEP_BATCH,
            ],
        )
        return text(reply[0])

    def get(self, kind: str, number: int) -> dict[str, Any] | None:
        """One stored summary as find_work answers it (a tombstone has `removed`), or None."""
        found = self._read([keys.work_item(kind, number)])
        return found[0] if found else None

    def _read(self, item_keys: list[str]) -> list[dict[str, Any]]:
        pipe = self.r.pipeline(transaction=False)
        for key in item_keys:
            pipe.hmget(key, ["doc", "draft", "merged"])
        out = []
        for doc, draft, merged in pipe.execute():
            if doc is None:  # dropped since the index was read
                continue
            body: Mapping[str, Any] = json.loads(text(doc))
            item = wire(
                body,
                None if draft is None else text(draft),
                None if merged is None else text(merged),
            )
            if body.get("removed"):
                item["removed"] = True
            out.append(item)
        return out

    def find(self, filters: Filters, *, want: int) -> list[dict[str, Any]]:
        """Up to `want` matching items after `filters.after`, in number order."""
        if filters.label is not None:
            index = keys.work_label(filters.kind, filters.state, filters.label)
        elif filters.milestone is not None:
            index = keys.work_milestone(filters.kind, filters.state, filters.milestone)
        else:
            index = keys.work_index(filters.kind, filters.state)
        low = "-inf" if filters.after is None else f"({filters.after}"
        found: list[dict[str, Any]] = []
        while len(found) < want:
            batch: list[tuple[bytes, float]] = self.r.zrangebyscore(
                index, low, "+inf", start=0, num=SCAN_BATCH, withscores=True
            )  # type: ignore[assignment]
            if not batch:
                break
            for item in self._read([text(member) for member, _score in batch]):
                if filters.matches(item) and len(found) < want:
                    found.append(item)
            low = f"({int(batch[-1][1])}"
            if len(batch) < SCAN_BATCH:
                break
        return found
