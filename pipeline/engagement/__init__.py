"""The engagement decision: whether a named person must act, who, where, in what words.

See docs/architecture.md, "Engagement".

Pure: work and context in, an `EngagementDecision` out. No clock (``nowMs`` is required in
the context), no I/O. The threshold: engage only when a specific, named person's action or
consent is a precondition for the work, and the seat cannot supply it itself. Anything below
it is an explicit "nobody" with a reason code, never a silent branch.

One module per step, each callable alone with plain camelCase dicts (seats written against
the original JavaScript contract send exactly those) as well as the contracts:

    triggers   evaluate_triggers   1. whether: which trigger fires, what nearly did and why not
    targets    resolve_targets     2. who: explicit, ownership, expertise, supervisory
    directory  Directory           the members, indexed once per org load for the ladder
    surface    choose_surface      3. where: reply in place, DM, existing room, new room
               Rooms               the channels with their member sets, built once
    ask        compose_ask         4. what it says: a fixed template
    decide     decide_engagement   5. all of it, ending in the guardrails
    context    EngagementContext   everything but the work, typed
    work       Work                the work report as the decision reads it, typed

Two phases, so the shell judges the guardrails exactly once. `decide_engagement(work, ctx)`
is the one-call form (work and context in, decision out) and judges the context's ledger
rows itself. The engagement stage instead reads the ledger's tally from Redis, which needs
the plan's dedupe key, targets and surface first:

    plan = plan_engagement(env.report, EngagementContext(me=..., directory=view.directory,
                           channels=view.rooms, now_ms=..., limits=..., degraded=...))
    if plan.engage:
        counted = ledger.tally(decision=plan, seat_id=me, now_ms=plan.now_ms)
        verdict = judge(counted, now_ms=plan.now_ms, work_id=plan.work_id, seat_id=me,
                        creates_room=plan.surface == "new_room", limits=limits)
        decision = conclude_engagement(plan, verdict)

A plan that does not engage is final as it is (`conclude_engagement` passes it through). An
engaging plan has no attempt yet; a shell that cannot read the tally and goes on anyway must
still conclude it (the verdict of an empty ledger, `check_guardrails((), ...)`, is what
`decide_engagement` gives without rows: allowed, attempt 1).
"""

from __future__ import annotations

from typing import Any

from pipeline.engagement.ask import compose_ask
from pipeline.engagement.context import EngagementContext
from pipeline.engagement.decide import (
    apply_guardrail,
    conclude_engagement,
    decide_engagement,
    plan_engagement,
)
from pipeline.engagement.directory import ENGAGEABLE_STATUSES, Directory, tokens
from pipeline.engagement.surface import SURFACES, Rooms, choose_surface
from pipeline.engagement.surface import _rooms as _rooms  # bench/decision.py times it
from pipeline.engagement.targets import MAX_TARGETS, resolve_targets
from pipeline.engagement.triggers import (
    OTHER_OWNED_BLOCKERS,
    TRIGGER_RANK,
    TRIGGERS,
    evaluate_triggers,
)
from pipeline.engagement.work import RISK_KINDS

JSON = dict[str, Any]  # the module's old alias for a camelCase object, kept for importers

__all__ = [
    "ENGAGEABLE_STATUSES",
    "JSON",
    "MAX_TARGETS",
    "OTHER_OWNED_BLOCKERS",
    "RISK_KINDS",
    "SURFACES",
    "TRIGGERS",
    "TRIGGER_RANK",
    "Directory",
    "EngagementContext",
    "Rooms",
    "apply_guardrail",
    "choose_surface",
    "compose_ask",
    "conclude_engagement",
    "decide_engagement",
    "evaluate_triggers",
    "plan_engagement",
    "resolve_targets",
    "tokens",
]
