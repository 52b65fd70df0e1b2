"""The web console (/console/) on a real Redis: its security (login, sessions, CSRF, the
headers, who opens what), the seats page and its controls, My asks through an answer link,
dead letters and their replay, the ledger's filters and a decision's page, the overview."""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import redis
from fastapi.testclient import TestClient

from contracts import EngagementDecision
from contracts.controller import ControllerState
from contracts.engagement import Target
from contracts.goals import Sample
from contracts.guardrails import LedgerRow
from pipeline.asks import AnswerIn
from tests.ask_records import CONSENT, make_ask
from tests.auth import seat_token
from tests.fakes import Clock, FakeOutbound
from tests.workers.test_recovery import accept_work
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.ingress.app import create_ingress
from workers.queues import Queue
from workers.settings import Settings
from workers.stages.links import AnswerLinks
from workers.stores import keys
from workers.stores.console import ConsoleSessions, session_hash
from workers.stores.dlq import DeadLetters
from workers.stores.journal import Journal

pytestmark = pytest.mark.redis

TOKEN = "console-operator-token"
SECRET = "console-link-secret"
NOW = 1_800_000_000_000
ORG = """
members: [{id: ava}, {id: ben}, {id: gus}, {id: scout}, {id: rover}]
seats: [{memberId: scout, operatorId: ava}, {memberId: rover, operatorId: ava}]
"""


@dataclasses.dataclass
class World:
    client: TestClient
    container: Container
    clock: Clock
    links: AnswerLinks
    redis: redis.Redis


@pytest.fixture
def world(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[World]:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url,
        api_token=TOKEN,
        org_file=org,
        outbox_path=tmp_path / "o.jsonl",
        answer_link_secret=SECRET,
        public_url="https://seatwire.example",
    )
    app = create_app(settings, register=False)
    container = dataclasses.replace(
        bootstrap.build_container(settings, app=app, client=redis_client),
        outbound=FakeOutbound(name="webhook"),
    )
    clock = Clock(NOW)
    links = AnswerLinks.of(settings)
    assert links is not None
    with TestClient(create_ingress(container, app, clock_ms=clock)) as client:
        yield World(client, container, clock, links, redis_client)


def csrf_of(page: httpx2.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, page.text
    return found.group(1)


def log_in(w: World, token: str = TOKEN) -> httpx2.Response:
    form = w.client.get("/console/login")
    return w.client.post(
        "/console/login",
        data={"csrf": csrf_of(form), "token": token},
        follow_redirects=False,
    )


def operator(w: World) -> str:
    """Log in; the session's CSRF token (from a page's logout form)."""
    assert log_in(w).status_code == 303
    return csrf_of(w.client.get("/console/seats"))


def assert_console_headers(resp: httpx2.Response) -> None:
    csp = resp.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "unsafe-inline" not in csp
    assert "form-action 'self'" in csp and "frame-ancestors 'none'" in csp
    assert resp.headers["cache-control"] == "no-store"
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert resp.headers["referrer-policy"] == "no-referrer"


# ------------------------------------------------------------------ safety


def test_every_console_answer_carries_the_security_headers(world: World) -> None:
    w = world
    for path in ("/console/login", "/console/", "/console/static/console.css", "/console/nope"):
        assert_console_headers(w.client.get(path))
    assert "content-security-policy" not in w.client.get("/healthz").headers
    css = w.client.get("/console/static/console.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


def test_operator_pages_need_a_login_and_a_wrong_one_gets_a_page(world: World) -> None:
    w = world
    for path in ("/console/", "/console/seats", "/console/ledger", "/console/dead-letters"):
        resp = w.client.get(path)
        assert resp.status_code == 401 and "log in" in resp.text.lower()
        assert resp.headers["content-type"].startswith("text/html")
    wrong = log_in(w, "not-the-token")
    assert wrong.status_code == 401 and "not an operator token" in wrong.text
    assert "Traceback" not in wrong.text and "sw_console=" not in wrong.headers.get(
        "set-cookie", ""
    )
    seat = log_in(w, seat_token(w.redis, "scout"))
    assert seat.status_code == 403 and "seat&#39;s token" in seat.text
    assert w.client.get("/console/seats").status_code == 401


def test_a_login_sets_a_strict_expiring_session_and_logout_ends_it(world: World) -> None:
    w = world
    done = log_in(w)
    assert done.status_code == 303 and done.headers["location"] == "/console/"
    cookie = next(c for c in done.headers.get_list("set-cookie") if c.startswith("sw_console="))
    low = cookie.lower()
    assert "httponly" in low and "samesite=strict" in low and "path=/console" in low
    assert "max-age=43200" in low and "secure" not in low  # plain http here
    session_id = cookie.split(";")[0].split("=", 1)[1]
    assert w.redis.pttl(keys.console_session(session_hash(session_id))) > 0
    assert session_id not in str(w.redis.keys("*"))  # stored by its hash only
    page = w.client.get("/console/seats")
    assert page.status_code == 200 and "scout" in page.text
    # Logging out needs the session's CSRF token, then ends it server-side.
    assert w.client.post("/console/logout", data={"csrf": "x"}).status_code == 403
    out = w.client.post("/console/logout", data={"csrf": csrf_of(page)}, follow_redirects=False)
    assert out.status_code == 303
    assert ConsoleSessions(w.redis).get(session_id, now_ms=NOW) is None
    w.client.cookies.set("sw_console", session_id, path="/console")
    gone = w.client.get("/console/seats")
    assert gone.status_code == 401 and "session has ended" in gone.text


def test_the_cookie_is_secure_behind_an_https_proxy(world: World) -> None:
    w = world
    form = w.client.get("/console/login", headers={"X-Forwarded-Proto": "https"})
    assert "secure" in form.headers["set-cookie"].lower()
    w.client.cookies.set("sw_console_login", csrf_of(form), path="/console/login")
    done = w.client.post(
        "/console/login",
        data={"csrf": csrf_of(form), "token": TOKEN},
        headers={"X-Forwarded-Proto": "https"},
        follow_redirects=False,
    )
    assert done.status_code == 303 and "secure" in done.headers["set-cookie"].lower()


def test_a_session_expires_after_twelve_hours(world: World) -> None:
    w = world
    operator(w)
    w.clock.ms = NOW + 12 * 3_600_000
    resp = w.client.get("/console/seats")
    assert resp.status_code == 401 and "session has ended" in resp.text


def test_a_post_without_its_csrf_token_is_refused_and_changes_nothing(world: World) -> None:
    w = world
    form = w.client.get("/console/login")
    no_csrf = w.client.post("/console/login", data={"token": TOKEN})
    assert no_csrf.status_code == 403 and "CSRF" in no_csrf.text
    assert "sw_console=" not in no_csrf.headers.get("set-cookie", "")
    assert csrf_of(form)
    csrf = operator(w)
    for data in ({"confirm": "yes"}, {"confirm": "yes", "csrf": csrf + "x"}):
        resp = w.client.post("/console/seats/scout/pause", data=data)
        assert resp.status_code == 403 and "CSRF" in resp.text
        assert_console_headers(resp)
    assert w.container.seat_runs.get("scout").run.paused is False


def test_an_answer_link_opens_my_asks_only(world: World) -> None:
    w = world
    ask = make_ask(w.container.asks, targets=("ben",), now_ms=NOW)
    opened = w.client.get(
        "/console/my", params={"token": w.links.token_for(ask)}, follow_redirects=False
    )
    assert opened.status_code == 303 and opened.headers["location"] == "/console/my"
    assert "sw_console_person=" in opened.headers["set-cookie"]
    for path in ("/console/", "/console/seats", "/console/ledger", "/console/dead-letters"):
        assert w.client.get(path).status_code == 401
    # The operator token opens no "My asks": it names nobody.
    w.client.cookies.clear()
    operator(w)
    mine = w.client.get("/console/my")
    assert mine.status_code == 401 and "answer link" in mine.text
    bearer = w.client.get("/console/my", headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 401


# ------------------------------------------------------------------ seats


def stop_after_failures(c: Container, seat: str) -> None:
    c.seat_runs.update(
        seat,
        lambda run: run.model_copy(
            update={"controller": ControllerState(first=False, failures=3, blocked=True)}
        ),
    )


def test_a_stopped_seat_shows_why_and_resuming_it_works(world: World) -> None:
    w = world
    stop_after_failures(w.container, "scout")
    csrf = operator(w)
    listing = w.client.get("/console/seats")
    assert "stopped" in listing.text and "Stopped after 3 failed turn(s)" in listing.text
    page = w.client.get("/console/seats/scout")
    assert page.status_code == 200 and "Stopped after 3 failed turn(s)" in page.text
    # The first POST asks to confirm and changes nothing.
    ask = w.client.post("/console/seats/scout/resume", data={"csrf": csrf})
    assert ask.status_code == 200 and 'name="confirm" value="yes"' in ask.text
    assert w.container.seat_runs.get("scout").run.controller.blocked is True
    done = w.client.post(
        "/console/seats/scout/resume", data={"csrf": csrf, "confirm": "yes"}, follow_redirects=False
    )
    assert done.status_code == 303
    run = w.container.seat_runs.get("scout").run
    assert run.controller.blocked is False and run.controller.failures == 0
    assert run.paused is False
    after = w.client.get(done.headers["location"])
    assert "Resume recorded" in after.text and "Stopped after" not in after.text


def test_pause_and_run_now_and_the_seat_details(world: World) -> None:
    w = world
    make_ask(w.container.asks, seat="rover", targets=("gus",), now_ms=NOW)
    csrf = operator(w)
    w.client.post("/console/seats/rover/pause", data={"csrf": csrf, "confirm": "yes"})
    assert w.container.seat_runs.get("rover").run.paused is True
    page = w.client.get("/console/seats/rover")
    assert "paused" in page.text and "to gus" in page.text  # its open ask
    w.client.post("/console/seats/rover/run-now", data={"csrf": csrf, "confirm": "yes"})
    assert w.container.seat_runs.get("rover").run.steering is True
    listing = w.client.get("/console/seats")
    assert 'href="/console/asks?state=open&amp;seat=rover"' in listing.text
    missing = w.client.get("/console/seats/nobody")
    assert missing.status_code == 404 and "No such seat" in missing.text
    bad = w.client.post("/console/seats/scout/explode", data={"csrf": csrf, "confirm": "yes"})
    assert bad.status_code == 404


# ------------------------------------------------------------------ my asks


def test_my_asks_lists_the_persons_asks_and_records_an_answer_as_the_link_does(
    world: World,
) -> None:
    w = world
    first = make_ask(w.container.asks, targets=("ben",), trigger=CONSENT, now_ms=NOW)
    second = make_ask(w.container.asks, work_id="docs", targets=("ben",), now_ms=NOW + 1)
    others = make_ask(w.container.asks, work_id="gus-only-work", targets=("gus",), now_ms=NOW + 2)
    w.client.get("/console/my", params={"token": w.links.token_for(first)})
    page = w.client.get("/console/my")
    assert page.status_code == 200
    assert first.work_id in page.text and "docs" in page.text
    assert "gus-only-work" not in page.text
    assert '<button type="submit" name="answer" value="approved">Approve</button>' in page.text
    csrf = csrf_of(page)
    # Not another person's ask, not as another person, not without the CSRF token.
    refused = [
        w.client.post(f"/console/my/asks/{others.id}/answer", data=d)
        for d in (
            {"csrf": csrf, "by": "ben", "answer": "done"},
            {"csrf": csrf, "by": "gus", "answer": "done"},
            {"by": "ben", "answer": "done"},
        )
    ]
    assert [r.status_code for r in refused] == [404, 403, 403]
    assert w.container.asks.get(others.id).state == "open"  # type: ignore[union-attr]
    done = w.client.post(
        f"/console/my/asks/{first.id}/answer",
        data={"csrf": csrf, "by": "ben", "answer": "approved", "text": "go ahead"},
        follow_redirects=False,
    )
    assert done.status_code == 303
    stored = w.container.asks.get(first.id)
    assert stored is not None and stored.state == "answered" and stored.answer is not None
    assert (stored.answer.answer, stored.answer.by, stored.answer.via) == (
        "approved",
        "ben",
        "link",
    )
    assert stored.answer.text == "go ahead"
    after = w.client.get(done.headers["location"])
    assert "is recorded" in after.text and f"/console/my/asks/{first.id}/" not in after.text
    # A snooze and a reply (its text needed) on the other one.
    empty = w.client.post(
        f"/console/my/asks/{second.id}/answer",
        data={"csrf": csrf, "by": "ben", "answer": "replied"},
    )
    assert empty.status_code == 422
    w.client.post(
        f"/console/my/asks/{second.id}/answer",
        data={"csrf": csrf, "by": "ben", "answer": "snoozed"},
    )
    snoozed = w.container.asks.get(second.id)
    assert snoozed is not None and snoozed.state == "snoozed"


def test_a_bad_or_expired_link_gets_a_page(world: World) -> None:
    w = world
    ask = make_ask(w.container.asks, targets=("ben",), now_ms=NOW)
    bad = w.client.get("/console/my", params={"token": "nonsense"})
    assert bad.status_code == 401 and "does not work" in bad.text
    w.clock.ms = NOW + 400 * 86_400_000
    late = w.client.get("/console/my", params={"token": w.links.token_for(ask)})
    assert late.status_code == 401 and "expired" in late.text
    assert "sw_console_person" not in late.headers.get("set-cookie", "")


# ------------------------------------------------------------------ dead letters


def test_a_dead_letter_is_listed_shown_and_replayed_once_confirmed(world: World) -> None:
    w = world
    tracking = "t-console-poison"
    message = accept_work(Journal(w.redis), tracking).to_wire()
    letters = DeadLetters(w.redis, max_deliveries=5)
    for _ in range(5):
        letters.count_redelivery(tracking, queue=Queue.ENGAGEMENT, message=message, now_ms=NOW)
    (letter,) = letters.list()
    csrf = operator(w)
    listing = w.client.get("/console/dead-letters")
    assert letter.id in listing.text and tracking in listing.text
    detail = w.client.get(f"/console/dead-letters/{letter.id}")
    assert detail.status_code == 200 and "Replay" in detail.text
    confirm = w.client.post(f"/console/dead-letters/{letter.id}/replay", data={"csrf": csrf})
    assert 'name="confirm" value="yes"' in confirm.text
    assert letters.get(letter.id).replayed_at_ms is None  # type: ignore[union-attr]
    done = w.client.post(
        f"/console/dead-letters/{letter.id}/replay", data={"csrf": csrf, "confirm": "yes"}
    )
    assert done.status_code == 200 and "Replayed" in done.text
    assert letters.get(letter.id).replayed_at_ms is not None  # type: ignore[union-attr]
    assert letters.count() == 0
    assert w.client.get("/console/dead-letters/nope").status_code == 404


# ------------------------------------------------------------------ ledger


def write_row(r: redis.Redis, row: LedgerRow) -> None:
    """A ledger row as the stage scripts write it: recorded (its entry id) at its time."""
    stream = keys.ledger_stream(row.seat_id)
    r.xadd(stream, {"row": row.model_dump_json(by_alias=True)}, id=f"{row.at_ms}-*")
    r.sadd(keys.LEDGER_SEATS, row.seat_id)


def test_the_ledger_filters_pages_and_opens_a_decision(world: World) -> None:
    w = world
    for i in range(60):
        write_row(
            w.redis,
            LedgerRow(
                at_ms=NOW + i,
                seat_id="scout" if i % 2 else "rover",
                work_id=f"w{i}",
                outcome="engaged" if i % 3 else "rate_limited_target",
                reason_code="blocked_on_other:x" if i % 3 else "quiet_hours",
                targets=(Target(member_id="ben" if i < 30 else "gus"),),
                surface="dm",
                why=(f"line one of w{i}", "line two"),
            ),
        )
    operator(w)
    page = w.client.get("/console/ledger")
    assert page.text.count("<tr><td><a href=") == 50 and "Older" in page.text
    older = re.search(r'href="(\?[^"]*before=[^"]+)" rel="next"', page.text)
    assert older
    second = w.client.get("/console/ledger" + html.unescape(older.group(1)))
    assert second.text.count("<tr><td><a href=") == 10 and 'rel="next"' not in second.text
    assert not set(re.findall(r"<td>(w\d+)</td>", page.text)) & set(
        re.findall(r"<td>(w\d+)</td>", second.text)
    )
    assert w.client.get("/console/ledger?before=nonsense").status_code == 422
    ben = w.client.get("/console/ledger", params={"person": "ben"})
    assert ben.text.count("<tr><td><a href=") == 30 and ">gus<" not in ben.text
    narrow = w.client.get(
        "/console/ledger",
        params={"person": "gus", "seat": "scout", "outcome": "rate_limited_target"},
    )
    assert narrow.text.count("<tr><td><a href=") == 5  # i in 33, 39, 45, 51, 57
    reason = w.client.get("/console/ledger", params={"reason": "quiet_hours"})
    assert reason.text.count("<tr><td><a href=") == 20
    window = w.client.get(
        "/console/ledger", params={"since": "2027-01-15T08:00", "until": "2027-01-15T08:01"}
    )
    assert window.text.count("<tr><td><a href=") == 50  # every row is at 08:00:00.0xx
    before = w.client.get("/console/ledger", params={"until": "2027-01-15T08:00"})
    assert before.text.count("<tr><td><a href=") == 0 and "No rows match" in before.text
    wrong = w.client.get("/console/ledger", params={"since": "yesterday"})
    assert wrong.status_code == 422 and "Not a time" in wrong.text
    link = re.search(r'href="(/console/ledger/scout/[0-9-]+)"', narrow.text)
    assert link
    row = w.client.get(link.group(1))
    assert row.status_code == 200 and "line two" in row.text and "gus (rung: explicit)" in row.text
    assert w.client.get("/console/ledger/scout/1-1").status_code == 404


# ------------------------------------------------------------------ overview and the rest


def test_the_overview_links_each_number_to_its_list(world: World) -> None:
    w = world
    make_ask(w.container.asks, targets=("ben",), now_ms=NOW)
    operator(w)
    page = w.client.get("/console/")
    assert page.status_code == 200
    assert 'href="/console/dead-letters">0<' in page.text
    assert 'href="/console/seats">2<' in page.text
    assert re.search(r'href="/console/asks\?state=\w+">\w+: 1<', page.text), page.text
    asks = w.client.get("/console/asks", params={"state": "open", "person": "ben"})
    assert asks.status_code == 200 and "1 ask(s)" in asks.text
    nobody = w.client.get("/console/asks", params={"state": "open", "person": "gus"})
    assert "0 ask(s)" in nobody.text


def test_the_search_box_finds_an_ask(world: World) -> None:
    w = world
    ask = make_ask(w.container.asks, targets=("ben",), now_ms=NOW)
    operator(w)
    found = w.client.get("/console/search", params={"q": ask.id}, follow_redirects=False)
    assert found.status_code == 303 and found.headers["location"].endswith(ask.id)
    assert w.client.get(found.headers["location"]).status_code == 200
    none = w.client.get("/console/search", params={"q": "nothing-like-it"})
    assert none.status_code == 404


# ------------------------------------------------------------------ steward

REVIEW, INVOICES = "review-turnaround", "invoices-paid-on-time"
NUDGE = "Nudge reviewers on pull requests waiting over a day"


@pytest.fixture
def example_org(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[World]:
    """The console over examples/org.yaml (its objectives and playbooks)."""
    settings = Settings(redis_url=redis_url, api_token=TOKEN, outbox_path=tmp_path / "o.jsonl")
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app, client=redis_client)
    clock = Clock(NOW)
    links = AnswerLinks.of(settings)
    assert links is not None
    with TestClient(create_ingress(container, app, clock_ms=clock)) as client:
        yield World(client, container, clock, links, redis_client)


def test_the_steward_page_records_an_override_by_the_admit_rules(example_org: World) -> None:
    w = example_org
    csrf = operator(w)
    page = w.client.get("/console/steward")
    assert page.status_code == 200 and REVIEW in page.text and "The audit is empty" in page.text
    assert "- / 24 (down)" in page.text and "none yet" in page.text  # no sample, no run
    for hours, back in ((40, 3), (36, 2), (31, 1)):  # a week apart, each nearer the target
        w.container.samples.record(
            REVIEW, Sample(value=hours, source="method", at_ms=NOW - back * 7 * 86_400_000)
        )
    measured = w.client.get("/console/steward").text
    row = measured.split(f">{REVIEW}</a>")[1].split("</tr>")[0]
    assert "31 / 24 (down)" in row and "<td>7</td>" in row and "improving" in row, row
    form = {"csrf": csrf, "objective": REVIEW, "candidate": NUDGE, "by": "ava"}
    refusals = [
        ({**form, "reason": "r", "objective": INVOICES}, 409, "objective"),
        ({**form, "reason": "r", "by": "nobody"}, 422, "by"),
        ({**form, "reason": "r", "candidate": "Rewrite billing"}, 422, "candidate"),
        ({**form, "reason": ""}, 422, "reason"),
    ]
    for data, status, field in refusals:
        resp = w.client.post("/console/steward/overrides", data=data)
        assert resp.status_code == status and f"Refused, nothing written: {field}" in resp.text
    assert w.container.overrides.list(None, 10) == []
    done = w.client.post(
        "/console/steward/overrides", data={**form, "reason": "release week", "gate_wip": "on"}
    )
    assert done.status_code == 200 and "Override recorded" in done.text
    (override,) = w.container.overrides.list(REVIEW, 10)
    assert override.gates == ("wip",) and override.by == "ava"
    assert "release week" in w.client.get("/console/steward", params={"objective": REVIEW}).text
    no_csrf = w.client.post(
        "/console/steward/overrides", data={**form, "reason": "again", "csrf": "wrong"}
    )
    assert no_csrf.status_code == 403


def test_failed_logins_are_throttled_per_address(world: World) -> None:
    w = world
    for _ in range(10):
        assert log_in(w, "guess").status_code == 401
    blocked = log_in(w)  # even the right token, for the rest of the window
    assert blocked.status_code == 429 and "Too many failed logins" in blocked.text
    assert "sw_console=" not in blocked.headers.get("set-cookie", "")


def test_the_apps_refusals_under_the_console_are_pages(world: World) -> None:
    w = world
    operator(w)
    wrong_method = w.client.put("/console/seats")
    assert wrong_method.status_code == 405 and "<h1>Not here</h1>" in wrong_method.text
    assert_console_headers(wrong_method)
    bad_param = w.client.get("/console/seats/scout", params={"done": "<script>"})
    assert bad_param.status_code == 200 and "<script>" not in bad_param.text
    assert w.client.put("/v1/ledger").headers["content-type"].startswith("application/")


def test_the_links_page_leads_to_my_asks(world: World) -> None:
    w = world
    ask = make_ask(w.container.asks, targets=("ben",), now_ms=NOW)
    token = w.links.token_for(ask)
    page = w.client.get(
        f"/v1/asks/{ask.id}/answer", params={"token": token}, headers={"Accept": "text/html"}
    )
    found = re.search(r'<a href="([^"]+)">Everything waiting for you</a>', page.text)
    assert found
    target = httpx2.URL(f"http://testserver/v1/asks/{ask.id}/answer").join(
        found.group(1).replace("&amp;", "&")
    )
    assert target.path == "/console/my"
    opened = w.client.get(str(target), follow_redirects=False)
    assert opened.status_code == 303 and "sw_console_person=" in opened.headers["set-cookie"]


def test_the_asks_page_filters_expired_asks_and_a_trace_is_a_page(world: World) -> None:
    w = world
    store = w.container.asks
    gone = make_ask(store, work_id="too-late", targets=("ben",), now_ms=NOW)
    make_ask(store, work_id="still-open", targets=("gus",), now_ms=NOW + 1)
    store.update(
        gone.id,
        lambda a: a.model_copy(
            update={"state": "closed", "closed": "expired", "deadline_ms": None}
        ),
    )
    operator(w)
    expired = w.client.get("/console/asks", params={"state": "expired"})
    assert expired.status_code == 200 and "1 ask(s)" in expired.text
    assert gone.id in expired.text and "still-open" not in expired.text
    by_person = w.client.get("/console/asks", params={"person": "gus"})
    assert "1 ask(s)" in by_person.text and gone.id not in by_person.text
    assert w.client.get("/console/asks", params={"state": "lost"}).status_code == 422
    missing = w.client.get("/console/trace/gh:nothing")
    assert missing.status_code == 404 and "No such event" in missing.text


def test_the_asks_page_shows_time_to_answer_and_todays_attention_per_person(
    world: World,
) -> None:
    """An answered ask says how long its answer took (from when it landed); each person's
    asks of the last 24 hours, across seats, against the daily limit, as the guardrails
    count them."""
    w = world
    ask = make_ask(w.container.asks, targets=("ben",), now_ms=NOW - 3_600_000)
    w.container.asks.answer(ask.id, AnswerIn("done", "ben", "api"), now_ms=NOW - 600_000)
    ledger = w.container.ledger
    for i, seat in enumerate(["scout", "rover", "scout"]):  # two seats ask ben; one asks gus
        decision = EngagementDecision(
            engage=True,
            targets=(Target(member_id="gus" if i == 2 else "ben"),),
            surface="dm",
            work_id=f"today-{i}",
            dedupe_key=f"today-{i}",
            now_ms=NOW - 1_000,
        )
        verdict = ledger.reserve(
            f"op-today-{i}", decision=decision, seat_id=seat, tracking_id=f"t-{i}", now_ms=NOW
        )
        assert verdict.allowed
    operator(w)
    page = w.client.get("/console/asks")
    assert page.status_code == 200
    assert "<td>50 min</td>" in page.text  # landed at NOW - 1 h, answered 50 minutes later
    today = page.text.split("Attention used today")[1].split("The week")[0]
    limit = ledger.limits.per_target_per_day
    assert re.search(rf">ben</a></td><td>2</td><td>2 of {limit}</td>", today), today
    assert re.search(rf">gus</a></td><td>1</td><td>1 of {limit}</td>", today), today
    assert ledger.attention_today(["ben", "gus", "ava"], now_ms=NOW) == {"ben": 2, "gus": 1}
    # A reservation that lapsed unsent no longer counts.
    later = NOW + 2 * 3_600_000  # past every reservation's life (SEATWIRE_RESERVATION_TTL_MS)
    assert ledger.attention_today(["ben", "gus"], now_ms=later) == {}


def test_a_duration_reads_at_a_glance() -> None:
    from workers.ingress.console.web import took

    assert [took(v) for v in (None, -1, 4_000, 720_000, 3_600_000, 12_000_000, 187_200_000)] == [
        "-",
        "-",
        "4 s",
        "12 min",
        "1 h",
        "3 h 20 min",
        "2 d 4 h",
    ]


def test_an_inbound_events_trace_and_its_search(world: World) -> None:
    w = world
    delivery = "slack:T1:C-PLATFORM:1.0"
    event = {
        "family": "messaging",
        "source": "slack",
        "deliveryId": delivery,
        "ids": {"channelId": "C-PLATFORM", "messageId": "1.0"},
        "msg": {"authorId": "U0AVA", "body": "can you look?", "channelKind": "PUBLIC"},
        "atMs": NOW,
    }
    posted = w.client.post("/v1/events", json=event, headers={"Authorization": f"Bearer {TOKEN}"})
    assert posted.status_code == 202, posted.text
    operator(w)
    found = w.client.get("/console/search", params={"q": delivery}, follow_redirects=False)
    assert found.status_code == 303 and found.headers["location"].startswith("/console/trace/")
    page = w.client.get(found.headers["location"])
    assert page.status_code == 200 and "<dd>accepted" in page.text and delivery in page.text
    tracking = posted.json()["trackingId"]
    work = w.client.get("/console/search", params={"q": tracking}, follow_redirects=False)
    assert work.status_code == 303 and work.headers["location"] == f"/console/work/{tracking}"
    journey = w.client.get(work.headers["location"])
    assert journey.status_code == 200 and "Not decided yet" in journey.text


def test_a_reports_journey_shows_its_decision_and_ledger_rows(world: World) -> None:
    w = world
    tracking = "t-console-journey"
    journal = Journal(w.redis)
    accept_work(journal, tracking)
    decision = EngagementDecision(
        engage=False, reason_code="nobody:quiet", reason="nobody to ask", work_id="journey-work"
    )
    row = LedgerRow(
        at_ms=NOW,
        seat_id="scout",
        work_id="journey-work",
        outcome="none",
        reason_code="nobody:quiet",
        why=("no one owns what blocks it",),
        tracking_id=tracking,
    )
    journal.record_decision(tracking, seat_id="scout", decision=decision, row=row, now_ms=NOW)
    operator(w)
    page = w.client.get(f"/console/work/{tracking}")
    assert page.status_code == 200 and "nobody to ask" in page.text
    link = re.search(
        r'href="(/console/ledger/scout/[0-9-]+)">[^<]*none \(nobody:quiet\)', page.text
    )
    assert link, page.text
    assert "no one owns what blocks it" in w.client.get(link.group(1)).text
    assert w.client.get("/console/work/t-nothing").status_code == 404


def test_a_file_outbox_ask_carries_the_link_to_my_asks(world: World, tmp_path: Path) -> None:
    """On one machine (`seatwire up`, the demo) the file outbox stands in for the chat: its
    line carries the ask's answer link, which leads its person to My asks, where the answer
    reaches the seat's inbox."""

    from contracts import WorkReport
    from contracts.messages import DecisionEnvelope, ReservedEnvelope, WorkEnvelope
    from tests.fakes import BLOCKED_REPORT, stages_on
    from workers.outbound.file import FileOutbox, read_outbox
    from workers.stores.inbox import Inbox

    w = world
    box = FileOutbox(tmp_path / "outbox.jsonl", fsync=False)
    stages = stages_on(w.redis, w.clock, FakeOutbound())
    stages.outbound, stages.links = box, w.links
    stages.journal.accept(
        "t-file", kind="work", seat_id="scout", payload="{}", now_ms=NOW, fingerprint="f"
    )
    report = WorkReport.model_validate(dict(BLOCKED_REPORT))
    env = WorkEnvelope(tracking_id="t-file", seat_id="scout", accepted_at_ms=NOW, report=report)
    decided = stages.engagement(env)
    assert isinstance(decided, DecisionEnvelope)
    reserved = stages.guardrails(decided)
    assert isinstance(reserved, ReservedEnvelope)
    assert stages.send(reserved) == "engaged"
    [line] = read_outbox(box.path)
    url = str(line["answerUrl"])
    assert url.startswith(f"https://seatwire.example/v1/asks/{line['askId']}/answer?token=")
    token = url.split("token=", 1)[1]
    page = w.client.get("/console/my", params={"token": token})
    assert page.status_code == 200 and "billing-migration" in page.text
    members = line["memberIds"]
    assert isinstance(members, list) and len(members) == 1
    by = str(members[0])
    done = w.client.post(
        f"/console/my/asks/{line['askId']}/answer",
        data={"csrf": csrf_of(page), "by": by, "answer": "done"},
    )
    assert done.status_code == 200 and "is recorded" in done.text
    items = Inbox(w.redis).updates("scout").items
    assert [(i.kind, i.ask.answer if i.ask else None) for i in items] == [("ask_answered", "done")]
