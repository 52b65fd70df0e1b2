"""Money on the wire: integer micro-USD, and the turn cost frame (enforcement off, shadow,
on). Pure data.

Money is an integer number of micro-USD end to end (1 USD = 1_000_000 micros). On the wire a
micros value is a JSON integer or a decimal string of one (`1500000`, `"1500000"`), never a
float: money stays an exact whole number of micros from the gateway to the budget, and a float
is how a charge quietly becomes 0.30000000000000004 of something. `parse_micros` refuses, with a
`ValueError` naming the field:

- a float, even a whole one (`1.0`), and NaN or infinity;
- a bool (in Python `True` is the integer 1, and would otherwise pass as one micro);
- a string that is not an optional `-` and ASCII digits (`"1.5"`, `"1e6"`, `" 7"`, `"1_000"`);
- anything else (None, Decimal, lists), and any value with `abs(x) >= MICROS_BOUND` (10**15
  micros is a billion dollars, and stays exact as a JavaScript number, below 2**53).

`CostFrame` is one turn's cost, as a gateway's cost frame reports it, plus where it
belongs (seat, objective, turn) and when it happened:

    {costMicros, enforcement, shadowCostMicros, quotaSource, seatId, objective, atMs, turnId}

`enforcement` (`off | shadow | on`) qualifies `costMicros`: only under `on` did money move.
`shadowCostMicros` is what enforcement WOULD have charged and is never a charge. `quotaSource`
(`ledger | unreadable | not_read | not_admitted`) says why a quota is empty when it is. Both
vocabularies are pinned lowercase words, and an unrecognised or absent value reads as None
rather than refusing the frame: Seatwire records what came and never invents a charge, so a
gateway that adds a fourth mode (or sends `"ON"`) is recorded as "enforcement unknown" and
charges nothing. It is never promoted to `on`. Money is the opposite case: a malformed amount
is refused, because reading it as "no cost" would silently drop a real charge.

The frame's four cost keys (`costMicros`, `enforcement`, `shadowCostMicros`, `quotaSource`)
are always present in `to_wire()` and may be null; `atMs` is required (a cost that cannot be
placed in a budget window is useless); `seatId`, `objective` and `turnId` are optional.
Costs are never negative. Unknown top-level fields are ignored, like every frame a gateway
sends. Snake_case keys (`cost_micros`) are read too, for gateways that send them; a frame
carrying both spellings of one key is read by its camelCase one (pydantic's rule).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import BeforeValidator, Field, PlainValidator

from contracts._base import Wire

MICROS_PER_USD = 1_000_000
# Exclusive: |micros| < 10**15. A billion dollars is no turn's cost nor any objective's budget,
# and every value below 2**53 survives a JavaScript reader exactly.
MICROS_BOUND = 10**15

Enforcement = Literal["off", "shadow", "on"]
QuotaSource = Literal["ledger", "unreadable", "not_read", "not_admitted"]
ENFORCEMENT_STATES: tuple[Enforcement, ...] = get_args(Enforcement)
QUOTA_SOURCES: tuple[QuotaSource, ...] = get_args(QuotaSource)

_W = TypeVar("_W", bound=str)

_DECIMAL_INTEGER = re.compile(r"-?[0-9]+")
# Longer than any in-bound value even with leading zeros: refused before int() reads it.
_MAX_DIGITS = 32


def parse_micros(value: object, *, name: str = "micros") -> int:
    """`value` as integer micro-USD: an int or a decimal string of one, within the bound."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer or a decimal string of one, never a bool")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        if len(value) > _MAX_DIGITS or not _DECIMAL_INTEGER.fullmatch(value):
            raise ValueError(f"{name} must be an integer or a decimal string of one, not {value!r}")
        number = int(value)
    elif isinstance(value, float):
        raise ValueError(
            f"{name} must be an integer or a decimal string of one, never a float ({value!r})"
        )
    else:
        raise ValueError(
            f"{name} must be an integer or a decimal string of one, not {type(value).__name__}"
        )
    if abs(number) >= MICROS_BOUND:
        raise ValueError(f"{name} must be below {MICROS_BOUND} in magnitude, not {number}")
    return number


def parse_cost_micros(value: object, *, name: str = "micros") -> int:
    """`parse_micros`, refusing a negative amount: a cost is never a refund."""
    number = parse_micros(value, name=name)
    if number < 0:
        raise ValueError(f"{name} must not be negative, not {number}")
    return number


def read_enforcement(value: object) -> Enforcement | None:
    """The enforcement state: one of the pinned words, else None (never `on`)."""
    return _read_word(value, ENFORCEMENT_STATES)


def read_quota_source(value: object) -> QuotaSource | None:
    """The quota source: one of the pinned words, else None."""
    return _read_word(value, QUOTA_SOURCES)


def _read_word(value: object, words: tuple[_W, ...]) -> _W | None:
    for word in words:
        if value == word and isinstance(value, str):
            return word
    return None


def _micros(value: object) -> int:
    return parse_micros(value)


def _cost_micros(value: object) -> int | None:
    return None if value is None else parse_cost_micros(value)


# What a cost amount may be as it comes, for the JSON schema of a frame a client sends (the
# OpenAPI document): an integer in bounds, a decimal string of one (at most 32 characters), or
# null. A whole float (`1.0`) is refused too, which no JSON schema can say.
CostMicrosIn = (
    Annotated[int, Field(ge=0, lt=MICROS_BOUND)]
    | Annotated[str, Field(pattern=r"^(?:-0{1,31}|0{0,17}[0-9]{1,15})$")]
    | None
)

# Pydantic names the field in the error (its loc is the camelCase key), so the message need not.
Micros = Annotated[int, PlainValidator(_micros)]
CostMicros = Annotated[
    int | None, PlainValidator(_cost_micros, json_schema_input_type=CostMicrosIn)
]
# A pinned word, read as None when it is any other value (so any JSON value is taken).
EnforcementIn = Annotated[
    Enforcement | None, BeforeValidator(read_enforcement, json_schema_input_type=Any)
]
QuotaSourceIn = Annotated[
    QuotaSource | None, BeforeValidator(read_quota_source, json_schema_input_type=Any)
]


class CostFrame(Wire):
    """One turn's cost; only `enforcement == "on"` moved money, a shadow cost never did."""

    cost_micros: CostMicros = None
    enforcement: EnforcementIn = None
    shadow_cost_micros: CostMicros = None
    quota_source: QuotaSourceIn = None
    seat_id: str | None = None
    objective: str | None = None
    at_ms: int = Field(strict=True, ge=0)
    turn_id: str | None = None
