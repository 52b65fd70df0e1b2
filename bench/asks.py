"""The answer loop's figures: Redis memory per ask kept, Redis round trips per answer, and the
answer path's latency (a signed Slack click to the seat's inbox item) against a running
`seatwire ingress` process, as a ratio to a signed Slack event's accept on the same process.

    uv run python -m bench.asks [--asks 2000] [--clicks 2000] [--concurrency 8]

The database (`--redis-url`, default db 14) is FLUSHED at the start and at the end.

Memory: `--asks` engaged decisions of the bundled scenario's kinds (a consent, a blocked
report, a review), with the words the engagement stage composed, are recorded as the send
stage records them (`record_ask`), landed (`settle_ask`), and answered (`Answers.answer`:
an approval for each consent, so each keeps a consent record). The seat then acknowledges its
inbox, as a running seat does. Every `sw:` key is measured with `MEMORY USAGE ... SAMPLES 0`
(bench/capacity.py `survey`), by family, with its bound.

Round trips: `Answers.answer` of one click's answer counted on the client (a pipeline is one
round trip), and one whole click request through the ingress app in-process.

Latency: asks recorded and landed in-process as above, then one `seatwire ingress` process
answers `--clicks` signed `block_actions` clicks (form-encoded, as Slack posts them) from
`--concurrency` keep-alive connections, each click a new ask; after each answer the seat's
inbox must hold the item (checked for every click at the end: one `ask_answered` item per
click, none twice). The reference: the same number of signed Slack `message` events on
`/webhooks/slack`, the route every inbound event takes, on the same process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.capacity import bound, delta, survey
from bench.ingress import SECRET
from bench.stages import RoundTrips

SEAT = "scout"
NOW = 1_800_000_000_000
REPORTS: tuple[dict[str, Any], ...] = (
    {
        "id": "drop-legacy",
        "title": "Drop the legacy invoices table",
        "summary": "The table is 40 GB and unused since the March migration.",
        "scope": "billing database",
        "risk": {"irreversible": True},
        "approverId": "ben",
        "question": "May I drop it tonight?",
    },
    {
        "id": "billing-migration",
        "title": "Migrate the billing tables",
        "state": "blocked",
        "scope": "billing database",
        "blocker": {"kind": "access", "detail": "no write access to the billing replica"},
        "selfServeExhausted": True,
    },
    {
        "id": "release-notes",
        "title": "Release notes for 4.2",
        "review": {"required": True, "kind": "security", "scope": "security review"},
    },
)


def _settings(url: str, tmp: Path) -> Any:
    from workers.settings import Settings

    return Settings(redis_url=url, outbox_path=tmp / "outbox.jsonl", api_token="x")


def _decisions(container: Any, n: int) -> list[Any]:
    """n engaging decisions as the engagement stage plans them, each with its own work id."""
    from contracts.work import WorkReport
    from pipeline.engagement import EngagementContext, plan_engagement

    view, _ = container.org.current()
    seat = view.seat(SEAT)
    ctx = EngagementContext(
        me=seat.member_id,
        directory=view.directory,
        channels=view.rooms,
        supervisor_id=seat.supervisor_id,
        now_ms=NOW,
    )
    out = []
    for i in range(n):
        base = REPORTS[i % len(REPORTS)]
        report = WorkReport.model_validate({**base, "id": f"{base['id']}-{i}"})
        plan = plan_engagement(report, ctx)
        assert plan.engage, plan.reason_code
        out.append((report, plan.model_copy(update={"attempt": 1})))
    return out


def record_landed(container: Any, n: int) -> list[Any]:
    """n asks recorded and landed as the send stage does, on channel D-<i>, message <i>."""
    from contracts.guardrails import GuardrailVerdict
    from contracts.messages import ReservedEnvelope, SendResult, WorkEnvelope
    from pipeline.asks import asking_of
    from workers.stages.send_ask import ask_of, record_ask, settle_ask

    landed = []
    for i, (report, decision) in enumerate(_decisions(container, n)):
        env = ReservedEnvelope(
            tracking_id=f"t-{i}",
            seat_id=SEAT,
            decision=decision,
            asking=asking_of(
                WorkEnvelope(tracking_id=f"t-{i}", seat_id=SEAT, accepted_at_ms=NOW, report=report)
            ),
            verdict=GuardrailVerdict(allowed=True, attempt=1),
        )
        ask = ask_of(env, env.verdict)
        record = record_ask(container.asks, env, ask, timeouts={}, now_ms=NOW)
        done = settle_ask(
            container.asks,
            record.id,
            outcome="engaged",
            adapter="slack",
            now_ms=NOW + 1,
            result=SendResult(channel_id=f"D-{i}", message_id=f"{1_700_000_000 + i}.000100"),
            known=record,
        )
        landed.append(done)
    return landed


def memory(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import redis

    from contracts.asks import AnswerVerb
    from pipeline.asks import AnswerIn
    from workers.bootstrap import build_container
    from workers.stages.answers import Answers

    r = redis.Redis.from_url(args.redis_url)
    r.flushdb()
    container = build_container(_settings(args.redis_url, tmp), client=r)
    before = survey(r)
    asks = record_landed(container, args.asks)
    answers = Answers(container)
    for i, ask in enumerate(asks):
        verb: AnswerVerb = "approved" if ask.is_consent else "done"
        answers.answer(
            ask.id, AnswerIn(verb, ask.targets[0].member_id, "slack_button"), now_ms=NOW + 9 + i
        )
    page = container.inbox.updates(SEAT)
    while page.items:
        page = container.inbox.ack(SEAT, page.position)
    families = delta(survey(r), before)
    total = sum(f.bytes for f in families.values())
    ask_families = {k: v for k, v in families.items() if "ask" in k or "consent" in k}
    ask_bytes = sum(f.bytes for f in ask_families.values())
    r.flushdb()
    return {
        "asks": args.asks,
        "bytes_per_ask": round(ask_bytes / args.asks),
        "all_sw_bytes_per_ask": round(total / args.asks),
        "families": {
            k: {"keys": f.keys, "bytes_per_ask": round(f.bytes / args.asks, 1), "bound": bound(f)}
            for k, f in sorted(families.items(), key=lambda kv: -kv[1].bytes)
        },
    }


def round_trips(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import redis

    from pipeline.asks import AnswerIn
    from workers.bootstrap import build_container
    from workers.stages.answers import Answers

    r = redis.Redis.from_url(args.redis_url)
    r.flushdb()
    container = build_container(_settings(args.redis_url, tmp), client=r)
    asks = record_landed(container, 50)
    answers = Answers(container)
    counter = RoundTrips()
    counts = []
    for i, ask in enumerate(asks):
        start = counter.n
        answers.answer(ask.id, AnswerIn("done", ask.targets[0].member_id, "api"), now_ms=NOW + i)
        counts.append(counter.n - start)
    late = counter.n
    answers.answer(asks[0].id, AnswerIn("done", "ava", "api"), now_ms=NOW + 99)
    r.flushdb()
    return {
        "answer_round_trips": statistics.median(counts),
        "late_answer_round_trips": counter.n - late,
    }


def _start(name: str, argv: list[str], env: dict[str, str], tmp: Path, ready: bytes) -> Any:
    from bench.pipeline import Workers

    w = Workers.start(name, argv, env, tmp / f"{name}.log")
    deadline = time.monotonic() + 60
    while ready not in w.log.read_bytes():
        if w.proc.poll() is not None or time.monotonic() > deadline:
            w.stop()
            raise RuntimeError(f"{name} did not start:\n{w.tail()}")
        time.sleep(0.05)
    return w


def _click_body(ask: Any, user: str) -> tuple[bytes, dict[str, str]]:
    from urllib.parse import urlencode

    from pipeline.signatures import slack_headers

    landing = ask.landing
    payload = {
        "type": "block_actions",
        "user": {"id": user, "team_id": "T0BENCH"},
        "team": {"id": "T0BENCH"},
        "api_app_id": "A0BENCH",
        "container": {
            "type": "message",
            "message_ts": landing.message_id,
            "channel_id": landing.channel_id,
        },
        "channel": {"id": landing.channel_id},
        "message": {"ts": landing.message_id},
        "actions": [
            {
                "type": "button",
                "block_id": f"seatwire_ask:{ask.id}",
                "action_id": "seatwire_answer:done"
                if not ask.is_consent
                else "seatwire_answer:approved",
                "value": f"{ask.id}|{'approved' if ask.is_consent else 'done'}",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    headers = {
        **slack_headers(body, secret=SECRET, now_s=int(time.time())),
        "Content-Type": "application/x-www-form-urlencoded",
    }
    return body, headers


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else 0.0


async def _closed_loop(
    port: int, requests: list[tuple[str, bytes, dict[str, str]]], concurrency: int
) -> tuple[list[float], list[int]]:
    """Each request on one of `concurrency` keep-alive connections, the next as soon as the
    last answered; per request its latency (ms) and status."""
    import asyncio

    import httpx

    queue = list(reversed(requests))
    lat: list[float] = []
    status: list[int] = []

    async def conn() -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
            while queue:
                path, body, headers = queue.pop()
                t0 = time.perf_counter()
                resp = await c.post(path, content=body, headers=headers)
                lat.append((time.perf_counter() - t0) * 1000)
                status.append(resp.status_code)

    await asyncio.gather(*(conn() for _ in range(concurrency)))
    return lat, status


def latency(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Signed clicks answered by one `seatwire ingress` process (each a new ask), then as
    many signed Slack events on the same process: p50/p99 of each, and their ratio."""
    import asyncio
    import os

    import redis

    from bench.ingress import Envelopes
    from workers.bootstrap import build_container
    from workers.embedded import free_port
    from workers.outbound.slack import slack_user_id

    r = redis.Redis.from_url(args.redis_url)
    r.flushdb()
    container = build_container(_settings(args.redis_url, tmp), client=r)
    asks = record_landed(container, args.clicks)
    view, _ = container.org.current()
    users = {}
    for ask in asks:
        member = view.member(ask.targets[0].member_id)
        users[ask.id] = slack_user_id(member.aliases) if member is not None else None
    port = free_port()
    env = {
        **os.environ,
        "SEATWIRE_REDIS_URL": args.redis_url,
        "SEATWIRE_API_TOKEN": "x",
        "SLACK_SIGNING_SECRET": SECRET,
        "SEATWIRE_OUTBOX_PATH": str(tmp / "outbox.jsonl"),
        "PYTHONUNBUFFERED": "1",
    }
    for k in ("SEATWIRE_BROKER_URL", "SEATWIRE_ORG_FILE", "SEATWIRE_SLACK_SIGNING_SECRET"):
        env.pop(k, None)
    seatwire = str(Path(sys.executable).parent / "seatwire")
    argv = [seatwire, "ingress", "--host", "127.0.0.1", "--port", str(port)]
    ingress = _start("ingress", argv, env, tmp, b"Uvicorn running on")
    try:
        clicks = [
            ("/webhooks/slack/interactions", *_click_body(a, users[a.id] or "")) for a in asks
        ]
        warm = clicks[: max(1, len(clicks) // 10)]
        asyncio.run(_closed_loop(port, warm, args.concurrency))
        click_ms, click_status = asyncio.run(
            _closed_loop(port, clicks[len(warm) :], args.concurrency)
        )
        events = [
            ("/webhooks/slack", s.body, dict(s.headers))
            for s in Envelopes().build(len(clicks) - len(warm))
        ]
        event_ms, event_status = asyncio.run(_closed_loop(port, events, args.concurrency))
    finally:
        ingress.stop()
    answered = sum(1 for a in container.asks.many([a.id for a in asks]) if a.state == "answered")
    items = r.xlen(f"sw:inbox:{SEAT}")
    r.flushdb()
    return {
        "clicks": len(click_ms),
        "concurrency": args.concurrency,
        "click_p50_ms": round(_pct(click_ms, 50), 2),
        "click_p99_ms": round(_pct(click_ms, 99), 2),
        "click_per_s": round(len(click_ms) / (sum(click_ms) / 1000 / args.concurrency), 1),
        "event_p50_ms": round(_pct(event_ms, 50), 2),
        "event_p99_ms": round(_pct(event_ms, 99), 2),
        "ratio_p50": round(_pct(click_ms, 50) / max(_pct(event_ms, 50), 1e-9), 2),
        "ratio_p99": round(_pct(click_ms, 99) / max(_pct(event_ms, 99), 1e-9), 2),
        "statuses": sorted({*click_status, *event_status}),
        "answered": answered,
        "inbox_items": items,
    }


def main(argv: list[str] | None = None) -> int:
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/14", help="FLUSHED")
    ap.add_argument("--asks", type=int, default=2000)
    ap.add_argument("--clicks", type=int, default=2000, help="0: no latency run")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = {"memory": memory(args, Path(tmp)), "round_trips": round_trips(args, Path(tmp))}
        if args.clicks:
            out["latency"] = latency(args, Path(tmp))
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    m, rt = out["memory"], out["round_trips"]
    print(f"bench.asks on {args.redis_url}")
    print(f"  memory: {m['bytes_per_ask']} B per ask kept (answered; {m['asks']} asks)")
    for name, f in m["families"].items():
        print(f"    {name:<28} {f['bytes_per_ask']:>8} B/ask  {f['keys']:>6} keys  {f['bound']}")
    print(
        f"  round trips per answer: {rt['answer_round_trips']} "
        f"(a late answer: {rt['late_answer_round_trips']})"
    )
    lat = out.get("latency")
    if lat:
        print(
            f"  signed click -> inbox item, one ingress process, {lat['concurrency']} "
            f"connections:\n    p50 {lat['click_p50_ms']} ms, p99 {lat['click_p99_ms']} ms "
            f"({lat['clicks']} clicks timed; {lat['answered']} asks answered, "
            f"{lat['inbox_items']} inbox items)"
        )
        print(
            f"  a signed Slack event's accept, same process: p50 {lat['event_p50_ms']} ms, "
            f"p99 {lat['event_p99_ms']} ms"
        )
        print(
            f"  ratio click/event: p50 x{lat['ratio_p50']}, p99 x{lat['ratio_p99']}; "
            f"statuses {lat['statuses']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
