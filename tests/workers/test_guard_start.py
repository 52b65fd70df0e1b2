"""The guardrail stage's start runs in its reservation's script (guard_reserve.lua with
stage_start.lua): one round trip for both, and nothing reserved, nothing pushed, unless the
start is admitted."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
import redis

from contracts import Limits, WorkReport
from contracts.messages import DecisionEnvelope, WorkEnvelope
from tests.fakes import BLOCKED_REPORT
from tests.redis_spy import scripts_sent
from workers.celery_app import create_app
from workers.org import OrgSource
from workers.queues import Queue
from workers.settings import BUNDLED_ORG, Settings
from workers.stages.base import Onwards, StageTask, Start
from workers.stages.engagement import Engagement
from workers.stages.guardrails import Guardrails
from workers.stores import keys
from workers.stores.dlq import DeadLetters, Delivery
from workers.stores.journal import Journal
from workers.stores.ledger import Ledger
from workers.stores.scripts import source

pytestmark = pytest.mark.redis

NOW = 1_800_000_000_000
BLOCKED = dict(BLOCKED_REPORT)


class World:
    def __init__(self, client: redis.Redis, url: str) -> None:
        self.r = client
        self.app = create_app(Settings(redis_url=url, api_token="t"))
        self.journal = Journal(client)
        self.ledger = Ledger(client, limits=Limits())
        self.letters = DeadLetters(client, max_deliveries=5)
        self.guardrails = Guardrails(self.ledger, lambda: NOW, onwards=Onwards(self.app))
        self.admitted: list[Delivery] = []
        container = SimpleNamespace(
            dead_letters=self.letters, settings=SimpleNamespace(task_time_limit_s=60)
        )

        def admitted(_tracking_id: str, delivery: Delivery) -> bool:
            self.admitted.append(delivery)
            return delivery.run

        self.task = cast(
            StageTask,
            SimpleNamespace(deps=lambda: container, stage=Queue.GUARDRAILS, admitted=admitted),
        )

    def decided(self, tracking_id: str) -> DecisionEnvelope:
        self.journal.accept(
            tracking_id, kind="work", seat_id="scout", payload="{}", now_ms=NOW, fingerprint="f"
        )
        org = OrgSource.open(BUNDLED_ORG)
        env = WorkEnvelope(
            tracking_id=tracking_id,
            seat_id="scout",
            accepted_at_ms=NOW,
            report=WorkReport.model_validate(BLOCKED),
        )
        decided = Engagement(self.journal, self.ledger, org, lambda: NOW)(env)
        assert decided is not None
        return decided

    def start(self, env: DecisionEnvelope, *, redelivered: bool) -> Start:
        return Start(self.task, env.tracking_id, env.to_wire(), redelivered)

    def op_state(self, tracking_id: str) -> Any:
        return self.r.hget(keys.op(tracking_id), "state")


@pytest.fixture
def world(redis_client: redis.Redis, redis_url: str) -> World:
    return World(redis_client, redis_url)


def test_an_admitted_start_marks_the_message_running_and_reserves_in_one_call(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.r.script_load(source("guard_reserve"))  # loaded: no NOSCRIPT retry below
    env = world.decided("wr-1")
    calls = scripts_sent(world.r, monkeypatch)
    reserved = world.guardrails(env, world.start(env, redelivered=False))
    assert reserved is not None and len(calls) == 1  # the start and the reservation: one
    assert world.admitted == [Delivery("run", deliveries=1)]
    assert world.r.get(keys.running("wr-1", "guardrails")) == b"wr-1"
    assert world.op_state("wr-1") == b"reserved" and world.r.llen(Queue.SEND.value) == 1


def test_a_start_at_the_cap_is_dead_lettered_with_nothing_reserved(world: World) -> None:
    """Four deliveries counted already (its process died on each before its script ran): the
    fifth redelivery is dead-lettered by the reservation's own script, nothing reserved,
    no send message, the letter holding the message."""
    env = world.decided("wr-cap")
    for _ in range(4):
        world.letters.count_redelivery(
            "wr-cap", queue=Queue.GUARDRAILS, message=env.to_wire(), now_ms=NOW
        )
    assert world.guardrails(env, world.start(env, redelivered=True)) is None
    assert world.admitted == [Delivery("dead", deliveries=5)]
    assert world.op_state("wr-cap") is None and world.r.llen(Queue.SEND.value) == 0
    [letter] = world.letters.list()
    assert letter.stage == "guardrails" and letter.message == env.to_wire()
    entry = world.journal.get("wr-cap")
    assert entry is not None and entry["state"] == "dead"


def test_a_dead_entry_is_neither_started_nor_reserved(world: World) -> None:
    env = world.decided("wr-dead")
    world.r.hset(keys.journal("wr-dead"), "state", "dead")
    assert world.guardrails(env, world.start(env, redelivered=False)) is None
    assert world.admitted == [Delivery("done", state="dead")]
    assert world.op_state("wr-dead") is None and world.r.llen(Queue.SEND.value) == 0
    assert world.r.exists(keys.running("wr-dead", "guardrails")) == 0


def test_a_redelivery_after_the_reservation_counts_and_pushes_nothing_more(
    world: World,
) -> None:
    """The process died after its script (the `before_claim` point of this stage): the
    redelivery is counted, finds the place held and the send message out, and adds none."""
    env = world.decided("wr-again")
    assert world.guardrails(env, world.start(env, redelivered=False)) is not None
    assert world.guardrails(env, world.start(env, redelivered=True)) is not None
    assert [d.deliveries for d in world.admitted] == [1, 2]
    assert world.r.llen(Queue.SEND.value) == 1
