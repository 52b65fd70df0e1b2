"""An ask's life after it was sent, through the real stages on a real Redis: unanswered past
its timeout it goes one rung up (ben's supervisor ava, then the seat's supervisor gus) as an
`ask_unanswered` decision, then expires with its ledger row, never looping; an answer one rung
up answers the seat's ask; a snooze wakes; the nuisance brake holds a seat and asks its
operator once; a Slack thread reply and a GitHub comment or review answer the ask they reply
to; a seat that reports its work done withdraws its asks; two ticks at once go up once; a rung
in its person's quiet hours waits for them.

The tick is driven by its function with a test clock (never by beat's timing); the reports it
raises are captured as they are published and run through the stages by hand."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from contracts import SendPolicy, WorkReport
from contracts.asks import Ask
from contracts.inbound import Candidate
from contracts.messages import DecisionEnvelope, InboundEnvelope, ReservedEnvelope, WorkEnvelope
from contracts.send_gate import QuietHours
from pipeline.asks import AnswerIn, brake_report_id, when
from pipeline.normalise.github import normalise_github
from pipeline.normalise.slack import normalise_slack
from tests.fakes import BLOCKED_REPORT, Clock, FakeOutbound, stages_on
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.errors import Deferred
from workers.queues import Task
from workers.settings import BUNDLED_ORG, Settings
from workers.stages import Stages, asks_tick, report_intake
from workers.stages.answers import Answers
from workers.stages.asks_tick import AsksTick, AsksTickReport
from workers.stages.directedness import Directedness
from workers.stores.asks import AskStore
from workers.stores.inbound import inbound_tracking_id
from workers.stores.inbox import Inbox

pytestmark = pytest.mark.redis

NOW = 1_800_000_000_000  # 2027-01-15 08:00 UTC
HOUR = 3_600_000
TIMEOUT = 4 * HOUR  # a blocked ask's default timeout
PR = "https://github.com/acme/platform/pull/2"

# A Slack reply in a thread, in the shape of the Events API's `message` (a user's reply).
SLACK_REPLY: dict[str, Any] = {
    "token": "verification-token",
    "team_id": "T111",
    "api_app_id": "A111",
    "event": {
        "client_msg_id": "968c94da-c271-4f2a-8ec9-12a9985e5df4",
        "type": "message",
        "text": "Hi there! Thanks for sharing the info!",
        "user": "W111",
        "ts": "1610261659.001400",
        "thread_ts": "1610261600.000100",
        "parent_user_id": "U0SCOUT",
        "team": "T111",
        "channel": "C111",
        "event_ts": "1610261659.001400",
        "channel_type": "channel",
    },
    "type": "event_callback",
    "event_id": "Ev111",
    "event_time": 1610261659,
    "authorizations": [
        {"team_id": "T111", "user_id": "U0SCOUT", "is_bot": True, "is_enterprise_install": False}
    ],
    "is_ext_shared_channel": False,
    "event_context": "1-message-T111-C111",
}

_USER = {"login": "Codertocat", "id": 21031067, "type": "User", "site_admin": False}
_REPO = {
    "id": 186853002,
    "name": "platform",
    "full_name": "acme/platform",
    "private": False,
    "owner": {"login": "acme", "id": 1, "type": "Organization"},
}
# `pull_request_review.submitted`, cut to the fields read.
GITHUB_REVIEW: dict[str, Any] = {
    "action": "submitted",
    "review": {
        "id": 237895671,
        "node_id": "MDE3OlB1bGxSZXF1ZXN0UmV2aWV3MjM3ODk1Njcx",
        "user": _USER,
        "body": None,
        "commit_id": "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
        "submitted_at": "2019-05-15T15:20:38Z",
        "state": "commented",
        "html_url": "https://github.com/acme/platform/pull/2#pullrequestreview-237895671",
        "author_association": "OWNER",
    },
    "pull_request": {
        "id": 279147437,
        "number": 2,
        "state": "open",
        "title": "Update the README with new information.",
        "body": "This is a pretty simple change that we need to pull into master.",
        "user": _USER,
        "requested_reviewers": [],
        "assignees": [],
        "html_url": PR,
    },
    "repository": _REPO,
    "sender": _USER,
}
# `issue_comment.created`, cut to the fields read.
GITHUB_COMMENT: dict[str, Any] = {
    "action": "created",
    "issue": {
        "id": 444500041,
        "number": 1,
        "title": "Spelling error in the README file",
        "state": "open",
        "body": "It looks like you accidently spelled 'commit' with two 't's.",
        "user": _USER,
        "assignees": [],
        "html_url": "https://github.com/acme/platform/issues/1",
    },
    "comment": {
        "id": 492700400,
        "html_url": "https://github.com/acme/platform/issues/1#issuecomment-492700400",
        "created_at": "2019-05-15T15:20:21Z",
        "body": "You are totally right! I'll get this fixed right away.",
        "user": _USER,
        "author_association": "OWNER",
    },
    "repository": _REPO,
    "sender": _USER,
}


class Published:
    """The reports the tick and the brake raise, as they are published."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, app: object, task: Task, tracking: str, message: dict[str, Any]) -> None:
        self.messages.append((task.value, message))

    def take(self) -> list[WorkEnvelope]:
        taken = [WorkEnvelope.model_validate(m) for t, m in self.messages if t == Task.ENGAGEMENT]
        self.messages.clear()
        return taken


@dataclass
class World:
    c: Container
    stages: Stages
    clock: Clock
    outbound: FakeOutbound
    published: Published
    sent_reports: int = 0
    inbound_n: int = 0
    results: list[str] = field(default_factory=list)

    @property
    def asks(self) -> AskStore:
        return self.c.asks

    def report(self, report: dict[str, Any], tracking: str) -> DecisionEnvelope | None:
        """A seat's report through the engagement stage, as the ingress journals it."""
        self.c.journal.accept(
            tracking, kind="work", seat_id="scout", payload="{}", now_ms=NOW, fingerprint="f"
        )
        env = WorkEnvelope(
            tracking_id=tracking,
            seat_id="scout",
            accepted_at_ms=self.clock.ms,
            report=WorkReport.model_validate(report),
        )
        return self.stages.engagement(env)

    def through(self, decided: DecisionEnvelope | None) -> str:
        """An engaging decision through the guardrails and the send."""
        assert isinstance(decided, DecisionEnvelope)
        reserved = self.stages.guardrails(decided)
        assert isinstance(reserved, ReservedEnvelope)
        return self.stages.send(reserved)

    def ask(self, report: dict[str, Any], tracking: str) -> Ask:
        """A report that asks, sent; its ask."""
        assert self.through(self.report(report, tracking)) == "engaged"
        found = [a for a in self.asks.of_work(report["id"]) if a.tracking_id == tracking]
        assert len(found) == 1
        return found[0]

    def tick(self) -> AsksTickReport:
        return AsksTick(self.c, self.c.app, clock_ms=self.clock)()

    def raised(self) -> list[DecisionEnvelope | None]:
        """The reports raised since the last call, each through the engagement stage."""
        return [self.stages.engagement(env) for env in self.published.take()]

    def get(self, ask_id: str) -> Ask:
        ask = self.asks.get(ask_id)
        assert ask is not None
        return ask

    def inbound(self, candidate: Candidate) -> None:
        """An inbound event through the directedness stage, as the ingress journals it."""
        tracking = inbound_tracking_id(candidate.delivery_id)
        env = InboundEnvelope(
            tracking_id=tracking, accepted_at_ms=self.clock.ms, candidate=candidate
        )
        self.c.journal.accept(
            tracking,
            kind="inbound",
            seat_id="",
            payload=env.model_dump_json(by_alias=True),
            now_ms=self.clock.ms,
            fingerprint="",
        )
        Directedness(self.c.org, self.c.inbound, self.clock, container=self.c)(env)

    def slack_reply(self, ask: Ask, user: str, text: str, *, event: str = "EvR1") -> Candidate:
        """A Slack reply by `user` in the thread of `ask`'s message, written now."""
        assert ask.landing is not None
        payload = copy.deepcopy(SLACK_REPLY)
        ts = f"{self.clock.ms // 1000}.{self.clock.ms % 1000:03d}100"
        ev = payload["event"]
        ev.update(
            {
                "user": user,
                "text": text,
                "ts": ts,
                "event_ts": ts,
                "thread_ts": ask.landing.thread_root_id,
                "channel": ask.landing.channel_id,
            }
        )
        payload["event_id"] = event
        payload["event_time"] = self.clock.ms // 1000
        got = normalise_slack(payload, received_at_ms=self.clock.ms)
        assert isinstance(got, Candidate), got
        return got

    def github(self, event: str, payload: dict[str, Any], delivery: str) -> Candidate:
        view, _ = self.c.org.current()
        got = normalise_github(
            event,
            payload,
            delivery_id=delivery,
            received_at_ms=self.clock.ms,
            logins=view.github_logins,
        )
        assert isinstance(got, Candidate), got
        return got

    def seat_news(self) -> list[tuple[str, str]]:
        items = Inbox(self.c.redis).updates("scout").items
        return [(i.ask.ask_id, i.ask.answer) for i in items if i.kind == "ask_answered" and i.ask]


def _world(
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    policy: SendPolicy | None = None,
    now: int = NOW,
) -> World:
    settings = Settings(
        redis_url=redis_url, api_token="t", org_file=BUNDLED_ORG, outbox_path=tmp_path / "o.jsonl"
    )
    c = bootstrap.build_container(settings, client=redis_client)
    outbound = FakeOutbound()
    c.outbound = outbound
    c.app = create_app(settings, register=False)
    clock = Clock(now)
    stages = stages_on(redis_client, clock, outbound)
    stages.asks = c.asks
    if policy is not None:
        stages.policy = policy
    published = Published()
    monkeypatch.setattr(report_intake, "publish", published)
    return World(c, stages, clock, outbound, published)


@pytest.fixture
def w(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    yield _world(redis_client, redis_url, tmp_path, monkeypatch)


def _blocked(work_id: str, **more: Any) -> dict[str, Any]:
    return {**BLOCKED_REPORT, "id": work_id, **more}


def _unanswered_rows(w: World, work_id: str) -> list[Any]:
    return [r for r in w.c.ledger.read(work_id=work_id) if r.reason_code == "ask_unanswered"]


# ---------------------------------------------------------------------- the ladder


def test_an_unanswered_ask_goes_up_two_rungs_then_expires_never_looping(w: World) -> None:
    ask = w.ask(dict(BLOCKED_REPORT), "t-1")
    assert [t.member_id for t in ask.targets] == ["ben"]
    assert ask.deadline_ms == NOW + TIMEOUT

    w.clock.ms = NOW + TIMEOUT - 1  # not yet
    assert w.tick().escalated == [] and w.published.take() == []

    # Rung 1: ben's supervisor, ava.
    w.clock.ms = NOW + TIMEOUT + 1
    assert w.tick().escalated == [ask.id]
    [decided] = w.raised()
    assert isinstance(decided, DecisionEnvelope)
    d = decided.decision
    assert d.reason_code == "ask_unanswered"
    assert [t.member_id for t in d.targets] == ["ava"]
    assert "ben" in (d.reason or "") and f"at {when(NOW)}" in (d.reason or "")
    assert w.through(decided) == "engaged"
    assert [t.member_id for t in w.outbound.applied[-1].targets] == ["ava"]
    root = w.get(ask.id)
    assert root.state == "escalated"
    assert [(e.level, e.target_id, e.rung) for e in root.escalations] == [
        (1, "ava", "target_supervisor")
    ]
    [rung1] = w.asks.escalations_of(ask.id)
    assert rung1.state == "open" and rung1.escalates == ask.id and rung1.level == 1
    assert root.deadline_ms == w.clock.ms + TIMEOUT  # waits its whole timeout from the rung

    # Rung 2: ava has no supervisor, so the seat's supervisor, gus.
    w.clock.ms = root.deadline_ms + 1
    assert w.tick().escalated == [ask.id]
    [decided] = w.raised()
    assert isinstance(decided, DecisionEnvelope)
    assert [t.member_id for t in decided.decision.targets] == ["gus"]
    assert w.through(decided) == "engaged"
    root = w.get(ask.id)
    assert [(e.level, e.target_id, e.rung) for e in root.escalations] == [
        (1, "ava", "target_supervisor"),
        (2, "gus", "seat_supervisor"),
    ]

    # The top of the ladder: it expires, with its row, and its rungs close with it.
    assert root.deadline_ms is not None
    w.clock.ms = root.deadline_ms + 1
    report = w.tick()
    assert report.expired == [ask.id] and report.escalated == []
    assert w.published.take() == []
    root = w.get(ask.id)
    assert root.state == "closed" and root.closed == "expired"
    assert {a.state for a in w.asks.escalations_of(ask.id)} == {"closed"}
    rows = _unanswered_rows(w, ask.work_id)
    assert len(rows) == 1
    assert rows[0].outcome == "unroutable"
    assert "ben, ava, gus" in (rows[0].reason or "") and "nobody answered" in (rows[0].reason or "")

    # Never a loop: later ticks do nothing more.
    w.clock.ms += 10 * TIMEOUT
    again = w.tick()
    assert (again.escalated, again.expired, again.woke) == ([], [], [])
    assert w.published.take() == []
    assert len(_unanswered_rows(w, ask.work_id)) == 1


def test_an_answer_one_rung_up_answers_the_seats_ask(w: World) -> None:
    ask = w.ask(dict(BLOCKED_REPORT), "t-1")
    w.clock.ms = NOW + TIMEOUT + 1
    w.tick()
    [decided] = w.raised()
    assert w.through(decided) == "engaged"
    [rung1] = w.asks.escalations_of(ask.id)

    # ava answers in the thread of her own ask.
    w.clock.ms += 60_000
    w.inbound(w.slack_reply(rung1, "U0AVA", "granted, go ahead"))

    root = w.get(ask.id)
    assert root.state == "answered" and root.answer is not None
    assert (root.answer.answer, root.answer.by) == ("replied", "ava")
    assert root.answer.via == "slack_thread"
    assert root.answer.text == "granted, go ahead"
    assert w.get(rung1.id).state == "answered"
    assert w.seat_news() == [(ask.id, "replied")]  # once, for the seat's own ask

    # Answered: never due again.
    w.clock.ms += 10 * TIMEOUT
    assert w.tick().escalated == [] and w.published.take() == []


def test_a_snooze_wakes_and_times_out_again(w: World) -> None:
    ask = w.ask(dict(BLOCKED_REPORT), "t-1")
    until = NOW + HOUR
    got = Answers(w.c, w.c.app).answer(
        ask.id, AnswerIn("snoozed", "ben", "api", snooze_until_ms=until), now_ms=NOW + 5
    )
    assert got.outcome.outcome == "snoozed"
    w.clock.ms = until + 1
    report = w.tick()
    assert report.woke == [ask.id] and report.escalated == []
    woke = w.get(ask.id)
    assert woke.state == "open" and woke.deadline_ms == until + 1 + TIMEOUT
    assert woke.history[-1].event == "woke"
    assert w.published.take() == []


def test_two_ticks_at_once_go_up_one_rung_once(w: World, monkeypatch: pytest.MonkeyPatch) -> None:
    ask = w.ask(dict(BLOCKED_REPORT), "t-1")
    w.clock.ms = NOW + TIMEOUT + 1
    real = report_intake.intake_report
    inner: list[AsksTickReport] = []
    racing_now = [True]

    def racing(*args: Any, **kwargs: Any) -> report_intake.Intake:
        # The other tick runs whole between this one's raise and its step.
        if racing_now[0]:
            racing_now[0] = False
            inner.append(w.tick())
        return real(*args, **kwargs)

    monkeypatch.setattr(asks_tick, "intake_report", racing)
    outer = w.tick()
    assert inner[0].escalated == [ask.id]
    assert outer.escalated == []  # the other tick wrote the rung
    assert len(w.published.take()) == 1
    root = w.get(ask.id)
    assert [e.level for e in root.escalations] == [1]


def test_a_rung_in_its_persons_quiet_hours_waits_for_them(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 19:00 UTC: ben (Stockholm, 20:00) is asked; 4 h later ava (London, 23:00) is asleep.
    evening = NOW + 11 * HOUR
    policy = SendPolicy(quiet_hours=QuietHours(start="22:00", end="07:00"))
    w = _world(redis_client, redis_url, tmp_path, monkeypatch, policy=policy, now=evening)
    ask = w.ask(dict(BLOCKED_REPORT), "t-1")
    w.clock.ms = evening + TIMEOUT + 1
    assert w.tick().escalated == [ask.id]
    [decided] = w.raised()
    assert isinstance(decided, DecisionEnvelope)
    reserved = w.stages.guardrails(decided)
    assert isinstance(reserved, ReservedEnvelope)
    with pytest.raises(Deferred):
        w.stages.send(reserved)
    assert [t.member_id for t in w.outbound.applied[-1].targets] == ["ben"]  # ava: not yet

    # 03:00: the rung's deadline has passed, but its ask has not reached ava yet.
    w.clock.ms = evening + 2 * TIMEOUT + 1
    assert w.tick().escalated == [] and w.published.take() == []

    # 07:00 London: the send goes out, and the rung waits its whole timeout from there.
    morning = NOW + 24 * HOUR - HOUR + 60_000  # 07:01 UTC the next day
    w.clock.ms = morning
    assert w.stages.send(reserved) == "engaged"
    assert [t.member_id for t in w.outbound.applied[-1].targets] == ["ava"]
    root = w.get(ask.id)
    assert root.deadline_ms == morning + TIMEOUT
    w.clock.ms = morning + 60_000
    assert w.tick().escalated == []


# ---------------------------------------------------------------------- the brake


def test_the_brake_holds_a_seat_asks_its_operator_once_and_lifts(w: World) -> None:
    answers = Answers(w.c, w.c.app)
    for n in (1, 2):  # two asks declined
        ask = w.ask(_blocked(f"w{n}"), f"t-{n}")
        answers.answer(ask.id, AnswerIn("declined", "ben", "api"), now_ms=w.clock.ms)
    assert w.asks.brake("scout") is None
    unanswered = w.ask(_blocked("w3"), "t-3")
    # The third goes unanswered up the ladder and expires: three of the last three, held.
    for _rung in (1, 2):
        current = w.get(unanswered.id)
        assert current.deadline_ms is not None
        w.clock.ms = current.deadline_ms + 1
        assert w.tick().escalated == [unanswered.id]
        [decided] = w.raised()
        assert w.through(decided) == "engaged"
    current = w.get(unanswered.id)
    assert current.deadline_ms is not None
    w.clock.ms = current.deadline_ms + 1
    assert w.tick().expired == [unanswered.id]

    brake = w.asks.brake("scout")
    assert brake is not None and brake.held
    assert set(brake.ask_ids) == {a.id for a in w.asks.listing(seat_id="scout") if a.level == 0}
    # The operator's one ask to look at the seat goes through (the hold does not hold it).
    [decided] = w.raised()
    assert isinstance(decided, DecisionEnvelope)
    assert decided.decision.work_id == brake_report_id(brake)
    assert [t.member_id for t in decided.decision.targets] == ["gus"]
    assert w.through(decided) == "engaged"
    operator_asks = [a for a in w.outbound.applied if a.work_id == brake_report_id(brake)]
    assert len(operator_asks) == 1

    # The next report asks nobody: held.
    assert w.report(_blocked("w4"), "t-4") is None
    [row] = [r for r in w.c.ledger.read(work_id="w4")]
    assert row.reason_code == "asks_held"
    # Judged again (another expiry, another decline), the hold raises no second ask.
    assert Answers(w.c, w.c.app).judge_brake("scout", now_ms=w.clock.ms) is False
    assert w.published.take() == []

    lifted = w.asks.lift("scout", by="gus", now_ms=w.clock.ms)
    assert lifted is not None and not lifted.held
    assert isinstance(w.report(_blocked("w5"), "t-5"), DecisionEnvelope)


# ---------------------------------------------------------------------- replies


def test_a_thread_reply_by_the_person_asked_answers_once(w: World) -> None:
    ask = w.ask(dict(BLOCKED_REPORT), "t-1")
    w.clock.ms = NOW + 120_000
    # Someone not asked replies first: the ask still waits.
    w.inbound(w.slack_reply(ask, "U0JO", "not me, sorry", event="EvR0"))
    assert w.get(ask.id).state == "open"

    w.clock.ms = NOW + 180_000
    reply = w.slack_reply(ask, "U0BEN", "access granted, try again")
    w.inbound(reply)
    answered = w.get(ask.id)
    assert answered.state == "answered" and answered.answer is not None
    assert (answered.answer.answer, answered.answer.by, answered.answer.via) == (
        "replied",
        "ben",
        "slack_thread",
    )
    assert answered.answer.text == "access granted, try again"
    assert w.seat_news() == [(ask.id, "replied")]
    # The reply still reaches the seat as a message too (in its thread).
    items = Inbox(w.c.redis).updates("scout").items
    assert any(i.kind != "ask_answered" and i.delivery_id == reply.delivery_id for i in items)

    # Slack delivers the same event again: nothing more on the ask.
    w.clock.ms += 1_000
    w.inbound(reply)
    again = w.get(ask.id)
    assert [e.event for e in again.history] == [e.event for e in answered.history]
    assert w.seat_news() == [(ask.id, "replied")]


def test_a_thread_reply_written_before_the_ask_landed_answers_nothing(w: World) -> None:
    ask = w.ask(dict(BLOCKED_REPORT), "t-1")
    w.clock.ms = NOW - 60_000  # ben's message in the thread predates the ask
    old = w.slack_reply(ask, "U0BEN", "an older note")
    w.clock.ms = NOW + 60_000
    w.inbound(old)
    assert w.get(ask.id).state == "open"


def _review(state: str, login: str, number: int = 2) -> dict[str, Any]:
    payload = copy.deepcopy(GITHUB_REVIEW)
    user = {**_USER, "login": login}
    payload["review"].update({"state": state, "user": user, "body": f"{state} from {login}"})
    payload["review"]["id"] += number
    payload["sender"] = user
    payload["pull_request"]["number"] = number
    return payload


def test_a_pull_request_review_by_the_reviewer_asked_approves_or_declines(w: World) -> None:
    review_report = {
        "id": "pr-2",
        "title": "Index the invoices table",
        "review": {"required": True, "reviewerId": "ben", "scope": "billing database"},
        "link": PR,
    }
    ask = w.ask(review_report, "t-1")
    assert ask.item_id == "acme/platform#2"
    w.clock.ms = NOW + 60_000
    # chloe's review says nothing to an ask of ben; ben's approval answers it.
    w.inbound(w.github("pull_request_review", _review("approved", "chloe-t"), "g-1"))
    assert w.get(ask.id).state == "open"
    w.inbound(w.github("pull_request_review", _review("approved", "benl"), "g-2"))
    approved = w.get(ask.id)
    assert approved.answer is not None
    assert (approved.answer.answer, approved.answer.by, approved.answer.via) == (
        "approved",
        "ben",
        "github_review",
    )

    other = w.ask({**review_report, "id": "pr-3", "link": PR.replace("/2", "/3")}, "t-2")
    w.inbound(w.github("pull_request_review", _review("changes_requested", "benl", 3), "g-3"))
    declined = w.get(other.id)
    assert declined.answer is not None and declined.answer.answer == "declined"

    third = w.ask({**review_report, "id": "pr-4", "link": PR.replace("/2", "/4")}, "t-3")
    w.inbound(w.github("pull_request_review", _review("commented", "benl", 4), "g-4"))
    replied = w.get(third.id)
    assert replied.answer is not None and replied.answer.answer == "replied"
    assert replied.answer.text == "commented from benl"


def test_a_comment_on_the_issue_by_the_person_asked_is_a_reply(w: World) -> None:
    ask = w.ask(_blocked("acme/platform#1"), "t-1")  # the work id names the issue
    assert ask.item_id == "acme/platform#1"
    w.clock.ms = NOW + 60_000
    payload = copy.deepcopy(GITHUB_COMMENT)
    ben = {**_USER, "login": "benl"}
    payload["comment"]["user"] = ben
    payload["sender"] = ben
    w.inbound(w.github("issue_comment", payload, "g-1"))
    replied = w.get(ask.id)
    assert replied.answer is not None
    assert (replied.answer.answer, replied.answer.by, replied.answer.via) == (
        "replied",
        "ben",
        "github_comment",
    )
    assert replied.answer.text.startswith("You are totally right!")
    assert w.seat_news() == [(ask.id, "replied")]


# ---------------------------------------------------------------------- withdrawal


def test_a_seat_that_reports_its_work_done_withdraws_its_asks(w: World) -> None:
    ask = w.ask(dict(BLOCKED_REPORT), "t-1")
    w.clock.ms = NOW + TIMEOUT + 1
    w.tick()
    [decided] = w.raised()
    assert w.through(decided) == "engaged"

    w.clock.ms += 60_000
    done = {**BLOCKED_REPORT, "state": "done", "blocker": None, "revision": 2}
    assert w.report(done, "t-2") is None
    ended = w.get(ask.id)
    assert ended.state == "closed" and ended.closed == "withdrawn"
    assert "done" in ended.history[-1].why
    [rung1] = w.asks.escalations_of(ask.id)
    assert rung1.state == "closed" and rung1.closed == "withdrawn"
    w.clock.ms += 10 * TIMEOUT
    assert w.tick().escalated == []


def test_a_report_whose_trigger_stopped_firing_withdraws_and_another_does_not(w: World) -> None:
    ask = w.ask(dict(BLOCKED_REPORT), "t-1")
    # The same report again (a redelivery, a repeat) keeps it: it still asks.
    assert w.report(dict(BLOCKED_REPORT), "t-1b") is None
    assert w.get(ask.id).is_open
    # An older revision arriving late withdraws nothing of a later one.
    later = w.ask({**BLOCKED_REPORT, "id": "w-later", "revision": 3}, "t-3")
    stale = {**BLOCKED_REPORT, "id": "w-later", "state": "in_progress", "blocker": None}
    assert w.report({**stale, "revision": 2}, "t-4") is None
    assert w.get(later.id).is_open
    # The blocker is gone: nothing fires for the work any more.
    unblocked = {**BLOCKED_REPORT, "state": "in_progress", "blocker": None, "revision": 2}
    assert w.report(unblocked, "t-2") is None
    ended = w.get(ask.id)
    assert ended.closed == "withdrawn"
