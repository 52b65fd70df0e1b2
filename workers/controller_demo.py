"""The work controller's part of `seatwire demo` (issue 12 point 8): the sample org's seats
plus one whose launcher always fails, the controller ticked by hand so that every step is
seen, and each case checked against what it must end as:

    scout   a directed Slack message (signed, over HTTP) leads to exactly one turn, reason
            `notices`; the demo then acknowledges the item, as scout's agent would over
            `/v1/seats/scout/updates` (the noop launcher runs no agent)
    tally   nothing is addressed to it: after its first turn it waits, reason `idle`
    relay   its command launcher exits 2 every time: three identical failures, then the
            controller stops it (`failure_limit`) and it escalates, once, to its operator
            Ava, through the engagement, guardrail and send stages; the ask's first line is
            the verdict

The demo's org file is its own copy, so the failing seat is added only for this part (the
earlier parts expect the sample org's two seats).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml
from celery import Celery
from rich.console import Console
from rich.table import Table

from pipeline.signatures import slack_headers
from workers.container import Container
from workers.outbound.file import read_outbox
from workers.stages.controller_tick import ControllerTick

Poll = Callable[[httpx.Client, str], dict[str, Any]]
# The Authorization header of a seat's own token (its routes take no other: issue 13).
SeatHeaders = Callable[[str], dict[str, str]]
RELAY_PROGRAM = (
    "import sys; print('relay: the model gateway refused the API key', file=sys.stderr); "
    "sys.exit(2)"
)


def add_failing_seat(org_file: Path) -> None:
    """The demo's org copy, with `relay`: a seat whose launcher always exits 2."""
    org = yaml.safe_load(org_file.read_text())
    org["members"].append(
        {"id": "relay", "displayName": "Relay", "roleTitle": "Agent seat", "aliases": ["U0RELAY"]}
    )
    org["seats"].append(
        {
            "memberId": "relay",
            "operatorId": "ava",
            "launcher": {
                "kind": "command",
                "argv": [sys.executable, "-c", RELAY_PROGRAM],
                "sessionArgs": {},
                "timeLimitS": 60,
            },
            "controller": {"retryBaseMs": 0},
        }
    )
    org_file.write_text(yaml.safe_dump(org, sort_keys=False))


def settled(http: httpx.Client, seats: list[str], timeout_s: float = 30) -> dict[str, Any]:
    """Every seat's status once none has a turn in flight."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = {s: http.get(f"/v1/seats/{s}/status").raise_for_status().json() for s in seats}
        if all(v["activeTurn"] is None for v in status.values()):
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"turns still running after {timeout_s} s")
        time.sleep(0.02)


def _directed_message(http: httpx.Client, secret: str, poll: Poll) -> None:
    run = int(time.time())
    ts = f"{run}.000900"
    envelope = {
        "token": "unused",
        "team_id": "T0SEATWIRE",
        "api_app_id": "A0SEATWIRE",
        "type": "event_callback",
        "event_id": f"EvCTL{run}",
        "event_time": run,
        "event": {
            "type": "message",
            "channel": "C-PLATFORM",
            "channel_type": "channel",
            "user": "U0GUS",
            "text": "<@U0SCOUT> the deploy is slow again, can you look?",
            "ts": ts,
            "event_ts": ts,
        },
        "authorizations": [{"team_id": "T0SEATWIRE", "user_id": "U0SCOUT", "is_bot": True}],
    }
    body = json.dumps(envelope).encode()
    resp = http.post(
        "/webhooks/slack", content=body, headers=slack_headers(body, secret=secret, now_s=run)
    )
    resp.raise_for_status()
    poll(http, resp.json()["deliveryId"])


def run_controller_demo(
    http: httpx.Client,
    container: Container,
    app: Celery,
    console: Console,
    *,
    slack_secret: str,
    wait_resolved: Poll,
    wait_final: Callable[[httpx.Client, str], dict[str, Any]],
    seat_headers: SeatHeaders,
) -> int:
    """Drive the cases; print what each seat did; 1 per case that ended otherwise."""
    add_failing_seat(container.settings.org_file)
    # The escalation is in the table below; its log line (for operators) would not fit it.
    logging.getLogger("seatwire.turns").setLevel(logging.ERROR)
    seats = [s.member_id for s in container.org.current()[0].org.seats]
    tick = ControllerTick.of(container, app)
    for seat in seats:  # their agents read the inboxes shown above
        _acknowledge(http, seat, seat_headers)
    tick()  # every seat's first turn
    first = settled(http, seats)
    _directed_message(http, slack_secret, wait_resolved)
    for _ in range(4):  # scout's notices; relay's retries until the controller stops it
        tick()
        status = settled(http, seats)
        _acknowledge(http, "scout", seat_headers)
    scout, tally, relay = status["scout"], status["tally"], status["relay"]
    scout_turns = [t for t in scout["turns"] if t not in first["scout"]["turns"]]
    escalation = relay["escalation"] or {}
    final = wait_final(http, escalation["trackingId"]) if escalation.get("trackingId") else {}
    outbox = read_outbox(container.settings.outbox_path)
    asks = [a for a in outbox if a.get("workId") == "seat-turns:relay"]
    cases = [
        (
            "scout",
            "a directed Slack message",
            "1 turn (notices), ok",
            ", ".join(f"1 turn ({t['reason']}), {t['outcome']['kind']}" for t in scout_turns)
            if len(scout_turns) == 1
            else f"{len(scout_turns)} turns",
        ),
        ("tally", "nothing new for it", "wait: idle", _decision(tally)),
        (
            "relay",
            "its launcher exits 2",
            "3 failures; stop: failure_limit; 1 ask to ava",
            f"{len(relay['turns'])} failures; {_decision(relay)}; "
            f"{len(asks)} ask to {escalation.get('targetId') or 'nobody'}"
            f"{'' if final.get('state') == 'engaged' else ' (' + str(final.get('state')) + ')'}",
        ),
    ]
    failures = checked_cases(
        console, "The work controller: when each seat's turn runs", ("seat", "given"), cases
    )
    if asks:
        first_line = str(asks[0].get("body", "")).splitlines()[0].strip("*")
        console.print(f"The ask to Ava begins: {first_line}", soft_wrap=False)
    console.print(
        "Each seat's decision, streak and last turns: GET /v1/seats/{seat}/status, or "
        "`seatwire seat status SEAT` against a Redis."
    )
    return failures


def checked_cases(
    console: Console,
    title: str,
    given: tuple[str, str],
    cases: list[tuple[str, str, str, str]],
) -> int:
    """A table of cases (two columns saying what was given, then expected, got and the
    check); how many ended otherwise than expected."""
    table = Table(title=title, show_lines=True)
    for col in (*given, "expected", "got", "check"):
        table.add_column(col, overflow="fold")
    failures = 0
    for first, second, expected, got in cases:
        ok = got == expected
        failures += 0 if ok else 1
        table.add_row(first, second, expected, got, "ok" if ok else "[red]UNEXPECTED[/red]")
    console.print(table)
    return failures


def _acknowledge(http: httpx.Client, seat: str, seat_headers: SeatHeaders) -> None:
    """What a seat's agent does with its inbox: read it, then acknowledge its position (with
    the seat's own token)."""
    auth = seat_headers(seat)
    page = http.get(f"/v1/seats/{seat}/updates", headers=auth).raise_for_status().json()
    if page["items"]:
        ack = {"position": page["position"]}
        http.post(f"/v1/seats/{seat}/updates/ack", json=ack, headers=auth)


def _decision(status: dict[str, Any]) -> str:
    d = status["lastDecision"] or {}
    return f"{d.get('action')}: {d.get('reason')}"
