"""The ask routes on a real Redis (issue 26): the listing and one ask, answers by the operator
and by an answer link (JSON, a form, a browser's page), every refusal changing nothing (the
stored ask and the seat's inbox are compared before and after), two answers racing over HTTP,
consent records and the nuisance brake's release, and the ask figures on /metrics."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import redis
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from contracts import EngagementDecision, WorkReport
from contracts.asks import Ask, AskBrake, AskLanding
from contracts.engagement import Target
from contracts.inbound import InboxItem
from contracts.messages import DecisionEnvelope, ReservedEnvelope, WorkEnvelope
from pipeline.answer_links import link_expiry, sign
from pipeline.asks import HOUR_MS, AnswerIn, landed, new_ask, send_ended
from tests.ask_records import CONSENT, REVIEW, make_ask
from tests.auth import bearer, seat_token
from tests.fakes import BLOCKED_REPORT, Clock, FakeOutbound, stages_on
from tests.workers.test_mcp import free_port
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.ingress.app import create_ingress
from workers.settings import Settings
from workers.stages.links import AnswerLinks
from workers.stores.asks import AskStore

pytestmark = pytest.mark.redis

TOKEN = "test-token"
SECRET = "test-answer-link-secret"
AUTH = bearer(TOKEN)
NOW = 1_800_000_000_000
HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@dataclasses.dataclass
class World:
    client: TestClient
    container: Container
    asks: AskStore
    clock: Clock
    outbound: FakeOutbound
    links: AnswerLinks
    api: FastAPI


@pytest.fixture
def world(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[World]:
    settings = Settings(
        redis_url=redis_url,
        api_token=TOKEN,
        outbox_path=tmp_path / "o.jsonl",
        answer_link_secret=SECRET,
        public_url="https://seatwire.example",
    )
    app = create_app(settings, register=False)
    outbound = FakeOutbound(name="webhook")
    container = dataclasses.replace(bootstrap.build_container(settings, app=app), outbound=outbound)
    clock = Clock(NOW)
    api = create_ingress(container, app, clock_ms=clock)
    links = AnswerLinks.of(settings)
    assert links is not None
    with TestClient(api) as client:
        yield World(client, container, container.asks, clock, outbound, links, api)


def inbox(w: World, seat: str = "scout") -> list[InboxItem]:
    return list(w.container.inbox.updates(seat).items)


def state(w: World, ask_id: str) -> tuple[Ask | None, list[InboxItem]]:
    """What a refusal must leave as it was: the stored ask and the seat's inbox."""
    return w.asks.get(ask_id), inbox(w)


def answer(w: World, ask_id: str, body: dict[str, Any], **kw: Any) -> httpx2.Response:
    headers = kw.pop("headers", AUTH)
    return w.client.post(f"/v1/asks/{ask_id}/answer", json=body, headers=headers, **kw)


def link_of(w: World, ask: Ask) -> str:
    """The `?token=` of the ask's answer link (as the send stage signs it)."""
    return w.links.token_for(ask)


# ------------------------------------------------------------------ reading


def test_the_listing_is_newest_first_filtered_and_paged(world: World) -> None:
    w = world
    a = make_ask(w.asks, key="k-a", now_ms=NOW)
    b = make_ask(w.asks, key="k-b", targets=("chloe",), trigger=REVIEW, now_ms=NOW + 10)
    c = make_ask(w.asks, seat="tally", key="k-c", targets=("devi",), now_ms=NOW + 20)
    w.asks.answer(b.id, AnswerIn("approved", "chloe", "api"), now_ms=NOW + 30)

    every = w.client.get("/v1/asks", headers=AUTH).json()
    assert [x["id"] for x in every["asks"]] == [c.id, b.id, a.id]
    assert every["count"] == 3 and every["next"] is None
    assert every["asks"][1]["answer"]["by"] == "chloe"

    def ids(**params: Any) -> list[str]:
        got = w.client.get("/v1/asks", params=params, headers=AUTH)
        assert got.status_code == 200, got.text
        return [x["id"] for x in got.json()["asks"]]

    assert ids(seat="scout") == [b.id, a.id]
    assert ids(seat="U0TALLY") == [c.id]  # an alias of the seat
    assert ids(person="chloe") == [b.id]
    assert ids(state="open") == [c.id, a.id]
    assert ids(state="answered") == [b.id]
    assert ids(since=NOW + 10) == [c.id, b.id]
    assert ids(seat="scout", state="open") == [a.id]

    first = w.client.get("/v1/asks", params={"limit": 2}, headers=AUTH).json()
    assert [x["id"] for x in first["asks"]] == [c.id, b.id] and first["next"]
    rest = w.client.get(
        "/v1/asks", params={"limit": 2, "cursor": first["next"]}, headers=AUTH
    ).json()
    assert [x["id"] for x in rest["asks"]] == [a.id] and rest["next"] is None
    other = w.client.get(
        "/v1/asks", params={"limit": 2, "cursor": first["next"], "seat": "scout"}, headers=AUTH
    )
    assert (other.status_code, other.json()["error"]) == (422, "invalid_cursor")
    bad = w.client.get("/v1/asks", params={"cursor": "not-a-cursor"}, headers=AUTH)
    assert (bad.status_code, bad.json()["error"]) == (422, "invalid_cursor")
    unknown = w.client.get("/v1/asks", params={"seat": "nobody"}, headers=AUTH)
    assert (unknown.status_code, unknown.json()["error"]) == (404, "unknown_seat")
    wrong = w.client.get("/v1/asks", params={"state": "maybe"}, headers=AUTH)
    assert (wrong.status_code, wrong.json()["error"]) == (422, "invalid_parameter")


def test_the_routes_take_the_operator_token_only(world: World, redis_client: redis.Redis) -> None:
    """A seat reads its own asks with its tools; here its token is 403 `operator_only`."""
    w = world
    ask = make_ask(w.asks, now_ms=NOW)
    seat = bearer(seat_token(redis_client, "scout"))
    for method, path in (
        ("GET", "/v1/asks"),
        ("GET", f"/v1/asks/{ask.id}"),
        ("GET", "/v1/consents"),
        ("POST", f"/v1/asks/{ask.id}/answer"),
        ("POST", "/v1/seats/scout/asks/release"),
    ):
        body = {"answer": "done", "by": "ben"} if method == "POST" else None
        refused = w.client.request(method, path, json=body, headers=seat)
        assert (refused.status_code, refused.json()["error"]) == (403, "operator_only"), path
        nobody = w.client.request(method, path, json=body)
        assert (nobody.status_code, nobody.json()["error"]) == (401, "unauthorized"), path
    assert w.asks.get(ask.id) == ask and inbox(w) == []


def test_one_ask_with_its_history_and_escalations(world: World) -> None:
    w = world
    root = make_ask(w.asks, key="k-root", now_ms=NOW)
    decision = _decision_of(root, "ava")
    up = new_ask(
        decision,
        seat_id="scout",
        tracking_id="wr-up-1",
        attempt=1,
        now_ms=NOW + HOUR_MS,
        timeouts={},
        escalates=root.id,
        level=1,
    )
    w.asks.create(up)
    got = w.client.get(f"/v1/asks/{root.id}", headers=AUTH)
    assert got.status_code == 200
    detail = got.json()
    assert detail["ask"]["id"] == root.id
    assert [e["event"] for e in detail["ask"]["history"]] == ["created", "sent"]
    assert [a["id"] for a in detail["escalationAsks"]] == [up.id]
    assert detail["escalationAsks"][0]["escalates"] == root.id
    missing = w.client.get("/v1/asks/ask-nothing-1", headers=AUTH)
    assert (missing.status_code, missing.json()["error"]) == (404, "unknown_ask")


# ------------------------------------------------------------------ answering


def test_an_operator_answer_is_recorded_once_and_the_seat_hears_it(world: World) -> None:
    w = world
    ask = make_ask(w.asks, now_ms=NOW)
    w.clock.ms = NOW + 60_000
    done = answer(w, ask.id, {"answer": "done", "by": "ben", "text": "granted"})
    assert done.status_code == 200, done.text
    body = done.json()
    assert (body["outcome"], body["reasonCode"]) == ("answered", "done")
    assert body["ask"]["state"] == "answered" and body["ask"]["answer"]["via"] == "api"
    stored = w.asks.get(ask.id)
    assert stored is not None and stored.answer is not None
    assert (stored.answer.by, stored.answer.text, stored.answer.at_ms) == (
        "ben",
        "granted",
        NOW + 60_000,
    )
    [item] = inbox(w)
    assert item.kind == "ask_answered" and item.ask is not None
    assert (item.ask.ask_id, item.ask.answer, item.ask.by) == (ask.id, "done", "ben")
    # Shown on its message in place, after the answer went back.
    assert [a.id for a in w.outbound.shown] == [ask.id]

    late = answer(w, ask.id, {"answer": "declined", "by": "ben"})
    assert (late.status_code, late.json()["error"]) == (409, "late_answer")
    assert late.json()["ask"]["answer"]["answer"] == "done"
    after = w.asks.get(ask.id)
    assert after is not None and after.answer == stored.answer and after.state == "answered"
    assert after.history[-1].event == "late_answer"  # recorded, changing nothing else
    assert inbox(w) == [item]


def test_an_answer_on_an_escalation_answers_the_seats_ask_and_shows_on_both(
    world: World,
) -> None:
    w = world
    root = make_ask(w.asks, key="k-root", now_ms=NOW)
    up = new_ask(
        _decision_of(root, "ava"),
        seat_id="scout",
        tracking_id="wr-up-1",
        attempt=1,
        now_ms=NOW + HOUR_MS,
        timeouts={},
        escalates=root.id,
        level=1,
    )
    w.asks.create(up)
    where = AskLanding(adapter="webhook", channel_id="webhook", message_id="m-up", at_ms=NOW)
    w.asks.update(up.id, lambda a: landed(a, where, now_ms=NOW + HOUR_MS))
    got = answer(w, up.id, {"answer": "done", "by": "ava"})
    assert got.status_code == 200, got.text
    assert got.json()["ask"]["id"] == root.id  # the seat's own ask is what was answered
    stored_root, stored_up = w.asks.get(root.id), w.asks.get(up.id)
    assert stored_root is not None and stored_root.state == "answered"
    assert stored_up is not None and stored_up.state == "answered"
    assert [a.id for a in w.outbound.shown] == [root.id, up.id]
    assert [(i.ask.ask_id, i.ask.by) for i in inbox(w) if i.ask] == [(root.id, "ava")]


def test_a_snooze_is_an_answer_that_waits(world: World) -> None:
    w = world
    ask = make_ask(w.asks, now_ms=NOW)
    until = NOW + 3 * HOUR_MS
    got = answer(w, ask.id, {"answer": "snoozed", "by": "ben", "snoozeUntilMs": until})
    assert got.status_code == 200, got.text
    assert got.json()["outcome"] == "snoozed"
    stored = w.asks.get(ask.id)
    assert stored is not None and (stored.state, stored.snooze_until_ms) == ("snoozed", until)
    assert [i.ask.answer for i in inbox(w) if i.ask] == ["snoozed"]


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"answer": "done", "by": "ben", "colour": "red"}, 422, "invalid_answer"),
        ({"answer": "done"}, 422, "invalid_answer"),
        ({"answer": "maybe", "by": "ben"}, 422, "invalid_answer"),
        ({"answer": "done", "by": "ben", "text": 7}, 422, "invalid_answer"),
        ({"answer": "done", "by": "ben", "snoozeUntilMs": NOW + HOUR_MS}, 422, "invalid_answer"),
        ({"answer": "done", "by": "ben", "consentTtlMs": 86_400_000}, 422, "invalid_answer"),
        ({"answer": "done", "by": "somebody"}, 422, "unknown_member"),
        ({"answer": "snoozed", "by": "ben", "snoozeUntilMs": NOW - 1}, 422, "snooze_in_past"),
        (
            {"answer": "snoozed", "by": "ben", "snoozeUntilMs": NOW + 8 * 24 * HOUR_MS},
            422,
            "snooze_too_long",
        ),
    ],
)
def test_a_wrong_answer_is_refused_and_changes_nothing(
    world: World, body: dict[str, Any], status: int, error: str
) -> None:
    w = world
    ask = make_ask(w.asks, now_ms=NOW)
    before = state(w, ask.id)
    got = answer(w, ask.id, body)
    assert (got.status_code, got.json()["error"]) == (status, error), got.text
    assert state(w, ask.id) == before
    assert w.outbound.shown == []


def test_a_conflicting_answer_is_409_and_changes_nothing(world: World) -> None:
    w = world
    consent = make_ask(w.asks, key="k-consent", trigger=CONSENT, now_ms=NOW)
    before = state(w, consent.id)
    other = answer(w, consent.id, {"answer": "approved", "by": "jo"})
    assert (other.status_code, other.json()["error"]) == (409, "not_a_target")
    assert state(w, consent.id) == before

    unknown = answer(w, "ask-nothing-1", {"answer": "done", "by": "ben"})
    assert (unknown.status_code, unknown.json()["error"]) == (404, "unknown_ask")
    text = w.client.post(
        f"/v1/asks/{consent.id}/answer",
        content=b"approved",
        headers={**AUTH, "Content-Type": "text/plain"},
    )
    assert (text.status_code, text.json()["error"]) == (415, "unsupported_media_type")
    assert state(w, consent.id) == before

    closed = make_ask(w.asks, key="k-closed", now_ms=NOW, sent=False)
    w.asks.update(closed.id, lambda a: send_ended(a, "send_failed", "boom", now_ms=NOW))
    before = state(w, closed.id)
    got = answer(w, closed.id, {"answer": "done", "by": "ben"})
    assert (got.status_code, got.json()["error"]) == (409, "ask_closed")
    assert state(w, closed.id) == before and inbox(w) == []


def test_an_answer_arriving_while_the_send_is_in_flight_is_kept(world: World) -> None:
    w = world
    ask = make_ask(w.asks, now_ms=NOW, sent=False)
    got = answer(w, ask.id, {"answer": "done", "by": "ben"})
    assert got.status_code == 200 and got.json()["ask"]["state"] == "answered"
    assert w.outbound.shown == []  # not landed yet: no message to change


# ------------------------------------------------------------------ answer links


def test_a_link_answers_its_ask_as_one_of_its_targets(world: World) -> None:
    w = world
    ask = make_ask(w.asks, targets=("ben", "gus"), now_ms=NOW)
    token = link_of(w, ask)
    got = answer(w, ask.id, {"answer": "done", "by": "gus"}, headers={}, params={"token": token})
    assert got.status_code == 200, got.text
    stored = w.asks.get(ask.id)
    assert stored is not None and stored.answer is not None
    assert (stored.answer.by, stored.answer.via) == ("gus", "link")
    assert [i.ask.by for i in inbox(w) if i.ask] == ["gus"]


def test_a_link_is_refused_when_forged_expired_foreign_or_not_the_answerers(
    world: World,
) -> None:
    w = world
    ask = make_ask(w.asks, key="k-1", now_ms=NOW)
    other = make_ask(w.asks, key="k-2", now_ms=NOW)
    token = link_of(w, ask)
    before = state(w, ask.id)
    payload = token.rpartition(".")[0]
    forged_targets = sign(b"another key", ask.id, ["jo"], link_expiry(ask))
    cases = [
        ({"token": payload + ".AAAA"}, "ben", 401, "invalid_link"),
        ({"token": forged_targets}, "jo", 401, "invalid_link"),
        ({"token": "nonsense"}, "ben", 401, "invalid_link"),
        ({"token": link_of(w, other)}, "ben", 404, "unknown_ask"),  # nothing revealed
        ({"token": token}, "jo", 403, "not_a_link_target"),
    ]
    for params, by, status, error in cases:
        got = answer(w, ask.id, {"answer": "done", "by": by}, headers={}, params=params)
        assert (got.status_code, got.json()["error"]) == (status, error), params
    w.clock.ms = link_expiry(ask)
    expired = answer(
        w, ask.id, {"answer": "done", "by": "ben"}, headers={}, params={"token": token}
    )
    assert (expired.status_code, expired.json()["error"]) == (401, "link_expired")
    assert state(w, ask.id) == before


def test_the_links_page_offers_its_answers_and_posts_them_as_a_form(world: World) -> None:
    w = world
    ask = make_ask(w.asks, key="k-consent", trigger=CONSENT, now_ms=NOW)
    token = link_of(w, ask)
    url = f"/v1/asks/{ask.id}/answer"
    page = w.client.get(url, params={"token": token}, headers=HTML)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    # The token is in the page's URL: never cached, never a Referer, never framed.
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    for label in ("Approve", "Decline", "Snooze 2 h"):
        assert f">{label}</button>" in page.text
    assert 'name=by value="ben"' in page.text and "billing database" in page.text

    view = w.client.get(url, params={"token": token}).json()
    assert view["answers"] == ["approved", "declined", "snoozed"] and view["by"] == ["ben"]
    assert view["expiresAtMs"] == link_expiry(ask) and view["ask"]["id"] == ask.id

    posted = w.client.post(
        url,
        params={"token": token},
        content=b"by=ben&answer=approved&text=go+ahead",
        headers={**HTML, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert posted.status_code == 200 and "Thank you" in posted.text
    stored = w.asks.get(ask.id)
    assert stored is not None and stored.answer is not None
    assert (stored.answer.answer, stored.answer.text, stored.answer.via) == (
        "approved",
        "go ahead",
        "link",
    )
    again = w.client.post(
        url,
        params={"token": token},
        content=b"by=ben&answer=declined",
        headers={**HTML, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert again.status_code == 409 and "Already settled" in again.text
    after = w.client.get(url, params={"token": token}, headers=HTML)
    assert "name=answer" not in after.text and "Answered <b>approved</b> by ben" in after.text
    assert after.text.count("<form") == 1 and ">Revoke</button>" in after.text  # its consent
    forged = w.client.get(url, params={"token": token[:-2] + "xx"}, headers=HTML)
    assert forged.status_code == 401 and "This link does not work" in forged.text


def test_the_send_stage_puts_a_working_link_on_a_webhook_ask(
    world: World, redis_client: redis.Redis
) -> None:
    """The link a webhook ask carries, signed by the send stage, answers that ask."""
    w = world
    stages = stages_on(redis_client, w.clock, w.outbound)
    stages.links = w.links
    stages.journal.accept(
        "t-1", kind="work", seat_id="scout", payload="{}", now_ms=NOW, fingerprint="f"
    )
    report = WorkReport.model_validate(dict(BLOCKED_REPORT))
    env = WorkEnvelope(tracking_id="t-1", seat_id="scout", accepted_at_ms=NOW, report=report)
    decided = stages.engagement(env)
    assert isinstance(decided, DecisionEnvelope)
    reserved = stages.guardrails(decided)
    assert isinstance(reserved, ReservedEnvelope)
    assert stages.send(reserved) == "engaged"
    [sent] = w.outbound.applied
    assert sent.ask_id is not None and sent.answer_url is not None
    prefix = f"https://seatwire.example/v1/asks/{sent.ask_id}/answer?token="
    assert sent.answer_url.startswith(prefix)
    got = w.client.post(
        sent.answer_url.removeprefix("https://seatwire.example"),
        json={"answer": "done", "by": "ben"},
    )
    assert got.status_code == 200, got.text
    assert got.json()["ask"]["answer"]["via"] == "link"


def test_a_links_answers_share_its_asks_rate_limit(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """With the per-source rate limit on, a link's POSTs are its ask's source (a burst of
    one: the second is 429 before the route); a forged link spends no budget (401)."""
    settings = Settings(
        redis_url=redis_url,
        api_token=TOKEN,
        outbox_path=tmp_path / "o.jsonl",
        answer_link_secret=SECRET,
        ingress_rate_per_s=0.001,
        ingress_rate_burst=1,
    )
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    links = AnswerLinks.of(settings)
    assert links is not None
    ask = make_ask(container.asks, now_ms=NOW)
    url = f"/v1/asks/{ask.id}/answer"
    with TestClient(create_ingress(container, app, clock_ms=Clock(NOW))) as client:
        for _ in range(2):
            forged = client.post(url, params={"token": "x.y"}, json={"answer": "done", "by": "ben"})
            assert (forged.status_code, forged.json()["error"]) == (401, "invalid_link")
        params = {"token": links.token_for(ask)}
        first = client.post(url, params=params, json={"answer": "done", "by": "ben"})
        assert first.status_code == 200, first.text
        second = client.post(url, params=params, json={"answer": "done", "by": "ben"})
        assert (second.status_code, second.json()["error"]) == (429, "rate_limited")


# ------------------------------------------------------------------ two answers racing


def test_two_answers_racing_over_http_one_wins(world: World) -> None:
    """Two answers to one ask sent at once through the served ingress (uvicorn, two client
    threads released together): exactly one is answered, the other is `late_answer`, and
    the seat's inbox holds one item."""
    w = world
    ask = make_ask(w.asks, targets=("ben", "gus"), now_ms=NOW)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(w.api, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60  # a bound for a loaded machine, not a wait
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the ingress did not start"
            time.sleep(0.01)
        gate = threading.Barrier(2)
        results: dict[str, httpx.Response] = {}

        def send(by: str) -> None:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                gate.wait()
                results[by] = client.post(
                    f"/v1/asks/{ask.id}/answer", json={"answer": "done", "by": by}, headers=AUTH
                )

        racers = [threading.Thread(target=send, args=(by,)) for by in ("ben", "gus")]
        for r in racers:
            r.start()
        for r in racers:
            r.join(timeout=60)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    statuses = sorted(r.status_code for r in results.values())
    assert statuses == [200, 409], {k: v.text for k, v in results.items()}
    [winner] = [by for by, r in results.items() if r.status_code == 200]
    [loser] = [r for r in results.values() if r.status_code == 409]
    assert loser.json()["error"] == "late_answer"
    stored = w.asks.get(ask.id)
    assert stored is not None and stored.answer is not None and stored.answer.by == winner
    assert [i.ask.by for i in inbox(w) if i.ask] == [winner]


# ------------------------------------------------------------------ consents and the brake


def test_consents_are_listed_and_revoked(world: World) -> None:
    w = world
    ask = make_ask(w.asks, key="k-consent", trigger=CONSENT, now_ms=NOW)
    approved = answer(w, ask.id, {"answer": "approved", "by": "ben"})
    consent = approved.json()["consent"]
    assert consent["by"] == "ben" and consent["expiresAtMs"] == NOW + 86_400_000
    listed = w.client.get("/v1/consents", headers=AUTH).json()
    assert [c["id"] for c in listed["consents"]] == [consent["id"]]

    url = f"/v1/consents/{consent['id']}/revoke"
    bad = w.client.post(url, json={"by": "somebody"}, headers=AUTH)
    assert (bad.status_code, bad.json()["error"]) == (422, "unknown_member")
    extra = w.client.post(url, json={"by": "ben", "why": "x"}, headers=AUTH)
    assert (extra.status_code, extra.json()["error"]) == (422, "invalid_body")
    assert w.client.get("/v1/consents", headers=AUTH).json()["count"] == 1  # still holds

    w.clock.ms = NOW + 1000
    revoked = w.client.post(url, json={"by": "ben"}, headers=AUTH)
    assert revoked.status_code == 200, revoked.text
    assert (revoked.json()["revokedBy"], revoked.json()["revokedAtMs"]) == ("ben", NOW + 1000)
    assert w.client.get("/v1/consents", headers=AUTH).json()["count"] == 0
    every = w.client.get("/v1/consents", params={"all": "true"}, headers=AUTH).json()
    assert [c["revokedBy"] for c in every["consents"]] == ["ben"]
    again = w.client.post(url, json={"by": "ava"}, headers=AUTH)
    assert (again.status_code, again.json()["error"]) == (409, "already_revoked")
    missing = w.client.post("/v1/consents/consent-nothing/revoke", json={"by": "ava"}, headers=AUTH)
    assert (missing.status_code, missing.json()["error"]) == (404, "unknown_consent")


def test_the_operators_revocation_tells_the_seat_and_shows_the_message(world: World) -> None:
    w = world
    ask = make_ask(w.asks, key="k-consent", trigger=CONSENT, now_ms=NOW)
    consent = answer(w, ask.id, {"answer": "approved", "by": "ben"}).json()["consent"]
    w.clock.ms = NOW + 1000
    revoked = w.client.post(
        f"/v1/consents/{consent['id']}/revoke", json={"by": "gus"}, headers=AUTH
    )
    assert revoked.status_code == 200, revoked.text
    items = inbox(w)
    assert [i.kind for i in items] == ["ask_answered", "consent_revoked"]
    note = items[-1].consent
    assert note is not None
    assert (note.consent_id, note.revoked_by, note.approved_by, note.at_ms) == (
        consent["id"],
        "gus",
        "ben",
        NOW + 1000,
    )
    shown = w.outbound.shown[-1]  # its message, shown again once answered
    assert shown.id == ask.id and shown.answer is not None
    assert shown.answer.consent_revoked_by == "gus"
    detail = w.client.get(f"/v1/asks/{ask.id}", headers=AUTH).json()["ask"]
    assert detail["history"][-1]["event"] == "revoked"
    assert detail["answer"]["consentRevokedAtMs"] == NOW + 1000


def revoke_by_link(w: World, consent_id: str, token: str, by: str, **kw: Any) -> httpx2.Response:
    return w.client.post(
        f"/v1/consents/{consent_id}/revoke", json={"by": by}, params={"token": token}, **kw
    )


def test_a_link_revokes_its_asks_consent_for_the_people_it_names(world: World) -> None:
    w = world
    ask = make_ask(w.asks, key="k-consent", trigger=CONSENT, targets=("ben", "gus"), now_ms=NOW)
    other = make_ask(w.asks, key="k-other", trigger=CONSENT, now_ms=NOW)
    token = link_of(w, ask)
    got = answer(
        w, ask.id, {"answer": "approved", "by": "ben"}, headers={}, params={"token": token}
    )
    consent_id = got.json()["consent"]["id"]
    view = w.client.get(f"/v1/asks/{ask.id}/answer", params={"token": token}).json()
    assert view["consent"]["id"] == consent_id  # what a link's holder revokes

    before = state(w, ask.id)
    payload = token.rpartition(".")[0]
    refusals = [
        (payload + ".AAAA", "ben", 401, "invalid_link"),
        (link_of(w, other), "ben", 404, "unknown_consent"),  # nothing revealed
        (token, "jo", 403, "not_a_link_target"),
        (token, "somebody", 422, "unknown_member"),
    ]
    for tok, by, status, error in refusals:
        refused = revoke_by_link(w, consent_id, tok, by)
        assert (refused.status_code, refused.json()["error"]) == (status, error), (by, error)
    assert state(w, ask.id) == before
    kept = w.asks.consent(consent_id)
    assert kept is not None and kept.revoked_at_ms is None

    w.clock.ms = NOW + 5_000
    revoked = revoke_by_link(w, consent_id, token, "gus")  # asked too, though ben gave it
    assert revoked.status_code == 200, revoked.text
    assert (revoked.json()["revokedBy"], revoked.json()["revokedAtMs"]) == ("gus", NOW + 5_000)
    assert [i.kind for i in inbox(w)] == ["ask_answered", "consent_revoked"]
    again = revoke_by_link(w, consent_id, token, "ben")
    assert (again.status_code, again.json()["error"]) == (409, "already_revoked")
    assert [i.kind for i in inbox(w)].count("consent_revoked") == 1


def test_the_links_page_offers_to_revoke_an_approved_consent(world: World) -> None:
    w = world
    ask = make_ask(w.asks, key="k-consent", trigger=CONSENT, now_ms=NOW)
    token = link_of(w, ask)
    answer(w, ask.id, {"answer": "approved", "by": "ben"}, headers={}, params={"token": token})
    consent_id = f"consent-{ask.id.removeprefix('ask-')}"
    url = f"/v1/asks/{ask.id}/answer"
    page = w.client.get(url, params={"token": token}, headers=HTML)
    assert page.status_code == 200 and ">Revoke</button>" in page.text
    action = f'action="../../consents/{consent_id}/revoke?token='
    assert action in page.text and 'name=by value="ben"' in page.text

    w.clock.ms = NOW + 7_000
    posted = w.client.post(
        f"/v1/consents/{consent_id}/revoke",
        params={"token": token},
        content=b"by=ben",
        headers={**HTML, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert posted.status_code == 200 and "Consent revoked" in posted.text
    stored = w.asks.consent(consent_id)
    assert stored is not None and (stored.revoked_by, stored.revoked_at_ms) == ("ben", NOW + 7_000)
    after = w.client.get(url, params={"token": token}, headers=HTML)
    assert "<form" not in after.text and "The consent was revoked by ben" in after.text
    twice = w.client.post(
        f"/v1/consents/{consent_id}/revoke",
        params={"token": token},
        content=b"by=ben",
        headers={**HTML, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert twice.status_code == 409 and "Nothing to revoke" in twice.text


def test_a_held_seat_is_released_once(world: World) -> None:
    w = world
    brake = AskBrake(seat_id="scout", held=True, since_ms=NOW, why="3 of its last 5 asks")
    assert w.asks.hold(brake)
    url = "/v1/seats/scout/asks/release"
    bad = w.client.post(url, json={"by": "somebody"}, headers=AUTH)
    assert (bad.status_code, bad.json()["error"]) == (422, "unknown_member")
    held = w.asks.brake("scout")
    assert held is not None and held.held
    w.clock.ms = NOW + 5
    lifted = w.client.post(url, json={"by": "gus"}, headers=AUTH)
    assert lifted.status_code == 200, lifted.text
    assert (lifted.json()["held"], lifted.json()["liftedBy"]) == (False, "gus")
    stored = w.asks.brake("scout")
    assert stored is not None and not stored.held and stored.lifted_at_ms == NOW + 5
    again = w.client.post(url, json={"by": "gus"}, headers=AUTH)
    assert (again.status_code, again.json()["error"]) == (409, "not_held")
    unknown = w.client.post("/v1/seats/nobody/asks/release", json={"by": "gus"}, headers=AUTH)
    assert (unknown.status_code, unknown.json()["error"]) == (404, "unknown_seat")


# ------------------------------------------------------------------ metrics


def test_the_ask_figures_are_read_at_each_scrape(world: World) -> None:
    w = world
    a = make_ask(w.asks, key="k-a", now_ms=NOW)
    b = make_ask(w.asks, key="k-b", trigger=CONSENT, now_ms=NOW)
    make_ask(w.asks, key="k-c", targets=("chloe",), now_ms=NOW)
    w.asks.answer(a.id, AnswerIn("done", "ben", "api"), now_ms=NOW + 1)
    w.asks.answer(b.id, AnswerIn("declined", "ben", "api"), now_ms=NOW + 2)
    text = w.client.get("/metrics", headers=AUTH).text
    found = _samples(text)
    assert found[("seatwire_ask_figures_up", "")] == 1
    assert found[("seatwire_asks", 'state="answered"')] == 2
    assert found[("seatwire_asks", 'state="open"')] == 1
    assert found[("seatwire_seat_asks_concluded", 'seat="scout"')] == 2
    assert found[("seatwire_seat_ask_declined_ratio", 'seat="scout"')] == 0.5
    assert found[("seatwire_seat_ask_unanswered_ratio", 'seat="scout"')] == 0.0
    assert found[("seatwire_person_ask_declined_ratio", 'person="ben"')] == 0.5
    assert ("seatwire_person_asks_concluded", 'person="chloe"') not in found  # still open


def _samples(text: str) -> dict[tuple[str, str], float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name_labels, _, value = line.rpartition(" ")
        name, _, labels = name_labels.partition("{")
        out[(name, labels.rstrip("}"))] = float(value)
    return out


# ------------------------------------------------------------------ helpers


def _decision_of(root: Ask, target: str) -> EngagementDecision:
    """The decision an escalation of `root` to `target` is sent as."""
    return EngagementDecision(
        engage=True,
        trigger=root.trigger,
        reason_code="ask_unanswered",
        targets=(Target(member_id=target, rung="supervisory"),),
        surface="dm",
        work_id=root.work_id,
        dedupe_key=f"{root.dedupe_key}-up1",
    )
