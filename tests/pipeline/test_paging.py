"""How many items a page holds when its byte cap counts the page as received (pure)."""

from __future__ import annotations

import itertools

from pipeline.paging import json_bytes, longest_fit

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
