"""The seats' tools on real processes (issue 13, "How it will be checked"): TWO `seatwire
ingress` processes on different ports against one redis-server of the test's own, every
request real HTTP to `POST /v1/seats/{seat}/tools/{name}` with the seat's own token, the
requests spread across both ingresses (seat i, or attempt i, goes to ingress i % 2).

a. 10 seats claim one issue at once (a barrier): exactly one owner, the 9 others refused
   (409 `issue_owned`) naming that owner; the winner's replay is its original receipt.
b. A stale `expected_generation` is refused with the current one, for every action, and in a
   race with the owner's release every refusal names the generation the release made.
c. The same `client_message_id` sent by 5 concurrent retries: one receipt, and one item in
   each recipient's inbox (none in the sender's).
d. 100 concurrent `record_work_intent` writers, each retrying on 409 with the current
   revision: every revision won exactly once, the final revision = the successful writes.
e. Votes around the deadline (the server's clock; the org file's `decisions:` policy allows
   a 2 s countdown): the votes before it are counted, every vote at or after it is refused
   (`voting_closed`, its serverTime at or after the deadline), the tally is exactly the
   accepted votes.
f. A runnable work intent leads to exactly one controller turn, reason `durable`: every
   process (both ingresses, the stage, controller and turns workers, beat, and redis-server)
   is stopped between the write and the turn, and again after the turn, and started again:
   still exactly one durable turn (GET /v1/seats/{seat}/status with the operator token, and
   the agent's own log of the turns it ran).

Every process is started here and stopped by its pid (process group), also on failure. Each
test prints its figures (run with -s to see them).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from bench.chaos import TOKEN, Fleet, RedisServer, fleet_env, wait_ingress
from tests.auth import bearer
from tests.e2e.test_controller_processes import (
    CONTROLLER,
    INTERVAL_S,
    STAGES,
    TURNS,
    launcher,
    runs,
    tracebacks,
    violations,
    wait_for,
    write_org,
)
from workers.embedded import free_port
from workers.stores.tokens import Tokens

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

SEATS = [f"s{i}" for i in range(10)]
ORG = (
    "project: {name: Atlas, mission: Ship the billing rewrite, repository: acme/atlas}\n"
    "members:\n  - {id: ava, displayName: Ava}\n"
    + "".join(f"  - {{id: {s}, displayName: Seat {s}}}\n" for s in SEATS)
    + "seats:\n"
    + "".join(f"  - {{memberId: {s}, operatorId: ava}}\n" for s in SEATS)
    + "decisions: {ownerId: ava, minCountdownSeconds: 1, maxCountdownSeconds: 3600}\n"
)


# ---------------------------------------------------------------- the processes


def issue_tokens(server: RedisServer, seats: list[str]) -> dict[str, str]:
    """A token of each seat, issued through the store into the server's Redis."""
    client = redis.Redis.from_url(server.url)
    try:
        store, now = Tokens(client), int(time.time() * 1000)
        return {s: store.issue("seat", seat_id=s, label="e2e", now_ms=now)[0] for s in seats}
    finally:
        client.close()


@dataclass
class Duo:
    """Two ingresses of one fleet (and whatever else it runs), and the seats' tokens."""

    fleet: Fleet
    bases: tuple[str, str]
    tokens: dict[str, str]
    clients: list[httpx.Client] = field(default_factory=list)

    def __post_init__(self) -> None:
        limits = httpx.Limits(max_connections=120, max_keepalive_connections=120)
        self.clients = [httpx.Client(base_url=b, timeout=30, limits=limits) for b in self.bases]

    def close(self) -> None:
        for c in self.clients:
            c.close()

    def tool(self, via: int, seat: str, name: str, **args: Any) -> tuple[int, dict[str, Any]]:
        """`name` called as `seat` (its own token) on ingress `via % 2`."""
        resp = self.clients[via % 2].post(
            f"/v1/seats/{seat}/tools/{name}", headers=bearer(self.tokens[seat]), json=args
        )
        return resp.status_code, resp.json()

    def ok(self, via: int, seat: str, name: str, **args: Any) -> dict[str, Any]:
        status, body = self.tool(via, seat, name, **args)
        assert status == 200, (name, body)
        return body

    def coord(
        self, via: int, seat: str, number: int, action: str, rid: str, **extra: Any
    ) -> tuple[int, dict[str, Any]]:
        """`coordinate_issue` on issue `number`."""
        return self.tool(
            via,
            seat,
            "coordinate_issue",
            issue_number=number,
            action=action,
            client_request_id=rid,
            **extra,
        )

    def status(self, via: int, seat: str) -> dict[str, Any]:
        resp = self.clients[via % 2].get(f"/v1/seats/{seat}/status", headers=bearer(TOKEN))
        body: dict[str, Any] = resp.raise_for_status().json()
        return body


INGRESS_B = "ingress-b"


def spawn_ingresses(f: Fleet, port_b: int) -> None:
    f.spawn("ingress", ["ingress", "--host", "127.0.0.1", "--port", str(f.port)])
    f.spawn(INGRESS_B, ["ingress", "--host", "127.0.0.1", "--port", str(port_b)])


def wait_both(f: Fleet, port_b: int) -> None:
    f.wait_ready()
    wait_ingress(f"http://127.0.0.1:{port_b}", [p.popen for p in f.procs.values()])


@contextmanager
def duo(server: RedisServer, tmp: Path, org: Path, seats: list[str], **env: str) -> Iterator[Duo]:
    """Two ingresses on `server` (the fleet stops every process by pid on the way out)."""
    tokens = issue_tokens(server, seats)
    f = Fleet(redis=server, workdir=tmp, env=fleet_env(server, tmp, SEATWIRE_ORG_FILE=str(org)))
    f.env.update(env)
    port_b = free_port()
    d = Duo(f, (f.base, f"http://127.0.0.1:{port_b}"), tokens)
    try:
        spawn_ingresses(f, port_b)
        wait_both(f, port_b)
        yield d
    finally:
        d.close()
        f.stop()


@pytest.fixture
def ten(server: RedisServer, tmp_path: Path) -> Iterator[Duo]:
    """The 10-seat org, served by two ingresses (the tools need nothing else)."""
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    with duo(server, tmp_path, org, SEATS) as d:
        yield d


def at_once(n: int, work: Callable[[int], Any]) -> list[Any]:
    """`work(i)` for i in range(n), in n threads released together by a barrier."""
    barrier = threading.Barrier(n)

    def run(i: int) -> Any:
        barrier.wait()
        return work(i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


# ---------------------------------------------------------------- a, b: issue claims


def test_ten_seats_claiming_one_issue_at_once_leave_one_owner(ten: Duo) -> None:
    """10 seats, each with its own token, claim issue #7 at once through the two ingresses:
    one 200, nine 409 `issue_owned` naming the owner (in `owner` and in the message); both
    ingresses then read that owner; the winner's replay on the other ingress is its receipt."""
    began = time.monotonic()
    results = at_once(10, lambda i: ten.coord(i, SEATS[i], 7, "claim", f"claim-{SEATS[i]}"))
    race_s = time.monotonic() - began
    won = [SEATS[i] for i, (status, _) in enumerate(results) if status == 200]
    assert len(won) == 1, results
    owner = won[0]
    generation = ten.ok(0, "s0", "get_issue_coordination", issue_number=7)["generation"]
    for i, (status, body) in enumerate(results):
        if SEATS[i] == owner:
            continue
        assert (status, body["error"]) == (409, "issue_owned"), body
        assert (body["owner"], body["generation"]) == (owner, generation)
        assert owner in body["message"]
    for via in (0, 1):
        seen = ten.ok(via, SEATS[via], "get_issue_coordination", issue_number=7)
        assert seen["owner"]["id"] == owner and seen["generation"] == generation
    winner = SEATS.index(owner)
    status, replay = ten.coord(winner + 1, owner, 7, "claim", f"claim-{owner}")
    assert status == 200 and replay["replayed"] is True
    assert replay["receipt"] == results[winner][1]["receipt"]
    print(f"\ntools e2e a: 10 claims in {race_s * 1000:.0f} ms, owner {owner}, gen {generation}")


def test_a_stale_generation_is_refused_with_the_current_one(ten: Duo) -> None:
    """s0 claims #8, releases it, s1 claims it: every action with the first generation is a
    409 `stale_generation` on `expected_generation` naming the current generation and owner,
    on either ingress. Then s1 releases while 9 seats follow with the generation it releases
    from, at once: each follow either lands (before the release) or is refused naming exactly
    the generation the release made; none is anything else."""
    assert ten.coord(0, "s0", 8, "claim", "c0")[0] == 200
    first = ten.ok(1, "s0", "get_issue_coordination", issue_number=8)["generation"]
    assert ten.coord(1, "s0", 8, "release", "r0", expected_generation=first)[0] == 200
    assert ten.coord(0, "s1", 8, "claim", "c1")[0] == 200
    current = ten.ok(1, "s2", "get_issue_coordination", issue_number=8)["generation"]
    assert current > first
    cases = [
        ("s1", "refresh", {}),
        ("s1", "release", {}),
        ("s1", "report", {"work_state": "working"}),
        ("s2", "join", {}),
        ("s3", "follow", {}),
    ]
    for n, (seat, action, extra) in enumerate(cases):
        status, body = ten.coord(
            n, seat, 8, action, f"old-{action}", expected_generation=first, **extra
        )
        assert (status, body["error"], body["field"]) == (
            409,
            "stale_generation",
            "expected_generation",
        ), (action, body)
        assert (body["generation"], body["owner"]) == (current, "s1"), body
        assert str(current) in body["message"]
    assert ten.ok(0, "s4", "get_issue_coordination", issue_number=8)["generation"] == current

    def race(i: int) -> tuple[int, dict[str, Any]]:
        if i == 0:
            return ten.coord(0, "s1", 8, "release", "r1", expected_generation=current)
        return ten.coord(i, SEATS[i], 8, "follow", f"f{i}", expected_generation=current)

    results = at_once(10, race)
    assert results[0][0] == 200, results[0]
    after = ten.ok(1, "s0", "get_issue_coordination", issue_number=8)
    assert after["owner"] is None and after["generation"] > current
    landed = 0
    for status, body in results[1:]:
        if status == 200:
            landed += 1
            continue
        assert (status, body["error"]) == (409, "stale_generation"), body
        assert body["generation"] == after["generation"] and body["owner"] is None, body
    print(
        f"\ntools e2e b: generations {first} -> {current} -> {after['generation']}; "
        f"{landed} of 9 follows landed before the release, {9 - landed} refused"
    )


# ---------------------------------------------------------------- c: messages


def test_five_concurrent_retries_of_one_message_deliver_once(ten: Duo) -> None:
    """s0 sends the same message (one client_message_id) 5 times at once, through both
    ingresses: five 200s with one receipt; s1 and s2 each have exactly one item of it in
    their inbox, s0 none; a sixth retry later is the same receipt and delivers nothing."""
    args = {"to": ["s1", "s2"], "body": "Is the export fixed?", "client_message_id": "ask-1"}
    results = at_once(5, lambda i: ten.tool(i, "s0", "send_message", **args))
    assert [s for s, _ in results] == [200] * 5, results
    receipt = results[0][1]
    assert all(body == receipt for _, body in results)
    assert receipt["to"] == ["s1", "s2"]
    assert ten.tool(1, "s0", "send_message", **args) == (200, receipt)
    for n, seat in enumerate(("s1", "s2")):
        items = ten.ok(n, seat, "get_updates")["items"]
        mine = [i for i in items if i["deliveryId"] == receipt["messageId"]]
        assert len(mine) == 1 and len(items) == 1, items
        assert mine[0]["candidate"]["msg"]["body"] == args["body"]
    assert ten.ok(0, "s0", "get_updates")["items"] == []
    thread = ten.ok(1, "s3", "read_thread", thread_id=receipt["messageId"])
    assert [m["id"] for m in thread["messages"]] == [receipt["messageId"]], thread
    print(f"\ntools e2e c: 5 retries -> message {receipt['messageId']}, one item each")


# ---------------------------------------------------------------- d: work intents


def intent(rid: str, revision: int, state: str, step: str) -> dict[str, Any]:
    return {
        "intent_id": "i1",
        "client_request_id": rid,
        "expected_revision": revision,
        "state": state,
        "next_step": step,
    }


def test_a_hundred_concurrent_intent_writes_lose_no_update(ten: Duo) -> None:
    """s3 creates intent i1 (revision 1); 100 threads then write it at once, each from
    revision 1 and, refused with 409 `revision_conflict`, again with the current revision it
    was told, through alternating ingresses: every revision 2..101 won exactly once, and the
    final revision (101) is the create plus the 100 successful writes."""
    ten.ok(0, "s3", "record_work_intent", **intent("create", 0, "waiting", "wait for CI"))
    attempts: Counter[str] = Counter()

    def write(n: int) -> int:
        expected = 1
        for attempt in range(1000):
            args = intent(f"w{n}", expected, "runnable", f"step {n}: rebase the branch")
            status, body = ten.tool(n + attempt, "s3", "record_work_intent", **args)
            attempts["calls"] += 1
            if status == 200:
                assert body["replayed"] is False, body
                return int(body["intent"]["revision"])
            assert (status, body["error"]) == (409, "revision_conflict"), body
            expected = int(body["currentRevision"])
        raise AssertionError(f"writer {n} never landed")

    began = time.monotonic()
    revisions = at_once(100, write)
    took = time.monotonic() - began
    assert sorted(revisions) == list(range(2, 102))
    for via in (0, 1):
        listed = ten.ok(via, "s3", "list_work_intents")
        (only,) = listed["intents"]
        assert (only["intentId"], only["revision"]) == ("i1", 101), only
    print(
        f"\ntools e2e d: 100 writers landed in {took:.1f} s with {attempts['calls']} calls; "
        "final revision 101"
    )


# ---------------------------------------------------------------- e: decisions


def test_votes_at_or_after_the_deadline_are_refused(ten: Duo) -> None:
    """s0 opens a direction with a 2 s countdown (the server's clock sets the deadline D).
    s1..s4 vote at once well before D: counted. s5..s9 vote at D-100, D-50, D, D+50, D+100
    ms (local clock): every accepted vote was cast before D (its atMs), every refusal is
    409 `voting_closed` with serverTime at or after D. A changed vote of s1 after D is
    refused. Read after D on both ingresses, the tally is exactly the accepted votes."""
    opened = ten.ok(
        0,
        "s0",
        "open_decision",
        client_request_id="d1",
        title="Move billing to v2",
        body="Adopt the v2 billing API before the release.",
        countdown_seconds=2,
    )
    did, deadline = opened["directionId"], int(opened["deadlineMs"])
    assert deadline == opened["openedAtMs"] + 2000

    def vote(seat: str, option: int, rid: str, revision: int = 0, via: int = 0) -> Any:
        args = {"direction_id": did, "client_request_id": rid, "option": option}
        return ten.tool(via, seat, "vote", expected_revision=revision, **args)

    early = at_once(4, lambda i: vote(SEATS[i + 1], i % 2, f"v-{i}", via=i))
    assert [s for s, _ in early] == [200] * 4, early
    assert all(b["vote"]["atMs"] < deadline for _, b in early)

    def near(k: int) -> tuple[int, float, Any]:
        target = deadline - 100 + 50 * k  # Unix ms
        time.sleep(max(0.0, target / 1000 - time.time()))
        return k, time.time() * 1000, vote(SEATS[5 + k], k % 2, f"n-{k}", via=k)

    assert time.time() * 1000 < deadline - 300, "the early votes took too long"
    with ThreadPoolExecutor(5) as pool:
        burst = list(pool.map(near, range(5)))
    accepted = [b for _, _, (s, b) in burst if s == 200]
    for _k, _sent, (status, body) in burst:
        if status == 200:
            assert body["vote"]["atMs"] < deadline, body
        else:
            assert (status, body["error"]) == (409, "voting_closed"), body
            assert body["serverTime"] >= deadline and body["deadlineMs"] == deadline, body
    time.sleep(max(0.0, (deadline + 300) / 1000 - time.time()))
    status, late = vote("s1", 1, "late", revision=1, via=1)
    assert (status, late["error"]) == (409, "voting_closed"), late
    assert late["serverTime"] >= deadline
    counted = [b["vote"] for _, b in early] + [b["vote"] for b in accepted]
    for via in (0, 1):
        got = ten.ok(via, SEATS[via], "get_decision", direction_id=did)
        direction = got["direction"]
        assert direction["votingOpen"] is False and direction["result"] is not None
        assert got["voteCount"] == len(counted)
        weights = [row["weight"] for row in direction["tally"]]
        assert weights == [
            sum(v["weight"] for v in counted if v["option"] == 0),
            sum(v["weight"] for v in counted if v["option"] == 1),
        ], direction["tally"]
    sent_at = [f"{sent - deadline:+.0f}" for _k, sent, _r in burst]
    print(
        f"\ntools e2e e: burst sent at D{'/'.join(sent_at)} ms: {len(accepted)} of 5 counted; "
        f"tally {weights}, result {direction['result']['state']}"
    )


# ---------------------------------------------------------------- f: a durable turn


DURABLE = [INGRESS_B, "stages", "controller", "turns", "beat"]


def kill_all(f: Fleet, names: list[str] | None = None) -> None:
    """SIGKILL the process group of each named process (all by default), by its pid."""
    for name in names or list(f.procs):
        proc = f.procs[name].popen
        if proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left in its group


def start_rest(f: Fleet) -> None:
    f.spawn("stages", STAGES)
    f.spawn("controller", CONTROLLER)
    f.spawn("turns", TURNS)
    f.spawn("beat", ["beat"])


def restart_everything(f: Fleet, port_b: int) -> None:
    """Every Seatwire process SIGKILLed, redis-server stopped (SIGTERM: its AOF is what it
    loads) and started again on its port, then every process started again."""
    kill_all(f)
    f.redis.stop()
    f.redis.start()
    for name in ["ingress", *DURABLE]:
        f.restart(name)
    wait_both(f, port_b)


def test_a_runnable_intent_is_one_durable_turn_across_restarts(
    server: RedisServer, tmp_path: Path
) -> None:
    """Two ingresses, a stage worker, a controller worker, a turns worker and beat; scout's
    turns run a `command` agent that logs each turn. After scout's first turn: everything but
    ingress A is SIGKILLed, scout records a runnable intent through ingress A, ingress A is
    SIGKILLed too, redis-server restarted: nothing saw the intent run. Everything started
    again: exactly one more turn, reason `durable`, ok. Everything restarted once more and
    left for 15 ticks: still exactly those two turns (status on both ingresses, and the
    agent's log), the intent untouched, no turn ran twice or at once."""
    f = Fleet(redis=server, workdir=tmp_path, env={})
    spec = launcher(tmp_path, f.base, "ok", sessions=False)
    org = write_org(tmp_path, {"scout": {"launcher": spec}})
    tokens = issue_tokens(server, ["scout", "tally"])
    (tmp_path / "tokens.json").write_text(json.dumps(tokens))  # the agent acks with it
    port_b = free_port()
    f.env = fleet_env(
        server,
        tmp_path,
        SEATWIRE_ORG_FILE=str(org),
        SEATWIRE_CONTROLLER_INTERVAL_S=str(INTERVAL_S),
        SEATWIRE_BEAT_LEASE_MS="2000",
    )
    d = Duo(f, (f.base, f"http://127.0.0.1:{port_b}"), tokens)
    began = time.monotonic()
    try:
        spawn_ingresses(f, port_b)
        start_rest(f)
        wait_both(f, port_b)
        ready_s = time.monotonic() - began

        def settled(turns: int, via: int = 0) -> dict[str, Any] | None:
            s = d.status(via, "scout")
            return s if len(s["turns"]) >= turns and s["activeTurn"] is None else None

        first = wait_for("scout's first turn", lambda: settled(1), timeout=60)
        assert [t["reason"] for t in first["turns"]] == ["first"]
        time.sleep(5 * INTERVAL_S)
        assert len(d.status(1, "scout")["turns"]) == 1

        kill_all(f, DURABLE)
        step = "finish the billing export and open its pull request"
        recorded = d.ok(0, "scout", "record_work_intent", **intent("r1", 0, "runnable", step))
        assert recorded["intent"]["revision"] == 1 and recorded["replayed"] is False
        assert len(d.status(0, "scout")["turns"]) == 1  # nothing ran it yet
        restarted = time.monotonic()
        restart_everything(f, port_b)
        after = wait_for("the durable turn", lambda: settled(2, 1), timeout=60)
        durable_s = time.monotonic() - restarted
        newest = after["turns"][0]
        assert (newest["reason"], newest["outcome"]["kind"]) == ("durable", "ok"), newest

        restart_everything(f, port_b)
        time.sleep(15 * INTERVAL_S)
        finals = [d.status(via, "scout") for via in (0, 1)]
        listed = d.ok(1, "scout", "list_work_intents")
        logs_with_tracebacks = tracebacks(f)
    finally:
        d.close()
        f.stop()
    ran = runs(tmp_path, "scout")
    print(
        f"\ntools e2e f: ready {ready_s:.1f} s; restart to durable turn settled "
        f"{durable_s:.1f} s; runs {[(r['turn'], r['reason'], r['code']) for r in ran]}"
    )
    for final in finals:
        assert [(t["reason"], t["outcome"]["kind"]) for t in final["turns"]] == [
            ("durable", "ok"),
            ("first", "ok"),
        ], final["turns"]
        assert final["activeTurn"] is None
    assert [(r["reason"], r["code"]) for r in ran] == [("first", 0), ("durable", 0)]
    assert [r["turn"] for r in ran] == ["scout:turn:1", "scout:turn:2"]
    assert violations(tmp_path) == []
    (only,) = listed["intents"]
    assert (only["intentId"], only["revision"], only["state"]) == ("i1", 1, "runnable")
    assert logs_with_tracebacks == []
