"""The goal steward's decisions: gap, admission, staffing. Pure: no I/O, no clock.

See docs/architecture.md, "The goal steward".

One module per step, each callable alone with plain camelCase mappings or the contracts of
`contracts.goals`, each returning a contract whose `to_wire()` is the camelCase object a
caller reads:

    kpi        gap_for              how far the objective is from target, trend, staleness
    admission  decide_for_gap       what a gap should produce: none/create/escalate/log/drift
               admit                the eight gates a candidate must clear, with the trail
    classify   classify_work_item   SELF / COLLABORATE / HANDOFF / NEEDS_REVIEW
               capability_gaps      what this seat cannot reach, and which peer can
               collaborators_of     an object's collaborators, normalised
    js                              JavaScript's reading and printing rules, shared

A steward run computes the gap, decides, then admits candidates in order (carrying
`admittedThisRun` and `admittedItems` forward) and classifies the admitted ones; acting on the
result is the shell's.
"""

from pipeline.goals.admission import (
    DUPLICATE_THRESHOLD,
    GATES,
    MAX_NEW_PER_RUN,
    MAX_OPEN_PER_OBJECTIVE,
    AdmissionContext,
    admit,
    decide_for_gap,
    title_similarity,
)
from pipeline.goals.classify import (
    COLLABORATOR_ROLES,
    GATED_CLASSES,
    WORK_DISPOSITIONS,
    ClassifyContext,
    capability_gaps,
    classify_work_item,
    collaborators_of,
    is_work_disposition,
)
from pipeline.goals.kpi import (
    CADENCE_PERIOD_MS,
    TREND_EPSILON_RATIO,
    WORK_CREATING_SOURCES,
    gap_for,
)

__all__ = [
    "CADENCE_PERIOD_MS",
    "COLLABORATOR_ROLES",
    "DUPLICATE_THRESHOLD",
    "GATED_CLASSES",
    "GATES",
    "MAX_NEW_PER_RUN",
    "MAX_OPEN_PER_OBJECTIVE",
    "TREND_EPSILON_RATIO",
    "WORK_CREATING_SOURCES",
    "WORK_DISPOSITIONS",
    "AdmissionContext",
    "ClassifyContext",
    "admit",
    "capability_gaps",
    "classify_work_item",
    "collaborators_of",
    "decide_for_gap",
    "gap_for",
    "is_work_disposition",
    "title_similarity",
]
