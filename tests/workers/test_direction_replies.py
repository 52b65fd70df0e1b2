"""People vote on a project direction by replying to its post in Slack (issue 13), on a real
Redis, through the real routes: a seat opens a direction with `open_decision`; the policy's
`channelId` has the same step journal its post, which the guardrail and send stages take like
any ask (exactly once, into the sent-message index); a signed Slack reply in the post's thread
(the shape of tests/data/realworld/slack/message.bolt.user_reply.json) goes through
`/webhooks/slack` and the directedness stage, which counts it as its author's vote, weight 2.
A redelivery counts once; a later reply changes the vote; a reply that is no vote, from no
member, from a seat, or at the deadline is written into the direction's log with its code."""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
import redis
from fastapi.testclient import TestClient

from contracts.messages import DecisionEnvelope, InboundEnvelope, ReservedEnvelope
from pipeline import decisions as rules
from tests.auth import bearer, seat_token
from tests.workers.test_webhooks import NOW_MS, SLACK_SECRET, TOKEN, signed_slack
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.errors import ConfigError
from workers.ingress.app import create_ingress
from workers.org import parse_org
from workers.queues import Queue
from workers.settings import Settings
from workers.stages.directedness import Directedness
from workers.stages.guardrails import Guardrails
from workers.stages.send import Send
from workers.stores import keys

pytestmark = pytest.mark.redis

OPERATOR = bearer(TOKEN)
CHANNEL = "C111"
ORG = f"""
project: {{name: Widgets, repository: acme/widgets}}
members:
  - {{id: ava, displayName: Ava, aliases: [U0AVA]}}
  - {{id: bo, displayName: Bo, aliases: [U0BO]}}
  - {{id: scout, aliases: [W111]}}
  - {{id: sage}}
channels:
  - {{id: {CHANNEL}, kind: PUBLIC, name: project}}
seats:
  - {{memberId: scout, operatorId: ava}}
  - {{memberId: sage, operatorId: ava}}
decisions: {{ownerId: ava, minCountdownSeconds: 60, channelId: {CHANNEL}}}
"""
REPLY = json.loads(
    (
        Path(__file__).resolve().parents[1] / "data/realworld/slack/message.bolt.user_reply.json"
    ).read_text()
)


@dataclass
class Clock:
    now: int = NOW_MS

    def __call__(self) -> int:
        return self.now


@dataclass
class World:
    http: TestClient
    c: Container
    clock: Clock
    replies: int = 0
    written: dict[int, int] = field(default_factory=dict)  # reply -> when it was written
    last: InboundEnvelope | None = None  # the last envelope the stage ran

    def open(self, rid: str = "d1", seat: str = "scout") -> str:
        resp = self.http.post(
            f"/v1/seats/{seat}/tools/open_decision",
            headers=bearer(seat_token(self.c.redis, seat)),
            json={
                "client_request_id": rid,
                "title": "Adopt the new billing API",
                "body": "We move billing to v2 before the release.",
                "countdown_seconds": 600,
            },
        )
        assert resp.status_code == 200, resp.text
        return str(resp.json()["directionId"])

    def queued(self, queue: Queue) -> list[dict[str, Any]]:
        found = []
        for raw in self.c.redis.lrange(queue.value, 0, -1):
            message = json.loads(raw)
            body = message["body"]  # base64 from Celery's publish, plain from the intake script
            if message["properties"].get("body_encoding") == "base64":
                body = base64.b64decode(body)
            found.append({"id": message["headers"]["id"], "arg": json.loads(body)[0][0]})
        return found

    def post(self) -> str:
        """Run the guardrails and the send stage on the queued post; its message id."""
        [task] = self.queued(Queue.GUARDRAILS)
        self.c.redis.delete(Queue.GUARDRAILS.value)
        reserved = Guardrails.of(self.c)(DecisionEnvelope.model_validate(task["arg"]))
        assert isinstance(reserved, ReservedEnvelope)
        assert Send.of(self.c).send(reserved) == "engaged"
        op = cast("dict[bytes, bytes]", self.c.redis.hgetall(keys.op(reserved.tracking_id)))
        return op[b"messageId"].decode()

    def reply(
        self,
        root: str,
        text: str,
        user: str = "U0BO",
        *,
        retry_of: int | None = None,
        written_ms: int | None = None,
    ) -> int:
        """A signed Slack reply in `root`'s thread, through the route and the stage, written
        at `written_ms` (by default now); with `retry_of`, Slack's retry of that earlier
        reply (its event id and ts again)."""
        self.replies += 1
        n = self.replies if retry_of is None else retry_of
        if retry_of is None:
            self.written[n] = self.clock.now if written_ms is None else written_ms
        payload = copy.deepcopy(REPLY)
        payload["event_id"] = f"EvReply{n}"
        payload["event_time"] = self.written[n] // 1000
        ev = payload["event"]
        ev.pop("blocks")
        ev.update(
            text=text,
            user=user,
            ts=f"{self.written[n] // 1000}.{self.written[n] % 1000:03d}{n:03d}",
            thread_ts=root,
            channel=CHANNEL,
            client_msg_id=f"reply-{n}",
        )
        raw = json.dumps(payload).encode()
        headers = signed_slack(raw, stamp=str(self.clock.now // 1000))
        if retry_of is not None:
            headers.append(("X-Slack-Retry-Num", "1"))
        resp = self.http.post("/webhooks/slack", content=raw, headers=headers)
        for task in self.queued(Queue.DIRECTEDNESS):
            self.last = InboundEnvelope.model_validate(task["arg"])
            self.stage(self.last)
        self.c.redis.delete(Queue.DIRECTEDNESS.value)
        return resp.status_code

    def stage(self, env: InboundEnvelope) -> None:
        Directedness(self.c.org, self.c.inbound, self.clock, container=self.c)(env)

    def direction(self, did: str) -> dict[str, Any]:
        resp = self.http.get(f"/v1/decisions/{did}", headers=OPERATOR, params={"memberId": "bo"})
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    def log(self, did: str) -> list[dict[str, Any]]:
        resp = self.http.get(f"/v1/decisions/{did}/log", headers=OPERATOR)
        return list(resp.json()["log"])


@pytest.fixture
def world(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[World]:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url,
        api_token=TOKEN,
        slack_signing_secret=SLACK_SECRET,
        outbox_path=tmp_path / "outbox.jsonl",
        org_file=org,
    )
    app = create_app(settings, register=False)
    c = bootstrap.build_container(settings, client=redis_client, app=app)
    clock = Clock()
    with TestClient(create_ingress(c, app, clock_ms=clock)) as http:
        yield World(http, c, clock)


def test_a_direction_is_posted_once_through_the_pipeline(world: World, tmp_path: Path) -> None:
    """Opening journals the post `decided` in the same step and publishes its guardrail
    message; guardrails and send post it once, into the channel, indexed by its place; a
    replayed open journals and publishes nothing more."""
    did = world.open()
    tracking = rules.post_tracking_id(did)
    entry = world.c.journal.get(tracking)
    assert entry is not None and entry["state"] == "decided" and entry["seatId"] == "scout"
    assert entry["decision"]["reasonCode"] == "direction_posted"
    assert world.c.redis.zscore(keys.JOURNAL_OPEN, tracking) is not None
    [queued] = world.queued(Queue.GUARDRAILS)
    assert queued["id"] == f"{tracking}:guardrails"
    # its accept-to-final latency is measured from when it was journalled
    assert queued["arg"]["acceptedAtMs"] == int(entry["acceptedAtMs"])
    assert world.open() == did  # the replay
    assert len(world.queued(Queue.GUARDRAILS)) == 1
    ts = world.post()
    entry = world.c.journal.get(tracking)
    assert entry is not None and entry["state"] == "engaged"
    assert world.c.ledger.sent_at(CHANNEL, ts) == {
        "workId": rules.work_id(did),
        "trackingId": tracking,
        "seatId": "scout",
        "opId": tracking,
    }
    [line] = (tmp_path / "outbox.jsonl").read_text().splitlines()
    sent = json.loads(line)
    assert sent["channelId"] == CHANNEL and sent["surface"] == "existing_channel"
    assert sent["messageId"] == ts and sent["workId"] == rules.work_id(did)
    assert "Reply in this thread with *for* or *against*" in sent["body"]
    assert "Adopt the new billing API" in sent["body"]
    # the seats still hear of it in their inboxes, as without a channel
    assert world.c.redis.xlen(keys.inbox("sage")) == 1


def test_a_persons_reply_is_their_vote_weighing_two(world: World) -> None:
    """bo's `against: ...` reply is bo's vote (option 1, weight 2, its reason); the same
    delivery again counts once; bo's later `for` changes it; the audit log says so."""
    did = world.open()
    ts = world.post()
    assert world.reply(ts, "against: not before the release") == 200
    view = world.direction(did)
    assert view["yourVote"]["option"] == 1 and view["yourVote"]["weight"] == 2
    assert view["yourVote"]["kind"] == "human" and view["yourVoteRevision"] == 1
    assert view["yourVote"]["reason"] == "not before the release"
    world.reply(ts, "against: not before the release", retry_of=1)  # Slack's retry
    assert world.last is not None
    world.stage(world.last)  # and the stage's message delivered twice
    assert world.direction(did)["yourVoteRevision"] == 1
    world.clock.now += 1000
    world.reply(ts, "<@W111> I vote for")
    view = world.direction(did)
    assert view["yourVote"]["option"] == 0 and view["yourVoteRevision"] == 2
    assert view["voteCount"] == 1
    voted = [e for e in world.log(did) if e["event"] == "voted"]
    assert [(e["by"], e["option"], e["weight"]) for e in voted] == [("bo", 1, 2), ("bo", 0, 2)]


def test_a_reply_that_is_not_counted_is_written_down_with_why(world: World) -> None:
    """Nothing in the thread is dropped unseen: a reply that is no vote, one from nobody in
    the org, one from a seat's own user, each leaves a `reply_not_counted` line with its code
    and place; none changes a vote."""
    did = world.open()
    ts = world.post()
    world.reply(ts, "for the record, I have not read it yet")
    world.reply(ts, "for", user="U0NOBODY")
    world.reply(ts, "for", user="W111")  # seat scout's Slack user
    notes = [e for e in world.log(did) if e["event"] == "reply_not_counted"]
    assert [(e["code"], e["by"], e["authorId"]) for e in notes] == [
        ("not_a_vote", "bo", "U0BO"),
        ("not_a_member", None, "U0NOBODY"),
        ("seat_not_person", "scout", "W111"),
    ]
    assert all(e["channelId"] == CHANNEL and e["messageId"] for e in notes)
    assert world.direction(did)["voteCount"] == 0


def test_a_reply_at_the_deadline_is_refused_and_the_result_recorded(world: World) -> None:
    """A vote exactly at the deadline is refused, as over the HTTP API: the result is
    recorded from the votes before it, and the refusal is in the log."""
    did = world.open()
    ts = world.post()
    world.reply(ts, "for")
    world.clock.now = NOW_MS + 600_000
    world.reply(ts, "against", user="U0AVA")
    view = world.direction(did)
    assert view["direction"]["state"] == "decided" and view["direction"]["result"]["winner"] == 0
    notes = [e for e in world.log(did) if e["event"] == "reply_not_counted"]
    assert [(e["code"], e["by"]) for e in notes] == [("voting_closed", "ava")]


def test_a_reply_is_judged_when_it_was_written_not_when_it_was_processed(
    world: World,
) -> None:
    """A backlog delays two of bo's replies past the deadline: the one written before it
    counts (nobody had recorded the result yet); one written at it is refused. And replies
    processed out of order: the older one, processed last, does not undo the newer."""
    did = world.open()
    ts = world.post()
    deadline = NOW_MS + 600_000
    world.clock.now = NOW_MS + 1_000
    world.reply(ts, "for", user="U0AVA")  # ava's newer reply first
    world.reply(ts, "against", user="U0AVA", written_ms=NOW_MS + 500)  # her older one after
    view = world.http.get(
        f"/v1/decisions/{did}", headers=OPERATOR, params={"memberId": "ava"}
    ).json()
    assert view["yourVote"]["option"] == 0 and view["yourVoteRevision"] == 1
    world.clock.now = deadline + 30_000
    world.reply(ts, "against", written_ms=deadline - 1_000)
    world.reply(ts, "for", user="U0AVA", written_ms=deadline)
    final = world.direction(did)
    assert final["yourVote"]["option"] == 1 and final["yourVote"]["atMs"] == deadline - 1_000
    assert final["direction"]["state"] == "tied"  # ava For (2) and bo Against (2)
    notes = [(e["code"], e["by"]) for e in world.log(did) if e["event"] == "reply_not_counted"]
    assert notes == [("superseded", "ava"), ("voting_closed", "ava")]


def test_a_reply_elsewhere_is_no_vote(world: World) -> None:
    """A reply in another thread, and the post's own echo, cast nothing and write nothing
    into any direction's log."""
    did = world.open()
    world.post()
    world.reply("1718040000.000001", "for")
    assert world.direction(did)["voteCount"] == 0
    assert [e["event"] for e in world.log(did)] == ["opened"]


def test_a_channel_the_org_file_does_not_list_is_refused_at_load(tmp_path: Path) -> None:
    text = ORG.replace(f"channelId: {CHANNEL}", "channelId: C999")
    with pytest.raises(
        ConfigError, match=re.escape("decisions.channelId: 'C999' is not a channel")
    ):
        parse_org(text, tmp_path / "org.yaml")
