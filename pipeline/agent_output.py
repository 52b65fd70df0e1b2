"""What an agent CLI's structured output says about its turn, and nothing more. Pure.

A seat's turn runs an agent CLI (Claude Code, Codex) as a subprocess; the shell
(`workers.outbound.command`) feeds its stdout here chunk by chunk and closes the collector when
the process is gone. The collector keeps only the session identity, the model, the final
text, numeric usage and bounded failure metadata (errors, the names of tools that were denied
permission, counts). Tool arguments, tool results and reasoning/thinking text are read past
and never kept, so nothing a tool saw can leak into a journal or a log through `AgentOutput`.

    AgentOutputCollector(provider)   feed(chunk) any number of times, then close() -> AgentOutput
    safe_name(value)                 a model or tool name fit to record, or None

Providers:

- "claude": the JSON lines of `claude --output-format stream-json` (`system`/`init`,
  `assistant`, `user`, `result` events);
- "codex": the JSON-RPC lines `codex app-server` writes (responses and notifications of one
  thread); nothing is sent, only what can be read from the stream is used;
- "text": no structure; the final text is the bounded tail of what was fed.

Every bound is a constant below. A line (JSON value, or an array of values) longer than
`MAX_LINE_BYTES` is dropped; it and every line that is not JSON count as skipped, never fatal.
`truncated` says some bound was reached (a dropped line, a cut text, a capped list).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Provider = Literal["claude", "codex", "text"]

MAX_LINE_BYTES = 1024 * 1024
MAX_TEXT_BYTES = 32 * 1024
MAX_ERROR_BYTES = 2 * 1024
MAX_ERRORS = 5
MAX_DENIALS = 100
MAX_TOOL_IDS = 4096
MAX_NAME_CHARS = 200
# Ids longer than this are remembered by digest, so 4096 remembered ids stay small.
_MAX_KEY_CHARS = 128

# A name fit to record: ASCII letters, digits and `_ . : / @ [ ] -`, with inner spaces; no
# leading or trailing space, no control characters, no quotes. `claude-sonnet-4-5-20250929`,
# `gpt-5.1-codex`, `mcp__pilot__post`, `Bash` and `opus[1m]` are safe names.
_NAME = re.compile(r"[A-Za-z0-9_.:/@\[\]-](?:[A-Za-z0-9_.:/@\[\] -]*[A-Za-z0-9_.:/@\[\]-])?")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_LINE_BREAKS = re.compile("[\n\r\u2028\u2029]")

CLAUDE_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
# Codex's token totals, by their snake_case names. Codex counts cached tokens inside
# input_tokens (Claude does not), so the two providers' usage keys differ on purpose.
CODEX_USAGE_FIELDS = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "cachedInputTokens": "cached_input_tokens",
    "cacheWriteInputTokens": "cache_write_input_tokens",
}
# Codex thread items that are a tool call (counted by item id, like Claude's tool_use).
CODEX_TOOL_ITEMS = frozenset(
    {"commandExecution", "fileChange", "mcpToolCall", "dynamicToolCall", "webSearch"}
)


@dataclass(frozen=True)
class AgentOutput:
    """What one turn's output said: identity, final text, usage and bounded failure metadata.

    `usage` holds finite non-negative numbers only; `permission_denials` holds tool names only;
    `is_error` and `num_turns` are None when the stream never said; `ended` is True once the
    turn's terminal event (Claude's `result`, Codex's `turn/completed`) was read.
    """

    session_id: str | None = None
    model: str | None = None
    final_text: str = ""
    usage: dict[str, int | float] = field(default_factory=dict)
    cost_usd: float | None = None
    permission_denials: tuple[str, ...] = ()
    tool_calls: int = 0
    errors: tuple[str, ...] = ()
    is_error: bool | None = None
    num_turns: int | None = None
    ended: bool = False
    skipped_lines: int = 0
    truncated: bool = False


def safe_name(value: object) -> str | None:
    """`value` if it is a name fit to record (at most 200 safe characters), else None."""
    if isinstance(value, str) and len(value) <= MAX_NAME_CHARS and _NAME.fullmatch(value):
        return value
    return None


def _uuid(value: object) -> str | None:
    return value if isinstance(value, str) and _UUID.fullmatch(value) else None


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _head(text: str, limit: int) -> tuple[str, bool]:
    """The longest prefix of `text` of at most `limit` UTF-8 bytes, and whether it was cut."""
    if len(text) <= limit // 4 or _utf8_len(text) <= limit:
        return text, False
    cut = text.encode("utf-8", "surrogatepass")[:limit]
    return cut.decode("utf-8", "ignore"), True


def _tail(text: str, limit: int) -> tuple[str, bool]:
    """The longest suffix of `text` of at most `limit` UTF-8 bytes, and whether it was cut."""
    if len(text) <= limit // 4 or _utf8_len(text) <= limit:
        return text, False
    cut = text.encode("utf-8", "surrogatepass")[-limit:]
    return cut.decode("utf-8", "ignore"), True


def _number(value: object) -> int | float | None:
    """A finite, non-negative JSON number (never a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if value >= 0 else None


def _key(value: str) -> str:
    """A bounded key for a remembered id."""
    if len(value) <= _MAX_KEY_CHARS:
        return value
    return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _within_a_line(text: str, first: str, then: str) -> bool:
    """Whether some line of `text` (lower-cased) holds `first` followed later by `then`: the
    regex /first.*then/ in linear time."""
    for line in _LINE_BREAKS.split(text.lower()):
        at = line.find(first)
        if at != -1 and line.rfind(then) >= at + len(first):
            return True
    return False


def is_permission_error(text: str) -> bool:
    """Whether a failed tool result says permission was denied or approval is needed
    (/permission.*denied|requires approval|approval.*required/i)."""
    return (
        _within_a_line(text, "permission", "denied")
        or "requires approval" in text.lower()
        or _within_a_line(text, "approval", "required")
    )


def _reject_constant(name: str) -> float:
    raise ValueError(f"not JSON: {name}")


class AgentOutputCollector:
    """Reads one agent CLI's stdout, in chunks of any size, into an `AgentOutput`."""

    def __init__(self, provider: Provider) -> None:
        if provider not in ("claude", "codex", "text"):
            raise ValueError(f"unknown provider {provider!r}")
        self.provider: Provider = provider
        # The line splitter.
        self._pending: list[str] = []
        self._pending_bytes = 0
        self._dropping = False
        self._skipped = 0
        self._truncated = False
        # What is kept.
        self._session_id: str | None = None
        self._model: str | None = None
        self._last_text = ""
        self._last_text_cut = False
        self._result_text: str | None = None
        self._result_text_cut = False
        self._usage: dict[str, int | float] = {}
        self._cost_usd: float | None = None
        self._errors: list[str] = []
        self._is_error: bool | None = None
        self._num_turns: int | None = None
        self._ended = False
        self._tool_ids: set[str] = set()
        self._tool_names: dict[str, str | None] = {}
        self._denied_ids: set[str] = set()
        self._denials: list[str] = []
        # Codex: the thread and turn this stream is about.
        self._thread_id: str | None = None
        self._turn_id: str | None = None
        # Text: the tail of everything fed (at least MAX_TEXT_BYTES characters of it).
        self._text_tail = ""
        self._text_trimmed = False
        self._closed: AgentOutput | None = None

    # ------------------------------------------------------------------ input

    def feed(self, chunk: str) -> None:
        """Read one more chunk of the stream; lines may span chunks."""
        if self._closed is not None:
            raise ValueError("the collector is closed")
        if self.provider == "text":
            self._text_tail += chunk
            if len(self._text_tail) > 2 * MAX_TEXT_BYTES:
                self._text_tail = self._text_tail[-MAX_TEXT_BYTES:]
                self._text_trimmed = True
            return
        start = 0
        while True:
            end = chunk.find("\n", start)
            self._take(chunk[start:] if end == -1 else chunk[start:end])
            if end == -1:
                return
            self._end_line()
            start = end + 1

    def close(self) -> AgentOutput:
        """Read the last partial line and say what the stream said."""
        if self._closed is None:
            if self.provider != "text":
                self._end_line()
            self._closed = self._output()
        return self._closed

    def _take(self, piece: str) -> None:
        """Add part of the current line, dropping the line once it is over the bound."""
        if self._dropping or not piece:
            return
        size = _utf8_len(piece)
        if self._pending_bytes + size > MAX_LINE_BYTES:
            self._pending, self._pending_bytes = [], 0
            self._dropping = True
            self._skipped += 1
            self._truncated = True
            return
        self._pending.append(piece)
        self._pending_bytes += size

    def _end_line(self) -> None:
        if self._dropping:
            self._dropping = False
            return
        line = "".join(self._pending)
        self._pending, self._pending_bytes = [], 0
        self._line(line)

    def _line(self, line: str) -> None:
        if not line.strip():
            return
        try:
            parsed = json.loads(line, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            self._skipped += 1
            return
        for event in parsed if isinstance(parsed, list) else [parsed]:
            if not isinstance(event, dict):
                continue
            if self.provider == "claude":
                self._claude(event)
            else:
                self._codex(event)

    # ------------------------------------------------------------------ shared

    def _identify(self, session_id: object) -> None:
        found = _uuid(session_id)
        if found is not None:
            self._session_id = found

    def _count_tool(self, tool_id: str) -> None:
        key = _key(tool_id)
        if key in self._tool_ids:
            return
        if len(self._tool_ids) >= MAX_TOOL_IDS:
            self._truncated = True
            return
        self._tool_ids.add(key)

    def _error(self, value: object) -> None:
        if isinstance(value, dict):
            value = value.get("message")
        if not isinstance(value, str) or not value.strip():
            return
        if len(self._errors) >= MAX_ERRORS:
            self._truncated = True
            return
        text, cut = _head(value, MAX_ERROR_BYTES)
        self._truncated |= cut
        self._errors.append(text)

    def _deny(self, tool_use_id: object, tool: object) -> None:
        """Record a permission denial of `tool`, once per tool use id: a tool use reported
        twice is one denial."""
        name = safe_name(tool)
        key = _key(tool_use_id) if isinstance(tool_use_id, str) and tool_use_id else None
        if name is None or (key is not None and key in self._denied_ids):
            return
        if len(self._denied_ids) >= MAX_TOOL_IDS or len(self._denials) >= MAX_DENIALS:
            self._truncated = True
            return
        if key is not None:
            self._denied_ids.add(key)
        self._denials.append(name)

    def _remember_text(self, value: object) -> None:
        if isinstance(value, str) and value.strip():
            self._last_text, self._last_text_cut = _head(value, MAX_TEXT_BYTES)

    # ------------------------------------------------------------------ claude

    def _claude(self, e: Mapping[str, Any]) -> None:
        kind = e.get("type")
        if kind == "system" and e.get("subtype") == "init":
            self._model = safe_name(e.get("model"))
            if self._session_id is None:
                self._identify(e.get("session_id"))
        elif kind == "assistant":
            message = _obj(e.get("message"))
            for block in _list(message.get("content")):
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    self._remember_text(block.get("text"))
                elif block.get("type") == "tool_use":
                    self._claude_tool_use(e, message, block)
        elif kind == "user":
            for block in _list(_obj(e.get("message")).get("content")):
                if (
                    isinstance(block, dict)
                    and block.get("type") == "tool_result"
                    and block.get("is_error") is True
                    and is_permission_error(_result_text(block.get("content")))
                ):
                    tool_use_id = block.get("tool_use_id")
                    tool = (
                        self._tool_names.get(_key(tool_use_id))
                        if isinstance(tool_use_id, str)
                        else None
                    )
                    self._deny(tool_use_id, tool)
        elif kind == "result":
            self._claude_result(e)

    def _claude_tool_use(
        self, e: Mapping[str, Any], message: Mapping[str, Any], block: Mapping[str, Any]
    ) -> None:
        tool_id = block.get("id")
        name = safe_name(block.get("name"))
        if isinstance(tool_id, str) and tool_id:
            self._count_tool(tool_id)
            if len(self._tool_names) < MAX_TOOL_IDS:
                self._tool_names[_key(tool_id)] = name
        else:
            owner = message.get("id") or e.get("uuid") or "unknown"
            self._count_tool(f"{owner if isinstance(owner, str) else 'unknown'}:{name}")

    def _claude_result(self, e: Mapping[str, Any]) -> None:
        self._ended = True
        self._identify(e.get("session_id"))
        usage = _obj(e.get("usage"))
        for name in CLAUDE_USAGE_FIELDS:
            number = _number(usage.get(name))
            if number is not None:
                self._usage[name] = number
        cost = _number(e.get("total_cost_usd"))
        if cost is not None:
            self._cost_usd = float(cost)
        result = e.get("result")
        if isinstance(result, str) and result.strip():
            self._result_text, self._result_text_cut = _head(result, MAX_TEXT_BYTES)
        errors = _list(e.get("errors"))
        for error in errors[:MAX_ERRORS]:
            self._error(error)
        self._truncated |= len(errors) > MAX_ERRORS
        denials = _list(e.get("permission_denials"))
        for denial in denials[:MAX_DENIALS]:
            if isinstance(denial, dict):
                self._deny(denial.get("tool_use_id"), denial.get("tool_name"))
        self._truncated |= len(denials) > MAX_DENIALS
        if isinstance(e.get("is_error"), bool):
            self._is_error = e["is_error"]
        turns = e.get("num_turns")
        if isinstance(turns, int) and not isinstance(turns, bool) and turns >= 0:
            self._num_turns = turns

    # ------------------------------------------------------------------ codex

    def _codex(self, e: Mapping[str, Any]) -> None:
        if "method" not in e:
            self._codex_response(e)
            return
        if "id" in e:
            return  # a request of the server (an approval); nothing answers it here
        method = e.get("method")
        v = _obj(e.get("params"))
        if self._thread_id is None or v.get("threadId") != self._thread_id:
            return
        if method == "turn/started":
            turn_id = _obj(v.get("turn")).get("id")
            self._turn_id = turn_id if isinstance(turn_id, str) else None
        turn_id = v.get("turnId")
        if turn_id and self._turn_id and turn_id != self._turn_id:
            return
        if method == "model/rerouted":
            self._model = safe_name(v.get("toModel"))
        elif method == "thread/tokenUsage/updated" and self._turn_id:
            total = _obj(_obj(v.get("tokenUsage")).get("total"))
            for wire, name in CODEX_USAGE_FIELDS.items():
                number = _number(total.get(wire))
                if number is not None:
                    self._usage[name] = number
        elif method in ("item/started", "item/completed"):
            item = _obj(v.get("item"))
            item_id = item.get("id")
            if item.get("type") in CODEX_TOOL_ITEMS and isinstance(item_id, str) and item_id:
                self._count_tool(item_id)
            if method == "item/completed" and item.get("type") == "agentMessage":
                self._remember_text(item.get("text"))
        elif method == "turn/completed":
            turn = _obj(v.get("turn"))
            if self._turn_id and turn.get("id") and turn.get("id") != self._turn_id:
                return
            status = turn.get("status")
            self._ended = True
            self._is_error = status != "completed"
            self._error(_obj(turn.get("error")).get("message"))
        elif method == "error" and v.get("willRetry") is not True:
            self._error(_obj(v.get("error")).get("message"))

    def _codex_response(self, e: Mapping[str, Any]) -> None:
        if "error" in e:
            self._error(_obj(e.get("error")).get("message"))
            return
        result = _obj(e.get("result"))
        thread_id = _uuid(_obj(result.get("thread")).get("id"))
        if thread_id is None:
            return
        self._thread_id = thread_id
        self._turn_id = None
        self._identify(thread_id)
        self._model = safe_name(result.get("model"))

    # ------------------------------------------------------------------ output

    def _output(self) -> AgentOutput:
        if self.provider == "text":
            text, cut = _tail(self._text_tail, MAX_TEXT_BYTES)
            return AgentOutput(final_text=text, truncated=cut or self._text_trimmed)
        if self._result_text is not None:
            text, cut = self._result_text, self._result_text_cut
        else:
            text, cut = self._last_text, self._last_text_cut
        return AgentOutput(
            session_id=self._session_id,
            model=self._model,
            final_text=text,
            usage=dict(self._usage),
            cost_usd=self._cost_usd,
            permission_denials=tuple(self._denials),
            tool_calls=len(self._tool_ids),
            errors=tuple(self._errors),
            is_error=self._is_error,
            num_turns=self._num_turns,
            ended=self._ended,
            skipped_lines=self._skipped,
            truncated=self._truncated or cut,
        )


def _result_text(content: object) -> str:
    """The text of a tool result's content, only to be matched against, never kept."""
    if isinstance(content, str):
        return content
    return " ".join(
        block["text"]
        for block in _list(content)
        if isinstance(block, dict) and isinstance(block.get("text"), str)
    )
