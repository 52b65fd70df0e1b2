"""The goal steward on beat, end to end with real processes (issue 10, "How it will be
checked"): KPI samples posted over HTTP, `seatwire beat` ticking `seatwire.steward.tick` on the
`steward` queue every second, steward workers running it, and the stage workers carrying its
engagements to the outbox. Against examples/org.yaml's four demo objectives
(workers/demo/steward.py), the backlogs, the engagements and the audit must hold exactly what
the gates allow, with one beat and one steward worker (test 1), with two of each at once
(test 2), and after a steward worker is SIGKILLed between two dispatches of one objective's
run and the run is repeated by a healthy worker (test 3).

What the gates allow is derived here from the posted samples, not read back from the steward:
the dispatch ids are `pipeline.goals.dispatch_ids`'s, over the sample each case is decided on.
Each test prints its figures (run with -s to see them)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from contracts.steward import SampleRef
from pipeline.goals.dispatch_ids import candidate_dispatch_id, gap_dispatch_id
from tests.e2e.cluster import SEATWIRE, Cluster, start_cluster, stop_processes, wait_final
from workers.demo.steward import samples
from workers.outbound.file import read_outbox
from workers.queues import FINAL_STATES, tracking_id_for
from workers.stores import keys
from workers.stores.audit import RUNS
from workers.stores.scripts import text

pytestmark = pytest.mark.e2e
INGRESS = ["seatwire", "ingress", "--host", "127.0.0.1", "--port", "0"]
BEAT = ["seatwire", "beat"]
STEWARD = ["seatwire", "worker", "--queues", "steward", "--concurrency", "1"]
STAGES = [
    "seatwire",
    "worker",
    "--queues",
    "directedness,engagement,guardrails,send",
    "--concurrency",
    "2",
]
ENV = {
    "SEATWIRE_LIMITS__PER_SEAT_PER_HOUR": "1000000",
    "SEATWIRE_LIMITS__PER_WORK_PER_DAY": "1000000",
    "SEATWIRE_STEWARD_INTERVAL_S": "1",
    "SEATWIRE_STEWARD_LEASE_MS": "1500",
}
OBJECTIVES = ("deploy-lead-time", "trial-activation", "review-turnaround", "vendor-invoice-backlog")
TICK_DONE = "seatwire.steward.tick["  # Celery's "Task seatwire.steward.tick[id] succeeded"
SETTLE_TICKS = 2  # ticks run after everything was dispatched: none may add anything


@dataclass(frozen=True)
class Expected:
    """What the gates allow for the posted samples, by dispatch id."""

    self_item: str  # deploy-lead-time: SELF on scout's backlog
    handoff: str  # deploy-lead-time: HANDOFF, an engagement asking ava
    review_item: str  # review-turnaround: NEEDS_REVIEW on scout's backlog
    escalation: str  # review-turnaround: escalate, an engagement asking gus
    drift_item: str  # vendor-invoice-backlog: restore the measurement, on tally's backlog

    @property
    def backlogs(self) -> dict[str, dict[str, tuple[str, str]]]:
        return {
            "scout": {
                self.self_item: ("deploy-lead-time", "SELF"),
                self.review_item: ("review-turnaround", "NEEDS_REVIEW"),
            },
            "tally": {self.drift_item: ("vendor-invoice-backlog", "drift")},
        }

    @property
    def engagements(self) -> dict[str, str]:
        """Dispatch id -> the member its engagement must ask."""
        return {self.handoff: "ava", self.escalation: "gus"}


def post_samples(cluster: Cluster) -> Expected:
    """The demo's samples, posted over HTTP; the dispatch ids they must lead to."""
    now_ms = int(time.time() * 1000)
    latest: dict[str, SampleRef] = {}
    with cluster.http() as http:
        for key, body in samples(now_ms):
            assert http.post(f"/v1/objectives/{key}/samples", json=body).status_code == 201
            ref = SampleRef(at_ms=body["atMs"], source=body["source"])
            if key not in latest or ref.at_ms > latest[key].at_ms:
                latest[key] = ref
    deploy, review = latest["deploy-lead-time"], latest["review-turnaround"]
    return Expected(
        self_item=candidate_dispatch_id(
            "deploy-lead-time", "Cache dependencies in the deploy pipeline", deploy
        ),
        handoff=candidate_dispatch_id(
            "deploy-lead-time", "Approve a second daily deploy window", deploy
        ),
        review_item=candidate_dispatch_id(
            "review-turnaround", "Nudge reviewers on pull requests waiting over a day", review
        ),
        escalation=gap_dispatch_id("review-turnaround", "escalate", review),
        drift_item=gap_dispatch_id(
            "vendor-invoice-backlog", "drift", latest["vendor-invoice-backlog"]
        ),
    )


@contextmanager
def processes(
    cluster: Cluster, commands: list[list[str]], tmp_path: Path, name: str, **extra_env: str
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """More Seatwire processes, started after the cluster (its environment, plus `extra_env`),
    each logging to `<name>-<i>.log`; stopped by pid on the way out."""
    procs = []
    for i, command in enumerate(commands):
        args = [SEATWIRE if a == "seatwire" else a for a in command]
        with (tmp_path / f"{name}-{i}.log").open("wb") as fh:
            procs.append(
                subprocess.Popen(
                    args,
                    env={**cluster.env, **extra_env},
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    try:
        yield procs
    finally:
        stop_processes(procs)


def ticks_run(tmp_path: Path) -> int:
    """How many steward ticks the steward workers (every log named steward*) finished."""
    return sum(
        line.count(TICK_DONE)
        for log in tmp_path.glob("steward*.log")
        for line in log.read_text(errors="replace").splitlines()
        if "succeeded" in line
    )


def backlog(cluster: Cluster, seat: str) -> dict[str, Any]:
    with cluster.http() as http:
        body: dict[str, Any] = (
            http.get(f"/v1/seats/{seat}/backlog", params={"state": "all"}).raise_for_status().json()
        )
        return body


def audit(cluster: Cluster, objective: str | None = None) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"limit": 500}
    if objective is not None:
        params["objective"] = objective
    with cluster.http() as http:
        entries: list[dict[str, Any]] = (
            http.get("/v1/steward/audit", params=params).raise_for_status().json()["entries"]
        )
        return entries


def journal_work_entries(r: redis.Redis) -> list[str]:
    """The tracking ids of every work report journalled (the steward's engagements: nothing
    else posts work in these tests)."""
    found = []
    for raw in r.scan_iter(match=keys.journal("wr-*"), count=1000):
        key = raw.decode()
        if key.count(":") == 2 and r.type(key) == b"hash":  # not `...:dlv` and the like
            found.append(key.removeprefix(keys.journal("")))
    return found


def missing(cluster: Cluster, r: redis.Redis, expected: Expected) -> list[str]:
    """The expected dispatches not done yet: an item not on its backlog, an engagement not
    in a final state."""
    absent = []
    for seat, items in expected.backlogs.items():
        have = {i["id"] for i in backlog(cluster, seat)["items"]}
        absent += [f"{items[i][0]} {items[i][1]}" for i in items if i not in have]
    for did, who in expected.engagements.items():
        raw = r.hget(keys.journal(tracking_id_for("scout", did, 1)), "state")
        state = None if raw is None else text(raw)
        if state not in FINAL_STATES:
            absent.append(f"engagement {did} -> {who} ({state})")
    return absent


def audit_summary(cluster: Cluster, objective: str) -> list[str]:
    """An objective's audit, oldest first, one short line each (for a failure's message)."""
    out = []
    for e in reversed(audit(cluster, objective)):
        x = e["entry"]
        what = x["action"] if x["kind"] == "gap_decision" else x["candidateTitle"]
        verdict = "admitted" if x["admitted"] else f"refused at {x['gate']}"
        if x["kind"] == "gap_decision":
            verdict = x.get("note") or ""
        out.append(f"{e['runId']} {x['kind']} {what!r}: {verdict} -> {x['dispatchId']}")
    return out


def wait_dispatched(
    cluster: Cluster, r: redis.Redis, expected: Expected, tmp_path: Path, max_ticks: int = 8
) -> tuple[float, int]:
    """Poll until everything is dispatched (failing once `max_ticks` more ticks ran without
    it, or 120 s passed: a bound for a loaded machine, where ticks come late), then let
    SETTLE_TICKS more ticks run; the time it took and the ticks finished by then."""
    started, first = time.monotonic(), ticks_run(tmp_path)
    while absent := missing(cluster, r, expected):
        ran = ticks_run(tmp_path) - first
        if ran > max_ticks or time.monotonic() - started > 120:
            audits = {k: audit_summary(cluster, k) for k in ("deploy-lead-time",)}
            pytest.fail(
                f"{ran} ticks and {time.monotonic() - started:.1f}s later, never dispatched: "
                f"{absent}; audit {json.dumps(audits, indent=1)}",
                pytrace=False,
            )
        time.sleep(0.1)
    took = time.monotonic() - started
    settle_from = ticks_run(tmp_path)
    deadline = time.monotonic() + 60
    while ticks_run(tmp_path) < settle_from + SETTLE_TICKS and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ticks_run(tmp_path) >= settle_from + SETTLE_TICKS, "the steward stopped ticking"
    time.sleep(0.5)  # an engagement a late tick enqueued would show up by now
    return took, ticks_run(tmp_path)


def check_holds_exactly_what_the_gates_allow(
    cluster: Cluster, r: redis.Redis, expected: Expected
) -> dict[str, int]:
    """The backlogs, the engagements, the outbox and the audit: each dispatch once, nothing
    else. Returns the audit's figures."""
    # Backlogs: exactly the expected items, each once, the revision one per item.
    for seat, items in expected.backlogs.items():
        page = backlog(cluster, seat)
        ids = [i["id"] for i in page["items"]]
        assert Counter(ids) == Counter(set(ids)), f"{seat}: an item twice: {ids}"
        got = {i["id"]: (i["objectiveKey"], i["route"]) for i in page["items"]}
        assert got == items, (seat, got)
        assert page["revision"] == len(items), (seat, page["revision"])
    review = next(i for i in backlog(cluster, "scout")["items"] if i["id"] == expected.review_item)
    # Its named REVIEWER collaborator (ben) is asked first, ahead of the objective's reviewBy.
    assert (review["review"] or {}).get("kind") == "review", review
    assert review["review"]["reviewerId"] == "ben", review

    # Engagements: one journal entry each, final `engaged`, asking the right member, one
    # outbox line each (and nothing else in the outbox).
    trackings = {tracking_id_for("scout", did, 1): who for did, who in expected.engagements.items()}
    assert sorted(journal_work_entries(r)) == sorted(trackings)
    lines = read_outbox(cluster.outbox)
    sent = Counter(str(line["idempotencyId"]) for line in lines)
    assert len(lines) == len(trackings), lines
    with cluster.http() as http:
        for tracking, who in trackings.items():
            final = wait_final(http, tracking, timeout=60)
            assert final["state"] == "engaged", final
            asked = [t["memberId"] for t in final["decision"]["targets"]]
            assert asked == [who], (tracking, asked)
            idem = final["send"]["idempotencyId"]
            assert sent[idem] == 1, (idem, sent)
            line = next(x for x in lines if x["idempotencyId"] == idem)
            assert line["memberIds"] == [who], line

    # The audit: no (run id, entry) line twice, each run written once, per objective the
    # dispatch ids it names are exactly the expected ones.
    everything = audit(cluster)
    assert len(everything) < 500, "the audit outgrew one page: read it in full"
    seen = Counter((e["runId"], json.dumps(e["entry"], sort_keys=True)) for e in everything)
    twice = [k for k, n in seen.items() if n > 1]
    assert not twice, f"audit lines written twice: {twice}"
    runs = {e["runId"] for e in everything}
    assert r.zcard(RUNS) == len(runs)
    named = {e["entry"]["dispatchId"] for e in everything if e["entry"].get("dispatchId")}
    assert named == {*expected.engagements, *(i for s in expected.backlogs.values() for i in s)}
    by_objective: dict[str, set[str]] = {}
    for e in everything:
        by_objective.setdefault(e["entry"]["objectiveKey"], set()).add(e["runId"])
    for key in OBJECTIVES:
        assert key in by_objective, f"{key} was never audited"
        per = audit(cluster, key)
        assert len(per) == sum(1 for e in everything if e["entry"]["objectiveKey"] == key)

    # trial-activation: its candidates refused at honesty, nothing dispatched.
    trial = [e["entry"] for e in audit(cluster, "trial-activation")]
    candidates = [e for e in trial if e["kind"] == "candidate"]
    assert candidates and all(
        e["admitted"] is False and e["gate"] == "honesty" for e in candidates
    ), candidates
    assert not any(e.get("dispatchId") for e in trial), trial
    return {
        "audit lines": len(everything),
        "runs": len(runs),
        **{f"runs of {k}": len(v) for k, v in sorted(by_objective.items())},
    }


def audit_is_stable(cluster: Cluster, before: int, tmp_path: Path) -> None:
    """Three more ticks add no audit line: a run that decides the same is not written again."""
    start = ticks_run(tmp_path)
    deadline = time.monotonic() + 60
    while ticks_run(tmp_path) < start + SETTLE_TICKS and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ticks_run(tmp_path) >= start + SETTLE_TICKS
    assert len(audit(cluster)) == before, "a tick that decided nothing new wrote the audit"


def test_1_samples_over_http_and_beat_ticks_dispatch_exactly_what_the_gates_allow(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """One beat, one steward worker, one stage worker: the four demo cases end as the gates
    say, each dispatch once, and further ticks write nothing."""
    # Beat starts once the samples are in: a tick before them would see no measurement and
    # rightly dispatch each objective's drift item, which this test does not expect.
    commands = {"ingress": INGRESS, "steward": STEWARD, "stages": STAGES}
    with start_cluster(commands, redis_url, tmp_path, **ENV) as cluster:
        expected = post_samples(cluster)
        with processes(cluster, [BEAT], tmp_path, "beat"):
            took, ticks = wait_dispatched(cluster, redis_client, expected, tmp_path)
            figures = check_holds_exactly_what_the_gates_allow(cluster, redis_client, expected)
            audit_is_stable(cluster, figures["audit lines"], tmp_path)
        ticks = ticks_run(tmp_path)
    print(
        f"\nSTEWARD test 1: all dispatched {took:.1f}s after the samples; {ticks} ticks run in "
        f"all; {figures}"
    )


def test_2_two_beats_and_two_steward_workers_dispatch_nothing_twice(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Two beats (one leads, the other stands by) and two steward workers, with three
    `seatwire steward run` processes started at once beside them (each a run of every
    objective outside beat, unfenced): the same dispatches, each once; the audit never holds
    a line twice."""
    commands = {
        "ingress": INGRESS,
        "steward-a": STEWARD,
        "steward-b": STEWARD,
        "stages": STAGES,
    }
    with start_cluster(commands, redis_url, tmp_path, **ENV) as cluster, ExitStack() as later:
        expected = post_samples(cluster)
        later.enter_context(processes(cluster, [BEAT, BEAT], tmp_path, "beat"))
        runs = [
            subprocess.Popen(
                [SEATWIRE, "steward", "run"],
                env=cluster.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            for _ in range(3)
        ]
        try:
            took, _ = wait_dispatched(cluster, redis_client, expected, tmp_path)
            codes = [p.wait(timeout=60) for p in runs]
            figures = check_holds_exactly_what_the_gates_allow(cluster, redis_client, expected)
            audit_is_stable(cluster, figures["audit lines"], tmp_path)
        finally:
            stop_processes(runs)
        per_worker = {log.name: ticks_run_in(log) for log in sorted(tmp_path.glob("steward*.log"))}
    print(
        f"\nSTEWARD test 2: all dispatched {took:.1f}s after the samples; ticks per steward "
        f"worker {per_worker}; 3 concurrent CLI runs exited {codes}; {figures}"
    )
    assert codes == [0, 0, 0]
    assert sum(per_worker.values()) > 0, "no steward worker ran a tick"


def ticks_run_in(log: Path) -> int:
    return sum(
        1
        for line in log.read_text(errors="replace").splitlines()
        if TICK_DONE in line and "succeeded" in line
    )


def test_3_a_steward_worker_killed_mid_run_then_the_run_repeated_loses_and_doubles_nothing(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """A steward worker (solo pool: the task runs in the worker process itself) SIGKILLs
    itself right after the first dispatch of deploy-lead-time; once its lease lapses, a
    healthy worker's tick repeats the run: both of deploy-lead-time's dispatches exist exactly
    once, the crashed run is audited once, and the other cases end as in test 1."""
    faulty = [*STEWARD[:-2], "--pool", "solo", "--concurrency", "1"]
    commands = {"ingress": INGRESS, "stages": STAGES, "steward-faulty": faulty}
    with (
        start_cluster(
            commands,
            redis_url,
            tmp_path,
            SEATWIRE_FAULTPOINTS="steward:after_dispatch:always:deploy-lead-time",
            **ENV,
        ) as cluster,
        ExitStack() as later,
    ):
        proc = cluster.procs[list(commands).index("steward-faulty")]
        expected = post_samples(cluster)
        later.enter_context(processes(cluster, [BEAT], tmp_path, "beat"))
        started = time.monotonic()
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail("the faulty steward worker never reached its crash point", pytrace=False)
        died = time.monotonic() - started
        assert code == -signal.SIGKILL, code
        # Killed between deploy-lead-time's two dispatches: exactly one of them was done.
        self_done = expected.self_item in {i["id"] for i in backlog(cluster, "scout")["items"]}
        handoff_done = redis_client.exists(
            keys.journal(tracking_id_for("scout", expected.handoff, 1))
        )
        assert bool(self_done) != bool(handoff_done), (self_done, handoff_done)
        crashed_run = {e["runId"] for e in audit(cluster, "deploy-lead-time")}
        assert len(crashed_run) == 1, "the run's audit is written ahead of its dispatches"
        lease_left = redis_client.pttl(keys.steward_lease("deploy-lead-time"))
        # The healthy worker has no fault point (an empty SEATWIRE_FAULTPOINTS injects none).
        with processes(cluster, [STEWARD], tmp_path, "steward-healthy", SEATWIRE_FAULTPOINTS=""):
            took, _ = wait_dispatched(cluster, redis_client, expected, tmp_path)
            figures = check_holds_exactly_what_the_gates_allow(cluster, redis_client, expected)
            audit_is_stable(cluster, figures["audit lines"], tmp_path)
            healthy_ticks = ticks_run_in(tmp_path / "steward-healthy-0.log")
        deploy_runs = {e["runId"] for e in audit(cluster, "deploy-lead-time")}
        summary = audit_summary(cluster, "deploy-lead-time")
    print(
        f"\nSTEWARD test 3: the faulty worker died by SIGKILL {died:.1f}s after the samples "
        f"({'SELF' if self_done else 'HANDOFF'} dispatched first, its lease {lease_left} ms "
        f"from lapsing); everything dispatched {took:.1f}s after the healthy worker started, "
        f"{healthy_ticks} ticks of it; {figures}"
    )
    # The crashed run is there once (its repeat wrote nothing), then the next tick's run that
    # finds the work in flight: the same two runs as with no crash (test 1).
    assert crashed_run <= deploy_runs
    assert figures["runs of deploy-lead-time"] == 2, summary
