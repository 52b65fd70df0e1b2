"""Operator overrides of the goal steward's gates (issue 10 point 5): is this one allowed? Pure.

A named person (a member of the org file) may push ONE candidate of an `active` objective past
the wip, trend or budget gate (`OVERRIDABLE_GATES`); never past adoption (so a proposed or
retired objective is refused), honesty or provenance, nor freshness or dedupe. The candidate
is named by its title, matched by `candidate_key`, and must be one the steward knows: a
playbook entry of the objective, or a candidate its audit has rejected (the caller passes
those titles). The stored title is the known one, not the operator's typing of it.

    check_override   request + objective + members + known titles -> Override | OverrideRefusal
    against_active   the new override vs the active one of that candidate: recorded,
                     duplicate (the same by, reason and gates) or a 409 refusal
    override_audit_entry   the audit line that records the request itself (kind "override")

A refusal names its HTTP status, a stable code and the field to change; the caller writes
nothing on one. The override id is deterministic (`ovr_` + 16 hex of sha256 over objective,
candidate key, by, reason, gates and atMs), so it also serves as the audit's run id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from contracts.goals import Gate, Objective
from contracts.steward import (
    OVERRIDABLE_GATES,
    AuditEntry,
    OverridableGate,
    Override,
    OverrideNote,
    OverrideRequest,
)
from pipeline.goals.dispatch_ids import candidate_key

ID_PREFIX = "ovr_"
ID_SCHEME = "steward-override-v1"

Recorded = Literal["recorded", "duplicate"]


@dataclass(frozen=True, slots=True)
class OverrideRefusal:
    """Why an override request is refused: HTTP status, stable code, the field, a sentence."""

    status: int
    code: str
    field: str
    message: str


def override_id(
    objective_key: str,
    key: str,
    by: str,
    reason: str,
    gates: Iterable[OverridableGate],
    at_ms: int,
) -> str:
    """The deterministic id of one override: the same request at the same instant, the same id."""
    material = json.dumps(
        [ID_SCHEME, objective_key, key, by, reason, list(gates), at_ms], ensure_ascii=False
    )
    return ID_PREFIX + hashlib.sha256(material.encode()).hexdigest()[:16]


def check_override(
    request: OverrideRequest,
    objective: Objective | None,
    *,
    member_ids: Collection[str],
    rejected_titles: Iterable[str],
    now_ms: int,
    last_gates: Mapping[str, Gate | None] | None = None,
) -> Override | OverrideRefusal:
    """The override this request asks for, or why it is refused (404 for no such objective).
    `last_gates` maps a candidate key to the gate its newest audit line refused it at (None:
    its newest line was no gate's refusal); one refused at a gate no override passes is
    refused here, since the override could never let it through."""
    if objective is None:
        return OverrideRefusal(
            404, "unknown_objective", "objective", f"no objective {request.objective!r} in the org"
        )
    if not objective.is_active:
        return OverrideRefusal(
            409,
            "objective_not_active",
            "objective",
            f'objective "{objective.key}" is {objective.state}, not active — adoption cannot be '
            f"overridden, only {', '.join(OVERRIDABLE_GATES)}",
        )
    if request.by not in member_ids:
        return OverrideRefusal(
            422, "unknown_member", "by", f"by: {request.by!r} is not a member of the org"
        )
    title = known_title(request.candidate, objective, rejected_titles)
    if title is None:
        return OverrideRefusal(
            422,
            "unknown_candidate",
            "candidate",
            f"candidate: {request.candidate!r} is neither a playbook entry of "
            f'"{objective.key}" nor a candidate its audit has rejected',
        )
    key = candidate_key(title)
    gate = (last_gates or {}).get(key)
    if gate is not None and gate not in OVERRIDABLE_GATES:
        return OverrideRefusal(
            409,
            "not_overridable",
            "candidate",
            f"candidate: {title!r} was last refused at the {gate} gate, which no override "
            f"passes (only {', '.join(OVERRIDABLE_GATES)})",
        )
    return Override(
        id=override_id(objective.key, key, request.by, request.reason, request.gates, now_ms),
        objective_key=objective.key,
        candidate_key=key,
        candidate_title=title,
        gates=request.gates,
        by=request.by,
        reason=request.reason,
        at_ms=now_ms,
    )


def known_title(candidate: str, objective: Objective, rejected_titles: Iterable[str]) -> str | None:
    """The known title `candidate` names (same candidate key): playbook first, then the audit."""
    key = candidate_key(candidate)
    if not key:
        return None
    for title in (*(c.title for c in objective.playbook), *rejected_titles):
        if candidate_key(title) == key:
            return title
    return None


def against_active(proposed: Override, existing: Override | None) -> Recorded | OverrideRefusal:
    """Whether `proposed` may be recorded beside the candidate's current override, if any."""
    if existing is None or not existing.active:
        return "recorded"
    if (existing.by, existing.reason, existing.gates) == (
        proposed.by,
        proposed.reason,
        proposed.gates,
    ):
        return "duplicate"
    return OverrideRefusal(
        409,
        "override_exists",
        "candidate",
        f'candidate "{existing.candidate_title}" of "{existing.objective_key}" already has an '
        f"active override ({existing.id}, by {existing.by}); it is used by the next dispatch",
    )


def override_audit_entry(override: Override) -> AuditEntry:
    """The audit line of the override request itself: who, why, which gates, for what."""
    gates = ", ".join(override.gates)
    return AuditEntry(
        objective_key=override.objective_key,
        kind="override",
        reason=override.reason,
        candidate_title=override.candidate_title,
        candidate_key=override.candidate_key,
        note=f"{override.by} overrode {gates} for the next dispatch of this candidate",
        override=OverrideNote(
            id=override.id, by=override.by, reason=override.reason, gates=override.gates
        ),
    )
