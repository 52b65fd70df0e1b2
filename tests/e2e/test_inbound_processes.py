"""End to end, the inbound path as production runs it: compose.yaml's ingress and worker pools
started as processes on a real Redis; really signed Slack and GitHub webhooks (and a generic
`Candidate`) posted over HTTP; the seats' inboxes and each event's trace read back over the API.

One cluster serves the whole module (starting it takes seconds). Every test starts with both
inboxes acknowledged and uses message timestamps, issue numbers and delivery ids of its own.
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml

from pipeline.normalise.github import event_identity
from pipeline.signatures import github_headers, slack_headers
from tests.e2e.cluster import Cluster, compose_commands, start_cluster
from workers.settings import REPO_ROOT

pytestmark = pytest.mark.e2e

SLACK_SECRET = "e2e-slack-signing-secret"
GITHUB_SECRET = "e2e-github-webhook-secret"
TEAM = "T0SEATWIRE"
PLATFORM = "C-PLATFORM"
SCOUT_LOGIN = "seatwire-scout"  # the login the GitHub fixtures assign and mention
SEATS = ("scout", "tally")
FIXTURES = REPO_ROOT / "tests" / "pipeline" / "fixtures"
RESOLVED = {"directed", "ambient", "skipped", "failed"}
USER_TOKEN = re.compile(r"(<@[UW][A-Z0-9]+>)")

_serial = itertools.count(1)
_epoch = int(time.time())


def fresh_ts() -> str:
    """A Slack message ts nobody has used in this run."""
    return f"{_epoch}.{next(_serial):06d}"


def fresh_issue() -> int:
    return 1000 + next(_serial)


# ---------------------------------------------------------------- provider payloads


def slack_message(
    text: str,
    *,
    user: str,
    channel: str = PLATFORM,
    ts: str | None = None,
    thread_ts: str | None = None,
    parent_user: str | None = None,
) -> dict[str, Any]:
    """An Events API `message` envelope shaped like the fixture, rewritten to this org."""
    envelope: dict[str, Any] = json.loads(
        (FIXTURES / "slack" / "message_channel_mention.json").read_text()
    )
    ts = ts or fresh_ts()
    section = [
        {"type": "user", "user_id": part[2:-1]}
        if USER_TOKEN.fullmatch(part)
        else {"type": "text", "text": part}
        for part in USER_TOKEN.split(text)
        if part
    ]
    event = envelope["event"]
    event.update(
        user=user,
        text=text,
        ts=ts,
        event_ts=ts,
        channel=channel,
        team=TEAM,
        client_msg_id=str(uuid.uuid4()),
        blocks=[
            {
                "type": "rich_text",
                "block_id": "b1",
                "elements": [{"type": "rich_text_section", "elements": section}],
            }
        ],
    )
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
        event["parent_user_id"] = parent_user
    envelope.update(
        team_id=TEAM,
        context_team_id=TEAM,
        event_id=f"Ev{ts.replace('.', '')}",
        event_time=int(float(ts)),
    )
    envelope["authorizations"][0].update(team_id=TEAM, user_id="U0SCOUT")
    return envelope


def slack_delivery(envelope: dict[str, Any]) -> str:
    event = envelope["event"]
    return f"slack:{TEAM}:{event['channel']}:{event['ts']}"


def github_assigned(number: int, login: str = SCOUT_LOGIN) -> dict[str, Any]:
    """`issues.assigned` of issue `number` to `login`, shaped like the fixture."""
    payload: dict[str, Any] = json.loads((FIXTURES / "github" / "issues_assigned.json").read_text())
    payload["issue"]["number"] = number
    payload["assignee"] = {**payload["assignee"], "login": login}
    return payload


def github_comment(number: int, body: str, *, login: str = "bobsmith") -> dict[str, Any]:
    """`issue_comment.created` on issue `number`, shaped like the fixture."""
    payload: dict[str, Any] = json.loads(
        (FIXTURES / "github" / "issue_comment_created.json").read_text()
    )
    payload["issue"]["number"] = number
    payload["comment"]["body"] = body
    payload["comment"]["user"] = {**payload["comment"]["user"], "login": login}
    return payload


# ---------------------------------------------------------------- the cluster


def write_org(tmp: Path) -> Path:
    """examples/org.yaml, with scout's member mapped to its GitHub login."""
    org = yaml.safe_load((REPO_ROOT / "examples" / "org.yaml").read_text())
    scout = next(m for m in org["members"] if m["id"] == "scout")
    scout["aliases"] = [*scout["aliases"], f"github:{SCOUT_LOGIN}"]
    path = tmp / "org.yaml"
    path.write_text(yaml.safe_dump(org, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def cluster(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """compose.yaml's ingress and worker pools, as processes, with both webhook secrets set,
    on a test Redis flushed before and after; warmed by one event through every hop."""
    tmp = tmp_path_factory.mktemp("inbound")
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    try:
        with start_cluster(
            compose_commands(),
            redis_url,
            tmp,
            SEATWIRE_ORG_FILE=str(write_org(tmp)),
            SLACK_SIGNING_SECRET=SLACK_SECRET,
            GITHUB_WEBHOOK_SECRET=GITHUB_SECRET,
        ) as c:
            with c.http() as api, provider_client(c) as provider:
                warm = slack_message("<@U0SCOUT> warming up", user="U0AVA")
                assert post_slack(provider, warm).status_code == 200
                wait_resolved(api, slack_delivery(warm), timeout=30)
            yield c
    finally:
        client.flushdb()
        client.close()


def provider_client(c: Cluster) -> httpx.Client:
    """A client with no bearer token, as Slack and GitHub call."""
    return httpx.Client(base_url=c.base, timeout=10)


@pytest.fixture
def api(cluster: Cluster) -> Iterator[httpx.Client]:
    """The bearer-token client, with both seats' inboxes acknowledged before the test."""
    with cluster.http() as http:
        for seat in SEATS:
            acknowledge_all(http, seat)
        yield http


@pytest.fixture
def provider(cluster: Cluster) -> Iterator[httpx.Client]:
    with provider_client(cluster) as http:
        yield http


# ---------------------------------------------------------------- talking to it


def post_slack(
    http: httpx.Client, envelope: dict[str, Any], headers: dict[str, str] | None = None
) -> httpx.Response:
    body = json.dumps(envelope).encode()
    signed = slack_headers(body, secret=SLACK_SECRET, now_s=int(time.time()))
    return http.post("/webhooks/slack", content=body, headers={**signed, **(headers or {})})


def post_github(
    http: httpx.Client, event: str, payload: dict[str, Any], delivery: str
) -> httpx.Response:
    body = json.dumps(payload).encode()
    signed = github_headers(body, secret=GITHUB_SECRET, event=event, delivery_id=delivery)
    return http.post("/webhooks/github", content=body, headers=signed)


def accepted(resp: httpx.Response) -> str:
    """The delivery id of a webhook the ingress accepted as new."""
    assert resp.status_code == 200, resp.text
    assert resp.json()["status"] == "accepted", resp.text
    return str(resp.json()["deliveryId"])


def wait_resolved(http: httpx.Client, delivery_id: str, timeout: float = 10) -> dict[str, Any]:
    """The trace of an event once the directedness stage has recorded it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        resp = http.get(f"/v1/trace/{delivery_id}")
        if resp.status_code == 200 and resp.json()["state"] in RESOLVED:
            body: dict[str, Any] = resp.json()
            return body
        time.sleep(0.02)
    raise TimeoutError(f"{delivery_id} was never resolved")


def verdicts(trace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["seatId"]: s for s in trace["seats"]}


def inbox(http: httpx.Client, seat: str) -> list[dict[str, Any]]:
    """The seat's unacknowledged items (the tests keep them to one page)."""
    page = http.get(f"/v1/seats/{seat}/updates").json()
    assert not page["hasMore"], page
    items: list[dict[str, Any]] = page["items"]
    return items


def acknowledge_all(http: httpx.Client, seat: str) -> None:
    while True:
        page = http.get(f"/v1/seats/{seat}/updates").json()
        if not page["items"]:
            return
        resp = http.post(f"/v1/seats/{seat}/updates/ack", json={"position": page["position"]})
        assert resp.status_code == 200, resp.text


def ids_in(http: httpx.Client, seat: str) -> list[str]:
    return [item["deliveryId"] for item in inbox(http, seat)]


# ---------------------------------------------------------------- the tests


def test_signed_webhooks_reach_exactly_the_inboxes_they_address(
    api: httpx.Client, provider: httpx.Client
) -> None:
    """A Slack mention and a GitHub assignment reach scout alone, a calendar invite reaches
    tally alone, and a message naming nobody or a comment naming someone else reaches neither;
    each seat's verdict, directed or not, is in the trace with its reason."""
    mention = accepted(
        post_slack(
            provider,
            slack_message("<@U0SCOUT> can you review the migration with <@U0BEN>?", user="U0AVA"),
        )
    )
    nobody = accepted(post_slack(provider, slack_message("the deploy went out", user="U0AVA")))
    assigned_to_scout = accepted(
        post_github(provider, "issues", github_assigned(fresh_issue()), str(uuid.uuid4()))
    )
    other_comment = accepted(
        post_github(
            provider,
            "issue_comment",
            github_comment(fresh_issue(), "@ann-lee could you bisect this?"),
            str(uuid.uuid4()),
        )
    )
    invite = f"calendar:{uuid.uuid4()}"
    resp = api.post(
        "/v1/events",
        json={
            "family": "calendar",
            "source": "e2e-calendar",
            "deliveryId": invite,
            "calendar": {"action": "invite", "organizerId": "devi", "attendeeIds": ["U0TALLY"]},
            "atMs": int(time.time() * 1000),
        },
    )
    assert resp.status_code == 202 and resp.json()["status"] == "accepted", resp.text

    traces = {d: wait_resolved(api, d) for d in (mention, nobody, assigned_to_scout, invite)}
    traces[other_comment] = wait_resolved(api, other_comment)

    assert assigned_to_scout.startswith("github:") and mention.startswith(f"slack:{TEAM}:")
    seen = {d: verdicts(t) for d, t in traces.items()}
    assert traces[mention]["state"] == "directed"
    assert (seen[mention]["scout"]["reason"], seen[mention]["scout"]["surface"]) == (
        "mention",
        "mention",
    )
    assert seen[mention]["tally"]["directed"] is False
    assert seen[mention]["tally"]["reason"] == "ambient"
    assert "mentions others" in seen[mention]["tally"]["why"]
    assert traces[nobody]["state"] == "ambient"
    assert {s: v["reason"] for s, v in seen[nobody].items()} == {
        "scout": "ambient",
        "tally": "ambient",
    }
    assert seen[assigned_to_scout]["scout"]["reason"] == "assigned"
    assert seen[assigned_to_scout]["tally"]["directed"] is False
    assert traces[other_comment]["state"] == "ambient"
    assert not any(v["directed"] for v in seen[other_comment].values())
    assert seen[invite]["tally"]["reason"] == "attendee"
    assert seen[invite]["scout"]["directed"] is False

    items = {seat: inbox(api, seat) for seat in SEATS}
    assert sorted(i["deliveryId"] for i in items["scout"]) == sorted([mention, assigned_to_scout])
    assert [i["deliveryId"] for i in items["tally"]] == [invite]
    for seat, held in items.items():
        for item in held:
            verdict = seen[item["deliveryId"]][seat]
            assert (verdict["position"], verdict["reason"]) == (item["position"], item["reason"])


def deliver_four_times(send: Callable[[int], httpx.Response], settle: Callable[[], Any]) -> None:
    """The original and the first retry at once from two threads, then, once the event is
    resolved, two more retries; exactly one of the four is accepted as new."""
    barrier = threading.Barrier(2)
    statuses: list[str] = []

    def deliver(attempt: int) -> None:
        barrier.wait()
        resp = send(attempt)
        assert resp.status_code == 200, resp.text
        statuses.append(resp.json()["status"])

    threads = [threading.Thread(target=deliver, args=(attempt,)) for attempt in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    settle()
    for attempt in (2, 3):
        resp = send(attempt)
        assert resp.status_code == 200, resp.text
        statuses.append(resp.json()["status"])
    assert sorted(statuses) == ["accepted", "duplicate", "duplicate", "duplicate"]


def test_slack_retries_reach_the_inbox_once(cluster: Cluster, api: httpx.Client) -> None:
    """Slack's original delivery and three retries (two of the four concurrent) put the event
    in scout's inbox once, and the trace counts four deliveries."""
    envelope = slack_message("<@U0SCOUT> is the billing job still failing?", user="U0BEN")
    delivery = slack_delivery(envelope)

    def send(attempt: int) -> httpx.Response:
        retry = (
            {"X-Slack-Retry-Num": str(attempt), "X-Slack-Retry-Reason": "http_timeout"}
            if attempt
            else {}
        )
        with provider_client(cluster) as http:
            return post_slack(http, envelope, retry)

    deliver_four_times(send, lambda: wait_resolved(api, delivery))
    time.sleep(0.5)  # room for a second directedness run, which must change nothing
    trace = wait_resolved(api, delivery)
    assert trace["deliveries"] == 4
    assert ids_in(api, "scout") == [delivery]
    assert ids_in(api, "tally") == []


def test_github_redeliveries_reach_the_inbox_once(cluster: Cluster, api: httpx.Client) -> None:
    """The same GitHub delivery (one X-GitHub-Delivery) received four times, two of them
    concurrently, puts the assignment in scout's inbox once; the trace counts four. The
    event is keyed by its own identity (what a second hook's copy shares), not the guid."""
    payload = github_assigned(fresh_issue())
    guid = str(uuid.uuid4())
    repo, number = payload["repository"]["full_name"], payload["issue"]["number"]
    delivery = event_identity("issues", "assigned", repo, number, payload, "issue")
    assert delivery is not None and delivery.startswith("github:")

    def send(_attempt: int) -> httpx.Response:
        with provider_client(cluster) as http:
            return post_github(http, "issues", payload, guid)

    deliver_four_times(send, lambda: wait_resolved(api, delivery))
    time.sleep(0.5)  # room for a second directedness run, which must change nothing
    trace = wait_resolved(api, delivery)
    assert trace["deliveries"] == 4
    assert ids_in(api, "scout") == [delivery]
    assert ids_in(api, "tally") == []


def test_directed_events_reach_the_inbox_within_a_second(
    api: httpx.Client, provider: httpx.Client
) -> None:
    """Under light load (one event at a time), every directed Slack event is in scout's inbox
    less than a second after its webhook was answered 2xx."""
    latencies: list[float] = []
    for i in range(20):
        envelope = slack_message(f"<@U0SCOUT> quick question number {i}", user="U0GUS")
        delivery = slack_delivery(envelope)
        resp = post_slack(provider, envelope)
        answered = time.perf_counter()
        assert resp.status_code == 200, resp.text
        deadline = answered + 5
        while True:
            page = api.get("/v1/seats/scout/updates").json()
            found = [item for item in page["items"] if item["deliveryId"] == delivery]
            if found:
                latencies.append(time.perf_counter() - answered)
                break
            assert time.perf_counter() < deadline, f"{delivery} never reached the inbox"
            time.sleep(0.002)
        api.post("/v1/seats/scout/updates/ack", json={"position": found[0]["position"]})
    p50, worst = statistics.median(latencies), max(latencies)
    print(
        f"\ninbound webhook 2xx -> inbox, {len(latencies)} events: p50 {p50 * 1000:.1f} ms, "
        f"max {worst * 1000:.1f} ms"
    )
    assert worst < 1.0, latencies


def test_thread_facts_follow_the_conversation(api: httpx.Client, provider: httpx.Client) -> None:
    """Once scout is named in a thread, a later reply naming nobody reaches it as a thread
    participant; its own echoed message is `own_echo` and stays out of its inbox, yet makes
    the thread it spoke in its own; a comment on its assigned issue reaches it too. Tally,
    in none of these, is ambient throughout."""
    root = slack_message("<@U0SCOUT> can you check the billing migration?", user="U0AVA")
    named = accepted(post_slack(provider, root))
    wait_resolved(api, named)
    reply = accepted(
        post_slack(
            provider,
            slack_message(
                "it ran clean overnight",
                user="U0BEN",
                thread_ts=root["event"]["ts"],
                parent_user="U0AVA",
            ),
        )
    )
    in_thread = verdicts(wait_resolved(api, reply))
    assert in_thread["scout"]["directed"] is True
    assert (in_thread["scout"]["surface"], in_thread["scout"]["reason"]) == (
        "thread_reply",
        "thread_participant",
    )
    assert (in_thread["tally"]["directed"], in_thread["tally"]["reason"]) == (False, "ambient")

    other_root = slack_message("anyone seen the latency graphs today?", user="U0AVA")
    unnamed = accepted(post_slack(provider, other_root))
    assert wait_resolved(api, unnamed)["state"] == "ambient"
    echo = slack_message(
        "I looked: p99 doubled after the deploy",
        user="U0SCOUT",
        thread_ts=other_root["event"]["ts"],
        parent_user="U0AVA",
    )
    echo["event"]["bot_id"] = "B0SCOUT"
    own = accepted(post_slack(provider, echo))
    echoed = wait_resolved(api, own)
    assert echoed["state"] == "ambient"
    assert verdicts(echoed)["scout"]["reason"] == "own_echo"
    assert verdicts(echoed)["scout"]["directed"] is False
    follow_up = accepted(
        post_slack(
            provider,
            slack_message(
                "thanks, rolling it back",
                user="U0GUS",
                thread_ts=other_root["event"]["ts"],
                parent_user="U0AVA",
            ),
        )
    )
    after_echo = verdicts(wait_resolved(api, follow_up))
    assert after_echo["scout"]["reason"] == "thread_participant"
    assert after_echo["tally"]["directed"] is False

    issue = fresh_issue()
    assigned = accepted(post_github(provider, "issues", github_assigned(issue), str(uuid.uuid4())))
    wait_resolved(api, assigned)
    comment = accepted(
        post_github(
            provider,
            "issue_comment",
            github_comment(issue, "the retry path double-charges", login="ann-lee"),
            str(uuid.uuid4()),
        )
    )
    on_item = verdicts(wait_resolved(api, comment))
    assert on_item["scout"]["reason"] == "item_activity"
    assert on_item["tally"]["directed"] is False

    assert ids_in(api, "scout") == [named, reply, follow_up, assigned, comment]
    assert ids_in(api, "tally") == []
