"""The web console's sessions (workers/ingress/console/), kept in Redis.

A session is created by a login (the operator token) or by opening an answer link (the
people it names), and is one key, `keys.console_session(sha256(id))`, with a TTL equal to
its life: the browser's cookie holds only the random id, the store only its hash (a copy of
Redis does not hand out live sessions). Kept server-side rather than signed into the cookie
so that logging out ends the session everywhere at once, and every ingress replica on the
same Redis knows it.

    {"role": "operator" | "person", "persons": [...], "csrf": ..., "createdAtMs",
     "expiresAtMs", "label"}
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Literal

import redis

from workers.stores import keys

SessionRole = Literal["operator", "person"]


def session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


@dataclass(frozen=True)
class ConsoleSession:
    id: str  # the cookie's value (only the session's own holder has it)
    role: SessionRole
    persons: tuple[str, ...]  # a person session: the members it answers as
    csrf: str
    created_at_ms: int
    expires_at_ms: int
    label: str


class ConsoleSessions:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client

    def create(
        self,
        role: SessionRole,
        *,
        now_ms: int,
        ttl_ms: int,
        persons: tuple[str, ...] = (),
        label: str = "",
    ) -> ConsoleSession:
        """A new session living `ttl_ms` (at least one second)."""
        ttl_ms = max(1000, ttl_ms)
        session = ConsoleSession(
            id=secrets.token_urlsafe(32),
            role=role,
            persons=persons,
            csrf=secrets.token_urlsafe(32),
            created_at_ms=now_ms,
            expires_at_ms=now_ms + ttl_ms,
            label=label,
        )
        doc = {
            "role": role,
            "persons": list(persons),
            "csrf": session.csrf,
            "createdAtMs": now_ms,
            "expiresAtMs": session.expires_at_ms,
            "label": label,
        }
        self.r.set(keys.console_session(session_hash(session.id)), json.dumps(doc), px=ttl_ms)
        return session

    def get(self, session_id: str, *, now_ms: int) -> ConsoleSession | None:
        """The live session of a cookie's value; None when unknown, ended or expired."""
        if not session_id or len(session_id) > 200:
            return None
        raw = self.r.get(keys.console_session(session_hash(session_id)))
        if raw is None:
            return None
        doc = json.loads(raw)
        if int(doc["expiresAtMs"]) <= now_ms:
            return None
        role: SessionRole = "operator" if doc["role"] == "operator" else "person"
        return ConsoleSession(
            id=session_id,
            role=role,
            persons=tuple(str(p) for p in doc.get("persons", [])),
            csrf=str(doc["csrf"]),
            created_at_ms=int(doc["createdAtMs"]),
            expires_at_ms=int(doc["expiresAtMs"]),
            label=str(doc.get("label", "")),
        )

    def end(self, session_id: str) -> bool:
        """Log out: the session is gone at once. True when there was one."""
        return bool(self.r.delete(keys.console_session(session_hash(session_id))))

    # ------------------------------------------------------------------ failed logins

    def failures(self, source: str) -> int:
        """Failed logins from `source` in its current window."""
        return int(self.r.get(keys.console_login_failures(source)) or 0)

    def failed(self, source: str, *, window_ms: int) -> int:
        """Count one failed login from `source`; the window starts at its first failure."""
        name = keys.console_login_failures(source)
        pipe = self.r.pipeline(transaction=True)
        pipe.incr(name)
        pipe.pexpire(name, window_ms, nx=True)
        count, _ = pipe.execute()
        return int(count)
