"""What `appendfsync always` costs the ingress against `everysec` (fault test 13):
signed Slack events accepted per second by ONE `seatwire ingress` process and its ack p99, each
policy against its own redis-server, in the same run.

    uv run python -m bench.fsync [--rounds 3] [--seconds 5] [--concurrency 32]

Two redis-servers (bench/chaos.py's: AOF on, `noeviction`, each in its own temp dir on the
same disk), one with `appendfsync everysec`, one with `appendfsync always`, and one ingress
process on each (SEATWIRE_REDIS_URL and SLACK_SIGNING_SECRET, as compose.yaml runs it; no
worker: each accepted event is journalled and its directedness task waits in its queue). The
requests are bench/ingress.py's: Slack `message` envelopes, each a new event, signed, sent by
its raw asyncio client (`--concurrency` keep-alive connections in a closed loop, each sending
its next request as soon as the last answer arrives). In each round both are loaded in turn,
which one first alternating, for `--seconds` each. Accepted/s counts the 200 `accepted`
answers; p99 is of those answers' latencies. Printed per round, then the medians and the
ratio always / everysec, with `aof_delayed_fsync` (writes held back by a slow fsync) from
each server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import stop_cleanly_on_sigterm
from bench.chaos import Fleet, RedisServer, fleet_env
from bench.ingress import ACCEPTED, SEATWIRE_PATH, SECRET, Connection, Envelopes, ok, render

POLICIES = ("everysec", "always")


async def closed_loop(
    port: int, requests: list[bytes], seconds: float, concurrency: int
) -> dict[str, Any]:
    """`concurrency` keep-alive connections, each sending its next request as soon as the last
    answer is in, for `seconds`: accepted/s and the latencies of the accepted answers."""
    pending = iter(requests)
    latencies: list[float] = []
    other = 0
    end = time.monotonic() + seconds

    async def connection() -> None:
        nonlocal other
        conn = await Connection.open(port)
        try:
            for request in pending:
                if time.monotonic() >= end:
                    return
                started = time.monotonic()
                status, body = await conn.exchange(request)
                if ok(status, body, ACCEPTED):
                    latencies.append(time.monotonic() - started)
                else:
                    other += 1
        finally:
            conn.close()

    started = time.monotonic()
    await asyncio.gather(*(connection() for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    latencies.sort()
    return {
        "accepted_per_s": len(latencies) / elapsed,
        "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else 0.0,
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)] if latencies else 0.0,
        "not_accepted": other,
        "ran_out": len(latencies) + other >= len(requests),
    }


def main() -> None:
    stop_cleanly_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--per-slice", type=int, default=30_000, help="requests built per slice")
    args = parser.parse_args()
    results: dict[str, list[dict[str, Any]]] = {p: [] for p in POLICIES}
    with tempfile.TemporaryDirectory(prefix="seatwire-fsync-") as tmp, ExitStack() as stack:
        fleets: dict[str, Fleet] = {}
        for policy in POLICIES:
            workdir = Path(tmp) / policy
            server = RedisServer(workdir / "redis", extra=("--appendfsync", policy)).start()
            stack.callback(server.stop)
            env = fleet_env(server, workdir, SLACK_SIGNING_SECRET=SECRET)
            f = Fleet(redis=server, workdir=workdir, env=env)
            stack.callback(f.stop)
            f.spawn("ingress", ["ingress", "--host", "127.0.0.1", "--port", str(f.port)])
            f.wait_ready()
            fleets[policy] = f
        envelopes = Envelopes()

        def requests(f: Fleet) -> list[bytes]:
            return render(envelopes.build(args.per_slice), f.port, SEATWIRE_PATH)

        for f in fleets.values():  # warm up: connections, the script loaded
            asyncio.run(closed_loop(f.port, requests(f)[:2000], 1.0, args.concurrency))
        for r in range(args.rounds):
            order = POLICIES if r % 2 == 0 else POLICIES[::-1]
            for policy in order:
                f = fleets[policy]
                batch = requests(f)
                got = asyncio.run(closed_loop(f.port, batch, args.seconds, args.concurrency))
                results[policy].append(got)
                print(
                    f"round {r + 1} {policy:>8}: {got['accepted_per_s']:7.0f} accepted/s, "
                    f"p50 {got['p50_ms']:6.1f} ms, p99 {got['p99_ms']:6.1f} ms, "
                    f"not accepted: {got['not_accepted']}"
                    + (" (ran out of requests: raise --per-slice)" if got["ran_out"] else ""),
                    flush=True,
                )
        delayed = {
            p: int(f.redis.client().info("persistence").get("aof_delayed_fsync", 0))
            for p, f in fleets.items()
        }
    summary = {
        p: {
            "accepted_per_s": round(statistics.median(x["accepted_per_s"] for x in rs)),
            "p99_ms": round(statistics.median(x["p99_ms"] for x in rs), 1),
            "aof_delayed_fsync": delayed[p],
        }
        for p, rs in results.items()
    }
    summary["always_vs_everysec"] = {
        "accepted_ratio": round(
            summary["always"]["accepted_per_s"] / summary["everysec"]["accepted_per_s"], 2
        ),
        "p99_ratio": round(
            summary["always"]["p99_ms"] / max(summary["everysec"]["p99_ms"], 1e-9), 2
        ),
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
