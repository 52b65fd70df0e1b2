"""The error tree of the shell. Retryability belongs to the type, decided once.

SeatwireError
├── TransientError     worth retrying with backoff (a broker or Redis blip, a full disk)
│   ├── LeaseBusy      another worker holds a live send lease; try again after it
│   ├── NotSent        a send that provably did not reach the provider (429, refused
│   │                  connection): retry after `retry_after_s`, without reconciling
│   ├── MaybeSent      a send that may have been applied (timeout, reset, 5xx,
│   │                  internal_error): reconcile before anything is sent again
│   └── Deferred       the send gate holds the ask until `until_ms` (quiet hours)
├── PermanentError     retrying cannot help (bad payload, unknown seat, a bug)
└── ConfigError        refused at start: the process must not run with it
"""

from __future__ import annotations


class SeatwireError(Exception):
    pass


class TransientError(SeatwireError):
    pass


class LeaseBusy(TransientError):
    def __init__(self, until_ms: int) -> None:
        super().__init__(f"another worker holds the send lease until {until_ms}")
        self.until_ms = until_ms


class NotSent(TransientError):
    """The provider refused or never received the send; it is safe to send it again."""

    def __init__(self, reason: str, *, retry_after_s: float | None = None, tries: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s
        # Refusals of this kind the op has had, this one included: 0 as an adapter raises
        # it; the send stage raises a new NotSent with the count the op keeps.
        self.tries = tries


class MaybeSent(TransientError):
    """The send left and its outcome is unknown: it may have been applied. `retry_after_s`
    when the provider asked for a wait (a rate-limited reconciliation)."""

    def __init__(self, reason: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s


class Deferred(TransientError):
    """The send gate holds an ask that was not sent until `until_ms`; never a drop."""

    def __init__(self, until_ms: int, reason: str) -> None:
        super().__init__(reason)
        self.until_ms = until_ms
        self.reason = reason


class PermanentError(SeatwireError):
    pass


class ConfigError(SeatwireError):
    pass
