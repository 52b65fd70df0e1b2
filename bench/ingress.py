"""Signed Slack webhooks accepted per second by ONE ingress process, as a RATIO to a bare FastAPI
endpoint that returns 200, measured in the same run; then the ack latency at half that maximum.

    uv run python -m bench.ingress [--rounds 5] [--seconds 5] [--concurrency 32]

Two servers, each its own process, started fresh for every round on a flushed database:

  baseline   a FastAPI app with one `POST /` that returns 200 and nothing else, served by
             `uvicorn.run(app, host=..., port=..., log_level="info")`: the call `seatwire
             ingress` makes (workers/cli/__init__.py), so the same loop and HTTP implementation
             (uvicorn's "auto": uvloop and httptools when installed, else asyncio and h11) and
             the access log on, as it is there.
  seatwire   `seatwire ingress --host 127.0.0.1 --port P` with SEATWIRE_REDIS_URL,
             SEATWIRE_API_TOKEN and SLACK_SIGNING_SECRET, as compose.yaml starts it. No worker
             runs: every accepted event is journalled and its directedness task waits in the
             `directedness` queue.

Both receive the same pre-built, pre-signed requests: Slack Events API `message` envelopes
shaped like tests/pipeline/fixtures/slack/message_channel_mention.json, each with an event_id
and a ts of its own (so each one is a new event to Seatwire, never a duplicate), signed with
`pipeline.signatures.slack_headers` just before the run. The baseline gets them on `/`, Seatwire
on `/webhooks/slack`.

Closed loop: `--concurrency` keep-alive connections, each sending its next request as soon as the
last answer arrives. In a round both servers run at once (only one is loaded at a time): after
`--warmup` seconds on each, the load alternates between them in `--slice`-second slices until
each has had `--seconds`, so a burst of other work on the machine lands on both sides. Accepted/s
counts the 2xx answers completed inside a side's slices (Seatwire's must also say
`"status":"accepted"`); the ratio is taken within the round, and which side goes first alternates
from round to round. The client is raw asyncio streams, not httpx, in this process: it spends a
fraction of a core against the baseline (printed as "client"), so the server is what saturates.

Open loop: request starts at a fixed rate, half the median of Seatwire's closed-loop maxima,
for `--open-seconds`, each on an idle keep-alive connection (a new one is opened when none is
idle). Latency is from the request's scheduled start to the end of its answer, so a late start
counts against the server, not for it. Every answer must be 200 and `accepted`.

After every Seatwire run the database is checked: one journal entry and one queued directedness
task per accepted request.

`--split N` instead times, in-process and without HTTP, each step the Slack route takes for N new
events (signature, JSON, normalise, envelope, journal accept, publish, mark enqueued).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import stop_cleanly_on_sigterm
from bench.pipeline import Workers, busy_cpu_s, redis_cpu_s, self_cpu_s

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "pipeline" / "fixtures" / "slack" / "message_channel_mention.json"
SECRET = "bench-slack-signing-secret"
HOST = "127.0.0.1"
KEEPALIVE_EXPIRY_S = 4.0
SEATWIRE_PATH = "/webhooks/slack"
ACCEPTED = b'"status":"accepted"'


# ---------------------------------------------------------------------------- the baseline


def baseline_app() -> Any:
    """A bare FastAPI app: one `POST /` answering 200 with an empty body."""
    from fastapi import FastAPI
    from fastapi.responses import Response

    api = FastAPI()

    @api.post("/")
    async def accept() -> Response:
        return Response(status_code=200)

    return api


def serve_baseline(port: int) -> None:
    import uvicorn

    # The call `seatwire ingress` makes (workers/cli/__init__.py), with this app and uvicorn's own
    # access formatter (Seatwire's writes the same lines for less: workers/ingress/logs.py).
    uvicorn.run(baseline_app(), host=HOST, port=port, log_level="info")


# ---------------------------------------------------------------------------- requests


@dataclass
class Signed:
    body: bytes
    headers: dict[str, str]


class Envelopes:
    """Slack `message` envelopes with an event_id, ts and client_msg_id never used before in
    this run, signed as Slack signs them at build time."""

    def __init__(self) -> None:
        self.template: dict[str, Any] = json.loads(FIXTURE.read_text())
        self.epoch = int(time.time()) - 60
        self.seq = 0

    def build(self, n: int) -> list[Signed]:
        from pipeline.signatures import slack_headers

        envelope = self.template
        event = envelope["event"]
        now_s = int(time.time())
        out = []
        for _ in range(n):
            self.seq += 1
            seq = self.seq
            ts = f"{self.epoch + seq // 1_000_000}.{seq % 1_000_000:06d}"
            event["ts"] = event["event_ts"] = ts
            event["client_msg_id"] = f"5b1f5c3e-8f0e-4c8f-9d7a-{seq:012x}"
            envelope["event_id"] = f"Ev0B{seq:08d}"
            envelope["event_time"] = now_s
            body = json.dumps(envelope, separators=(",", ":")).encode()
            headers = {
                "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
                **slack_headers(body, secret=SECRET, now_s=now_s),
            }
            out.append(Signed(body, headers))
        return out


def render(signed: list[Signed], port: int, path: str) -> list[bytes]:
    """Each request as the bytes an HTTP/1.1 keep-alive client sends."""
    out = []
    for s in signed:
        head = [f"POST {path} HTTP/1.1", f"Host: {HOST}:{port}"]
        head += [f"{k}: {v}" for k, v in s.headers.items()]
        head.append(f"Content-Length: {len(s.body)}")
        out.append(("\r\n".join(head) + "\r\n\r\n").encode() + s.body)
    return out


# ---------------------------------------------------------------------------- client


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(HOST, port)
        return cls(reader, writer)

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        """Send one request, read its whole answer: (status, body)."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        lower = head.lower()
        at = lower.find(b"\r\ncontent-length:")
        if at < 0:
            raise RuntimeError(f"answer without Content-Length: {head[:200]!r}")
        end = lower.index(b"\r\n", at + 2)
        size = int(lower[at + 17 : end])
        body = await self.reader.readexactly(size) if size else b""
        return status, body

    def close(self) -> None:
        self.writer.close()


def ok(status: int, body: bytes, expect: bytes | None) -> bool:
    return 200 <= status < 300 and (expect is None or expect in body)


@dataclass
class Closed:
    side: str
    accepted: int  # 2xx answers (and `accepted`, for Seatwire) inside the window
    window_s: float
    total_ok: int  # including the warm-up
    refused: Counter[str]
    client_cores: float
    server_cores: float
    redis_cores: float
    exhausted: bool
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def per_s(self) -> float:
        return self.accepted / self.window_s


async def closed_loop(
    port: int, requests: list[bytes], *, concurrency: int, seconds: float, expect: bytes | None
) -> tuple[list[float], Counter[str], float, bool]:
    """Keep `concurrency` requests in flight for `seconds` (or until `requests` run out):
    the completion time of every good answer, the refusals, the start, whether they ran out."""
    pending = iter(requests)
    done_at: list[float] = []
    refused: Counter[str] = Counter()
    stop = False

    async def connection() -> None:
        conn = await Connection.open(port)
        try:
            for request in pending:
                status, body = await conn.exchange(request)
                if ok(status, body, expect):
                    done_at.append(time.perf_counter())
                else:
                    refused[f"{status} {body[:80].decode(errors='replace')}"] += 1
                if stop:
                    return
        finally:
            conn.close()

    t0 = time.perf_counter()
    tasks = [asyncio.create_task(connection()) for _ in range(concurrency)]
    finished, _ = await asyncio.wait(tasks, timeout=seconds)
    exhausted = len(finished) == len(tasks)
    stop = True
    for t in await asyncio.gather(*tasks, return_exceptions=True):
        if isinstance(t, BaseException):
            raise t
    return done_at, refused, t0, exhausted


@dataclass
class Open:
    rate: float
    latencies_ms: list[float]
    start_lag_ms: list[float]  # how late the generator sent each request (its own delay)
    refused: Counter[str]
    opened: int  # connections opened because none was idle
    server_cores: float

    def pct(self, p: float) -> float:
        v = sorted(self.latencies_ms)
        return v[min(len(v) - 1, round(p / 100 * (len(v) - 1)))]


async def open_loop(
    port: int, requests: list[bytes], *, rate: float, expect: bytes | None, idle_conns: int
) -> tuple[list[float], list[float], Counter[str], int]:
    """Start request i at t0 + i/rate, whatever the answers before it are doing."""
    # (connection, when it was last used); a connection idle longer than KEEPALIVE_EXPIRY_S is
    # dropped before reuse, as an HTTP client does: uvicorn closes idle ones after 5 s.
    idle = [(await Connection.open(port), time.perf_counter()) for _ in range(idle_conns)]
    latencies: list[float] = []
    lags: list[float] = []
    refused: Counter[str] = Counter()
    opened = 0

    async def one(request: bytes, due: float) -> None:
        nonlocal opened
        conn = None
        while idle and conn is None:
            conn, used = idle.pop()
            if time.perf_counter() - used > KEEPALIVE_EXPIRY_S:
                conn.close()
                conn = None
        if conn is None:
            opened += 1
            conn = await Connection.open(port)
        lags.append(time.perf_counter() - due)
        status, body = await conn.exchange(request)
        latencies.append(time.perf_counter() - due)
        if not ok(status, body, expect):
            refused[f"{status} {body[:80].decode(errors='replace')}"] += 1
        idle.append((conn, time.perf_counter()))

    tasks = []
    t0 = time.perf_counter() + 0.05
    for i, request in enumerate(requests):
        due = t0 + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(request, due)))
    for t in await asyncio.gather(*tasks, return_exceptions=True):
        if isinstance(t, BaseException):
            raise t
    for conn, _used in idle:
        conn.close()
    return [1e3 * x for x in latencies], [1e3 * x for x in lags], refused, opened


# ---------------------------------------------------------------------------- runs


@dataclass
class Side:
    """One side of a round: its server, its requests, and what its slices measured."""

    name: str
    workers: Workers
    port: int
    requests: list[bytes]
    expect: bytes | None
    sent: int = 0  # requests used so far (a request is never sent twice)
    accepted: int = 0
    window_s: float = 0.0
    total_ok: int = 0
    server_cpu_s: float = 0.0
    redis_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    refused: Counter[str] = field(default_factory=Counter)
    exhausted: bool = False


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        import redis

        self.args = args
        self.tmp = tmp
        self.r = redis.Redis.from_url(args.redis_url)
        self.registry: list[Workers] = []
        self.envelopes = Envelopes()
        self.env = {
            **os.environ,
            "SEATWIRE_REDIS_URL": args.redis_url,
            "SEATWIRE_API_TOKEN": "x",
            "SLACK_SIGNING_SECRET": SECRET,
            "SEATWIRE_OUTBOX_PATH": str(tmp / "outbox.jsonl"),
            "PYTHONUNBUFFERED": "1",
        }
        for k in ("SEATWIRE_BROKER_URL", "SEATWIRE_ORG_FILE", "SEATWIRE_SLACK_SIGNING_SECRET"):
            self.env.pop(k, None)
        self.runs = 0

    @contextlib.contextmanager
    def server(self, side: str) -> Iterator[tuple[Workers, int]]:
        from workers.embedded import free_port

        self.runs += 1
        port = free_port()
        if side == "seatwire":
            seatwire = str(Path(sys.executable).parent / "seatwire")
            argv = [seatwire, "ingress", "--host", HOST, "--port", str(port)]
        else:
            argv = [sys.executable, "-m", "bench.ingress", "--serve-baseline", str(port)]
        log = self.tmp / f"{side}-{self.runs}.log"
        w = Workers.start(side, argv, self.env, log)
        self.registry.append(w)
        try:
            deadline = time.monotonic() + 60
            while b"Uvicorn running on" not in log.read_bytes():
                if w.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{side} did not start:\n{w.tail()}")
                time.sleep(0.05)
            yield w, port
        finally:
            w.stop()
            self.registry.remove(w)

    def requests(self, n: int) -> list[Signed]:
        signed = self.envelopes.build(n)
        gc.collect()
        gc.freeze()  # the pre-built requests are never garbage: keep the collector off them
        return signed

    def _slice(self, side: Side, seconds: float, *, measured: bool) -> None:
        """One closed-loop slice on one side; counted when `measured`."""
        if side.exhausted:
            return
        cpu0 = (side.workers.cpu_s(), redis_cpu_s(self.r), self_cpu_s())
        done_at, refused, t0, exhausted = asyncio.run(
            closed_loop(
                side.port,
                side.requests[side.sent :],
                concurrency=self.args.concurrency,
                seconds=seconds,
                expect=side.expect,
            )
        )
        side.sent += len(done_at) + sum(refused.values())
        side.total_ok += len(done_at)
        side.refused += refused
        side.exhausted = exhausted
        if not measured:
            return
        # Requests ran out: the window ends with the last answer (the side stops there).
        end = (done_at[-1] if done_at else t0) if exhausted else t0 + seconds
        side.accepted += sum(1 for x in done_at if x <= end)
        side.window_s += end - t0
        side.server_cpu_s += side.workers.cpu_s() - cpu0[0]
        side.redis_cpu_s += redis_cpu_s(self.r) - cpu0[1]
        side.client_cpu_s += self_cpu_s() - cpu0[2]

    def closed_round(self, rnd: int, signed: list[Signed]) -> dict[str, Closed]:
        """Both servers up at once; measured slices alternate between them."""
        a = self.args
        order = ["baseline", "seatwire"] if rnd % 2 else ["seatwire", "baseline"]
        self.r.flushdb()
        with contextlib.ExitStack() as stack:
            sides = {}
            for name in order:
                w, port = stack.enter_context(self.server(name))
                path, expect = (SEATWIRE_PATH, ACCEPTED) if name == "seatwire" else ("/", None)
                sides[name] = Side(name, w, port, render(signed, port, path), expect)
            for s in sides.values():
                self._slice(s, a.warmup, measured=False)
            r0, me0, busy0 = redis_cpu_s(self.r), self_cpu_s(), busy_cpu_s()
            t0 = time.perf_counter()
            for _ in range(max(1, round(a.seconds / a.slice))):
                for name in order:
                    self._slice(sides[name], a.slice, measured=True)
            wall = time.perf_counter() - t0
            redis_s, me_s = redis_cpu_s(self.r) - r0, self_cpu_s() - me0
            other = busy_cpu_s() - busy0 - redis_s - me_s
            other -= sum(s.server_cpu_s for s in sides.values())
            check = self._check(sides["seatwire"].total_ok)
        return {
            name: Closed(
                side=name,
                accepted=s.accepted,
                window_s=s.window_s,
                total_ok=s.total_ok,
                refused=s.refused,
                client_cores=s.client_cpu_s / s.window_s,
                server_cores=s.server_cpu_s / s.window_s,
                redis_cores=s.redis_cpu_s / s.window_s,
                exhausted=s.exhausted,
                extra={"other_cores": other / wall, **(check if name == "seatwire" else {})},
            )
            for name, s in sides.items()
        }

    def open(self, rate: float) -> Open:
        a = self.args
        warm = self.requests(max(50, int(rate)))
        signed = self.requests(int(rate * a.open_seconds))
        self.r.flushdb()
        with self.server("seatwire") as (w, port):
            asyncio.run(
                closed_loop(
                    port,
                    render(warm, port, SEATWIRE_PATH),
                    concurrency=4,
                    seconds=30,
                    expect=ACCEPTED,
                )
            )
            cpu0 = w.cpu_s()
            t0 = time.perf_counter()
            latencies, lags, refused, opened = asyncio.run(
                open_loop(
                    port,
                    render(signed, port, SEATWIRE_PATH),
                    rate=rate,
                    expect=ACCEPTED,
                    idle_conns=a.open_connections,
                )
            )
            cores = (w.cpu_s() - cpu0) / (time.perf_counter() - t0)
            self._check(len(warm) + len(signed) - sum(refused.values()))
        return Open(rate, latencies, lags, refused, opened, cores)

    def _check(self, accepted: int) -> dict[str, Any]:
        """One journal entry and one queued directedness task per accepted request."""
        from workers.stores import keys

        queued = int(self.r.llen("directedness"))
        journalled = int(self.r.zcard(keys.JOURNAL_OPEN))
        if queued != accepted or journalled != accepted:
            raise RuntimeError(
                f"{accepted} requests accepted, but {journalled} journal entries are open and "
                f"{queued} directedness tasks are queued"
            )
        return {"queued": queued, "journalled": journalled}

    def stop_all(self) -> None:
        for w in list(self.registry):
            w.stop()


# ---------------------------------------------------------------------------- split


def split(args: argparse.Namespace, n: int) -> int:
    """CPU per step of what the Slack route does for one new event, in-process, no HTTP."""
    from contracts.messages import InboundEnvelope
    from pipeline.normalise.slack import normalise_slack
    from pipeline.signatures import verify_slack
    from workers.bootstrap import build_container, now_ms
    from workers.broker import INGRESS_PUBLISH_RETRY, publish
    from workers.celery_app import create_app
    from workers.queues import Task
    from workers.settings import Settings
    from workers.stores.inbound import inbound_tracking_id

    os.environ.update(
        {
            "SEATWIRE_REDIS_URL": args.redis_url,
            "SEATWIRE_API_TOKEN": "x",
            "SLACK_SIGNING_SECRET": SECRET,
            "SEATWIRE_OUTBOX_PATH": str(Path(tempfile.gettempdir()) / "seatwire-split.jsonl"),
        }
    )
    settings = Settings()
    app = create_app(settings, register=False)
    c = build_container(settings, app=app)
    c.redis.flushdb()
    signed = Envelopes().build(n + 200)
    steps = ("verify", "json.loads", "normalise", "envelope", "accept", "publish", "mark")
    cpu = dict.fromkeys(steps, 0.0)
    wall = dict.fromkeys(steps, 0.0)

    def timed(step: str, fn: Any, *a: Any, **kw: Any) -> Any:
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn(*a, **kw)
        cpu[step] += time.process_time() - c0
        wall[step] += time.perf_counter() - w0
        return out

    def message(candidate: Any, tracking: str) -> dict[str, Any]:
        env = InboundEnvelope(tracking_id=tracking, accepted_at_ms=now_ms(), candidate=candidate)
        return env.to_wire()

    for i, s in enumerate(signed):
        if i == 200:  # warm-up done
            for d in (cpu, wall):
                d.update(dict.fromkeys(steps, 0.0))
        headers = {k.lower(): v for k, v in s.headers.items()}
        timed("verify", verify_slack, headers, s.body, secret=SECRET, now_s=int(time.time()))
        body = timed("json.loads", json.loads, s.body)
        candidate = timed("normalise", normalise_slack, body, received_at_ms=now_ms())
        tracking = inbound_tracking_id(candidate.delivery_id)
        msg = timed("envelope", message, candidate, tracking)
        payload = json.dumps(msg)
        timed(
            "accept",
            c.journal.accept,
            tracking,
            kind="inbound",
            seat_id="",
            payload=payload,
            now_ms=now_ms(),
            fingerprint="",
        )
        timed(
            "publish",
            publish,
            app,
            Task.DIRECTEDNESS,
            tracking,
            msg,
            retry_policy=INGRESS_PUBLISH_RETRY,
        )
        timed("mark", c.journal.mark_enqueued, tracking, now_ms())
    c.redis.flushdb()
    app.close()
    print(f"bench.ingress --split: {n} new Slack events, in-process, no HTTP (µs per event)")
    print(f"  {'step':<12}{'CPU':>8}{'wall':>8}")
    for step in steps:
        print(f"  {step:<12}{1e6 * cpu[step] / n:>8.0f}{1e6 * wall[step] / n:>8.0f}")
    print(f"  {'all':<12}{1e6 * sum(cpu.values()) / n:>8.0f}{1e6 * sum(wall.values()) / n:>8.0f}")
    return 0


# ---------------------------------------------------------------------------- report


def closed_line(c: Closed) -> str:
    refused = f"  NOT OK: {dict(c.refused)}" if c.refused else ""
    short = "  (requests ran out: window shortened)" if c.exhausted else ""
    return (
        f"{c.side:<9} {c.per_s:>7.0f}/s  ({c.accepted} in {c.window_s:.2f} s)  cores: server "
        f"{c.server_cores:.2f}, redis {c.redis_cores:.2f}, client {c.client_cores:.2f}; "
        f"server CPU {1e3 * c.server_cores * c.window_s / max(1, c.accepted):.2f} ms/req"
        f"{refused}{short}"
    )


def open_line(o: Open) -> str:
    n = len(o.latencies_ms)
    refused = f"  NOT OK: {dict(o.refused)}" if o.refused else "  all 200 accepted"
    return (
        f"{n} requests at {o.rate:.0f}/s: latency ms p50 {o.pct(50):.1f}  p90 {o.pct(90):.1f}  "
        f"p99 {o.pct(99):.1f}  max {max(o.latencies_ms):.1f}; start lag p99 "
        f"{sorted(o.start_lag_ms)[int(0.99 * (n - 1))]:.1f} ms; server {o.server_cores:.2f} "
        f"cores; {o.opened} extra connections{refused}"
    )


def main(argv: list[str] | None = None) -> int:
    stop_cleanly_on_sigterm()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--redis-url",
        default="redis://127.0.0.1:6379/14",
        help="a database of its own: it is FLUSHED before every run",
    )
    ap.add_argument("--rounds", type=int, default=5, help="closed-loop rounds (both sides each)")
    ap.add_argument("--seconds", type=float, default=5, help="measured seconds per side and round")
    ap.add_argument("--slice", type=float, default=1, help="the sides alternate every SLICE s")
    ap.add_argument("--warmup", type=float, default=1, help="unmeasured seconds per side first")
    ap.add_argument("--concurrency", type=int, default=32, help="closed-loop connections")
    ap.add_argument("--open-rounds", type=int, default=2, help="open-loop runs at half max")
    ap.add_argument("--open-seconds", type=float, default=10)
    ap.add_argument("--open-connections", type=int, default=32, help="opened before the run")
    ap.add_argument("--rate", type=float, help="open-loop rate (default: half the median max)")
    ap.add_argument("--keep-logs", action="store_true")
    ap.add_argument("--json", type=Path, help="write every result here as JSON")
    ap.add_argument(
        "--split", type=int, metavar="N", help="CPU per step of N events in-process, then exit"
    )
    ap.add_argument("--serve-baseline", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve_baseline:
        serve_baseline(args.serve_baseline)
        return 0
    if args.split:
        return split(args, args.split)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = Path(tempfile.mkdtemp(prefix="seatwire-bench-ingress-"))
    bench = Bench(args, tmp)
    print(
        f"bench.ingress: {args.rounds} rounds x ({args.warmup:g} + {args.seconds:g} s) closed "
        f"loop at {args.concurrency} connections, then {args.open_rounds} x "
        f"{args.open_seconds:g} s open loop; {os.cpu_count()} CPUs, Redis {args.redis_url} "
        f"(flushed per run), logs in {tmp}",
        flush=True,
    )
    rounds: list[tuple[Closed, Closed]] = []
    opens: list[Open] = []
    guess = 6000.0  # requests/s to pre-build for, before anything is measured
    try:
        for rnd in range(1, args.rounds + 1):
            n = int(1.3 * guess * (args.warmup + args.seconds)) + 4 * args.concurrency
            signed = bench.requests(n)
            got = bench.closed_round(rnd, signed)
            del signed
            gc.unfreeze()
            base, sw = got["baseline"], got["seatwire"]
            rounds.append((base, sw))
            guess = max(base.per_s, sw.per_s)
            for c in got.values():
                print(f"round {rnd}  {closed_line(c)}", flush=True)
            print(
                f"round {rnd}  ratio seatwire/baseline {sw.per_s / base.per_s:.3f}  (other load "
                f"on the machine {base.extra['other_cores']:.2f} cores)",
                flush=True,
            )
        med_sw = statistics.median(sw.per_s for _, sw in rounds)
        rate = args.rate or med_sw / 2
        for rnd in range(1, args.open_rounds + 1):
            o = bench.open(rate)
            gc.unfreeze()
            opens.append(o)
            print(f"open {rnd}   {open_line(o)}", flush=True)
    finally:
        bench.stop_all()
        bench.r.flushdb()

    ratios = [sw.per_s / base.per_s for base, sw in rounds]
    med_base = statistics.median(base.per_s for base, _ in rounds)
    print("\nmedians over rounds:")
    print(f"  baseline {med_base:>8.0f}/s   seatwire {med_sw:>8.0f}/s")
    verdict = "MET" if statistics.median(ratios) >= 0.5 else "NOT MET"
    print(
        f"  ratio seatwire/baseline: median {statistics.median(ratios):.3f} "
        f"(rounds: {', '.join(f'{x:.3f}' for x in ratios)}) target >= 0.5: {verdict}"
    )
    if opens:
        pooled = Open(
            rate,
            [x for o in opens for x in o.latencies_ms],
            [x for o in opens for x in o.start_lag_ms],
            sum((o.refused for o in opens), Counter()),
            sum(o.opened for o in opens),
            statistics.fmean(o.server_cores for o in opens),
        )
        verdict = "MET" if pooled.pct(99) < 50 and not pooled.refused else "NOT MET"
        print(f"  open loop, all runs: {open_line(pooled)}")
        print(f"  p99 < 50 ms at half max: {verdict}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "closed": [
                        {
                            "round": i + 1,
                            "ratio": sw.per_s / base.per_s,
                            **{
                                c.side: {
                                    "per_s": c.per_s,
                                    "accepted": c.accepted,
                                    "window_s": c.window_s,
                                    "server_cores": c.server_cores,
                                    "redis_cores": c.redis_cores,
                                    "client_cores": c.client_cores,
                                    "refused": dict(c.refused),
                                }
                                for c in (base, sw)
                            },
                        }
                        for i, (base, sw) in enumerate(rounds)
                    ],
                    "open": [
                        {
                            "rate": o.rate,
                            "n": len(o.latencies_ms),
                            "p50_ms": o.pct(50),
                            "p99_ms": o.pct(99),
                            "max_ms": max(o.latencies_ms),
                            "refused": dict(o.refused),
                        }
                        for o in opens
                    ],
                },
                indent=2,
            )
        )
    if not args.keep_logs:
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
