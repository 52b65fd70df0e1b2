"""Schemathesis against the ingress's own OpenAPI document (issue 15 point 4): every operation
of `/openapi.json`, every check, every phase `st run` has (examples, coverage, fuzzing and
stateful sequences), in process against the ASGI app on a real Redis, finds no failure.

Bounded and deterministic: a fixed seed, derandomised generation, a few examples an operation
and no example database, so every run sends the same cases. The engine is the one `st run`
drives (schemathesis.engine), given the app instead of a URL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import schemathesis
from fastapi import FastAPI
from schemathesis.engine import Status, StopReason, events, from_schema
from schemathesis.engine.run import PhaseName
from schemathesis.python.asgi import shutdown_lifespans

from tests.auth import seat_token
from workers import bootstrap
from workers.celery_app import create_app
from workers.ingress.app import create_ingress
from workers.settings import Settings

OPERATOR = "test-operator-token"
SEAT = "scout"
OBJECTIVE = "review-turnaround"  # an active objective of examples/org.yaml, stewarded by scout
PLAYBOOK_ENTRY = "Nudge reviewers on pull requests waiting over a day"  # ... and its playbook

# What a client would send because it knows the org: the seat whose token it holds, members
# and an objective that exist. Without them nearly every case would stop at the first lookup
# (403 `wrong_seat`, 404, 422 `unknown_member`) and the routes past it would go untested.
# Schemathesis applies the `body.*` ones to the bodies it generates (fuzzing and stateful), not
# to the coverage phase's boundary bodies (see EXPECTED below).
FIXTURES: dict[str, Any] = {
    "seat": SEAT,
    "key": OBJECTIVE,
    "body.seatId": SEAT,
    "body.memberId": "ben",  # a person, not a seat: decisions take people's votes
    "body.by": "ava",
    "body.objective": OBJECTIVE,
    "body.candidate": PLAYBOOK_ENTRY,
    # A frame is recorded only within the retention window, which ends now.
    "body.atMs": int(time.time() * 1000),
    # Money is never a float, not even a whole one (contracts/money.py), which no JSON schema
    # can say: its schema is an integer, and schemathesis sends `2.0` for an integer.
    "body.costMicros": 1500,
    "body.shadowCostMicros": "2500",
}

# A 422 that is right for a request its schema admits, because the rule is not one a schema
# can state. Nothing else is excused: every other check, and this one for every other status.
PASSED_OR_422 = {"expected-statuses": ["2xx", 401, 403, 404, 409, 422, 429]}
EXPECTED: list[dict[str, Any]] = [
    {
        # `cursor` is an opaque token the server minted for one viewer; `untilMs` must not be
        # before `sinceMs` (a rule between two parameters).
        "include-path": ["/v1/decisions", "/v1/seats/{seat}/cost", "/v1/asks"],
        "include-method": "GET",
        "checks": {"positive_data_acceptance": PASSED_OR_422},
    },
    {
        # The coverage phase's bodies do not carry FIXTURES: a seatId that is not the path's
        # seat, a member the org does not have, a frame before the retention window.
        "include-path": [
            "/v1/decisions/{direction_id}/votes",
            "/v1/decisions/{direction_id}/decide",
            "/v1/decisions/{direction_id}/end",
            "/v1/steward/overrides",
            "/v1/seats/{seat}/work",
            "/v1/seats/{seat}/cost",
            "/v1/seats/{seat}/asks/release",
        ],
        "include-method": "POST",
        "phases": {"coverage": {"checks": {"positive_data_acceptance": PASSED_OR_422}}},
    },
]


@pytest.fixture
def ingress(redis_client: redis.Redis, redis_url: str, tmp_path: Any) -> Iterator[FastAPI]:
    settings = Settings(
        redis_url=redis_url,
        api_token=OPERATOR,
        outbox_path=tmp_path / "outbox.jsonl",
        # Configured, so that the provider routes check their signatures (401) rather than
        # answer that they are off (404).
        slack_signing_secret="slack-signing-secret",
        github_webhook_secret="github-webhook-secret",
    )
    celery = create_app(settings, register=False)
    yield create_ingress(bootstrap.build_container(settings, app=celery), celery)
    shutdown_lifespans()  # the app's lifespan, which schemathesis started with its first call


def config(seat: str) -> schemathesis.Config:
    return schemathesis.Config.from_dict(
        {
            "seed": 15,
            "generation": {
                "mode": "all",  # positive and negative cases
                "max-examples": 8,
                "deterministic": True,
                "database": "none",
            },
            "phases": {"stateful": {"max-steps": 6}},
            "auth": {
                "openapi": {"operatorToken": {"bearer": OPERATOR}, "seatToken": {"bearer": seat}}
            },
            "parameters": FIXTURES,
            "operations": EXPECTED,
        }
    )


def test_schemathesis_finds_no_failure(ingress: FastAPI, redis_client: redis.Redis) -> None:
    """Every check of every phase, over every operation, passes; none errs or goes untested."""
    schema = schemathesis.openapi.from_asgi(
        "/openapi.json", ingress, config=config(seat_token(redis_client, SEAT))
    )
    failures: list[str] = []
    tested: set[str] = set()
    phases: dict[PhaseName, Status] = {}
    finished: events.EngineFinished | None = None
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            failures += failed_checks(event)
            if event.phase is PhaseName.FUZZING and event.status is not Status.SKIP:
                tested.add(event.recorder.label)
        elif isinstance(event, events.NonFatalError):
            failures.append(f"error in {event.label}: {event.info.message}")
        elif isinstance(event, events.FatalError):
            failures.append(f"fatal: {event.exception!r}")
        elif isinstance(event, events.PhaseFinished):
            phases[event.phase.name] = event.status
        elif isinstance(event, events.EngineFinished):
            finished = event
    assert finished is not None and finished.stop_reason is StopReason.COMPLETED
    failures += [f"after the run: {f.title}: {f.message}" for f in finished.failures]
    assert not failures, "\n\n".join(failures)
    operations = {f"{m.upper()} {p}" for p, ms in ingress.openapi()["paths"].items() for m in ms}
    assert tested == operations
    assert phases[PhaseName.STATEFUL_TESTING] is Status.SUCCESS
    assert phases[PhaseName.COVERAGE] is Status.SUCCESS


def failed_checks(event: events.ScenarioFinished) -> list[str]:
    """Each failed check of a scenario: which, on what request, answered how."""
    found = []
    for case_id, checks in event.recorder.checks.items():
        for check in checks:
            if check.failure_info is None:
                continue
            case = event.recorder.cases[case_id].value
            interaction = event.recorder.interactions.get(case_id)
            answer = (
                ""
                if interaction is None or interaction.response is None
                else (
                    f" -> {interaction.response.status_code} {interaction.response.content[:300]!r}"
                )
            )
            failure = check.failure_info.failure
            found.append(
                f"[{event.phase.value}] {check.name}: {failure.title}: {failure.message}\n"
                f"  {case.method} {case.formatted_path} query={case.query} "
                f"body={str(case.body)[:300]}{answer}"
            )
    return found
