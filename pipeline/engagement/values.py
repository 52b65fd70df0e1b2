"""How the engagement reads a loose value by JavaScript's rules, in one place. Pure.

A seat written against the original JavaScript engagement module sends plain JSON, which that
module read with JavaScript's rules: `x || ""`, `x || null`, `x || {}`, `x === true`. These
helpers are those rules, so a camelCase mapping and the contract it validates to are read
alike everywhere in the package.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel

from pipeline.js import truthy

EMPTY: Mapping[str, object] = {}


def plain(value: object) -> object:
    """A contract as its camelCase dict; anything else unchanged."""
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, mode="json")
    return value


def part(value: object) -> Mapping[str, object]:
    """A nested object of a camelCase mapping, or an empty one (JavaScript's `x || {}`)."""
    value = plain(value)
    return value if isinstance(value, Mapping) and value else EMPTY


def lc(value: object) -> str:
    """Lowercase text; a missing value is empty (but `0` or `false` are not missing)."""
    return "" if value is None else str(value).lower()


def text(value: object) -> str:
    """JavaScript's `String(x || "")`: a falsy value is empty text."""
    return str(value) if value else ""


def given(value: object) -> bool:
    """JavaScript truthiness (`x || null`): an empty object still counts as given."""
    return truthy(plain(value))


def texts(value: object) -> tuple[str, ...]:
    """A JSON array as text, item by item; anything that is not an array is no items."""
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()
