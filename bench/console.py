"""How long the console's pages take to render at 1,000 seats and 100,000 ledger rows (issue 28):
each page requested in-process through the ingress app (`create_ingress`, as `seatwire
ingress` builds it, on a real Redis), logged in as the operator, and timed from the request to
its 200 (the reads, the rendering, the headers).

    uv run python -m bench.console [--seats 1000] [--rows 100000] [--asks 2000]
        [--letters 100] [--repeat 20] [--warmup 3] [--redis-url redis://127.0.0.1:6379/13]
        [--json FILE]

The database is **FLUSHED** at the start and at the end. What is on it:

- the org: bench.directedness's synthetic org with `--seats` seats (its ~1,000 people);
- every seat's work-controller record, one in a hundred stopped after three failures;
- `--rows` ledger rows spread evenly over the seats' streams, each recorded at its time (one
  row a minute per seat going back from now; outcomes and reason codes from a fixed mix;
  each of 200 people a target of about one row in 200 at every minute);
- `--asks` asks recorded and landed (tests' `make_ask` shape), each to one of 50 people;
- `--letters` dead letters.

Pages: the overview, the seats, one seat, the asks, the ledger's first page, the ledger
filtered to one person, its sixth page (five Older links on), one ledger row, the dead
letters, the steward, and My asks (reached by an answer link). p50, p95 and max per page
over `--repeat` requests after `--warmup`; the load (`/proc/loadavg`) before and after.
Nothing here is imported by `workers/`.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

TOKEN = "bench-console-operator"
SECRET = "bench-console-link-secret-0123456789"
NOW = int(time.time() * 1000)
OUTCOMES = ("engaged", "engaged", "engaged", "none", "rate_limited_target", "send_blocked")
REASONS = ("blocked_on_other:access", "needs_consent:deploy", "review:pr", "ambient")


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def seed(r: redis.Redis, container: Any, seats: list[str], people: list[str], args: Any) -> None:
    """Seat records, ledger rows, asks and dead letters, as described above."""
    from contracts import LedgerRow, Target
    from contracts.controller import ControllerState
    from workers.queues import Queue
    from workers.stores import keys
    from workers.stores.dlq import DeadLetters
    from workers.stores.journal import LEDGER_STREAM_CAP, Journal

    for i, seat in enumerate(seats):
        stopped = i % 100 == 0
        state = ControllerState(first=False, failures=3 if stopped else 0, blocked=stopped)
        container.seat_runs.update(
            seat, lambda run, s=state: run.model_copy(update={"controller": s})
        )
    per_seat = max(1, args.rows // len(seats))
    pipe = r.pipeline(transaction=False)
    for i, seat in enumerate(seats):
        for j in range(per_seat):
            n = i * per_seat + j
            row = LedgerRow(
                at_ms=NOW - (per_seat - j) * 60_000 - i,
                seat_id=seat,
                work_id=f"w-{seat}-{j}",
                outcome=OUTCOMES[n % len(OUTCOMES)],
                reason_code=REASONS[n % len(REASONS)],
                targets=(Target(member_id=people[(i * 37 + j * 11) % len(people)]),),
                surface="dm",
                why=(f"row {n} of the bench", "a second line"),
            )
            pipe.xadd(  # recorded at its time, as the stage scripts record a row
                keys.ledger_stream(seat),
                {"row": row.model_dump_json(by_alias=True)},
                id=f"{row.at_ms}-*",
                maxlen=LEDGER_STREAM_CAP,
                approximate=True,
            )
        pipe.sadd(keys.LEDGER_SEATS, seat)
        if len(pipe) > 5_000:
            pipe.execute()
    pipe.execute()
    for i in range(args.asks):
        record_ask(container.asks, seats[i % len(seats)], people[i % 50], i, args.asks)
    journal = Journal(r)
    letters = DeadLetters(r, max_deliveries=1)
    for i in range(args.letters):
        tracking = f"t-bench-letter-{i}"
        message = journalled(journal, tracking, seats[i % len(seats)])
        letters.count_redelivery(tracking, queue=Queue.ENGAGEMENT, message=message, now_ms=NOW)


def record_ask(asks: Any, seat: str, person: str, i: int, n: int) -> None:
    """One ask of `seat` to `person`, recorded and landed (open until its timeout)."""
    from contracts import EngagementDecision, Target
    from contracts.asks import AskLanding
    from pipeline.asks import DEFAULT_TIMEOUTS_MS, landed, new_ask

    at = NOW - (n - i) * 1_000
    decision = EngagementDecision(
        engage=True,
        trigger="blocked_on_other",
        reason_code="blocked_on_other:access",
        reason="a bench ask",
        targets=(Target(member_id=person, rung="explicit"),),
        surface="dm",
        body="Can you grant access to the billing database?",
        work_id=f"bench-work-{i}",
        dedupe_key=f"bench-{i}",
    )
    ask = new_ask(
        decision,
        seat_id=seat,
        tracking_id=f"t-bench-ask-{i}",
        attempt=1,
        now_ms=at,
        timeouts=DEFAULT_TIMEOUTS_MS,
    )
    asks.create(ask)
    landing = AskLanding(adapter="webhook", channel_id="webhook", message_id=f"m-{i}", at_ms=at)
    after = asks.update(ask.id, lambda a: landed(a, landing, now_ms=at))
    asks.link(after)


def journalled(journal: Any, tracking: str, seat: str) -> dict[str, Any]:
    """A work report journalled as the ingress journals it; its message."""
    from contracts.messages import WorkEnvelope
    from contracts.work import WorkReport

    report = {
        "id": f"bench-{tracking}",
        "title": "Migrate the billing tables",
        "state": "blocked",
        "blocker": {"kind": "access"},
        "selfServeExhausted": True,
    }
    env = WorkEnvelope(
        tracking_id=tracking,
        seat_id=seat,
        accepted_at_ms=NOW,
        report=WorkReport.model_validate(report),
    )
    journal.accept(
        tracking,
        kind="work",
        seat_id=seat,
        payload=env.model_dump_json(by_alias=True),
        now_ms=NOW,
        fingerprint="f",
    )
    wire: dict[str, Any] = env.to_wire()
    return wire


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seats", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--asks", type=int, default=2000)
    ap.add_argument("--letters", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from fastapi.testclient import TestClient

    from bench.directedness import write_org
    from workers import bootstrap
    from workers.celery_app import create_app
    from workers.ingress.app import create_ingress
    from workers.settings import Settings
    from workers.stages.links import AnswerLinks

    r = redis.Redis.from_url(args.redis_url)
    r.flushdb()
    try:
        with tempfile.TemporaryDirectory(prefix="seatwire-bench-console-") as tmp:
            org = write_org(Path(tmp), seats=args.seats)
            settings = Settings(
                redis_url=args.redis_url,
                api_token=TOKEN,
                org_file=org.path,
                outbox_path=Path(tmp) / "outbox.jsonl",
                answer_link_secret=SECRET,
                public_url="https://seatwire.example",
            )
            app = create_app(settings, register=False)
            container = bootstrap.build_container(settings, app=app)
            seats = sorted(org.seats)
            view = container.org.current()[0]
            people = sorted(m for m in view.member_by_id if m not in set(seats))[:200]
            started = time.perf_counter()
            seed(r, container, seats, people, args)
            print(
                f"bench.console: {args.seats} seats, {args.rows} ledger rows, {args.asks} asks, "
                f"{args.letters} dead letters on {args.redis_url} "
                f"(seeded in {time.perf_counter() - started:.1f} s); load {loadavg()}"
            )
            links = AnswerLinks.of(settings)
            assert links is not None
            with TestClient(create_ingress(container, app)) as client:
                figures = measure(client, container, links, seats, people, args)
            print(f"load after: {loadavg()}")
    finally:
        r.flushdb()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


def measure(
    client: Any, container: Any, links: Any, seats: list[str], people: list[str], args: Any
) -> list[dict[str, Any]]:
    form = client.get("/console/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf is not None
    done = client.post(
        "/console/login", data={"csrf": csrf.group(1), "token": TOKEN}, follow_redirects=False
    )
    assert done.status_code == 303, done.text
    first = client.get("/console/ledger")
    row = re.search(r'href="(/console/ledger/[^"]+)"', first.text)
    assert row is not None, "no ledger row link on the first page"
    # Five pages back, by the Older links, as a person would page.
    older = "/console/ledger"
    for _ in range(5):
        link = re.search(r'href="\?([^"]*before=[^"]+)" rel="next"', client.get(older).text)
        assert link is not None, "no Older link"
        older = "/console/ledger?" + html.unescape(link.group(1))
    pages = [
        ("overview", "/console/"),
        ("seats", "/console/seats"),
        ("one seat", f"/console/seats/{seats[0]}"),
        ("asks", "/console/asks"),
        ("ledger", "/console/ledger"),
        ("ledger, one person", f"/console/ledger?person={people[7]}"),
        ("ledger, older", older),
        ("ledger row", row.group(1)),
        ("dead letters", "/console/dead-letters"),
        ("steward", "/console/steward"),
    ]
    rows: list[dict[str, Any]] = []
    for name, url in pages:
        rows.append(timed(client, name, url, args))
    # My asks, as its person reaches it: a fresh client with the answer link's session.
    ask = container.asks.listing(person=people[0])[0]
    from fastapi.testclient import TestClient

    with TestClient(client.app) as person:
        got = person.get("/console/my", params={"token": links.token_for(ask)})
        assert got.status_code == 200, got.text
        rows.append(timed(person, "my asks", "/console/my", args))
    print(f"{'page':<20} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'KB':>6}")
    for f in rows:
        ms = f"{f['p50_ms']:8.1f} {f['p95_ms']:8.1f} {f['max_ms']:8.1f}"
        print(f"{f['page']:<20} {ms} {f['kb']:6.0f}")
    return rows


def timed(client: Any, name: str, url: str, args: Any) -> dict[str, Any]:
    samples: list[float] = []
    size = 0
    for i in range(args.warmup + args.repeat):
        started = time.perf_counter()
        resp = client.get(url)
        elapsed = time.perf_counter() - started
        if resp.status_code != 200:
            raise RuntimeError(f"{url}: {resp.status_code} {resp.text[:300]}")
        size = len(resp.content)
        if i >= args.warmup:
            samples.append(elapsed * 1000)
    return {
        "page": name,
        "url": url,
        "p50_ms": statistics.median(samples),
        "p95_ms": pct(samples, 0.95),
        "max_ms": max(samples),
        "kb": size / 1024,
    }


if __name__ == "__main__":
    raise SystemExit(main())
