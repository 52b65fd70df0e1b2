"""Asks per second through engagement -> guardrails -> send to a Slack-compatible server, as a
RATIO to the file outbox in the same run, and what reconciling an ambiguous send costs.

    uv run python -m bench.outbound [--n 1000] [--rounds 3]

Each round runs, one after the other on a flushed database, bench.pipeline's Seatwire run
(the same items, workers and method: `seatwire worker --queues engagement,guardrails,send`,
N blocked reports enqueued as the ingress does (its `script` feed), timed until every
journal entry is final and every ask delivered) three times:

  file        SEATWIRE_OUTBOUND=file, fsync on (the default adapter, the baseline)
  slack       SEATWIRE_OUTBOUND=slack against the fake Slack server (tests/fake_slack.py, its
              own process): conversations.open + chat.postMessage per ask, no faults
  ambiguous   the same, with every post answered `internal_error` AFTER it was applied: each
              ask is posted once, its outcome is unknown, and the next try reconciles
              (conversations.open + conversations.history) and finds it. Its retry waits
              the backoff (1-2 s), so its rate says little; its worker CPU per ask, against
              `slack`'s, is the reconciliation's cost.

Every run is verified: all entries `engaged`, exactly N + warm-up posts, no send id posted
twice. The fake server's CPU counts in "other load" (it is not Seatwire's).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import stop_cleanly_on_sigterm
from bench.pipeline import Bench, Result, line


def start_fake(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    log = (tmp / "fake-slack.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "tests.fake_slack", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=log,
        start_new_session=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline().decode()
    if "listening on" not in first:
        proc.kill()
        raise RuntimeError(f"the fake Slack server did not start: {first!r}")
    return proc, first.rsplit(" ", 1)[-1].strip()


def main(argv: list[str] | None = None) -> int:
    stop_cleanly_on_sigterm()
    from tests.fake_slack import FakeSlackControl, error
    from workers.settings import BUNDLED_ORG

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/14", help="FLUSHED per run")
    ap.add_argument("--n", type=int, default=1000, help="asks per run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--concurrency", type=int, default=2, help="worker processes")
    ap.add_argument("--loglevel", default="INFO")
    ap.add_argument("--org-file", type=Path, default=BUNDLED_ORG)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--no-uv", dest="uv", action="store_false")
    ap.add_argument("--skip-ambiguous", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    tmp = Path(tempfile.mkdtemp(prefix="seatwire-bench-outbound-"))
    fake, url = start_fake(tmp)
    control = FakeSlackControl(url)
    token = str(control.info()["token"])
    bench = Bench(args, tmp)
    slack_env = {
        "SEATWIRE_OUTBOUND": "slack",
        "SEATWIRE_SLACK_API_URL": url,
        "SEATWIRE_SLACK_BOT_TOKEN": token,
    }

    def posted() -> int:
        return int(control.info()["post_count"])

    def slack_run(rnd: int, kind: str) -> Result:
        control.reset()
        if kind == "ambiguous":
            control.chaos("chat.postMessage", {error("internal_error", applied=True): 1.0})
        result = bench.seatwire(rnd, True, extra_env=slack_env, delivered=posted, kind=kind)
        dupes = control.duplicates()
        if dupes:
            raise RuntimeError(f"{kind}: {len(dupes)} asks posted more than once")
        calls: dict[str, int] = {}
        for r in control.requests():
            calls[r.method] = calls.get(r.method, 0) + 1
        result.extra["api_calls"] = calls
        return result

    print(
        f"bench.outbound: {args.rounds} rounds x N={args.n}, {args.concurrency} worker "
        f"processes, {os.cpu_count()} CPUs, fake Slack at {url}, logs in {tmp}",
        flush=True,
    )
    results: list[tuple[int, Result]] = []
    try:
        for rnd in range(1, args.rounds + 1):
            base = bench.seatwire(rnd, True, kind="file")
            results.append((rnd, base))
            print(f"round {rnd}  {line(base)}", flush=True)
            kinds = ["slack"] if args.skip_ambiguous else ["slack", "ambiguous"]
            for kind in kinds:
                got = slack_run(rnd, kind)
                results.append((rnd, got))
                print(
                    f"round {rnd}  {line(got)}  ratio to file {got.per_s / base.per_s:.3f}  "
                    f"calls {got.extra['api_calls']}",
                    flush=True,
                )
    finally:
        bench.stop_all()
        bench.flush()
        control.close()
        fake.terminate()
        fake.wait(10)

    def cpu_ms(kind: str) -> float:
        return statistics.median(1e3 * r.worker_cpu_s / r.n for _, r in results if r.kind == kind)

    print("\nmedians over rounds:")
    ratios = []
    for rnd in range(1, args.rounds + 1):
        b = next(r for n, r in results if n == rnd and r.kind == "file")
        s = next(r for n, r in results if n == rnd and r.kind == "slack")
        ratios.append(s.per_s / b.per_s)
    for kind in dict.fromkeys(r.kind for _, r in results):
        rate = statistics.median(r.per_s for _, r in results if r.kind == kind)
        print(f"  {kind:<10} {rate:>8.1f}/s   worker CPU {cpu_ms(kind):.2f} ms/ask")
    print(
        f"  ratio slack/file: median {statistics.median(ratios):.3f} "
        f"(rounds: {', '.join(f'{x:.3f}' for x in ratios)})"
    )
    if not args.skip_ambiguous:
        extra = cpu_ms("ambiguous") - cpu_ms("slack")
        print(f"  reconciliation: +{extra:.2f} ms of worker CPU per ambiguous send")
    if args.json:
        args.json.write_text(
            json.dumps(
                [{"round": n, "kind": r.kind, "per_s": r.per_s, **r.extra} for n, r in results],
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
