"""Base model configuration shared by every contract. Pure data, no I/O.

Contracts are camelCase on the wire (the JSON a seat or a gateway sends) and snake_case in
Python.
`Wire` models are frozen values; `StrictWire` also forbids unknown top-level
fields, for inbound shapes where a typo would silently change behaviour.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

# A JSON schema pattern for a string with something in it besides the whitespace Python's
# `str.strip()` removes: what a contract's "must not be blank" validator refuses, said in
# its schema (the OpenAPI document). Documentation only; the validator decides.
NOT_BLANK = r"[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"


class Wire(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="ignore",
    )

    def to_wire(self) -> dict[str, Any]:
        """The camelCase JSON object this model stands for."""
        return self.model_dump(by_alias=True, mode="json")


class StrictWire(Wire):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
    )
