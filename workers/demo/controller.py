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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml
from celery import Celery

from pipeline.signatures import slack_headers
from workers.container import Container
from workers.demo.view import Case, Check, Field, Section, plural
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
    *,
    slack_secret: str,
    wait_resolved: Poll,
    wait_final: Callable[[httpx.Client, str], dict[str, Any]],
    seat_headers: SeatHeaders,
) -> Section:
    """Drive the cases; what each seat did, checked against what it must end as."""
    add_failing_seat(container.settings.org_file)
    # The escalation is in relay's case; its log line (for operators) would interleave it.
    logging.getLogger("seatwire.turns").setLevel(logging.ERROR)
    seats = [s.member_id for s in container.org.current()[0].org.seats]
    tick = ControllerTick.of(container, app)
    for seat in seats:  # their agents read the inboxes the stream filled
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
    cases = (
        seat_case(
            "scout",
            "a directed Slack message (signed, over HTTP)",
            "1 turn (notices), ok",
            ", ".join(f"1 turn ({t['reason']}), {t['outcome']['kind']}" for t in scout_turns)
            if len(scout_turns) == 1
            else f"{len(scout_turns)} turns",
            reason=",".join(str(t["reason"]) for t in scout_turns) or "none",
            status=scout,
            turns=scout_turns,
        ),
        seat_case("tally", "nothing new for it", "wait: idle", _decision(tally), status=tally),
        seat_case(
            "relay",
            "its command launcher exits 2 every time",
            "3 failures; stop: failure_limit; 1 ask to ava",
            f"{len(relay['turns'])} failures; {_decision(relay)}; "
            f"{len(asks)} ask to {escalation.get('targetId') or 'nobody'}"
            f"{'' if final.get('state') == 'engaged' else ' (' + str(final.get('state')) + ')'}",
            status=relay,
            turns=relay["turns"][::-1],
            escalation=_escalation_lines(escalation, asks),
        ),
    )
    ran = ", ".join(f"{c.subject} {c.value('reasonCode')}" for c in cases)
    return Section(
        key="controller",
        label="work controller",
        title="The work controller: when each seat's turn runs",
        intro="The sample org's two seats and relay, a seat whose launcher always fails, with "
        "the controller ticked by hand so that every step is seen.",
        cases=cases,
        summary=f"{plural(len(cases), 'seat')}, by reason code: {ran}",
        counts=(
            ("seats", len(cases)),
            ("scoutTurns", len(scout_turns)),
            ("relayFailures", len(relay["turns"])),
            ("escalations", len(asks)),
        ),
        notes=(
            "Each seat's decision, streak and last turns: GET /v1/seats/{seat}/status, or, "
            "against a Redis, `uv run seatwire seat status SEAT`.",
        ),
    )


def seat_case(
    seat: str,
    given: str,
    expected: str,
    got: str,
    *,
    status: dict[str, Any],
    reason: str | None = None,
    turns: Sequence[dict[str, Any]] = (),
    escalation: tuple[str, ...] = (),
) -> Case:
    """A seat's case: what it was given, its last decision and turns, and the check."""
    d = status["lastDecision"] or {}
    fields = (
        Field("outcome", "outcome", got),
        Field("reasonCode", "reason code", reason or str(d.get("reason"))),
        Field("decision", "last decision", f"{d.get('action')} ({d.get('reason')})"),
    )
    why = tuple(
        f"turn {t['turnId']} ({t['reason']}): {t['outcome']['kind']}, {t['outcome']['detail']}"
        for t in turns
    )
    return Case(given, fields, Check.of(expected, got), (*why, *escalation), subject=seat)


def _escalation_lines(escalation: dict[str, Any], asks: list[dict[str, Any]]) -> tuple[str, ...]:
    if not escalation:
        return ()
    lines = [
        f"escalated to {escalation.get('targetId') or 'nobody'} after "
        f"{plural(int(escalation.get('streak') or 0), 'identical failure')}"
    ]
    if asks:
        first_line = str(asks[0].get("body", "")).splitlines()[0].strip("*")
        lines.append(f"the ask begins: {first_line}")
    return tuple(lines)


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
