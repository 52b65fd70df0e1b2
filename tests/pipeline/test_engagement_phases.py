"""The engagement decision in two phases (plan, then conclude with one guardrail verdict) and
its typed context: the one-call `decide_engagement` is exactly plan + `check_guardrails` +
conclude, on every scenario of test_engagement.py and on random ledgers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipeline.engagement as engagement
from contracts import Channel, EngagementDecision, GuardrailVerdict, LedgerRow, Member, WorkReport
from pipeline.engagement import (
    Directory,
    EngagementContext,
    Rooms,
    conclude_engagement,
    decide_engagement,
    plan_engagement,
)
from pipeline.guardrails import check_guardrails, dedupe_key_for, judge, tally
from tests.pipeline.test_engagement import HOUR, ME, NOW, blocked_work, ctx, member

KEY = dedupe_key_for("w1", "blocked:decision", ["owen"])


def row(ago_ms: int, **kw: Any) -> dict[str, Any]:
    """An engaged ledger row for owen about w1, `ago_ms` before NOW."""
    base: dict[str, Any] = {
        "atMs": NOW - ago_ms,
        "seatId": ME,
        "workId": "w1",
        "dedupeKey": KEY,
        "engaged": True,
        "outcome": "engaged",
        "targets": [{"memberId": "owen"}],
    }
    base.update(kw)
    return base


THREE = [member(ME), member("owen"), member("ana"), member("bo")]
ROOMS = [
    {"id": "C1", "kind": "PUBLIC", "name": "eng", "memberIds": [ME, "owen", "ana", "x"]},
    {"id": "C2", "kind": "PRIVATE", "name": "core", "memberIds": [ME, "owen", "ana"]},
]
# Ten engagements of ten other people by this seat in the last hour.
OTHERS = [
    row(60_000 * (i + 1), workId=f"o{i}", dedupeKey=f"k{i}", targets=[{"memberId": f"p{i}"}])
    for i in range(10)
]

# (work, ctx) for every scenario test_engagement.py decides.
SCENARIOS: list[tuple[str, Any, Any]] = [
    ("self_contained", {"id": "w0", "title": "Tidy"}, ctx()),
    ("blocker_is_mine", blocked_work(blocker={"kind": "capacity"}), ctx()),
    ("self_serve_available", blocked_work(selfServeExhausted=False), ctx()),
    ("blocker_unnamed", {"id": "w1", "state": "blocked"}, ctx()),
    ("act_already_taken", {"id": "w1", "state": "done", "risk": {"external": True}}, ctx()),
    ("review_optional", {"id": "w1", "review": {"requested": True}}, ctx()),
    ("on_track", {"id": "w1", "commitment": {"toMemberId": "owen"}}, ctx()),
    ("fyi", blocked_work(interestedParties=["ivy", "", "jo"]), ctx()),
    ("unroutable", blocked_work(blocker={"kind": "decision"}), ctx(degraded=["x"])),
    ("dm", blocked_work(), ctx()),
    ("also_firing", blocked_work(review={"required": True, "reviewerId": "ana"}), ctx()),
    (
        "new_durable_room",
        blocked_work(approverId="ana", review={"reviewerId": "bo"}, durable=True),
        ctx(directory=THREE),
    ),
    (
        "reply_in_place",
        blocked_work(origin={"channelId": "C2", "threadRootId": "t1"}),
        ctx(channels=ROOMS),
    ),
    ("existing_channel", blocked_work(approverId="ana"), ctx(directory=THREE, channels=ROOMS)),
    ("supervisor", blocked_work(blocker={"kind": "decision"}), ctx(supervisorId="lead")),
    ("max_targets", blocked_work(approverId="ana", review={"reviewerId": "bo"}), ctx(maxTargets=2)),
    (
        "contracts",
        WorkReport.model_validate(blocked_work(approverId="ana")),
        ctx(
            directory=[Member.model_validate(m) for m in THREE],
            channels=[Channel.model_validate(c) for c in ROOMS],
        ),
    ),
    (
        "prepared",
        blocked_work(approverId="ana"),
        ctx(directory=Directory.of(THREE), channels=Rooms.of(ROOMS)),
    ),
    (
        "snake_case_object",
        blocked_work(),
        SimpleNamespace(me=ME, directory=[member("owen")], now_ms=NOW, ledger=[]),
    ),
    ("already_engaged", blocked_work(), ctx(ledger=[row(HOUR)])),
    ("attempt_two", blocked_work(), ctx(ledger=[LedgerRow.model_validate(row(7 * HOUR))])),
    ("limits", blocked_work(), ctx(ledger=[row(HOUR)], limits={"reengageAfterMs": 1000})),
    ("seat_limit", blocked_work(), ctx(ledger=OTHERS)),
    ("other_seat", blocked_work(), ctx(ledger=[{**r, "seatId": "seat-2"} for r in OTHERS])),
    (
        "room_limit",
        blocked_work(approverId="ana"),
        ctx(
            directory=THREE,
            ledger=[row(HOUR, dedupeKey=f"r{i}", roomCreated=True) for i in range(2)],
        ),
    ),
    ("no_ledger", blocked_work(), {k: v for k, v in ctx().items() if k != "ledger"}),
]


def two_phase(work: Any, raw_ctx: Any) -> EngagementDecision:
    """plan -> the guardrails judged once from the context's rows -> conclude."""
    context = EngagementContext.of(raw_ctx)
    plan = plan_engagement(work, context)
    if not plan.engage:
        return plan
    assert plan.dedupe_key is not None
    verdict = check_guardrails(
        context.ledger or (),
        now_ms=context.now_ms,
        dedupe_key=plan.dedupe_key,
        work_id=plan.work_id,
        seat_id=context.me,
        targets=plan.targets,
        creates_room=plan.surface == "new_room",
        limits=context.limits,
    )
    return conclude_engagement(plan, verdict)


def same(a: EngagementDecision, b: EngagementDecision) -> None:
    assert a.model_dump_json(by_alias=True) == b.model_dump_json(by_alias=True)
    assert a.model_fields_set == b.model_fields_set


@pytest.mark.parametrize(("name", "work", "raw_ctx"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_decide_is_plan_then_one_verdict_then_conclude(name: str, work: Any, raw_ctx: Any) -> None:
    """On every scenario, the one-call decision is the plan concluded with the verdict
    of the context's ledger rows, byte for byte."""
    same(decide_engagement(work, raw_ctx), two_phase(work, raw_ctx))


def test_the_scenarios_cover_every_outcome() -> None:
    """The table reaches nobody, unroutable, every surface, an attempt and a refusal."""
    decided = [decide_engagement(w, c) for _, w, c in SCENARIOS]
    assert {d.surface for d in decided} == {
        "none",
        "dm",
        "reply_in_place",
        "existing_channel",
        "new_room",
    }
    codes = {d.reason_code for d in decided}
    assert {"self_contained", "unroutable", "already_engaged", "rate_limited_seat"} <= codes
    assert {"rate_limited_rooms", "blocked:decision"} <= codes
    assert {d.attempt for d in decided if d.engage} == {1, 2}


rows_st = st.lists(
    st.builds(
        lambda ago, seat, work, key, outcome, who, room: row(
            ago, seatId=seat, workId=work, dedupeKey=key, outcome=outcome,
            targets=[{"memberId": who}], roomCreated=room,
        ),
        st.integers(0, 30 * HOUR),
        st.sampled_from([ME, "seat-2"]),
        st.sampled_from(["w1", "o"]),
        st.sampled_from([KEY, "other"]),
        st.sampled_from(["engaged", "reserved", "none", "shadowed"]),
        st.sampled_from(["owen", "ana", "bo"]),
        st.booleans(),
    ),
    max_size=12,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SCENARIOS), rows_st, st.integers(1, 4))
def test_decide_equals_two_phase_on_random_ledgers(
    scenario: tuple[str, Any, Any], rows: list[dict[str, Any]], per_target: int
) -> None:
    """Whatever the ledger and the limits, the one-call and the two-phase decisions agree."""
    _, work, raw_ctx = scenario
    if isinstance(raw_ctx, SimpleNamespace):
        raw_ctx = vars(raw_ctx) | {"nowMs": NOW}
    with_rows = {**raw_ctx, "ledger": rows, "limits": {"perTargetPerDay": per_target}}
    same(decide_engagement(work, with_rows), two_phase(work, with_rows))


def test_the_shell_flow_reads_the_tally_for_the_plan() -> None:
    """The shell plans, tallies the ledger for the plan's key and targets, judges once and
    concludes: the same decision as the one-call `decide_engagement` with those rows."""
    rows = [row(7 * HOUR), row(2 * HOUR, dedupeKey="k", targets=[{"memberId": "owen"}])]
    context = EngagementContext.of(ctx())
    plan = plan_engagement(blocked_work(), context)
    assert plan.engage and plan.attempt is None and plan.guardrail is None
    assert plan.dedupe_key == KEY and plan.body
    counted = tally(
        rows,
        now_ms=plan.now_ms,
        dedupe_key=plan.dedupe_key,
        work_id=plan.work_id,
        seat_id=ME,
        targets=plan.targets,
    )
    verdict = judge(
        counted,
        now_ms=plan.now_ms,
        work_id=plan.work_id,
        seat_id=ME,
        creates_room=plan.surface == "new_room",
    )
    concluded = conclude_engagement(plan, verdict)
    assert (concluded.engage, concluded.attempt) == (True, 2)
    same(concluded, decide_engagement(blocked_work(), ctx(ledger=rows)))


def test_a_plan_that_does_not_engage_is_final() -> None:
    """Conclusion passes a non-engaging plan through as it is, whatever the verdict."""
    plan = plan_engagement({"id": "w0"}, EngagementContext(now_ms=NOW, me=ME))
    refused = GuardrailVerdict(allowed=False, code="already_engaged", detail="no")
    assert conclude_engagement(plan, refused) is plan
    assert plan.reason_code == "self_contained"


def test_a_refused_plan_keeps_who_where_and_the_key() -> None:
    """A refusal names the targets, surface and dedupe key it would have used, and no body."""
    plan = plan_engagement(blocked_work(), EngagementContext.of(ctx()))
    refused = GuardrailVerdict(
        allowed=False, code="rate_limited_target", detail="owen: 4 in 24 h", counts={"x": 1}
    )
    out = conclude_engagement(plan, refused)
    assert (out.engage, out.reason_code, out.surface, out.dedupe_key) == (
        False,
        "rate_limited_target",
        "dm",
        KEY,
    )
    assert out.targets == plan.targets and out.body is None
    assert out.guardrail is not None and out.guardrail.counts == {"x": 1}
    assert engagement.apply_guardrail is conclude_engagement


# --------------------------------------------------------------------------- the context


def test_the_seed_context_shapes_read_alike() -> None:
    """A camelCase dict, a snake_case object and the typed context are the same context."""
    limits = {"reengageAfterMs": 5}
    raw = ctx(supervisorId="lead", maxTargets=2, degraded=["d"], limits=limits)
    obj = SimpleNamespace(
        me=ME,
        directory=raw["directory"],
        channels=[],
        ledger=[],
        now_ms=NOW,
        limits=limits,
        supervisor_id="lead",
        max_targets=2,
        degraded=["d"],
    )
    a, b = EngagementContext.of(raw), EngagementContext.of(obj)
    assert (a.me, a.now_ms, a.supervisor_id, a.max_targets, a.degraded) == (
        ME,
        NOW,
        "lead",
        2,
        ("d",),
    )
    assert a.limits.reengage_after_ms == 5 and a.ledger is None
    assert a == b
    assert EngagementContext.of(a) is a


def test_a_prepared_directory_and_rooms_are_taken_as_they_are() -> None:
    """The shell's indexes are reused by identity, never rebuilt or re-validated."""
    directory, rooms = Directory.of(THREE), Rooms.of(ROOMS)
    context = EngagementContext.of(ctx(directory=directory, channels=rooms))
    assert context.directory is directory and context.channels is rooms
    assert len(EngagementContext.of(ctx(directory=THREE)).directory) == 4


@pytest.mark.parametrize(("raw", "cap"), [(2, 2), (2.5, 3), ("2", 3), (True, 3), (None, 3)])
def test_max_targets_is_the_seeds_finite_number(raw: Any, cap: int) -> None:
    """A finite number caps the targets (a fraction at its ceiling); anything else means 3."""
    assert EngagementContext.of(ctx(maxTargets=raw)).max_targets == cap


@pytest.mark.parametrize("now", [None, "1700000000000", 1.5e12, True])
def test_the_context_has_no_clock(now: Any) -> None:
    """Without an integer nowMs neither a plain context nor the typed one is accepted."""
    raw = ctx(nowMs=now)
    with pytest.raises(ValueError, match="nowMs"):
        EngagementContext.of(raw)
    with pytest.raises(ValueError, match="nowMs"):
        EngagementContext(now_ms=now)


class _Unreadable:
    """A directory leg that fails when anything reads it."""

    def __iter__(self) -> Any:
        raise AssertionError("the directory was read")


def test_a_decision_where_nothing_fires_reads_no_org() -> None:
    """Only a decision that routes reads (and indexes) the directory."""
    d = decide_engagement({"id": "w0"}, ctx(directory=_Unreadable()))
    assert d.reason_code == "self_contained"
    with pytest.raises(AssertionError, match="directory was read"):
        decide_engagement(blocked_work(), ctx(directory=_Unreadable()))


def test_decide_accepts_the_typed_context() -> None:
    """`decide_engagement` takes an `EngagementContext` as well as a camelCase dict."""
    typed = EngagementContext.of(ctx(ledger=[row(HOUR)]))
    same(
        decide_engagement(blocked_work(), typed),
        decide_engagement(blocked_work(), ctx(ledger=[row(HOUR)])),
    )


# --------------------------------------------------------------------------- the package


OLD_NAMES = [
    # every public name of the single module, and the private one bench/decision.py times
    "ENGAGEABLE_STATUSES",
    "JSON",
    "MAX_TARGETS",
    "OTHER_OWNED_BLOCKERS",
    "RISK_KINDS",
    "SURFACES",
    "TRIGGERS",
    "TRIGGER_RANK",
    "Directory",
    "Rooms",
    "apply_guardrail",
    "choose_surface",
    "compose_ask",
    "decide_engagement",
    "evaluate_triggers",
    "resolve_targets",
    "tokens",
    "_rooms",
]


@pytest.mark.parametrize("name", OLD_NAMES)
def test_every_name_the_module_had_is_still_importable(name: str) -> None:
    """`from pipeline.engagement import X` keeps working for what importers use."""
    assert hasattr(engagement, name)


def test_the_constants_are_unchanged() -> None:
    assert engagement.SURFACES == ("reply_in_place", "dm", "existing_channel", "new_room")
    assert engagement.MAX_TARGETS == 3 and engagement.TRIGGER_RANK["blocked_on_other"] == 1
    assert engagement.RISK_KINDS == ("irreversible", "external", "financial")
