"""The console in a real browser (headless chromium): log in, see a stopped seat and resume
it, filter the ledger to one person, replay a dead letter, and answer an ask from My asks
with the keyboard alone. Screenshots of each page at 1280 and 390 px wide are kept under
.pytest-artifacts/console/."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from contracts.controller import ControllerState
from contracts.engagement import Target
from contracts.guardrails import LedgerRow
from tests.ask_records import CONSENT, make_ask
from tests.browser.conftest import ARTIFACTS, TOKEN, Console, now_ms
from tests.workers.test_recovery import accept_work
from workers.queues import Queue
from workers.stores import keys
from workers.stores.dlq import DeadLetters
from workers.stores.journal import Journal

pytestmark = [pytest.mark.redis, pytest.mark.e2e]

WIDTHS = (1280, 390)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    yield opened
    context.close()


def shoot(page: Page, name: str) -> None:
    """The page at each width, whole, under the artefacts directory."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def log_in(page: Page, base: str) -> None:
    page.goto(f"{base}/console/seats")
    expect(page.get_by_role("heading", name="Please log in")).to_be_visible()
    page.goto(f"{base}/console/login")
    shoot(page, "login")
    page.get_by_label("Operator token").fill(TOKEN)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_an_operator_resumes_a_stopped_seat_filters_the_ledger_and_replays_a_letter(
    console: Console, page: Page
) -> None:
    c = console.container
    c.seat_runs.update(
        "scout",
        lambda run: run.model_copy(
            update={"controller": ControllerState(first=False, failures=3, blocked=True)}
        ),
    )
    at = now_ms()
    for i, person in enumerate(["ben", "gus", "ben", "gus", "ben"]):
        row = LedgerRow(
            at_ms=at + i,
            seat_id="scout",
            work_id=f"work-{i}-{person}",
            outcome="engaged",
            reason_code="blocked_on_other:test",
            targets=(Target(member_id=person),),
            surface="dm",
            why=(f"{person} owns what blocks work-{i}",),
        )
        console.redis.xadd(keys.ledger_stream("scout"), {"row": row.model_dump_json(by_alias=True)})
        console.redis.sadd(keys.LEDGER_SEATS, "scout")
    message = accept_work(Journal(console.redis), "t-browser-poison").to_wire()
    letters = DeadLetters(console.redis, max_deliveries=5)
    for _ in range(5):
        letters.count_redelivery(
            "t-browser-poison", queue=Queue.ENGAGEMENT, message=message, now_ms=at
        )
    (letter,) = letters.list()

    log_in(page, console.base)
    shoot(page, "overview")

    # Seats: scout is stopped, with why; resume it through the confirmation.
    page.get_by_role("link", name="Seats", exact=True).click()
    expect(page.get_by_text("scout: Stopped after 3 failed turn(s)")).to_be_visible()
    shoot(page, "seats")
    page.get_by_role("link", name="scout", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("Stopped after 3 failed turn(s)")
    shoot(page, "seat-stopped")
    page.get_by_role("button", name="Resume…").click()
    expect(page.get_by_role("heading", name="Resume scout?")).to_be_visible()
    assert c.seat_runs.get("scout").run.controller.blocked is True  # not before confirming
    page.get_by_role("button", name="Resume", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("Resume recorded")
    expect(page.get_by_text("Stopped after")).to_have_count(0)
    assert c.seat_runs.get("scout").run.controller.blocked is False

    # Ledger: one person's rows only, and a row's decision with its why.
    page.get_by_role("link", name="Ledger", exact=True).click()
    expect(page.locator("tbody tr")).to_have_count(5)
    page.get_by_label("Person").fill("gus")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("tbody tr")).to_have_count(2)
    expect(page.locator("tbody")).not_to_contain_text("ben")
    shoot(page, "ledger-gus")
    page.locator("tbody tr").first.get_by_role("link").click()
    expect(page.get_by_text("gus owns what blocks work-3")).to_be_visible()

    # Dead letters: replay one, confirmed.
    page.get_by_role("link", name="Dead letters", exact=True).click()
    page.get_by_role("link", name=letter.id).click()
    shoot(page, "dead-letter")
    page.get_by_role("button", name="Replay…").click()
    page.get_by_role("button", name="Replay", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("Replayed")
    replayed = letters.get(letter.id)
    assert replayed is not None and replayed.replayed_at_ms is not None

    page.get_by_role("button", name="Log out").click()
    page.goto(f"{console.base}/console/seats")
    expect(page.get_by_role("heading", name="Please log in")).to_be_visible()


def test_a_person_answers_from_my_asks_with_the_keyboard_alone(
    console: Console, page: Page
) -> None:
    ask = make_ask(console.container.asks, targets=("ben",), trigger=CONSENT, now_ms=now_ms())
    page.goto(f"{console.base}/console/my?token={console.links.token_for(ask)}")
    assert page.url.endswith("/console/my")  # the token left the address bar
    expect(page.get_by_role("heading", name="scout asks about billing-migration")).to_be_visible()
    shoot(page, "my-asks")
    # The link's session opens no operator page.
    page.goto(f"{console.base}/console/seats")
    expect(page.get_by_role("heading", name="Please log in")).to_be_visible()
    page.goto(f"{console.base}/console/my")

    approve = page.get_by_role("button", name="Approve")
    for _ in range(20):  # Tab through the page until Approve has the focus
        page.keyboard.press("Tab")
        if approve.evaluate("b => b === document.activeElement"):
            break
    else:
        pytest.fail("the Approve button cannot be reached with Tab")
    assert approve.evaluate("b => b.matches(':focus-visible')")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("is recorded")
    shoot(page, "my-asks-answered")
    stored = console.container.asks.get(ask.id)
    assert stored is not None and stored.answer is not None
    assert (stored.answer.answer, stored.answer.by, stored.answer.via) == (
        "approved",
        "ben",
        "link",
    )


OPERATOR_PAGES = {
    "overview": ("/console/", "Overview"),
    "seats": ("/console/seats", "Seats"),
    "seat": ("/console/seats/scout", "scout"),
    "asks": ("/console/asks", "Asks"),
    "ledger": ("/console/ledger", "Ledger"),
    "dead-letters": ("/console/dead-letters", "Dead letters"),
    "steward": ("/console/steward", "Steward"),
}


def overflow(page: Page) -> int:
    """How many pixels the page is wider than its window (a table may scroll in its own box,
    the page itself may not)."""
    width: int = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    return width


def test_every_operator_page_fits_a_desktop_and_a_phone(console: Console, page: Page) -> None:
    """Each operator page at 1280 and 390 px: its heading shows, the page is no wider than
    the window, every link and button has a name; a screenshot of each is kept."""
    make_ask(console.container.asks, targets=("ben",), now_ms=now_ms())
    log_in(page, console.base)
    for name, (path, heading) in OPERATOR_PAGES.items():
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            response = page.goto(f"{console.base}{path}")
            assert response is not None and response.status == 200, (path, width)
            expect(page.get_by_role("heading", name=heading).first).to_be_visible()
            assert overflow(page) <= 0, f"{path} is wider than {width} px"
            unnamed = page.evaluate(
                "() => [...document.querySelectorAll('a, button')]"
                ".filter(e => !(e.innerText || e.getAttribute('aria-label') || '').trim())"
                ".map(e => e.outerHTML)"
            )
            assert not unnamed, (path, unnamed)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"page-{name}-{width}.png"), full_page=True)
