"""The command launcher against real child processes (`sys.executable -c ...`): exit codes,
the bounded output tail, the time limit killing the whole process group, a program that
cannot start, Claude stream-json collected from stdout, and argv never meeting a shell."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from workers.outbound.command import TAIL_BYTES, CommandRun, run_command

PY = sys.executable
SESSION = "e953a33e-97a0-4d13-9fd4-6a77cd7a68c9"


def py(code: str, *args: str, **kwargs: object) -> CommandRun:
    """Run a Python snippet as the child, with a short default time limit."""
    kwargs.setdefault("time_limit_s", 10.0)
    return run_command([PY, "-c", textwrap.dedent(code), *args], **kwargs)  # type: ignore[arg-type]


# The bounds below are far above what a quiet machine needs and below the limits they tell
# apart (a 30 s hang, a 60 s sleep): on a loaded 2-core machine a Python child can take
# seconds to start, so a child given under a second may not have begun before its limit.
def gone(pid: int, within_s: float = 30.0) -> bool:
    """Whether process `pid` is gone (or a zombie nobody has reaped yet) within `within_s`."""
    end = time.monotonic() + within_s
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (OSError, IndexError):
            pass
        if time.monotonic() > end:
            return False
        time.sleep(0.02)


def read_pid(path: Path, within_s: float = 30.0) -> int:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        text = path.read_text() if path.exists() else ""
        if text.strip():
            return int(text)
        time.sleep(0.01)
    raise AssertionError(f"no pid written to {path}")


def test_exit_code_and_output_tail() -> None:
    """A program's exit code and output come back, with no error and no timeout."""
    run = py("import sys; print('hello from the seat'); sys.exit(3)")
    assert (run.exit_code, run.timed_out, run.error) == (3, False, None)
    assert run.output_tail == "hello from the seat\n"
    assert run.started_ms <= run.ended_ms
    assert run.output.final_text == "hello from the seat\n"


def test_the_tail_is_bounded_to_the_last_4096_bytes() -> None:
    """100 KB of output leaves a tail of at most 4096 bytes that is the output's end."""
    run = py(
        """
        import sys
        for i in range(2500):
            sys.stdout.write(f"line {i:05d} " + "x" * 28 + "\\n")
        sys.stdout.write("THE END")
        """
    )
    assert run.exit_code == 0
    assert len(run.output_tail.encode()) <= TAIL_BYTES
    assert run.output_tail.endswith("line 02499 " + "x" * 28 + "\nTHE END")
    assert len(run.output_tail.encode()) > TAIL_BYTES - 50


def test_a_multibyte_character_cut_by_the_tail_is_dropped() -> None:
    """A character cut at the tail's start is dropped, so the tail has no replacement mark."""
    run = py("import sys; sys.stdout.write('é' * 5000)")
    assert run.output_tail == "é" * (len(run.output_tail))
    assert 2046 <= len(run.output_tail) <= 2048


def test_stderr_is_in_the_tail() -> None:
    """stderr and stdout both reach the tail."""
    run = py("import sys; print('out'); sys.stdout.flush(); print('err', file=sys.stderr)")
    assert "out\n" in run.output_tail and "err\n" in run.output_tail


def test_the_named_fault_no_conversation_found_is_exit_1_with_its_text() -> None:
    """A CLI that says "No conversation found" on stderr and exits 1 gives exit 1 and that
    text in the tail, not an error of the launcher."""
    message = f"No conversation found with session ID: {SESSION}"
    run = py(f"import sys; print({message!r}, file=sys.stderr); sys.exit(1)", provider="claude")
    assert (run.exit_code, run.timed_out, run.error) == (1, False, None)
    assert message in run.output_tail
    assert run.output.session_id is None


@pytest.mark.e2e
def test_the_time_limit_kills_the_whole_process_group(tmp_path: Path) -> None:
    """At the time limit the child and the grandchild it started are both killed; the run is
    timed out with no exit code."""
    pid_file = tmp_path / "grandchild.pid"
    started = time.monotonic()
    run = py(
        """
        import subprocess, sys, time
        child = subprocess.Popen(["sleep", "60"])
        open(sys.argv[1], "w").write(str(child.pid))
        print("started", flush=True)
        time.sleep(60)
        """,
        str(pid_file),
        time_limit_s=5.0,
        kill_grace_s=0.3,
    )
    assert time.monotonic() - started < 30
    assert run.timed_out and run.exit_code is None
    assert run.error == "killed at the time limit of 5 s"
    assert "started" in run.output_tail
    assert gone(read_pid(pid_file))


@pytest.mark.e2e
def test_a_child_ignoring_sigterm_is_killed_after_the_grace() -> None:
    """A child that ignores SIGTERM is SIGKILLed after the grace period."""
    started = time.monotonic()
    run = py(
        """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ignoring", flush=True)
        time.sleep(60)
        """,
        time_limit_s=5.0,
        kill_grace_s=0.3,
    )
    assert "ignoring" in run.output_tail  # it was ignoring SIGTERM before the limit came
    assert 5.3 <= time.monotonic() - started < 30
    assert run.timed_out and run.exit_code is None


def test_a_grandchild_holding_the_pipes_does_not_hang_the_reader(tmp_path: Path) -> None:
    """A child that exits leaving a grandchild with its pipes open returns its exit code
    promptly (about a second; in any case long before its time limit), and the grandchild is
    killed."""
    pid_file = tmp_path / "grandchild.pid"
    started = time.monotonic()
    run = py(
        """
        import subprocess, sys
        child = subprocess.Popen(["sleep", "60"])
        open(sys.argv[1], "w").write(str(child.pid))
        print("leaving", flush=True)
        """,
        str(pid_file),
        time_limit_s=60.0,
    )
    assert time.monotonic() - started < 30
    assert (run.exit_code, run.timed_out) == (0, False)
    assert run.error is not None and "process group" in run.error
    assert "leaving" in run.output_tail
    assert gone(read_pid(pid_file))


def test_a_missing_binary_is_exit_127_with_the_os_error() -> None:
    """A program that cannot start gives exit code 127, an error, and the OS error text in the
    tail for a classifier to read."""
    run = run_command(["claudex-not-installed-here"], time_limit_s=5.0, clock_ms=lambda: 42)
    assert run.exit_code == 127 and not run.timed_out
    assert run.error == (
        "could not start: [Errno 2] No such file or directory: 'claudex-not-installed-here'"
    )
    assert "No such file or directory" in run.output_tail
    assert (run.started_ms, run.ended_ms) == (42, 42)


def test_claude_stream_json_on_stdout_is_collected() -> None:
    """Claude stream-json lines printed by the program are collected: session, model, final
    text, usage and cost, with stderr kept out of the collector."""
    events = [
        {"type": "system", "subtype": "init", "session_id": SESSION, "model": "claude-opus-4-1"},
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "text", "text": "Working."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"c": "ls"}},
                ]
            },
        },
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "num_turns": 2,
            "session_id": SESSION,
            "result": "Done: posted the summary.",
            "total_cost_usd": 0.01,
            "usage": {"input_tokens": 10, "output_tokens": 20},
        },
    ]
    stream = "".join(json.dumps(e) + "\n" for e in events)
    code = f"""
        import sys
        data = {stream!r}
        print("a warning on stderr", file=sys.stderr, flush=True)
        for i in range(0, len(data), 7):
            sys.stdout.write(data[i:i + 7]); sys.stdout.flush()
        """
    run = py(code, provider="claude")
    assert run.exit_code == 0
    out = run.output
    assert out.session_id == SESSION and out.model == "claude-opus-4-1"
    assert out.final_text == "Done: posted the summary."
    assert out.usage == {"input_tokens": 10, "output_tokens": 20}
    assert (out.cost_usd, out.tool_calls, out.ended, out.skipped_lines) == (0.01, 1, True, 0)


def test_argv_never_passes_through_a_shell(tmp_path: Path) -> None:
    """Arguments with shell syntax arrive literally and nothing runs them."""
    target = tmp_path / "pwned"
    tricky = [f"$(touch {target})", f"`touch {target}`", "; echo hi", "a b", "*", "$HOME"]
    run = py("import sys, json; print(json.dumps(sys.argv[1:]))", *tricky)
    assert json.loads(run.output_tail) == tricky
    assert not target.exists()


def test_stdin_text_reaches_the_program() -> None:
    """`stdin_text` is written to the program's stdin, which is then closed."""
    run = py("import sys; print(sys.stdin.read().upper())", stdin_text="a prompt ✓")
    assert run.output_tail == "A PROMPT ✓\n"
    assert py("import sys; print(repr(sys.stdin.read()))").output_tail == "''\n"


def test_a_program_that_ignores_a_large_stdin_does_not_block() -> None:
    """A program that exits without reading a large stdin still returns promptly."""
    started = time.monotonic()
    run = py("print('no reading')", stdin_text="x" * 2_000_000, time_limit_s=60.0)
    assert run.exit_code == 0 and run.output_tail == "no reading\n"
    assert time.monotonic() - started < 30


def test_cwd_and_env_are_the_childs(tmp_path: Path) -> None:
    """`cwd` is the child's working directory and `env` its whole environment."""
    run = py(
        "import os; print(os.getcwd()); print(os.environ.get('SEAT'), 'HOME' in os.environ)",
        cwd=str(tmp_path),
        env={"SEAT": "scout"},
    )
    assert run.output_tail.splitlines() == [str(tmp_path.resolve()), "scout False"]


def test_a_signal_death_is_a_negative_exit_code() -> None:
    """A child killed by a signal of its own is its negative exit code, not a timeout."""
    run = py("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert (run.exit_code, run.timed_out, run.error) == (-9, False, None)


@pytest.mark.parametrize(
    "argv",
    [[], "claude -p hi", [PY, 3], [PY, b"-c"], [PY, "a\x00b"]],
    ids=["empty", "a string", "an int", "bytes", "a NUL"],
)
def test_a_bad_argv_is_refused(argv: object) -> None:
    """An empty argv, a bare string or an argument that is not a clean string is refused."""
    with pytest.raises(ValueError):
        run_command(argv, time_limit_s=1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [0, -1, float("nan"), float("inf")])
def test_a_bad_time_limit_is_refused(limit: float) -> None:
    """A time limit that is not a positive finite number is refused."""
    with pytest.raises(ValueError):
        run_command([PY, "-c", "pass"], time_limit_s=limit)
