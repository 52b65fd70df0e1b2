"""The directedness stage: resolve one inbound event for every seat, and record all of it at
once (the verdicts for `/v1/trace`, the directed ones into each seat's inbox). A person's
reply in the thread of a direction's post is also their vote on it
(workers/stages/directions.py): counted, or written into the direction's log with why not,
after the event is recorded. A reply to an ask (in its Slack thread, or a comment or review
on the GitHub item it is about) by a person it asked is also that ask's answer
(workers/stages/ask_replies.py), answered BEFORE the event is recorded (a Redis fault on the
way runs the stage again; a defect is logged and never fails the event). The record makes
the event's entry final, and a final entry is never swept again, so a worker killed between
the record and the answer (its message left unacked until the broker's visibility timeout,
a quarter of an hour) would hold the answer back that long. In this order a worker killed
after the answer leaves the entry open, the sweeper delivers it again (past its deadline,
once the killed delivery's running mark lapses), and that delivery records the event and
finds the answer made (the reply's delivery id is the answer's key)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from celery import Celery

from contracts.messages import InboundEnvelope
from pipeline.facts import places_of, reads_membership
from pipeline.fanout import resolve_concerned
from workers.clock import now_ms
from workers.container import Container
from workers.org import OrgSource
from workers.queues import Task
from workers.stages.ask_replies import answer_by_reply
from workers.stages.base import Deps, StageTask, register_stage
from workers.stages.directions import vote_by_reply
from workers.stores.inbound import InboundStore, Recorded
from workers.telemetry import telemetry

log = logging.getLogger("seatwire.directedness")


@dataclass
class Directedness:
    org: OrgSource
    inbound: InboundStore
    clock_ms: Callable[[], int] = now_ms
    container: Container | None = None  # for replies that are votes; None counts none

    @classmethod
    def of(cls, c: Container) -> Directedness:
        return cls(org=c.org, inbound=c.inbound, container=c)

    def __call__(self, env: InboundEnvelope) -> Recorded:
        view, _degraded = self.org.current()
        candidate = env.candidate
        places = places_of(candidate)
        channel = view.channel_by_id.get(places.channel_id) if places.channel_id else None
        membership = reads_membership(candidate, channel)
        known = self.inbound.known(places, channel, membership=membership)
        resolved = resolve_concerned(candidate, view.roster, known, places)
        now = self.clock_ms()
        if self.container is not None:
            # Before the event's record: once that is written, a redelivery of the event is
            # done already and never runs again, so an answer a crash kept from being written
            # would be lost. Its key is the delivery: a redelivery is the same answer.
            answered = answer_by_reply(self.container, candidate, now_ms=now)
            if answered:
                log.info("%s is a reply to an ask: %s", env.tracking_id, ", ".join(answered))
        recorded = self.inbound.record(
            env.tracking_id,
            env.candidate,
            resolved,
            places,
            now_ms=now,
            org=view.snapshot,
            seats=len(view.roster.seats),
        )
        if recorded.new:  # a redelivery's verdicts were counted by the first delivery
            metrics = telemetry()
            for seat in resolved:
                verdict = seat.verdict
                said = "directed" if verdict.directed else "not_directed"
                metrics.decided("directedness", said, verdict.reason)
            metrics.finished(
                candidate.family, recorded.state, accepted_at_ms=env.accepted_at_ms, now_ms=now
            )
        if recorded.full:
            log.warning(
                "%s was directed to %s, whose inbox is full: not put in it (ledger row inbox_full)",
                env.tracking_id,
                ", ".join(recorded.full),
            )
        if self.container is not None:
            outcome = vote_by_reply(self.container, candidate, now_ms=self.clock_ms())
            if outcome is not None:
                log.info("%s is a reply to a direction's post: %s", env.tracking_id, outcome)
        return recorded


TASK = Task.DIRECTEDNESS  # this module's row of the stage table


def register(app: Celery, deps: Deps) -> None:
    def directedness(task: StageTask, env: InboundEnvelope) -> None:
        Directedness.of(task.deps())(env)

    register_stage(app, TASK, deps, directedness)
