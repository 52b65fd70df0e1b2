"""IANA time zones as the send gate reads them: a function from a UTC instant (epoch ms) to
that zone's UTC offset (ms) at that instant. zoneinfo reads the tz database from disk, which
is why this lives in the shell and the gate (pipeline/send_gate.py) takes the function."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from pipeline.send_gate import UtcOffset
from workers.errors import ConfigError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


@lru_cache(maxsize=512)
def offset_of(name: str) -> UtcOffset:
    """The offset function of an IANA zone name; a ConfigError for a zone that does not exist."""
    try:
        zone = zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"unknown time zone {name!r}") from exc

    def offset(utc_ms: int) -> int:
        local = (_EPOCH + timedelta(milliseconds=utc_ms)).astimezone(zone)
        delta = local.utcoffset()
        return 0 if delta is None else delta // _MS

    return offset
