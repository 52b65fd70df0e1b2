"""The keeper: the process that holds a `command` turn's agent to its turn's lease even when
the worker that started it is gone. Not pure: processes and signals. Run as a script
(`python -I -S keeper.py ...`), so it imports nothing but the standard library and starts in
a few milliseconds; workers/outbound/command.py starts it.

Why a process of its own: the agent runs in a session of its own (so that a worker's signals
and a terminal's never reach it by accident, and its whole process group can be killed at the
time limit), which also means nothing kills it when its worker dies. The worker enforces the
time limit itself while it lives; the keeper is the backstop that does not depend on it:

- it leads the agent's process group (the worker starts it with `start_new_session`, and the
  agent is forked into the keeper's group, so one `killpg` reaches the agent and every tool it
  started);
- at `--term-at-ms` (wall clock, Unix ms: the worker sets it before the turn's lease ends, and
  after the worker's own kill would have come), or as soon as its parent is no longer the
  worker that started it (`--parent`: a SIGKILLed worker, a pool child the Celery main process
  lost), it sends the group SIGTERM, then SIGKILL after `--grace-ms`, itself included;
- SIGTERM sent to the keeper (the worker's own kill at the time limit reaches the whole group)
  does not end the keeper before the agent: it starts the same grace without signalling the
  group a second time, so the agent gets its one chance to stop cleanly and the keeper still
  exits with the agent's status;
- the agent is given PR_SET_PDEATHSIG = SIGKILL on Linux: a keeper that is SIGKILLed itself
  takes the agent with it (the agent's own children stay in the group, where the next turn's
  worker finds and kills them: workers/outbound/agents.py);
- the keeper exits as the agent did (its exit code, or the same signal), so the worker reads
  the agent's status from the keeper's; the first line on `--status-fd` says whether the
  agent started (`started PID`) or could not (`failed could not start: <OS error>`).

Usage: keeper.py --term-at-ms MS --grace-ms MS --parent PID --status-fd FD -- ARGV...
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

POLL_S = 0.1  # how often the keeper looks at its parent while it waits for the agent
PR_SET_PDEATHSIG = 1


def _options(argv: list[str]) -> tuple[dict[str, int], list[str]]:
    if "--" not in argv:
        raise SystemExit(
            "keeper: usage: --term-at-ms MS --grace-ms MS --parent PID --status-fd FD -- ARGV..."
        )
    cut = argv.index("--")
    head, command = argv[:cut], argv[cut + 1 :]
    names = {"--term-at-ms", "--grace-ms", "--parent", "--status-fd"}
    found: dict[str, int] = {}
    for name, value in zip(head[::2], head[1::2], strict=False):
        if name not in names:
            raise SystemExit(f"keeper: unknown option {name}")
        found[name] = int(value)
    missing = names - found.keys()
    if missing or not command:
        raise SystemExit(f"keeper: missing {sorted(missing) or 'the command'}")
    return found, command


def _in_child() -> None:
    """Run in the agent before it execs: the keeper's own handling of SIGTERM, SIGHUP and
    SIGINT undone (a signal before the exec must end it, not set a flag nobody reads),
    SIGCHLD unblocked again (the keeper blocks it to wait on it), and killed with the keeper
    if the keeper is killed."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _exit_as(status: int) -> None:
    """Exit as the agent did: its code, or the signal that ended it."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP have no handler
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        time.sleep(1)  # a signal that does not end a process by default ends here
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def main(argv: list[str]) -> None:
    opts, command = _options(argv)
    status = os.fdopen(opts["--status-fd"], "w")
    terminating = [False]

    def on_term(signum: int, frame: object) -> None:
        terminating[0] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    try:
        agent = subprocess.Popen(command, preexec_fn=_in_child, close_fds=True)
    except OSError as exc:
        status.write(f"failed could not start: {exc}\n")
        status.close()
        sys.stderr.write(f"could not start: {exc}\n")
        os._exit(127)
    status.write(f"started {agent.pid}\n")
    status.close()
    # The pipes are the agent's: a keeper holding them would keep the worker reading.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)

    term_at_ms = opts["--term-at-ms"]
    grace_s = max(0, opts["--grace-ms"]) / 1000
    kill_at: float | None = None
    while True:
        pid, wait_status = os.waitpid(agent.pid, os.WNOHANG)
        orphaned = os.getppid() != opts["--parent"]
        if pid == agent.pid:
            if orphaned:  # nobody reads the status, and the agent's tools must not go on
                os.killpg(os.getpgid(0), signal.SIGKILL)
            _exit_as(wait_status)
        now = time.monotonic()
        # The wall clock is read on every pass: a host that was suspended still ends the
        # group by the time the lease (a wall-clock time) says.
        due = time.time() * 1000 >= term_at_ms
        if kill_at is None and (terminating[0] or due or orphaned):
            if not terminating[0]:
                # A SIGTERM sent to the group reached the agent already; a second one would
                # cut short the graceful stop it may be making.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(os.getpgid(0), signal.SIGTERM)
            kill_at = now + grace_s
        if kill_at is not None and now >= kill_at:
            os.killpg(os.getpgid(0), signal.SIGKILL)
        wait = POLL_S if kill_at is None else min(POLL_S, max(0.0, kill_at - now))
        _wait_for_child(max(wait, 0.001))


def _wait_for_child(timeout_s: float) -> None:
    """Sleep until a child changes state or `timeout_s` passes."""
    if hasattr(signal, "sigtimedwait"):
        signal.sigtimedwait({signal.SIGCHLD}, timeout_s)
    else:  # pragma: no cover - macOS and the BSDs have no sigtimedwait: poll
        time.sleep(timeout_s)


if __name__ == "__main__":
    main(sys.argv[1:])
