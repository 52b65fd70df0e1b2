"""How much of a list one page carries when its byte cap is counted on the page as its reader
receives it: the whole result in the transport's own encoding (an MCP tool result carries its
JSON twice, as text and as structured content, and escapes the text), not the bare items.
Pure: the encoding arrives as a function.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Measure = Callable[[Any], int]  # the bytes a result takes as its reader receives it


def json_bytes(value: Any) -> int:
    """Bytes of `value` as compact UTF-8 JSON: what an HTTP route's JSON body sends."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def longest_fit(count: int, size: Callable[[int], int], budget: int) -> int:
    """How many of `count` leading items one page holds: the largest n whose page, `size(n)`
    bytes as received, is at most `budget`. Never fewer than one (0 only when `count` is 0):
    an item larger than the budget on its own still comes, alone, or nothing behind it could
    ever be read. `size` must not shrink as n grows (each item adds its own bytes)."""
    if count <= 0:
        return 0
    if size(count) <= budget:  # the usual page: everything fits, one measurement
        return count
    low, high = 1, count - 1  # the answer is in [low, high]; size(high + 1) is over budget
    while low < high:
        mid = (low + high + 1) // 2
        if size(mid) <= budget:
            low = mid
        else:
            high = mid - 1
    return low
