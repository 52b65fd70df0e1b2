"""The one registry of the Lua scripts in workers/stores/lua, and reading Redis replies.

Every store gets its scripts here, by name: `source(name)` is the text Redis runs (with the
shared `dead_letter` function in front of the scripts that dead-letter), `script(client,
name)` the registered script (EVALSHA, loaded again after a Redis restart). A name that is
not in `SCRIPTS` is refused, so a typo fails at start, not at the first call.

A script is called as redis-py's `Script` is, and on a client of redis-py's own connections it
is sent on one of the client's pooled connections directly (`StoreScript`), under the
client's retry policy, as redis-py's command path sends it: that path's layers above the
connection (the `Script` wrapper, argument filters, its observability hooks, the per-call
closures) cost ~40 us of CPU a call on the bench host, of the ~130 us a pipeline stage spent
on each of its scripts (bench/README.md, "redis-py's command path"). Nothing of the wire,
the pool, the retries or the reconnects is written here: they are redis-py's.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import redis
from redis.commands.core import Script
from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import NoScriptError

# Every script, and the library scripts each one is run with in front of it.
SCRIPTS: dict[str, tuple[str, ...]] = {
    "ask_commit": ("ledger_common", "controller_wake", "inbox_common", "ask_commit_common"),
    "ask_create": ("ask_create_common",),
    "ask_view": ("ask_view_common",),
    "backlog_add": ("controller_wake",),
    "backlog_done": ("controller_wake",),
    "claim_release": ("subject_common",),
    "claim_take": ("subject_common",),
    "consent_revoke": ("ledger_common", "controller_wake", "inbox_common"),
    "controller_commit": ("seat_run_write",),
    "controller_observe": (),
    "controller_take": (),
    "cost_record": (),
    "decision_record": (
        "ledger_common",
        "journal_common",
        "celery_common",
        "dead_letter",
        "stage_start",
    ),
    "delivery_count": ("dead_letter", "stage_start"),
    "direction_end": ("direction_common",),
    "direction_open": ("direction_common", "ledger_common", "controller_wake", "inbox_common"),
    "direction_settle": ("direction_common",),
    "direction_vote": ("direction_common",),
    "dlq_replay": ("dead_letter",),
    "engage_read": ("ask_view_common", "guard_count"),
    "guard_reserve": ("celery_common", "controller_wake", "dead_letter", "stage_start"),
    "guard_tally": ("guard_count",),
    "inbound_record": ("ledger_common", "controller_wake", "inbox_common"),
    "inbox_ack": ("controller_wake",),
    "intent_record": ("controller_wake",),
    "issue_claim": ("subject_common", "issue_common"),
    "issue_member": ("subject_common", "issue_common"),
    "issue_observe": (),
    "issue_refresh": ("subject_common", "issue_common"),
    "issue_release": ("subject_common", "issue_common"),
    "issue_report": ("subject_common", "issue_common"),
    "journal_accept": (),
    "journal_enqueue": ("celery_common",),
    "journal_skip": (),
    "leader_hold": (),
    "leader_release": (),
    "message_send": ("ledger_common", "controller_wake", "inbox_common"),
    "op_finish": ("ledger_common", "journal_common", "op_finish_common"),
    "op_finish_ask": (
        "ledger_common",
        "journal_common",
        "controller_wake",
        "inbox_common",
        "op_finish_common",
        "ask_commit_common",
    ),
    "park": (),
    "project_notify": ("ledger_common", "controller_wake", "inbox_common"),
    "rate_take": (),
    "sample_record": (),
    "send_abandon": (),
    "send_begin": ("dead_letter", "stage_start", "send_begin_common"),
    "send_begin_ask": ("dead_letter", "stage_start", "send_begin_common", "ask_create_common"),
    "send_note": (),
    "send_release": (),
    "send_renew": (),
    "seat_run_commit": ("controller_wake", "seat_run_write"),
    "stage_give_up": ("dead_letter",),
    "sweep_claim": ("dead_letter",),
    "tick_mark": (),
    "unpark_due": (),
    "work_observe": (),
}
# Functions other scripts call, never run alone.
LIBRARIES = frozenset(
    {
        "ask_commit_common",
        "ask_create_common",
        "ask_view_common",
        "celery_common",
        "dead_letter",
        "direction_common",
        "inbox_common",
        "controller_wake",
        "guard_count",
        "journal_common",
        "issue_common",
        "ledger_common",
        "op_finish_common",
        "stage_start",
        "seat_run_write",
        "send_begin_common",
        "subject_common",
    }
)


def _file(name: str) -> str:
    return resources.files("workers.stores").joinpath(f"lua/{name}.lua").read_text()


@cache
def source(name: str) -> str:
    """The text Redis runs for script `name`: its libraries, then its own body."""
    if name not in SCRIPTS:
        raise KeyError(f"no Lua script named {name!r} in workers/stores/lua")
    return "\n".join([*(_file(lib) for lib in SCRIPTS[name]), _file(name)])


# The connections a script is sent on directly: redis-py's own classes, over TCP, TLS or a
# Unix socket. Any other, a subclass included (fakeredis's in embedded mode is one), takes
# redis-py's command path.
_DIRECT = (Connection, SSLConnection, UnixDomainSocketConnection)


class StoreScript:
    """A script registered on `client`, called as redis-py's `Script` is: `(keys, args)`, or
    with `client=` another client or a pipeline (redis-py's `Script` runs it there).

    On `client` itself, when its connections are redis-py's own (`_DIRECT`) and it holds no
    single connection of its own, one EVALSHA on a connection taken from the client's pool
    and given back: sent and read under the connection's retry policy (the client's), the
    connection disconnected after each failed try so the next reconnects, as redis-py's
    `Redis.execute_command` does; a reply that is an error is raised, never retried. A
    NOSCRIPT (Redis restarted, or flushed its scripts) loads the script and sends it again,
    as redis-py's `Script` does. The scripts are idempotent per call, so a try re-sent after
    a lost reply is answered as the first was."""

    def __init__(self, client: redis.Redis, text: str) -> None:
        self.client = client
        self._script: Script = client.register_script(text)
        pool = client.connection_pool
        self.direct = (
            isinstance(pool, redis.ConnectionPool)
            and pool.connection_class in _DIRECT
            and getattr(client, "connection", None) is None
        )

    @property
    def sha(self) -> str:
        return str(self._script.sha)

    def __call__(
        self, keys: Any = None, args: Any = None, client: redis.Redis | None = None
    ) -> Any:
        if (client is not None and client is not self.client) or not self.direct:
            return self._script(keys, args, client)
        named = tuple(keys or ())
        command = (len(named), *named, *(args or ()))
        try:
            return self._send(command)
        except NoScriptError:
            self._script.sha = self.client.script_load(self._script.script)
            return self._send(command)

    def _send(self, command: tuple[Any, ...]) -> Any:
        pool = self.client.connection_pool
        conn = pool.get_connection()
        sha = self._script.sha

        def once() -> Any:
            conn.send_command("EVALSHA", sha, *command)  # type: ignore[no-untyped-call]
            return conn.read_response()

        def failed(_error: Exception) -> None:
            conn.disconnect()  # type: ignore[no-untyped-call]

        try:
            return conn.retry.call_with_retry(once, failed)
        finally:
            pool.release(conn)


def script(client: redis.Redis, name: str) -> StoreScript:
    """Script `name` registered on `client` (its SHA is computed once per call; build a
    store's scripts once, in its constructor)."""
    return StoreScript(client, source(name))


def text(value: Any) -> str:
    """A reply value as text (redis-py returns bytes unless decoding is on)."""
    return value.decode() if isinstance(value, bytes) else str(value)
