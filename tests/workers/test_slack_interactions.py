"""Answers from Slack buttons, end to end on a real Redis: asks made by the real stages and
posted through the Slack adapter to the fake Slack (with their buttons), then clicks signed as
Slack signs them, form-encoded, posted to `POST /webhooks/slack/interactions`. The answer is
recorded once with the seat's inbox item, the message changed in place (the fake's
`chat.update` record), and what changed nothing told to the clicker alone through the
payload's `response_url` (a small local receiver here)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest
import redis
from fastapi.testclient import TestClient

from contracts import WorkReport
from contracts.asks import Ask, AskLanding, EscalationStep
from contracts.engagement import Target
from contracts.messages import DecisionEnvelope, OutboundAsk, ReservedEnvelope, WorkEnvelope
from pipeline.asks import (
    DEFAULT_CONSENT_TTL_MS,
    DEFAULT_SNOOZE_MS,
    AnswerIn,
    escalated,
    landed,
    withdrawn,
)
from pipeline.signatures import slack_headers
from pipeline.slack_buttons import WEEK_MS
from tests.fake_slack import FakeSlack, Post, Update
from tests.fakes import BLOCKED_REPORT, Clock
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.ingress.app import create_ingress
from workers.ingress.ratelimit import slack_interactions_source
from workers.outbound.base import SendContext
from workers.settings import BUNDLED_ORG, Settings
from workers.stages import Stages
from workers.stores.asks import AskStore
from workers.stores.inbox import Inbox

if TYPE_CHECKING:
    import httpx2

NOW = 1_800_000_000_000
SECRET = "test-slack-signing-secret"
TOKEN = "test-token"
ROUTE = "/webhooks/slack/interactions"
FORM = "application/x-www-form-urlencoded"

CONSENT: dict[str, Any] = {
    "id": "drop-legacy-table",
    "title": "Drop the legacy invoices table",
    "scope": "billing database",
    "risk": {"irreversible": True},
    "approverId": "ben",
}
REVIEW: dict[str, Any] = {
    "id": "release-notes",
    "title": "Release notes for 4.2",
    "scope": "security review",
    "review": {"required": True, "kind": "security", "reviewerId": "chloe"},
}
COMMITMENT: dict[str, Any] = {
    "id": "onboarding-flow",
    "title": "Onboarding flow",
    "commitment": {"toMemberId": "emil", "atRisk": True},
}


class Replies:
    """A stand-in for Slack's response_url: records every JSON body posted to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                owner.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/actions/T0SEATWIRE/1/secret"

    def __enter__(self) -> Replies:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@dataclass
class Rig:
    client: TestClient
    container: Container
    stages: Stages
    slack: FakeSlack
    replies: Replies
    clock: Clock
    r: redis.Redis

    @property
    def asks(self) -> AskStore:
        return self.container.asks

    def ask(self, report: dict[str, Any], tracking: str = "t-1") -> tuple[Ask, Post]:
        """The report through engagement, guardrails and send (the Slack adapter, posting to
        the fake): its ask as recorded, and the message it became."""
        self.stages.journal.accept(
            tracking, kind="work", seat_id="scout", payload="{}", now_ms=NOW, fingerprint="f"
        )
        env = WorkEnvelope(
            tracking_id=tracking,
            seat_id="scout",
            accepted_at_ms=NOW,
            report=WorkReport.model_validate(report),
        )
        decided = self.stages.engagement(env)
        assert isinstance(decided, DecisionEnvelope)
        reserved = self.stages.guardrails(decided)
        assert isinstance(reserved, ReservedEnvelope)
        assert self.stages.send(reserved) == "engaged"
        [ask] = self.asks.of_work(report["id"])
        assert ask.landing is not None
        [post] = [p for p in self.slack.posts() if p.ts == ask.landing.message_id]
        return ask, post

    def stored(self, ask_id: str) -> Ask:
        ask = self.asks.get(ask_id)
        assert ask is not None
        return ask

    def click(self, post: Post, action_id: str, user: str, **kw: Any) -> httpx2.Response:
        return self.post(click_payload(post, action_id, user, self.replies.url), **kw)

    def post(
        self, payload: dict[str, Any], *, stamp: int | None = None, secret: str = SECRET
    ) -> httpx2.Response:
        body = form(payload)
        return self.client.post(ROUTE, content=body, headers=signed(body, stamp, secret))

    def inbox(self) -> list[Any]:
        return list(Inbox(self.r).updates("scout").items)


def snapshot(r: redis.Redis) -> dict[bytes, Any]:
    """Every key's content, by type (streams too: an inbox is one): equal snapshots mean
    nothing was written."""
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


def form(payload: dict[str, Any]) -> bytes:
    """As Slack sends an interaction: `payload=<URL-encoded JSON>`."""
    return f"payload={quote(json.dumps(payload))}".encode()


def signed(body: bytes, stamp: int | None = None, secret: str = SECRET) -> dict[str, str]:
    headers = slack_headers(body, secret=secret, now_s=NOW // 1000 if stamp is None else stamp)
    return {**headers, "Content-Type": FORM}


def button(post: Post | Update, action_id: str) -> tuple[str, dict[str, Any]]:
    """The actions block's id and the button with `action_id` in a posted message."""
    for block in post.blocks or ():
        for element in block.get("elements", ()):
            if element.get("action_id") == action_id:
                return block["block_id"], element
    raise AssertionError(f"no button {action_id} in {post.blocks}")


def click_payload(
    post: Post | Update, action_id: str, user: str, response_url: str
) -> dict[str, Any]:
    """A block_actions payload shaped like Slack's (bolt-python's channel_button fixture), for
    a click by `user` on a button of `post`."""
    block_id, element = button(post, action_id)
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": "T0SW"},
        "api_app_id": "A0SEATWIRE",
        "token": "verification_token",
        "container": {
            "type": "message",
            "message_ts": post.ts,
            "channel_id": post.channel,
            "is_ephemeral": False,
        },
        "trigger_id": "111.222.valid",
        "team": {"id": "T0SW", "domain": "seatwire"},
        "channel": {"id": post.channel, "name": "directmessage"},
        "message": {"type": "message", "ts": post.ts, "text": post.text, "blocks": post.blocks},
        "response_url": response_url,
        "actions": [
            {
                "action_id": action_id,
                "block_id": block_id,
                "text": element["text"],
                "value": element["value"],
                "type": "button",
                "action_ts": "1800000001.000100",
            }
        ],
    }


@pytest.fixture
def rig(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[Rig]:
    with FakeSlack() as slack, Replies() as replies:
        settings = Settings(
            redis_url=redis_url,
            api_token=TOKEN,
            slack_signing_secret=SECRET,
            outbound="slack",
            slack_bot_token=slack.token,
            slack_api_url=slack.url,
            outbox_path=tmp_path / "outbox.jsonl",
            org_file=BUNDLED_ORG,
        )
        app = create_app(settings, register=False)
        container = bootstrap.build_container(settings, app=app)
        clock = Clock(NOW)
        stages = Stages(
            journal=container.journal,
            ledger=container.ledger,
            org=container.org,
            outbound=container.outbound,
            inbound=container.inbound,
            clock_ms=clock,
            lease_ms=30_000,
            asks=container.asks,
        )
        with TestClient(create_ingress(container, app, clock_ms=clock)) as client:
            yield Rig(client, container, stages, slack, replies, clock, redis_client)


def actions_of(blocks: list[Any] | None) -> list[str]:
    return [e["action_id"] for b in blocks or () if b["type"] == "actions" for e in b["elements"]]


def context_of(blocks: list[Any] | None) -> str:
    return " ".join(
        e["text"] for b in blocks or () if b["type"] == "context" for e in b["elements"]
    )


# ------------------------------------------------------------------------- a click answers


def test_a_signed_click_approves_the_consent_and_the_message_shows_it(rig: Rig) -> None:
    ask, post = rig.ask(CONSENT)
    rig.clock.ms = NOW + 60_000
    resp = rig.click(post, "seatwire_answer:approved", "U0BEN")
    assert (resp.status_code, resp.content) == (200, b"")
    stored = rig.stored(ask.id)
    assert stored.state == "answered" and stored.answer is not None
    assert (stored.answer.answer, stored.answer.by, stored.answer.via) == (
        "approved",
        "ben",
        "slack_button",
    )
    assert stored.answer.consent_expires_at_ms == NOW + 60_000 + DEFAULT_CONSENT_TTL_MS
    [item] = rig.inbox()
    assert item.kind == "ask_answered" and item.ask is not None
    assert (item.ask.ask_id, item.ask.answer, item.ask.by) == (ask.id, "approved", "ben")
    [update] = rig.slack.updates()
    assert (update.channel, update.ts) == (post.channel, post.ts)
    assert actions_of(update.blocks) == ["seatwire_revoke"]  # answered: no answer buttons
    line = context_of(update.blocks)
    assert line.startswith("*Approved* by <@U0BEN> on <!date^1800000060^")
    assert "consent on record until <!date^" in line
    assert "Approved" in update.text and "2027-01-15 08:01 UTC" in update.text
    assert rig.replies.bodies == []  # nothing to tell the clicker alone


def test_approve_for_a_week_gives_the_consent_a_week(rig: Rig) -> None:
    ask, post = rig.ask(CONSENT)
    assert rig.click(post, "seatwire_answer:approved:week", "U0BEN").status_code == 200
    stored = rig.stored(ask.id)
    assert stored.answer is not None
    assert stored.answer.consent_expires_at_ms == NOW + WEEK_MS
    [consent] = rig.asks.consents_for(CONSENT["id"])
    assert consent.expires_at_ms == NOW + WEEK_MS and consent.by == "ben"


def test_a_reviews_request_changes_is_declined(rig: Rig) -> None:
    ask, post = rig.ask(REVIEW)
    assert actions_of(post.blocks) == ["seatwire_answer:approved", "seatwire_answer:declined"]
    assert rig.click(post, "seatwire_answer:declined", "U0CHLOE").status_code == 200
    stored = rig.stored(ask.id)
    assert stored.answer is not None and stored.answer.answer == "declined"
    assert stored.answer.by == "chloe"
    [update] = rig.slack.updates()
    assert context_of(update.blocks).startswith("*Changes requested* by <@U0CHLOE>")
    assert [i.ask.answer for i in rig.inbox() if i.ask] == ["declined"]


def test_done_answers_a_commitment_at_risk(rig: Rig) -> None:
    ask, post = rig.ask(COMMITMENT)
    assert actions_of(post.blocks) == ["seatwire_answer:done", "seatwire_answer:snoozed"]
    assert rig.click(post, "seatwire_answer:done", "U0EMIL").status_code == 200
    assert rig.stored(ask.id).state == "answered"


def test_snooze_keeps_the_buttons_and_says_until_when(rig: Rig) -> None:
    ask, post = rig.ask(dict(BLOCKED_REPORT))
    assert actions_of(post.blocks) == ["seatwire_answer:done", "seatwire_answer:snoozed"]
    assert rig.click(post, "seatwire_answer:snoozed", "U0BEN").status_code == 200
    stored = rig.stored(ask.id)
    assert stored.state == "snoozed" and stored.snooze_until_ms == NOW + DEFAULT_SNOOZE_MS
    [update] = rig.slack.updates()
    assert actions_of(update.blocks) == actions_of(post.blocks)  # still answerable
    until = (NOW + DEFAULT_SNOOZE_MS) // 1000
    assert context_of(update.blocks).startswith(f"*Snoozed* by <@U0BEN> until <!date^{until}^")
    [item] = rig.inbox()
    assert item.ask is not None and item.ask.answer == "snoozed"
    # Snoozed, still open: Done later answers it.
    assert rig.click(post, "seatwire_answer:done", "U0BEN").status_code == 200
    assert rig.stored(ask.id).state == "answered"
    assert actions_of(rig.slack.updates()[-1].blocks) == []


def test_a_click_on_an_escalation_answers_the_seats_ask_and_both_messages_show_it(
    rig: Rig,
) -> None:
    """Ben did not answer; the consent went one rung up to Ava in an ask of its own. Ava's
    click on that ask answers the seat's: one inbox item, and both messages lose their
    buttons and say who answered."""
    root, root_post = rig.ask(CONSENT)
    up_id = f"{root.id}:up1"
    step = EscalationStep(
        level=1, target_id="ava", rung="target_supervisor", at_ms=NOW + 10, tracking_id="t-up"
    )
    rig.asks.update(root.id, lambda a: escalated(a, step, "ben did not answer", now_ms=NOW + 10))
    up = root.model_copy(
        update={
            "id": up_id,
            "targets": (Target(member_id="ava"),),
            "dedupe_key": "up-dk",
            "tracking_id": "t-up",
            "state": "pending",
            "landing": None,
            "escalates": root.id,
            "level": 1,
            "history": (),
            "version": 0,
        }
    )
    assert rig.asks.create(up)[0]
    sent = rig.container.outbound.send(
        OutboundAsk(
            idempotency_id="engage-up-dk-1",
            tracking_id="t-up",
            seat_id="scout",
            work_id=root.work_id,
            attempt=1,
            surface="dm",
            member_ids=("ava",),
            body="**No answer from ben**: can you say yes or no?",
            ask_id=up_id,
            trigger=root.trigger,
        ),
        SendContext(now_ms=NOW + 10, since_ms=NOW + 10),
    )
    where = AskLanding(
        adapter="slack", channel_id=sent.channel_id, message_id=sent.message_id, at_ms=NOW + 10
    )
    rig.asks.update(up_id, lambda a: landed(a, where, now_ms=NOW + 10))
    [up_post] = [p for p in rig.slack.posts() if p.ts == sent.message_id]
    assert rig.click(up_post, "seatwire_answer:approved", "U0AVA").status_code == 200
    stored = rig.stored(root.id)
    assert stored.answer is not None and stored.answer.by == "ava"
    assert [i.ask.ask_id for i in rig.inbox() if i.ask] == [root.id]
    shown = {(u.channel, u.ts): u for u in rig.slack.updates()}
    assert set(shown) == {(root_post.channel, root_post.ts), (up_post.channel, up_post.ts)}
    for update in shown.values():
        # No answer buttons; both offer to revoke the one consent, recorded on the seat's ask.
        assert actions_of(update.blocks) == ["seatwire_revoke"]
        assert update.blocks is not None
        assert update.blocks[-1]["block_id"] == f"seatwire_consent:consent-{root.id[4:]}"
        assert context_of(update.blocks).startswith("*Approved* by <@U0AVA>")


# --------------------------------------------------------------- clicks that change nothing


def test_a_forged_click_is_401_and_changes_nothing(rig: Rig) -> None:
    ask, post = rig.ask(CONSENT)
    before = snapshot(rig.r)
    body = form(click_payload(post, "seatwire_answer:approved", "U0BEN", rig.replies.url))
    forged = rig.client.post(ROUTE, content=body, headers=signed(body, secret="not-the-secret"))
    assert forged.status_code == 401 and forged.json()["error"] == "bad_signature"
    assert forged.headers["X-Slack-No-Retry"] == "1"
    tampered = signed(body)
    changed = body.replace(b"U0BEN", b"U0JOE")  # the signature no longer covers the body
    assert rig.client.post(ROUTE, content=changed, headers=tampered).status_code == 401
    unsigned = rig.client.post(ROUTE, content=body, headers={"Content-Type": FORM})
    assert unsigned.status_code == 401
    assert snapshot(rig.r) == before
    assert rig.stored(ask.id).state == "open"
    assert rig.slack.updates() == [] and rig.replies.bodies == []


def test_a_stale_click_is_401_and_changes_nothing(rig: Rig) -> None:
    ask, post = rig.ask(CONSENT)
    before = snapshot(rig.r)
    stale = rig.click(post, "seatwire_answer:approved", "U0BEN", stamp=NOW // 1000 - 301)
    assert stale.status_code == 401 and stale.json()["error"] == "stale_timestamp"
    ahead = rig.click(post, "seatwire_answer:approved", "U0BEN", stamp=NOW // 1000 + 301)
    assert ahead.status_code == 401
    assert snapshot(rig.r) == before
    assert rig.stored(ask.id).state == "open" and rig.slack.updates() == []


def test_a_consent_clicked_by_someone_else_is_told_so_and_stays_open(rig: Rig) -> None:
    ask, post = rig.ask(CONSENT)
    before = snapshot(rig.r)
    resp = rig.click(post, "seatwire_answer:approved", "U0JO")
    assert (resp.status_code, resp.content) == (200, b"")
    assert snapshot(rig.r) == before
    assert rig.stored(ask.id).state == "open"
    [reply] = rig.replies.bodies
    assert reply["response_type"] == "ephemeral" and reply["replace_original"] is False
    assert reply["text"].startswith("This ask is for <@U0BEN>")
    assert rig.slack.updates() == [] and rig.inbox() == []


def test_a_double_click_is_one_answer_and_a_late_answer(rig: Rig) -> None:
    ask, post = rig.ask(CONSENT)
    assert rig.click(post, "seatwire_answer:approved", "U0BEN").status_code == 200
    rig.clock.ms = NOW + 1_000
    assert rig.click(post, "seatwire_answer:declined", "U0BEN").status_code == 200
    stored = rig.stored(ask.id)
    assert stored.answer is not None and stored.answer.answer == "approved"
    assert [e.event for e in stored.history][-2:] == ["answered", "late_answer"]
    assert len(rig.inbox()) == 1
    [reply] = rig.replies.bodies
    assert reply["text"].startswith("Already answered: approved by <@U0BEN> on <!date^")
    # Both clicks' messages say the first answer (the second heals a failed update): no
    # answer buttons, only the approved consent's "Revoke consent".
    assert all(actions_of(u.blocks) == ["seatwire_revoke"] for u in rig.slack.updates())


def test_two_people_answering_one_ask_make_one_answer(rig: Rig) -> None:
    ask, post = rig.ask(dict(BLOCKED_REPORT))
    assert rig.click(post, "seatwire_answer:done", "U0BEN").status_code == 200
    assert rig.click(post, "seatwire_answer:snoozed", "U0AVA").status_code == 200
    stored = rig.stored(ask.id)
    assert stored.state == "answered" and stored.answer is not None
    assert stored.answer.by == "ben"
    late = stored.history[-1]
    assert (late.event, late.by) == ("late_answer", "ava")
    assert len(rig.inbox()) == 1
    [reply] = rig.replies.bodies
    assert "Already answered: done by <@U0BEN>" in reply["text"]


def test_a_click_on_a_closed_ask_is_told_so(rig: Rig) -> None:
    ask, post = rig.ask(dict(BLOCKED_REPORT))
    rig.asks.update(ask.id, lambda a: withdrawn(a, "the work moved on", now_ms=NOW + 1))
    before = snapshot(rig.r)
    assert rig.click(post, "seatwire_answer:done", "U0BEN").status_code == 200
    assert snapshot(rig.r) == before
    [reply] = rig.replies.bodies
    assert reply["text"].startswith("This ask is closed (the work moved on)")
    [update] = rig.slack.updates()  # the message no longer offers buttons
    assert actions_of(update.blocks) == []
    assert context_of(update.blocks) == "*Closed*: the work moved on"


def test_a_click_on_an_unknown_ask_is_told_so(rig: Rig) -> None:
    _ask, post = rig.ask(dict(BLOCKED_REPORT))
    payload = click_payload(post, "seatwire_answer:done", "U0BEN", rig.replies.url)
    payload["actions"][0]["block_id"] = "seatwire_ask:ask-nope-1"
    payload["actions"][0]["value"] = "ask-nope-1|done"
    before = snapshot(rig.r)
    assert rig.post(payload).status_code == 200
    assert snapshot(rig.r) == before
    [reply] = rig.replies.bodies
    assert reply["text"] == "Seatwire has no ask ask-nope-1: your click changes nothing."


def test_a_clicker_nobody_in_the_org_changes_nothing(rig: Rig) -> None:
    ask, post = rig.ask(dict(BLOCKED_REPORT))
    before = snapshot(rig.r)
    assert rig.click(post, "seatwire_answer:done", "U9STRANGER").status_code == 200
    assert snapshot(rig.r) == before
    assert rig.stored(ask.id).state == "open"
    [reply] = rig.replies.bodies
    assert "does not know your Slack user" in reply["text"]


def test_an_answer_by_another_path_first_makes_the_click_late(rig: Rig) -> None:
    ask, post = rig.ask(CONSENT)
    rig.asks.answer(ask.id, AnswerIn("declined", "ben", "api"), now_ms=NOW + 5)
    assert rig.click(post, "seatwire_answer:approved", "U0BEN").status_code == 200
    stored = rig.stored(ask.id)
    assert stored.answer is not None and stored.answer.answer == "declined"
    assert stored.history[-1].event == "late_answer"
    assert "Already answered: declined by <@U0BEN>" in rig.replies.bodies[0]["text"]


# ------------------------------------------------------------- what is not a click of ours


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "view_submission", "user": {"id": "U0BEN"}, "view": {"id": "V1"}},
        {"type": "view_closed", "user": {"id": "U0BEN"}, "view": {"id": "V1"}},
        {"type": "shortcut", "user": {"id": "U0BEN"}, "callback_id": "x"},
        {"type": "message_action", "user": {"id": "U0BEN"}, "channel": {"id": "C1"}},
        {"type": "block_actions", "user": {"id": "U0BEN"}, "actions": []},
        {"type": 7},
        {},
    ],
)
def test_every_other_interaction_is_200_empty_and_changes_nothing(
    rig: Rig, payload: dict[str, Any]
) -> None:
    ask, _post = rig.ask(CONSENT)
    before = snapshot(rig.r)
    resp = rig.post(payload)
    assert (resp.status_code, resp.content) == (200, b"")
    assert snapshot(rig.r) == before
    assert rig.stored(ask.id).state == "open"
    assert rig.slack.updates() == [] and rig.replies.bodies == []


def test_our_button_in_a_view_or_without_a_message_changes_nothing(rig: Rig) -> None:
    ask, post = rig.ask(CONSENT)
    before = snapshot(rig.r)
    in_view = click_payload(post, "seatwire_answer:approved", "U0BEN", rig.replies.url)
    in_view["container"] = {"type": "view", "view_id": "V1"}
    in_view["view"] = {"id": "V1"}
    bare = click_payload(post, "seatwire_answer:approved", "U0BEN", rig.replies.url)
    for name in ("container", "channel", "message"):
        del bare[name]
    forged_value = click_payload(post, "seatwire_answer:approved", "U0BEN", rig.replies.url)
    forged_value["actions"][0]["value"] = "ask-other-1|approved"  # not its block's ask
    for payload in (in_view, bare, forged_value):
        assert rig.post(payload).status_code == 200
    assert snapshot(rig.r) == before
    assert rig.stored(ask.id).state == "open" and rig.replies.bodies == []


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"", "invalid_form"),
        (b"token=x&team_id=T1", "invalid_form"),
        (b"payload=a&payload=b", "invalid_form"),
        (b"payload=not%20json", "invalid_json"),
        (b"payload=%5B1%2C2%5D", "invalid_json"),
        (b'{"type": "block_actions"}', "invalid_form"),
    ],
)
def test_a_signed_body_without_a_json_payload_is_400(rig: Rig, body: bytes, error: str) -> None:
    before = snapshot(rig.r)
    resp = rig.client.post(ROUTE, content=body, headers=signed(body))
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"] == error and resp.json()["message"]
    assert resp.headers["X-Slack-No-Retry"] == "1"
    assert snapshot(rig.r) == before


def test_a_body_over_the_cap_is_413(rig: Rig) -> None:
    body = form({"type": "view_submission", "pad": "x" * rig.container.settings.max_body_bytes})
    resp = rig.client.post(ROUTE, content=body, headers=signed(body))
    assert resp.status_code == 413


def test_the_rate_limit_knows_the_team_of_a_signed_click_only() -> None:
    settings = Settings(slack_signing_secret=SECRET)
    body = form({"type": "block_actions", "team": {"id": "T0SW"}, "user": {"team_id": "T9"}})
    headers = signed(body)
    from starlette.datastructures import Headers

    assert (
        slack_interactions_source(Headers(headers), body, settings, NOW // 1000)
        == "slack-interactions:team:T0SW"
    )
    org_wide = form({"type": "shortcut", "team": None, "enterprise": {"id": "E1"}})
    assert (
        slack_interactions_source(Headers(signed(org_wide)), org_wide, settings, NOW // 1000)
        == "slack-interactions:enterprise:E1"
    )
    forged = {**headers, "X-Slack-Signature": "v0=" + "0" * 64}
    assert slack_interactions_source(Headers(forged), body, settings, NOW // 1000) is None


def test_slack_sending_the_same_click_again_is_the_same_answer(rig: Rig) -> None:
    """A retry carries the click's own action_ts: the answer stands once, with no late
    answer written for it, and the seat hears of it once."""
    ask, post = rig.ask(dict(BLOCKED_REPORT))
    payload = click_payload(post, "seatwire_answer:done", "U0BEN", rig.replies.url)
    assert rig.post(payload).status_code == 200
    rig.clock.ms = NOW + 2_000
    assert rig.post(payload).status_code == 200
    stored = rig.stored(ask.id)
    assert [e.event for e in stored.history].count("answered") == 1
    assert "late_answer" not in [e.event for e in stored.history]
    assert len(rig.inbox()) == 1


# ------------------------------------------------------------------ revoking a consent


def revoke_payload(update: Post | Update, user: str, response_url: str) -> dict[str, Any]:
    """A click on the "Revoke consent" button of a message as the last chat.update left it."""
    return click_payload(update, "seatwire_revoke", user, response_url)


def approved(rig: Rig) -> tuple[Ask, Update]:
    """The consent asked of ben and approved by his click: the ask, and its message as the
    approval left it (with its "Revoke consent" button)."""
    ask, post = rig.ask(CONSENT)
    assert rig.click(post, "seatwire_answer:approved", "U0BEN").status_code == 200
    [update] = rig.slack.updates()
    return ask, update


def test_the_approver_revokes_by_click_and_the_seat_is_told(rig: Rig) -> None:
    ask, update = approved(rig)
    block_id, element = button(update, "seatwire_revoke")
    consent_id = f"consent-{ask.id.removeprefix('ask-')}"
    assert block_id == f"seatwire_consent:{consent_id}"
    assert element["value"] == f"{consent_id}|{ask.id}" and element["style"] == "danger"
    assert element["confirm"]["confirm"]["text"] == "Revoke"
    rig.clock.ms = NOW + 120_000

    resp = rig.post(revoke_payload(update, "U0BEN", rig.replies.url))
    assert (resp.status_code, resp.content) == (200, b"")

    consent = rig.asks.consent(consent_id)
    assert consent is not None
    assert (consent.revoked_by, consent.revoked_at_ms) == ("ben", NOW + 120_000)
    assert rig.asks.consents(now_ms=NOW + 120_000) == []  # no longer holds
    stored = rig.stored(ask.id)
    assert stored.state == "answered" and stored.answer is not None  # the answer stands
    assert stored.answer.consent_revoked_by == "ben"
    assert (stored.history[-1].event, stored.history[-1].reason_code) == (
        "revoked",
        "consent_revoked",
    )
    kinds = [i.kind for i in rig.inbox()]
    assert kinds == ["ask_answered", "consent_revoked"]
    item = rig.inbox()[-1]
    assert item.consent is not None
    assert (item.consent.consent_id, item.consent.ask_id, item.consent.revoked_by) == (
        consent_id,
        ask.id,
        "ben",
    )
    assert item.consent.approved_by == "ben" and item.consent.at_ms == NOW + 120_000
    shown = rig.slack.updates()[-1]
    assert (shown.channel, shown.ts) == (update.channel, update.ts)
    assert actions_of(shown.blocks) == []  # no button once revoked
    line = context_of(shown.blocks)
    assert line.startswith("*Approved* by <@U0BEN>")
    assert "consent revoked by <@U0BEN> on <!date^1800000120^" in line
    assert "consent on record" not in line
    assert rig.replies.bodies == []  # nothing to tell the clicker alone

    # A later report needing that consent asks ben again: nothing is on record any more.
    rig.clock.ms = NOW + 7 * 3_600_000  # hours later
    for tracking, revision in (("t-2", 1), ("t-3", 2)):
        rig.stages.journal.accept(
            tracking,
            kind="work",
            seat_id="scout",
            payload="{}",
            now_ms=rig.clock.ms,
            fingerprint="f",
        )
        env = WorkEnvelope(
            tracking_id=tracking,
            seat_id="scout",
            accepted_at_ms=rig.clock.ms,
            report=WorkReport.model_validate({**CONSENT, "revision": revision}),
        )
        decided = rig.stages.engagement(env)
        assert isinstance(decided, DecisionEnvelope), tracking
        assert decided.decision.engage
        assert decided.decision.reason_code != "consent_on_record"
        assert [t.member_id for t in decided.decision.targets] == ["ben"]


def test_someone_the_consent_was_not_asked_of_cannot_revoke_it(rig: Rig) -> None:
    ask, update = approved(rig)
    before = snapshot(rig.r)
    resp = rig.post(revoke_payload(update, "U0JO", rig.replies.url))
    assert (resp.status_code, resp.content) == (200, b"")
    assert snapshot(rig.r) == before
    [reply] = rig.replies.bodies
    assert reply["response_type"] == "ephemeral" and reply["replace_original"] is False
    assert reply["text"] == "Only <@U0BEN> can revoke this consent: your click changes nothing."
    assert len(rig.slack.updates()) == 1  # the message as the approval left it
    consent = rig.asks.consent(f"consent-{ask.id.removeprefix('ask-')}")
    assert consent is not None and consent.revoked_at_ms is None


def test_slack_sending_the_same_revoke_again_changes_nothing_more(rig: Rig) -> None:
    ask, update = approved(rig)
    payload = revoke_payload(update, "U0BEN", rig.replies.url)
    rig.clock.ms = NOW + 5_000
    assert rig.post(payload).status_code == 200
    after_first = snapshot(rig.r)
    rig.clock.ms = NOW + 8_000  # Slack's retry, a few seconds on
    assert rig.post(payload).status_code == 200
    assert snapshot(rig.r) == after_first
    assert [i.kind for i in rig.inbox()].count("consent_revoked") == 1
    stored = rig.stored(ask.id)
    assert [e.event for e in stored.history].count("revoked") == 1
    assert stored.answer is not None and stored.answer.consent_revoked_at_ms == NOW + 5_000
    [reply] = rig.replies.bodies
    assert reply["text"].startswith("This consent was already revoked by <@U0BEN> on <!date^")
    assert all(actions_of(u.blocks) == [] for u in rig.slack.updates()[1:])


def test_a_revoke_click_on_a_consent_not_kept_or_expired_is_told_so(rig: Rig) -> None:
    ask, update = approved(rig)
    unknown = revoke_payload(update, "U0BEN", rig.replies.url)
    unknown["actions"][0]["block_id"] = "seatwire_consent:consent-nope-1"
    unknown["actions"][0]["value"] = f"consent-nope-1|{ask.id}"
    before = snapshot(rig.r)
    assert rig.post(unknown).status_code == 200
    assert snapshot(rig.r) == before
    assert rig.replies.bodies[-1]["text"] == (
        "Seatwire has no consent consent-nope-1 (it is no longer kept): your click changes nothing."
    )
    rig.clock.ms = NOW + DEFAULT_CONSENT_TTL_MS + 1  # past the consent's day
    late = revoke_payload(update, "U0BEN", rig.replies.url)
    assert rig.post(late, stamp=rig.clock.ms // 1000).status_code == 200
    assert snapshot(rig.r) == before
    assert rig.replies.bodies[-1]["text"].startswith("This consent expired on <!date^")
