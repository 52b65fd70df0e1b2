"""Pure normalisers: provider payloads (Slack Events API, GitHub webhooks) become a `Candidate`.

Pure: a parsed JSON payload in, a `Candidate` or a `Skipped` out. No I/O and no clock: the
delivery id and the receive time are arguments. Provider payloads are parsed leniently;
nothing here raises on an odd shape. A payload that cannot become a Candidate is a `Skipped`
with a reason code, so the caller can record why it was not considered (never a silent drop).

    from pipeline.normalise.slack import normalise_slack
    from pipeline.normalise.github import normalise_github

Reason codes of `Skipped` (the part before a colon is stable, the rest names the variant):
    url_verification, unsupported_envelope         Slack envelopes that are not events
    unsupported_event:<type>                       Slack event type we do not consider
    unsupported_event:<event>.<action>             GitHub event/action we do not consider
    unsupported_subtype:<subtype>                  unknown Slack message subtype
    system_message:<subtype>                       Slack membership/system notices
    message_deleted, edit_without_text_change      Slack message changes with nothing to say
    ping                                           GitHub's hook check
    missing_field:<path>                           a field the Candidate cannot do without
    invalid_candidate                              the result broke a Candidate limit

This module holds the outcome type and the lenient accessors both normalisers share.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import ValidationError

from contracts.inbound import Candidate

__all__ = ["MAX_BODY_CHARS", "Normalised", "Skipped"]

MAX_BODY_CHARS = 100_000  # MessagePart.body / BoardPart.body limit in contracts/inbound.py


@dataclass(frozen=True, slots=True)
class Skipped:
    """A payload that did not become a Candidate, and why. `reason` is a stable code."""

    reason: str
    detail: str = ""


Normalised: TypeAlias = Candidate | Skipped


def as_mapping(value: object) -> Mapping[str, Any] | None:
    """`value` when it is a JSON object, else None. A dict is asked first: the check against
    the `Mapping` ABC costs several times more, on every field a normaliser reads."""
    return value if type(value) is dict or isinstance(value, Mapping) else None


def as_str(value: object) -> str | None:
    """`value` when it is a non-blank string, else None."""
    return value if isinstance(value, str) and value.strip() else None


def as_list(value: object) -> Sequence[Any]:
    """`value` when it is a JSON array, else an empty one (never a string's characters)."""
    return value if isinstance(value, list | tuple) else ()


def as_int(value: object) -> int | None:
    """A non-negative integer from an int, an integral float or a digit string; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    return None


def dig(root: object, *path: str) -> object:
    """The value at `path` under nested JSON objects, or None where the path breaks."""
    node = root
    for key in path:
        mapping = as_mapping(node)
        if mapping is None:
            return None
        node = mapping.get(key)
    return node


def unique(items: Iterable[str]) -> tuple[str, ...]:
    """`items` without repeats, first occurrence kept."""
    return tuple(dict.fromkeys(items))


def clip(text: str) -> str:
    """`text` cut to the contract's body limit (mentions are taken from the full text first)."""
    return text[:MAX_BODY_CHARS]


def build(fields: Mapping[str, Any]) -> Normalised:
    """The Candidate for `fields`, or `Skipped("invalid_candidate")` naming the broken limit."""
    try:
        return Candidate.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return Skipped("invalid_candidate", f"{where}: {first['msg']}")
