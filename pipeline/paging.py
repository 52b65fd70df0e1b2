"""How much of a list one page carries when its byte cap is counted on the page as its reader
receives it: the whole result in the transport's own encoding (an MCP tool result carries its
JSON twice, as text and as structured content, and escapes the text), not the bare items.
Pure: the encoding arrives as a function.

The cap holds for every page, even one whose first item is larger than a page on its own.
Such an item still comes, alone and at its own position (so acknowledging and continuing
work as for any page, and nothing behind it is held back), but cut: its longest fields are
shortened, each to the same size, until the page fits, and the item carries a `truncated`
marker (contracts `Truncation`) naming every cut field and its length before the cut. Cutting
rather than refusing, because an item that can never be read whole could never be read at
all, and the reader would be stuck before it; cutting the longest fields first, because the
long one is almost always a body of free text while the ids a reader acts on are short and
are left alone. A text keeps its first characters and a list its first elements, with
nothing added, so what is there is the item's own. Only the page's copy is cut: the stored
item stays whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from contracts import Truncation

Measure = Callable[[Any], int]  # the bytes a result takes as its reader receives it

# The fewest bytes (compact JSON) a cut field is left with: enough for one character of any
# text (six bytes escaped, with its quotes), so a text that must not be empty never is. At
# this floor an item is its keys and a few bytes a field, far inside any page cap.
FLOOR_BYTES = 64
MARKER = "truncated"  # the key of an item's `Truncation`


def json_bytes(value: Any) -> int:
    """Bytes of `value` as compact UTF-8 JSON: what an HTTP route's JSON body sends."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def longest_fit(count: int, size: Callable[[int], int], budget: int) -> int:
    """How many of `count` leading items one page holds: the largest n whose page, `size(n)`
    bytes as received, is at most `budget`. Never fewer than one (0 only when `count` is 0):
    an item larger than the budget on its own still comes, alone (`fit_alone` cuts it), or
    nothing behind it could ever be read. `size` must not shrink as n grows (each item adds
    its own bytes)."""
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


Path = tuple[str, ...]
Sized = str | list[Any]  # what can be cut: a text by characters, a list by elements


class CannotFit(ValueError):
    """Even with every field at FLOOR_BYTES the page is over its budget: the budget is
    smaller than an item's keys (no item of this system's contracts is that large)."""


def fit_alone(
    item: Mapping[str, Any], size: Callable[[dict[str, Any]], int], budget: int
) -> tuple[dict[str, Any], Truncation | None]:
    """The one item of a page, as JSON, and how it was cut: `item` itself and None when its
    page, `size(item)` bytes as received, is within `budget`; otherwise the item with every
    field over some level L cut to at most L bytes (compact JSON), L the largest found for
    which the page, the item's `truncated` marker included, fits. A text is cut by
    characters, a list by elements; a nested object is cut field by field. Raises
    CannotFit when even FLOOR_BYTES is too much."""
    whole = dict(item)
    if size(whole) <= budget:
        return whole, None
    fields = [(path, value, json_bytes(value)) for path, value in _fields(whole)]

    def at(level: int) -> tuple[dict[str, Any], Truncation | None]:
        cuts = {path: value for path, value, bytes_ in fields if bytes_ > level}
        if not cuts:
            return whole, None
        cut = _rebuild(whole, (), {p: _prefix(v, level) for p, v in cuts.items()})
        marker = Truncation(
            fields=tuple(".".join(p) for p in cuts),
            original_chars={".".join(p): len(v) for p, v in cuts.items() if isinstance(v, str)},
            original_items={".".join(p): len(v) for p, v in cuts.items() if isinstance(v, list)},
        )
        return {**cut, MARKER: marker.to_wire()}, marker

    def fits(level: int) -> bool:
        return size(at(level)[0]) <= budget

    low = FLOOR_BYTES
    if not fits(low):
        raise CannotFit(
            f"an item cut to {FLOOR_BYTES} bytes a field is still over the page budget of "
            f"{budget} bytes"
        )
    # The page shrinks as the level falls, but for the marker, which grows a little with
    # each field it names: the search keeps `fits(low)` true, so what it returns fits even
    # where that makes the level a little lower than it could be.
    high = max(low, max(bytes_ for _, _, bytes_ in fields) - 1)
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return at(low)


def _fields(value: Mapping[str, Any], path: Path = ()) -> Iterator[tuple[Path, Sized]]:
    """Every text and list in `value`, with its path, in order; nested objects walked."""
    for key, inner in value.items():
        if isinstance(inner, Mapping):
            yield from _fields(inner, (*path, key))
        elif isinstance(inner, str | list) and inner:
            yield (*path, key), inner


def _rebuild(value: Mapping[str, Any], path: Path, cut: Mapping[Path, Sized]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, inner in value.items():
        here = (*path, key)
        if here in cut:
            out[key] = cut[here]
        elif isinstance(inner, Mapping):
            out[key] = _rebuild(inner, here, cut)
        else:
            out[key] = inner
    return out


def _prefix(value: Sized, level: int) -> Sized:
    """The longest leading part of `value` whose compact JSON is at most `level` bytes."""
    low, high = 0, len(value) - 1  # the whole is over `level`, or it would not be cut
    while low < high:
        mid = (low + high + 1) // 2
        if json_bytes(value[:mid]) <= level:
            low = mid
        else:
            high = mid - 1
    return value[:low]
