"""Redis memory per work report, per inbound event, per seat and per member, on real Redis, by
key family with each family's bound: the figures of docs/operations.md, "Capacity". With
--soak-minutes, a steady load for that long with the retention windows shortened, sampling
Redis memory, to show it levels off once the windows are reached.

    uv run python -m bench.capacity [--reports 2000] [--events 2000] [--redis-url URL]
    uv run python -m bench.capacity --soak-minutes 30 [--rate 20] [--window-s 120]

The database is FLUSHED at the start and at the end. Everything runs in-process (no worker):
a work report goes through the ingress's journal accept and the engagement, guardrail and
send stage bodies (bench/stages.py `steps`), an inbound event through the directedness
stage (bench/scale.py's event mix on bench/directedness.py's synthetic org of 20 seats).
The stage messages published to the broker are deleted (nobody consumes them here); only the
`sw:` keys are measured, each with `MEMORY USAGE ... SAMPLES 0` (exact), grouped into
families by their key shape (`sw:j:*`, `sw:j:*:seats`, ...). A family's bound is what its
keys' TTLs say (the longest one seen), or `cap` / `none` when they have none.

Per seat: what a seat's own keys hold at most: its inbox at its cap of unread items (the
measured mean item size x SEATWIRE_INBOX_CAP) and its ledger stream at its row cap (the mean
row size x 100,000), besides a few fixed hashes. Per member: the guardrail index entries an
engaged member's asks leave (`sw:g:target:*`), kept for the longest guardrail window.

The soak: `--rate` work reports and `--rate` inbound events a second, with the journal and
ops, the inbound retention, the ledger rows, the facts, the sent-message index and the
guardrail window indexes all kept `--window-s` seconds instead of days (the limits are set so
high that the shortened windows change no decision); the seats read and acknowledge their
inboxes every few seconds, as a running seat does.
Redis `used_memory` and the `sw:` bytes are printed every 30 s: they rise for one window
and then stay flat.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.directedness import inbound_message
from bench.pipeline import HIGH, make_items
from bench.scale import ScaleEvents, add_dms
from bench.stages import steps

LITERAL = re.compile(r"^[a-z]{1,8}$")
SEATS = 20


def family(key: str) -> str:
    """A key's shape: its literal segments kept, every id replaced by `*`."""
    return ":".join(p if LITERAL.match(p) else "*" for p in key.split(":"))


@dataclasses.dataclass
class Family:
    keys: int = 0
    bytes: int = 0
    max_ttl_ms: int = -1  # -1: no key of it has a TTL


def survey(r: Any) -> dict[str, Family]:
    """Every `sw:` key's bytes and TTL, by family."""
    out: dict[str, Family] = defaultdict(Family)
    batch: list[bytes] = []

    def flush() -> None:
        pipe = r.pipeline(transaction=False)
        for k in batch:
            pipe.memory_usage(k, samples=0)
            pipe.pttl(k)
        got = pipe.execute()
        for i, k in enumerate(batch):
            f = out[family(k.decode())]
            f.keys += 1
            f.bytes += int(got[2 * i] or 0)
            f.max_ttl_ms = max(f.max_ttl_ms, int(got[2 * i + 1]))
        batch.clear()

    for key in r.scan_iter(match="sw:*", count=1000):
        batch.append(key)
        if len(batch) >= 500:
            flush()
    if batch:
        flush()
    return dict(out)


def delta(after: dict[str, Family], before: dict[str, Family]) -> dict[str, Family]:
    out = {}
    for name, f in after.items():
        b = before.get(name, Family())
        if f.bytes != b.bytes or f.keys != b.keys:
            out[name] = Family(f.keys - b.keys, f.bytes - b.bytes, f.max_ttl_ms)
    return out


def bound(f: Family) -> str:
    if f.max_ttl_ms < 0:
        return "no TTL"
    days = f.max_ttl_ms / 86_400_000
    return f"TTL {days:.0f} d" if days >= 1 else f"TTL {f.max_ttl_ms / 3_600_000:.1f} h"


def show(title: str, fams: dict[str, Family], n: int) -> float:
    total = sum(f.bytes for f in fams.values()) / n
    print(f"\n{title}: {total:,.0f} B each ({n} measured)")
    print(f"  {'key family':<26}{'keys/each':>10}{'B/each':>9}  bound")
    for name, f in sorted(fams.items(), key=lambda kv: -kv[1].bytes):
        print(f"  {name:<26}{f.keys / n:>10.2f}{f.bytes / n:>9,.0f}  {bound(f)}")
    return total


def environment(args: argparse.Namespace, tmp: Path) -> None:
    os.environ.update(
        {
            "SEATWIRE_REDIS_URL": args.redis_url,
            "SEATWIRE_API_TOKEN": "bench",
            "SEATWIRE_OUTBOX_PATH": str(tmp / "outbox.jsonl"),
            "SEATWIRE_OUTBOX_FSYNC": "false",
            "SEATWIRE_LIMITS__PER_TARGET_PER_DAY": str(HIGH),
            "SEATWIRE_LIMITS__PER_SEAT_PER_HOUR": str(HIGH),
            "SEATWIRE_LIMITS__PER_WORK_PER_DAY": str(HIGH),
        }
    )
    os.environ.pop("SEATWIRE_BROKER_URL", None)


class Load:
    """A container on the synthetic org and the two kinds of input, run in-process."""

    def __init__(self, args: argparse.Namespace, tmp: Path, *, window_ms: int | None) -> None:
        from bench.directedness import write_org
        from workers.bootstrap import build_container
        from workers.celery_app import create_app
        from workers.settings import Settings

        org = write_org(tmp, seed=7, seats=SEATS)
        self.dms = add_dms(org)
        os.environ["SEATWIRE_ORG_FILE"] = str(org.path)
        settings = Settings()
        self.app = create_app(settings, register=False)
        c = build_container(settings, app=self.app)
        if window_ms is not None:
            c = shortened(c, window_ms)
        self.c = c
        self.r = c.redis
        self.events = ScaleEvents(org, 11, self.dms)
        self.funcs = steps(c, self.app)
        soak_n = int(args.rate * args.soak_minutes * 60) + 100 if args.soak_minutes else 0
        self.items = make_items(max(args.reports + 100, soak_n), "capacity", org.path)
        self.done = 0
        self.seats = [s.member_id for s in c.org.current()[0].org.seats]

    def report(self) -> None:
        value: Any = self.items[self.done]
        self.done += 1
        for step in ("ingress", "engagement", "guardrails", "send"):
            value = self.funcs[step](value)
            if value is None:
                raise RuntimeError(f"{step} stopped a report")

    def event(self) -> None:
        from contracts.messages import InboundEnvelope
        from workers.bootstrap import now_ms
        from workers.stages.directedness import Directedness

        (cand,) = self.events.candidates(1)
        at = now_ms()
        tracking, message = inbound_message(cand, at)
        self.c.journal.accept(
            tracking,
            kind="inbound",
            seat_id="",
            payload=json.dumps(message),
            now_ms=at,
            fingerprint="",
        )
        Directedness.of(self.c)(InboundEnvelope.model_validate(message))

    def read_inboxes(self) -> None:
        """Every seat reads its updates and acknowledges them, as a running seat does."""
        for seat in self.seats:
            page = self.c.inbox.updates(seat)
            while page.items:
                page = self.c.inbox.ack(seat, page.position)

    def drop_queues(self) -> None:
        from workers.queues import Queue

        self.r.delete(*(q.value for q in Queue))


def shortened(c: Any, window_ms: int) -> Any:
    """The container with every retention window `window_ms` (a soak cannot wait days)."""
    from workers.stores.inbound import InboundStore
    from workers.stores.inbox import InboxRoom
    from workers.stores.journal import Journal
    from workers.stores.ledger import Ledger

    room = InboxRoom(cap=c.settings.inbox_cap, ledger_retention_ms=window_ms)
    return dataclasses.replace(
        c,
        journal=Journal(
            c.redis,
            deadline_ms=c.settings.journal_deadline_ms,
            retention_ms=window_ms,
            ledger_retention_ms=window_ms,
        ),
        ledger=Ledger(
            c.redis,
            limits=c.settings.limits,
            reservation_ttl_ms=min(window_ms, c.settings.reservation_ttl_ms),
            retention_ms=window_ms,
            ledger_retention_ms=window_ms,
            window_keep_ms=window_ms,
        ),
        inbound=InboundStore(c.redis, retention_ms=window_ms, fact_ttl_ms=window_ms, room=room),
    )


def measure(args: argparse.Namespace, tmp: Path) -> None:
    from workers.stores.inbox import INBOX_CAP
    from workers.stores.journal import LEDGER_STREAM_CAP

    load = Load(args, tmp, window_ms=None)
    r = load.r
    r.flushdb()
    for _ in range(20):  # scripts loaded, the org snapshot written, first rows
        load.report()
        load.event()
    load.read_inboxes()
    load.drop_queues()

    before = survey(r)
    for _ in range(args.reports):
        load.report()
    load.drop_queues()
    reports = delta(survey(r), before)
    per_report = show("Per work report (engaged, final)", reports, args.reports)

    r.flushdb()  # the events on their own, so their families' bounds are their own
    for _ in range(20):
        load.event()
    load.read_inboxes()
    load.drop_queues()
    before = survey(r)
    unread_before = sum(int(r.hget(f"sw:inbox:{s}:meta", "last") or 0) for s in load.seats)
    for _ in range(args.events):
        load.event()
    load.drop_queues()
    unread = survey(r)
    events = delta(unread, before)
    per_event_unread = show(
        f"Per inbound event, {SEATS} seats, inboxes not yet read", events, args.events
    )
    load.read_inboxes()
    read = delta(survey(r), before)
    per_event = show("Per inbound event, inboxes read and acknowledged", read, args.events)

    item_bytes = events.get("sw:inbox:*", Family()).bytes
    items = sum(int(r.hget(f"sw:inbox:{s}:meta", "last") or 0) for s in load.seats)
    row_bytes = reports.get("sw:ledger:*", Family()).bytes / args.reports
    per_item = item_bytes / max(1, items - unread_before)
    inbox_worst = per_item * INBOX_CAP
    ledger_worst = row_bytes * LEDGER_STREAM_CAP
    per_member = reports.get("sw:g:target:*", Family()).bytes / args.reports
    print("\nPer seat (at most; besides its counters)")
    print(f"  inbox at its cap:   {INBOX_CAP:,} x {per_item:,.0f} B = {inbox_worst / 1e6:,.1f} MB")
    print(
        f"  ledger at its cap:  {LEDGER_STREAM_CAP:,} x {row_bytes:,.0f} B = "
        f"{ledger_worst / 1e6:,.1f} MB (or fewer rows: the audit retention, 30 d)"
    )
    print("\nPer member: the guardrail index entries of each ask that engages them")
    print(f"  {per_member:,.0f} B per ask, kept for the longest guardrail window (1 day)")
    print("\nSizing (the defaults: reports and ops kept 30 d, inbound events 7 d):")
    print(
        f"  Redis bytes = reports/day x 30 x {per_report:,.0f} + events/day x 7 x "
        f"{per_event:,.0f}\n              + seats x (unread items x {per_item:,.0f} + "
        f"ledger rows x {row_bytes:,.0f})"
    )
    example = 10_000 * 30 * per_report + 100_000 * 7 * per_event
    print(
        f"  e.g. 10,000 reports and 100,000 events a day: {example / 1e9:,.2f} GB "
        f"(unread items: {per_event_unread - per_event:,.0f} B per event until read)"
    )
    r.flushdb()
    load.app.close()


def soak(args: argparse.Namespace, tmp: Path) -> None:
    window_ms = int(args.window_s * 1000)
    load = Load(args, tmp, window_ms=window_ms)
    r = load.r
    r.flushdb()
    print(
        f"soak: {args.rate} reports/s and {args.rate} events/s for {args.soak_minutes} min, "
        f"every retention window {args.window_s:.0f} s; memory every 30 s"
    )
    print(f"  {'min':>5}{'reports':>9}{'events':>8}{'used_memory MB':>16}{'sw: keys MB':>13}")
    start = time.monotonic()
    end = start + args.soak_minutes * 60
    next_sample = start
    next_read = start
    next_item = start
    n = 0
    samples: list[tuple[float, int, int]] = []
    while True:
        now = time.monotonic()
        if now >= next_sample:
            used = int(r.info("memory")["used_memory"])
            keys = sum(f.bytes for f in survey(r).values())
            samples.append(((now - start) / 60, used, keys))
            print(
                f"  {(now - start) / 60:>5.1f}{load.done:>9}{n:>8}{used / 1e6:>16.1f}"
                f"{keys / 1e6:>13.1f}",
                flush=True,
            )
            next_sample += 30
        if now >= end:
            break
        if now >= next_read:
            load.read_inboxes()
            load.drop_queues()
            next_read += 5
        if next_item > now:
            time.sleep(min(next_item - now, 0.5))
            continue
        # a steady rate: what a busy moment missed is skipped, never caught up in a burst
        next_item = max(next_item + 1 / args.rate, now - 1.0)
        load.report()
        load.event()
        n += 1
    late = [s for s in samples if s[0] * 60 >= 2 * args.window_s]
    if len(late) >= 2:
        server = [s[1] for s in late]
        ours = [s[2] for s in late]
        print(
            f"\nafter two windows ({2 * args.window_s / 60:.0f} min on): used_memory "
            f"{min(server) / 1e6:.1f}-{max(server) / 1e6:.1f} MB (median "
            f"{statistics.median(server) / 1e6:.1f}), sw: keys {min(ours) / 1e6:.1f}-"
            f"{max(ours) / 1e6:.1f} MB; first vs last: {ours[0] / 1e6:.1f} -> "
            f"{ours[-1] / 1e6:.1f} MB"
        )
    r.flushdb()
    load.app.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/14", help="FLUSHED")
    ap.add_argument("--reports", type=int, default=2000)
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--soak-minutes", type=float, default=0.0)
    ap.add_argument("--rate", type=float, default=20.0, help="soak: reports and events per s")
    ap.add_argument("--window-s", type=float, default=120.0, help="soak: every retention")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="seatwire-capacity-") as tmp:
        environment(args, Path(tmp))
        if args.soak_minutes > 0:
            soak(args, Path(tmp))
        else:
            measure(args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
