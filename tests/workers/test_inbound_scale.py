"""An inbound event costs what it concerns (issue 14, item 1), on a real Redis: the
directedness stage stores the verdicts of the seats an event concerns only; the trace derives
every other seat's from the event and the snapshot of the org version it was decided against,
and shows exactly the verdicts the per-seat loop gives. What one event writes does not grow
with the seats it does not concern; an org edited later does not change an old event's
trace; a lost snapshot is written again before anything else is."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import redis

from contracts import Candidate
from contracts.messages import InboundEnvelope
from pipeline.facts import Known, places_of
from pipeline.fanout import resolve_all
from workers.org import OrgSource
from workers.stages.directedness import Directedness
from workers.stores import keys
from workers.stores.inbound import InboundStore, inbound_tracking_id
from workers.stores.journal import Journal

pytestmark = pytest.mark.redis

NOW = 1_800_000_000_000


def org_text(seats: int, *, private_members: tuple[str, ...] = ("s0", "s1")) -> str:
    members = "\n".join(f"  - {{id: s{i}, aliases: [U0S{i}]}}" for i in range(seats))
    roster = "\n".join(f"  - {{memberId: s{i}, names: [Seat{i}]}}" for i in range(seats))
    return (
        f"members:\n  - {{id: ann, aliases: [U0ANN]}}\n{members}\n"
        "channels:\n"
        "  - {id: C-PUB, kind: PUBLIC}\n"
        f"  - {{id: C-PRIV, kind: PRIVATE, memberIds: [{', '.join(private_members)}]}}\n"
        f"seats:\n{roster}\n"
    )


class World:
    def __init__(self, r: redis.Redis, path: Path) -> None:
        self.r = r
        self.path = path
        self.org = OrgSource.open(path)
        self.journal = Journal(r)
        self.inbound = InboundStore(r)
        self.stage = Directedness(self.org, self.inbound, lambda: NOW)

    def run(self, candidate: Candidate) -> str:
        tracking = inbound_tracking_id(candidate.delivery_id)
        env = InboundEnvelope(tracking_id=tracking, accepted_at_ms=NOW, candidate=candidate)
        self.journal.accept(
            tracking,
            kind="inbound",
            seat_id="",
            payload=env.model_dump_json(by_alias=True),
            now_ms=NOW,
            fingerprint="",
        )
        self.stage(env)
        return tracking

    def reasons(self, candidate: Candidate) -> dict[str, tuple[str, bool]]:
        trace = self.inbound.trace(candidate.delivery_id)
        assert trace is not None
        return {s.seat_id: (s.reason, s.derived) for s in trace.seats}


def world(r: redis.Redis, tmp_path: Path, seats: int, **kw: Any) -> World:
    path = tmp_path / f"org-{seats}.yaml"
    path.write_text(org_text(seats, **kw))
    return World(r, path)


def message(ts: str, channel: str = "C-PUB", **msg: Any) -> Candidate:
    return Candidate.model_validate(
        {
            "family": "messaging",
            "source": "slack",
            "deliveryId": f"slack:T1:{channel}:{ts}",
            "ids": {"channelId": channel, "messageId": ts},
            "msg": {"authorId": "U0ANN", "body": "", "channelKind": "PUBLIC", **msg},
            "atMs": NOW,
        }
    )


def test_only_the_concerned_seats_verdicts_are_stored(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A mention of one seat among 50 stores one verdict; the trace lists all 50, the other 49
    derived, exactly as the per-seat loop answers them."""
    w = world(redis_client, tmp_path, 50)
    candidate = message("1.1", mentions=["U0S7"], body="<@U0S7> look")
    tracking = w.run(candidate)
    assert redis_client.hkeys(keys.seat_verdicts(tracking)) == [b"s7"]
    reasons = w.reasons(candidate)
    assert len(reasons) == 50 and reasons["s7"] == ("mention", False)
    assert {r for s, r in reasons.items() if s != "s7"} == {("ambient", True)}
    view, _ = w.org.current()
    expected = resolve_all(candidate, view.roster, Known(), places_of(candidate))
    trace = w.inbound.trace(candidate.delivery_id)
    assert trace is not None and trace.org_version == view.snapshot[0]
    got = {s.seat_id: (s.directed, s.surface, s.reason, s.why) for s in trace.seats}
    assert got == {
        r.seat_id: (r.verdict.directed, r.verdict.surface, r.verdict.reason, r.verdict.why)
        for r in expected
    }


def test_a_private_channel_is_not_visible_to_the_seats_outside_it(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    w = world(redis_client, tmp_path, 5)
    candidate = message("2.1", channel="C-PRIV", body="nobody in particular")
    tracking = w.run(candidate)
    assert redis_client.exists(keys.seat_verdicts(tracking)) == 0
    reasons = w.reasons(candidate)
    assert reasons["s0"] == reasons["s1"] == ("ambient", True)
    assert {reasons[s] for s in ("s2", "s3", "s4")} == {("not_visible", True)}


def test_what_an_event_writes_does_not_grow_with_the_seats_it_does_not_concern(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """The same mention with 20 and with 2,000 seats in the org writes the same keys with
    the same fields (the org version's snapshot is written once per version, not per event)."""
    small = world(redis_client, tmp_path, 20)
    large = world(redis_client, tmp_path, 2000)

    def cost(w: World, ts: str) -> tuple[int, int, int]:
        tracking = w.run(message(ts, mentions=["U0S3"]))
        entry = redis_client.memory_usage(keys.journal(tracking)) or 0
        verdicts = redis_client.hlen(keys.seat_verdicts(tracking))
        return verdicts, redis_client.hlen(keys.journal(tracking)), entry

    small_cost = cost(small, "3.1")
    large_cost = cost(large, "3.2")
    assert small_cost[:2] == large_cost[:2] == (1, large_cost[1])
    assert abs(small_cost[2] - large_cost[2]) <= 64  # the same fields, differing ids
    versions = [k for k in redis_client.scan_iter(match=keys.org_snapshot("*"))]
    assert len(versions) == 2  # one per org version, whatever the number of events
    cost(large, "3.3")
    assert len(list(redis_client.scan_iter(match=keys.org_snapshot("*")))) == 2


def test_an_org_edited_later_does_not_change_an_old_events_trace(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """The trace derives from the org version the event was decided against: s4 joining the
    private channel later does not make an old message visible to it, and a seat added later
    is not in the old trace."""
    w = world(redis_client, tmp_path, 5)
    old = message("4.1", channel="C-PRIV")
    w.run(old)
    before = w.reasons(old)
    w.path.write_text(org_text(6, private_members=("s0", "s1", "s4")))
    os.utime(w.path, (1, 2))  # a new mtime: the next read loads the new version
    new = message("4.2", channel="C-PRIV")
    w.run(new)
    assert w.reasons(old) == before and "s5" not in before
    assert before["s4"] == ("not_visible", True)
    assert w.reasons(new)["s4"] == ("ambient", True) and "s5" in w.reasons(new)


def test_a_lost_snapshot_is_written_again_before_the_event(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A snapshot gone (expired, a Redis that lost it) is noticed by the record script, which
    writes nothing and asks for it; the store sends it and the event is recorded."""
    w = world(redis_client, tmp_path, 3)
    w.run(message("5.1", mentions=["U0S1"]))
    view, _ = w.org.current()
    redis_client.delete(keys.org_snapshot(view.snapshot[0]))
    candidate = message("5.2", mentions=["U0S2"])
    w.run(candidate)
    assert redis_client.exists(keys.org_snapshot(view.snapshot[0])) == 1
    assert w.reasons(candidate) == {
        "s0": ("ambient", True),
        "s1": ("ambient", True),
        "s2": ("mention", False),
    }


def test_members_are_looked_up_in_an_index_built_once_per_org_version(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A look-up per send or request (the send gate, the Slack adapter's people, a decision's
    owner) reads the view's index, built when the org is loaded, and a reload builds anew."""
    w = world(redis_client, tmp_path, 3)
    view, _ = w.org.current()
    assert set(view.member_by_id) == {m.id for m in view.org.members}
    some = view.org.members[0]
    assert view.member(some.id) is some and view.member("nobody-here") is None
    assert view.people is view.people  # built once for this version
    assert view.people[some.id] == (some.aliases, some.display_name)
    w.path.write_text(org_text(4))
    os.utime(w.path, (1, 1))  # a new mtime: the next read loads the file again
    reloaded, _ = w.org.current()
    assert reloaded is not view and len(reloaded.member_by_id) > len(view.member_by_id)
    assert reloaded.people is not view.people
