"""Answers under worker faults, with real processes on a redis-server of the test's own (issue 26
part 5: "a worker killed between the answer's record and the seat's inbox item loses
neither"): the ingress, two workers (consuming the directedness queue too, where a thread
reply answers its ask) and beat, on the harness of the other fault tests (bench/chaos.py).

Scout reports blocked work naming ben, one report an ask; once every ask is open, half are
answered by ben's reply in the ask's thread (a signed Events API message) and half by his
click on the ask's Done button (a signed interactivity request), while:

- a worker's MAIN process is SIGKILLed and restarted, in turn, three times (Celery's pool
  processes die with it: whatever they ran is cut short where it stood);
- crash points kill their process at a rate (workers/recovery/faults.py):
  `directedness:before_answer` (a worker's pool process, the reply found to answer an ask
  and nothing of it recorded yet) and `answers:after_answer_recorded` (the answer and the
  seat's `ask_answered` item written, nothing after them: for a reply in a worker, before the
  event's own record; for a click in the ingress, before its 200).

A click whose connection fails (the ingress died under it, or is restarting) is sent again
as Slack retries it, and a thread reply is delivered again with its event id, as the Events
API does. Then it waits for every ask to be answered and every reply recorded, and counts,
for answers:

    D  asks whose seat inbox holds more than one `ask_answered` item for them, or whose
       history has more than one `answered` event;
    L  asks answered by an accepted reply or click that are not `answered` as sent (the
       surface, the answer, ben), or answered without an `ask_answered` item in scout's inbox.

Both must be 0, and the faults must have happened (the main kills, and the crash points:
pool processes killed by a signal, counted from the workers' logs; the ingress's restarts
are reported). Run with -s to see the figures.

What it found: the directedness stage used to record the event (its journal entry final)
before answering the ask. A main kill that cut a reply's pool process between the two left
the answer to kombu's redelivery after the visibility timeout (a quarter of an hour), since
the sweeper never looks at a final entry: L = 1 in one run of four. The stage now answers
first (workers/stages/directedness.py), so a cut there leaves the entry open and the sweeper
delivers it again once the dead delivery's running mark lapses (35 s here).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from bench.chaos import TOKEN, Fleet, RedisServer, fleet
from contracts.asks import Ask
from pipeline.signatures import slack_headers
from workers.queues import FINAL_STATES, tracking_id_for
from workers.stores import keys
from workers.stores.asks import AskStore
from workers.stores.inbound import inbound_tracking_id
from workers.stores.scripts import text

pytestmark = pytest.mark.e2e

SEAT = "scout"
OWNER = "ben"
OWNER_SLACK = "U0BEN"
ASKS = 20
RATE = 0.3  # a worker's crash points' chance of killing its process, per pass
CLICK_RATE = 0.2  # the ingress's (a click's answer point)
KILLS = 3  # SIGKILLs of a worker's main process while the answers come in
SECRET = "answer-faults-slack-signing-secret"
OPERATOR = {"Authorization": f"Bearer {TOKEN}"}
# A pool process that died on a signal, as the worker's main process logs it (billiard).
_CHILD_KILLED = re.compile(r"exited with 'signal 9 \(SIGKILL\)'")


@dataclass
class Sender:
    """Posts what Slack posts, again and again until it is answered 2xx, as Slack retries a
    request it got no answer to (a connection refused or cut, a 5xx, a 429): `failed` counts
    the tries that got no answer or a retryable one. A 4xx other than 429 fails the test."""

    http: httpx.Client
    deadline_s: float = 60.0
    failed: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def post(self, kind: str, path: str, body: bytes, *, form: bool) -> httpx.Response:
        give_up = time.monotonic() + self.deadline_s
        while True:
            headers = slack_headers(body, secret=SECRET, now_s=int(time.time()))
            if form:
                headers["Content-Type"] = "application/x-www-form-urlencoded"
            try:
                resp = self.http.post(path, content=body, headers=headers)
                status = resp.status_code
            except httpx.HTTPError:
                status = 0
            if 200 <= status < 300:
                return resp
            assert status in (0, 429) or status >= 500, f"{kind}: HTTP {status} {resp.text}"
            with self._lock:
                self.failed[kind] += 1
            assert time.monotonic() < give_up, f"{kind}: no 2xx answer in {self.deadline_s} s"
            time.sleep(0.2)


def report(i: int) -> dict[str, Any]:
    return {
        "id": f"ansfault-{i}",
        "title": f"Unblock the answer fault run's work {i}",
        "state": "blocked",
        "blocker": {"kind": "access", "ownerId": OWNER, "detail": "no grant"},
        "selfServeExhausted": True,
    }


def open_asks(http: httpx.Client) -> list[Ask]:
    """Scout's open asks, every page of GET /v1/asks."""
    found: list[Ask] = []
    cursor: str | None = None
    while True:
        params = {"seat": SEAT, "state": "open", "limit": "100"}
        if cursor is not None:
            params["cursor"] = cursor
        page = http.get("/v1/asks", params=params, headers=OPERATOR)
        page.raise_for_status()
        body = page.json()
        found.extend(Ask.model_validate(a) for a in body["asks"])
        cursor = body.get("next")
        if cursor is None:
            return found


def until(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """`check()` once it holds (polled); a timeout fails the test naming `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not so after {timeout_s:.0f} s"
        time.sleep(0.1)


def engage(f: Fleet, http: httpx.Client) -> dict[str, Ask]:
    """Post the reports as scout and wait until each is engaged and its ask open, landed."""
    token = f.seat_tokens((SEAT,))[SEAT]
    works = {}
    for i in range(ASKS):
        body = report(i)
        resp = http.post(
            f"/v1/seats/{SEAT}/work", json=body, headers={"Authorization": f"Bearer {token}"}
        )
        assert resp.status_code == 202, resp.text
        works[body["id"]] = tracking_id_for(SEAT, body["id"], 1)

    def engaged() -> bool:
        with closing(f.redis.client()) as client:
            states = [text(client.hget(keys.journal(t), "state") or "") for t in works.values()]
        assert not any(s in FINAL_STATES and s != "engaged" for s in states), states
        return all(s == "engaged" for s in states)

    until(engaged, 60, "every report engaged")

    def landed() -> dict[str, Ask] | None:
        asks = {a.work_id: a for a in open_asks(http) if a.work_id in works}
        done = len(asks) == ASKS and all(a.landing is not None for a in asks.values())
        return {a.id: a for a in asks.values()} if done else None

    asks: dict[str, Ask] = until(landed, 30, "every ask open and landed")
    assert all(a.asked_ids() == (OWNER,) for a in asks.values())
    return asks


def reply(sender: Sender, ask: Ask, i: int) -> str:
    """Ben's reply in the ask's thread, as the Events API delivers it; its delivery id."""
    landing = ask.landing
    assert landing is not None
    ts = f"{time.time():.6f}"
    channel = landing.channel_id or ""
    envelope = {
        "token": "unused",
        "team_id": "T0SEATWIRE",
        "api_app_id": "A0SEATWIRE",
        "type": "event_callback",
        "event_id": f"EvANSFAULT{i:04d}",
        "event_time": int(float(ts)),
        "event": {
            "type": "message",
            "channel": channel,
            "channel_type": "im" if channel.startswith(("D", "dm:")) else "channel",
            "user": OWNER_SLACK,
            "text": f"Granted, for {ask.work_id}.",
            "ts": ts,
            "event_ts": ts,
            "thread_ts": landing.thread_root_id or landing.message_id,
        },
        "authorizations": [{"team_id": "T0SEATWIRE", "user_id": "U0SCOUT", "is_bot": True}],
    }
    body = json.dumps(envelope).encode()
    resp = sender.post("reply", "/webhooks/slack", body, form=False)
    return str(resp.json()["deliveryId"])


def click(sender: Sender, ask: Ask) -> None:
    """Ben's click on the ask's Done button, as Slack posts it (the same click each try)."""
    landing = ask.landing
    assert landing is not None
    payload = {
        "type": "block_actions",
        "user": {"id": OWNER_SLACK, "team_id": "T0SEATWIRE"},
        "team": {"id": "T0SEATWIRE", "domain": "seatwire"},
        "api_app_id": "A0SEATWIRE",
        "container": {
            "type": "message",
            "message_ts": landing.message_id,
            "channel_id": landing.channel_id,
            "is_ephemeral": False,
        },
        "channel": {"id": landing.channel_id},
        "message": {"ts": landing.message_id, "type": "message"},
        "actions": [
            {
                "type": "button",
                "block_id": f"seatwire_ask:{ask.id}",
                "action_id": "seatwire_answer:done",
                "value": f"{ask.id}|done",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    sender.post("click", "/webhooks/slack/interactions", body, form=True)


def answered_items(f: Fleet) -> Counter[str]:
    """Scout's `ask_answered` items by ask id, read from its inbox stream (nothing acked)."""
    with closing(f.redis.client()) as client:
        entries: list[tuple[bytes, dict[bytes, bytes]]] = client.xrange(keys.inbox(SEAT))  # type: ignore[assignment]
    items = (json.loads(fields[b"item"]) for _id, fields in entries)
    return Counter(
        i["ask"]["askId"] for i in items if i.get("kind") == "ask_answered" and i.get("ask")
    )


def stored(f: Fleet, ask_ids: list[str]) -> dict[str, Ask]:
    """The asks as the store holds them (the record is the truth, whatever a page says)."""
    with closing(f.redis.client()) as client:
        return {a.id: a for a in AskStore(client).many(ask_ids)}


def test_answers_lose_and_double_nothing_when_workers_die_between_the_answer_and_the_inbox(
    server: RedisServer, tmp_path: Path
) -> None:
    """20 asks; 10 answered by thread replies, 10 by clicks, sent one every 0.4 s while a
    worker's main process is SIGKILLed three times and the crash points fire (30 % a pass in
    a worker, 20 % in the ingress, whose restart costs seconds). The delivery cap is raised
    to 20 for this run: a reply whose deliveries met a crash point five times running (half of
    a reply's deliveries meet one at these rates, so about one run in three has such a reply)
    would otherwise be given up as a poison message, which is the cap's job and not what is
    tested here."""
    fault_points = ",".join(
        (
            f"directedness:before_answer:{RATE}",
            f"answers:after_answer_recorded:{RATE}:slack_thread",
            # A click's point kills the ingress, which takes seconds to come back: rarer.
            f"answers:after_answer_recorded:{CLICK_RATE}:slack_button",
        )
    )
    phases: dict[str, float] = {}
    started = last = time.monotonic()

    def phase(name: str) -> None:
        nonlocal last
        phases[name] = round(time.monotonic() - last, 1)
        last = time.monotonic()

    with fleet(
        server,
        tmp_path,
        queues="directedness,engagement,guardrails,send",
        SEATWIRE_SLACK_SIGNING_SECRET=SECRET,
        SEATWIRE_FAULTPOINTS=fault_points,
        SEATWIRE_MAX_DELIVERIES="20",
        SEATWIRE_LIMITS__PER_TARGET_PER_DAY="1000",
    ) as f:
        with httpx.Client(base_url=f.base, timeout=10) as http:
            phase("start")
            asks = engage(f, http)
            phase("engage")
            ids = sorted(asks)
            by_reply, by_click = ids[::2], ids[1::2]
            sender = Sender(http)
            deliveries: dict[str, str] = {}

            def answer(n: int, ask_id: str) -> None:
                if ask_id in by_reply:
                    deliveries[ask_id] = reply(sender, asks[ask_id], n)
                else:
                    click(sender, asks[ask_id])

            with ThreadPoolExecutor(8) as pool:
                futures = []
                for n, ask_id in enumerate(ids):
                    futures.append(pool.submit(answer, n, ask_id))
                    time.sleep(0.4)
                    if n % 6 == 3 and n // 6 < KILLS:  # a kill every 6 answers, 3 in all
                        victim = f"worker-{(n // 6) % 2}"
                        f.kill_main(victim)
                        time.sleep(2)
                        f.restart(victim)
                for fut in futures:
                    fut.result()
            kills = sum(f.starts[f"worker-{i}"] - 1 for i in range(2))
            phase("answer")

            trackings = [inbound_tracking_id(d) for d in deliveries.values()]

            def all_heard() -> bool:
                items = answered_items(f)
                now = stored(f, ids)
                with closing(f.redis.client()) as client:
                    states = [text(client.hget(keys.journal(t), "state") or "") for t in trackings]
                return all(s in FINAL_STATES for s in states) and all(
                    items[a] > 0 and a in now and now[a].state == "answered" for a in ids
                )

            # A reply whose worker died under it is delivered again: by its worker's main
            # process at once (a pool process killed), or, when the main process was killed,
            # by the sweeper once the dead delivery's running mark lapses (the task time limit
            # + 15 s, 35 s here). Wait for every answer and every reply's record, bounded.
            heard = _wait(all_heard, 75)
            phase("settle")
            items = answered_items(f)
            now = stored(f, ids)
            with closing(f.redis.client()) as client:
                reply_states = [client.hget(keys.journal(t), "state") for t in trackings]
                # Starts of a reply's directedness message beyond its first (a pool process
                # killed under it, or a sweeper copy of one a main kill cut short).
                restarted = sum(
                    max(0, int(text(n)) - 1)
                    for t in trackings
                    for n in client.hvals(keys.deliveries(t))
                    if text(n).isdigit()
                )
                dead_letters = client.zcard(keys.DLQ)
        child_kills = sum(
            len(_CHILD_KILLED.findall(log.read_text(errors="replace")))
            for log in tmp_path.glob("worker-*.log")
        )
        ingress_deaths = f.revived["ingress"]

    def answered_count(ask: Ask) -> int:
        return sum(1 for e in ask.history if e.event == "answered")

    def heard_as_sent(ask_id: str) -> bool:
        ask = now.get(ask_id)
        if ask is None or ask.state != "answered" or ask.answer is None:
            return False
        via = "slack_thread" if ask_id in by_reply else "slack_button"
        verb = "replied" if ask_id in by_reply else "done"
        return (ask.answer.via, ask.answer.answer, ask.answer.by) == (via, verb, OWNER)

    fig = {
        "asks": len(ids),
        "answered_by_reply": len(by_reply),
        "answered_by_click": len(by_click),
        "D": sum(1 for a in ids if items[a] > 1 or (a in now and answered_count(now[a]) > 1)),
        "L": sum(1 for a in ids if not heard_as_sent(a) or items[a] == 0),
        "ask_answered_items": sum(items[a] for a in ids),
        "late_answers": sum(
            1 for a in ids if a in now for e in now[a].history if e.event == "late_answer"
        ),
        "reply_events_not_final": sum(1 for s in reply_states if text(s or "") not in FINAL_STATES),
        "reply_deliveries_repeated": restarted,
        "main_kills": kills,
        "pool_processes_killed_by_crash_points": child_kills,
        "ingress_killed_by_crash_point": ingress_deaths,
        "orphaned_pool_children": f.orphans,
        "tries_unanswered": dict(sender.failed),
        "dead_letters": dead_letters,
        "all_heard_within_bound": heard,
        "seconds": round(time.monotonic() - started, 1),
        "seconds_by_phase": phases,
    }
    print(f"\nfigures: {json.dumps(fig, sort_keys=True)}")
    for a in ids:
        if not heard_as_sent(a) or items[a] != 1:
            ask = now.get(a)
            said = "no record" if ask is None else f"{ask.state} {ask.answer!r}"
            print(f"lost or doubled: {a} ({deliveries.get(a, 'click')}): {said}, {items[a]} items")
    assert (fig["D"], fig["L"]) == (0, 0), fig
    assert fig["late_answers"] == 0, "a retried click or redelivered reply counted as another"
    assert fig["reply_events_not_final"] == 0
    assert fig["dead_letters"] == 0
    assert kills == KILLS, "not every main kill happened"
    assert child_kills > 0, "no crash point killed a worker's pool process: nothing was tested"


def _wait(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True
