"""Outbound faults end to end (fault tests 1 and 15-20, docs/reliability.md): the ingress, worker
processes and beat as compose runs them, on real Redis, sending to the fake Slack server through the
real Slack adapter. Every test reports the standard figures: D (send ids applied more than once), L
(accepted reports with no final record), attempts per ask."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.e2e.cluster import Cluster, start_cluster
from tests.fake_slack import (
    FakeSlack,
    Fault,
    apply_then_hang,
    apply_then_reset,
    error,
    http_error,
    rate_limited,
)
from workers.stores import keys

pytestmark = pytest.mark.e2e

# The people of examples/org.yaml with a Slack id, who asks are sent to.
PEOPLE = ["ben", "ava", "chloe", "devi", "emil", "faye", "gus", "hana", "ivan", "jo", "lea"]
SEND_WORKER = ["seatwire", "worker", "--queues", "engagement,guardrails,send"]
FINAL = {"engaged", "nobody", "refused", "send_failed", "send_blocked", "failed", "dead"}


@contextmanager
def outbound_cluster(
    redis_url: str, tmp_path: Path, slack: FakeSlack, workers: int = 2, **env: str
) -> Iterator[Cluster]:
    commands = {
        "ingress": ["seatwire", "ingress", "--host", "127.0.0.1", "--port", "0"],
        "beat": ["seatwire", "beat"],
        **{f"worker-{i}": [*SEND_WORKER, "--concurrency", "1"] for i in range(workers)},
    }
    with start_cluster(
        commands,
        redis_url,
        tmp_path,
        SEATWIRE_OUTBOUND="slack",
        SEATWIRE_SLACK_API_URL=slack.url,
        SEATWIRE_SLACK_BOT_TOKEN=slack.token,
        SEATWIRE_SEND_TIMEOUT_S="1",
        SEATWIRE_SWEEP_INTERVAL_S="1",
        SEATWIRE_LIMITS__PER_TARGET_PER_DAY="1000000",
        SEATWIRE_LIMITS__PER_SEAT_PER_HOUR="1000000",
        SEATWIRE_LIMITS__PER_WORK_PER_DAY="1000000",
        **env,
    ) as cluster:
        yield cluster


def submit(cluster: Cluster, n: int, *, people: list[str] = PEOPLE, tag: str = "w") -> list[str]:
    """n blocked reports, each naming one person as the owner; returns their tracking ids."""

    def post(i: int) -> str:
        report = {
            "id": f"{tag}-{i}",
            "title": f"Unblock {tag} {i}",
            "state": "blocked",
            "blocker": {"kind": "access", "ownerId": people[i % len(people)]},
            "selfServeExhausted": True,
        }
        with cluster.http() as http:
            resp = http.post(f"/v1/seats/{'scout' if i % 2 else 'tally'}/work", json=report)
            assert resp.status_code == 202, resp.text
            return str(resp.json()["trackingId"])

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(post, range(n)))


def settle(r: redis.Redis, trackings: list[str], timeout: float) -> dict[str, str]:
    """Wait until every report is final; returns tracking id -> final state."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        pipe = r.pipeline(transaction=False)
        for t in trackings:
            pipe.hget(keys.journal(t), "state")
        states = {t: (s or b"").decode() for t, s in zip(trackings, pipe.execute(), strict=True)}
        if all(s in FINAL for s in states.values()):
            return states
        time.sleep(0.2)
    stuck = Counter(s for s in states.values() if s not in FINAL)
    raise AssertionError(f"not every report reached an end: {stuck}")


def figures(slack: FakeSlack, states: dict[str, str]) -> dict[str, Any]:
    posts = slack.posts()
    sent_ids = Counter(p.payload_field("idempotency_id") for p in posts)
    attempts = Counter(r.metadata_id for r in slack.requests() if r.method == "chat.postMessage")
    out = {
        "accepted": len(states),
        "D": sum(1 for c in sent_ids.values() if c > 1),
        "L": sum(1 for s in states.values() if s not in FINAL),
        "outcomes": dict(Counter(states.values())),
        "posts": len(posts),
        "attempts_max": max(attempts.values(), default=0),
        "reconciliations": sum(1 for r in slack.requests() if r.method == "conversations.history"),
    }
    print(f"figures: {out}")
    return out


def ask_retry_margins(slack: FakeSlack) -> list[float]:
    """For every 429 an ask got: seconds between its Retry-After running out and that ask's
    next post (negative = too early)."""
    margins = []
    posts = [r for r in slack.requests() if r.method == "chat.postMessage" and r.metadata_id]
    for i, r in enumerate(posts):
        if r.status != 429:
            continue
        later = next((n for n in posts[i + 1 :] if n.metadata_id == r.metadata_id), None)
        if later is not None:
            margins.append(later.mono - r.mono - float(r.retry_after or 0))
    return margins


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


def test_15_rate_limits_are_waited_out_never_retried_early(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, slack: FakeSlack
) -> None:
    """30 % of posts answer 429 Retry-After 2, and each conversation takes one post a second:
    every ask lands once, and no retry comes before its Retry-After."""
    slack.chaos("chat.postMessage", {rate_limited(retry_after=2): 0.3}, seed=15)
    slack.rate_limit("chat.postMessage", per_channel_per_s=1.0, retry_after=1)
    with outbound_cluster(redis_url, tmp_path, slack) as cluster:
        trackings = submit(cluster, 30, people=PEOPLE[:3], tag="t15")
        states = settle(redis_client, trackings, timeout=120)
    got = figures(slack, states)
    assert got["D"] == 0 and got["L"] == 0
    assert got["outcomes"] == {"engaged": 30} and got["posts"] == 30
    # Per ask: the next try of an ask that got a 429 never comes before its Retry-After.
    margins = ask_retry_margins(slack)
    assert margins, "the faults never fired"
    assert min(margins) >= 0, "an ask was retried before its Retry-After"
    # Per conversation, every worker holds its posts after a 429 there (a cooldown in
    # Redis); a post already on its way when the 429 came can still land inside the window.
    # Reported, for the note: how many calls to a conversation came inside another ask's wait.
    waits = slack.retry_waits("chat.postMessage")
    early = sum(1 for w in waits if w.margin < 0)
    print(f"per-ask min margin {min(margins):.2f} s; per-channel early {early}/{len(waits)}")


def test_16_server_errors_and_ambiguous_errors_are_reconciled_never_duplicated(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, slack: FakeSlack
) -> None:
    faults: dict[Fault, float] = {
        http_error(500): 0.1,
        http_error(503): 0.1,
        error("ratelimited"): 0.1,
        error("internal_error", applied=True): 0.025,
        error("internal_error", applied=False): 0.025,
        error("fatal_error", applied=True): 0.05,
    }
    slack.chaos("chat.postMessage", faults, seed=16)
    with outbound_cluster(redis_url, tmp_path, slack) as cluster:
        trackings = submit(cluster, 40, tag="t16")
        states = settle(redis_client, trackings, timeout=180)
    got = figures(slack, states)
    assert got["D"] == 0 and got["L"] == 0
    assert got["outcomes"] == {"engaged": 40} and got["posts"] == 40
    assert got["reconciliations"] > 0


@pytest.mark.parametrize(
    "fault", [apply_then_hang(3), apply_then_reset(), error("fatal_error", applied=True)]
)
def test_17_18_an_applied_post_whose_answer_is_lost_is_found_not_resent(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, slack: FakeSlack, fault: Fault
) -> None:
    slack.script("chat.postMessage", [fault])
    with outbound_cluster(redis_url, tmp_path, slack, workers=1) as cluster:
        trackings = submit(cluster, 1, tag=f"t17-{fault.kind}-{fault.code}")
        states = settle(redis_client, trackings, timeout=60)
    got = figures(slack, states)
    assert got["D"] == 0 and got["outcomes"] == {"engaged": 1} and got["posts"] == 1
    assert got["reconciliations"] >= 1
    assert Counter(r.method for r in slack.requests())["chat.postMessage"] == 1


def test_19_an_outbound_partition_backs_up_and_drains_without_loss(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, slack: FakeSlack
) -> None:
    """The API goes away for 8 s (connections refused), then comes back."""
    with outbound_cluster(redis_url, tmp_path, slack) as cluster:
        port = int(slack.url.split(":")[2].split("/")[0])
        slack.stop()
        trackings = submit(cluster, 20, tag="t19")
        time.sleep(8)
        assert redis_client.zcard(keys.JOURNAL_OPEN) >= 20  # backed up, nothing dropped
        with FakeSlack(port=port, token=slack.token) as back:
            states = settle(redis_client, trackings, timeout=180)
            got = figures(back, states)
    assert got["D"] == 0 and got["L"] == 0
    assert got["outcomes"] == {"engaged": 20} and got["posts"] == 20


@pytest.mark.parametrize(
    "code", ["channel_not_found", "not_in_channel", "invalid_auth", "msg_too_long"]
)
def test_20_a_permanent_error_is_one_attempt_and_a_written_failure(
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    slack: FakeSlack,
    code: str,
) -> None:
    slack.script("chat.postMessage", [error(code)])
    with outbound_cluster(redis_url, tmp_path, slack, workers=1) as cluster:
        (tracking,) = submit(cluster, 1, tag=f"t20-{code}")
        states = settle(redis_client, [tracking], timeout=60)
        with cluster.http() as http:
            rows = http.get("/v1/ledger", params={"limit": 10}).json()["rows"]
    assert states == {tracking: "send_failed"}
    assert Counter(r.method for r in slack.requests())["chat.postMessage"] == 1
    (row,) = rows
    assert row["outcome"] == "send_failed" and code in row["reason"]
    # The reservation is released: the person's count no longer holds it.
    assert redis_client.zcard(keys.by_target("ben")) == 0


KILL_POINTS = [
    "send:before_claim",
    "guardrails:after_reserve",
    "send:after_intent",
    "send:after_api_ok_before_done",
    "send:after_done_before_ack",
]


@pytest.mark.parametrize("point", KILL_POINTS)
def test_01_a_worker_killed_at_each_point_loses_and_duplicates_nothing(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, slack: FakeSlack, point: str
) -> None:
    """300 asks; a worker process is SIGKILLed at `point` with p = 0.1."""
    with outbound_cluster(
        redis_url,
        tmp_path,
        slack,
        workers=3,
        SEATWIRE_FAULTPOINTS=f"{point}:0.1",
        # A dead try's send lease is the hard time limit plus 10 s: keep the wait short.
        SEATWIRE_TASK_TIME_LIMIT_S="10",
    ) as cluster:
        trackings = submit(cluster, 300, tag=f"t01-{point.replace(':', '-')}")
        states = settle(redis_client, trackings, timeout=300)
    got = figures(slack, states)
    assert got["D"] == 0 and got["L"] == 0
    assert got["outcomes"] == {"engaged": 300} and got["posts"] == 300
