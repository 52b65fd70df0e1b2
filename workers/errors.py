"""The error tree of the shell. Retryability belongs to the type, decided once.

SeatwireError
├── TransientError     worth retrying with backoff (a broker or Redis blip, a full disk)
│   └── LeaseBusy      another worker holds a live send lease; try again after it
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


class PermanentError(SeatwireError):
    pass


class ConfigError(SeatwireError):
    pass
