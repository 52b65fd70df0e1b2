"""The inbound routes against a real Redis (stores and broker): Slack's Events API, GitHub
webhooks and generic `Candidate`s. A signed event is journalled once and queued for
directedness before its 2xx; every repeat is the same entry counted again; an event that
addresses nobody is journalled as skipped; a refusal (4xx), whatever the input, journals and
queues nothing."""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode

import pytest
import redis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from contracts import Candidate
from pipeline.signatures import github_headers, slack_headers
from tests.pipeline.strategies import JSON
from workers import bootstrap
from workers.celery_app import create_app
from workers.ingress.app import create_ingress
from workers.ingress.github import GITHUB_EVENTS
from workers.queues import Queue, Task, task_id
from workers.settings import Settings
from workers.stores import keys
from workers.stores.inbound import inbound_tracking_id

if TYPE_CHECKING:
    import httpx2  # what Starlette's TestClient is built on (for the annotations only)

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SLACK_SECRET = "test-slack-signing-secret"
GITHUB_SECRET = "test-github-webhook-secret"
NOW_MS = 1_718_049_600_000  # the fixtures' own day; the ingress clock is fixed to it
NOW_S = NOW_MS // 1000
CAP = 1_048_576  # max_body_bytes, pinned so the environment cannot move the boundary
FIXTURES = Path(__file__).resolve().parent.parent / "pipeline" / "fixtures"
DIRECTEDNESS = Queue.DIRECTEDNESS.value
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"

Headers = list[tuple[str, str]]


def fixture(provider: str, name: str) -> bytes:
    return (FIXTURES / provider / f"{name}.json").read_bytes()


MENTION = fixture("slack", "app_mention")
MESSAGE_TWIN = fixture("slack", "message_channel_mention")  # same channel and ts as MENTION
MENTION_DELIVERY = "slack:T0ACME0001:C0ENG00001:1718049600.123456"
CHANNEL_JOIN = fixture("slack", "message_channel_join")
ASSIGNED = fixture("github", "issues_assigned")
OPENED = fixture("github", "issues_opened")
# An event's own identity: repository/number/event.action/object id/whom@its timestamp.
ASSIGNED_DELIVERY = (
    "github:acme/billing-api/42/issues.assigned/2000000042/1003@2024-06-10T09:30:00Z"
)
CANDIDATE: dict[str, Any] = {
    "family": "messaging",
    "source": "intercom",
    "deliveryId": "intercom:conv-1:part-7",
    "ids": {"channelId": "conv-1", "messageId": "part-7"},
    "msg": {"authorId": "U0AVA", "body": "<@U0SCOUT> can you look?", "mentions": ["U0SCOUT"]},
    "atMs": NOW_MS,
}


# ------------------------------------------------------------------------------- requests


def slack_signature(body: bytes, stamp: str, secret: str = SLACK_SECRET) -> str:
    """X-Slack-Signature for `body` under any timestamp text, numeric or not."""
    base = b"v0:" + stamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def github_signature(body: bytes, secret: str = GITHUB_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signed_slack(
    body: bytes, *, stamp: str = str(NOW_S), content_type: str | None = JSON_TYPE
) -> Headers:
    """The headers Slack sends with `body`, signed for the given timestamp (by
    `slack_headers`; by hand for a timestamp that is not whole seconds)."""
    if stamp.isdigit():
        headers = without(
            list(slack_headers(body, secret=SLACK_SECRET, now_s=int(stamp)).items()),
            "Content-Type",
        )
    else:
        headers = [
            ("X-Slack-Request-Timestamp", stamp),
            ("X-Slack-Signature", slack_signature(body, stamp)),
        ]
    return headers + ([("Content-Type", content_type)] if content_type else [])


def signed_github(
    body: bytes,
    *,
    event: str = "issues",
    delivery: str = "d-0001",
    content_type: str | None = JSON_TYPE,
) -> Headers:
    """The headers GitHub sends with `body` for one delivery of `event`, validly signed."""
    signed = github_headers(body, secret=GITHUB_SECRET, event=event, delivery_id=delivery)
    headers = without(list(signed.items()), "Content-Type")
    return headers + ([("Content-Type", content_type)] if content_type else [])


def without(headers: Headers, name: str) -> Headers:
    return [(k, v) for k, v in headers if k.lower() != name.lower()]


def replaced(headers: Headers, name: str, value: str) -> Headers:
    return [*without(headers, name), (name, value)]


def edited(raw: bytes, **changes: Any) -> bytes:
    """A fixture with top-level fields set (or removed, for the value `...`)."""
    doc = json.loads(raw)
    for field, value in changes.items():
        if value is ...:
            doc.pop(field, None)
        else:
            doc[field] = value
    return json.dumps(doc).encode()


def form(payload: bytes, *extra: tuple[str, str]) -> bytes:
    return urlencode([("payload", payload.decode()), *extra]).encode()


# -------------------------------------------------------------------------- what was written


def written(r: redis.Redis) -> list[bytes]:
    """Every key in the test database: after a refusal there must be none at all."""
    return sorted(r.scan_iter(count=1000))


def entries(r: redis.Redis) -> dict[str, dict[str, str]]:
    """Inbound journal entries (the hashes `sw:j:ev-*`) by tracking id."""
    found = {}
    for key in r.scan_iter(match=keys.journal("ev-*")):
        name = key.decode()
        if not name.endswith(":seats"):
            fields = cast("dict[bytes, bytes]", r.hgetall(key))  # no decode_responses
            found[name.removeprefix(keys.journal(""))] = {
                k.decode(): v.decode() for k, v in fields.items()
            }
    return found


def queued(r: redis.Redis) -> list[dict[str, Any]]:
    """The directedness tasks waiting on the broker: their task id and the envelope they carry."""
    tasks = []
    for raw in r.lrange(DIRECTEDNESS, 0, -1):
        message = json.loads(raw)
        body = message["body"]  # base64 from Celery's publish, plain from the one-script intake
        if message["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args, _kwargs, _embed = json.loads(body)
        tasks.append(
            {"id": message["headers"]["id"], "task": message["headers"]["task"], "env": args[0]}
        )
    return tasks


def snapshot(r: redis.Redis) -> dict[bytes, Any]:
    """The content of every key, by type: equal snapshots mean nothing was written."""
    names = written(r)
    pipe = r.pipeline(transaction=False)
    for name in names:
        pipe.type(name)
    types = pipe.execute()
    readers: dict[bytes, Callable[[bytes], object]] = {
        b"hash": pipe.hgetall,
        b"list": lambda k: pipe.lrange(k, 0, -1),
        b"zset": lambda k: pipe.zrange(k, 0, -1, withscores=True),
        b"set": pipe.smembers,
        b"string": pipe.get,
        b"none": pipe.exists,
    }
    for name, kind in zip(names, types, strict=True):
        readers[kind](name)
    return dict(zip(names, pipe.execute(), strict=True))


def assert_refused(resp: httpx2.Response, status: int, error: str) -> None:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["error"] == error, body
    assert isinstance(body["message"], str) and body["message"].strip()


# ---------------------------------------------------------------------------------- clients


def _settings(url: str, tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(
        **{
            "redis_url": url,
            "api_token": TOKEN,
            "slack_signing_secret": SLACK_SECRET,
            "github_webhook_secret": GITHUB_SECRET,
            "outbox_path": tmp_path / "outbox.jsonl",
            "max_body_bytes": CAP,
            **overrides,
        }
    )


def _client(settings: Settings) -> TestClient:
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    return TestClient(create_ingress(container, app, clock_ms=lambda: NOW_MS))


@pytest.fixture
def client(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    with _client(_settings(redis_url, tmp_path)) as c:
        yield c


def post_slack(client: TestClient, body: bytes, headers: Headers | None = None) -> httpx2.Response:
    return client.post("/webhooks/slack", content=body, headers=headers or signed_slack(body))


def post_github(client: TestClient, body: bytes, headers: Headers) -> httpx2.Response:
    return client.post("/webhooks/github", content=body, headers=headers)


def post_concurrently(
    client: TestClient, path: str, deliveries: list[tuple[bytes, Headers]]
) -> list[httpx2.Response]:
    """Send every delivery from its own thread, all released at once."""
    start = threading.Barrier(len(deliveries))
    answers: list[httpx2.Response | None] = [None] * len(deliveries)

    def send(n: int) -> None:
        body, headers = deliveries[n]
        start.wait()
        answers[n] = client.post(path, content=body, headers=headers)

    threads = [threading.Thread(target=send, args=(n,)) for n in range(len(deliveries))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert all(a is not None for a in answers), "a delivery never came back"
    return [a for a in answers if a is not None]


# ---------------------------------------------------------------------------- Slack: accepted


def test_signed_slack_event_is_journalled_and_queued_once(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """A signed app_mention is 200 accepted, one inbound entry, one directedness task."""
    resp = post_slack(client, MENTION)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    tracking = inbound_tracking_id(MENTION_DELIVERY)
    assert (body["status"], body["deliveryId"], body["trackingId"]) == (
        "accepted",
        MENTION_DELIVERY,
        tracking,
    )
    entry = entries(redis_client)
    assert list(entry) == [tracking]
    assert entry[tracking]["state"] == "accepted" and entry[tracking]["kind"] == "inbound"
    assert entry[tracking]["deliveries"] == "1" and entry[tracking]["enqueuedAtMs"]
    [task] = queued(redis_client)
    assert task["id"] == task_id(tracking, Queue.DIRECTEDNESS)
    assert task["task"] == Task.DIRECTEDNESS.value
    assert task["env"]["candidate"]["deliveryId"] == MENTION_DELIVERY


def test_url_verification_answers_the_challenge_and_writes_nothing(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """Slack's url_verification gets its challenge back; nothing is journalled or queued."""
    raw = fixture("slack", "url_verification")
    resp = post_slack(client, raw)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"challenge": json.loads(raw)["challenge"]}
    assert written(redis_client) == []


def test_app_rate_limited_is_noted_and_writes_nothing(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """Slack's app_rate_limited notice is acknowledged (200 noted) and writes nothing."""
    resp = post_slack(client, fixture("slack", "app_rate_limited"))
    assert resp.status_code == 200 and resp.json()["status"] == "noted"
    assert written(redis_client) == []


@pytest.mark.parametrize("skew_s", [-300, 300], ids=["past", "future"])
def test_timestamp_five_minutes_away_is_still_accepted(
    client: TestClient, redis_client: redis.Redis, skew_s: int
) -> None:
    """A timestamp exactly 5 minutes from now, either way, is inside Slack's tolerance."""
    resp = post_slack(client, MENTION, signed_slack(MENTION, stamp=str(NOW_S + skew_s)))
    assert resp.status_code == 200 and resp.json()["status"] == "accepted"
    assert len(queued(redis_client)) == 1


def test_slack_retries_are_one_entry_counted_four_times(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """The original and three retries (X-Slack-Retry-Num, sent at once from threads) make one
    entry with deliveries 4; every retry answers duplicate and one task is queued."""
    first = post_slack(client, MENTION)
    assert first.json()["status"] == "accepted"
    retries = [
        (
            MENTION,
            [
                *signed_slack(MENTION),
                ("X-Slack-Retry-Num", str(n)),
                ("X-Slack-Retry-Reason", "http_timeout"),
            ],
        )
        for n in (1, 2, 3)
    ]
    answers = post_concurrently(client, "/webhooks/slack", retries)
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert [a.json()["status"] for a in answers] == ["duplicate"] * 3
    entry = entries(redis_client)
    assert list(entry) == [first.json()["trackingId"]]
    assert entry[first.json()["trackingId"]]["deliveries"] == "4"
    assert len(queued(redis_client)) == 1


def test_simultaneous_first_deliveries_are_one_entry(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """Four copies of one event arriving at once: exactly one is accepted, one entry counts 4
    deliveries, and whatever was queued is the same deterministic task (a copy that found the
    entry not yet enqueued may publish it too; the directedness stage records an event once)."""
    answers = post_concurrently(client, "/webhooks/slack", [(MENTION, signed_slack(MENTION))] * 4)
    assert sorted(a.json()["status"] for a in answers) == ["accepted"] + ["duplicate"] * 3
    tracking = inbound_tracking_id(MENTION_DELIVERY)
    entry = entries(redis_client)
    assert list(entry) == [tracking] and entry[tracking]["deliveries"] == "4"
    tasks = queued(redis_client)
    assert 1 <= len(tasks) <= 4
    assert {t["id"] for t in tasks} == {task_id(tracking, Queue.DIRECTEDNESS)}


def test_app_mention_and_its_message_twin_are_one_entry(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """Slack's message and app_mention events for one user message are one entry, one task."""
    first = post_slack(client, MESSAGE_TWIN)
    twin = post_slack(client, MENTION)
    assert (first.json()["status"], twin.json()["status"]) == ("accepted", "duplicate")
    assert first.json()["trackingId"] == twin.json()["trackingId"]
    entry = entries(redis_client)
    assert list(entry) == [first.json()["trackingId"]]
    assert entry[first.json()["trackingId"]]["deliveries"] == "2"
    assert len(queued(redis_client)) == 1


# ---------------------------------------------------------------------------- Slack: refused

OTHER_SIGNATURE = slack_signature(MENTION, str(NOW_S), secret="someone-elses-secret")
SURROGATE = rb'{"type": "url_verification", "challenge": "\ud800"}'
HUGE_INTEGER = b'{"type": "event_callback", "event_time": ' + b"7" * 5000 + b"}"
SIG, STAMP = "X-Slack-Signature", "X-Slack-Request-Timestamp"
SIGNED = signed_slack(MENTION)
REACTION = fixture("slack", "reaction_added")
CLOSED = edited(OPENED, action="closed")


def slack(body: bytes, **how: Any) -> tuple[bytes, Headers]:
    return body, signed_slack(body, **how)


# case -> (status, error, body, headers); every body is validly signed unless the signature
# or its timestamp is what is wrong.
SLACK_REFUSALS: dict[str, tuple[int, str, bytes, Headers]] = {
    "bad-signature": (401, "bad_signature", MENTION, replaced(SIGNED, SIG, OTHER_SIGNATURE)),
    "signature-of-another-body": (
        401,
        "bad_signature",
        MENTION,
        replaced(SIGNED, SIG, slack_signature(b"{}", str(NOW_S))),
    ),
    "signature-not-hex": (401, "bad_signature", MENTION, replaced(SIGNED, SIG, "v0=nope")),
    "signature-v1": (
        401,
        "bad_signature",
        MENTION,
        replaced(SIGNED, SIG, slack_signature(MENTION, str(NOW_S)).replace("v0=", "v1=")),
    ),
    "missing-signature": (401, "missing_signature", MENTION, without(SIGNED, SIG)),
    "missing-timestamp": (401, "missing_signature", MENTION, without(SIGNED, STAMP)),
    "signature-twice-differing": (
        401,
        "missing_signature",
        MENTION,
        [*SIGNED, (SIG, OTHER_SIGNATURE)],
    ),
    "timestamp-twice-differing": (
        401,
        "missing_signature",
        MENTION,
        [*SIGNED, (STAMP, str(NOW_S - 1))],
    ),
    "stale-past": (401, "stale_timestamp", *slack(MENTION, stamp=str(NOW_S - 301))),
    "stale-future": (401, "stale_timestamp", *slack(MENTION, stamp=str(NOW_S + 301))),
    "epoch-zero": (401, "stale_timestamp", *slack(MENTION, stamp="0")),
    "non-numeric-timestamp": (401, "bad_timestamp", *slack(MENTION, stamp="yesterday")),
    "fractional-timestamp": (401, "bad_timestamp", *slack(MENTION, stamp=f"{NOW_S}.5")),
    "negative-timestamp": (401, "bad_timestamp", *slack(MENTION, stamp=f"-{NOW_S}")),
    "empty-timestamp": (401, "bad_timestamp", *slack(MENTION, stamp="")),
    "malformed-json": (400, "invalid_json", *slack(b'{"type": "event_callback", ')),
    "not-utf8": (400, "invalid_json", *slack(b'{"type": "\xff"}')),
    "json-array": (400, "invalid_json", *slack(b"[1, 2]")),
    "json-string": (400, "invalid_json", *slack(b'"event_callback"')),
    "json-null": (400, "invalid_json", *slack(b"null")),
    "empty-body": (400, "invalid_json", *slack(b"")),
    "deeply-nested": (400, "invalid_json", *slack(b"[" * 100_000)),
    "lone-surrogate": (400, "invalid_json", *slack(SURROGATE)),
    "huge-integer": (400, "invalid_json", *slack(HUGE_INTEGER)),
    "unknown-envelope": (400, "unknown_envelope", *slack(b'{"type": "block_actions"}')),
    "no-envelope-type": (400, "unknown_envelope", *slack(b"{}")),
    "no-challenge": (400, "invalid_event", *slack(b'{"type": "url_verification"}')),
    "event-id-too-long": (400, "invalid_event", *slack(edited(MENTION, event_id="E" * 121))),
    "event-id-not-a-string": (400, "invalid_event", *slack(edited(MENTION, event_id=7))),
    "form-content-type": (415, "unsupported_media_type", *slack(MENTION, content_type=FORM_TYPE)),
    "text-content-type": (
        415,
        "unsupported_media_type",
        *slack(MENTION, content_type="text/plain"),
    ),
    "no-content-type": (415, "unsupported_media_type", *slack(MENTION, content_type=None)),
}


@pytest.mark.parametrize(
    ("status", "error", "body", "headers"),
    [pytest.param(*case, id=name) for name, case in SLACK_REFUSALS.items()],
)
def test_bad_slack_request_is_refused_and_writes_nothing(
    client: TestClient,
    redis_client: redis.Redis,
    status: int,
    error: str,
    body: bytes,
    headers: Headers,
) -> None:
    """Each bad Slack request gets its 4xx, an error code and a message, and nothing at all is
    journalled or queued (the bodies are validly signed unless the signature is the fault).
    Every refusal tells Slack not to retry it (X-Slack-No-Retry)."""
    resp = client.post("/webhooks/slack", content=body, headers=headers)
    assert_refused(resp, status, error)
    assert resp.headers["X-Slack-No-Retry"] == "1"
    assert written(redis_client) == []


# --------------------------------------------------------------------------- GitHub: accepted


def test_signed_github_event_is_journalled_and_queued_once(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """A signed issues.assigned is 200 accepted, one entry and one task, keyed by the event's
    own identity; its redelivery (the same X-GitHub-Delivery) is a duplicate that queues
    nothing new."""
    resp = post_github(client, ASSIGNED, signed_github(ASSIGNED, delivery="guid-1"))
    assert resp.status_code == 200, resp.text
    assert resp.json()["status"] == "accepted"
    tracking = inbound_tracking_id(ASSIGNED_DELIVERY)
    assert (resp.json()["trackingId"], resp.json()["deliveryId"]) == (tracking, ASSIGNED_DELIVERY)
    again = post_github(client, ASSIGNED, signed_github(ASSIGNED, delivery="guid-1"))
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    entry = entries(redis_client)
    assert list(entry) == [tracking]
    assert (entry[tracking]["state"], entry[tracking]["deliveries"]) == ("accepted", "2")
    [task] = queued(redis_client)
    assert task["id"] == task_id(tracking, Queue.DIRECTEDNESS)
    assert task["env"]["candidate"]["deliveryId"] == ASSIGNED_DELIVERY
    assert task["env"]["candidate"]["ids"]["eventId"] == "guid-1"


def test_one_github_event_through_two_hooks_is_one_delivery(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """The repository's hook and the organisation's hook deliver one event with two
    X-GitHub-Delivery ids (the second body also names the organisation): one entry, one
    task, the second answered duplicate."""
    org_hook = edited(ASSIGNED, organization={"login": "acme", "id": 9})
    first = post_github(client, ASSIGNED, signed_github(ASSIGNED, delivery="guid-repo-hook"))
    second = post_github(client, org_hook, signed_github(org_hook, delivery="guid-org-hook"))
    assert [first.json()["status"], second.json()["status"]] == ["accepted", "duplicate"]
    assert first.json()["deliveryId"] == second.json()["deliveryId"] == ASSIGNED_DELIVERY
    assert len(queued(redis_client)) == 1
    assert entries(redis_client)[inbound_tracking_id(ASSIGNED_DELIVERY)]["deliveries"] == "2"


def test_a_later_change_to_the_same_item_is_a_delivery_of_its_own(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """Another assignment of the same issue (its own timestamp) is not taken for a repeat."""
    later = json.loads(ASSIGNED)
    later["issue"]["updated_at"] = "2024-06-10T10:00:00Z"
    body = json.dumps(later).encode()
    post_github(client, ASSIGNED, signed_github(ASSIGNED, delivery="guid-a"))
    resp = post_github(client, body, signed_github(body, delivery="guid-b"))
    assert resp.json()["status"] == "accepted"
    assert len(queued(redis_client)) == 2


def test_form_encoded_github_payload_is_accepted(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """A hook configured for form content (`payload=<json>`) is read like a JSON one."""
    body = form(ASSIGNED)
    resp = post_github(
        client, body, signed_github(body, delivery="guid-form", content_type=FORM_TYPE)
    )
    assert resp.status_code == 200 and resp.json()["status"] == "accepted", resp.text
    assert [t["env"]["candidate"]["deliveryId"] for t in queued(redis_client)] == [
        ASSIGNED_DELIVERY
    ]


# ---------------------------------------------------------------------------- GitHub: refused

HUB = "X-Hub-Signature-256"
SIGNED_GH = signed_github(ASSIGNED)
SHA1 = "sha1=" + hmac.new(GITHUB_SECRET.encode(), ASSIGNED, "sha1").hexdigest()
UPPER = "sha256=" + github_signature(ASSIGNED).removeprefix("sha256=").upper()
NO_NUMBER = json.dumps({**json.loads(ASSIGNED), "issue": {"title": "no number"}}).encode()
GH_SURROGATE = rb'{"action": "\ud800"}'
GH_HUGE = b'{"action": "assigned", "number": ' + b"9" * 5000 + b"}"


def github(body: bytes, **how: Any) -> tuple[bytes, Headers]:
    return body, signed_github(body, **how)


def github_form(body: bytes) -> tuple[bytes, Headers]:
    return body, signed_github(body, content_type=FORM_TYPE)


# case -> (status, error, body, headers); every body is validly signed unless the signature
# is what is wrong.
GITHUB_REFUSALS: dict[str, tuple[int, str, bytes, Headers]] = {
    "bad-signature": (
        401,
        "bad_signature",
        ASSIGNED,
        replaced(SIGNED_GH, HUB, github_signature(ASSIGNED, secret="someone-elses-secret")),
    ),
    "signature-uppercase-hex": (401, "bad_signature", ASSIGNED, replaced(SIGNED_GH, HUB, UPPER)),
    "signature-not-hex": (401, "bad_signature", ASSIGNED, replaced(SIGNED_GH, HUB, "sha256=zz")),
    "missing-signature": (401, "missing_signature", ASSIGNED, without(SIGNED_GH, HUB)),
    "sha1-signature-only": (
        401,
        "missing_signature",
        ASSIGNED,
        [*without(SIGNED_GH, HUB), ("X-Hub-Signature", SHA1)],
    ),
    "signature-twice-differing": (
        401,
        "missing_signature",
        ASSIGNED,
        [*SIGNED_GH, (HUB, github_signature(b"{}"))],
    ),
    "malformed-json": (400, "invalid_json", *github(b'{"action": ')),
    "json-array": (400, "invalid_json", *github(b"[]")),
    "json-number": (400, "invalid_json", *github(b"42")),
    "lone-surrogate": (400, "invalid_json", *github(GH_SURROGATE)),
    "huge-integer": (400, "invalid_json", *github(GH_HUGE)),
    "missing-event": (400, "missing_header", ASSIGNED, without(SIGNED_GH, "X-GitHub-Event")),
    "blank-event": (400, "missing_header", *github(ASSIGNED, event="   ")),
    "missing-delivery": (400, "missing_header", ASSIGNED, without(SIGNED_GH, "X-GitHub-Delivery")),
    "delivery-too-long": (400, "missing_header", *github(ASSIGNED, delivery="d" * 121)),
    "delivery-not-printable": (400, "missing_header", *github(ASSIGNED, delivery="d\x07")),
    "text-content-type": (
        415,
        "unsupported_media_type",
        *github(ASSIGNED, content_type="text/plain"),
    ),
    "no-content-type": (415, "unsupported_media_type", *github(ASSIGNED, content_type=None)),
    "form-without-payload": (400, "invalid_form", *github_form(b"zen=calm")),
    "form-with-two-payloads": (
        400,
        "invalid_form",
        *github_form(form(ASSIGNED, ("payload", "{}"))),
    ),
    "form-with-many-fields": (
        400,
        "invalid_form",
        *github_form(form(ASSIGNED, *[(f"f{n}", "x") for n in range(12)])),
    ),
    "form-payload-not-json": (400, "invalid_json", *github_form(b"payload=%7Bnope")),
}


@pytest.mark.parametrize(
    ("status", "error", "body", "headers"),
    [pytest.param(*case, id=name) for name, case in GITHUB_REFUSALS.items()],
)
def test_bad_github_request_is_refused_and_writes_nothing(
    client: TestClient,
    redis_client: redis.Redis,
    status: int,
    error: str,
    body: bytes,
    headers: Headers,
) -> None:
    """Each bad GitHub request gets its 4xx, an error code and a message, and nothing at all is
    journalled or queued (the bodies are validly signed unless the signature is the fault)."""
    assert_refused(post_github(client, body, headers), status, error)
    assert written(redis_client) == []


# ----------------------------------------------------------------------------- both: oversize


def _padded(raw: bytes, size: int) -> bytes:
    """`raw` (a JSON object) with trailing whitespace to exactly `size` bytes: still valid."""
    assert len(raw) <= size
    return raw + b" " * (size - len(raw))


def _oversize_request(route: str, body: bytes) -> tuple[str, Headers]:
    if route == "slack":
        return "/webhooks/slack", signed_slack(body)
    return "/webhooks/github", signed_github(body, delivery="guid-big")


@pytest.mark.parametrize("streamed", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize(("route", "raw"), [("slack", MENTION), ("github", ASSIGNED)])
def test_body_over_the_cap_is_413_and_writes_nothing(
    client: TestClient,
    redis_client: redis.Redis,
    route: str,
    raw: bytes,
    streamed: bool,
) -> None:
    """A validly signed body one byte over max_body_bytes is 413, whether its length is
    declared or it is streamed in chunks, and nothing is written."""
    body = _padded(raw, CAP + 1)
    path, headers = _oversize_request(route, body)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    resp = client.post(path, content=chunks() if streamed else body, headers=headers)
    assert_refused(resp, 413, "body_too_large")
    assert written(redis_client) == []


@pytest.mark.parametrize(("route", "raw"), [("slack", MENTION), ("github", ASSIGNED)])
def test_body_of_exactly_the_cap_is_read(
    client: TestClient, redis_client: redis.Redis, route: str, raw: bytes
) -> None:
    """A body of exactly max_body_bytes is not too large: it is accepted and queued."""
    body = _padded(raw, CAP)
    path, headers = _oversize_request(route, body)
    resp = client.post(path, content=body, headers=headers)
    assert resp.status_code == 200 and resp.json()["status"] == "accepted", resp.text
    assert len(queued(redis_client)) == 1


# ------------------------------------------------------------------------------------ skipped


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("message_channel_join", "system_message:channel_join"),
        ("message_deleted", "message_deleted"),
    ],
)
def test_slack_notice_is_skipped_once_and_never_queued(
    client: TestClient, redis_client: redis.Redis, name: str, reason: str
) -> None:
    """A channel join or a deletion is 200 skipped, journalled as skipped with its reason; its
    retry is a duplicate of that entry; no task is ever queued."""
    raw = fixture("slack", name)
    resp = post_slack(client, raw)
    assert resp.status_code == 200, resp.text
    assert (resp.json()["status"], resp.json()["reason"]) == ("skipped", reason)
    retry = post_slack(client, raw, [*signed_slack(raw), ("X-Slack-Retry-Num", "1")])
    assert retry.status_code == 200 and retry.json()["status"] == "duplicate"
    entry = entries(redis_client)
    tracking = resp.json()["trackingId"]
    assert list(entry) == [tracking] and retry.json()["trackingId"] == tracking
    assert (entry[tracking]["state"], entry[tracking]["reason"]) == ("skipped", reason)
    assert entry[tracking]["detail"] and entry[tracking]["deliveries"] == "2"
    assert not redis_client.exists(DIRECTEDNESS)


ASSISTANT_STARTED = json.dumps(
    {
        "type": "event_callback",
        "team_id": "T0ACME0001",
        "event_id": "Ev0ASSIST01",
        "event_time": NOW_S,
        "event": {
            "type": "assistant_thread_started",
            "assistant_thread": {"user_id": "U0AVA", "channel_id": "D0ASSIST1"},
            "event_ts": "1718049600.000100",
        },
    }
).encode()
MEMBER_JOINED = json.dumps(
    {
        "type": "event_callback",
        "team_id": "T0ACME0001",
        "event_id": "Ev0JOINED01",
        "event": {"type": "member_joined_channel", "user": "U0AVA", "channel": "C0ENG00001"},
    }
).encode()


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param(REACTION, "unsupported_event:reaction_added", id="reaction_added"),
        pytest.param(
            ASSISTANT_STARTED,
            "unsupported_event:assistant_thread_started",
            id="assistant_thread_started",
        ),
        pytest.param(
            MEMBER_JOINED, "unsupported_event:member_joined_channel", id="member_joined_channel"
        ),
        pytest.param(edited(MENTION, event=...), "missing_field:event", id="no-event"),
    ],
)
def test_a_signed_slack_event_seatwire_does_not_read_is_200_skipped(
    client: TestClient, redis_client: redis.Redis, body: bytes, reason: str
) -> None:
    """An Events API delivery Seatwire does not read (the types an "Agents & AI Apps" app is
    subscribed to, reactions, joins) is 200 skipped with its reason in the journal and the
    trace, never a 4xx, which Slack counts against the app; nothing is queued."""
    resp = post_slack(client, body)
    assert resp.status_code == 200, resp.text
    assert "X-Slack-No-Retry" not in resp.headers
    assert (resp.json()["status"], resp.json()["reason"]) == ("skipped", reason)
    trace = client.get(f"/v1/trace/{resp.json()['deliveryId']}", headers=AUTH).json()
    assert (trace["state"], trace["reason"], trace["source"]) == ("skipped", reason, "slack")
    assert not redis_client.exists(DIRECTEDNESS)


def test_a_slack_event_without_an_event_id_is_still_read(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """An older delivery without `event_id` is read all the same (its delivery id is the
    message's own); one Seatwire does not read is skipped under a key from its bytes."""
    resp = post_slack(client, edited(MENTION, event_id=...))
    assert (resp.status_code, resp.json()["status"]) == (200, "accepted")
    assert resp.json()["deliveryId"] == MENTION_DELIVERY
    reaction = edited(REACTION, event_id=...)
    skipped = post_slack(client, reaction)
    assert (skipped.status_code, skipped.json()["status"]) == (200, "skipped")
    assert skipped.json()["deliveryId"].startswith("slack-event:body:")
    assert post_slack(client, reaction).json()["status"] == "duplicate"


def test_github_unconsidered_action_is_skipped_once_and_never_queued(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """issues.closed is 200 skipped with its reason and journalled as skipped; the redelivery
    is a duplicate; no task is ever queued."""
    headers = signed_github(CLOSED, delivery="guid-closed")
    resp = post_github(client, CLOSED, headers)
    assert resp.status_code == 200, resp.text
    assert (resp.json()["status"], resp.json()["reason"]) == (
        "skipped",
        "unsupported_event:issues.closed",
    )
    again = post_github(client, CLOSED, headers)
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    tracking = inbound_tracking_id("github:guid-closed")
    entry = entries(redis_client)
    assert list(entry) == [tracking]
    assert entry[tracking]["state"] == "skipped"
    assert entry[tracking]["reason"] == "unsupported_event:issues.closed"
    assert not redis_client.exists(DIRECTEDNESS)


@pytest.mark.parametrize(
    ("body", "event", "reason"),
    [
        pytest.param(ASSIGNED, "star", "unsupported_event:star.assigned", id="star"),
        pytest.param(b'{"ref": "refs/heads/main"}', "push", "unsupported_event:push", id="push"),
        pytest.param(
            b'{"action": "completed"}',
            "workflow_run",
            "unsupported_event:workflow_run.completed",
            id="workflow_run",
        ),
        pytest.param(
            edited(ASSIGNED, repository=...),
            "issues",
            "missing_field:repository.full_name",
            id="no-repository",
        ),
        pytest.param(NO_NUMBER, "issues", "missing_field:issue.number", id="no-issue-number"),
    ],
)
def test_a_signed_github_event_seatwire_does_not_read_is_200_skipped(
    client: TestClient, redis_client: redis.Redis, body: bytes, event: str, reason: str
) -> None:
    """Any event or action Seatwire does not read, or one without what it would read, is a
    signed delivery: 200 skipped with the reason, journalled, never a 4xx, never queued."""
    resp = post_github(client, body, signed_github(body, event=event, delivery="guid-x"))
    assert resp.status_code == 200, resp.text
    assert (resp.json()["status"], resp.json()["reason"]) == ("skipped", reason)
    trace = client.get("/v1/trace/github:guid-x", headers=AUTH).json()
    assert (trace["state"], trace["reason"]) == ("skipped", reason)
    assert not redis_client.exists(DIRECTEDNESS)


def test_github_ping_is_pong_and_writes_nothing(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """GitHub's ping is answered 200 pong and leaves no journal entry and no task."""
    raw = fixture("github", "ping")
    resp = post_github(client, raw, signed_github(raw, event="ping", delivery="guid-ping"))
    assert resp.status_code == 200 and resp.json()["status"] == "pong", resp.text
    assert written(redis_client) == []


# ------------------------------------------------------------------------------ unconfigured


@pytest.mark.parametrize(
    ("path", "body", "headers", "error"),
    [
        ("/webhooks/slack", MENTION, signed_slack(MENTION), "slack_not_configured"),
        ("/webhooks/github", ASSIGNED, signed_github(ASSIGNED), "github_not_configured"),
    ],
    ids=["slack", "github"],
)
def test_provider_without_a_secret_is_404_and_writes_nothing(
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    path: str,
    body: bytes,
    headers: Headers,
    error: str,
) -> None:
    """With a real Redis but no secret for a provider, its route is 404 `<provider>_not_configured`
    and writes nothing, even for a request signed with the secret it would have had."""
    settings = _settings(redis_url, tmp_path, slack_signing_secret=None, github_webhook_secret=None)
    assert settings.slack_secret() is None and settings.github_secret() is None
    with _client(settings) as c:
        assert_refused(c.post(path, content=body, headers=headers), 404, error)
    assert written(redis_client) == []


# --------------------------------------------------------------------------------- /v1/events


def post_candidate(
    client: TestClient, candidate: Any, headers: dict[str, str] | None = None
) -> httpx2.Response:
    return client.post("/v1/events", json=candidate, headers=AUTH if headers is None else headers)


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"Authorization": "Basic x"}],
    ids=["none", "wrong", "no-scheme", "basic"],
)
def test_candidate_without_the_token_is_401(
    client: TestClient, redis_client: redis.Redis, headers: dict[str, str]
) -> None:
    """Without the right bearer token a Candidate is 401 and nothing is written."""
    assert_refused(post_candidate(client, CANDIDATE, headers), 401, "unauthorized")
    assert written(redis_client) == []


def test_candidate_is_accepted_journalled_and_queued(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """A valid Candidate is 202 accepted, one entry (with its fingerprint) and one task."""
    resp = post_candidate(client, CANDIDATE)
    assert resp.status_code == 202, resp.text
    tracking = inbound_tracking_id(CANDIDATE["deliveryId"])
    assert (resp.json()["status"], resp.json()["trackingId"]) == ("accepted", tracking)
    entry = entries(redis_client)
    assert list(entry) == [tracking]
    assert entry[tracking]["state"] == "accepted" and entry[tracking]["fingerprint"]
    [task] = queued(redis_client)
    assert task["id"] == task_id(tracking, Queue.DIRECTEDNESS)
    assert Candidate.model_validate(task["env"]["candidate"]) == Candidate.model_validate(CANDIDATE)


def test_repeated_candidate_is_a_duplicate(client: TestClient, redis_client: redis.Redis) -> None:
    """The same Candidate posted again is 202 duplicate and queues nothing new."""
    post_candidate(client, CANDIDATE)
    again = post_candidate(client, CANDIDATE)
    assert again.status_code == 202 and again.json()["status"] == "duplicate"
    assert len(entries(redis_client)) == 1 and len(queued(redis_client)) == 1


def test_delivery_id_reused_with_other_content_is_409(
    client: TestClient, redis_client: redis.Redis
) -> None:
    """The same deliveryId with different content is 409 delivery_reused: the stored event is
    kept as it was and nothing new is queued."""
    post_candidate(client, CANDIDATE)
    before = entries(redis_client)
    changed = {**CANDIDATE, "msg": {**CANDIDATE["msg"], "body": "never mind"}}
    resp = post_candidate(client, changed)
    assert_refused(resp, 409, "delivery_reused")
    after = entries(redis_client)
    assert list(after) == list(before)
    assert after == before  # deliveries included: a refused delivery is not counted
    [task] = queued(redis_client)
    assert Candidate.model_validate(task["env"]["candidate"]) == Candidate.model_validate(CANDIDATE)


@pytest.mark.parametrize(
    ("candidate", "field"),
    [
        ({**CANDIDATE, "colour": "red"}, "colour"),
        ({k: v for k, v in CANDIDATE.items() if k != "family"}, "family"),
        ({**CANDIDATE, "family": "email"}, "family"),
        ({**CANDIDATE, "deliveryId": ""}, "deliveryId"),
        ({**CANDIDATE, "atMs": -1}, "atMs"),
        ({**CANDIDATE, "msg": {**CANDIDATE["msg"], "colour": "red"}}, "msg.colour"),
        ({**CANDIDATE, "ids": {"channel": "conv-1"}}, "ids.channel"),
        ([CANDIDATE], "(body)"),
    ],
    ids=[
        "unknown-field",
        "no-family",
        "unknown-family",
        "empty-delivery-id",
        "negative-time",
        "nested-unknown-field",
        "misspelt-id",
        "not-an-object",
    ],
)
def test_invalid_candidate_is_422_naming_the_field(
    client: TestClient, redis_client: redis.Redis, candidate: Any, field: str
) -> None:
    """A Candidate that breaks the contract is 422 naming the field, and nothing is written."""
    resp = post_candidate(client, candidate)
    assert_refused(resp, 422, "invalid_candidate")
    assert field in [d["field"] for d in resp.json()["detail"]]
    assert written(redis_client) == []


def test_candidate_that_is_not_json_is_422(client: TestClient, redis_client: redis.Redis) -> None:
    """A body that is not JSON is 422 on the body itself, and nothing is written."""
    resp = client.post("/v1/events", content=b"{nope", headers={**AUTH, "Content-Type": JSON_TYPE})
    assert_refused(resp, 422, "invalid_candidate")
    assert [d["field"] for d in resp.json()["detail"]] == ["(body)"]
    assert written(redis_client) == []


@pytest.mark.parametrize("content_type", [FORM_TYPE, "text/plain", "application/xml"])
def test_candidate_with_another_content_type_is_415(
    client: TestClient, redis_client: redis.Redis, content_type: str
) -> None:
    """A Candidate sent as anything but JSON is 415, and nothing is written."""
    resp = client.post(
        "/v1/events",
        content=json.dumps(CANDIDATE).encode(),
        headers={**AUTH, "Content-Type": content_type},
    )
    assert_refused(resp, 415, "unsupported_media_type")
    assert written(redis_client) == []


# --------------------------------------------------------------------------------- /v1/trace


def test_trace_needs_the_token(client: TestClient) -> None:
    """Reading a trace without the bearer token is 401."""
    assert_refused(client.get(f"/v1/trace/{MENTION_DELIVERY}"), 401, "unauthorized")


def test_trace_of_an_unknown_delivery_is_404(client: TestClient) -> None:
    """A delivery id nothing was received for is 404 unknown_delivery."""
    assert_refused(
        client.get(f"/v1/trace/{MENTION_DELIVERY}", headers=AUTH), 404, "unknown_delivery"
    )


def test_trace_of_an_accepted_event_shows_its_state_and_deliveries(client: TestClient) -> None:
    """An accepted event's trace has its state, its source and family, and how often it came."""
    post_slack(client, MESSAGE_TWIN)
    post_slack(client, MENTION)
    resp = client.get(f"/v1/trace/{MENTION_DELIVERY}", headers=AUTH)
    assert resp.status_code == 200, resp.text
    trace = resp.json()
    assert trace["deliveryId"] == MENTION_DELIVERY
    assert trace["trackingId"] == inbound_tracking_id(MENTION_DELIVERY)
    assert (trace["state"], trace["deliveries"]) == ("accepted", 2)
    assert (trace["source"], trace["family"]) == ("slack", "messaging")
    assert trace["acceptedAtMs"] == NOW_MS and trace["reason"] is None


@pytest.mark.parametrize(
    ("route", "delivery", "reason"),
    [
        ("slack", "slack-event:Ev0JOIN00001", "system_message:channel_join"),
        ("github", "github:guid-closed", "unsupported_event:issues.closed"),
    ],
)
def test_trace_of_a_skipped_event_shows_its_reason(
    client: TestClient, route: str, delivery: str, reason: str
) -> None:
    """A skipped event's trace says skipped, why, and where it came from."""
    if route == "slack":
        post_slack(client, CHANNEL_JOIN)
    else:
        post_github(client, CLOSED, signed_github(CLOSED, delivery="guid-closed"))
    resp = client.get(f"/v1/trace/{delivery}", headers=AUTH)
    assert resp.status_code == 200, resp.text
    trace = resp.json()
    assert (trace["state"], trace["reason"], trace["source"]) == ("skipped", reason, route)
    assert trace["detail"] and trace["deliveries"] == 1


# ------------------------------------------------------------------------------------- fuzzing

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SLACK_DOCS = [json.loads(p.read_bytes()) for p in sorted((FIXTURES / "slack").glob("*.json"))]
GITHUB_DOCS = [json.loads(p.read_bytes()) for p in sorted((FIXTURES / "github").glob("*.json"))]
# Values that steer a payload down the routes' branches, or that are hard to store or echo:
# lone surrogates (valid JSON escapes, not text), overlong ids, non-finite numbers.
KEY_VALUES = st.one_of(
    st.sampled_from(
        [
            *("message", "app_mention", "event_callback", "url_verification", "app_rate_limited"),
            *("channel_join", "message_changed", "message_deleted", "bot_message"),
            *("assigned", "opened", "created", "review_requested", "", " ", "x" * 300),
            *(10**30, -1, 1e308, float("nan"), float("inf")),
        ]
    ),
    st.sampled_from(["\ud800", "a\udfff", "\udc00b", "\U0001f600"]),
    st.text(st.characters(categories=["Cs", "Lu", "Nd", "Cc"]), max_size=6),
)
HEADER_TEXT = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40
) | st.binary(max_size=40).map(
    lambda b: b.replace(b"\r", b"").replace(b"\n", b"").replace(b"\x00", b"")
)
HEADER_NAME = st.from_regex(r"\A[A-Za-z][A-Za-z0-9-]{0,24}\Z").filter(
    lambda n: n.lower() not in ("host", "content-length", "transfer-encoding")
)
EXTRA_HEADERS = st.lists(st.tuples(HEADER_NAME, HEADER_TEXT), max_size=3)
CONTENT_TYPES = st.one_of(
    st.sampled_from(
        [JSON_TYPE, "application/json; charset=utf-8", "APPLICATION/JSON", FORM_TYPE, "text/plain"]
    ),
    st.none(),
    HEADER_TEXT,
)


def _spots(node: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in a JSON tree."""
    found: list[tuple[Any, Any]] = []
    stack = [node]
    while stack:
        current = stack.pop()
        items = (
            current.items()
            if isinstance(current, dict)
            else enumerate(current)
            if isinstance(current, list)
            else ()
        )
        for key, value in items:
            found.append((current, key))
            stack.append(value)
    return found


# Fields the routes and normalisers read: a mutation aims at one of them half of the time.
SLACK_FIELDS: list[tuple[str, ...]] = [
    ("type",),
    ("event_id",),
    ("challenge",),
    ("team_id",),
    ("event_time",),
    ("event",),
    ("event", "type"),
    ("event", "subtype"),
    ("event", "channel"),
    ("event", "ts"),
    ("event", "text"),
    ("event", "message"),
]
GITHUB_FIELDS: list[tuple[str, ...]] = [
    ("action",),
    ("repository",),
    ("repository", "full_name"),
    ("issue", "number"),
    ("pull_request", "number"),
    ("comment",),
    ("comment", "body"),
    ("assignee",),
    ("sender", "login"),
]
CANDIDATE_FIELDS: list[tuple[str, ...]] = [
    ("family",),
    ("source",),
    ("deliveryId",),
    ("atMs",),
    ("msg",),
    ("ids",),
]


@st.composite
def mutated(draw: st.DrawFn, docs: list[Any], fields: list[tuple[str, ...]]) -> Any:
    """A known-good document with one to three fields replaced by odd values or removed."""
    doc = copy.deepcopy(draw(st.sampled_from(docs)))
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.sampled_from([True, True, False])):
            *path, key = draw(st.sampled_from(fields))
            parent = doc
            for step in path:
                parent = parent.get(step) if isinstance(parent, dict) else None
            if not isinstance(parent, dict):
                continue
        else:
            spots = _spots(doc)
            if not spots:
                break
            parent, key = draw(st.sampled_from(spots))
        if isinstance(parent, dict) and draw(st.booleans()):
            parent.pop(key, None)
        else:
            parent[key] = draw(KEY_VALUES | JSON)
    return doc


def _bodies(docs: list[Any], fields: list[tuple[str, ...]]) -> st.SearchStrategy[bytes]:
    """Mostly mutated known-good documents (the deep paths), else random JSON, truncated
    JSON, random bytes, deep nesting and integers too long for Python's parser."""
    near = mutated(docs, fields).map(lambda d: json.dumps(d).encode())
    dumped = (JSON | st.sampled_from(docs)).map(lambda d: json.dumps(d).encode())
    return st.one_of(
        near,
        near,
        near,
        dumped,
        near.flatmap(lambda b: st.integers(0, len(b)).map(lambda n: b[:n])),
        st.binary(max_size=200),
        st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
        st.integers(4200, 4400).map(lambda n: b'{"type": ' + b"9" * n + b"}"),
    )


SIGNATURE_FAULTS = st.sampled_from(["junk", "hex", "none", "twice"])


@st.composite
def slack_requests(draw: st.DrawFn) -> tuple[bytes, list[tuple[str, Any]]]:
    """A Slack request: any body; two times in three signed and dressed as Slack sends it (so the
    body itself is what is odd), else with odd timestamps, signatures and content types."""
    body = draw(_bodies(SLACK_DOCS, SLACK_FIELDS))
    honest = draw(st.sampled_from([True, True, False]))
    if honest:
        stamp: str | None = str(draw(st.integers(NOW_S - 300, NOW_S + 300)))
    else:
        stamp = draw(
            st.one_of(st.integers(NOW_S - 400, NOW_S + 400).map(str), st.text(max_size=14))
            | st.none()
        )
    headers: list[tuple[str, Any]] = []
    if stamp is not None:
        headers.append(("X-Slack-Request-Timestamp", stamp.encode("utf-8", "replace")))
    fault = "valid" if honest else draw(st.sampled_from(["valid"]) | SIGNATURE_FAULTS)
    if fault in ("valid", "twice"):
        given_stamp = (stamp or "").encode("utf-8", "replace").decode("latin-1")
        headers.append(("X-Slack-Signature", slack_signature(body, given_stamp)))
    if fault == "junk":
        headers.append(("X-Slack-Signature", draw(HEADER_TEXT)))
    if fault in ("hex", "twice"):
        digest = draw(st.binary(min_size=32, max_size=32)).hex()
        headers.append(("X-Slack-Signature", draw(st.sampled_from(["v0=", "v1=", ""])) + digest))
    content_type = JSON_TYPE if honest else draw(CONTENT_TYPES)
    if content_type is not None:
        headers.append(("Content-Type", content_type))
    return body, headers + draw(EXTRA_HEADERS)


@st.composite
def github_requests(draw: st.DrawFn) -> tuple[bytes, list[tuple[str, Any]]]:
    """A GitHub request: any body, JSON or form; two times in three signed and dressed as GitHub
    sends it, else with odd events, deliveries, signatures and content types."""
    body = draw(_bodies(GITHUB_DOCS, GITHUB_FIELDS))
    honest = draw(st.sampled_from([True, True, False]))
    content_type = draw(st.sampled_from([JSON_TYPE, FORM_TYPE]) if honest else CONTENT_TYPES)
    if content_type == FORM_TYPE and (honest or draw(st.booleans())):
        fields = [("payload", body.decode("utf-8", "replace"))]
        fields += draw(st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8)), max_size=12))
        body = urlencode(fields).encode()
    known = st.sampled_from([*sorted(GITHUB_EVENTS), "ping"])
    event = draw(
        known if honest else known | st.sampled_from(["star", "push", " Issues "]) | HEADER_TEXT
    )
    delivery = draw(
        st.sampled_from(["guid-1", "guid-2", "guid-3"])
        if honest
        else st.sampled_from(["guid-1", "g" * 121, " "]) | HEADER_TEXT
    )
    headers: list[tuple[str, Any]] = [
        (name, value)
        for name, value in (("X-GitHub-Event", event), ("X-GitHub-Delivery", delivery))
        if honest or draw(st.integers(0, 5))  # one time in six the header is left out
    ]
    fault = "valid" if honest else draw(st.sampled_from(["valid"]) | SIGNATURE_FAULTS)
    if fault in ("valid", "twice"):
        headers.append(("X-Hub-Signature-256", github_signature(body)))
    if fault == "junk":
        headers.append(("X-Hub-Signature-256", draw(HEADER_TEXT)))
    if fault in ("hex", "twice"):
        digest = draw(st.binary(min_size=32, max_size=32)).hex()
        prefix = draw(st.sampled_from(["sha256=", "sha1="]))
        headers.append(("X-Hub-Signature-256", prefix + digest))
    if content_type is not None:
        headers.append(("Content-Type", content_type))
    return body, headers + draw(EXTRA_HEADERS)


CANDIDATES = st.fixed_dictionaries(
    {
        "family": st.sampled_from(["messaging", "board", "calling", "calendar", "email"]),
        "source": st.sampled_from(["intercom", "zendesk", ""]) | st.text(max_size=6),
        # Few ids, so the same id comes back with the same or with other content (409).
        "deliveryId": st.sampled_from(["e-1", "e-2", "e-3", ""]) | st.text(max_size=8),
        "atMs": st.sampled_from([NOW_MS, 0, -1]) | st.integers(0, 2**63),
    },
    optional={
        "ids": st.fixed_dictionaries({}, optional={"channelId": st.text(max_size=6)}),
        "msg": st.fixed_dictionaries(
            {}, optional={"body": st.text(max_size=20), "mentions": st.lists(st.text(max_size=4))}
        ),
        "board": st.fixed_dictionaries({}, optional={"action": st.text(max_size=6)}),
        "colour": st.text(max_size=4),
    },
)


@st.composite
def candidate_requests(draw: st.DrawFn) -> tuple[bytes, list[tuple[str, Any]]]:
    """A /v1/events request: a Candidate (valid or nearly), odd JSON or bytes; two times in
    three with the token and JSON content type, else with odd ones."""
    body = draw(
        st.one_of(
            CANDIDATES.map(lambda c: json.dumps(c).encode()),
            _bodies([CANDIDATE], CANDIDATE_FIELDS),
        )
    )
    honest = draw(st.sampled_from([True, True, False]))
    auth = "valid" if honest else draw(st.sampled_from(["valid", "junk", "none"]))
    headers: list[tuple[str, Any]] = []
    if auth == "valid":
        headers.append(("Authorization", f"Bearer {TOKEN}"))
    if auth == "junk":
        headers.append(("Authorization", draw(HEADER_TEXT)))
    content_type = JSON_TYPE if honest else draw(CONTENT_TYPES)
    if content_type is not None:
        headers.append(("Content-Type", content_type))
    return body, headers + draw(EXTRA_HEADERS)


def _send_and_check(
    client: TestClient, r: redis.Redis, path: str, request: tuple[bytes, list[tuple[str, Any]]]
) -> None:
    """The invariants every answer keeps: never a 5xx; a 4xx (a 409 included) changes nothing
    in Redis; an accepted event is journalled and queues exactly one task; any other 2xx
    queues nothing."""
    body, headers = request
    before = snapshot(r)
    resp = client.post(path, content=body, headers=headers)
    event(f"{resp.status_code} {resp.json().get('error') or resp.json().get('status')}")
    assert resp.status_code < 500, resp.text
    after = snapshot(r)
    answer = resp.json()
    if resp.status_code >= 400:
        assert answer["error"] and answer["message"]
        assert after == before
        return
    was, now = len(before.get(DIRECTEDNESS.encode(), [])), len(after.get(DIRECTEDNESS.encode(), []))
    if answer.get("status") == "accepted":
        assert after[keys.journal(answer["trackingId"]).encode()][b"state"] == b"accepted"
        assert now == was + 1
    else:
        assert now == was


@FUZZ
@given(req=slack_requests())
def test_fuzzed_slack_requests_never_fail_and_refusals_write_nothing(
    client: TestClient, redis_client: redis.Redis, req: tuple[bytes, list[tuple[str, Any]]]
) -> None:
    """Arbitrary Slack requests, signed or not: never a 5xx, and a 4xx writes nothing."""
    _send_and_check(client, redis_client, "/webhooks/slack", req)


@FUZZ
@given(req=github_requests())
def test_fuzzed_github_requests_never_fail_and_refusals_write_nothing(
    client: TestClient, redis_client: redis.Redis, req: tuple[bytes, list[tuple[str, Any]]]
) -> None:
    """Arbitrary GitHub requests, signed or not: never a 5xx, and a 4xx writes nothing."""
    _send_and_check(client, redis_client, "/webhooks/github", req)


@FUZZ
@given(req=candidate_requests())
def test_fuzzed_candidates_never_fail_and_refusals_write_nothing(
    client: TestClient, redis_client: redis.Redis, req: tuple[bytes, list[tuple[str, Any]]]
) -> None:
    """Arbitrary /v1/events requests: never a 5xx, and a 4xx writes nothing."""
    _send_and_check(client, redis_client, "/v1/events", req)


# ---------------------------------------------------------------- unavailable


def test_broker_down_is_a_quick_503_and_slacks_retry_enqueues(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """With the broker unreachable the webhook is answered 503 with Retry-After well inside
    Slack's 3 s, never 2xx; the journalled entry waits, and Slack's retry enqueues it."""
    down = _settings(redis_url, tmp_path, broker_url="redis://127.0.0.1:1/0")
    with _client(down) as c:
        started = time.monotonic()
        resp = post_slack(c, MENTION)
        assert resp.status_code == 503 and resp.headers["Retry-After"]
        assert time.monotonic() - started < 3
    [(tracking, entry)] = entries(redis_client).items()
    assert entry["state"] == "accepted" and "enqueuedAtMs" not in entry
    with _client(_settings(redis_url, tmp_path)) as c:
        retry = post_slack(c, MENTION, [*signed_slack(MENTION), ("X-Slack-Retry-Num", "1")])
        assert retry.status_code == 200 and retry.json()["trackingId"] == tracking
    assert len(queued(redis_client)) == 1
    assert "enqueuedAtMs" in entries(redis_client)[tracking]
