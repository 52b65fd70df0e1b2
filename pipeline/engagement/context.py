"""What a decision is judged with besides the work: `EngagementContext`. Pure data.

A frozen dataclass, not a pydantic contract in `contracts/`, on purpose:
- its org legs are the prepared indexes `Directory` and `Rooms`, which belong to this package,
  and `contracts/` may not import `pipeline/` (the one dependency rule);
- it never crosses a boundary: the shell assembles it in-process from the org view, the clock
  and the ledger, out of parts that are contracts already (`Member`, `Channel`, `LedgerRow`,
  `Limits`) and were validated where they came in;
- it is built once per decision on the hot path, where re-validating a 1,000-member directory
  (or even walking it) would cost more than the decision itself.

`EngagementContext.of` reads a plain context (camelCase keys, or an object with snake_case
attributes; a camelCase key wins over its snake_case spelling), which is what
`decide_engagement` accepts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import TypeAdapter

from contracts.guardrails import LedgerRow, Limits
from pipeline.engagement.directory import EMPTY_DIRECTORY, Directory
from pipeline.engagement.surface import EMPTY_ROOMS, Rooms
from pipeline.engagement.targets import MAX_TARGETS, directory_of, target_cap
from pipeline.engagement.values import text
from pipeline.guardrails import DEFAULT_LIMITS

LedgerRows = Sequence[LedgerRow | Mapping[str, object]]

_NO_CLOCK = "decide_engagement needs ctx.nowMs as an integer: it has no clock"
_STRINGS: TypeAdapter[tuple[str, ...]] = TypeAdapter(tuple[str, ...])


@dataclass(frozen=True, slots=True)
class EngagementContext:
    """Everything but the work: who decides, the org, the ledger, the limits and the time.

    `ledger` is every seat's rows that concern these targets (a plain context's `ledger`); `None`
    when the shell judges a tally it reads itself (`plan_engagement`, then
    `conclude_engagement`). Rows may still be camelCase dicts: each is validated only when
    the guardrails count it.
    """

    now_ms: int
    me: str = ""
    directory: Directory = EMPTY_DIRECTORY
    channels: Rooms = EMPTY_ROOMS
    ledger: LedgerRows | None = None
    limits: Limits = DEFAULT_LIMITS
    supervisor_id: str | None = None
    max_targets: int = MAX_TARGETS
    degraded: tuple[str, ...] = ()  # legs of the context that could not be read

    def __post_init__(self) -> None:
        if not isinstance(self.now_ms, int) or isinstance(self.now_ms, bool):
            raise ValueError("EngagementContext needs now_ms (nowMs) as an integer: no clock")

    @classmethod
    def of(cls, ctx: EngagementContext | Mapping[str, object] | object) -> EngagementContext:
        """A plain context (camelCase mapping, or snake_case attributes) as a typed one."""
        if isinstance(ctx, EngagementContext):
            return ctx
        raw_limits = seed_get(ctx, "limits", "limits")
        return cls(
            now_ms=seed_now_ms(ctx),
            me=text(seed_get(ctx, "me", "me")),
            directory=directory_of(seed_get(ctx, "directory", "directory")),
            channels=Rooms.of(seed_get(ctx, "channels", "channels") or ()),
            ledger=_rows(seed_get(ctx, "ledger", "ledger")),
            limits=raw_limits
            if isinstance(raw_limits, Limits)
            else (Limits.model_validate(raw_limits) if raw_limits else DEFAULT_LIMITS),
            supervisor_id=text(seed_get(ctx, "supervisorId", "supervisor_id")) or None,
            max_targets=target_cap(seed_get(ctx, "maxTargets", "max_targets")),
            degraded=seed_degraded(ctx),
        )


def seed_get(ctx: object, camel: str, snake: str) -> object:
    """One leg of a plain context: its camelCase key, else its snake_case name."""
    if isinstance(ctx, Mapping):
        return ctx.get(camel, ctx.get(snake))
    return getattr(ctx, snake, None)


def seed_now_ms(ctx: object) -> int:
    """`ctx.nowMs`, which must be an integer: the decision has no clock of its own."""
    if isinstance(ctx, EngagementContext):
        return ctx.now_ms
    now_ms = seed_get(ctx, "nowMs", "now_ms")
    if not isinstance(now_ms, int) or isinstance(now_ms, bool):
        raise ValueError(_NO_CLOCK)
    return now_ms


def seed_degraded(ctx: object) -> tuple[str, ...]:
    """`ctx.degraded`: the context legs the shell could not read, as text."""
    if isinstance(ctx, EngagementContext):
        return ctx.degraded
    raw = seed_get(ctx, "degraded", "degraded")
    if not raw:
        return ()
    if not isinstance(raw, Iterable):
        raise TypeError(f"ctx.degraded must be a list of strings, not {type(raw).__name__}")
    return _STRINGS.validate_python(list(raw))


def _rows(raw: object) -> LedgerRows | None:
    if not raw:
        return None
    if isinstance(raw, Sequence):
        return raw
    if isinstance(raw, Iterable):
        return tuple(raw)
    raise TypeError(f"ctx.ledger must be a list of rows, not {type(raw).__name__}")
