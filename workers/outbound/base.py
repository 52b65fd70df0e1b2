"""What every outbound adapter is (`Outbound`: file, slack, webhook) and what it is told about
the send in flight (`SendContext`), plus the Retry-After reading the providers share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from contracts.asks import Ask
from contracts.messages import OutboundAsk, SendResult

MAX_RETRY_AFTER_S = 3600.0  # a provider's wait is trusted up to an hour, never beyond


@dataclass
class SendContext:
    """What an adapter knows about the send in flight besides the ask itself."""

    now_ms: int
    since_ms: int  # when this ask's first try began: reconciliation looks no earlier
    notes: dict[str, str] = field(default_factory=dict)  # steps earlier tries wrote down
    # Writes steps down (a room created, a conversation opened) under the try's lease, so a
    # retry after a crash finds them instead of doing them twice.
    record: Callable[[dict[str, str]], None] = lambda _notes: None

    def remember(self, **notes: str) -> None:
        self.record(notes)
        self.notes.update(notes)


class Outbound(Protocol):
    """An outbound adapter: `send` puts one ask on the wire; `reconcile` finds an earlier try
    of the same ask (by its idempotency id) or says it is provably absent (None).

    Failures are typed (workers/errors.py): `NotSent` (safe to send again, maybe after
    `retry_after_s`), `MaybeSent` (reconcile first), `PermanentError` (one attempt only)."""

    name: str

    def check(self) -> str:
        """Refuse, with a ConfigError, a configuration that can only fail at the first send;
        otherwise say where asks go."""
        ...

    def send(self, ask: OutboundAsk, ctx: SendContext) -> SendResult: ...

    def reconcile(self, ask: OutboundAsk, ctx: SendContext) -> SendResult | None: ...

    def show_answer(self, ask: Ask) -> bool:
        """Show an answered (or snoozed, or ended) ask's state on the message it landed as:
        its answer, who gave it and when. False when this adapter's messages cannot be
        changed once sent (the record still holds the answer)."""
        ...


def seconds(value: object) -> float | None:
    """A Retry-After in seconds, finite and within [0, MAX_RETRY_AFTER_S]; None if unreadable."""
    try:
        wait = float(str(value).strip())
    except ValueError:
        return None
    if wait != wait:  # NaN
        return None
    return min(max(0.0, wait), MAX_RETRY_AFTER_S)
