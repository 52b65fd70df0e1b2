"""Per-request costs against the size of the org (issue 27, points 2 and 3), at 100 / 1,000 /
10,000 seats in one run, with the ratio of the largest size to the smallest.

    uv run python -m bench.lookups [--sizes 100,1000,10000] [--requests 200] [--warmup 20]
        [--calls 200] [--tokens 2000] [--load-repeats 3] [--scan-samples 3]
        [--redis-url redis://127.0.0.1:6379/14] [--json FILE]

Every size is set up first, on the one database (**FLUSHED** at the start and at the end;
each size's items and issue numbers are its own), and then measured in turns of a few
requests each, the order of the sizes moving by one every turn, so that a change of the
machine's load falls on every size alike. For each size N the org file is
bench.directedness's `write_org` with N seats (JSON: its 979 people and 50 channels plus one
member per seat, every one with a Slack id, the seats named `Seat <i>`), and the ingress is
built on it as `seatwire ingress` builds it (`build_container`, `create_ingress`; what exists
once every size is built is frozen out of the collector's sight, as the command does) and
driven in-process through httpx's ASGI transport, its lifespan run.

- **claim routes**: one COLLABORATE item per seat on its backlog (`Backlog.add`), each
  claiming a repository issue of its own (`claim.issueNumber`: the claim is on the issue, so
  the item records no owner of its own: the case the claim routes used to find by reading
  every seat's backlog). `--requests` rounds of POST (take), GET (who holds it) and DELETE
  (release) `/v1/seats/{taker}/claims/{item}`, each timed alone from the request to its
  200, by one seat (the first) that every item names a contributor, the items taken in turn
  from seats spread over the org (the last in sorted order among them). p50 and p99 per
  route. `before: scan` is what the lookup cost before the owner index, the way
  `_find_item` did it (the item's recorded owner, else every seat's backlog, one HGET each,
  in sorted order), timed alone `--scan-samples` times for the last seat's item.
- **find_agents**: `--calls` calls through the tool route (`POST /v1/seats/{seat}/tools/
  find_agents`): the first page, the page after a cursor in the middle of the org, and the
  same two with the name prefix `seat` (every seat: a full page of 20 at every size, so
  that each call reads the same 20 seats' state from Redis), in turn; p50 per call.
  `before: sort` is the listing the tool did per call before the index (every seat named,
  sorted, filtered by prefix and cursor), timed alone in-process, p50.
- **token lookup**: `Authenticator.caller` per request, for `--tokens` tokens of random
  seats: an embedded seat's development token (embedded mode: the index of the org
  version's dev tokens) and a store token (`seatwire token issue`: one HGET by its hash on
  this Redis); p50 in microseconds. `before: loop` is the loop it replaced (every seat's dev
  token derived and compared per request), p50 of 20.
- **org load per worker process**, each in a process of its own (`--load-repeats` times,
  median), the file of that size:
  `before` is what a prefork pool process paid at its start and each time it was recycled,
  every 1,000 tasks, before issue 27 (`OrgView.of(load_org(path))`, the collector on);
  `pool start` is what it pays now: the worker's main process loaded the file before
  forking (workers/celery_app.py `SharedOrg`), the pool process forked from it opens the
  org (`OrgSource.open`: a read and a digest); `+ Slack bot` the same and the identity its
  Slack app posts as learned for one seat (what a pool process does with the Slack adapter);
  `changed file` is what a process that runs pays once per version when the file changes
  (the main process, and each pool process already running), `shared_view` building it.

The load (`/proc/loadavg`) is printed before, between and after: read every figure with it.
Nothing here is imported by `workers/`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hmac
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

DEFAULT_URL = "redis://127.0.0.1:6379/14"
TAKER = 0  # the seat (by sorted position) that takes every claim
ISSUE_BASE = 1_000_000  # the issue numbers the items claim


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


@contextmanager
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="seatwire-lookups-") as tmp:
        yield Path(tmp)


# ------------------------------------------------------------------- org load probes


def probe(kind: str, path: Path) -> float:
    """One measurement of an org load, in this (fresh) process, in ms."""
    from workers.org import OrgSource, OrgView, learn_slack_identity, load_org

    if kind == "before":
        gc.collect()
        started = time.perf_counter()
        OrgView.of(load_org(path))
        path.stat()
        return 1e3 * (time.perf_counter() - started)
    if kind == "changed":
        source = OrgSource.open(path)
        data = json.loads(path.read_text())
        data["members"][0]["displayName"] += " (changed)"
        path.write_text(json.dumps(data))
        later = time.time() + 2
        os.utime(path, (later, later))
        gc.collect()
        started = time.perf_counter()
        view, degraded = source.current()
        elapsed = 1e3 * (time.perf_counter() - started)
        assert not degraded and view.org.members[0].display_name.endswith("(changed)")
        return elapsed
    # `pool start` / `+ Slack bot`: the main process loads, a forked child opens and reports.
    OrgSource.open(path)
    gc.collect()
    gc.freeze()  # as `seatwire worker` does before its pool forks
    seat = json.loads(path.read_text())["seats"][0]
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            started = time.perf_counter()
            source = OrgSource.open(path)
            if kind == "slack":
                bot_user = seat["aliases"][0]
                learn_slack_identity(source, {"user_id": bot_user, "bot_id": "B0BENCH"})
            source.current()
            os.write(writer, f"{1e3 * (time.perf_counter() - started)}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    _, status = os.waitpid(pid, 0)
    answer = os.read(reader, 100).decode()
    os.close(reader)
    if os.waitstatus_to_exitcode(status) != 0 or not answer:
        raise RuntimeError(f"the forked probe failed ({status})")
    return float(answer)


LOAD_KINDS = ("before", "pool", "slack", "changed")


def org_loads(paths: dict[int, Path], repeats: int, tmp: Path) -> dict[int, dict[str, float]]:
    """Per size, the median of `repeats` probes of each kind, each in a process of its own,
    the sizes in turn (a change of the machine's load falls on all of them)."""
    values: dict[int, dict[str, list[float]]] = {n: {k: [] for k in LOAD_KINDS} for n in paths}
    for r in range(repeats):
        for kind in LOAD_KINDS:
            for n, path in rotated(paths, r):
                copy = tmp / f"probe-{n}-{kind}-{r}.json"  # `changed` rewrites its file
                copy.write_bytes(path.read_bytes())
                out = subprocess.run(
                    [sys.executable, "-m", "bench.lookups", "--probe", kind, "--org", str(copy)],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if out.returncode != 0:
                    raise RuntimeError(f"probe {kind} failed: {out.stderr[-2000:]}")
                values[n][kind].append(float(out.stdout.strip().splitlines()[-1]))
    return {n: {k: statistics.median(v) for k, v in found.items()} for n, found in values.items()}


def rotated(by_size: dict[int, Any], turn: int) -> list[tuple[int, Any]]:
    """The sizes in an order that moves by one each turn."""
    items = list(by_size.items())
    at = turn % len(items)
    return items[at:] + items[:at]


# ------------------------------------------------------------------------ one size


class Size:
    """One org size: its org file, its ingress, its items (ids of its own: every size's are
    on the one database at once, so that the sizes are measured in turn)."""

    def __init__(self, n: int, k: int, url: str, tmp: Path, rng: random.Random) -> None:
        import fakeredis

        from bench.directedness import write_org
        from contracts.backlog import BacklogEntry
        from workers import bootstrap
        from workers.celery_app import create_app
        from workers.ingress.app import create_ingress
        from workers.ingress.auth import Authenticator
        from workers.org import OrgSource
        from workers.settings import Settings
        from workers.stores.backlog import Backlog
        from workers.stores.tokens import Tokens

        here = tmp / f"n{n}"
        here.mkdir()
        self.n = n
        self.org = write_org(here, seats=n)
        self.settings = Settings(
            redis_url=url,
            api_token="bench-operator",
            outbox_path=here / "outbox.jsonl",
            org_file=self.org.path,
        )
        self.app = create_app(self.settings, register=False)
        self.container = bootstrap.build_container(self.settings, app=self.app)
        self.api = create_ingress(self.container, self.app)
        self.seats = sorted(self.org.seats)
        self.taker = self.seats[TAKER]
        backlog = Backlog(self.container.redis)
        self.prefix = f"stw_n{n}_"
        for i, seat in enumerate(self.seats):
            claim = {
                "holderId": seat,
                "contributors": [self.taker],
                "issueNumber": ISSUE_BASE * (k + 1) + i,
            }
            entry = {
                "id": f"{self.prefix}{i:06d}",
                "seatId": seat,
                "objectiveKey": "bench",
                "title": f"item {i}",
                "route": "COLLABORATE",
                "addedAtMs": 1_000 + i,
                "claim": claim,
            }
            backlog.add(BacklogEntry.model_validate(entry))
        # Items spread over the org, the last seat's among them (the old scan's worst case).
        picks = sorted({*range(1, n, max(1, n // 16)), n - 1})
        self.items = [f"{self.prefix}{i:06d}" for i in picks]
        tokens = Tokens(self.container.redis)
        self.token, _ = tokens.issue("seat", seat_id=self.taker, label="bench", now_ms=1)
        self.headers = {"Authorization": f"Bearer {self.token}"}
        middle = self._middle_cursor()
        self.queries: list[dict[str, Any]] = [
            {},
            {"cursor": middle},
            {"name_prefix": "seat"},
            {"name_prefix": "SEAT", "cursor": middle},
        ]
        # Token lookups: embedded (its own process's kind of Authenticator: no Redis) and
        # store tokens of 50 seats on this Redis.
        embedded = Settings(outbox_path=self.settings.outbox_path, org_file=self.org.path)
        assert embedded.embedded
        fake = fakeredis.FakeRedis(server=fakeredis.FakeServer())
        self.dev_auth = Authenticator(embedded, Tokens(fake), OrgSource.open(self.org.path))
        self.store_auth = Authenticator(self.settings, tokens, OrgSource.open(self.org.path))
        self.issued = [
            (seat, tokens.issue("seat", seat_id=seat, label="bench", now_ms=1)[0])
            for seat in rng.sample(self.seats, min(50, n))
        ]
        self.timed: dict[str, list[float]] = {
            k: [] for k in ("POST", "GET", "DELETE", "find_agents", "dev", "store", "loop")
        }
        self.timed |= {"scan": [], "sort": []}

    def _middle_cursor(self) -> str:
        """A cursor half-way through the org's seats in name order."""
        from pipeline.cursors import pack

        entries = self.container.org.current()[0].seats_by_name.entries
        name, sid, _seat = entries[len(entries) // 2]
        return pack([name, sid])

    async def claim_round(self, client: Any, round_: int, keep: bool) -> None:
        """POST, GET, DELETE on one item through the app, each timed alone."""
        item = self.items[round_ % len(self.items)]
        url = f"/v1/seats/{self.taker}/claims/{item}"
        for method in ("POST", "GET", "DELETE"):
            started = time.perf_counter()
            resp = await client.request(method, url, headers=self.headers)
            elapsed = time.perf_counter() - started
            if resp.status_code != 200:
                raise RuntimeError(f"{method} {url}: {resp.status_code} {resp.text}")
            if keep:
                self.timed[method].append(elapsed)

    async def find_call(self, client: Any, call: int, keep: bool) -> None:
        body = self.queries[call % len(self.queries)]
        url = f"/v1/seats/{self.taker}/tools/find_agents"
        started = time.perf_counter()
        resp = await client.post(url, headers=self.headers, json=body)
        elapsed = time.perf_counter() - started
        got = len(resp.json()["agents"]) if resp.status_code == 200 else 0
        if not got or (self.n > 40 and got != 20):  # a full page from every query past 40
            raise RuntimeError(f"find_agents {body}: {resp.status_code} {resp.text}")
        if keep:
            self.timed["find_agents"].append(elapsed)

    def token_round(self, rng: random.Random, keep: bool) -> None:
        """One embedded dev token and one store token through `Authenticator.caller`."""
        from workers.settings import EMBEDDED_TOKEN
        from workers.stores.tokens import dev_token

        seat = rng.choice(self.seats)
        token = dev_token(EMBEDDED_TOKEN, seat)
        started = time.perf_counter()
        found = self.dev_auth.caller(token)
        dev = time.perf_counter() - started
        assert found is not None and found.seat is not None and found.seat.member_id == seat
        seat, token = rng.choice(self.issued)
        started = time.perf_counter()
        found = self.store_auth.caller(token)
        store = time.perf_counter() - started
        assert found is not None and found.seat is not None and found.seat.member_id == seat
        if keep:
            self.timed["dev"].append(dev)
            self.timed["store"].append(store)

    def token_loop_before(self, rng: random.Random) -> None:
        """The loop `Authenticator.fast` ran per request before the index, once."""
        from workers.settings import EMBEDDED_TOKEN
        from workers.stores.tokens import dev_token

        view = self.dev_auth.org.current()[0]
        given = dev_token(EMBEDDED_TOKEN, rng.choice(self.seats)).encode()
        started = time.perf_counter()
        for s in view.org.seats:
            if hmac.compare_digest(given, dev_token(EMBEDDED_TOKEN, s.member_id).encode()):
                break
        self.timed["loop"].append(time.perf_counter() - started)

    def scan_before(self) -> None:
        """The lookup as `_find_item` did it before the owner index, for the last seat's
        item, once."""
        item = f"{self.prefix}{self.n - 1:06d}"
        backlog, claims = self.container.backlog, self.container.claims
        started = time.perf_counter()
        owner = claims.owner(item)
        view = self.container.org.current()[0]
        seats = sorted({s.member_id for s in view.seats.values()})
        found = None
        for seat_id in [owner] if owner is not None else seats:
            found = backlog.get(seat_id, item)
            if found is not None:
                break
        self.timed["scan"].append(time.perf_counter() - started)
        assert found is not None

    def sort_before(self, call: int) -> None:
        """find_agents's listing before the index, alone: every seat named and sorted."""
        from workers.org import seat_name

        view = self.container.org.current()[0]
        prefix = ("", "seat 1")[call % 2]
        started = time.perf_counter()
        members = view.member_by_id
        named = sorted(
            (seat_name(members.get(s.member_id), s.member_id), s.member_id, s)
            for s in view.org.seats
        )
        chosen = [e for e in named if e[0].casefold().startswith(prefix)]
        _page = chosen[:20]
        self.timed["sort"].append(time.perf_counter() - started)


BLOCK = 10  # rounds of one size before the next size's


async def drive(sizes: list[Size], args: argparse.Namespace, rng: random.Random) -> None:
    """Every size's requests, `BLOCK` at a time, the sizes in turn."""
    import httpx

    by_n = {s.n: s for s in sizes}
    async with AsyncExitStack() as stack:
        clients = {}
        for s in sizes:
            await stack.enter_async_context(s.api.router.lifespan_context(s.api))
            transport = httpx.ASGITransport(app=s.api)
            clients[s.n] = await stack.enter_async_context(
                httpx.AsyncClient(transport=transport, base_url="http://bench")
            )
        total = args.warmup + args.requests
        for block in range(0, total, BLOCK):
            for n, s in rotated(by_n, block // BLOCK):
                for r in range(block, min(total, block + BLOCK)):
                    await s.claim_round(clients[n], r, keep=r >= args.warmup)
        total = args.warmup + args.calls
        for block in range(0, total, BLOCK):
            for n, s in rotated(by_n, block // BLOCK):
                for c in range(block, min(total, block + BLOCK)):
                    await s.find_call(clients[n], c, keep=c >= args.warmup)
    total = args.warmup + args.tokens
    for block in range(0, total, 10 * BLOCK):
        for _n, s in rotated(by_n, block):
            for t in range(block, min(total, block + 10 * BLOCK)):
                s.token_round(rng, keep=t >= args.warmup)
    for turn in range(20):
        for _n, s in rotated(by_n, turn):
            s.token_loop_before(rng)
    for turn in range(args.calls):
        for _n, s in rotated(by_n, turn):
            s.sort_before(turn)
    for turn in range(args.scan_samples):
        for _n, s in rotated(by_n, turn):
            s.scan_before()


# ------------------------------------------------------------------------ reporting


def figures(n: int, timed: dict[str, list[float]], loads: dict[str, float]) -> dict[str, Any]:
    """One size's figures, from its timings (seconds) and its org loads (ms)."""
    ms = 1e3
    us = 1e6
    return {
        "seats": n,
        "claim_p50_ms": {m: ms * pct(timed[m], 0.5) for m in ("POST", "GET", "DELETE")},
        "claim_p99_ms": {m: ms * pct(timed[m], 0.99) for m in ("POST", "GET", "DELETE")},
        "scan_before_ms": ms * pct(timed["scan"], 0.5),
        "find_agents_p50_ms": ms * pct(timed["find_agents"], 0.5),
        "sort_before_ms": ms * pct(timed["sort"], 0.5),
        "token_dev_p50_us": us * pct(timed["dev"], 0.5),
        "token_store_p50_us": us * pct(timed["store"], 0.5),
        "token_loop_before_us": us * pct(timed["loop"], 0.5),
        "org_load_ms": loads,
    }


def show(rows: list[dict[str, Any]]) -> None:
    print("\nclaim routes through the ingress app, p50 (p99) ms; before: the old lookup alone")
    print(f"{'seats':>7} {'POST':>15} {'GET':>15} {'DELETE':>15} {'before: scan':>14}")
    for r in rows:
        p50, p99 = r["claim_p50_ms"], r["claim_p99_ms"]
        cells = " ".join(f"{f'{p50[m]:.2f} ({p99[m]:.2f})':>15}" for m in p50)
        print(f"{r['seats']:>7,} {cells} {r['scan_before_ms']:>11.2f} ms")
    print("\nfind_agents per call through the tool route, p50 ms; before: the per-call sort alone")
    print(f"{'seats':>7} {'find_agents':>12} {'before: sort':>14}")
    for r in rows:
        print(
            f"{r['seats']:>7,} {r['find_agents_p50_ms']:>9.2f} ms {r['sort_before_ms']:>11.2f} ms"
        )
    print("\ntoken lookup per request (Authenticator.caller), p50 us; before: the per-seat loop")
    print(f"{'seats':>7} {'embedded dev':>13} {'store token':>12} {'before: loop':>14}")
    for r in rows:
        print(
            f"{r['seats']:>7,} {r['token_dev_p50_us']:>10.1f} us {r['token_store_p50_us']:>9.1f} us"
            f" {r['token_loop_before_us']:>11.0f} us"
        )
    print("\norg load per worker process, ms (median, each in a process of its own)")
    print(f"{'seats':>7} {'before':>9} {'pool start':>11} {'+ Slack bot':>12} {'changed file':>13}")
    for r in rows:
        x = r["org_load_ms"]
        print(
            f"{r['seats']:>7,} {x['before']:>9.1f} {x['pool']:>11.1f} {x['slack']:>12.1f}"
            f" {x['changed']:>13.1f}"
        )
    if len(rows) < 2:
        return
    lo, hi = rows[0], rows[-1]
    pairs: list[tuple[str, Callable[[dict[str, Any]], float], str]] = [
        ("claim POST p50", lambda r: r["claim_p50_ms"]["POST"], "target <= 1.5"),
        ("claim GET p50", lambda r: r["claim_p50_ms"]["GET"], "target <= 1.5"),
        ("claim DELETE p50", lambda r: r["claim_p50_ms"]["DELETE"], "target <= 1.5"),
        ("find_agents p50", lambda r: r["find_agents_p50_ms"], "target <= 1.5"),
        ("token: embedded dev p50", lambda r: r["token_dev_p50_us"], "target <= 1.5"),
        ("token: store p50", lambda r: r["token_store_p50_us"], "target <= 1.5"),
        ("before: claim scan", lambda r: r["scan_before_ms"], "(the old lookup)"),
        ("before: find_agents sort", lambda r: r["sort_before_ms"], "(the old listing)"),
        ("before: token loop", lambda r: r["token_loop_before_us"], "(the old loop)"),
    ]
    print(f"\nratio {hi['seats']:,} seats / {lo['seats']:,} seats")
    for label, get, target in pairs:
        print(f"  {label:<26} x{get(hi) / get(lo):>8.2f}   {target}")
    pool = hi["org_load_ms"]["pool"]
    print(
        f"  org reload at {hi['seats']:,} seats (pool process start): {pool:.1f} ms "
        f"(target < 200 ms; before {hi['org_load_ms']['before']:.0f} ms)"
    )


# ------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--redis-url", default=DEFAULT_URL, help="FLUSHED (default: %(default)s)")
    ap.add_argument("--sizes", default="100,1000,10000", help="seat counts, comma-separated")
    ap.add_argument("--requests", type=int, default=200, help="rounds of POST, GET, DELETE")
    ap.add_argument("--warmup", type=int, default=20, help="untimed rounds and calls first")
    ap.add_argument("--calls", type=int, default=200, help="find_agents calls")
    ap.add_argument("--tokens", type=int, default=2000, help="token lookups of each kind")
    ap.add_argument("--load-repeats", type=int, default=3, help="processes per org load figure")
    ap.add_argument("--scan-samples", type=int, default=3, help="old claim lookups timed")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument(
        "--probe", choices=("before", "pool", "slack", "changed"), help=argparse.SUPPRESS
    )
    ap.add_argument("--org", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.probe is not None:  # one org load measurement, in a process of its own
        assert args.org is not None
        print(probe(args.probe, args.org))
        return 0
    wanted = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    if not wanted or min(wanted) < 2 or args.requests < 1 or args.calls < 1 or args.tokens < 1:
        ap.error("--sizes (at least 2 seats each), --requests, --calls, --tokens must be positive")
    rng = random.Random(args.seed)
    print(
        f"bench.lookups: per-request costs at {', '.join(f'{n:,}' for n in wanted)} seats on "
        f"{args.redis_url} (FLUSHED); load before: {loadavg()}"
    )
    with scratch() as tmp:
        import redis

        redis.Redis.from_url(args.redis_url).flushdb()
        sizes: list[Size] = []
        for k, n in enumerate(wanted):
            started = time.perf_counter()
            sizes.append(Size(n, k, args.redis_url, tmp, rng))
            print(f"  {n:,} seats set up in {time.perf_counter() - started:.0f} s", flush=True)
        gc.collect()
        gc.freeze()  # as `seatwire ingress` does once the app is built
        try:
            asyncio.run(drive(sizes, args, rng))
        finally:
            sizes[0].container.redis.flushdb()
        print(f"  requests done; load: {loadavg()}", flush=True)
        loads = org_loads({s.n: s.org.path for s in sizes}, args.load_repeats, tmp)
        rows = [figures(s.n, s.timed, loads[s.n]) for s in sizes]
    show(rows)
    print(f"\nload after: {loadavg()}")
    if args.json is not None:
        args.json.write_text(json.dumps({"sizes": rows, "load": loadavg()}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
