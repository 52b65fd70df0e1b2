"""Every state and verb the Lua scripts and the workers use is one contracts/journal.py names.

The scripts are read as Lua source: a small lexer separates comments from code and yields
every string literal. Each literal in code must be a named state, verb or code, or sit on the
commented allow-list below (Redis commands, hash fields, text fragments); a literal with a
space in it is prose (an error reply) and passes. On top of that, literals in a known
position must be of the right group: a value written to or compared with `state` is a state,
the first thing a script returns is a verb. Comments count too where they list the values an
ARGV carries (`(engaged|shadowed|...)`, `'dead' | 'failed'`): those come from Python, and a
state a script only receives is still one it must name.

The workers' Python is read with `ast`: a string compared with a `state`, `verb` or `outcome`,
or passed as `outcome=`, `final_state=`, `close_as=`, must be named too, and a literal table
of states (`FINAL_STATES = ...`, `states=(...)`) must hold only journal states.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path
from typing import get_args

import pytest

from contracts.asks import AnswerOutcome, AskClose, AskState, RevokeOutcome
from contracts.guardrails import COUNTED_OUTCOMES, Outcome
from contracts.journal import (
    CLOSED_STATES,
    DEAD_LETTER_REASONS,
    ENTRY_KINDS,
    FINAL_STATES,
    INBOUND_FINAL_STATES,
    JOURNAL_STATES,
    LEDGER_OUTCOMES,
    OP_FINAL_STATES,
    OP_LIVE_STATES,
    OP_STATES,
    OPEN_STATES,
    REFUSAL_CODES,
    RELEASE_COUNTERS,
    SCRIPT_VERBS,
    WORK_FINAL_STATES,
    WORK_OPEN_STATES,
    BegunAs,
    ClosedState,
    SendBeginVerb,
)
from contracts.send_gate import SendOutcome

ROOT = Path(__file__).resolve().parents[1]
# The scripts live in workers/stores/lua; any depth under workers/ is found.
LUA_FILES = sorted(ROOT.glob("workers/**/*.lua"))
PY_FILES = sorted(ROOT.glob("workers/**/*.py"))

STATES = JOURNAL_STATES | OP_STATES
NAMED: frozenset[str] = frozenset(
    STATES
    | SCRIPT_VERBS
    | LEDGER_OUTCOMES
    | set(REFUSAL_CODES)
    | set(DEAD_LETTER_REASONS)
    | set(RELEASE_COUNTERS)
    | set(ENTRY_KINDS)
    | set(get_args(BegunAs))
)

# ------------------------------------------------------------------ the allow-list

# Literals in Lua code that are not states or verbs, by what they are.
REDIS_COMMANDS = frozenset(
    {
        "DEL",  # leader_release
        "EXISTS",
        "GET",  # the beat epoch (a fencing token)
        "HDEL",
        "HEXISTS",  # direction_vote, direction_end: a recorded result
        "HGET",
        "HINCRBY",
        "HSET",
        "HSETNX",
        "HVALS",  # ask_view_common: a work's declines
        "INCR",  # leader_hold: a new term's token
        "LINDEX",  # controller_observe: a seat's last finished turn
        "LPUSH",
        "LTRIM",  # ask_commit: the brake's window of concluded asks
        "RPUSH",  # seat_run_write: a seat's finished turns
        "PERSIST",
        "PEXPIRE",
        "PEXPIREAT",  # ask_commit: a work's consents kept as long as its latest consent
        "PTTL",  # leader_hold: a standby's wait
        "SET",  # delivery_count: a started message's running mark
        "SADD",
        "TIME",
        "XADD",
        "XTRIM",
        "ZADD",
        "ZCARD",
        "ZCOUNT",
        "ZMSCORE",  # guard_count: an expired reservation left out of a count
        "ZRANGEBYSCORE",
        "ZREM",
        "ZRANGE",
        "ZREMRANGEBYRANK",
        "ZREMRANGEBYSCORE",
        "ZREVRANGE",
        "ZREVRANGEBYSCORE",  # ask_create: the ask of the latest earlier attempt
        "ZSCORE",
        "HMGET",
        "HSTRLEN",
    }
)
COMMAND_ARGUMENTS = frozenset(
    {
        "MAXLEN",  # XADD: cap the stream ...
        "~",  # ... approximately
        "*",  # XADD: a new id
        "MINID",  # XTRIM
        "PX",  # SET: with a TTL in ms
        "PXAT",  # SET: until a time (ms): a consent's record
        "LIMIT",  # ZRANGEBYSCORE
        "WITHSCORES",  # ZREVRANGE
        "XX",  # ZADD: only an existing member
        "LT",  # ZADD: only lower a member's score (a wake-up keeps a sooner due time)
        "-inf",  # score bounds
        "+inf",
        "(",  # an exclusive score bound's prefix
        "-0",  # a stream id's sequence part
        "0",  # flags and zeroed fields (leaseUntilMs, roomCreated)
        "1",
    }
)
HASH_FIELDS = frozenset(
    {
        # an ask (workers/stores/asks.py): its document, version, created ms, last commit
        "v",
        "at",
        "op",
        # inbox meta (and the stats hash): the items refused for the cap, and those reported
        "overflowed",
        "overflowSeen",
        # a final work entry: the size of the payload it gave up
        "payloadBytes",
        "inboxOverflowed",
        # journal entry
        "trackingId",
        "kind",
        "seatId",
        "payload",
        "state",
        "acceptedAtMs",
        "updatedAtMs",
        "enqueuedAtMs",
        "resolvedAtMs",
        "finalAtMs",
        "fingerprint",
        "deliveries",
        "decision",
        "summary",
        "reason",
        "detail",
        "failedStage",
        "error",
        "deadFrom",
        "deadReason",
        "deadAtMs",
        "orgVersion",  # an inbound entry: the org version its verdicts were decided against
        # a sent message's index (keys.sent_message, workers/stores/lua/op_finish.lua)
        "workId",
        "opId",
        # a seat's work-controller record (workers/stores/seat_runs.py)
        "rev",
        "doc",
        # the project's flags and card fingerprint (workers/stores/project.py), read by the
        # work controller's observe
        "started",
        "paused",
        "card",
        # the controller's due index state: the org it was filled for, the reconciliation
        # pass's cursor and its next step (workers/stores/seat_runs.py)
        "org",
        "cursor",
        "next",
        "chain",  # ... a chain of ticks: until when it runs, and when it began
        "chainFrom",
        # the run of project-wide items at the end of an inbox (workers/stores/project.py)
        "projectSince",
        "projectEnd",
        # send op
        "verdict",
        "checkedAtMs",
        "atMs",
        "expiresAtMs",
        "roomCreated",
        "attempt",
        "indexes",
        "token",
        "leaseUntilMs",
        "sendingAtMs",
        "begunAs",
        "lastRetry",
        "messageId",
        "channelId",
        "idempotencyId",
        "logged",
        # dead letter
        "stage",
        "task",
        "message",
        "replayedAtMs",
        # COLLABORATE claim (claim_take, claim_release): the hash and its history stream
        "holder",
        "ownerId",
        "sinceMs",
        "untilMs",
        "event",
        "previous",
        # inbox meta, seat counters, stream entries
        "last",
        "acked",
        "notices",
        "item",
        "row",
        # issue coordination (issue_*.lua): the issue, its request receipts, its observation
        "owner",
        "generation",
        "refreshedAtMs",
        "workState",
        "blocker",
        "reportedBy",
        "reportedAtMs",
        "reports",
        "receipt",
        "githubState",
        "title",
        "sourceUpdatedAtMs",
        "observedAtMs",
        "reconcile",
        "threadId",  # a seat message (message_send)
        "deadlineMs",  # a project direction (direction_*.lua) ...
        "result",  # ... and its recorded result
        "draft",  # an observed pull request (work_observe)
        "merged",
    }
)
TEXT_FRAGMENTS = frozenset(
    {
        "",  # "none" in an ARGV or a reply
        "note:",  # the prefix of a send's notes on its op
        '"position":0',  # inbound_record fills in an inbox position ...
        '"position":',
        'null,"inboxFull":true',  # ... or, when the seat's inbox was full, none
        '"@body@"',  # journal_enqueue splices the Celery body into its message ...
        "[[",
        "], {}, ",
        "]",
        "[^,]+",  # a gmatch pattern: comma-separated states
        ")",  # the end of an error text
        "%d:%s",  # sample_record's id format: {atMs}:{source}
    }
)
NOT_STATES = REDIS_COMMANDS | COMMAND_ARGUMENTS | HASH_FIELDS | TEXT_FRAGMENTS

# ------------------------------------------------------------------ reading Lua

_LONG_OPEN = re.compile(r"\[(=*)\[")
_WORD = r"[A-Za-z_]\w*"
_COMMENT_ALTERNATIVES = re.compile(rf"\b{_WORD}(?:\|{_WORD})+\b|'{_WORD}'(?:\s*\|\s*'{_WORD}')+")
_COMMENT_QUOTED = re.compile(rf"'({_WORD})'")
_Q = r"(['\"])(.*?)\1"  # a quoted literal: group 1 the quote, group 2 its text

# (pattern on comment-free code, the group of names it must be in, what that group is)
POSITIONS: tuple[tuple[re.Pattern[str], frozenset[str], str], ...] = (
    (re.compile(rf"'state'\s*,\s*{_Q}"), STATES, "a state written"),
    (
        re.compile(rf"(?:\bstate|'state'\s*\))\s*[=~]=\s*{_Q}"),
        STATES,
        "a state compared",
    ),
    (re.compile(rf"\breturn\s*\{{?\s*{_Q}"), frozenset(SCRIPT_VERBS), "a verb returned"),
    (re.compile(rf"'begunAs'\s*,\s*{_Q}"), frozenset(get_args(BegunAs)), "a begunAs"),
    (re.compile(rf"\bcloseAs\s*[=~]?=\s*{_Q}"), frozenset(CLOSED_STATES), "a closeAs"),
    (re.compile(rf"\breason\s*=\s*{_Q}"), frozenset(DEAD_LETTER_REASONS), "a dead-letter reason"),
    (re.compile(rf"\bcode\s*=\s*{_Q}"), frozenset({"", *REFUSAL_CODES}), "a refusal code"),
)


def lex_lua(source: str) -> tuple[str, list[tuple[int, str]], list[tuple[int, str]]]:
    """The code with its comments blanked (lines kept), its string literals and its comments,
    each with the line it starts on."""
    code: list[str] = []
    strings: list[tuple[int, str]] = []
    comments: list[tuple[int, str]] = []
    i, n, line = 0, len(source), 1

    def skip(j: int) -> None:  # blank source[i:j] in the code, keeping its newlines
        nonlocal i, line
        chunk = source[i:j]
        code.append(re.sub(r"[^\n]", " ", chunk))
        line += chunk.count("\n")
        i = j

    while i < n:
        if source.startswith("--", i):
            long = _LONG_OPEN.match(source, i + 2)
            if long:
                end = source.find(f"]{long[1]}]", long.end())
                end = n if end < 0 else end + len(long[1]) + 2
                comments.append((line, source[long.end() : end]))
            else:
                end = source.find("\n", i)
                end = n if end < 0 else end
                comments.append((line, source[i + 2 : end]))
            skip(end)
            continue
        long = _LONG_OPEN.match(source, i)
        quote = source[i] if source[i] in "'\"" else ""
        if long or quote:
            if long:
                close = f"]{long[1]}]"
                end = source.find(close, long.end())
                end = n if end < 0 else end
                strings.append((line, source[long.end() : end]))
                end += len(close)
            else:
                j = i + 1
                while j < n and source[j] not in (quote, "\n"):
                    j += 2 if source[j] == "\\" else 1
                strings.append((line, source[i + 1 : j]))
                end = j + 1
            code.append(source[i:end])
            line += source.count("\n", i, end)
            i = end
            continue
        code.append(source[i])
        line += source[i] == "\n"
        i += 1
    return "".join(code), strings, comments


def lua_findings(source: str, filename: str) -> list[str]:
    """Every literal of a Lua script that contracts/journal.py does not name, as
    'file:line: what', or a named one in a position its group does not allow."""
    code, strings, comments = lex_lua(source)
    found: list[str] = []
    for line, text in strings:
        if text not in NAMED and text not in NOT_STATES and not re.search(r"\s", text):
            found.append(f"{filename}:{line}: {text!r} is not a named state, verb or code")
    for pattern, allowed, what in POSITIONS:
        for match in pattern.finditer(code):
            if match[2] not in allowed:
                line = code.count("\n", 0, match.start()) + 1
                found.append(f"{filename}:{line}: {match[2]!r} is not {what} named as one")
    for line, text in comments:
        words = [
            w.strip("' ") for alt in _COMMENT_ALTERNATIVES.finditer(text) for w in alt[0].split("|")
        ]
        words += _COMMENT_QUOTED.findall(text)
        for word in dict.fromkeys(words):
            if word not in NAMED and word not in NOT_STATES:
                found.append(f"{filename}:{line}: {word!r} (in a comment) is not named")
    return found


# ------------------------------------------------------------------ reading the workers

PY_POSITIONS = frozenset({"state", "verb", "outcome"})
PY_KEYWORDS = frozenset({"outcome", "final_state", "close_as", "state", "verb"})
# The send gate's outcomes are compared as `gate.outcome` in the send stage; an ask's states,
# ends, answer and revocation outcomes (contracts/asks.py) as `ask.state`, `outcome.outcome`.
PY_NAMED = (
    NAMED
    | frozenset(get_args(SendOutcome))
    | frozenset(get_args(AskState))
    | frozenset(get_args(AskClose))
    | frozenset(get_args(AnswerOutcome.model_fields["outcome"].annotation))
    | frozenset(get_args(RevokeOutcome))
)


def _subject(node: ast.expr) -> str | None:
    """The name a comparison is about: `x.state`, `state`, `x["state"]`, `x.get("state")`."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return str(node.args[0].value)
    return None


def _strings(node: ast.AST) -> Iterable[ast.Constant]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub


def python_findings(source: str, filename: str) -> list[str]:
    """Every string a workers module uses as a state, verb or outcome that is not named, and
    every literal table of states holding something that is not a journal or op state."""
    found: list[str] = []

    def check(constants: Iterable[ast.Constant], allowed: frozenset[str], what: str) -> None:
        for c in constants:
            if c.value not in allowed:
                found.append(f"{filename}:{c.lineno}: {c.value!r} is not {what}")

    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Compare) and _subject(node.left) in PY_POSITIONS:
            for right in node.comparators:
                if isinstance(right, ast.Constant | ast.Tuple | ast.List | ast.Set):
                    check(_strings(right), PY_NAMED, f"a named {_subject(node.left)}")
        elif isinstance(node, ast.keyword) and node.arg in PY_KEYWORDS:
            if isinstance(node.value, ast.Constant | ast.IfExp):
                check(_strings(node.value), PY_NAMED, f"a named {node.arg}")
        elif isinstance(node, ast.keyword) and node.arg == "states":
            check(_strings(node.value), frozenset(STATES), "a journal state")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if node.value is not None and any(name.endswith("STATES") for name in names):
                check(_strings(node.value), frozenset(STATES), "a journal state")
    return found


def literal_final_states(source: str) -> frozenset[str] | None:
    """The strings of a module's `FINAL_STATES = frozenset({...})`, if it writes them out."""
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "FINAL_STATES" for t in node.targets)
            and isinstance(node.value, ast.Call)
        ):
            return frozenset(str(c.value) for c in _strings(node.value))
    return None


# ------------------------------------------------------------------ the scripts


def test_the_lua_scripts_are_found() -> None:
    """Given the workers' tree, when its Lua scripts are globbed, then at least 15 are found,
    so the check below cannot pass vacuously."""
    assert len(LUA_FILES) >= 15, LUA_FILES


@pytest.mark.parametrize("path", LUA_FILES, ids=lambda p: p.name)
def test_every_lua_script_uses_only_named_states_and_verbs(path: Path) -> None:
    """Given a Lua script, when its literals are read, then each is named in contracts/journal.py
    or allow-listed, and each in a state or verb position is of that group."""
    found = lua_findings(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, "unnamed literals:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("return {'teleported', '', ''}\n", "'teleported' is not a named state"),
        ("redis.call('HSET', KEYS[1], 'state', 'limbo')\n", "'limbo' is not a named state"),
        ("if state == 'purgatory' then return 1 end\n", "'purgatory' is not a named state"),
        ('local s = "vaporised"\n', "'vaporised' is not a named state"),
        ("local s = [[astral]]\n", "'astral' is not a named state"),
        ("redis.call('HSET', KEYS[1], 'state', 'go')\n", "'go' is not a state written"),
        (
            "if redis.call('HGET', KEYS[1], 'state') ~= 'busy' then end\n",
            "'busy' is not a state compared",
        ),
        ("return {'reserved', 1}\n", "'reserved' is not a verb returned"),
        ("redis.call('HSET', k, 'begunAs', 'done')\n", "'done' is not a begunAs"),
        ("dead_letter(k, {closeAs = 'engaged'})\n", "'engaged' is not a closeAs"),
        ("local a = {reason = 'missing'}\n", "'missing' is not a dead-letter reason"),
        ("code = 'rate_limited_moon'\n", "'rate_limited_moon' is not a named state"),
        ("-- ARGV: 1 outcome (engaged|evaporated)\nreturn 1\n", "'evaporated' (in a comment)"),
        ("-- Returns 'dead' | 'ghosted'\nreturn 1\n", "'ghosted' (in a comment)"),
        ("-- Returns {'zombie'}\nreturn 1\n", "'zombie' (in a comment)"),
    ],
)
def test_the_lua_checker_reports_an_unnamed_state_or_verb(snippet: str, expected: str) -> None:
    """Given a fake script using a state or verb that is not named (or one in the wrong place),
    when it is checked, then the checker reports it at its line."""
    found = lua_findings(snippet, "fake.lua")
    assert any(expected in f for f in found), found
    assert all(f.startswith("fake.lua:") for f in found)


def test_the_lua_checker_passes_named_literals_and_skips_strings_in_comments() -> None:
    """Given a fake script of named states, verbs, fields and prose, when it is checked, then
    nothing is reported, and a literal inside a comment or a long comment is no code literal."""
    snippet = (
        '--[[ local s = "nothing" is code here: a long comment ]]\n'
        "-- a comment naming 'engaged' and (dead|failed)\n"
        "local state = redis.call('HGET', KEYS[1], 'state')\n"
        "if state == 'sending' or state ~= 'unknown' then\n"
        "  redis.call('HSET', KEYS[1], 'state', 'engaged', 'begunAs', 'reconcile')\n"
        "  return redis.error_reply('NOOP op ' .. ARGV[1] .. ' does not exist')\n"
        "end\n"
        "return {'go', redis.call('HGET', KEYS[1], 'atMs'), ''}\n"
    )
    assert lua_findings(snippet, "fake.lua") == []


def test_the_lexer_keeps_lines_and_escapes() -> None:
    """Given literals with escapes, a comment and a long string over two lines, when lexed,
    then each literal is whole and starts on its own line."""
    code, strings, comments = lex_lua("local a = 'it\\'s'\n-- note\nlocal b = [[x\ny]] .. \"z\"\n")
    assert strings == [(1, "it\\'s"), (3, "x\ny"), (4, "z")]
    assert comments == [(2, " note")]
    assert code.count("\n") == 4 and "note" not in code


# ------------------------------------------------------------------ the Python side


def test_the_ledger_outcomes_are_exactly_the_named_ones() -> None:
    """Given contracts.guardrails.Outcome, when compared with contracts/journal.py, then it is
    exactly an op's states (but `refused`), the refusal codes, `none`, `unroutable` and `off`."""
    assert set(get_args(Outcome)) == LEDGER_OUTCOMES
    assert (OP_STATES - {"refused"}) <= LEDGER_OUTCOMES


def test_the_outcomes_that_hold_a_place_are_live_ops_and_kept_sends() -> None:
    """Given the outcomes counted against the limits, then they are the live op states plus
    the two final outcomes that keep their place (`engaged` and `shadowed`)."""
    assert OP_LIVE_STATES | {"engaged", "shadowed"} == COUNTED_OUTCOMES
    assert COUNTED_OUTCOMES <= OP_STATES


def test_the_groups_of_states_partition_each_record() -> None:
    """Given the named groups, then open, final and closed states never overlap, the journal's
    states are exactly their union, and an op's final states are exactly the work report's
    send outcomes plus `refused`."""
    assert not (OPEN_STATES & FINAL_STATES)
    assert not (CLOSED_STATES & (OPEN_STATES | FINAL_STATES))
    assert JOURNAL_STATES == OPEN_STATES | FINAL_STATES | CLOSED_STATES
    assert FINAL_STATES == WORK_FINAL_STATES | INBOUND_FINAL_STATES
    assert OP_FINAL_STATES <= WORK_FINAL_STATES
    assert OP_LIVE_STATES | {"expired"} | OP_FINAL_STATES == OP_STATES
    assert OP_LIVE_STATES <= WORK_OPEN_STATES
    assert set(get_args(ClosedState)) == {"failed", "dead"}
    assert set(get_args(SendBeginVerb)) == {"go", "reconcile", "busy", "expired", "done", "missing"}


def test_the_workers_modules_are_found() -> None:
    """Given the workers' tree, when its modules are globbed, then the stores and the stages
    are among them, so the Python check cannot pass vacuously."""
    assert len(PY_FILES) >= 15, PY_FILES


@pytest.mark.parametrize("path", PY_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_workers_module_uses_only_named_states_and_verbs(path: Path) -> None:
    """Given a workers module, when its comparisons, keywords and state tables are read, then
    every state, verb or outcome written as a string is a named one."""
    found = python_findings(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, "unnamed states:\n" + "\n".join(found)


def test_a_literal_list_of_final_states_in_workers_is_the_named_one() -> None:
    """Given a workers module that still writes FINAL_STATES out, then it is exactly the named
    set (the list every dead-letter script is given)."""
    for path in PY_FILES:
        written = literal_final_states(path.read_text())
        if written is not None:
            assert written == FINAL_STATES, path


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("if start.verb == 'teleport':\n    pass\n", "'teleport' is not a named verb"),
        ("ok = entry.get('state') in ('accepted', 'limbo')\n", "'limbo' is not a named state"),
        ("ok = entry['state'] != 'gone'\n", "'gone' is not a named state"),
        ("ledger.finish(op, outcome='vanished_ask')\n", "'vanished_ask' is not a named outcome"),
        ("journal.record(t, final_state='meh')\n", "'meh' is not a named final_state"),
        ("Plan(q, None, close_as='buried')\n", "'buried' is not a named close_as"),
        ("FINAL_STATES = frozenset({'engaged', 'ended'})\n", "'ended' is not a journal state"),
        ("Stage(q, t, states=('reserved', 'queued'))\n", "'queued' is not a journal state"),
    ],
)
def test_the_python_checker_reports_an_unnamed_state_or_verb(snippet: str, expected: str) -> None:
    """Given a fake workers module using a state or verb that is not named, when it is
    checked, then the checker reports it at its line."""
    found = python_findings(snippet, "fake.py")
    assert any(expected in f for f in found), found
