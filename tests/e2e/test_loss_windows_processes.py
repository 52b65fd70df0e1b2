"""The classic loss windows between a worker and Redis, with real processes (the fault tests
7: a stage hand-off broken between the state move and its publish; 11: connection resets
while acks_late tasks run; 12: a Lua script's reply lost after it ran): a redis-server of
the test's own on a free port, the ingress and beat connected to it directly, two workers
connected through a RESP-aware TCP proxy (tests/e2e/proxy.py) that resets a connection at a
chosen command, loses a chosen reply, or resets every connection at once. Each test counts D
(an ask written to the outbox twice), L (a report answered 202 with no final record) and G
(a person asked more often than the daily limit); all must be 0. Each test's docstring gives
the figures of its runs on a 2-core host (run with -s to see them)."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any, ClassVar

import pytest

from bench.chaos import Load, RedisServer, figures, settle
from tests.e2e.proxied import ProxiedFleet, overshoot, proxied_fleet, sends_per_person
from tests.e2e.proxy import Action, Link, RespProxy
from workers.stores import keys
from workers.stores.scripts import source

pytestmark = pytest.mark.e2e

_ARGSREPR = re.compile(rb'"argsrepr": ?"\[([^\]"]+)\]"')
_STILL_QUEUED = re.compile(r"sweep: (\d+) overdue still queued")


def check(fig: dict[str, Any]) -> None:
    print(f"\nfigures: {json.dumps(fig, sort_keys=True)}")
    assert (fig["D"], fig["L"], fig["G"]) == (0, 0, 0), fig
    assert fig["gave_up"] == 0, "a stage gave up on an accepted report (dead-lettered)"
    assert fig["dead_letters"] == 0
    assert fig["answers"] == {"202": fig["accepted"]}, "the ingress answered other than 202"


def redeliveries(server: RedisServer, trackings: list[str]) -> int:
    """Stage runs beyond the first, over these reports (the delivery counters: a message
    redelivered by kombu or copied by the sweeper and started again)."""
    client = server.client()
    pipe = client.pipeline(transaction=False)
    for t in trackings:
        pipe.hvals(keys.deliveries(t))
    total = 0
    for values in pipe.execute():
        total += sum(int(v) - 1 for v in values if v.isdigit() and int(v) > 1)
    client.close()
    return total


def left_waiting(f: ProxiedFleet) -> int:
    """Overdue entries beat's sweeps found still waiting in their queue and left uncopied
    (only their deadline moved), summed over its log."""
    return sum(
        int(n)
        for log in f.workdir.glob("beat*.log")
        for n in _STILL_QUEUED.findall(log.read_text(errors="replace"))
    )


class HandOffResets:
    """The rule of test 7: of the stage hand-offs a worker publishes (an LPUSH of the next
    stage's message onto the `guardrails` or `send` queue), break every `every`-th of each
    queue, `limit` a queue, alternately two ways: reset before it reaches Redis (the message
    is not written), and lose its reply after Redis wrote it (written, the worker sees a
    reset). Note whether the entry's state had already moved (to `decided` or on, to `reserved`
    or on) at that instant, and every hand-off that passed."""

    # The states an entry may still be in when its hand-off onto the queue has NOT yet had
    # its move made (a copy the sweeper made may hand off again later, from further on).
    NOT_MOVED: ClassVar[dict[bytes, tuple[bytes, ...]]] = {
        b"guardrails": (b"", b"accepted"),
        b"send": (b"", b"accepted", b"decided"),
    }

    def __init__(self, server: RedisServer, every: int, limit: int) -> None:
        self.r = server.client()  # the stores' database, read from the proxy's thread
        self.every = every
        self.limit = limit
        self.seen: Counter[bytes] = Counter()
        self.broken: dict[bytes, list[tuple[str, Action]]] = {b"guardrails": [], b"send": []}
        self.moved_at_break = 0
        self.passed: Counter[str] = Counter()  # task id -> hand-offs that reached Redis

    def __call__(self, _link: Link, command: list[bytes]) -> Action:
        if len(command) != 3 or command[0].upper() != b"LPUSH" or command[1] not in self.broken:
            return Action.PASS
        queue = command[1]
        found = _ARGSREPR.search(command[2])
        tracking = found.group(1).decode() if found else ""
        task = f"{tracking}:{queue.decode()}"
        self.seen[queue] += 1
        broken = self.broken[queue]
        if tracking and self.seen[queue] % self.every == 0 and len(broken) < self.limit:
            action = Action.RESET if len(broken) % 2 == 0 else Action.LOSE_REPLY
            broken.append((task, action))
            state = self.r.hget(keys.journal(tracking), "state") or b""
            self.moved_at_break += state not in self.NOT_MOVED[queue]
            if action is Action.LOSE_REPLY:
                self.passed[task] += 1
            return action
        self.passed[task] += 1
        return Action.PASS

    def count(self, action: Action) -> dict[str, int]:
        return {
            q.decode(): sum(1 for _, a in broken if a is action)
            for q, broken in self.broken.items()
        }

    def republished(self) -> int:
        """Broken hand-offs that reached Redis again through the proxy afterwards (a reset
        one at least once, a written one whose reply was lost a second time)."""
        return sum(
            1
            for broken in self.broken.values()
            for task, action in broken
            if self.passed[task] >= (1 if action is Action.RESET else 2)
        )


def test_7_a_stage_hand_off_broken_between_the_state_move_and_its_publish_loses_nothing(
    server: RedisServer, tmp_path: Path
) -> None:
    """On a broker that is not the stores' Redis (database 1 of the test's server; on the
    stores' own Redis the move and the next message are one script, so this window does not
    exist there), 10 reports/s for 12 s; the proxy breaks a worker's broker connection at
    every 6th hand-off publish per queue (8 a queue: after the engagement recorded `decided`,
    after the guardrails recorded `reserved`), so the state has moved and the message is in
    doubt: half are reset before Redis sees them (not written), half lose their reply after
    Redis wrote them (written, the worker sees a reset). Every broken hand-off is published
    again (the publish retry, on a new connection): a written one twice, which the next
    stage runs once. Every accepted report ends final, D = L = G = 0. A message only waiting
    in its queue past the 8 s journal deadline is left there: the sweep looks for it in the
    broker's database (`left_waiting_by_sweeper` counts those it found). Figures of 3 runs
    (the second with two CPU hogs, the third with four): 120 accepted; 16 broken (8 reset,
    8 reply lost), all 16 in the window (state moved); 16 published again through the proxy
    by redis-py's retry inside kombu's client, 0 or 1 publish errors reaching a stage;
    re-enqueued by the sweeper 0, 0 and 0; D = L = G = 0; 23, 21 and 24 s. With both
    workers SIGSTOPped by hand for 12 s mid-load, so that the queues wait past the deadline
    (2 runs): 39 and 43 overdue entries found still queued and left, 2 and 2 copied (messages
    a stopped worker had taken and not started: in no queue, running nowhere), 2 and 2
    redundant stage runs; the same pause when the sweep looked in the stores' database
    instead copied 50, all redundant."""
    rule = HandOffResets(server, every=6, limit=8)
    proxy = RespProxy(server.port, rule).start()
    try:
        with proxied_fleet(
            server,
            tmp_path,
            worker_env={"SEATWIRE_REDIS_URL": proxy.url(0), "SEATWIRE_BROKER_URL": proxy.url(1)},
            broker_db=1,
        ) as f:
            load = Load(f.base, tokens=f.seat_tokens(), tag="handoff", rate=10)
            load.run(12)
            load.stop()
            states = settle(server, load, timeout=60)
            fig = figures(server, f, load, states)
            # The copies' own lines: a busy sweep's summary line says "re-enqueued" too.
            swept = f.lines("re-enqueued", "past its deadline", prefix="beat")
            waited = left_waiting(f)
            stage_errors = f.logged("] retry: ") + f.logged("gave up on")
        fig["stage_runs_repeated"] = redeliveries(server, list(load.accepted))
    finally:
        proxy.stop()
        rule.r.close()
    fig["reset_before_written"] = rule.count(Action.RESET)
    fig["reply_lost_after_written"] = rule.count(Action.LOSE_REPLY)
    fig["broken_in_window"] = rule.moved_at_break
    fig["republished_through_proxy"] = rule.republished()
    fig["publish_errors_reaching_a_stage"] = stage_errors
    fig["requeued_by_sweeper"] = swept
    fig["left_waiting_by_sweeper"] = waited
    check(fig)
    assert fig["reset_before_written"] == {"guardrails": 4, "send": 4}, "not every break landed"
    assert fig["reply_lost_after_written"] == {"guardrails": 4, "send": 4}
    assert rule.moved_at_break == 16, "a break came before the state moved: not the window"
    assert rule.republished() == 16 or swept > 0, "a broken hand-off was never published again"


def test_11_connection_resets_while_acks_late_tasks_run_lose_and_duplicate_nothing(
    server: RedisServer, tmp_path: Path
) -> None:
    """10 reports/s for 20 s; 8 times, as soon as a worker holds a message unacked (a task
    running or about to), the proxy resets every worker connection to Redis at once (the
    broker's consumer and publisher, the stores' pool): `worker_cancel_long_running_tasks_
    on_connection_loss` (on) terminates the acks_late task caught running, kombu gives its
    message back, and it runs again; every accepted report ends final, nothing is sent
    twice, nobody is asked past the limit. Figures of 3 runs (the third with two CPU
    hogs): 200 accepted; 8 resets, each catching 1-3 unacked messages and 14-18 open
    connections; 5, 4 and 5 running tasks cancelled, of them 2, 1 and 1 sends (one, in the
    third run, cancelled after it took its send lease: its redelivery found the lease held,
    retried once it lapsed, 30 s here, and sent once); 16 consumer reconnects (8 per
    worker); 14, 11 and 11 stage runs repeated (redelivered and run again, idempotently);
    D = L = G = 0; 41, 46 and 54 s."""
    proxy = RespProxy(server.port).start()
    caught: list[int] = []
    connections: list[int] = []
    try:
        with proxied_fleet(server, tmp_path, worker_env={"SEATWIRE_REDIS_URL": proxy.url(0)}) as f:
            load = Load(f.base, tokens=f.seat_tokens(), tag="blip", rate=10)
            sender = threading.Thread(target=load.run, args=(20,), daemon=True)
            sender.start()
            with closing(server.client()) as watch:
                for _ in range(8):
                    time.sleep(1.5)  # spread the resets over the load
                    deadline = time.monotonic() + 15
                    while (unacked := watch.hlen("unacked")) == 0:
                        assert time.monotonic() < deadline, "no worker took a message in 15 s"
                        time.sleep(0.002)
                    connections.append(proxy.reset_all())
                    caught.append(unacked)
            sender.join()
            load.stop()
            states = settle(server, load, timeout=60)
            fig = figures(server, f, load, states)
            cancelled = f.logged("cannot be acknowledged after a connection loss")
            sends_cancelled = f.lines("seatwire.send[", "cannot be acknowledged")
            held_lease = f.logged("LeaseBusy(")
            reconnects = f.logged("Connection to broker lost")
            refused_redeliveries = f.logged("acked, not run")
        fig["stage_runs_repeated"] = redeliveries(server, list(load.accepted))
    finally:
        proxy.stop()
    fig["resets"] = len(caught)
    fig["unacked_at_reset"] = caught
    fig["connections_reset"] = connections
    fig["tasks_cancelled"] = cancelled
    fig["sends_cancelled"] = sends_cancelled
    fig["send_retries_on_a_held_lease"] = held_lease
    fig["consumer_reconnects"] = reconnects
    fig["redeliveries_refused_as_done"] = refused_redeliveries
    check(fig)
    assert len(caught) == 8 and min(caught) > 0


STAGE_SCRIPTS = ("decision_record", "guard_reserve", "send_begin_ask", "op_finish_ask")
PER_TARGET = 3


class LostScriptReplies:
    """The rule of test 12: of each stage script's EVALSHAs (by SHA), lose the reply of every
    `every`-th first try, `limit` a script: Redis runs it, the worker sees its connection
    reset; and count each script's calls and the tries re-sent after a loss (the same
    command again: redis-py's retry)."""

    def __init__(self, every: int, limit: int) -> None:
        self.names = {
            hashlib.sha1(source(n).encode()).hexdigest().encode(): n for n in STAGE_SCRIPTS
        }
        self.every = every
        self.limit = limit
        self.calls: Counter[str] = Counter()
        self.lost: Counter[str] = Counter()
        self.resent: Counter[str] = Counter()
        self._lost_commands: set[tuple[bytes, ...]] = set()

    def __call__(self, _link: Link, command: list[bytes]) -> Action:
        if len(command) < 2 or command[0].upper() != b"EVALSHA":
            return Action.PASS
        name = self.names.get(command[1].lower())
        if name is None:
            return Action.PASS
        key = tuple(command)
        if key in self._lost_commands:
            self._lost_commands.discard(key)
            self.resent[name] += 1
            return Action.PASS
        self.calls[name] += 1
        if self.calls[name] % self.every == 0 and self.lost[name] < self.limit:
            self.lost[name] += 1
            self._lost_commands.add(key)
            return Action.LOSE_REPLY
        return Action.PASS


def test_12_a_lost_reply_after_a_stage_script_ran_counts_nothing_twice(
    server: RedisServer, tmp_path: Path
) -> None:
    """10 reports/s for 6 s, naming 11 people with a limit of 3 asks a person a day (so
    about half are refused); the proxy loses the reply of every 4th call of each stage
    script (the decision record, the guardrail reservation, the send's begin and finish),
    up to 6 each, after Redis ran it: redis-py re-sends the same EVALSHA and each script
    answers it as it answered the first, so a place is reserved once per ask and a message
    pushed once. Every accepted report ends final, the guardrail's per-person window holds
    exactly the asks sent (reservations == sends), D = L = G = 0. Figures of 3 runs (the
    third with two CPU hogs): 60 accepted, 33 sent, 27 refused; 24 replies lost (6 of each
    script, out of 61 decision records, 34-35 reservations, 34 begins, 34 finishes), each
    re-sent once by redis-py and answered as the first try; 33 places in the per-person
    windows for 33 sends; 0 stage runs repeated; D = L = G = 0; 35, 23 and 40 s. With the
    reservation script's replay answer removed, the same run fails (33 places, 29 sends)."""
    rule = LostScriptReplies(every=4, limit=6)
    proxy = RespProxy(server.port, rule).start()
    try:
        with proxied_fleet(
            server,
            tmp_path,
            worker_env={"SEATWIRE_REDIS_URL": proxy.url(0)},
            SEATWIRE_LIMITS__PER_TARGET_PER_DAY=str(PER_TARGET),
        ) as f:
            load = Load(f.base, tokens=f.seat_tokens(), tag="lostreply", rate=10)
            load.run(6)
            load.stop()
            states = settle(server, load, timeout=60)
            fig = figures(server, f, load, states)
            sent = sends_per_person(f.outbox)
            fig["G"] = overshoot(f.outbox, PER_TARGET)
        client = server.client()
        window = {p: int(client.zcard(keys.by_target(p))) for p in sent}
        client.close()
        fig["stage_runs_repeated"] = redeliveries(server, list(load.accepted))
    finally:
        proxy.stop()
    fig["script_calls"] = dict(rule.calls)
    fig["replies_lost"] = dict(rule.lost)
    fig["resent_after_loss"] = dict(rule.resent)
    fig["reserved_in_window_vs_sent"] = [sum(window.values()), sum(sent.values())]
    check(fig)
    assert window == dict(sent), "a person's guardrail window does not match the asks sent"
    assert rule.lost == dict.fromkeys(STAGE_SCRIPTS, 6), "not every loss landed"
    assert rule.resent == rule.lost, "a lost reply was not re-sent by redis-py"
