"""How long a send waits before its next try. Pure: the random draw is an argument."""

from __future__ import annotations

BASE_S = 2.0


def retry_delay(
    retries: int, *, retry_after_s: float | None, u: float, cap_s: float, base_s: float = BASE_S
) -> float:
    """Seconds before try `retries + 1`.

    With the provider's `Retry-After`, exactly that plus up to a second of jitter: the
    provider said when, and a rate limit is not a fault that deserves a growing wait (nor is
    it capped here: a wait longer than the caller can hold a task for is parked instead).
    Without one, exponential backoff with equal jitter: half fixed, half drawn, so no two
    senders retry in step and none retries at once; capped at `cap_s`.

    `u` is a uniform draw in [0, 1).
    """
    if not 0 <= u < 1:
        raise ValueError(f"u must be in [0, 1), not {u}")
    ceiling: float = min(cap_s, base_s * float(2 ** min(max(0, retries), 40)))
    backoff: float = ceiling * (0.5 + u / 2)
    if retry_after_s is None:
        return backoff
    return retry_after_s + u
