"""The one registry of the Lua scripts in workers/stores/lua, and reading Redis replies.

Every store gets its scripts here, by name: `source(name)` is the text Redis runs (with the
shared `dead_letter` function in front of the scripts that dead-letter), `script(client,
name)` the registered script (EVALSHA, reloaded by redis-py after a Redis restart). A name
that is not in `SCRIPTS` is refused, so a typo fails at start, not at the first call.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import redis
from redis.commands.core import Script

# Every script, and the library scripts each one is run with in front of it.
SCRIPTS: dict[str, tuple[str, ...]] = {
    "backlog_add": (),
    "backlog_done": (),
    "claim_release": ("subject_common",),
    "claim_take": ("subject_common",),
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
    "direction_open": ("direction_common", "ledger_common", "inbox_common"),
    "direction_settle": ("direction_common",),
    "direction_vote": ("direction_common",),
    "dlq_replay": ("dead_letter",),
    "guard_reserve": ("celery_common", "dead_letter", "stage_start"),
    "guard_tally": (),
    "inbound_record": ("ledger_common", "inbox_common"),
    "inbox_ack": (),
    "intent_record": (),
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
    "message_send": ("ledger_common", "inbox_common"),
    "op_finish": ("ledger_common", "journal_common"),
    "park": (),
    "project_notify": ("ledger_common", "inbox_common"),
    "rate_take": (),
    "sample_record": (),
    "send_abandon": (),
    "send_begin": ("dead_letter", "stage_start"),
    "send_note": (),
    "send_release": (),
    "send_renew": (),
    "seat_run_commit": (),
    "stage_give_up": ("dead_letter",),
    "sweep_claim": ("dead_letter",),
    "tick_mark": (),
    "unpark_due": (),
    "work_observe": (),
}
# Functions other scripts call, never run alone.
LIBRARIES = frozenset(
    {
        "celery_common",
        "dead_letter",
        "direction_common",
        "inbox_common",
        "journal_common",
        "issue_common",
        "ledger_common",
        "stage_start",
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


def script(client: redis.Redis, name: str) -> Script:
    """Script `name` registered on `client` (its SHA is computed once per call; build a
    store's scripts once, in its constructor)."""
    return client.register_script(source(name))


def text(value: Any) -> str:
    """A reply value as text (redis-py returns bytes unless decoding is on)."""
    return value.decode() if isinstance(value, bytes) else str(value)
