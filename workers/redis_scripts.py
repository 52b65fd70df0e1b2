"""Loading the Lua scripts in workers/lua and reading Redis replies, for every store."""

from __future__ import annotations

from importlib import resources
from typing import Any

import redis


def script_source(name: str) -> str:
    """The text of workers/lua/{name}.lua."""
    return resources.files("workers").joinpath(f"lua/{name}.lua").read_text()


def load_script(client: redis.Redis, name: str) -> Any:
    """A registered script (EVALSHA, reloaded by redis-py after a Redis restart)."""
    return client.register_script(script_source(name))


def text(value: Any) -> str:
    """A reply value as text (redis-py returns bytes unless decoding is on)."""
    return value.decode() if isinstance(value, bytes) else str(value)
