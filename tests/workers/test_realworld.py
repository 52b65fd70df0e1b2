"""Every payload of tests/data/realworld (the providers' own SDK fixtures and webhook examples,
and the derived variants) sent signed to the real routes, in process, on a real Redis, and
the directedness stage run on what they queue: a 200 (or the documented 4xx), never a 5xx,
every accepted event final in its trace, the verdict a user of that provider expects for the
ones that address a seat, and a seat's own message never in its own inbox. The Slack
interactivity payloads (none of them a click on an ask's button) are sent form-encoded and
signed to the interactions route: each a 200 with an empty body that changes nothing.

The org is pass A of tests/data/realworld/README.md (Slack bot user W111 and GitHub
`octocat` are seat scout, U0LAN0Z89 is seat tally, `Codertocat` is a person) or pass B
(`Codertocat` is scout). The Slack app's `bot_id` (BZYBOTHED in bolt's fixtures) is learned
as `auth.test` reports it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote

import pytest
import redis
from fastapi.testclient import TestClient

from contracts.messages import InboundEnvelope
from pipeline.signatures import slack_headers
from tests.workers.test_webhooks import (
    GITHUB_SECRET,
    NOW_MS,
    NOW_S,
    SLACK_SECRET,
    TOKEN,
    queued,
    signed_github,
    signed_slack,
)
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.ingress.app import create_ingress
from workers.org import learn_slack_identity
from workers.queues import Queue
from workers.settings import Settings
from workers.stages.directedness import Directedness
from workers.stores import keys

if TYPE_CHECKING:
    import httpx2  # what Starlette's TestClient is built on (for the annotations only)

REALWORLD = Path(__file__).resolve().parents[1] / "data" / "realworld"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# What Slack's auth.test answers for the app in bolt's fixtures (test_events_ignore_self).
AUTH_TEST = {"ok": True, "user_id": "W111", "bot_id": "BZYBOTHED"}


def payloads(folder: str) -> list[Path]:
    return sorted((REALWORLD / folder).glob("*.json"))


def github_event(path: Path) -> str:
    """X-GitHub-Event for a file: `<event>.<example>.json` (tests/data/realworld/README.md),
    derived ones after their `github.` prefix."""
    name = path.name.removeprefix("github.")
    return name.split(".", 1)[0]


@dataclass
class Sent:
    """One payload's answer, and every seat's verdict on it once the stage has run."""

    name: str
    status: int
    answer: dict[str, Any]
    verdicts: dict[str, tuple[bool, str, str | None]] = field(default_factory=dict)
    state: str | None = None

    @property
    def outcome(self) -> str:
        return str(self.answer.get("status") or self.answer.get("error") or "?")


class World:
    """The ingress and the directedness stage over one container, as `seatwire up` runs them."""

    def __init__(self, client: TestClient, container: Container, r: redis.Redis) -> None:
        self.client = client
        self.container = container
        self.r = r
        self.stage = Directedness.of(container)
        self.deliveries = 0

    def send(self, path: Path, *, delivery: str | None = None, body: bytes | None = None) -> Sent:
        raw = body if body is not None else path.read_bytes()
        if path.name.startswith(("github", "issue", "pull", "push", "star", "workflow", "ping")):
            self.deliveries += 1
            headers = signed_github(
                raw, event=github_event(path), delivery=delivery or f"guid-{self.deliveries:04d}"
            )
            resp = self.client.post("/webhooks/github", content=raw, headers=headers)
        else:
            resp = self.client.post("/webhooks/slack", content=raw, headers=signed_slack(raw))
        sent = Sent(path.name, resp.status_code, _json(resp))
        self.drain()
        self.read_trace(sent)
        return sent

    def interact(self, path: Path) -> httpx2.Response:
        """An interactivity payload as Slack sends it: the form `payload=<URL-encoded JSON>`,
        signed over those raw bytes."""
        raw = f"payload={quote(json.dumps(json.loads(path.read_bytes())))}".encode()
        headers = {
            **slack_headers(raw, secret=SLACK_SECRET, now_s=NOW_S),
            "Content-Type": "application/x-www-form-urlencoded",
        }
        return self.client.post("/webhooks/slack/interactions", content=raw, headers=headers)

    def drain(self) -> None:
        """Run the directedness stage on every queued event, as a worker would."""
        for task in queued(self.r):
            self.stage(InboundEnvelope.model_validate(task["env"]))
        self.r.delete(Queue.DIRECTEDNESS.value)

    def read_trace(self, sent: Sent) -> None:
        delivery = sent.answer.get("deliveryId")
        if not delivery:
            return
        trace = self.client.get(f"/v1/trace/{delivery}", headers=AUTH).json()
        sent.state = trace["state"]
        sent.verdicts = {
            s["seatId"]: (s["directed"], s["reason"], s.get("surface")) for s in trace["seats"]
        }

    def inbox(self, seat: str) -> list[dict[str, Any]]:
        entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", self.r.xrange(keys.inbox(seat)))
        return [json.loads(f[b"item"]) for _id, f in entries]


def snapshot(r: redis.Redis) -> dict[bytes, Any]:
    """Every key's content, by type: equal snapshots mean nothing was written."""
    names = sorted(r.scan_iter(count=1000))
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
        b"stream": pipe.xrange,
        b"none": pipe.exists,
    }
    for name, kind in zip(names, types, strict=True):
        readers[kind](name)
    return dict(zip(names, pipe.execute(), strict=True))


def _json(resp: httpx2.Response) -> dict[str, Any]:
    try:
        body = resp.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _world(
    redis_url: str, tmp_path: Path, r: redis.Redis, org: str, *, learn: bool = True
) -> Iterator[World]:
    org_file = tmp_path / "org.yaml"
    org_file.write_text(org)
    settings = Settings(
        redis_url=redis_url,
        api_token=TOKEN,
        slack_signing_secret=SLACK_SECRET,
        github_webhook_secret=GITHUB_SECRET,
        outbox_path=tmp_path / "outbox.jsonl",
        org_file=org_file,
    )
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    if learn:  # as a process with the Slack adapter configured does after auth.test
        learn_slack_identity(container.org, AUTH_TEST)
    with TestClient(create_ingress(container, app, clock_ms=lambda: NOW_MS)) as client:
        yield World(client, container, r)


def org_text(name: str) -> str:
    return (REALWORLD / name).read_text()


@pytest.fixture
def world(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[World]:
    yield from _world(redis_url, tmp_path, redis_client, org_text("org.pass-a.yaml"))


@pytest.fixture
def world_b(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[World]:
    yield from _world(redis_url, tmp_path, redis_client, org_text("org.pass-b.yaml"))


ALL = [*payloads("slack"), *payloads("github"), *payloads("derived")]
FINAL = {"directed", "ambient", "skipped"}

# Pass A, every file in order (slack/, github/, derived/): the verdicts that address a seat,
# and every other seat ambient (or not visible). A duplicate (a fixture reusing another's ts,
# a second hook's copy) answers with the first delivery's verdicts.
DIRECTED_A: dict[str, dict[str, str]] = {
    "app_mention.bolt.shared_channels.json": {"scout": "mention"},
    "app_mention.bolt.test_app.json": {"scout": "mention"},
    "app_mention.slackgo.assistant_thread.json": {"tally": "mention"},
    "app_mention.slackgo.bot_with_file.json": {"tally": "mention"},
    "app_mention.slackgo.docs_example.json": {"tally": "mention"},
    "im.bolt.assistant_user_message.json": {"scout": "dm"},
    "pull_request.review_request_removed.json": {"scout": "review_request_removed"},
    "pull_request.review_requested.json": {"scout": "review_requested"},
    # scout was asked to review PR #2 (review_requested, earlier in file order): it follows it
    "pull_request_review.submitted.json": {"scout": "item_activity"},
    "pull_request_review.submitted.with-organization.json": {"scout": "item_activity"},
    "pull_request_review_comment.created.json": {"scout": "item_activity"},
    "pull_request_review_comment.created.with-organization.json": {"scout": "item_activity"},
    "github.issue_comment.mentions_seat.json": {"scout": "mention"},
    "github.issues.opened.mentions_seat.json": {"scout": "mention"},
    "slack.message_twin_of_app_mention.json": {"scout": "mention"},  # app_mention's twin
}


def directed(sent: Sent) -> dict[str, str]:
    return {seat: v[1] for seat, v in sent.verdicts.items() if v[0]}


def assert_no_own_message_in_any_inbox(world: World) -> None:
    """A seat's inbox holds nothing any identity of that seat wrote or did."""
    view, _ = world.container.org.current()
    for entry in view.roster.seats:
        mine = entry.aliases | entry.own
        for item in world.inbox(entry.member_id):
            candidate = item["candidate"]
            author = (candidate.get("msg") or {}).get("authorId") or (
                candidate.get("board") or {}
            ).get("actorId")
            assert str(author).strip().casefold() not in mine, (entry.member_id, item)


def test_every_payload_is_answered_200_and_ends_final_with_the_expected_verdicts(
    world: World,
) -> None:
    """Pass A, every payload in file order (136 when this was written; the folder grows):
    each is 200 (accepted, duplicate, skipped with its reason, or the provider's handshake),
    none 4xx or 5xx; every event journalled ends final; the seats addressed are exactly the
    ones a user expects; no own message is in its seat's inbox."""
    sent = [world.send(p) for p in ALL]
    assert len(sent) == len(ALL) >= 136
    assert {s.name: s.status for s in sent if s.status != 200} == {}
    assert [s.name for s in sent if s.answer.get("deliveryId") and s.state not in FINAL] == []
    got = {s.name: directed(s) for s in sent if directed(s)}
    assert got == DIRECTED_A
    assert_no_own_message_in_any_inbox(world)
    skipped = {s.name: s.answer.get("reason") for s in sent if s.outcome == "skipped"}
    for name in (
        "assistant_thread_started.bolt.json",
        "member_joined_channel.slackgo.json",
        "push.payload.json",
        "star.created.json",
        "workflow_run.completed.json",
        "pull_request_review.dismissed.json",
        "reaction_added.events_api.json",
    ):
        assert str(skipped[name]).startswith("unsupported_event:"), name
    print_figures(sent)


def test_pass_b_every_github_event_by_the_seat_is_its_own_echo(world_b: World) -> None:
    """Pass B (`Codertocat` is scout, who sends nearly every GitHub example): every one of
    them read by Seatwire is scout's own echo and none is in its inbox; octocat's review
    request is then a person's, so nothing is directed to scout on GitHub."""
    sent = [world_b.send(p) for p in ALL]
    assert {s.name: s.status for s in sent if s.status != 200} == {}
    github = [s for s in sent if s.name.startswith(("issue", "pull_request")) and s.verdicts]
    assert github and all(s.verdicts["scout"][1] == "own_echo" for s in github)
    assert_no_own_message_in_any_inbox(world_b)
    print_figures(sent)


INTERACTIONS = payloads("slack-interactions")


def test_every_interactivity_payload_is_200_empty_and_changes_nothing(world: World) -> None:
    """Every file of slack-interactions/ (block_actions in a channel, a thread, a DM, an
    attachment, an app unfurl, App Home and modals; view_submission, view_closed, shortcuts,
    message actions), signed and form-encoded as Slack sends it: 200 with an empty body, and
    nothing written (none is a click on an ask's button), whichever seat's alias clicked."""
    assert len(INTERACTIONS) >= 24
    before = snapshot(world.r)
    answers = {p.name: world.interact(p) for p in INTERACTIONS}
    assert {n: r.status_code for n, r in answers.items() if r.status_code != 200} == {}
    assert {n: r.content for n, r in answers.items() if r.content} == {}
    assert snapshot(world.r) == before


def print_figures(sent: list[Sent]) -> None:
    """The figures the report quotes (pytest -s shows them)."""
    outcomes: dict[str, int] = {}
    for s in sent:
        outcomes[f"{s.status} {s.outcome}"] = outcomes.get(f"{s.status} {s.outcome}", 0) + 1
    verdicts: dict[str, int] = {}
    for s in sent:
        for v in s.verdicts.values():
            verdicts[v[1]] = verdicts.get(v[1], 0) + 1
    print(
        "\nanswers:", dict(sorted(outcomes.items())), "\nverdicts:", dict(sorted(verdicts.items()))
    )


# ------------------------------------------------------------------- what users see, in turn


def test_the_apps_own_bot_message_naming_the_seat_is_its_own_echo(world: World) -> None:
    """Issue 11 item 1: a bot_message carrying only the app's bot_id (a response_url post)
    that names the seat is `own_echo`, learned from auth.test, and never in its inbox."""
    sent = world.send(REALWORLD / "derived" / "slack.own_bot_message_names_seat.json")
    assert sent.verdicts["scout"] == (False, "own_echo", None)
    assert world.inbox("scout") == []
    other = world.send(REALWORLD / "slack" / "bot_message.bolt.other.json")
    assert other.verdicts["scout"][1] == "ambient"  # another app's bot is not scout


def test_the_bot_id_can_be_set_in_the_org_file(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Without auth.test, `slackBotId` on the seat does the same."""
    org = org_text("org.pass-a.yaml").replace(
        "  - memberId: scout\n", "  - memberId: scout\n    slackBotId: BZYBOTHED\n"
    )
    assert "slackBotId" in org
    for w in _world(redis_url, tmp_path, redis_client, org, learn=False):
        sent = w.send(REALWORLD / "derived" / "slack.own_bot_message_names_seat.json")
        assert sent.verdicts["scout"] == (False, "own_echo", None)
        assert w.inbox("scout") == []


def test_without_the_bot_id_the_same_post_would_reach_the_seat(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """The control: with neither auth.test nor the org file naming the bot_id, the post is
    `named` (what issue 11 found), so the two tests above are what makes it an echo."""
    for w in _world(redis_url, tmp_path, redis_client, org_text("org.pass-a.yaml"), learn=False):
        sent = w.send(REALWORLD / "derived" / "slack.own_bot_message_names_seat.json")
        assert sent.verdicts["scout"] == (True, "named", "mention")


def test_a_seat_mentioned_in_an_issue_follows_its_later_comments(world: World) -> None:
    """Issue 11 item 2: mentioned in an issue comment, the seat hears the next comment on
    that issue as a thread reply."""
    first = world.send(REALWORLD / "derived" / "github.issue_comment.mentions_seat.json")
    later = world.send(REALWORLD / "github" / "issue_comment.created.with-organization.json")
    assert first.verdicts["scout"] == (True, "mention", "mention")
    assert later.verdicts["scout"] == (True, "item_activity", "thread_reply")
    assert [i["reason"] for i in world.inbox("scout")] == ["mention", "item_activity"]


def test_a_seat_that_commented_on_a_pull_request_hears_its_review_comments(
    world: World,
) -> None:
    """The seat's own comment on PR #2 is its echo and makes it follow the PR: the review
    comment and the review after it reach it as thread replies."""
    own = world.send(REALWORLD / "derived" / "github.issue_comment.by_seat_on_pr2.json")
    comment = world.send(REALWORLD / "github" / "pull_request_review_comment.created.json")
    review = world.send(REALWORLD / "github" / "pull_request_review.submitted.json")
    assert own.verdicts["scout"] == (False, "own_echo", None)
    assert comment.verdicts["scout"] == (True, "item_activity", "thread_reply")
    assert review.verdicts["scout"] == (True, "item_activity", "thread_reply")
    assert len(world.inbox("scout")) == 2


def test_a_mention_in_a_new_issues_description_reaches_the_seat(world: World) -> None:
    """Issue 11 item 3: issues.opened is read; its description's @mention is a mention."""
    sent = world.send(REALWORLD / "derived" / "github.issues.opened.mentions_seat.json")
    assert sent.verdicts["scout"] == (True, "mention", "mention")


def test_a_changes_requested_review_of_the_seats_pull_request_reaches_it(
    world_b: World,
) -> None:
    """Issue 11 item 5: in pass B scout opened PR #2; octocat (a person there) requests
    changes: scout gets a `review` with the review state in the item."""
    doc = json.loads((REALWORLD / "github" / "pull_request_review.submitted.json").read_text())
    octocat = {"login": "octocat", "id": 583231, "type": "User"}
    doc["sender"] = doc["review"]["user"] = octocat
    doc["review"]["state"] = "changes_requested"
    body = json.dumps(doc).encode()
    sent = world_b.send(REALWORLD / "github" / "pull_request_review.submitted.json", body=body)
    assert sent.verdicts["scout"] == (True, "review_submitted", "review")
    [item] = world_b.inbox("scout")
    assert item["surface"] == "review"
    assert item["candidate"]["board"]["reviewState"] == "changes_requested"


def test_a_withdrawn_review_request_follows_the_request_in_the_inbox(world: World) -> None:
    """Issue 11 item 5: review_requested then review_request_removed: the seat's inbox holds
    the request and, after it, the item saying it was withdrawn."""
    world.send(REALWORLD / "github" / "pull_request.review_requested.json")
    world.send(REALWORLD / "github" / "pull_request.review_request_removed.json")
    items = world.inbox("scout")
    assert [i["reason"] for i in items] == ["review_requested", "review_request_removed"]
    assert "withdrawn" in items[1]["why"]


def test_one_event_through_the_repository_and_the_organisation_hook_is_one_delivery(
    world: World,
) -> None:
    """Issue 11 item 6: the same comment through two hooks (two X-GitHub-Delivery ids, the
    second body naming the organisation) is accepted once and reaches the inbox once."""
    world.send(REALWORLD / "derived" / "github.issue_comment.mentions_seat.json")
    repo = world.send(REALWORLD / "github" / "issue_comment.created.json", delivery="hook-repo")
    org = world.send(
        REALWORLD / "github" / "issue_comment.created.with-organization.json", delivery="hook-org"
    )
    assert (repo.outcome, org.outcome) == ("accepted", "duplicate")
    assert repo.answer["deliveryId"] == org.answer["deliveryId"]
    assert [i["reason"] for i in world.inbox("scout")] == ["mention", "item_activity"]


@pytest.mark.parametrize(
    "name",
    [
        "slack/assistant_thread_started.bolt.json",
        "slack/reaction_added.bolt.json",
        "slack/member_joined_channel.bolt.json",
        "github/push.payload.json",
        "github/star.created.json",
        "github/workflow_run.completed.json",
        "github/pull_request_review.dismissed.json",
    ],
)
def test_an_event_seatwire_does_not_read_is_200_skipped_with_its_type(
    world: World, name: str
) -> None:
    """Issue 11 item 4: 200 `skipped` with `unsupported_event:<type>` in the answer, the
    journal and the trace; never a 4xx."""
    sent = world.send(REALWORLD / name)
    assert (sent.status, sent.outcome) == (200, "skipped")
    reason = sent.answer["reason"]
    assert reason.startswith("unsupported_event:")
    trace = world.client.get(f"/v1/trace/{sent.answer['deliveryId']}", headers=AUTH).json()
    assert (trace["state"], trace["reason"]) == ("skipped", reason)
