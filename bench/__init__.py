"""Benchmarks, run by hand (never as timed assertions in the test suite). See bench/README.md."""

import signal
from typing import Any


def _interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def stop_cleanly_on_sigterm() -> None:
    """A bench that starts processes stops them when it is stopped: SIGTERM raises
    KeyboardInterrupt in the main thread, so its `finally` blocks run. Its workers and
    redis-servers run in sessions of their own, out of reach of a signal to its group."""
    signal.signal(signal.SIGTERM, _interrupt)
