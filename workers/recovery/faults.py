"""Named crash points for fault tests 1 and 4 (docs/reliability.md). Inert in production.

`crash_point(stage, point, tracking_id)` kills its own process with SIGKILL, the way an OOM kill
or a segfault would, when `SEATWIRE_FAULTPOINTS` names that point. The variable is a
comma-separated list of `stage:point:rate[:match]`:

- `rate` is `always` or a probability in (0, 1], drawn per call;
- `match`, when given, limits the point to tracking ids that contain it (a poison payload);
- `stage` and `point` may be `*`.

The points the stages pass through, in order (the send stage's are the exactly-once windows):

    <stage>:before_claim                 a stage task has its message and has done nothing
                                         but write its start down (the guardrail stage:
                                         its start and reservation, one script)
    guardrails:after_reserve             the quota is reserved, the send not yet published
                                         (on the stores' Redis: published with it, the
                                         guardrail message not yet acked)
    send:after_intent                    `sending` is recorded, the wire call not yet made
    send:after_api_ok_before_done        the provider answered ok, the outcome not recorded
    send:after_done_before_ack           the outcome is recorded, the message not yet acked
    steward:after_audit                  a run's audit is written, nothing dispatched yet
    steward:after_dispatch               one dispatch is done, the next not yet begun
    directedness:before_answer           an inbound event is a reply to an ask, and neither
                                         its answer nor the event is recorded yet
    answers:after_answer_recorded        an answer and the seat's `ask_answered` item are
                                         written, nothing after them done: for a reply (in a
                                         worker) its redelivery marker not set and the event
                                         not recorded; for a click (in the ingress) not yet
                                         answered 200; the message not changed in place

A steward point's "tracking id" is `objective key:dispatch id` (the objective key alone for
`after_audit`), so `match` can aim at one objective. An answer point's is `via:ask id`
(`slack_thread:ask-...`, `slack_button:ask-...`), so `match` can aim at one surface or one ask.

A malformed variable is refused when the process reads it: a fault test that silently injects
nothing would pass for the wrong reason.
"""

from __future__ import annotations

import os
import random
import signal
from dataclasses import dataclass
from functools import lru_cache

from workers.errors import ConfigError

ENV = "SEATWIRE_FAULTPOINTS"
POINTS = frozenset(
    {
        "before_claim",
        "after_reserve",
        "after_intent",
        "after_api_ok_before_done",
        "after_done_before_ack",
        "after_audit",
        "after_dispatch",
        "before_answer",
        "after_answer_recorded",
    }
)


@dataclass(frozen=True)
class Fault:
    stage: str
    point: str
    rate: float  # 1.0 = always
    match: str

    def hits(self, stage: str, point: str, tracking_id: str) -> bool:
        return (
            self.stage in ("*", stage)
            and self.point in ("*", point)
            and (not self.match or self.match in tracking_id)
        )


def parse(spec: str) -> tuple[Fault, ...]:
    faults = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        fields = part.split(":", 3)
        if len(fields) < 3:
            raise ConfigError(f"{ENV}: {part!r} is not stage:point:rate[:match]")
        stage, point, rate_text = fields[:3]
        if point != "*" and point not in POINTS:
            raise ConfigError(f"{ENV}: unknown point {point!r}; choose from {sorted(POINTS)}")
        try:
            rate = 1.0 if rate_text == "always" else float(rate_text)
        except ValueError:
            raise ConfigError(f"{ENV}: rate {rate_text!r} is not `always` or a number") from None
        if not 0 < rate <= 1:
            raise ConfigError(f"{ENV}: rate {rate_text!r} must be in (0, 1]")
        faults.append(Fault(stage, point, rate, fields[3] if len(fields) == 4 else ""))
    return tuple(faults)


@lru_cache(maxsize=1)
def _configured() -> tuple[Fault, ...]:
    return parse(os.environ.get(ENV, ""))


def crash_point(stage: str, point: str, tracking_id: str) -> None:
    """Die here, without cleanup, if the fault configuration says so."""
    faults = _configured()
    if not faults:
        return
    for fault in faults:
        if fault.hits(stage, point, tracking_id) and (
            fault.rate >= 1.0 or random.random() < fault.rate
        ):
            os.kill(os.getpid(), signal.SIGKILL)
