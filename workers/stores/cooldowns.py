"""The Slack conversations every worker holds its posts to after a 429 there, until the
Retry-After has passed: one key per conversation, expiring with the wait."""

from __future__ import annotations

import redis

from workers.stores import keys


class ChannelCooldowns:
    """Slack rate-limits posting per conversation: after a 429 in one, every worker holds its
    posts there until the Retry-After has passed, not only the try that got the 429
    (fault test 15, docs/reliability.md). One key per conversation, expiring with the wait."""

    def __init__(self, client: redis.Redis) -> None:
        self.r = client

    def remaining_s(self, channel: str) -> float:
        left = int(self.r.pttl(keys.slack_cooldown(channel)))
        return left / 1000 if left > 0 else 0.0

    def hold(self, channel: str, seconds: float) -> None:
        ms = max(1, int(seconds * 1000))
        key = keys.slack_cooldown(channel)
        pipe = self.r.pipeline(transaction=False)
        pipe.set(key, "1", px=ms, nx=True)
        pipe.pexpire(key, ms, gt=True)  # a longer wait already held stays
        pipe.execute()
