"""A seat's inbox on a real Redis: positions, the same items until acknowledged, page limits,
idempotent appends, and acknowledgements that cannot skip what was never delivered."""

from __future__ import annotations

import pytest
import redis

from contracts import Candidate, Directedness, InboxItem
from pipeline.paging import json_bytes
from tests.fakes import Placed, place
from workers.stores import keys
from workers.stores.inbox import PAGE_BYTES, AckBeyondLast, Inbox

VERDICT = Directedness(directed=True, surface="mention", reason="mention", why="mentioned")


def candidate(n: int, body: str = "hi") -> Candidate:
    return Candidate.model_validate(
        {
            "family": "messaging",
            "source": "slack",
            "deliveryId": f"d{n}",
            "ids": {"channelId": "C1", "messageId": f"{n}.0"},
            "msg": {"authorId": "U0ANN", "body": body, "mentions": ["U0SCOUT"]},
            "atMs": n,
        }
    )


class Seats(Inbox):
    """The inbox, with `append` placing an event the way the directedness stage does."""

    def append(self, seat: str | tuple[str, ...], cand: Candidate, verdict: Directedness) -> Placed:
        return place(self.r, seat, cand, verdict)


@pytest.fixture
def inbox(redis_client: redis.Redis) -> Seats:
    return Seats(redis_client)


def test_items_get_increasing_positions_and_come_back_until_acked(inbox: Seats) -> None:
    """Three directed events are read oldest first, and re-read until acknowledged."""
    for n in (1, 2, 3):
        assert inbox.append("scout", candidate(n), VERDICT).position == n
    page = inbox.updates("scout")
    assert [i.delivery_id for i in page.items] == ["d1", "d2", "d3"]
    assert (page.position, page.acknowledged, page.has_more) == (3, 0, False)
    assert inbox.updates("scout") == page
    assert page.items[0].candidate == candidate(1) and page.items[0].reason == "mention"


def test_ack_drops_handled_items_and_returns_the_rest(
    inbox: Seats, redis_client: redis.Redis
) -> None:
    """Acknowledging position 2 leaves item 3; a stale lower ack changes nothing."""
    for n in (1, 2, 3):
        inbox.append("scout", candidate(n), VERDICT)
    page = inbox.ack("scout", 2)
    assert [i.position for i in page.items] == [3] and page.acknowledged == 2
    assert inbox.ack("scout", 1).acknowledged == 2
    assert redis_client.xlen(keys.inbox("scout")) == 1
    assert inbox.ack("scout", 3).items == ()


def test_ack_beyond_the_last_position_is_refused(inbox: Seats) -> None:
    """An ack for a position never given is an error, not a silent success."""
    inbox.append("scout", candidate(1), VERDICT)
    with pytest.raises(AckBeyondLast) as err:
        inbox.ack("scout", 2)
    assert err.value.last == 1
    assert inbox.updates("scout").acknowledged == 0
    with pytest.raises(AckBeyondLast):
        inbox.ack("tally", 1)  # an empty inbox has given nothing


def test_the_same_delivery_is_placed_once(inbox: Seats) -> None:
    """Recording one delivery twice (a redelivered task) keeps one item at one position, and
    each seat the event is directed to has its own positions."""
    inbox.append("scout", candidate(7), VERDICT)
    first = inbox.append(("tally", "scout"), candidate(1), VERDICT)
    again = inbox.append(("tally", "scout"), candidate(1), VERDICT)
    assert (first.new, again.new, first.position) == (True, False, 1)
    assert [i.delivery_id for i in inbox.updates("scout").items] == ["d7", "d1"]
    assert [i.position for i in inbox.updates("tally").items] == [1]


def test_page_holds_at_most_50_items(inbox: Seats) -> None:
    """Sixty items are read as 50, then 10, with has_more in between."""
    for n in range(1, 61):
        inbox.append("scout", candidate(n), VERDICT)
    page = inbox.updates("scout")
    assert len(page.items) == 50 and page.has_more and page.position == 50
    rest = inbox.ack("scout", page.position)
    assert len(rest.items) == 10 and not rest.has_more


def test_page_holds_at_most_64_kib_but_always_one_item(inbox: Seats) -> None:
    """Large items fill a page up to 64 KB; an item larger than that still comes alone."""
    for n in range(1, 5):
        inbox.append("scout", candidate(n, body="x" * 20_000), VERDICT)
    page = inbox.updates("scout")
    assert len(page.items) == 3 and page.has_more
    inbox.ack("scout", 4)
    inbox.append("scout", candidate(9, body="y" * (PAGE_BYTES + 10)), VERDICT)
    inbox.append("scout", candidate(10), VERDICT)
    page = inbox.updates("scout")
    assert [i.delivery_id for i in page.items] == ["d9"] and page.has_more


def test_a_page_is_64_kib_as_sent_to_the_byte(inbox: Seats) -> None:
    """Items that make the page exactly 64 KiB as sent (compact JSON, as the HTTP routes send
    it: the page, not just its items) all come in it; one byte more and the last item waits
    for the next page, which starts right at it."""

    def fill(seat: str, last_body: str, first: int) -> None:
        # a delivery is placed once, so each seat's have ids of their own (of one width)
        for n in (first, first + 1, first + 2):
            inbox.append(seat, candidate(n, body="x" * 20_000), VERDICT)
        inbox.append(seat, candidate(first + 3, body=last_body), VERDICT)

    fill("probe", "y", 11)
    short = PAGE_BYTES - json_bytes(inbox.updates("probe").to_wire())
    assert short > 0
    exact = "y" * (1 + short)
    fill("scout", exact, 21)
    page = inbox.updates("scout")
    assert json_bytes(page.to_wire()) == PAGE_BYTES
    assert [i.position for i in page.items] == [1, 2, 3, 4] and not page.has_more

    fill("tally", exact + "y", 31)
    page = inbox.updates("tally")
    assert json_bytes(page.to_wire()) <= PAGE_BYTES
    assert [i.position for i in page.items] == [1, 2, 3] and page.has_more
    rest = inbox.ack("tally", page.position)
    assert [i.position for i in rest.items] == [4] and not rest.has_more


def test_a_page_fits_the_measure_it_is_given(inbox: Seats) -> None:
    """A transport that sends each page twice over (as MCP does: text and structured
    content) gets pages half as full, each within 64 KiB of its own measure, none lost."""
    for n in range(1, 7):
        inbox.append("scout", candidate(n, body="x" * 20_000), VERDICT)

    def twice(page: object) -> int:
        return 2 * json_bytes(page)

    first = inbox.updates("scout", twice)
    assert [i.position for i in first.items] == [1] and first.has_more
    assert twice(first.to_wire()) <= PAGE_BYTES
    assert [i.position for i in inbox.updates("scout").items] == [1, 2, 3]
    second = inbox.ack("scout", first.position, twice)
    assert [i.position for i in second.items] == [2] and second.has_more


def test_an_item_over_a_page_alone_comes_cut_at_its_position_and_stays_whole(
    inbox: Seats, redis_client: redis.Redis
) -> None:
    """A 100,000-character body behind a small item waits for a page of its own, comes there
    cut to fit 64 KiB and marked, again until acknowledged, while the stored item keeps its
    whole body; acknowledging it leads to the next item, whole."""
    body = "".join(chr(ord("a") + n % 26) for n in range(100_000))
    for n, text in ((1, "small"), (2, body), (3, "after")):
        inbox.append("scout", candidate(n, body=text), VERDICT)
    first = inbox.updates("scout")
    assert [(i.position, i.truncated) for i in first.items] == [(1, None)] and first.has_more
    second = inbox.ack("scout", first.position)
    assert json_bytes(second.to_wire()) <= PAGE_BYTES
    [item] = second.items
    assert item.position == second.position == 2 and second.has_more
    assert item.truncated is not None and item.truncated.fields == ("candidate.msg.body",)
    assert item.truncated.original_chars == {"candidate.msg.body": 100_000}
    assert item.candidate.msg is not None and body.startswith(item.candidate.msg.body)
    assert len(item.candidate.msg.body) > 60_000
    assert second.to_wire()["items"][0]["truncated"]["originalChars"] == {
        "candidate.msg.body": 100_000
    }
    assert inbox.updates("scout") == second  # the same cut, until acknowledged
    entries = redis_client.xrange(keys.inbox("scout"), min="2-0", max="2-0")
    assert entries is not None
    [(_id, fields)] = entries
    assert fields is not None
    raw = fields[b"item"]
    stored = InboxItem.model_validate_json(raw)
    assert stored.candidate.msg is not None and stored.candidate.msg.body == body
    assert stored.truncated is None and b"truncated" not in raw
    third = inbox.ack("scout", second.position)
    assert [(i.position, i.truncated) for i in third.items] == [(3, None)]
    assert "truncated" not in third.to_wire()["items"][0] and not third.has_more
