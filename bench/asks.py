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
from pathlib import Path
from typing import Any

from bench.capacity import bound, delta, survey
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


def main(argv: list[str] | None = None) -> int:
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/14", help="FLUSHED")
    ap.add_argument("--asks", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = {"memory": memory(args, Path(tmp)), "round_trips": round_trips(args, Path(tmp))}
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
