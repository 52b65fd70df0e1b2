"""The next stage's message, handed to the store script whose write calls for it.

When the broker is the stores' own Redis, a stage's write and the message that takes its work
on are one atomic step: the script that records an engaging decision (decision_record.lua) or
reserves an ask's place (guard_reserve.lua) LPUSHes the next stage's Celery message too
(celery_common.lua). A redelivered or copied run that finds the write made publishes nothing,
for the message went out with it; had that message been lost on the broker, the sweeper
rebuilds it from the journal. Published after the write instead (any other broker), a copy of
a stage would publish a second message, and a stage that died between the two would leave its
entry with no message anywhere until its deadline.

The stores know Redis, not Celery: the stage builds the message (workers/stages/base.py
`Onwards.message`) and a store only passes its parts to its script.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Onward:
    """One message for a script to LPUSH on `queue` (a kombu Redis list): `template` is the
    Celery message with "@body@" where the body goes, `payload` the task's argument (JSON),
    `embed` Celery's trailing body object. For a send's message, `tail` follows the payload
    and the script writes the reservation's attempt between the two."""

    queue: str
    template: str
    payload: str
    embed: str
    tail: str = ""

    def args(self) -> list[str]:
        """The script's arguments for it: template, payload, tail, embed."""
        return [self.template, self.payload, self.tail, self.embed]


# What a script is given when there is no message to write: its template argument is empty.
NO_ONWARD = ["", "", "", ""]
