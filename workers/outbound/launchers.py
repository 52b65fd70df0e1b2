"""The launchers a seat's turn runs with (issue 12 point 5, docs/architecture.md), as the org
file configures them per seat (`launcher: {kind, ...}`):

- `noop`, the default: the turn is `ok` at once and nothing else happens. The seat's inbox is
  left for the seat (an agent runtime polling `GET /v1/seats/{seat}/updates`) to acknowledge;
  a seat that never does is stopped by the controller's unacknowledged-inbox rule, and a
  person hears of it, rather than its items being consumed by nobody.
- `http`: the turn's brief is POSTed to an agent runtime. A 2xx reply with `{"outcome": ...}`
  is the outcome; a 202 means the runtime reports it later at
  `POST /v1/seats/{seat}/turns/{turn}/outcome`; anything else is a failed launch with its
  signature (`http:status:503`, `http:timeout`, `http:unreachable`, `http:bad_reply`).
- `command`: an agent CLI's launch. The session this launch addresses (a fresh id, or a resume
  of the recorded one, rotated first when the resume-target preflight proves it missing), the
  subprocess (workers/outbound/command.py: argv never through a shell, the time limit kills
  the process group), its exit code and output tail classified, and the post-mortem rotation.
  The CLI's structured output gives the session id, model, usage, cost and the number of
  permission denials; never its text, tool arguments or results.

Every launcher returns a `Launched`: the outcome (or None for one reported later) and the
session record as the launch leaves it.
A launcher never raises for a failed launch: every way a launch can fail is an outcome.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import ValidationError

from contracts import UpdatesPage
from contracts.backlog import BacklogEntry
from contracts.controller import LaunchStreak, SessionRecord, TurnOutcome
from contracts.money import MICROS_BOUND
from contracts.org import (
    CommandLauncher,
    HttpLauncher,
    LauncherSpec,
    NoopLauncher,
    SessionMode,
)
from pipeline.launches import (
    IDENTICAL_FAILURE_LIMIT,
    classify_launch_failure,
    launch_failure_signature,
    resume_target_state,
)
from pipeline.turns import after_launch, plan_launch
from workers.clock import now_ms
from workers.outbound.command import CommandRun, run_command
from workers.telemetry import MULTIPROC_ENV

REPLY_LIMIT = 256 * 1024  # the most of an agent runtime's reply that is read
# The keeper (workers/outbound/command.py) ends a command's group this long before the turn's
# lease: its SIGTERM, the grace, its SIGKILL, all inside the lease.
BACKSTOP_BEFORE_LEASE_MS = 4_000


def launcher_limit_s(turn_limit_s: float) -> float:
    """A launcher's own time limit inside a turn's: a fifth of the turn's off it, at least
    10 s (the kill's grace, the drain, the keeper's backstop and the settlement fit in it) and
    at most 30 s. Always positive for any turn limit the settings accept (30 s and more)."""
    margin = min(30.0, max(10.0, turn_limit_s / 5))
    return max(1.0, turn_limit_s - margin)


@dataclass(frozen=True)
class Brief:
    """What a turn is handed: who, which turn and why, its inbox page and open backlog."""

    seat_id: str
    turn_id: str
    reason: str
    inbox: UpdatesPage
    backlog: tuple[BacklogEntry, ...] = ()
    session: SessionRecord | None = None
    streak: LaunchStreak | None = None
    lease_until_ms: int | None = None  # the running turn's lease (a command's backstop)

    def to_wire(self) -> dict[str, Any]:
        return {
            "seatId": self.seat_id,
            "turnId": self.turn_id,
            "reason": self.reason,
            "inbox": self.inbox.model_dump(by_alias=True, mode="json"),
            "backlog": [e.to_wire() for e in self.backlog],
        }


@dataclass(frozen=True)
class Launched:
    outcome: TurnOutcome | None  # None: the agent runtime reports it later
    session: SessionRecord | None = None


@dataclass
class Launchers:
    """Runs a turn with the seat's launcher. `time_limit_s` is the turn's (settings)."""

    time_limit_s: float
    mcp_url: str = "http://127.0.0.1:8080/mcp"  # the ingress's MCP endpoint, for http runtimes
    clock_ms: Callable[[], int] = now_ms
    new_id: Callable[[], str] = field(default=lambda: str(uuid.uuid4()))
    transport: httpx.BaseTransport | None = None
    # A pool process's own multiprocess metrics directory is not the agent's to write into.
    environ: Mapping[str, str] = field(
        default_factory=lambda: {k: v for k, v in os.environ.items() if k != MULTIPROC_ENV}
    )

    @property
    def limit_s(self) -> float:
        """The longest any launch of a turn may take (`launcher_limit_s`)."""
        return launcher_limit_s(self.time_limit_s)

    def launch(
        self,
        spec: LauncherSpec,
        brief: Brief,
        *,
        should_stop: Callable[[], bool] | None = None,
        on_started: Callable[[int], None] | None = None,
    ) -> Launched:
        """Run the turn. `should_stop` (asked about once a second) ends a command launch
        early, as `interrupted`; a noop turn is over at once and an http one is a single
        request the runtime is not told to abandon. `on_started` is handed a command's
        process group once its program has started."""
        if isinstance(spec, NoopLauncher):
            return self._noop(brief)
        if isinstance(spec, HttpLauncher):
            return self._http(spec, brief)
        return self._command(spec, brief, should_stop, on_started)

    # ------------------------------------------------------------------ noop

    def _noop(self, brief: Brief) -> Launched:
        handed = len(brief.inbox.items)
        detail = "noop launcher: recorded ok, no agent ran" + (
            f"; {handed} inbox item(s) left for the seat to acknowledge" if handed else ""
        )
        return Launched(TurnOutcome(kind="ok", detail=detail, duration_ms=0))

    # ------------------------------------------------------------------ http

    def _http(self, spec: HttpLauncher, brief: Brief) -> Launched:
        started = self.clock_ms()
        headers = {"content-type": "application/json"}
        if spec.token_env:
            token = self.environ.get(spec.token_env, "")
            if not token:
                return Launched(
                    _failed(
                        "http:no_token",
                        f"the launcher's token variable {spec.token_env} is not set",
                        retryable=False,
                    )
                )
            headers["authorization"] = f"Bearer {token}"
        timeout = min(spec.timeout_s, self.limit_s)
        try:
            with (
                httpx.Client(
                    timeout=timeout, transport=self.transport, follow_redirects=False
                ) as client,
                client.stream(
                    "POST", spec.url, content=json.dumps(self._http_body(brief)), headers=headers
                ) as reply,
            ):
                body = _bounded(reply)
                status = reply.status_code
        except httpx.TimeoutException:
            return Launched(
                _failed("http:timeout", f"the agent runtime did not answer in {timeout} s")
            )
        except httpx.HTTPError as exc:
            return Launched(
                _failed("http:unreachable", f"the agent runtime could not be reached: {exc}")
            )
        duration = self.clock_ms() - started
        if status == 202:
            return Launched(None)
        if not 200 <= status < 300:
            return Launched(
                _failed(f"http:status:{status}", f"the agent runtime answered HTTP {status}")
            )
        if body is None:
            return Launched(_failed("http:bad_reply", "the agent runtime's reply is over 256 KiB"))
        try:
            raw = json.loads(body)
            outcome = TurnOutcome.model_validate(raw["outcome"] if isinstance(raw, dict) else raw)
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            first = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            return Launched(
                _failed("http:bad_reply", f"the agent runtime's reply is not an outcome: {first}")
            )
        return Launched(outcome.model_copy(update={"duration_ms": duration}))

    def _http_body(self, brief: Brief) -> dict[str, Any]:
        """The brief, and where the runtime reaches the seat's tools (MCP, streamable HTTP)."""
        mcp = {"url": self.mcp_url, "headers": {"X-Seatwire-Seat": brief.seat_id}}
        return {**brief.to_wire(), "mcp": mcp}

    # ------------------------------------------------------------------ command

    def _command(
        self,
        spec: CommandLauncher,
        brief: Brief,
        should_stop: Callable[[], bool] | None,
        on_started: Callable[[int], None] | None = None,
    ) -> Launched:
        now = self.clock_ms()
        session: SessionRecord | None = None
        mode: SessionMode | None = None
        rotated: str | None = None
        if spec.keeps_sessions:
            home = spec.home_dir or self.environ.get("HOME", "")
            missing = False
            if brief.session is not None and brief.session.last_launch_at is not None:
                target = resume_target_state(
                    {
                        "homeDir": home,
                        "projectDir": spec.cwd or os.getcwd(),
                        "sessionId": brief.session.session_id,
                        "engine": "claude" if spec.output == "claude" else spec.output,
                    },
                    {"readdirSync": os.listdir},
                )
                missing = target["state"] == "missing"
            plan = plan_launch(brief.session, target_missing=missing, now_ms=now, uuid=self.new_id)
            session, mode, rotated = plan.session, plan.mode, plan.rotated
        values = {
            "sessionId": session.session_id if session else "",
            "seatId": brief.seat_id,
            "turnId": brief.turn_id,
            "reason": brief.reason,
            "mcpConfig": self._mcp_config(spec, brief.seat_id),
        }
        extra = spec.session_args.get(mode, ()) if mode else ()
        argv = [_fill(a, values) for a in (*spec.argv, *extra)]
        env = {
            **self.environ,
            **spec.env,
            "SEATWIRE_SEAT": brief.seat_id,
            "SEATWIRE_TURN": brief.turn_id,
            "SEATWIRE_TURN_REASON": brief.reason,
            "SEATWIRE_SESSION_ID": values["sessionId"],
            "SEATWIRE_SESSION_MODE": mode or "",
        }
        limit = min(spec.time_limit_s, self.limit_s)
        lease = brief.lease_until_ms
        ran = run_command(
            argv,
            time_limit_s=limit,
            provider=spec.output,
            cwd=spec.cwd,
            env=env,
            stdin_text=json.dumps(brief.to_wire()),
            clock_ms=self.clock_ms,
            should_stop=should_stop,
            backstop_at_ms=None if lease is None else lease - BACKSTOP_BEFORE_LEASE_MS,
            on_started=on_started,
        )
        if ran.stopped:
            detail = "interrupted: the seat was paused while its turn ran"
            return Launched(
                TurnOutcome(
                    kind="interrupted",
                    detail=detail,
                    session_id=session.session_id if session else None,
                    duration_ms=max(0, ran.ended_ms - ran.started_ms),
                ),
                session=session,
            )
        return self._settled_command(spec, brief, ran, session, mode, rotated)

    def _mcp_config(self, spec: CommandLauncher, seat_id: str) -> str:
        """Write the MCP config that hands the CLI the seat's tools (`seatwire mcp --seat`,
        over stdio, with this worker's Seatwire settings), readable by its owner only; its
        path, or "" when the launcher asks for none."""
        if spec.mcp_config is None:
            return ""
        path = Path(spec.mcp_config)
        if not path.is_absolute():
            path = Path(spec.cwd or os.getcwd()) / path
        server = {
            "type": "stdio",
            "command": sys.executable,
            "args": ["-m", "workers.cli", "mcp", "--seat", seat_id],
            "env": {k: v for k, v in self.environ.items() if k.startswith("SEATWIRE_")},
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"mcpServers": {"seatwire": server}}, fh, indent=2)
        os.replace(tmp, path)
        return str(path)

    def _settled_command(
        self,
        spec: CommandLauncher,
        brief: Brief,
        ran: CommandRun,
        session: SessionRecord | None,
        mode: SessionMode | None,
        rotated: str | None,
    ) -> Launched:
        out = ran.output
        beat_seen: bool | None = (
            None if spec.output == "text" else bool(out.session_id or out.ended)
        )
        seed_mode = mode or "session-id"
        failure = classify_launch_failure(
            {
                "mode": seed_mode,
                "exitCode": ran.exit_code,
                "output": ran.output_tail,
                "beatSeen": beat_seen,
            }
        )
        failed = failure["kind"] != "none" or ran.timed_out or out.is_error is True
        notes: list[str] = []
        if rotated:
            notes.append(f"rotated the session before launching: {rotated}")
        if ran.timed_out:
            notes.append(f"killed at the time limit ({ran.error or 'time limit'})")
        elif ran.error:
            notes.append(ran.error)
        signature = ""
        if failed:
            kind = str(failure["kind"]) if failure["kind"] != "none" else "nonzero-exit"
            signature = launch_failure_signature(
                {"mode": seed_mode, "kind": kind, "exitCode": ran.exit_code}
            )
            if mode is None:  # a launcher that keeps no sessions has no session mode to name
                signature = "command:" + signature.partition(":")[2]
        if session is not None and out.session_id and out.session_id != session.session_id:
            session = session.model_copy(update={"session_id": out.session_id})
        # The session this launch ran with: the record below may rotate to a fresh one, but a
        # failed resume is about the one that was resumed.
        ran_with = session.session_id if session is not None else out.session_id
        if session is not None and mode is not None and failed:
            prior = brief.streak
            at_limit = (
                prior is not None
                and prior.signature == signature
                and prior.streak + 1 >= IDENTICAL_FAILURE_LIMIT
            )
            post = after_launch(
                session,
                mode=mode,
                exit_code=ran.exit_code,
                started_ms=ran.started_ms,
                ended_ms=ran.ended_ms,
                resume_target_missing=failure["kind"] == "resume-target-missing",
                beat_seen=beat_seen,
                streak_at_limit=at_limit,
                self_stopped=ran.timed_out,
                now_ms=self.clock_ms(),
                uuid=self.new_id,
            )
            session = post.session
            if post.action == "rotate":
                notes.append(f"rotated to a fresh session {session.session_id}: {post.why}")
            elif post.why:
                notes.append(post.why)
        cost = None if out.cost_usd is None else round(out.cost_usd * 1_000_000)
        if cost is not None and not 0 <= cost < MICROS_BOUND:
            # A cost no frame can hold is the CLI's error, not the turn's: the turn keeps its
            # outcome, the cost is left out and the detail says what was reported.
            notes.append(f"the reported cost of {out.cost_usd} USD is out of bounds: not kept")
            cost = None
        detail = str(failure["detail"]) if failed else "the command exited cleanly"
        if failed and out.errors:
            detail += f" ({out.errors[0][:200]})"
        detail = "; ".join([detail, *notes])[:2000]
        outcome = TurnOutcome(
            kind="failed" if failed else "ok",
            detail=detail,
            exit_code=ran.exit_code,
            failure_kind=str(failure["kind"]) if failed else None,
            proven=bool(failure["proven"]) if failed else None,
            signature=signature,
            session_id=ran_with,
            model=out.model,
            usage={k: float(v) for k, v in out.usage.items()},
            cost_micros=cost,
            enforcement=spec.cost_enforcement if cost is not None else None,
            denials=len(out.permission_denials),
            duration_ms=max(0, ran.ended_ms - ran.started_ms),
        )
        return Launched(outcome, session=session)


def _failed(signature: str, detail: str, *, retryable: bool = True) -> TurnOutcome:
    return TurnOutcome(
        kind="failed",
        detail=detail[:2000],
        failure_kind=signature.split(":")[1] if ":" in signature else signature,
        signature=signature,
        retryable=retryable,
        proven=True,
    )


def _bounded(reply: httpx.Response) -> bytes | None:
    body = b""
    for chunk in reply.iter_bytes():
        body += chunk
        if len(body) > REPLY_LIMIT:
            return None
    return body


def _fill(arg: str, values: Mapping[str, str]) -> str:
    """`{name}` placeholders only; any other brace is left as it is (no format spec)."""
    for name, value in values.items():
        arg = arg.replace("{" + name + "}", value)
    return arg
