"""The command launcher: runs one agent CLI turn (Claude Code, Codex, any program) as a
subprocess with a time limit, and reads what it said. Not pure: processes, pipes, signals.

Hand-written on purpose: the standard library's `subprocess` is the library, and this module
is the little it lacks for an unattended agent process:

- the whole process group dies at the time limit. The child starts a session of its own
  (`start_new_session=True`), so it leads a process group; at the limit the group gets
  SIGTERM, then SIGKILL after `kill_grace_s`, and the child is reaped. `subprocess.run`'s
  timeout kills the child only, leaving its tools (a shell, a test runner, a `sleep`) alive;
- the output is bounded: stdout and stderr are read concurrently (one `selectors` loop, no
  threads) into a rolling tail of their last `TAIL_BYTES`, and stdout is fed to the
  `AgentOutputCollector`, which keeps only identity, final text, usage and bounded failure
  metadata. `communicate()` would hold everything in memory;
- an exit is an exit: a grandchild that keeps the pipes open after the child exited holds
  the reader for at most `DRAIN_S`, then the group is killed and the pipes are closed;
- a program that cannot start is a result, not an exception: exit code 127 (the shell's
  "command not found") and the OS error in both `error` and `output_tail`, so a classifier
  reading the tail sees "No such file or directory" as it would from a shell.

- the turn's time limit holds even when this process dies: the program runs under a keeper
  (workers/outbound/keeper.py) that leads its process group and ends it at `backstop_at_ms`,
  or as soon as the process that started it is gone. The keeper is the direct child here
  (its pid is the group id, handed to `on_started`), and it exits as the program did.

argv is a list and never goes through a shell: no quoting, no expansion, no `$(...)`.
The group is signalled only while the keeper is still unreaped (a zombie keeps its pid, so
its group id cannot be reused by an unrelated process), every process left in the group when
the run ends is killed with it, and every pipe is closed before returning.
"""

from __future__ import annotations

import codecs
import contextlib
import math
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pipeline.agent_output import AgentOutput, AgentOutputCollector
from workers.clock import now_ms

TAIL_BYTES = 4096
# How long the pipes may stay open after the child exited (or was killed) before the group is
# killed and the pipes closed regardless.
DRAIN_S = 1.0
_READ_BYTES = 64 * 1024
# How often the loop looks whether the child exited while its pipes are still open.
_POLL_S = 0.05
EXIT_COULD_NOT_START = 127
KEEPER = str(Path(__file__).with_name("keeper.py"))
# How long after this process's own kill (the time limit, its grace and the drain) the keeper
# ends the group when nobody gave it a backstop: it acts only when this process could not.
BACKSTOP_S = 3.0


@dataclass(frozen=True)
class CommandRun:
    """How one run went. `exit_code` is None when the run was killed at the time limit (and
    negative, as in `subprocess`, when another signal ended it); `output_tail` is the last
    `TAIL_BYTES` of stdout and stderr together, as they arrived."""

    exit_code: int | None
    output_tail: str
    timed_out: bool
    started_ms: int
    ended_ms: int
    error: str | None
    output: AgentOutput
    stopped: bool = False  # ended early because `should_stop` said so (its group killed)


def run_command(
    argv: Sequence[str],
    *,
    time_limit_s: float,
    provider: Literal["claude", "codex", "text"] = "text",
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    stdin_text: str | None = None,
    kill_grace_s: float = 2.0,
    clock_ms: Callable[[], int] = now_ms,
    should_stop: Callable[[], bool] | None = None,
    stop_check_s: float = 1.0,
    backstop_at_ms: int | None = None,
    on_started: Callable[[int], None] | None = None,
) -> CommandRun:
    """Run `argv` (never through a shell) for at most `time_limit_s` seconds.

    The program's keeper ends its process group at `backstop_at_ms` (Unix ms, wall clock)
    whatever becomes of this process (default: `BACKSTOP_S` after this process's own kill
    would have ended it); `on_started` is handed the group id once the program has started.

    `env`, when given, is the child's whole environment; `stdin_text` is written to its stdin
    (UTF-8), which is closed after it (stdin is /dev/null without one). `should_stop` is asked
    every `stop_check_s` while the child runs; when it says so, the group is ended as at the
    time limit and the run is `stopped` (an operator paused the seat). Raises ValueError for
    an argv that is empty, a bare string, or holds a non-string or NUL byte, and for a time
    limit or grace that is not a finite positive (non-negative) number.
    """
    args = _checked_argv(argv)
    if not (isinstance(time_limit_s, int | float) and math.isfinite(time_limit_s)):
        raise ValueError("time_limit_s must be a finite number of seconds")
    if time_limit_s <= 0:
        raise ValueError("time_limit_s must be positive")
    if not (math.isfinite(kill_grace_s) and kill_grace_s >= 0):
        raise ValueError("kill_grace_s must be a finite, non-negative number of seconds")
    collector = AgentOutputCollector(provider)
    started_ms = clock_ms()
    if backstop_at_ms is None:
        backstop_s = time_limit_s + kill_grace_s + DRAIN_S + BACKSTOP_S
        backstop_at_ms = int(time.time() * 1000 + backstop_s * 1000)
    started = _start(args, cwd, env, stdin_text, backstop_at_ms, kill_grace_s, time_limit_s)
    if isinstance(started, str):
        return CommandRun(
            exit_code=EXIT_COULD_NOT_START,
            output_tail=started,
            timed_out=False,
            started_ms=started_ms,
            ended_ms=clock_ms(),
            error=started,
            output=collector.close(),
        )
    proc = started
    run = _Run(proc, collector, stdin_text)
    if on_started is not None:
        try:
            on_started(proc.pid)
        except BaseException:
            run.finish()
            raise
    try:
        timed_out, error = run.supervise(time_limit_s, kill_grace_s, should_stop, stop_check_s)
    finally:
        run.finish()
    stopped = run.stopped
    return CommandRun(
        stopped=stopped,
        exit_code=None if timed_out or stopped else proc.returncode,
        output_tail=run.tail(),
        timed_out=timed_out,
        started_ms=started_ms,
        ended_ms=clock_ms(),
        error=error,
        output=collector.close(),
    )


def _start(
    args: list[str],
    cwd: str | None,
    env: Mapping[str, str] | None,
    stdin_text: str | None,
    backstop_at_ms: int,
    kill_grace_s: float,
    time_limit_s: float,
) -> subprocess.Popen[bytes] | str:
    """The keeper started with the program under it, once the keeper says the program
    started; the reason, as a shell would put it, when it could not start."""
    read_fd, write_fd = os.pipe()
    keeper = [
        sys.executable,
        "-I",
        "-S",
        KEEPER,
        "--term-at-ms",
        str(backstop_at_ms),
        "--grace-ms",
        str(int(kill_grace_s * 1000)),
        "--parent",
        str(os.getpid()),
        "--status-fd",
        str(write_fd),
        "--",
        *args,
    ]
    try:
        try:
            proc = subprocess.Popen(
                keeper,
                stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=None if env is None else dict(env),
                start_new_session=True,
                close_fds=True,
                pass_fds=(write_fd,),
                shell=False,
            )
        except OSError as exc:
            return f"could not start: {exc}"
        finally:
            os.close(write_fd)
        try:
            line = _first_line(read_fd, time.monotonic() + max(time_limit_s, 5.0))
        except BaseException:  # a soft time limit, an interrupt: leave nothing running
            _discard(proc)
            raise
    finally:
        os.close(read_fd)
    if line.startswith("started "):
        return proc
    _discard(proc)
    if line.startswith("failed "):
        return line.removeprefix("failed ")
    return f"could not start: its keeper ended without starting it ({line or 'no word'})"


def _discard(proc: subprocess.Popen[bytes]) -> None:
    """Kill the keeper's group, reap the keeper and close its pipes."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _first_line(fd: int, deadline: float) -> str:
    """The first line written on `fd` (without its newline), or what came before EOF or the
    deadline."""
    data = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    return data.split(b"\n", 1)[0].decode("utf-8", "replace")


def _checked_argv(argv: Sequence[str]) -> list[str]:
    if isinstance(argv, str | bytes):
        raise ValueError("argv must be a list of strings, not one string (no shell is used)")
    args = list(argv)
    if not args:
        raise ValueError("argv must name a program")
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            raise ValueError(f"argv[{i}] must be a string, got {type(arg).__name__}")
        if "\x00" in arg:
            raise ValueError(f"argv[{i}] holds a NUL byte")
    return args


class _Run:
    """One started child: its pipes, its output tail, and the signals it gets."""

    def __init__(
        self, proc: subprocess.Popen[bytes], collector: AgentOutputCollector, stdin_text: str | None
    ) -> None:
        self.proc = proc
        self.collector = collector
        self.stopped = False
        self.selector = selectors.DefaultSelector()
        self._tail = bytearray()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stdin = (stdin_text or "").encode("utf-8", "surrogateescape")
        self._stdout_fd = -1
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                self.selector.register(stream.fileno(), selectors.EVENT_READ)
        if proc.stdout is not None:
            self._stdout_fd = proc.stdout.fileno()
        if proc.stdin is not None:
            if self._stdin:
                os.set_blocking(proc.stdin.fileno(), False)
                self.selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
            else:
                proc.stdin.close()

    # ---------------------------------------------------------------- the loop

    def supervise(
        self,
        time_limit_s: float,
        kill_grace_s: float,
        should_stop: Callable[[], bool] | None = None,
        stop_check_s: float = 1.0,
    ) -> tuple[bool, str | None]:
        """Read until the child exited and its pipes closed; kill the group at the limit (or
        when `should_stop` says so). Returns (timed out, error)."""
        deadline = time.monotonic() + time_limit_s
        exited = False
        while not exited and time.monotonic() < deadline:
            step = deadline if should_stop is None else time.monotonic() + stop_check_s
            exited = self._pump_until(min(step, deadline))
            if not exited and should_stop is not None and should_stop():
                self.stopped = True
                break
        if not exited:
            self._signal_group(signal.SIGTERM)
            self._pump_until(time.monotonic() + kill_grace_s)
            self._signal_group(signal.SIGKILL)
            self._pump_until(time.monotonic() + DRAIN_S, stop_at_exit=False)
            if self.stopped:
                return False, "stopped: the seat was paused while the turn ran"
            return True, f"killed at the time limit of {time_limit_s:g} s"
        if self._reading() and not self._pump_until(time.monotonic() + DRAIN_S, stop_at_exit=False):
            self._signal_group(signal.SIGKILL)
            self._pump_until(time.monotonic() + _POLL_S * 4, stop_at_exit=False)
            return False, (
                f"the output stayed open {DRAIN_S:g} s after the program exited "
                "(a process it left running); killed its process group"
            )
        return False, None

    def _pump_until(self, deadline: float, *, stop_at_exit: bool = True) -> bool:
        """Move output until `deadline`. With `stop_at_exit`, return True as soon as the child
        exited and False at the deadline; without, True once every pipe is closed."""
        while True:
            if stop_at_exit and self._exited():
                return True
            if not stop_at_exit and not self._reading():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if not self.selector.get_map():
                time.sleep(min(left, _POLL_S))
                continue
            for key, _ in self.selector.select(min(left, _POLL_S)):
                if key.events & selectors.EVENT_WRITE:
                    self._write_stdin(key.fd)
                else:
                    self._read(key.fd)

    def _reading(self) -> bool:
        return any(key.events & selectors.EVENT_READ for key in self.selector.get_map().values())

    def _read(self, fd: int) -> None:
        try:
            data = os.read(fd, _READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.selector.unregister(fd)
            if fd == self._stdout_fd:
                self.collector.feed(self._decoder.decode(b"", final=True))
            return
        self._tail += data
        if len(self._tail) > TAIL_BYTES:
            del self._tail[:-TAIL_BYTES]
        if fd == self._stdout_fd:
            self.collector.feed(self._decoder.decode(data))

    def _write_stdin(self, fd: int) -> None:
        try:
            written = os.write(fd, self._stdin[:_READ_BYTES])
        except BlockingIOError:
            return
        except OSError:  # BrokenPipeError: the child does not read its stdin
            written = len(self._stdin)
        self._stdin = self._stdin[written:]
        if not self._stdin:
            self.selector.unregister(fd)
            self._close_stdin()

    def _close_stdin(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    # ---------------------------------------------------------------- the child

    def _exited(self) -> bool:
        """Whether the child exited, leaving it unreaped so its group id stays its own."""
        if self.proc.returncode is not None:
            return True
        if not hasattr(os, "waitid"):  # pragma: no cover - every Linux has waitid
            return self.proc.poll() is not None
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self.proc.poll() is not None
        return info is not None

    def _signal_group(self, sig: signal.Signals) -> None:
        """Signal the child's whole process group, unless the child is already reaped."""
        if self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def finish(self) -> None:
        """Leave nothing behind: kill what is left of the group (the keeper still running
        when an exception cut the run short, a tool the program left behind), reap the
        keeper, and close every pipe."""
        self._signal_group(signal.SIGKILL)
        self.proc.wait()
        self.selector.close()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        self._close_stdin()

    def tail(self) -> str:
        """The output tail, decoded; a character cut at its start is dropped, not replaced."""
        data = bytes(self._tail)
        if len(data) == TAIL_BYTES:
            skip = 0
            while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
                skip += 1
            data = data[skip:]
        return data.decode("utf-8", errors="replace")
