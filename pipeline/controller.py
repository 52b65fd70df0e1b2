"""The quiet-interval work controller: when a seat's next turn runs (docs/architecture.md,
"The work controller"). Pure: time arrives as `now_ms`, randomness as `rng`.

A controller is asked, again and again, what a seat should do now given the latest news about
it: `run` a turn (with the reason that justifies one), `wait` (with what it waits for) or
`stop` (it has failed enough, or its deadline passed). It is told when a turn begins and how it
ended. The rules, in the order `decide` applies them:

- a deadline that has passed, and a seat blocked by its failures, stop;
- news it cannot read (no boolean `started`/`paused`) waits as `unknown_contact`, never runs;
- a project not started or paused (or the seat paused) waits, asking to interrupt a running
  turn; a running turn, and the seat's asks still being delivered, wait;
- the very news the last turn ended with is no reason for another (`fresh_observation`);
- a turn that ended `ok` with items in the inbox that the seat then did not acknowledge counts
  as a failure (`unacknowledged_inbox` once that reaches the limit);
- after a failure, a retry waits `retry_base · 2^(failures-1) · (0.8 + 0.4·rng)`;
- then the first reason to run wins: the first turn, an operator's steering, a retry, a
  continuation the last turn asked for, durable work newer than the last handled revision,
  notices, an inbox with items (project-only news waits a random announcement delay, so that a
  project-wide announcement does not start every seat at once), a changed project card, the
  quiet interval elapsed; and with none of them, `idle`.

The whole state is a `ControllerState` (`to_state` / `from_state`), so it lives in Redis: any
worker can decide for any seat, and a restart forgets nothing. News is compared by value, not
by object identity: two news values are the same observation exactly when their
`observationId`s are equal. Loose inputs are read by JavaScript's rules (`pipeline/js.py`): a
missing count is no count, a numeric string compares as a number.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, TypeGuard

from contracts.controller import (
    OUTCOME_KINDS,
    ControllerDecision,
    ControllerReason,
    ControllerState,
    Loose,
)
from pipeline.js import UNDEFINED, field, js_str, present, to_number, truthy

Rng = Callable[[], float]
MAX_SAFE_INTEGER = 2**53 - 1


class WorkController:
    """The quiet-interval controller. Options are fixed for its life; the state changes with every
    `begin_turn`, `record_outcome` and (for the unacknowledged-inbox rule) `decide`."""

    def __init__(
        self,
        *,
        quiet_interval_ms: float = 0,
        quiet_jitter_ms: float | None = None,
        announcement_jitter_ms: float = 120_000,
        retry_base_ms: float = 10_000,
        max_failures: int = 3,
        deadline_ms: float | None = None,
        now_ms: float | None = None,
        _state: ControllerState | None = None,
    ) -> None:
        if max_failures < 1:
            raise ValueError(f"max_failures must be at least 1, not {max_failures}")
        for name, value in (
            ("quiet_interval_ms", quiet_interval_ms),
            ("announcement_jitter_ms", announcement_jitter_ms),
            ("retry_base_ms", retry_base_ms),
        ):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number of ms >= 0, not {value}")
        self.quiet_interval_ms = quiet_interval_ms
        self.quiet_jitter_ms = (
            quiet_interval_ms * 0.1 if quiet_jitter_ms is None else quiet_jitter_ms
        )
        self.announcement_jitter_ms = announcement_jitter_ms
        self.retry_base_ms = retry_base_ms
        self.max_failures = max_failures
        self.deadline_ms = deadline_ms
        self._resumed: tuple[ControllerState, dict[str, Any]] | None = None
        if _state is not None:
            self._s = _state.model_dump()
            self._resumed = (_state, dict(self._s))
            return
        if quiet_interval_ms > 0 and now_ms is None:
            raise ValueError(
                "now_ms (the controller's creation time) is needed for a quiet interval"
            )
        quiet_at = (
            now_ms + quiet_interval_ms if quiet_interval_ms > 0 and now_ms is not None else None
        )
        self._s = ControllerState(quiet_at=quiet_at).model_dump()

    # ------------------------------------------------------------------ state

    @classmethod
    def from_state(
        cls, state: ControllerState | Mapping[str, Any], **options: Any
    ) -> WorkController:
        """Resume from a stored state (the contract, or its wire dict as read back)."""
        options.pop("now_ms", None)  # the state carries its own times
        parsed = (
            state if isinstance(state, ControllerState) else ControllerState.model_validate(state)
        )
        return cls(**options, _state=parsed)

    def to_state(self) -> ControllerState:
        """The state now: the very state it resumed from when nothing of it changed (so a
        caller can tell "unchanged" by identity, and no validation is paid for it)."""
        if self._resumed is not None and self._resumed[1] == self._s:
            return self._resumed[0]
        return ControllerState.model_validate(self._s)

    def status(self) -> dict[str, Any]:
        """The status (`ControllerStatus`), camelCase: `quietAt` None is never, `retryAt` None is
        none."""
        s = self._s
        return {
            "first": s["first"],
            "active": s["active"],
            "continuation": s["continuation"],
            "failures": s["failures"],
            "blocked": s["blocked"],
            "handledRevision": s["handled_revision"],
            "retryAt": s["retry_at"],
            "quietAt": s["quiet_at"],
        }

    # ------------------------------------------------------------------ transitions

    def request_continuation(self) -> None:
        """Ask for another turn: clears a block and the failure count (an operator's word)."""
        self._s.update(
            continuation=True,
            blocked=False,
            failures=0,
            retry_at=None,
            fresh_after=None,
            awaiting_ack=None,
        )

    def begin_turn(self, news: object) -> None:
        self._s.update(
            active=True,
            continuation=False,
            turn_revision=_loose(field(field(news, "work"), "revision")),
            inbox_at_turn=_mark(field(news, "pending"), field(news, "acknowledged")),
            fingerprint_seen=_fingerprint(news),
            announcement_at=None,
        )

    def record_outcome(
        self,
        kind: str,
        *,
        continuation: bool = False,
        news: object = None,
        retryable: bool = True,
        now_ms: float,
        rng: Rng | None = None,
    ) -> None:
        if kind not in OUTCOME_KINDS:
            raise ValueError(f"unknown outcome kind {kind!r} (one of {sorted(OUTCOME_KINDS)})")
        s = self._s
        was_active = s["active"]
        s["active"] = False
        if kind == "interrupted":
            if was_active:
                s["continuation"] = True
            return
        s["first"] = False
        s["fresh_after"] = _observation_id(news) if news is not None else None
        s["quiet_at"] = (
            now_ms + self.quiet_interval_ms + self._jitter(rng, self.quiet_jitter_ms)
            if self.quiet_interval_ms > 0
            else None
        )
        at_turn = s["inbox_at_turn"]
        awaiting = (
            kind == "ok"
            and at_turn is not None
            and _gt(at_turn["pending"], 0)
            and _le(_nullish(field(news, "acknowledged")), _nullish(at_turn["acknowledged"]))
        )
        s["awaiting_ack"] = dict(at_turn) if awaiting and at_turn is not None else None
        if kind == "failed":
            s["failures"] += 1
            s["blocked"] = not retryable or s["failures"] >= self.max_failures
            s["retry_at"] = None if s["blocked"] else self._retry_at(now_ms, rng)
            s["continuation"] = not s["blocked"]
            return
        if s["awaiting_ack"] is None:
            s["failures"] = 0
        s["blocked"] = False
        s["retry_at"] = None
        s["continuation"] = kind == "send_deferred" or continuation
        revision = s["turn_revision"]
        if kind == "ok" and _safe_integer(revision) and revision >= 0:
            s["handled_revision"] = max(s["handled_revision"], revision)

    def decide(
        self,
        news: object,
        *,
        pending_deliveries: int = 0,
        notices: int = 0,
        steering: bool = False,
        paused: bool = False,
        now_ms: float,
        rng: Rng | None = None,
    ) -> ControllerDecision:
        s = self._s
        if self.deadline_ms is not None and now_ms >= self.deadline_ms:
            return ControllerDecision(action="stop", reason="deadline")
        if s["blocked"]:
            return ControllerDecision(action="stop", reason="failure_limit")
        project = field(news, "project")
        started, halted = field(project, "started"), field(project, "paused")
        if (
            not isinstance(project, Mapping)
            or not isinstance(started, bool)
            or not isinstance(halted, bool)
        ):
            return ControllerDecision(action="wait", reason="unknown_contact")
        if not started or halted or paused:
            return ControllerDecision(action="wait", reason="paused", interrupt=s["active"])
        if s["active"]:
            return ControllerDecision(action="wait", reason="active")
        if pending_deliveries > 0:
            return ControllerDecision(action="wait", reason="pending_delivery")
        same = self._same_observation(news)
        if not steering and same:
            return ControllerDecision(action="wait", reason="fresh_observation")
        awaiting = s["awaiting_ack"]
        if awaiting is not None and not same:
            unacknowledged = _le(
                _nullish(field(news, "acknowledged")), _nullish(awaiting["acknowledged"])
            )
            s["awaiting_ack"] = None
            if unacknowledged:
                s["failures"] += 1
                s["blocked"] = s["failures"] >= self.max_failures
                s["continuation"] = not s["blocked"]
                s["retry_at"] = None if s["blocked"] else self._retry_at(now_ms, rng)
            else:
                s["failures"] = 0
            if s["blocked"]:
                return ControllerDecision(action="stop", reason="unacknowledged_inbox")
        if s["retry_at"] is not None and now_ms < s["retry_at"]:
            return ControllerDecision(
                action="wait", reason="retry_backoff", retry_at_ms=s["retry_at"]
            )
        reason = self._run_reason(news, notices=notices, steering=steering, now_ms=now_ms)
        if reason is None:
            return ControllerDecision(action="wait", reason="idle")
        if (
            reason == "inbox"
            and truthy(field(news, "project_only"))
            and self.announcement_jitter_ms > 0
        ):
            if s["announcement_at"] is None:
                s["announcement_at"] = now_ms + self._jitter(rng, self.announcement_jitter_ms)
            if now_ms < s["announcement_at"]:
                return ControllerDecision(
                    action="wait", reason="announcement_backoff", retry_at_ms=s["announcement_at"]
                )
        return ControllerDecision(action="run", reason=reason)

    # ------------------------------------------------------------------ helpers

    def _run_reason(
        self, news: object, *, notices: int, steering: bool, now_ms: float
    ) -> ControllerReason | None:
        s = self._s
        work = field(news, "work")
        revision = field(work, "revision")
        durable = (
            field(work, "runnable") is True
            and _safe_integer(revision)
            and revision >= 0
            and revision > s["handled_revision"]
        )
        fingerprint = _fingerprint(news)
        if s["first"]:
            return "first"
        if steering:
            return "steering"
        if s["failures"]:
            return "retry"
        if s["continuation"]:
            return "continuation"
        if durable:
            return "durable"
        if notices > 0:
            return "notices"
        if _gt(field(news, "pending"), 0) and (
            not truthy(field(news, "project_only")) or fingerprint != s["fingerprint_seen"]
        ):
            return "inbox"
        if s["fingerprint_seen"] != fingerprint:
            return "project_change"
        if s["quiet_at"] is not None and now_ms >= s["quiet_at"]:
            return "quiet"
        return None

    def _same_observation(self, news: object) -> bool:
        seen = self._s["fresh_after"]
        found = _observation_id(news)
        return (
            seen is not None and found is not None and type(seen) is type(found) and seen == found
        )

    def _retry_at(self, now_ms: float, rng: Rng | None) -> float:
        failures: int = self._s["failures"]
        backoff = self.retry_base_ms * 2.0 ** (failures - 1)
        return float(now_ms + backoff * (0.8 + self._jitter(rng, 0.4)))

    @staticmethod
    def _jitter(rng: Rng | None, span: float) -> float:
        if rng is None:
            raise ValueError("this step draws a random jitter: pass rng (a callable giving [0, 1))")
        return max(0.0, min(1.0, rng())) * span


# ---------------------------------------------------------------------- loose values


def _observation_id(news: object) -> str | int | None:
    found = field(news, "observationId")
    if isinstance(found, bool) or not isinstance(found, str | int):
        return None
    return found


def _fingerprint(news: object) -> str | None:
    """The canonical JSON of `news.project` (every key of it); None when there is none."""
    project = field(news, "project")
    if project is UNDEFINED:
        return None
    # `type(...) is dict` first: the news a tick builds, without the ABC's isinstance.
    if type(project) is dict or isinstance(project, Mapping):
        # A flat project (what the work controller's news always is) is the same for every
        # seat of a tick: its JSON is worked out once, keyed by its keys, types and values.
        flat: list[tuple[str, str, object]] = []
        for k, v in project.items():
            kind = type(v)
            if not isinstance(k, str) or kind not in _SCALARS:
                return _canonical(project)
            flat.append((k, kind.__name__, v))
        flat.sort(key=_first)  # the keys are distinct: they alone order the items
        return _flat_json(tuple(flat))
    return _canonical(project)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _first(item: tuple[str, str, object]) -> str:
    return item[0]


@lru_cache(maxsize=64)
def _flat_json(items: tuple[tuple[str, str, object], ...]) -> str:
    return _canonical({k: v for k, _, v in items})


def _canonical(value: object) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=js_str
    )


def _loose(value: object) -> Loose:
    """A value as the state can keep it: JSON scalars as they are; `undefined` as None (every
    comparison reads both alike); anything else as the string JavaScript would coerce it to."""
    if value is UNDEFINED or value is None or isinstance(value, bool | int | float | str):
        return None if value is UNDEFINED else value  # type: ignore[return-value]
    return js_str(value)


def _mark(pending: object, acknowledged: object) -> dict[str, Loose]:
    """An `InboxMark` as the state keeps it (`_loose` gives only values it holds as they are)."""
    return {"pending": _loose(pending), "acknowledged": _loose(acknowledged)}


def _nullish(value: object) -> object:
    """JavaScript's `value ?? 0`: a missing or null value counts as 0."""
    return value if present(value) else 0


def _number(value: object) -> float:
    number = to_number(value)
    return float(number)


def _gt(a: object, b: object) -> bool:
    """JavaScript's `a > b` for the values the news carries."""
    if isinstance(a, str) and isinstance(b, str):
        return a > b
    x, y = _number(a), _number(b)
    return not (math.isnan(x) or math.isnan(y)) and x > y


def _le(a: object, b: object) -> bool:
    """JavaScript's `a <= b`: false whenever either side is not a number."""
    if isinstance(a, str) and isinstance(b, str):
        return a <= b
    x, y = _number(a), _number(b)
    return not (math.isnan(x) or math.isnan(y)) and x <= y


def _safe_integer(value: object) -> TypeGuard[int | float]:
    """`Number.isSafeInteger`: a number (never a boolean or a numeric string) with no fraction."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return False
    return abs(value) <= MAX_SAFE_INTEGER
