"""Unit tests for the agent output collector (pipeline/agent_output.py). Pure.

Realistic Claude stream-json and Codex app-server transcripts are read into an `AgentOutput`
that holds identity, final text, numeric usage and bounded failure metadata only: never a tool's
arguments, a tool's result or reasoning text, however the stream is cut into chunks.
"""

from __future__ import annotations

import codecs
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.agent_output import (
    MAX_ERROR_BYTES,
    MAX_ERRORS,
    MAX_LINE_BYTES,
    MAX_TEXT_BYTES,
    MAX_TOOL_IDS,
    AgentOutput,
    AgentOutputCollector,
    Provider,
    is_permission_error,
    safe_name,
)

SESSION = "e953a33e-97a0-4d13-9fd4-6a77cd7a68c9"
THREAD = "0199a213-81c0-7800-8aa1-bbab2a035a53"
SECRETS = (
    "sk-ant-SECRET-TOOL-INPUT-1234",
    "AKIA-SECRET-TOOL-RESULT-5678",
    "THINKING-SECRET-plan-to-exfiltrate",
    "SECRET-COMMAND-OUTPUT-9999",
    "SECRET-REASONING-codex",
)


def lines(*events: Any) -> str:
    return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)


def collect(provider: Provider, *chunks: str) -> AgentOutput:
    collector = AgentOutputCollector(provider)
    for chunk in chunks:
        collector.feed(chunk)
    return collector.close()


CLAUDE = lines(
    {
        "type": "system",
        "subtype": "init",
        "session_id": SESSION,
        "model": "claude-sonnet-4-5-20250929",
        "tools": ["Bash", "Edit", "mcp__pilot__post"],
        "permissionMode": "default",
        "cwd": "/srv/seat",
    },
    {
        "type": "assistant",
        "session_id": SESSION,
        "message": {
            "id": "msg_01",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [
                {"type": "thinking", "thinking": SECRETS[2], "signature": "sig"},
                {"type": "text", "text": "Let me check the deploy – übersicht first."},
                {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": "Bash",
                    "input": {"command": f"curl -H 'x-api-key: {SECRETS[0]}' https://x"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_02",
                    "name": "Read",
                    "input": {"file_path": "/srv/seat/.env"},
                },
            ],
        },
    },
    {
        "type": "user",
        "session_id": SESSION,
        "message": {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "is_error": True,
                    "content": "Claude requested permissions to use Bash, but you haven't "
                    "granted it yet. Permission to run this command was denied.",
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_02",
                    "content": [{"type": "text", "text": f"TOKEN={SECRETS[1]}"}],
                },
            ],
        },
    },
    {
        "type": "assistant",
        "session_id": SESSION,
        "message": {
            "id": "msg_02",
            "content": [
                {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {}},
                {"type": "text", "text": "I could not run curl; asking for approval."},
            ],
        },
    },
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": 15230,
        "num_turns": 4,
        "result": "Deploy checked: I need approval to run Bash.",
        "session_id": SESSION,
        "total_cost_usd": 0.0421,
        "usage": {
            "input_tokens": 12,
            "output_tokens": 345,
            "cache_read_input_tokens": 20480,
            "cache_creation_input_tokens": 1024,
            "service_tier": "standard",
            "server_tool_use": {"web_search_requests": 0},
        },
        "permission_denials": [
            {"tool_name": "Bash", "tool_use_id": "toolu_01", "tool_input": {"c": SECRETS[0]}},
            {"tool_name": "WebFetch", "tool_use_id": "toolu_09", "tool_input": {"url": "u"}},
        ],
    },
)


CODEX = lines(
    {"id": 1, "result": {"userAgent": "codex_cli_rs/0.46.0"}},
    {
        "id": 2,
        "result": {
            "thread": {"id": THREAD, "preview": "", "modelProvider": "openai"},
            "model": "gpt-5-codex",
            "modelProvider": "openai",
            "reasoningEffort": "medium",
        },
    },
    {"method": "thread/started", "params": {"thread": {"id": THREAD}}},
    {"id": 3, "result": {"turn": {"id": "turn_1", "status": "inProgress", "items": []}}},
    {
        "method": "turn/started",
        "params": {"threadId": THREAD, "turn": {"id": "turn_1", "status": "inProgress"}},
    },
    {
        "method": "model/rerouted",
        "params": {"threadId": THREAD, "turnId": "turn_1", "toModel": "gpt-5.1-codex-mini"},
    },
    {
        "method": "item/completed",
        "params": {
            "threadId": THREAD,
            "turnId": "turn_1",
            "item": {"type": "reasoning", "id": "rs_1", "summary": [SECRETS[4]], "content": []},
        },
    },
    {
        "method": "item/started",
        "params": {
            "threadId": THREAD,
            "turnId": "turn_1",
            "item": {"type": "commandExecution", "id": "call_1", "command": "cat .env"},
        },
    },
    {
        "method": "item/completed",
        "params": {
            "threadId": THREAD,
            "turnId": "turn_1",
            "item": {
                "type": "commandExecution",
                "id": "call_1",
                "command": "cat .env",
                "aggregatedOutput": SECRETS[3],
                "exitCode": 0,
            },
        },
    },
    {
        "method": "item/completed",
        "params": {
            "threadId": THREAD,
            "turnId": "turn_1",
            "item": {"type": "agentMessage", "id": "msg_1", "text": "Checked: all green."},
        },
    },
    {
        "method": "item/completed",
        "params": {
            "threadId": "00000000-0000-0000-0000-000000000000",
            "turnId": "turn_9",
            "item": {"type": "agentMessage", "id": "msg_9", "text": "another thread"},
        },
    },
    {
        "method": "thread/tokenUsage/updated",
        "params": {
            "threadId": THREAD,
            "turnId": "turn_1",
            "tokenUsage": {
                "total": {
                    "inputTokens": 5120,
                    "outputTokens": 210,
                    "cachedInputTokens": 4096,
                    "cacheWriteInputTokens": 0,
                    "reasoningOutputTokens": 64,
                    "totalTokens": 5330,
                },
                "last": {"inputTokens": 1},
            },
        },
    },
    {
        "method": "turn/completed",
        "params": {"threadId": THREAD, "turn": {"id": "turn_1", "status": "completed"}},
    },
)


def test_a_claude_transcript_keeps_identity_text_usage_cost_and_denied_tool_names() -> None:
    """A Claude stream-json turn yields its session, model, result text, usage, cost, turns,
    tool calls and the denied tools' names, each denial once."""
    out = collect("claude", CLAUDE)
    assert out == AgentOutput(
        session_id=SESSION,
        model="claude-sonnet-4-5-20250929",
        final_text="Deploy checked: I need approval to run Bash.",
        usage={
            "input_tokens": 12,
            "output_tokens": 345,
            "cache_read_input_tokens": 20480,
            "cache_creation_input_tokens": 1024,
        },
        cost_usd=0.0421,
        permission_denials=("Bash", "WebFetch"),
        tool_calls=2,
        errors=(),
        is_error=False,
        num_turns=4,
        ended=True,
        skipped_lines=0,
        truncated=False,
    )


def test_a_claude_turn_without_a_result_keeps_the_last_assistant_text() -> None:
    """Killed before its result event, a Claude turn still has its session, model, the last
    assistant text and the denial seen in a tool result."""
    cut = CLAUDE.splitlines(keepends=True)[:-1]
    out = collect("claude", *cut)
    assert out.session_id == SESSION
    assert out.final_text == "I could not run curl; asking for approval."
    assert out.permission_denials == ("Bash",)
    assert (out.ended, out.is_error, out.usage, out.cost_usd) == (False, None, {}, None)


def test_a_failed_claude_result_keeps_bounded_errors() -> None:
    """An error result keeps is_error and at most five errors, each bounded, and says it was
    truncated."""
    errors = ["first", "x" * (MAX_ERROR_BYTES + 10), *[f"e{i}" for i in range(8)]]
    out = collect(
        "claude",
        lines(
            {
                "type": "result",
                "subtype": "error_during_execution",
                "is_error": True,
                "session_id": SESSION,
                "errors": errors,
                "usage": {
                    "input_tokens": "12",
                    "output_tokens": True,
                    "cache_read_input_tokens": 3,
                    "cache_creation_input_tokens": -1,
                },
                "total_cost_usd": "0.5",
            }
        ),
    )
    assert out.is_error is True
    assert len(out.errors) == MAX_ERRORS
    assert out.errors[0] == "first"
    assert out.errors[1] == "x" * MAX_ERROR_BYTES
    assert out.usage == {"cache_read_input_tokens": 3}
    assert out.cost_usd is None
    assert out.truncated


def test_a_codex_transcript_keeps_thread_model_usage_and_the_agent_message() -> None:
    """A Codex app-server turn yields its thread id, the rerouted model, token totals, the
    agent message and its tool call, ignoring another thread's items."""
    out = collect("codex", CODEX)
    assert out == AgentOutput(
        session_id=THREAD,
        model="gpt-5.1-codex-mini",
        final_text="Checked: all green.",
        usage={
            "input_tokens": 5120,
            "output_tokens": 210,
            "cached_input_tokens": 4096,
            "cache_write_input_tokens": 0,
        },
        tool_calls=1,
        is_error=False,
        ended=True,
    )


def test_a_failed_codex_turn_is_an_error_with_its_bounded_message() -> None:
    """A Codex turn that completes as failed is an error carrying its message, bounded."""
    head = CODEX.splitlines(keepends=True)[:5]
    failed = lines(
        {
            "method": "turn/completed",
            "params": {
                "threadId": THREAD,
                "turn": {
                    "id": "turn_1",
                    "status": "failed",
                    "error": {"message": "stream disconnected " + "y" * 5000},
                },
            },
        }
    )
    out = collect("codex", *head, failed)
    assert (out.ended, out.is_error, out.model) == (True, True, "gpt-5-codex")
    assert out.errors == (("stream disconnected " + "y" * 5000)[:MAX_ERROR_BYTES],)
    assert out.truncated


def test_codex_notifications_before_a_thread_are_ignored() -> None:
    """Without a thread response, a Codex stream's notifications say nothing."""
    body = CODEX.splitlines(keepends=True)[4:]
    assert collect("codex", *body) == AgentOutput()


def test_text_keeps_the_bounded_tail() -> None:
    """The text provider's final text is the last 32 KiB of what was fed, nothing else."""
    small = collect("text", "hello ", "world\n")
    assert small == AgentOutput(final_text="hello world\n")
    big = collect("text", *(["é" * 10_000 + "\n"] * 10), "the end")
    assert big.final_text.endswith("\nthe end")
    assert len(big.final_text.encode()) <= MAX_TEXT_BYTES
    assert big.truncated and big.skipped_lines == 0


def test_no_tool_argument_tool_result_or_reasoning_is_kept() -> None:
    """No secret-looking tool input, tool result, command output or thinking text of either
    provider appears anywhere in the output's repr."""
    for provider, stream in (("claude", CLAUDE), ("codex", CODEX)):
        out = collect(provider, stream)  # type: ignore[arg-type]
        for secret in SECRETS:
            assert secret not in repr(out)
        assert "sk-ant" not in repr(out) and "AKIA" not in repr(out)


def test_malformed_lines_are_counted_and_never_fatal() -> None:
    """Lines that are not JSON are skipped and counted; blank lines and non-object events are
    ignored without counting; the good lines around them still count."""
    noisy = (
        "not json at all\n"
        "\n"
        "   \n"
        '{"type": "result", "session_id": \n'
        "NaN\n"
        '{"x": Infinity}\n'
        '[1, 2, null, "s"]\n'
        "42\n" + "[" * 100_000 + "\n" + CLAUDE + "{trailing partial"
    )
    out = collect("claude", noisy)
    assert out.skipped_lines == 6
    assert out.session_id == SESSION and out.final_text.startswith("Deploy checked")
    assert not out.truncated


def test_an_array_line_carries_several_events() -> None:
    """A line holding a JSON array is read as each of its events."""
    events = [json.loads(line) for line in CLAUDE.splitlines()]
    assert collect("claude", json.dumps(events)) == collect("claude", CLAUDE)


def test_a_line_over_the_bound_is_dropped_and_counted() -> None:
    """A line longer than 1 MiB is dropped whole (skipped and truncated); a line of exactly
    1 MiB is still read; the lines after both are read."""
    fits = json.dumps({"type": "assistant", "pad": ""})
    fits = fits.replace('""', '"' + "p" * (MAX_LINE_BYTES - len(fits)) + '"')
    assert len(fits.encode()) == MAX_LINE_BYTES
    over = json.dumps({"type": "result", "session_id": SESSION, "pad": "é" * MAX_LINE_BYTES})
    piece = 64 * 1024
    chunks = [over[i : i + piece] for i in range(0, len(over), piece)]
    out = collect("claude", fits + "\n", *chunks, "\n", CLAUDE)
    assert out.skipped_lines == 1
    assert out.truncated
    assert out.session_id == SESSION and out.num_turns == 4
    # The same oversize line as the last, unterminated one.
    tail = collect("claude", CLAUDE, *chunks)
    assert (tail.skipped_lines, tail.truncated, tail.num_turns) == (1, True, 4)


def test_tool_ids_are_counted_once_and_capped() -> None:
    """Tool calls count distinct ids, at most 4096; more sets truncated."""
    blocks = [{"type": "tool_use", "id": f"toolu_{i}", "name": "Bash"} for i in range(5000)]
    blocks += [{"type": "tool_use", "id": "toolu_1", "name": "Bash"}]
    out = collect("claude", lines({"type": "assistant", "message": {"content": blocks}}))
    assert out.tool_calls == MAX_TOOL_IDS
    assert out.truncated


def test_names_that_are_not_safe_are_not_kept() -> None:
    """Model and denied-tool names are kept only when they are safe names."""
    assert safe_name("claude-opus-4-1[1m]") == "claude-opus-4-1[1m]"
    assert safe_name("mcp__pilot__post") == "mcp__pilot__post"
    for bad in ("", " Bash", "Bash\n", "rm -rf $HOME", "a" * 201, "naïve", 7, None):
        assert safe_name(bad) is None
    out = collect(
        "claude",
        lines(
            {"type": "system", "subtype": "init", "model": "x'; DROP TABLE"},
            {"type": "result", "permission_denials": [{"tool_name": "Bash(`id`)"}]},
        ),
    )
    assert out.model is None and out.permission_denials == ()


def test_the_permission_pattern_matches_like_the_seed_regex() -> None:
    """The denial test matches /permission.*denied|requires approval|approval.*required/i
    within one line."""
    assert is_permission_error("Permission to use Bash has been DENIED")
    assert is_permission_error("This command requires approval")
    assert is_permission_error("approval is required")
    assert not is_permission_error("permission\ndenied")
    assert not is_permission_error("denied permission")
    assert not is_permission_error("file not found")


def _transcript() -> str:
    return CLAUDE + "garbage line ☃\n" + CLAUDE.replace(SESSION, THREAD)


def test_every_split_point_gives_the_same_output() -> None:
    """Cutting the stream in two at every character offset gives the same output."""
    stream = _transcript()
    whole = collect("claude", stream)
    assert whole.skipped_lines == 1 and whole.session_id == THREAD
    for at in range(len(stream) + 1):
        assert collect("claude", stream[:at], stream[at:]) == whole


def _feed_bytes(provider: Provider, data: bytes, cuts: list[int]) -> AgentOutput:
    """Feed `data` cut at the byte offsets `cuts`, decoded as the shell does."""
    collector = AgentOutputCollector(provider)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    start = 0
    for at in [*sorted(cuts), len(data)]:
        collector.feed(decoder.decode(data[start:at]))
        start = at
    collector.feed(decoder.decode(b"", final=True))
    return collector.close()


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_byte_chunking_gives_the_same_output(data: st.DataObject) -> None:
    """Cut into chunks at any byte offsets (even inside a multibyte character), each
    provider's stream gives the output of feeding it whole."""
    choices: list[tuple[Provider, str]] = [
        ("claude", _transcript()),
        ("codex", CODEX),
        ("text", _transcript()),
    ]
    provider, stream = data.draw(st.sampled_from(choices))
    raw = stream.encode()
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=40))
    assert _feed_bytes(provider, raw, cuts) == collect(provider, stream)


@pytest.mark.parametrize("provider", ["claude", "codex", "text"])
def test_an_empty_stream_says_nothing(provider: Provider) -> None:
    """No output at all is the empty AgentOutput."""
    assert collect(provider) == AgentOutput()
    assert collect(provider, "", "") == AgentOutput()


def test_close_is_final() -> None:
    """Closing twice gives the same output; feeding after close is refused."""
    collector = AgentOutputCollector("claude")
    collector.feed(CLAUDE)
    first = collector.close()
    assert collector.close() is first
    with pytest.raises(ValueError):
        collector.feed("{}\n")
