"""A stage pool that is down for "an hour" drains its backlog with nothing dead-lettered
(issue 11 item 8), with real processes on a redis-server of the test's own: the ingress, an
engagement + guardrails worker and beat, while the send pool is down. The hour is simulated
with a 1 s journal deadline and a sweep every 0.2 s, for 40 s: 40 deadlines (an hour is 12 of
the default 5-minute deadline) and about 200 sweeps over a full backlog. Before the fix each
sweep added another copy of every queued message and each copy counted toward the cap of 5:
the whole backlog went to the dead-letter queue as `stuck`. Counts D, L, G, dead letters and
copies in the queue; run with -s to see the figures."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from bench.chaos import Load, RedisServer, figures, fleet
from bench.chaos import settle as settle_load
from workers.queues import Queue
from workers.stores import keys

pytestmark = pytest.mark.e2e

DOWN_S = 40


def queued_ids(server: RedisServer, queue: Queue) -> list[str]:
    client = server.client()
    try:
        return [json.loads(raw)["headers"]["id"] for raw in client.lrange(queue.value, 0, -1)]
    finally:
        client.close()


def test_a_send_pool_down_for_an_hour_drains_its_backlog_with_no_dead_letter(
    server: RedisServer, tmp_path: Path
) -> None:
    """100 reports reach the send queue while no send worker runs; 40 deadlines of sweeps
    later the queue still holds one message per report (no copies); once a send worker
    starts, every report ends final, nothing is dead-lettered, D = L = G = 0."""
    with fleet(
        server,
        tmp_path,
        workers=0,
        SEATWIRE_JOURNAL_DEADLINE_MS="1000",
        SEATWIRE_SWEEP_INTERVAL_S="0.2",
    ) as f:
        f.spawn("worker-eg", ["worker", "--queues", "engagement,guardrails", "--concurrency", "1"])
        load = Load(f.base, tokens=f.seat_tokens(), tag="outage", rate=25)
        load.run(4)
        down = time.monotonic()
        most, copies = 0, 0
        while time.monotonic() - down < DOWN_S:
            ids = queued_ids(server, Queue.SEND)
            most = max(most, len(ids))
            copies = max(copies, len(ids) - len(set(ids)))
            time.sleep(1)
        waiting = queued_ids(server, Queue.SEND)
        client = server.client()
        dead_while_down = client.zcard(keys.DLQ)
        client.close()
        f.spawn("worker-send", ["worker", "--queues", "send", "--concurrency", "1"])
        back = time.monotonic()
        states = settle_load(server, load, timeout=90)
        drained_s = time.monotonic() - back
        fig = figures(server, f, load, states)
        client = server.client()
        counted = Counter(int(client.hget(keys.deliveries(t), "send") or 1) for t in load.accepted)
        client.close()
        beat_log = "".join(p.read_text(errors="replace") for p in tmp_path.glob("beat-*.log"))
    fig.update(
        {
            "down_s": DOWN_S,
            "sweeps": beat_log.count("sent seatwire.sweep"),
            "send_queue_most": most,
            "send_queue_at_restart": len(waiting),
            "copies_in_queue_max": copies,
            "reenqueued_by_sweeper": beat_log.count("re-enqueued "),
            "dead_while_down": dead_while_down,
            "send_deliveries_counted": dict(counted),
            "drained_s": round(drained_s, 1),
        }
    )
    print(f"\noutage: {fig}")
    assert fig["accepted"] == 100 and fig["sweeps"] >= 150
    assert copies == 0 and len(waiting) == len(set(waiting)) > 0
    assert dead_while_down == 0 and fig["dead_letters"] == 0
    assert (fig["D"], fig["L"], fig["G"]) == (0, 0, 0), fig
    assert fig["5xx_not_503"] == 0
