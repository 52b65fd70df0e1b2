"""Base model configuration shared by every contract. Pure data, no I/O.

Contracts are camelCase on the wire (the seeds' JSON) and snake_case in Python.
`Wire` models are frozen values; `StrictWire` also forbids unknown top-level
fields, for inbound shapes where a typo would silently change behaviour.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


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
