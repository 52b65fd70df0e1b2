"""Hand-written fakes that implement the same Protocols as the real adapters."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from celery import Celery

from contracts import Candidate, Directedness, Limits
from contracts.asks import Ask
from contracts.messages import OutboundAsk, SendResult
from pipeline.facts import places_of
from pipeline.fanout import Resolved
from workers.errors import MaybeSent, NotSent, PermanentError, TransientError
from workers.org import OrgSource
from workers.outbound.base import SendContext
from workers.outbound.file import channel_for
from workers.queues import Queue, Task
from workers.settings import BUNDLED_ORG
from workers.stages import Stages
from workers.stores.inbound import InboundStore, inbound_tracking_id
from workers.stores.journal import Journal
from workers.stores.ledger import Ledger


class Crash(BaseException):
    """Stands for the process dying at a point (not an Exception: nothing may catch it)."""


@dataclass
class FakeOutbound:
    """Records every applied ask; `script` scripts what each next send does.

    Script entries: "ok", "transient" (fails before applying), "permanent", "boom" (an
    unexpected error before applying), "apply_then_crash" (the ask is applied, then the worker
    dies before recording it), "apply_then_transient" (applied, then an error is raised),
    "not_sent" (refused before applying, with a Retry-After of 2 s), "maybe" (applied, then
    the outcome is lost: `MaybeSent`).
    """

    name: str = "fake"
    applied: list[OutboundAsk] = field(default_factory=list)
    script: list[str] = field(default_factory=list)
    sends: int = 0
    reconciles: int = 0
    shown: list[Ask] = field(default_factory=list)  # asks whose answer was shown in place

    def check(self) -> str:
        """The `Outbound` Protocol's configuration check: a fake has nothing to refuse."""
        return "fake outbound (in memory)"

    def send(self, ask: OutboundAsk, ctx: SendContext) -> SendResult:
        self.sends += 1
        step = self.script.pop(0) if self.script else "ok"
        if step == "not_sent":
            raise NotSent("scripted 429", retry_after_s=2)
        if step == "transient":
            raise TransientError("scripted transient fault")
        if step == "permanent":
            raise PermanentError("channel_not_found")
        if step == "boom":
            raise RuntimeError("scripted bug")
        self.applied.append(ask)
        if step == "apply_then_crash":
            raise Crash
        if step == "apply_then_transient":
            raise TransientError("applied, then the connection reset")
        if step == "maybe":
            raise MaybeSent("applied, then the read timed out")
        channel_id, created = channel_for(ask)
        return SendResult(
            channel_id=channel_id, message_id=f"m-{len(self.applied)}", room_created=created
        )

    def show_answer(self, ask: Ask) -> bool:
        self.shown.append(ask)
        return True

    def reconcile(self, ask: OutboundAsk, ctx: SendContext) -> SendResult | None:
        self.reconciles += 1
        for i, done in enumerate(self.applied, 1):
            if done.idempotency_id == ask.idempotency_id:
                return SendResult(channel_id=channel_for(done)[0], message_id=f"m-{i}")
        return None

    def count(self, idempotency_id: str) -> int:
        return sum(1 for a in self.applied if a.idempotency_id == idempotency_id)


@dataclass
class Placed:
    position: int
    new: bool


# The org version `place` records its events against: a snapshot of no seats, so a trace shows
# only the seats an event was placed for.
FAKE_ORG = ("fake-org", '{"channels":{},"seats":[]}')


def place(
    client: redis.Redis,
    seat: str | tuple[str, ...],
    cand: Candidate,
    verdict: Directedness,
) -> Placed:
    """Put an event in seats' inboxes the way the directedness stage does: journalled, then
    recorded for the given seats in one go. `position` is the first seat's."""
    seats = (seat,) if isinstance(seat, str) else seat
    tracking = inbound_tracking_id(cand.delivery_id)
    Journal(client).accept(
        tracking, kind="inbound", seat_id="", payload="{}", now_ms=1, fingerprint=""
    )
    done = InboundStore(client).record(
        tracking,
        cand,
        [Resolved(s, verdict) for s in seats],
        places_of(cand.to_wire()),
        now_ms=1,
        org=FAKE_ORG,
        seats=len(seats),
    )
    return Placed(position=done.positions.get(seats[0], 0), new=done.new)


def celery_fields(message: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """A Celery message's headers, properties and content fields, by (part, name): what two
    messages are compared on, field by field."""
    out: dict[tuple[str, str], Any] = {}
    for part in ("headers", "properties"):
        for name, value in message[part].items():
            out[(part, name)] = value
    for name in ("content-encoding", "content-type"):
        out[("", name)] = message[name]
    return out


# The work report most tests send through the pipeline: blocked on access to the billing
# database, self-serve exhausted; the bundled org names ben as its owner. Copy it before
# changing it (`dict(BLOCKED_REPORT)`): every test module shares this one.
BLOCKED_REPORT: dict[str, Any] = {
    "id": "billing-migration",
    "title": "Migrate the billing tables",
    "state": "blocked",
    "scope": "billing database",
    "blocker": {"kind": "access"},
    "selfServeExhausted": True,
}


class Clock:
    """A clock the test moves: `clock.ms = ...`; called, it says the time it was set to."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def stages_on(client: redis.Redis, clock: Clock, outbound: FakeOutbound) -> Stages:
    """The pipeline's stages on a real Redis, the bundled org, `outbound` and `clock`."""
    return Stages(
        journal=Journal(client),
        ledger=Ledger(client, limits=Limits(), reservation_ttl_ms=60_000),
        org=OrgSource.open(BUNDLED_ORG),
        outbound=outbound,
        inbound=InboundStore(client),
        clock_ms=clock,
        lease_ms=30_000,
    )


def queued(r: redis.Redis, queue: Queue) -> list[dict[str, Any]]:
    """The messages waiting on one broker queue: task name, task id and the one argument."""
    found = []
    for raw in r.lrange(queue.value, 0, -1):
        message = json.loads(raw)
        body = message["body"]
        if message["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args, _kwargs, _embed = json.loads(body)
        found.append(
            {"task": message["headers"]["task"], "id": message["headers"]["id"], "arg": args[0]}
        )
    return found


def run_task(app: Celery, task: Task, message: dict[str, Any], *, redelivered: bool) -> Any:
    """Call a stage task as a worker does, with the delivery info kombu gave its message."""
    t = app.tasks[task.value]
    t.push_request(delivery_info={"redelivered": redelivered}, args=[message], kwargs={})
    try:
        return t(message)
    finally:
        t.pop_request()


def per_turn(publish: Callable[..., None]) -> Callable[..., None]:
    """A stand-in for `workers.stages.controller_tick.publish_turns` that hands each turn the
    tick began to `publish(app, Task.TURN, turn_id, message)`, as the tests' recorders take
    a publish."""

    def publish_turns(app: Any, _c: Any, turns: Sequence[tuple[str, dict[str, Any]]]) -> None:
        for turn_id, message in turns:
            publish(app, Task.TURN, turn_id, message)

    return publish_turns
