"""Whose hands a piece of self-directed work needs: `classify_work_item`. Pure.

An admitted candidate is staffed one of four ways, by the first rule that applies:

    HANDOFF       another seat owns it, a collaborator is its DOER, or only a peer can reach
                  a capability it needs
    NEEDS_REVIEW  its output needs a signature: a gated action class or a named APPROVER
                  (before it runs), else a named REVIEWER or a `reviewBy` other than this seat
    COLLABORATE   a named CONTRIBUTOR works alongside this seat
    SELF          this seat's alone; a capability no peer covers travels with it as a gap

This vocabulary is for OUTBOUND work the seat made for itself; it is not the inbound
engagement's. Collaborators come from the candidate and from the objective it advances (an
objective-level REVIEWER reviews every task under it); this seat is never its own doer,
reviewer, approver or contributor. It decides, it does not act: dispatch is the shell's.

Inputs are camelCase mappings (read by JavaScript's rules, `pipeline.js`) or
the contracts (`WorkCandidate`, `Objective`, `Peer`, `Collaborator`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict, get_args

from contracts.goals import (
    CapabilityGap,
    CapabilityGaps,
    Classification,
    ClassificationReason,
    Collaborator,
    CollaboratorRole,
    Disposition,
    Objective,
    Peer,
    PeerCover,
    WorkCandidate,
)
from pipeline.js import EMPTY, concat, either, field, is_array, items, js_str, present, truthy

WORK_DISPOSITIONS: tuple[Disposition, ...] = get_args(Disposition)
COLLABORATOR_ROLES: tuple[CollaboratorRole, ...] = get_args(CollaboratorRole)
GATED_CLASSES = ("external", "financial", "irreversible", "destructive", "access")
_ROLE: dict[str, CollaboratorRole] = {role: role for role in COLLABORATOR_ROLES}

Loose = Mapping[str, object]


class ClassifyContext(TypedDict, total=False):
    """What `classify_work_item` staffs a candidate against: the context mapping, key for key."""

    memberId: str  # this seat
    objective: Objective | Loose
    reachable: Iterable[str]  # capability ids this seat can reach
    peers: Sequence[Peer | Loose]
    gatedClasses: Sequence[str]  # default GATED_CLASSES; an empty list gates nothing


def is_work_disposition(d: object) -> bool:
    """True for exactly one of the four dispositions."""
    return isinstance(d, str) and d in WORK_DISPOSITIONS


def collaborators_of(x: object) -> tuple[Collaborator, ...]:
    """`x.collaborators` as {memberId, role}; roles ignore case, and an entry with another role
    or without a member id is dropped, not an error."""
    found = []
    for entry in items(field(x, "collaborators")):
        member_id, role = field(entry, "memberId"), field(entry, "role")
        if not isinstance(member_id, str) or not member_id.strip() or not isinstance(role, str):
            continue
        known = _ROLE.get(role.strip().upper())
        if known is not None:
            found.append(Collaborator(member_id=member_id, role=known))
    return tuple(found)


def capability_gaps(required: object, reachable: object, peers: object) -> CapabilityGaps:
    """Which required capabilities this seat cannot reach, and the first peer (in input order)
    declaring each; the rest are uncovered."""
    need = [js_str(r) for r in concat(required) if truthy(r)]
    have = _reachable(reachable)
    missing = [cap for cap in need if cap not in have]
    covered, uncovered = [], []
    for cap in missing:
        peer = next((p for p in items(peers) if _declares(p, cap)), None)
        if peer is None:
            uncovered.append(cap)
        else:
            covered.append(PeerCover(capability=cap, member_id=_id(field(peer, "memberId"))))
    return CapabilityGaps(missing=missing, covered_by_peer=covered, uncovered=uncovered)


def _reachable(reachable: object) -> frozenset[str]:
    """JavaScript's `new Set(reachable || [])`, of which only strings can match a capability."""
    if not truthy(reachable):
        return frozenset()
    if isinstance(reachable, str | Iterable) and not isinstance(reachable, Mapping):
        return frozenset(r for r in reachable if isinstance(r, str))
    raise TypeError(f"ctx.reachable must be a set or list of capability ids, not {reachable!r}")


def _declares(peer: object, cap: str) -> bool:
    caps = field(peer, "capabilities") if truthy(peer) else None
    return is_array(caps) and cap in caps


def _id(value: object) -> str | None:
    return value if isinstance(value, str) else (js_str(value) if present(value) else None)


@dataclass(frozen=True, slots=True)
class _Staff:
    """The other people on the work, by role, in order of first mention."""

    doers: tuple[str, ...]
    reviewers: tuple[str, ...]
    approvers: tuple[str, ...]
    contributors: tuple[str, ...]

    @classmethod
    def of(cls, candidate: object, objective: object, me: object) -> _Staff:
        seen: set[tuple[str, str]] = set()
        by_role: dict[str, list[str]] = {role: [] for role in COLLABORATOR_ROLES}
        for c in (*collaborators_of(candidate), *collaborators_of(objective)):
            if (c.member_id, c.role) in seen:
                continue
            seen.add((c.member_id, c.role))
            if c.member_id != me:
                by_role[c.role].append(c.member_id)
        return cls(*(tuple(by_role[r]) for r in ("DOER", "REVIEWER", "APPROVER", "CONTRIBUTOR")))


Route = tuple[Disposition, ClassificationReason, str | None, str]  # ..., target, why


def classify_work_item(
    candidate: WorkCandidate | Loose | None = None,
    ctx: ClassifyContext | Loose | None = None,
) -> Classification:
    """SELF, COLLABORATE, HANDOFF or NEEDS_REVIEW for one candidate, with the one line of why."""
    c: object = candidate if candidate is not None else EMPTY
    x: object = ctx if ctx is not None else EMPTY
    me = field(x, "memberId") if truthy(field(x, "memberId")) else None
    objective = field(x, "objective")
    staff = _Staff.of(c, objective, me)
    gated = _gated(field(c, "actionClasses"), field(x, "gatedClasses"))
    gaps = capability_gaps(
        field(c, "requiredCapabilities"), field(x, "reachable"), field(x, "peers")
    )
    gap = CapabilityGap(missing=gaps.missing, uncovered=gaps.uncovered) if gaps.missing else None
    disposition, reason, target, why = _route(c, objective, me, staff, gated, gaps)
    return Classification(
        disposition=disposition,
        reason=reason,
        target=target,
        reviewers=staff.reviewers,
        approvers=staff.approvers,
        contributors=staff.contributors,
        gated_classes=gated,
        capability_gap=gap,
        why=(why,),
    )


def _gated(action_classes: object, gated_classes: object) -> tuple[str, ...]:
    """The candidate's action classes (lowercased, in its order) that the gated list names."""
    listed = gated_classes if truthy(gated_classes) else GATED_CLASSES
    if not isinstance(listed, list | tuple | set | frozenset):
        raise TypeError(f"ctx.gatedClasses must be a list of action classes, not {listed!r}")
    gated = {js_str(g).lower() for g in listed}
    return tuple(a for a in (js_str(v).lower() for v in concat(action_classes)) if a in gated)


def _route(
    c: object,
    objective: object,
    me: object,
    staff: _Staff,
    gated: tuple[str, ...],
    gaps: CapabilityGaps,
) -> Route:
    """The seven rules in order: handoffs, then signatures, then company, then SELF."""
    handoff = _handoff(field(c, "ownerMemberId"), me, staff, gaps)
    if handoff is not None:
        return handoff
    approver = staff.approvers[0] if staff.approvers else None
    if gated:
        why = f"action classes {'+'.join(gated)} are gated"
        return "NEEDS_REVIEW", "gated-action-class", approver, why
    if approver is not None:
        why = f"collaborator {approver} carries role APPROVER"
        return "NEEDS_REVIEW", "collaborator-is-approver", approver, why
    review_by = either(field(c, "reviewBy"), field(objective, "reviewBy"))
    if staff.reviewers or (truthy(review_by) and review_by != me):
        who = staff.reviewers[0] if staff.reviewers else js_str(review_by)
        return "NEEDS_REVIEW", "review-required", who, f"review required by {who}"
    if staff.contributors:
        why = f"contributor(s) {', '.join(staff.contributors)} work alongside this seat"
        return "COLLABORATE", "named-contributors", staff.contributors[0], why
    if gaps.uncovered:
        why = f"capability gap with no peer cover: {', '.join(gaps.uncovered)}"
        return "SELF", "self-with-capability-gap", None, why
    return "SELF", "self", None, "no collaborator, no gate, no capability gap"


def _handoff(owner: object, me: object, staff: _Staff, gaps: CapabilityGaps) -> Route | None:
    """Not this seat's to do: another seat owns it, a DOER does it, or only a peer can."""
    if truthy(owner) and me is not None and owner != me:
        who = js_str(owner)
        return "HANDOFF", "owned-by-another-seat", who, f"ownerMemberId={who} is not this seat"
    if staff.doers:
        doer = staff.doers[0]
        return "HANDOFF", "collaborator-is-doer", doer, f"collaborator {doer} carries role DOER"
    if gaps.covered_by_peer:
        first = gaps.covered_by_peer[0]
        peer = first.member_id if first.member_id is not None else "undefined"
        why = f'capability "{first.capability}" is unreachable here but declared by {peer}'
        return "HANDOFF", "capability-only-reachable-by-peer", first.member_id, why
    return None
