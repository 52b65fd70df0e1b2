"""5. The decision: plan it, judge it against the guardrails once, conclude it. Pure.

`plan_engagement` is everything up to the guardrails; `conclude_engagement` applies one
verdict to a plan. `decide_engagement` is all of it in one call: plan, the verdict of the
context's ledger rows (`check_guardrails`), conclude.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from contracts.engagement import EngagementDecision, GuardrailSummary, Mention
from contracts.guardrails import GuardrailVerdict
from contracts.work import WorkReport
from pipeline.engagement.ask import compose
from pipeline.engagement.context import EngagementContext, seed_degraded, seed_now_ms
from pipeline.engagement.surface import place
from pipeline.engagement.targets import route
from pipeline.engagement.triggers import Triggered, triggered
from pipeline.engagement.work import Work
from pipeline.guardrails import check_guardrails, dedupe_key_for


class _Common(TypedDict, total=False):
    """The fields every decision about one piece of work carries, whatever its outcome."""

    work_id: str
    considered_not_engaged: tuple[str, ...]  # only when somebody was considered


def plan_engagement(
    work: WorkReport | Mapping[str, object], ctx: EngagementContext
) -> EngagementDecision:
    """Whether to engage anyone, whom, where and in what words, before the guardrails.

    An engaging plan names its targets, surface, dedupe key and body, and has no attempt yet:
    `conclude_engagement` gives it one (or turns it into a refusal). A plan that does not
    engage (nothing fired, or nobody to ask) is already final.
    """
    w = Work.of(work)
    found = triggered(w)
    if not found.fired:
        return _nobody(w, found, now_ms=ctx.now_ms, degraded=ctx.degraded)
    return _engaging(w, found, ctx)


def conclude_engagement(plan: EngagementDecision, verdict: GuardrailVerdict) -> EngagementDecision:
    """A plan after the guardrails: with its attempt when allowed; when refused, a
    non-engagement that still names the targets, surface and dedupe key it would have used.

    A plan that does not engage passes through unchanged.
    """
    if not plan.engage:
        return plan
    if verdict.allowed:
        # The dedupe key is timeless; the attempt ordinal is what lets a re-ask after the
        # re-engage window reach the wire instead of colliding with the first ask's id.
        return plan.model_copy(update={"attempt": verdict.attempt})
    return EngagementDecision(
        trigger=plan.trigger,
        reason_code=verdict.code,
        reason=verdict.detail,
        targets=plan.targets,
        surface=plan.surface,
        work_id=plan.work_id,
        dedupe_key=plan.dedupe_key,
        guardrail=GuardrailSummary(
            code=verdict.code or "", detail=verdict.detail, counts=verdict.counts
        ),
        why=(*plan.why, f"guardrail {verdict.code}: {verdict.detail}"),
        degraded=plan.degraded,
        considered_not_engaged=plan.considered_not_engaged,
        now_ms=plan.now_ms,
    )


# An older name for it, kept for importers; the same function.
apply_guardrail = conclude_engagement


def decide_engagement(
    work: WorkReport | Mapping[str, object] | object,
    ctx: EngagementContext | Mapping[str, object] | object,
) -> EngagementDecision:
    """Decide whether to engage anyone, whom and where, or record why nobody.

    ``ctx`` (`EngagementContext`, dict or object): me, directory, channels, ledger (rows; the
    guardrails judge them, an absent ledger as an empty one), nowMs
    (required: this function has no clock), limits, supervisorId, maxTargets, degraded.
    """
    now_ms = seed_now_ms(ctx)
    w = Work.of(work)
    found = triggered(w)
    if not found.fired:
        # Only a decision that routes reads the org, so a plain member list is indexed (and
        # the rest of the context read) for those alone.
        return _nobody(w, found, now_ms=now_ms, degraded=seed_degraded(ctx))
    context = EngagementContext.of(ctx)
    plan = _engaging(w, found, context)
    return conclude_engagement(plan, _judge_rows(plan, context)) if plan.engage else plan


def _judge_rows(plan: EngagementDecision, ctx: EngagementContext) -> GuardrailVerdict:
    """The guardrails' verdict on an engaging plan from the context's ledger rows."""
    return check_guardrails(
        ctx.ledger or (),
        now_ms=ctx.now_ms,
        dedupe_key=plan.dedupe_key or "",
        work_id=plan.work_id,
        seat_id=ctx.me,
        targets=plan.targets,
        creates_room=plan.surface == "new_room",
        limits=ctx.limits,
    )


def _opening(w: Work, found: Triggered) -> tuple[list[str], _Common]:
    """The why lines every decision starts with, and the fields every decision carries."""
    why = [f"trigger {s.trigger} did not fire: {s.code}: {s.detail}" for s in found.suppressed]
    common = _Common(work_id=w.id)
    # The FYI class, named: considered and declined is a stronger statement than not thought of.
    fyi = w.interested_parties
    if fyi:
        common["considered_not_engaged"] = fyi
        plural = "party" if len(fyi) == 1 else "parties"
        why.append(
            f"{len(fyi)} interested {plural} ({', '.join(fyi)}) considered and not messaged: "
            "nothing they must do depends on this, so it belongs where they can pull it"
        )
    return why, common


def _nobody(
    w: Work, found: Triggered, *, now_ms: int, degraded: tuple[str, ...]
) -> EngagementDecision:
    """Nothing fired: the first suppression is the reason, or the work is self-contained."""
    why, common = _opening(w, found)
    if found.suppressed:
        first = found.suppressed[0]
        code, reason = first.code, first.detail
    else:
        # Say what was examined, so the row proves the threshold was applied.
        why.append(_examined(w))
        code = "self_contained"
        reason = "nobody's action is a precondition here; the work goes on by itself"
    return EngagementDecision(
        **common, now_ms=now_ms, why=tuple(why), degraded=degraded, reason_code=code, reason=reason
    )


def _examined(w: Work) -> str:
    blocker = (w.blocker.kind or "unspecified") if w.blocker is not None else "none"
    review = "required" if w.review is not None and w.review.required else "none"
    commitment = "at risk" if w.commitment is not None and w.commitment.at_risk else "none"
    return (
        f"no trigger fired: state={w.state or 'in_progress'}, blocker={blocker}, "
        f"risk={'+'.join(w.risks) or 'none'}, review={review}, commitment={commitment}; "
        "nobody's action or consent is a precondition, so nobody is interrupted"
    )


def _engaging(w: Work, found: Triggered, ctx: EngagementContext) -> EngagementDecision:
    """A trigger fired: who, where and what, or a loud `unroutable` when nobody can be asked."""
    why, common = _opening(w, found)
    trigger = found.fired[0]
    why.append(f"trigger {trigger.trigger} ({trigger.code}): {trigger.detail}")
    why.extend(f"also firing: {f.trigger} ({f.code})" for f in found.fired[1:])
    routed = route(
        w, trigger, ctx.directory, ctx.me, supervisor_id=ctx.supervisor_id, cap=ctx.max_targets
    )
    why.extend(routed.why)
    targets = routed.targets
    if not targets:
        # Loud: a blocked piece of work with nobody to ask is a provisioning gap.
        return EngagementDecision(
            **common,
            now_ms=ctx.now_ms,
            trigger=trigger.trigger,
            why=tuple(why),
            degraded=(*ctx.degraded, "engagement_unroutable"),
            reason_code="unroutable",
            reason=f"{trigger.trigger} fired but nobody in the directory owns this and the "
            "seat has no supervisor: the ask has no addressee, an org gap rather than a quiet no",
        )
    placed = place(w, [t.member_id for t in targets], ctx.channels, ctx.me)
    why.append(f"surface {placed.surface}: {placed.why}")
    return EngagementDecision(
        **common,
        now_ms=ctx.now_ms,
        trigger=trigger.trigger,
        why=tuple(why),
        degraded=ctx.degraded,
        engage=True,
        reason_code=trigger.code,
        reason=trigger.detail,
        targets=targets,
        surface=placed.surface,
        channel_id=placed.channel_id,
        thread_root_id=placed.thread_root_id,
        room_name=placed.room_name,
        durable_channel=placed.durable_channel is True,
        member_ids=placed.member_ids,
        # Everyone who must act is tagged: an unmentioned name in a busy room is not an ask.
        mentions=tuple(Mention(member_id=t.member_id) for t in targets),
        body=compose(w, trigger.trigger, trigger.detail, [t.name for t in targets]),
        dedupe_key=dedupe_key_for(w.id, trigger.code, targets),
    )
