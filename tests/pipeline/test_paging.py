"""How many items a page holds when its byte cap counts the page as received, and how an item
too large for a page on its own is cut to fit one (pure)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from contracts import Truncation
from pipeline.paging import FLOOR_BYTES, CannotFit, fit_alone, json_bytes, longest_fit

SIZES = (5, 1, 30, 2, 2, 9)  # bytes each item adds to a page
ENVELOPE = 7  # bytes a page has with no item


def size_of(n: int) -> int:
    return ENVELOPE + sum(SIZES[:n])


def test_longest_fit_is_the_longest_page_within_the_budget() -> None:
    """For every budget, the largest page whose size is within it, as a linear scan finds it;
    one item when even one is over, none when there are none."""
    for count, budget in itertools.product(range(len(SIZES) + 1), range(70)):
        fitting = [n for n in range(1, count + 1) if size_of(n) <= budget]
        expected = 0 if count == 0 else max(fitting, default=1)
        assert longest_fit(count, size_of, budget) == expected, (count, budget)


def test_longest_fit_measures_the_whole_list_once_when_it_fits() -> None:
    """The usual page, everything within the budget, costs one measurement."""
    asked: list[int] = []

    def measured(n: int) -> int:
        asked.append(n)
        return size_of(n)

    assert longest_fit(len(SIZES), measured, 1_000) == len(SIZES) and asked == [len(SIZES)]


def test_json_bytes_counts_utf8_bytes_of_compact_json() -> None:
    """Compact separators, UTF-8 kept: `{"a":"é"}` is 10 bytes."""
    assert json_bytes({"a": "é"}) == 10


BUDGET = 4_000


def one_item_page(item: dict[str, Any]) -> int:
    """A page of `item` alone, sent twice over (as MCP sends a result: text and structure)."""
    return 2 * json_bytes({"items": [item], "position": 1, "hasMore": False})


def slack_item(body: str, **ids: Any) -> dict[str, Any]:
    return {
        "position": 7,
        "deliveryId": "Ev01",
        "candidate": {
            "source": "slack",
            "ids": {"channelId": "C1", "messageId": "1.5", **ids},
            "msg": {"body": body, "mentions": ["U0SCOUT"]},
            "atMs": 12,
        },
    }


def test_fit_alone_leaves_an_item_that_fits_as_it_is() -> None:
    """An item whose page is within the budget comes whole and unmarked."""
    item = slack_item("hello")
    assert fit_alone(item, one_item_page, BUDGET) == (item, None)


def test_fit_alone_cuts_only_the_long_body_and_keeps_as_much_of_it_as_fits() -> None:
    """A long body is cut to its start, as long as the page allows (one more character would
    be over), and marked with its path and full length; the ids and the rest are untouched."""
    body = "".join(chr(ord("a") + n % 26) for n in range(10_000))
    cut, marker = fit_alone(slack_item(body), one_item_page, BUDGET)
    assert marker is not None and one_item_page(cut) <= BUDGET
    kept = cut["candidate"]["msg"]["body"]
    assert body.startswith(kept) and len(kept) > 1_000
    assert marker.fields == ("candidate.msg.body",)
    assert marker.original_chars == {"candidate.msg.body": 10_000} and not marker.original_items
    assert cut["truncated"] == marker.to_wire()
    one_more = {**cut, "candidate": {**cut["candidate"], "msg": {**cut["candidate"]["msg"]}}}
    one_more["candidate"]["msg"]["body"] = body[: len(kept) + 1]
    assert one_item_page(one_more) > BUDGET
    rest = {k: v for k, v in cut.items() if k not in ("candidate", "truncated")}
    assert rest == {"position": 7, "deliveryId": "Ev01"}
    assert cut["candidate"]["ids"] == {"channelId": "C1", "messageId": "1.5"}
    assert cut["candidate"]["msg"]["mentions"] == ["U0SCOUT"]


def test_fit_alone_cuts_huge_ids_and_lists_too_and_names_each() -> None:
    """However an item is large (a huge id, a list of thousands, astral text), the page fits:
    every field over the common level is cut (lists by whole elements) and named."""
    item = slack_item("😀" * 50_000, threadRootId="T" * 30_000)
    item["candidate"]["msg"]["mentions"] = [f"U{n:08d}" for n in range(5_000)]
    cut, marker = fit_alone(item, one_item_page, BUDGET)
    assert marker is not None and one_item_page(cut) <= BUDGET
    assert marker.fields == (
        "candidate.ids.threadRootId",
        "candidate.msg.body",
        "candidate.msg.mentions",
    )
    assert marker.original_chars == {
        "candidate.ids.threadRootId": 30_000,
        "candidate.msg.body": 50_000,
    }
    assert marker.original_items == {"candidate.msg.mentions": 5_000}
    mentions = cut["candidate"]["msg"]["mentions"]
    assert mentions == [f"U{n:08d}" for n in range(len(mentions))]
    assert cut["candidate"]["ids"]["channelId"] == "C1"  # short: not cut


def test_fit_alone_never_empties_a_text_and_refuses_a_budget_no_item_fits() -> None:
    """At the floor a cut text still keeps its first characters (FLOOR_BYTES of them, six
    bytes each escaped); a budget below even that is an error, never a page over it."""
    item = slack_item("\x01" * 1_000)
    marker = Truncation(
        fields=("candidate.msg.body",), original_chars={"candidate.msg.body": 1_000}
    )
    at_floor = slack_item("\x01" * ((FLOOR_BYTES - 2) // 6))
    budget = one_item_page({**at_floor, "truncated": marker.to_wire()})
    assert fit_alone(item, one_item_page, budget) == (
        {**at_floor, "truncated": marker.to_wire()},
        marker,
    )
    with pytest.raises(CannotFit):
        fit_alone(item, one_item_page, budget - 1)
