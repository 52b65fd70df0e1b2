"""The work report as the engagement decision reads it: one typed value from either shape. Pure.

`Work.of` reads a `WorkReport` by attribute (no dump on the hot path) and a camelCase
mapping by JavaScript's rules (`values`), so a contract and the dict it validates from
decide alike. Text is normalised once here: every field the decision reads is a `str` (empty
when not given), a flag is a `bool`, and a nested part is present or `None`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from contracts.work import Risk, WorkReport
from pipeline.engagement.values import EMPTY, given, lc, part, plain, text, texts

RISK_KINDS = ("irreversible", "external", "financial")


@dataclass(frozen=True, slots=True)
class Blocker:
    kind: str = ""  # lowercased; empty when unknown (then it is the seat's own)
    scope: str = ""
    detail: str = ""
    owner_id: str = ""


@dataclass(frozen=True, slots=True)
class Review:
    required: bool = False
    requested: bool = False
    kind: str = ""  # lowercased
    scope: str = ""
    detail: str = ""
    reviewer_id: str = ""


@dataclass(frozen=True, slots=True)
class Commitment:
    to_member_id: str = ""
    at_risk: bool = False


@dataclass(frozen=True, slots=True)
class Origin:
    channel_id: str = ""
    thread_root_id: str | None = None
    requester_id: str = ""


@dataclass(frozen=True, slots=True)
class Work:
    """What the decision reads of one piece of work. `None` parts were not given."""

    id: str = ""  # trimmed (`key` when `id` is empty): the decision's workId
    id_text: str = ""  # the id as given: the headline when there is no title
    title: str = ""
    headline: str = ""  # replaces the trigger's template headline when given
    scope: str = ""
    summary: str = ""
    question: str = ""  # trimmed
    options: tuple[str, ...] = ()  # trimmed, blanks dropped
    link: str = ""
    tried: tuple[str, ...] = ()
    state: str = ""  # lowercased; empty reads as in_progress
    origin: Origin = Origin()
    blocker: Blocker | None = None  # None: no blocker named (`blocker || null`)
    self_serve_exhausted: bool = False  # only an explicit `true`
    risks: tuple[str, ...] = ()  # the RISK_KINDS set, in that order
    review: Review | None = None
    commitment: Commitment | None = None
    interested_parties: tuple[str, ...] = ()
    durable: bool = False  # only an explicit `true`
    approver_id: str = ""

    @classmethod
    def of(cls, work: Work | WorkReport | Mapping[str, object] | object) -> Work:
        """The work, from the contract, its camelCase mapping, or anything else (empty)."""
        if isinstance(work, Work):
            return work
        if isinstance(work, WorkReport):
            return _from_report(work)
        raw = plain(work)
        return _from_mapping(raw if isinstance(raw, Mapping) else EMPTY)


def _from_report(r: WorkReport) -> Work:
    o, b, rv, c = r.origin, r.blocker, r.review, r.commitment
    return Work(
        id=r.id,
        id_text=r.id,
        title=r.title,
        headline=(r.headline or "").strip(),
        scope=r.scope or "",
        summary=r.summary or "",
        question=(r.question or "").strip(),
        options=_trimmed(r.options),
        link=r.link or "",
        tried=r.tried,
        state=r.state,
        origin=Origin()
        if o is None
        else Origin(o.channel_id or "", o.thread_root_id or None, o.requester_id or ""),
        blocker=None
        if b is None
        else Blocker(b.kind or "", b.scope or "", b.detail or "", b.owner_id or ""),
        self_serve_exhausted=r.self_serve_exhausted,
        risks=() if r.risk is None else _risks(r.risk),
        review=None
        if rv is None
        else Review(
            rv.required,
            rv.requested,
            lc(rv.kind),
            rv.scope or "",
            rv.detail or "",
            rv.reviewer_id or "",
        ),
        commitment=None if c is None else Commitment(c.to_member_id or "", c.at_risk),
        interested_parties=tuple(p for p in r.interested_parties if p),
        durable=r.durable,
        approver_id=r.approver_id or "",
    )


def _named(parties: object) -> tuple[str, ...]:
    """JavaScript's `parties.filter(Boolean).map(String)`: a falsy entry names nobody."""
    return tuple(str(p) for p in parties if p) if isinstance(parties, list | tuple) else ()


def _risks(risk: Risk) -> tuple[str, ...]:
    flags = (risk.irreversible, risk.external, risk.financial)
    return tuple(k for k, on in zip(RISK_KINDS, flags, strict=True) if on)


def _trimmed(options: tuple[str, ...]) -> tuple[str, ...]:
    """The options as the ask lists them: trimmed, blanks dropped."""
    return tuple(s for s in (o.strip() for o in options) if s)


def _from_mapping(w: Mapping[str, object]) -> Work:
    origin, risk = part(w.get("origin")), part(w.get("risk"))
    return Work(
        id=(text(w.get("id")) or text(w.get("key"))).strip(),
        id_text=text(w.get("id")),
        title=text(w.get("title")),
        headline=text(w.get("headline")).strip(),
        scope=text(w.get("scope")),
        summary=text(w.get("summary")),
        question=text(w.get("question")).strip(),
        options=_trimmed(texts(w.get("options"))),
        link=text(w.get("link")),
        tried=texts(w.get("tried")),
        state=lc(w.get("state")),
        origin=Origin(
            text(origin.get("channelId")),
            text(origin.get("threadRootId")) or None,
            text(origin.get("requesterId")),
        ),
        blocker=_blocker(w.get("blocker")),
        self_serve_exhausted=w.get("selfServeExhausted") is True,
        risks=tuple(k for k in RISK_KINDS if risk.get(k)),
        review=_review(part(w.get("review"))),
        commitment=_commitment(part(w.get("commitment"))),
        interested_parties=_named(w.get("interestedParties")),
        durable=w.get("durable") is True,
        approver_id=text(w.get("approverId")),
    )


def _blocker(raw: object) -> Blocker | None:
    # JavaScript's `work.blocker || null`: an empty blocker object is still a named blocker (of
    # unknown kind, so the seat's own), not an unnamed one; the contract path agrees.
    if not given(raw):
        return None
    b = part(raw)
    return Blocker(
        lc(b.get("kind")), text(b.get("scope")), text(b.get("detail")), text(b.get("ownerId"))
    )


def _review(rv: Mapping[str, object]) -> Review | None:
    if not rv:
        return None
    return Review(
        required=bool(rv.get("required")),
        requested=bool(rv.get("requested")),
        kind=lc(rv.get("kind")),
        scope=text(rv.get("scope")),
        detail=text(rv.get("detail")),
        reviewer_id=text(rv.get("reviewerId")),
    )


def _commitment(c: Mapping[str, object]) -> Commitment | None:
    if not c:
        return None
    return Commitment(text(c.get("toMemberId")), bool(c.get("atRisk")))
