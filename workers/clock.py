"""The shell's wall clock, in one place: the pipeline never reads a clock, it is given one."""

from __future__ import annotations

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000
