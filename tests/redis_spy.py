"""What a test sees a client send: the scripts it runs, by name, in order."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import redis
from redis.connection import AbstractConnection

from workers.stores.scripts import SCRIPTS, source


def scripts_sent(client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the Lua scripts `client` runs from now on (an EVALSHA each, on any of its
    pool's connections, by redis-py's command path or a store script's direct one), in order;
    a script not in `SCRIPTS` by its SHA. An EVALSHA answered NOSCRIPT ran nothing and is not
    listed (a test elsewhere on the server may have flushed the scripts): the script's load
    and its second EVALSHA are what ran."""
    names = {hashlib.sha1(source(n).encode()).hexdigest(): n for n in SCRIPTS}
    pool = client.connection_pool
    sent: list[str] = []
    waiting: dict[int, int] = {}  # connection -> the index in `sent` of its unanswered EVALSHA
    send, read = AbstractConnection.send_command, AbstractConnection.read_response

    def sending(conn: Any, *args: Any, **kwargs: Any) -> None:
        if args and str(args[0]).upper() == "EVALSHA" and conn in _in_use(pool):
            sha = args[1].decode() if isinstance(args[1], bytes) else str(args[1])
            waiting[id(conn)] = len(sent)
            sent.append(names.get(sha, sha))
        send(conn, *args, **kwargs)  # type: ignore[no-untyped-call]

    def reading(conn: Any, *args: Any, **kwargs: Any) -> Any:
        at = waiting.pop(id(conn), None)
        try:
            return read(conn, *args, **kwargs)
        except redis.exceptions.NoScriptError:
            if at is not None:
                del sent[at]
            raise

    monkeypatch.setattr(AbstractConnection, "send_command", sending)
    monkeypatch.setattr(AbstractConnection, "read_response", reading)
    return sent


def _in_use(pool: Any) -> Any:
    """The connections checked out of `pool` (a connection is, while it sends)."""
    return getattr(pool, "_in_use_connections", ())


def round_trips(client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """What `client` sends from now on, one entry per send to the server (a command, a
    pipeline, a script: one round trip each), as the names of the commands in it, upper case.
    A connection's own health check (a PING it sends before a command after a pause) is not
    the caller's and is left out, and so is a script's reload: an EVALSHA answered NOSCRIPT
    (another test on the server flushed the scripts) and the SCRIPT LOAD after it, as
    `scripts_sent` leaves them out."""
    pool = client.connection_pool
    sent: list[list[str]] = []
    waiting: dict[int, int] = {}  # connection -> the index in `sent` of its unanswered EVALSHA
    send, read = AbstractConnection.send_packed_command, AbstractConnection.read_response

    def sending(conn: Any, command: Any, check_health: bool = True) -> None:
        if conn in _in_use(pool):
            names = _command_names(command)
            if names == ["EVALSHA"]:
                waiting[id(conn)] = len(sent)
            if (check_health or names != ["PING"]) and names != ["SCRIPT"]:
                sent.append(names)
        send(conn, command, check_health)  # type: ignore[no-untyped-call]

    def reading(conn: Any, *args: Any, **kwargs: Any) -> Any:
        at = waiting.pop(id(conn), None)
        try:
            return read(conn, *args, **kwargs)
        except redis.exceptions.NoScriptError:
            if at is not None and at < len(sent):
                del sent[at]
            raise

    monkeypatch.setattr(AbstractConnection, "send_packed_command", sending)
    monkeypatch.setattr(AbstractConnection, "read_response", reading)
    return sent


def _command_names(packed: Any) -> list[str]:
    """The name of every command in a packed send (RESP arrays of bulk strings)."""
    data = (
        packed
        if isinstance(packed, bytes | str)
        else b"".join(p if isinstance(p, bytes) else bytes(p) for p in packed)
    )
    raw = data.encode() if isinstance(data, str) else data
    names: list[str] = []
    at = 0
    while at < len(raw):
        end = raw.index(b"\r\n", at)
        count = int(raw[at + 1 : end])
        at = end + 2
        for i in range(count):
            end = raw.index(b"\r\n", at)
            size = int(raw[at + 1 : end])
            if i == 0:
                names.append(raw[end + 2 : end + 2 + size].decode().upper())
            at = end + 2 + size + 2
    return names
