"""1. Whether: which of the four triggers the work fires, and which nearly fired and why not. Pure.

The threshold: engage only when a specific, named person's action or consent is a
precondition for the work, and the seat cannot supply it itself. A trigger that does not fire
is still recorded (`Suppressed`), so "considered and declined" is never silence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from contracts.work import WorkReport
from pipeline.engagement.values import text
from pipeline.engagement.work import Work

TRIGGERS = (
    "irreversible_or_external",
    "blocked_on_other",
    "mandatory_review",
    "commitment_at_risk",
)
# Ordered by what it costs NOT to engage: an unsafe act that cannot be undone, then work
# stopped dead, then an artefact that cannot land, then someone acting on stale news.
TRIGGER_RANK = {name: rank for rank, name in enumerate(TRIGGERS)}

# Blockers that belong to someone else by definition. `capacity` is deliberately absent:
# being busy is the seat's own queue, unless the blocker names an explicit owner.
OTHER_OWNED_BLOCKERS = frozenset({"decision", "access", "information", "approval"})

_CONSENT = "irreversible_or_external"  # its fired entry names no owner: consent is the approver's


class FiredSeed(TypedDict):
    """A fired trigger as a camelCase dict."""

    trigger: str
    code: str
    scope: str
    detail: str
    ownerId: NotRequired[str | None]


class SuppressedSeed(TypedDict):
    trigger: str
    code: str
    detail: str


class TriggerVerdict(TypedDict):
    """`evaluate_triggers`'s answer: fired by rank, and every suppression in check order."""

    fired: list[FiredSeed]
    suppressed: list[SuppressedSeed]


@dataclass(frozen=True, slots=True)
class Fired:
    trigger: str
    code: str
    scope: str
    detail: str
    owner_id: str | None = None

    @classmethod
    def of(cls, seed: Fired | Mapping[str, object] | None) -> Fired:
        """A fired trigger, from the contract or its camelCase dict, or none."""
        if isinstance(seed, Fired):
            return seed
        t = seed or {}
        return cls(
            trigger=text(t.get("trigger")),
            code=text(t.get("code")),
            scope=text(t.get("scope")),
            detail=text(t.get("detail")),
            owner_id=text(t.get("ownerId")) or None,
        )

    def seed(self) -> FiredSeed:
        out = FiredSeed(trigger=self.trigger, code=self.code, scope=self.scope, detail=self.detail)
        if self.trigger != _CONSENT:
            out["ownerId"] = self.owner_id
        return out


@dataclass(frozen=True, slots=True)
class Suppressed:
    trigger: str
    code: str
    detail: str

    def seed(self) -> SuppressedSeed:
        return SuppressedSeed(trigger=self.trigger, code=self.code, detail=self.detail)


@dataclass(frozen=True, slots=True)
class Triggered:
    fired: tuple[Fired, ...]  # sorted by TRIGGER_RANK: the first is the one acted on
    suppressed: tuple[Suppressed, ...]


def triggered(w: Work) -> Triggered:
    """Every trigger checked against the work, fired ones sorted by rank."""
    fired: list[Fired] = []
    suppressed: list[Suppressed] = []
    for check in (_risk, _blocked, _review, _commitment):
        verdict = check(w)
        if isinstance(verdict, Fired):
            fired.append(verdict)
        elif verdict is not None:
            suppressed.append(verdict)
    fired.sort(key=lambda f: TRIGGER_RANK.get(f.trigger, 9))
    return Triggered(tuple(fired), tuple(suppressed))


def evaluate_triggers(work: WorkReport | Mapping[str, object] | object = None) -> TriggerVerdict:
    """Every trigger checked against the work: what fired, and what nearly fired and why not.

    Returns ``{"fired": [...], "suppressed": [...]}``, fired sorted by trigger rank.
    """
    found = triggered(Work.of(work))
    return {
        "fired": [f.seed() for f in found.fired],
        "suppressed": [s.seed() for s in found.suppressed],
    }


def _risk(w: Work) -> Fired | Suppressed | None:
    if not w.risks:
        return None
    if w.state == "done":
        # Consent is only meaningful before the act; afterwards it belongs in the record.
        return Suppressed(
            _CONSENT,
            "act_already_taken",
            "the risky step has already happened; asking for consent now would "
            "be for show, so it goes on the record instead of into anyone's messages",
        )
    return Fired(
        _CONSENT,
        "consent_required:" + "+".join(w.risks),
        w.scope or (w.blocker.scope if w.blocker else "") or w.title,
        f"the next step is {' and '.join(w.risks)} and there is no undoing it",
    )


def _blocked(w: Work) -> Fired | Suppressed | None:
    if w.state not in ("blocked", "failed"):
        return None
    b = w.blocker
    if b is None:
        return Suppressed(
            "blocked_on_other",
            "blocker_unnamed",
            "the work says it is blocked but does not say on what, and nobody "
            "can be asked for something unnamed",
        )
    if not (b.kind in OTHER_OWNED_BLOCKERS or b.owner_id):
        return Suppressed(
            "blocked_on_other",
            "blocker_is_mine",
            f'a "{b.kind or "unknown"}" blocker is the seat\'s own to clear; '
            "handing it to a person would be handing them the seat's work",
        )
    if not w.self_serve_exhausted:
        # Only an explicit `true` passes: a missing flag means "has not tried yet".
        return Suppressed(
            "blocked_on_other",
            "self_serve_available",
            "the seat has not yet used up what it can do on its own; asking "
            "now would give a person the seat's own next step",
        )
    return Fired(
        "blocked_on_other",
        f"blocked:{b.kind or 'unspecified'}",
        b.scope or w.scope or w.title,
        b.detail or _waits_on(b.kind),
        b.owner_id or None,
    )


def _waits_on(kind: str) -> str:
    """What an other-owned blocker leaves the work waiting for, in words that read for any
    kind (a decision, access, information, an approval) or none."""
    needs = f"the {kind} it needs" if kind else "what it needs"
    return f"blocked until another party gives {needs}"


def _review(w: Work) -> Fired | Suppressed | None:
    rv = w.review
    if rv is not None and rv.required:
        return Fired(
            "mandatory_review",
            f"review_required:{rv.kind or 'unspecified'}",
            rv.scope or w.scope or w.title,
            rv.detail or "a second reviewer is required before this lands",
            rv.reviewer_id or None,
        )
    if rv is not None and rv.requested:
        return Suppressed(
            "mandatory_review",
            "review_optional",
            "a review would be welcome but is not required, so the work can land without one",
        )
    return None


def _commitment(w: Work) -> Fired | Suppressed | None:
    c = w.commitment
    if c is None or not c.to_member_id:
        return None
    if not (c.at_risk or w.state == "failed"):
        return Suppressed(
            "commitment_at_risk",
            "commitment_on_track",
            "the commitment is on track; an unrequested progress ping is noise",
        )
    failed = w.state == "failed"
    return Fired(
        "commitment_at_risk",
        "commitment_failed" if failed else "commitment_slipping",
        w.scope or w.title,
        "the run failed while the person who asked is still waiting for it"
        if failed
        else "a promise made to a named person is going to be missed",
        c.to_member_id,
    )
