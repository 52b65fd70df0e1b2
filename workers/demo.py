"""`seatwire demo`: the bundled scenario pushed over HTTP through a running Seatwire, then a
table of every decision and the outbox, checked against what each case must end as; then the
bundled Slack and GitHub stream, signed and posted as those services send it, with the seat
each event reached and why every other seat found it ambient; then the goal steward over the
sample org's objectives (workers/steward_demo.py); then the work controller, ticked by hand:
one turn for a directed message, a quiet seat idle, a failing launcher escalating to its
operator (workers/controller_demo.py); then two seats through the MCP client: a claim the
other cannot take, a thread between them, a runnable work intent the controller runs
(workers/tools_demo.py)."""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml
from pydantic import SecretStr
from rich.console import Console
from rich.table import Table

from pipeline.signatures import github_headers, slack_headers
from workers.clock import now_ms
from workers.container import Container
from workers.controller_demo import run_controller_demo
from workers.embedded import EmbeddedSystem, free_port
from workers.outbound.file import read_outbox
from workers.settings import (
    EMBEDDED_GITHUB_SECRET,
    EMBEDDED_SLACK_SECRET,
    REPO_ROOT,
    Settings,
    masked,
)
from workers.steward_demo import run_steward_demo
from workers.stores.tokens import TokenRefused, Tokens, dev_token
from workers.tools_demo import run_tools_demo

SCENARIO = REPO_ROOT / "examples" / "scenario.yaml"
INBOUND = REPO_ROOT / "examples" / "inbound.yaml"
RESOLVED = {"directed", "ambient", "skipped", "failed"}
FINAL = {"engaged", "nobody", "refused", "send_failed", "send_blocked", "failed"}


def _poll(http: httpx.Client, path: str, done: set[str], timeout_s: float = 20) -> dict[str, Any]:
    """GET `path` until its `state` is one of `done` (a 404 means not there yet)."""
    deadline = time.monotonic() + timeout_s
    while True:
        resp = http.get(path)
        if resp.status_code != 404:
            body: dict[str, Any] = resp.raise_for_status().json()
            if body["state"] in done:
                return body
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} not final after {timeout_s} s: {resp.text}")
        time.sleep(0.01)


def _wait_final(http: httpx.Client, tracking_id: str) -> dict[str, Any]:
    return _poll(http, f"/v1/work/{tracking_id}", FINAL)


def _steps(scenario: list[dict[str, Any]], suffix: str) -> list[dict[str, Any]]:
    """Resolve `repeat` (post an earlier report again) and `revise` (a later revision of it)."""
    steps: list[dict[str, Any]] = []
    for step in scenario:
        step = copy.deepcopy(step)
        if "repeat" in step:
            step["report"] = steps[step["repeat"]]["report"]
            step["expect"] = {"duplicate": True}
        elif "revise" in step:
            earlier = copy.deepcopy(steps[step["revise"]]["report"])
            earlier["revision"] = earlier.get("revision", 1) + 1
            step["report"] = earlier
        else:
            step["report"]["id"] += suffix
        steps.append(step)
    return steps


class SeatTokens:
    """Each seat's own bearer token, for the seat routes (issue 13 point 6): embedded, the
    seat's development token (workers/stores/tokens.py `dev_token`); on a real Redis, a
    token the demo issues itself through the store at first use and revokes at the end."""

    def __init__(self, container: Container) -> None:
        self.container = container
        self.store = Tokens(container.redis)
        self.issued: dict[str, tuple[str, str]] = {}  # seat id -> (token, its hash prefix)

    def token(self, seat: str) -> str:
        known = self.container.org.current()[0].seat(seat)
        if known is None:
            raise RuntimeError(f"{seat!r} is not a seat of the demo's org")
        settings = self.container.settings
        if settings.embedded:
            return dev_token(settings.token(), known.member_id)
        if known.member_id not in self.issued:
            raw, record = self.store.issue(
                "seat", seat_id=known.member_id, label="seatwire demo", now_ms=now_ms()
            )
            self.issued[known.member_id] = (raw, record.prefix)
        return self.issued[known.member_id][0]

    def headers(self, seat: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(seat)}"}

    def revoke(self) -> None:
        for _raw, prefix in self.issued.values():
            with contextlib.suppress(TokenRefused):
                self.store.revoke(prefix)
        self.issued.clear()


def run_demo(settings: Settings, console: Console) -> int:
    outbox = Path(".seatwire/demo/outbox.jsonl")
    outbox.parent.mkdir(parents=True, exist_ok=True)
    outbox.unlink(missing_ok=True)
    # The demo's own copy of the org file: its last part adds a seat whose launcher fails.
    org_copy = outbox.parent / "org.yaml"
    org_copy.write_text(settings.org_file.read_text())
    # The demo signs its own stream, so it uses the configured secrets or its own.
    settings = settings.model_copy(
        update={
            "outbox_path": outbox,
            "outbox_fsync": False,
            "org_file": org_copy,
            # The controller part ticks by hand, step by step: no tick of its own meanwhile.
            "controller_interval_s": 3600.0,
            "slack_signing_secret": SecretStr(settings.slack_secret() or EMBEDDED_SLACK_SECRET),
            "github_webhook_secret": SecretStr(settings.github_secret() or EMBEDDED_GITHUB_SECRET),
        }
    )
    # On a real, shared Redis the ledger outlives this run: give the work ids a fresh suffix.
    suffix = "" if settings.embedded else f"-{int(time.time())}"
    system = EmbeddedSystem(settings)
    api = system.start()
    base = system.serve_in_background(api, "127.0.0.1", free_port())
    mode = (
        "embedded (in-process Redis stand-in, in-memory broker)"
        if settings.embedded
        else f"Redis at {masked(settings.redis_url)}"
    )
    console.print(f"[bold]Seatwire demo[/bold] — {mode}; ingress on {base}")
    steps = _steps(yaml.safe_load(SCENARIO.read_text()), suffix)
    results = []
    assert system.container is not None
    seat_tokens = SeatTokens(system.container)
    try:
        with httpx.Client(
            base_url=base, timeout=10, headers={"Authorization": f"Bearer {settings.token()}"}
        ) as http:
            for step in steps:
                resp = http.post(
                    f"/v1/seats/{step['seat']}/work",
                    json=step["report"],
                    headers=seat_tokens.headers(step["seat"]),
                )
                if resp.status_code != 202:
                    raise RuntimeError(f"{step['name']}: HTTP {resp.status_code} {resp.text}")
                posted = resp.json()
                final = _wait_final(http, posted["trackingId"])
                results.append((step, posted, final))
            failures = _report_work(console, results, outbox)
            failures += replay_inbound(http, settings, console, seat_tokens.headers)
            assert system.container is not None and system.container.app is not None
            failures += run_steward_demo(
                http,
                system.container,
                system.container.app,
                console,
                now_ms=int(time.time() * 1000),
                wait_final=_wait_final,
                seat_headers=seat_tokens.headers,
            )
            failures += run_controller_demo(
                http,
                system.container,
                system.container.app,
                console,
                slack_secret=settings.slack_secret() or EMBEDDED_SLACK_SECRET,
                wait_resolved=_wait_resolved,
                wait_final=_wait_final,
                seat_headers=seat_tokens.headers,
            )
            failures += run_tools_demo(
                base, http, system.container, console, headers_for=seat_tokens.headers
            )
    finally:
        seat_tokens.revoke()
        system.stop()
    return 1 if failures else 0


def _report_work(console: Console, results: list[Any], outbox: Path) -> int:

    table = Table(title="Every decision, written down", show_lines=True)
    for col in (
        "#",
        "case",
        "seat",
        "outcome",
        "trigger",
        "reason code",
        "targets (rung)",
        "surface",
        "check",
    ):
        table.add_column(col, overflow="fold")
    failures = 0
    engaged_ids = set()
    for i, (step, posted, final) in enumerate(results, 1):
        d = final.get("decision") or {}
        outcome = (
            "duplicate (no-op)"
            if posted["status"] == "duplicate"
            else ("ENGAGED" if final["state"] == "engaged" else f"nobody ({final['state']})")
        )
        if final["state"] == "engaged" and posted["status"] != "duplicate":
            engaged_ids.add(final["send"]["idempotencyId"])
        ok = _check(step.get("expect", {}), posted, final)
        failures += 0 if ok else 1
        table.add_row(
            str(i),
            step["name"],
            step["seat"],
            outcome,
            d.get("trigger") or "-",
            d.get("reasonCode") or "-",
            ", ".join(f"{t['memberId']} ({t['rung']})" for t in d.get("targets", [])) or "-",
            d.get("surface") or "-",
            "[green]ok[/green]" if ok else "[red]UNEXPECTED[/red]",
        )
    console.print(table)

    lines = read_outbox(outbox)
    console.print(f"\n[bold]Outbox[/bold] {outbox} — {len(lines)} ask(s)")
    for rec in lines:
        console.rule(f"{rec['idempotencyId']} -> {rec['channelId']} ({rec['surface']})")
        console.print(str(rec["body"]), markup=False)
    outbox_ids = {str(rec["idempotencyId"]) for rec in lines}
    if outbox_ids != engaged_ids or len(lines) != len(outbox_ids):
        failures += 1
        console.print(
            f"[red]outbox does not hold exactly the engaged asks[/red]: "
            f"{json.dumps(sorted(outbox_ids))} vs {json.dumps(sorted(engaged_ids))}"
        )
    else:
        console.print(
            f"\n[green]The outbox holds exactly the {len(engaged_ids)} engaged asks, "
            "once each.[/green]"
        )
    return 1 if failures else 0


def _check(expect: dict[str, Any], posted: dict[str, Any], final: dict[str, Any]) -> bool:
    if expect.get("duplicate"):
        return bool(posted["status"] == "duplicate")
    d = final.get("decision") or {}
    engaged = final["state"] == "engaged"
    return all(
        [
            expect.get("engaged", engaged) == engaged,
            expect.get("reasonCode", d.get("reasonCode")) == d.get("reasonCode"),
            expect.get("surface", d.get("surface")) == d.get("surface"),
        ]
    )


# ---------------------------------------------------------------------------- inbound


def _slack_request(
    step: dict[str, Any], stream: list[dict[str, Any]], i: int, run: int, secret: str
) -> tuple[str, bytes, dict[str, str]]:
    """The signed Events API request Slack would send for one step of the stream."""
    spec = dict(step["slack"])
    if "twin" in spec:  # Slack's app_mention copy of an earlier message: same channel and ts
        spec = {**stream[spec["twin"]]["slack"], "as": "app_mention", "ts_of": spec["twin"]}
    ts = f"{run + spec.get('ts_of', i)}.000100"
    event: dict[str, Any] = {
        "type": spec.get("as", "message"),
        "channel": spec["channel"],
        "user": spec["user"],
        "text": spec["text"],
        "ts": ts,
        "event_ts": ts,
    }
    if event["type"] == "message":
        event["channel_type"] = spec["type"]
    if "subtype" in spec:
        event["subtype"] = spec["subtype"]
    if "thread" in spec:
        event["thread_ts"] = f"{run + spec['thread']}.000100"
    envelope = {
        "token": "unused-verification-token",
        "team_id": "T0SEATWIRE",
        "api_app_id": "A0SEATWIRE",
        "event": event,
        "type": "event_callback",
        "event_id": f"Ev{run}{i:03d}",
        "event_time": run + i,
        "authorizations": [
            {"team_id": "T0SEATWIRE", "user_id": spec.get("audience", "U0SCOUT"), "is_bot": True}
        ],
    }
    body = json.dumps(envelope).encode()
    return "/webhooks/slack", body, slack_headers(body, secret=secret, now_s=int(time.time()))


def _github_request(
    step: dict[str, Any], i: int, run: int, secret: str
) -> tuple[str, bytes, dict[str, str]]:
    body = json.dumps(step["body"]).encode()
    delivery = f"00000000-{run:012d}-{i:04d}"
    headers = github_headers(body, secret=secret, event=step["github"], delivery_id=delivery)
    return "/webhooks/github", body, headers


def _wait_resolved(http: httpx.Client, delivery_id: str) -> dict[str, Any]:
    return _poll(http, f"/v1/trace/{delivery_id}", RESOLVED)


def replay_inbound(
    http: httpx.Client,
    settings: Settings,
    console: Console,
    seat_headers: Callable[[str], dict[str, str]],
) -> int:
    """Post the bundled stream as Slack and GitHub would, and show where each event went."""
    stream: list[dict[str, Any]] = yaml.safe_load(INBOUND.read_text())
    run = int(time.time()) * 10  # fresh ts and delivery ids on a Redis that outlives the run
    slack_secret, github_secret = settings.slack_secret(), settings.github_secret()
    assert slack_secret is not None and github_secret is not None
    table = Table(
        title="Inbound events: who was spoken to, and why the rest were not", show_lines=True
    )
    for col in ("#", "event", "received", "reached (why)", "ambient for", "check"):
        table.add_column(col, overflow="fold")
    failures = 0
    for i, step in enumerate(stream):
        if "slack" in step:
            path, body, headers = _slack_request(step, stream, i, run, slack_secret)
        else:
            path, body, headers = _github_request(step, i, run, github_secret)
        answers = []
        for n in range(step.get("deliveries", 1)):
            retry = {"X-Slack-Retry-Num": str(n), "X-Slack-Retry-Reason": "http_timeout"}
            resp = http.post(path, content=body, headers={**headers, **(retry if n else {})})
            if resp.status_code != 200:
                raise RuntimeError(f"{step['name']}: HTTP {resp.status_code} {resp.text}")
            answers.append(resp.json())
        first = answers[0]
        trace = _wait_resolved(http, first["deliveryId"])
        reached = [s for s in trace["seats"] if s["directed"]]
        ambient = [s for s in trace["seats"] if not s["directed"]]
        if first["status"] == "duplicate":
            got: Any = "duplicate"
        elif trace["state"] == "skipped":
            got = "skipped"
        else:
            got = {s["seatId"]: s["reason"] for s in trace["seats"]}
        ok = got == step["expect"]
        failures += 0 if ok else 1
        source = "Slack" if "slack" in step else f"GitHub {step['github']}"
        table.add_row(
            str(i + 1),
            f"{step['name']} [dim]({source})[/dim]",
            ", ".join(a["status"] for a in answers),
            "\n".join(f"{s['seatId']}: {s['reason']}, {s['why']}" for s in reached)
            or (f"skipped: {trace['reason']}" if got == "skipped" else "-"),
            "\n".join(f"{s['seatId']}: {s['reason']}" for s in ambient) or "-",
            "[green]ok[/green]" if ok else f"[red]UNEXPECTED[/red] {got}",
        )
    console.print(table)
    for seat in ("scout", "tally"):
        page = http.get(f"/v1/seats/{seat}/updates", headers=seat_headers(seat))
        page = page.raise_for_status().json()
        console.print(
            f"[bold]{seat}[/bold]'s inbox: {len(page['items'])} unacknowledged item(s), "
            f"acknowledge with position {page['position']}"
        )
    return failures
