"""Outbound adapters that talk to real providers (the file outbox is workers/outbox.py)."""

from __future__ import annotations

MAX_RETRY_AFTER_S = 3600.0  # a provider's wait is trusted up to an hour, never beyond


def seconds(value: object) -> float | None:
    """A Retry-After in seconds, finite and within [0, MAX_RETRY_AFTER_S]; None if unreadable."""
    try:
        wait = float(str(value).strip())
    except ValueError:
        return None
    if wait != wait:  # NaN
        return None
    return min(max(0.0, wait), MAX_RETRY_AFTER_S)
