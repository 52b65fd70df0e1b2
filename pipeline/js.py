"""How JavaScript reads and prints a loose value, in one place. Pure.

The goal functions take camelCase mappings or the contracts, and must decide and word their
reasons exactly as the original JavaScript contract did (docs/architecture.md, "Engagement"),
so that a caller written against it sees the same answers (the engagement's `given` reads
truthiness here too). That contract reads with JavaScript's rules (`x || {}`, `Number(x)`,
`Number.isFinite(x)`, `String(x)`, template literals, `toFixed`), so those rules live here.

`undefined` and `null` differ in JavaScript (`Number(undefined)` is NaN, `Number(null)` is 0):
a mapping's missing key reads as `UNDEFINED` and its `None` as `null`. An object's attribute
(a contract's field) that is `None` was not given, so it reads as `UNDEFINED`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal
from functools import cache
from typing import Final, TypeGuard

from pydantic.alias_generators import to_snake


class _Undefined:
    """JavaScript's `undefined`: falsy, and distinct from `None` (`null`)."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Final = _Undefined()
EMPTY: Mapping[str, object] = {}

# Values that have no named properties of their own in JavaScript's reading (`"x".state` is
# undefined); everything else is read as a mapping or by attribute.
_NO_PROPERTIES = (str, bytes, int, float, bool, list, tuple, set, frozenset, _Undefined)
# StrWhiteSpaceChar: what `Number(" 40 ")` trims, which is not quite Python's `str.strip()`.
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(
    chr(c) for c in range(0x2000, 0x200B)
)
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]{1,300}")
_RADIX = {"x": 16, "o": 8, "b": 2}
_RADIX_LITERAL = re.compile(r"0([xXoObB])([0-9a-fA-F]+)")


@cache
def _snake(camel: str) -> str:
    return to_snake(camel)


def field(obj: object, camel: str) -> object:
    """`obj.camel` as JavaScript reads it: a mapping by its camelCase key (else the snake_case
    one), anything else by its snake_case attribute; `UNDEFINED` when there is none."""
    if type(obj) is dict:  # the common case, without the ABC's isinstance (a hot path)
        if camel in obj:
            return obj[camel]
        return obj.get(_snake(camel), UNDEFINED)
    if isinstance(obj, Mapping):
        if camel in obj:
            return obj[camel]
        snake = _snake(camel)
        return obj.get(snake, UNDEFINED)
    if obj is None or isinstance(obj, _NO_PROPERTIES):
        return UNDEFINED
    value = getattr(obj, _snake(camel), None)
    return UNDEFINED if value is None else value


def present(value: object) -> bool:
    """Given at all: neither `undefined` nor `null`."""
    return value is not None and value is not UNDEFINED


def truthy(value: object) -> bool:
    """JavaScript truthiness: an empty object or array still counts."""
    if value is None or value is UNDEFINED or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int | float):
        return value == value and value != 0
    if isinstance(value, str):
        return value != ""
    return True


def either(first: object, second: object) -> object:
    """JavaScript's `first || second`."""
    return first if truthy(first) else second


def is_array(value: object) -> TypeGuard[list[object] | tuple[object, ...]]:
    return isinstance(value, list | tuple)


def items(value: object) -> list[object]:
    """JavaScript's `Array.isArray(x) ? x : []`."""
    return list(value) if is_array(value) else []


def concat(value: object) -> list[object]:
    """JavaScript's `[].concat(x || [])`: an array's items, a lone value as one item."""
    if not truthy(value):
        return []
    return list(value) if is_array(value) else [value]


def is_finite(value: object) -> TypeGuard[int | float]:
    """`Number.isFinite`: a finite number, never a numeric string or a boolean."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or math.isfinite(value)


def to_number(value: object) -> int | float:
    """`Number(x)`. An integer literal stays an exact `int`, so micro-USD never rounds."""
    if value is UNDEFINED:
        return math.nan
    if value is None or isinstance(value, bool):
        return int(bool(value))
    if isinstance(value, int | float):
        return value
    if isinstance(value, str | list | tuple):
        return _string_to_number(js_str(value))
    return math.nan


def _string_to_number(raw: str) -> int | float:
    s = raw.strip(_JS_SPACE)
    if not s:
        return 0
    if s in ("Infinity", "+Infinity", "-Infinity"):
        return -math.inf if s[0] == "-" else math.inf
    radix = _RADIX_LITERAL.fullmatch(s)
    if radix:
        try:
            return int(radix.group(2), _RADIX[radix.group(1).lower()])
        except ValueError:
            return math.nan
    if _INTEGER.fullmatch(s):
        return int(s)
    return float(s) if _DECIMAL.fullmatch(s) else math.nan


def js_str(value: object) -> str:
    """`String(x)`, which is also what a template literal prints."""
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return num_str(value)
    if isinstance(value, str):
        return value
    if is_array(value):
        return ",".join("" if not present(v) else js_str(v) for v in value)
    return "[object Object]"


def num_str(x: int | float) -> str:
    """A number as JavaScript prints it: 3 not 3.0, 1e-7 not 1e-07, 1e+21 past twenty digits."""
    if isinstance(x, int) and abs(x) < 10**21:
        return str(x)
    try:
        f = float(x)
    except OverflowError:
        return "Infinity" if x > 0 else "-Infinity"
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    if f == 0:
        return "0"
    parts = Decimal(repr(abs(f))).normalize().as_tuple()
    digits = "".join(str(d) for d in parts.digits)
    k, n = len(digits), int(parts.exponent) + len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        mantissa = digits[0] + (f".{digits[1:]}" if k > 1 else "")
        body = f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return ("-" if f < 0 else "") + body


def to_fixed(x: int | float, places: int) -> str:
    """`x.toFixed(places)`: rounded half up on the exact binary value, as the spec says."""
    if not is_finite(x) or abs(x) >= 10**21:
        return num_str(x)
    exact = Decimal(0) if x == 0 else Decimal(x)  # -0 prints without its sign
    return f"{exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP):f}"
