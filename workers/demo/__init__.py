"""`seatwire demo`: the bundled scenario pushed over HTTP through a running Seatwire, every
decision checked against what its case must end as, and the outbox against the engaged asks;
then the bundled Slack and GitHub stream, signed and posted as those services send it, with
the seat each event reached and why every other seat found it ambient; then the goal steward
over the sample org's objectives (workers/demo/steward.py); then the work controller, ticked
by hand (workers/demo/controller.py); then two seats through the MCP client
(workers/demo/tools.py). Each part is a `Section` of cases, shown as it ends in the text view
or gathered into one JSON document (workers/demo/view.py)."""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml
from pydantic import SecretStr
from rich.console import Console

from pipeline.signatures import github_headers, slack_headers
from workers.clock import now_ms
from workers.container import Container
from workers.demo.asks import DEMO_REVIEW_TIMEOUT_MS, run_asks_demo
from workers.demo.controller import run_controller_demo
from workers.demo.steward import run_steward_demo
from workers.demo.tools import run_tools_demo
from workers.demo.view import (
    Case,
    Check,
    DemoReport,
    Field,
    Finding,
    NextStep,
    Quiet,
    Section,
    TextView,
    View,
    plural,
)
from workers.embedded import EmbeddedSystem, free_port
from workers.outbound.file import read_outbox
from workers.settings import (
    EMBEDDED_GITHUB_SECRET,
    EMBEDDED_SLACK_SECRET,
    REPO_ROOT,
    Settings,
    masked,
)
from workers.stores.tokens import TokenRefused, Tokens, dev_token

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


NEXT_STEPS = (
    NextStep(("uv run seatwire demo --json",), "this run as one JSON document, for machines"),
    NextStep(
        ("uv run seatwire up",),
        "the same system, left running on :8080 (embedded unless SEATWIRE_REDIS_URL is set); "
        "it prints the operator token and each seat's token",
    ),
    NextStep(
        (
            "curl -s -H 'Authorization: Bearer seatwire-embedded-dev-token'",
            "localhost:8080/v1/seats/scout/status",
        ),
        "against `seatwire up` (embedded): scout's controller, streak and last turns",
    ),
    NextStep(("uv run seatwire --help",), "every command: workers, beat, steward, seats, tokens"),
)
OUTCOME_WORDS = {"engaged": "engaged", "nobody": "nobody", "refused": "refused by a guardrail"}


def run_demo(settings: Settings, console: Console, *, as_json: bool = False) -> int:
    """Run every part and show it: the text view part by part as each ends, or (`as_json`)
    one JSON document at the end and nothing else. The exit status: 1 if a check failed."""
    view = None if as_json else TextView(console)
    report = collect_demo(settings, view or Quiet())
    if view is None:
        console.out(json.dumps(report.json(), indent=2), highlight=False)
    else:
        view.summary(report)
    return report.exit_code


def collect_demo(settings: Settings, view: View) -> DemoReport:
    """Start Seatwire embedded (or on the configured Redis), drive every part of the demo
    through it over HTTP, and gather what each case ended as; `view` sees each part end."""
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
            # The answers part runs the asks tick by hand, after its review's shortened timeout.
            "asks_interval_s": 3600.0,
            "ask_timeouts": {**settings.ask_timeouts, "mandatory_review": DEMO_REVIEW_TIMEOUT_MS},
            # The demo puts hours of a seat's asks into a minute: scout's escalation there
            # would otherwise meet the hourly cap its earlier asks filled. No case of the
            # scenario depends on that cap.
            "limits": settings.limits.model_copy(
                update={"per_seat_per_hour": max(settings.limits.per_seat_per_hour, 30)}
            ),
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
    view.header(mode, base)
    steps = _steps(yaml.safe_load(SCENARIO.read_text()), suffix)
    sections: list[Section] = []

    def done(section: Section) -> None:
        sections.append(section)
        view.section(section)

    assert system.container is not None and system.container.app is not None
    container, app = system.container, system.container.app
    seat_tokens = SeatTokens(container)
    try:
        with httpx.Client(
            base_url=base, timeout=10, headers={"Authorization": f"Bearer {settings.token()}"}
        ) as http:
            done(work_section(_post_work(http, steps, seat_tokens.headers), outbox))
            done(replay_inbound(http, settings, seat_tokens.headers))
            done(
                run_steward_demo(
                    http,
                    container,
                    app,
                    now_ms=int(time.time() * 1000),
                    wait_final=_wait_final,
                    seat_headers=seat_tokens.headers,
                )
            )
            done(
                run_controller_demo(
                    http,
                    container,
                    app,
                    slack_secret=settings.slack_secret() or EMBEDDED_SLACK_SECRET,
                    wait_resolved=_wait_resolved,
                    wait_final=_wait_final,
                    seat_headers=seat_tokens.headers,
                )
            )
            done(run_tools_demo(base, http, container, headers_for=seat_tokens.headers))
            done(
                run_asks_demo(
                    http,
                    container,
                    app,
                    slack_secret=settings.slack_secret() or EMBEDDED_SLACK_SECRET,
                    suffix=suffix or f"-{int(time.time())}",
                    wait_final=_wait_final,
                    wait_resolved=_wait_resolved,
                    seat_headers=seat_tokens.headers,
                )
            )
    finally:
        seat_tokens.revoke()
        system.stop()
    return DemoReport(mode, base, tuple(sections), NEXT_STEPS)


def _post_work(
    http: httpx.Client, steps: list[dict[str, Any]], seat_headers: Callable[[str], dict[str, str]]
) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """Each step's report posted as its seat; the answer to the post, and the final entry."""
    results = []
    for step in steps:
        resp = http.post(
            f"/v1/seats/{step['seat']}/work",
            json=step["report"],
            headers=seat_headers(step["seat"]),
        )
        if resp.status_code != 202:
            raise RuntimeError(f"{step['name']}: HTTP {resp.status_code} {resp.text}")
        posted = resp.json()
        results.append((step, posted, _wait_final(http, posted["trackingId"])))
    return results


# ---------------------------------------------------------------------------- work reports


def work_section(results: list[Any], outbox: Path) -> Section:
    """Every scenario case as decided, and whether the outbox holds exactly the engaged asks."""
    cases: list[Case] = []
    first_case: dict[str, int] = {}  # tracking id -> the case that decided it
    engaged_ids: set[str] = set()
    states: Counter[str] = Counter()
    refused: list[str] = []
    for number, (step, posted, final) in enumerate(results, 1):
        duplicate = posted["status"] == "duplicate"
        cases.append(_work_case(step, posted, final, first_case.get(posted["trackingId"])))
        first_case.setdefault(posted["trackingId"], number)
        states["duplicate" if duplicate else final["state"]] += 1
        if duplicate:
            continue
        if final["state"] == "engaged":
            engaged_ids.add(final["send"]["idempotencyId"])
        if final["state"] == "refused":
            refused.append(str((final.get("decision") or {}).get("reasonCode")))
    lines = read_outbox(outbox)
    outbox_ids = {str(rec["idempotencyId"]) for rec in lines}
    exact = outbox_ids == engaged_ids and len(lines) == len(outbox_ids)
    held = (
        f"The outbox ({outbox}) holds exactly the {plural(len(engaged_ids), 'engaged ask')}, "
        "once each"
        if exact
        else f"The outbox ({outbox}) holds {plural(len(lines), 'ask')} "
        f"({', '.join(sorted(outbox_ids)) or 'none'}); the engaged cases sent "
        f"{', '.join(sorted(engaged_ids)) or 'none'}"
    )
    expected = f"exactly the {plural(len(engaged_ids), 'engaged ask')}, once each"
    parts = [f"{states['engaged']} engaged", f"{states['nobody']} nobody"]
    if refused:
        parts.append(f"{states['refused']} refused by a guardrail ({', '.join(refused)})")
    parts.append(plural(states["duplicate"], "duplicate") + " (no-op)")
    parts.extend(f"{n} {state}" for state, n in sorted(states.items()) if state not in _TOLD)
    return Section(
        key="work",
        label="work reports",
        title="Work reports: every decision, written down",
        intro=f"Each report of {SCENARIO.relative_to(REPO_ROOT)}, posted as its seat to "
        "POST /v1/seats/{seat}/work and followed to its final state (GET /v1/work/{id}).",
        cases=tuple(cases),
        summary=f"{plural(len(cases), 'case')}: {', '.join(parts)}",
        counts=(("cases", len(cases)), *sorted(states.items()), ("asks", len(lines))),
        findings=(Finding(held, Check(exact, expected)),),
        notes=("Each ask's full text is in the outbox file, one JSON line per ask.",),
    )


_TOLD = {"engaged", "nobody", "refused", "duplicate"}


def _work_case(
    step: dict[str, Any], posted: dict[str, Any], final: dict[str, Any], first: int | None
) -> Case:
    expect = step.get("expect", {})
    check = Check(_check(expect, posted, final), _expected_words(expect))
    d = final.get("decision") or {}
    if posted["status"] == "duplicate":
        earlier = f"case {first}" if first else "an earlier report"
        return Case(
            step["name"],
            (
                Field("outcome", "outcome", "duplicate (no-op)"),
                Field("reasonCode", "reason code", "duplicate"),
                Field(
                    "decidedIn",
                    "decided in",
                    f"{earlier} ({final['state']}, {d.get('reasonCode') or 'no reason code'}): "
                    "nothing is decided or sent again",
                ),
            ),
            check,
            subject=step["seat"],
        )
    fields = [
        Field("outcome", "outcome", OUTCOME_WORDS.get(final["state"], final["state"])),
        Field("reasonCode", "reason code", d.get("reasonCode") or "-"),
        Field("trigger", "trigger", d.get("trigger") or "none fired"),
        Field(
            "targets",
            "targets (rung)",
            tuple(f"{t['memberId']} ({t['rung']})" for t in d.get("targets", ())) or ("nobody",),
        ),
        Field("surface", "surface", d.get("surface") or "none"),
    ]
    send = final.get("send") or {}
    if final["state"] == "engaged" and send:
        fields.append(Field("sent", "sent", f"{send['idempotencyId']} to {send['channelId']}"))
        headline = str(d.get("body") or "").splitlines()[:1]
        if headline:
            fields.append(Field("ask", "ask begins", headline[0].replace("**", "")))
    return Case(step["name"], tuple(fields), check, tuple(d.get("why", ())), step["seat"])


def _expected_words(expect: dict[str, Any]) -> str:
    if expect.get("duplicate"):
        return "duplicate (no-op)"
    words = []
    if "engaged" in expect:
        words.append("engaged" if expect["engaged"] else "nobody engaged")
    if "reasonCode" in expect:
        words.append(f"reason code {expect['reasonCode']}")
    if "surface" in expect:
        words.append(f"surface {expect['surface']}")
    return ", ".join(words) or "any outcome"


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
    http: httpx.Client, settings: Settings, seat_headers: Callable[[str], dict[str, str]]
) -> Section:
    """Post the bundled stream as Slack and GitHub would; where each event went, and why."""
    stream: list[dict[str, Any]] = yaml.safe_load(INBOUND.read_text())
    run = int(time.time()) * 10  # fresh ts and delivery ids on a Redis that outlives the run
    slack_secret, github_secret = settings.slack_secret(), settings.github_secret()
    assert slack_secret is not None and github_secret is not None
    cases: list[Case] = []
    first_case: dict[str, int] = {}  # delivery id -> the case that journalled it
    outcomes: Counter[str] = Counter()
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
        delivery = answers[0]["deliveryId"]
        trace = _wait_resolved(http, delivery)
        case, outcome = _inbound_case(step, answers, trace, first_case.get(delivery))
        first_case.setdefault(delivery, i + 1)
        cases.append(case)
        outcomes[outcome] += 1
    inboxes = {}
    for seat in ("scout", "tally"):
        page = http.get(f"/v1/seats/{seat}/updates", headers=seat_headers(seat))
        inboxes[seat] = len(page.raise_for_status().json()["items"])
    held = [
        f"{seat}'s inbox held {plural(n, 'unacknowledged item')}" for seat, n in inboxes.items()
    ]
    deliveries = sum(step.get("deliveries", 1) for step in stream)
    return Section(
        key="inbound",
        label="inbound events",
        title="Inbound events: who was spoken to, and why the rest were not",
        intro=f"The stream of {INBOUND.relative_to(REPO_ROOT)}, signed and posted as Slack and "
        "GitHub send it (POST /webhooks/slack, /webhooks/github), each followed to where it "
        "went (GET /v1/trace/{delivery id}). Every seat's verdict is a reason code.",
        cases=tuple(cases),
        summary=f"{plural(len(cases), 'event')} in {plural(deliveries, 'delivery', 'deliveries')}:"
        f" {outcomes['directed']} reached a seat, {outcomes['ambient']} ambient for every seat, "
        f"{outcomes['skipped']} skipped, {plural(outcomes['duplicate'], 'duplicate')}",
        counts=(
            ("events", len(cases)),
            ("deliveries", deliveries),
            *sorted(outcomes.items()),
            *((f"{seat}Inbox", n) for seat, n in inboxes.items()),
        ),
        notes=(
            f"After the stream, {'; '.join(held)}. The work controller's part below reads "
            "and acknowledges them, as each seat's agent does "
            "(GET /v1/seats/{seat}/updates, then POST /v1/seats/{seat}/updates/ack). Against a "
            "Redis, `uv run seatwire seats` shows each seat's unacknowledged inbox.",
        ),
    )


def _inbound_case(
    step: dict[str, Any], answers: list[dict[str, Any]], trace: dict[str, Any], first: int | None
) -> tuple[Case, str]:
    """One event's case, and what it ended as: directed, ambient, skipped or duplicate."""
    source = "Slack" if "slack" in step else f"GitHub {step['github']}"
    received = f"{source}, {plural(len(answers), 'delivery', 'deliveries')}: " + ", ".join(
        a["status"] for a in answers
    )
    fields: list[Field] = []
    why: tuple[str, ...] = ()
    if answers[0]["status"] == "duplicate":
        got: Any = "duplicate"
        outcome = "duplicate"
        earlier = f"case {first}" if first else "an earlier delivery"
        fields += [
            Field("outcome", "outcome", "duplicate (no-op)"),
            Field("reasonCode", "reason code", "duplicate"),
            Field("journalledIn", "journalled in", f"{earlier}: no seat is told twice"),
        ]
    elif trace["state"] == "skipped":
        got = "skipped"
        outcome = "skipped"
        fields += [
            Field("outcome", "outcome", "skipped: journalled, no seat is told"),
            Field("reasonCode", "reason code", str(trace["reason"])),
        ]
        why = (str(trace.get("detail") or trace["reason"]),)
    else:
        seats = trace["seats"]
        got = {s["seatId"]: s["reason"] for s in seats}
        reached = [s["seatId"] for s in seats if s["directed"]]
        outcome = "directed" if reached else "ambient"
        fields += [
            Field(
                "outcome",
                "outcome",
                f"reached {', '.join(reached)}" if reached else "ambient for every seat",
            ),
            Field(
                "reasonCodes", "reason codes", tuple(f"{s['seatId']}: {s['reason']}" for s in seats)
            ),
        ]
        # A plain `ambient` says all there is; the other verdicts say why.
        why = tuple(
            f"{s['seatId']} ({s['reason']}): {s['why']}" for s in seats if s["reason"] != "ambient"
        )
    fields.append(Field("source", "received", received))
    check = Check(got == step["expect"], _inbound_expected(step["expect"]))
    return Case(step["name"], tuple(fields), check, why), outcome


def _inbound_expected(expect: Any) -> str:
    if isinstance(expect, dict):
        return ", ".join(f"{seat}: {reason}" for seat, reason in expect.items())
    return str(expect)
