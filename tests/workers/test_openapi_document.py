"""The ingress's OpenAPI document is one a client can be generated from (issue 15 point 4):
each `/v1` write says its body, every operation its 2xx body, each `/v1` route its bearer
scheme, every refusal is the one `Problem` (a parameter's 422 too, on the wire as in the
document), and `/metrics` is text behind the operator's token."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pipeline.signatures import github_headers, slack_headers
from tests.auth import SEAT_ROUTE
from workers import bootstrap
from workers.celery_app import create_app
from workers.ingress.app import create_ingress
from workers.settings import Settings

TOKEN = "test-token"
SLACK_SECRET = "test-slack-signing-secret"
GITHUB_SECRET = "test-github-webhook-secret"
NOW_MS = 1_718_049_600_000  # the provider fixtures' own day
FIXTURES = Path(__file__).resolve().parent.parent / "pipeline" / "fixtures"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PROBLEM = {"$ref": "#/components/schemas/Problem"}
# The `/v1` writes that read no body: their path and query say everything.
NO_BODY = {
    "/v1/seats/{seat}/backlog/{item}/done",
    "/v1/seats/{seat}/claims/{item}",
    "/v1/seats/{seat}/pause",
    "/v1/seats/{seat}/resume",
    "/v1/seats/{seat}/run-now",
}


@pytest.fixture
def ingress(redis_url: str, tmp_path: Any) -> FastAPI:
    settings = Settings(redis_url=redis_url, api_token=TOKEN, outbox_path=tmp_path / "o.jsonl")
    celery = create_app(settings, register=False)
    return create_ingress(bootstrap.build_container(settings, app=celery), celery)


@pytest.fixture
def document(ingress: FastAPI) -> dict[str, Any]:
    return ingress.openapi()


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            yield path, method, operation


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    found: dict[str, Any] = document["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return found


def test_every_v1_write_documents_the_body_it_reads(document: dict[str, Any]) -> None:
    """Each `/v1` POST that reads a body has a JSON requestBody naming a schema in the
    components; the ones that read none have none."""
    posts = [(p, o) for p, m, o in operations(document) if m == "post" and p.startswith("/v1/")]
    assert len(posts) >= 20
    for path, operation in posts:
        if path in NO_BODY:
            assert "requestBody" not in operation, path
            continue
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        assert resolve(document, schema).get("type") == "object", path


def test_every_operation_documents_its_success_body(document: dict[str, Any]) -> None:
    """Every operation's every 2xx has a body schema with properties (or is /metrics' text, or
    the empty 200 that acknowledges a Slack interaction, as Slack expects it)."""
    for path, method, operation in operations(document):
        successes = {s: r for s, r in operation["responses"].items() if s.startswith("2")}
        assert successes, (method, path)
        for status, response in successes.items():
            if path == "/webhooks/slack/interactions":
                assert "content" not in response and "empty" in response["description"]
                continue
            content = response["content"]
            if path == "/metrics":
                assert content == {"text/plain": {"schema": {"type": "string"}}}
                continue
            schema = content["application/json"]["schema"]
            options = schema.get("anyOf", [schema])
            for option in options:
                found = resolve(document, option)
                assert found.get("properties") or path.endswith("/tools/{name}"), (path, status)


def test_the_tools_route_answers_the_open_tool_result(document: dict[str, Any]) -> None:
    """A tool's result is an object whose members are the tool's (no two tools share one)."""
    answer = document["paths"]["/v1/seats/{seat}/tools/{name}"]["post"]["responses"]["200"]
    tool = resolve(document, answer["content"]["application/json"]["schema"])
    assert tool["type"] == "object" and tool["additionalProperties"] is True


# The routes that also take an answer link (`?token=`) instead of the operator's token: the
# answer route, and revoking the consent an ask's approval gave.
ANSWER = "/v1/asks/{ask_id}/answer"
LINKED = frozenset({ANSWER, "/v1/consents/{consent_id}/revoke"})


def test_each_v1_route_takes_the_bearer_token_of_its_role(document: dict[str, Any]) -> None:
    """Three bearer schemes, the seat's on a seat's own routes, Alertmanager's on the alerts
    route and the operator's on the rest and on /metrics; the other operational routes and
    the provider routes take none. The answer route (its GET and its POST) and the consent's
    revoke route take the operator's token or an answer link (a query parameter)."""
    schemes = document["components"]["securitySchemes"]
    link = schemes.pop("answerLink")
    assert (link["type"], link["in"], link["name"]) == ("apiKey", "query", "token")
    assert {n: (s["type"], s["scheme"]) for n, s in schemes.items()} == {
        "operatorToken": ("http", "bearer"),
        "seatToken": ("http", "bearer"),
        "alertsToken": ("http", "bearer"),
    }
    for path, method, operation in operations(document):
        if path == "/v1/alerts/alertmanager":  # Alertmanager's webhook: its own token only
            assert operation["security"] == [{"alertsToken": []}], method
            continue
        if path in LINKED:
            assert operation["security"] == [{"operatorToken": []}, {"answerLink": []}], method
            continue
        if path == "/metrics":
            assert operation["security"] == [{"operatorToken": []}], path
            continue
        if not path.startswith("/v1/"):
            assert operation.get("security", []) == [], path
            continue
        expected = "seatToken" if SEAT_ROUTE.match(path) else "operatorToken"
        if re.fullmatch(r"/v1/seats/\{seat\}/(status|pause|resume|run-now)", path):
            expected = "operatorToken"  # an operator's control of a seat
        assert operation["security"] == [{expected: []}], (method, path)


def test_every_refusal_is_the_one_problem(document: dict[str, Any]) -> None:
    """Every 4xx and 5xx body is `Problem` (readyz's 503 is its readiness report), FastAPI's
    own 422 shape is nowhere, and 401, 429 and 503 document their headers."""
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    for path, _, operation in operations(document):
        for status, response in operation["responses"].items():
            if status.startswith("2") or (path, status) == ("/readyz", "503"):
                continue
            assert response["content"]["application/json"]["schema"] == PROBLEM, (path, status)
            header = {"401": "WWW-Authenticate", "429": "Retry-After", "503": "Retry-After"}
            if status in header:
                assert response["headers"][header[status]]["required"] is True
    assert "/mcp" not in document["paths"]


def test_a_wrong_parameter_is_the_same_422_as_a_wrong_field(ingress: FastAPI) -> None:
    """A limit out of range is a Problem naming the parameter, as a body's field would be."""
    with TestClient(ingress) as client:
        resp = client.get("/v1/ledger", params={"limit": 0}, headers=AUTH)
    assert resp.status_code == 422
    body = resp.json()
    assert body["error"] == "invalid_parameter" and body["message"].startswith("limit: ")
    assert [(d["field"], d["type"]) for d in body["detail"]] == [("limit", "greater_than_equal")]


def test_a_method_the_path_does_not_take_is_405_naming_every_one_it_does(
    ingress: FastAPI,
) -> None:
    """A path served by two routes answers 405 with both methods in Allow, as a Problem."""
    with TestClient(ingress) as client:
        resp = client.put("/v1/objectives/review-turnaround/samples", headers=AUTH)
        missing = client.get("/v1/nothing-here", headers=AUTH)
    assert resp.status_code == 405 and resp.json()["error"] == "method_not_allowed"
    assert resp.headers["allow"] == "GET, POST"
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"


def test_metrics_answers_text(ingress: FastAPI, redis_client: redis.Redis) -> None:
    """/metrics is Prometheus text, as documented, and its refusal the one `Problem`."""
    with TestClient(ingress) as client:
        resp = client.get("/metrics", headers=AUTH)
        refused = client.get("/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"


def test_signed_provider_deliveries_answer_as_documented(
    redis_client: redis.Redis, redis_url: str, tmp_path: Any
) -> None:
    """What schemathesis cannot sign: each kind of 200 a provider route answers (accepted,
    duplicate, skipped, a handshake) is what the document says it is."""
    settings = Settings(
        redis_url=redis_url,
        api_token=TOKEN,
        outbox_path=tmp_path / "o.jsonl",
        slack_signing_secret=SLACK_SECRET,
        github_webhook_secret=GITHUB_SECRET,
    )
    celery = create_app(settings, register=False)
    app = create_ingress(
        bootstrap.build_container(settings, app=celery), celery, clock_ms=lambda: NOW_MS
    )
    schema = schemathesis.openapi.from_dict(app.openapi())
    slack = [
        (FIXTURES / "slack" / f"{name}.json").read_bytes()
        for name in ("url_verification", "app_mention", "app_mention", "reaction_added")
    ]
    slack.append((FIXTURES / "slack" / "app_rate_limited.json").read_bytes())
    github = [
        ("ping", (FIXTURES / "github" / "ping.json").read_bytes()),
        ("issues", (FIXTURES / "github" / "issues_opened.json").read_bytes()),
    ]
    statuses = []
    with TestClient(app) as client:
        for body in slack:
            headers = slack_headers(body, secret=SLACK_SECRET, now_s=NOW_MS // 1000)
            resp = client.post("/webhooks/slack", content=body, headers=headers)
            schema["/webhooks/slack"]["POST"].validate_response(resp)
            statuses.append(resp.json().get("status", "challenge"))
        for event, body in github:
            headers = github_headers(body, secret=GITHUB_SECRET, event=event, delivery_id=event)
            resp = client.post("/webhooks/github", content=body, headers=headers)
            schema["/webhooks/github"]["POST"].validate_response(resp)
            statuses.append(resp.json()["status"])
    assert statuses == [
        "challenge",
        "accepted",
        "duplicate",
        "skipped",
        "noted",
        "pong",
        "accepted",
    ]
