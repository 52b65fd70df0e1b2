"""The ask's life after the decision: its state machine, its timeout and escalation ladder,
what a later decision reads from it, and the nuisance brake. Pure: the record and `now_ms`
in, the next record (with the event that says why) out.

    pending --landed--> open --answer--> answered
       |                 |  \\--snooze--> snoozed --(snooze ends)--> open
       |                 \\--(timeout)--> escalated --(timeout)--> escalated (one rung more)
       |                                     \\--(timeout at the top)--> closed (expired)
       \\--send failed / blocked / shadowed--> closed

An answer can arrive in any open state, the send still in flight included; the first valid
one wins and every later one is recorded as `late_answer`, changing nothing.

An approved consent can be revoked (`revoke_consent`): the answer stands, the consent record
and the answer say it was revoked, by whom and when, and the seat is told (`revoked_item`, a
`consent_revoked` inbox item); a later decision no longer finds it on record.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from contracts.asks import (
    MAX_ANSWER_TEXT,
    MAX_BODY,
    MAX_HISTORY,
    AnswerKind,
    AnswerOutcome,
    AnswerVerb,
    AnswerVia,
    Ask,
    AskAnswer,
    AskBrake,
    AskClose,
    AskEvent,
    AskLanding,
    ConsentRecord,
    DeclineRecord,
    EscalationStep,
    RevokeOutcome,
)
from contracts.engagement import EngagementDecision, GuardrailSummary
from contracts.inbound import (
    AskNote,
    Candidate,
    CandidateIds,
    ConsentNote,
    InboxItem,
    MessagePart,
)
from contracts.messages import AskContext, WorkEnvelope
from contracts.work import Blocker, Risk, WorkReport

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

CONSENT = "irreversible_or_external"

# How long an ask waits for its answer before it goes one rung up. An ask that stops the work
# (a consent, a blocker) is short: the seat can do nothing until it is answered, and four
# hours is half a working day. A review and a commitment at risk wait a working day: a
# review is queued work for the reviewer, and a commitment's owner has until its due date.
DEFAULT_TIMEOUTS_MS: dict[str, int] = {
    "irreversible_or_external": 4 * HOUR_MS,
    "blocked_on_other": 4 * HOUR_MS,
    "mandatory_review": 24 * HOUR_MS,
    "commitment_at_risk": 24 * HOUR_MS,
}
FALLBACK_TIMEOUT_MS = 24 * HOUR_MS  # a trigger the table does not name
DEFAULT_CONSENT_TTL_MS = DAY_MS
DEFAULT_SNOOZE_MS = 2 * HOUR_MS  # a Snooze button with no time of its own
MAX_SNOOZE_MS = 7 * DAY_MS
# Rungs above the ask: its target's supervisor, then once more; then the ask expires.
MAX_LEVEL = 2
# The nuisance brake: a seat whose last BRAKE_WINDOW concluded asks hold BRAKE_BAD or more
# declined or unanswered ones stops asking until an operator lifts the hold.
BRAKE_WINDOW = 5
BRAKE_BAD = 3

Rung = Literal["target_supervisor", "seat_supervisor", "seat_operator"]


def when(ms: int | None) -> str:
    """An epoch-ms time as people read it, in UTC, to the second: `2026-12-06 09:30:00 UTC`.
    Computed here (days to a civil date, Hinnant's algorithm) because this layer has no
    clock module at all: the time is passed in."""
    if ms is None:
        return "never"
    days, rest = divmod(ms // 1000, 86_400)
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1_460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    h, m, sec = rest // 3600, rest % 3600 // 60, rest % 60
    return f"{year:04d}-{month:02d}-{day:02d} {h:02d}:{m:02d}:{sec:02d} UTC"


def ask_id_for(dedupe_key: str, attempt: int) -> str:
    """One ask per dedupe key and attempt: the same decision sent again is the same ask."""
    return f"ask-{dedupe_key}-{attempt}"


def asking_of(env: WorkEnvelope) -> AskContext:
    """What the ask record keeps of the report an engaged decision came from."""
    report = env.report
    esc = env.escalation
    return AskContext(
        revision=report.revision,
        scope=report.scope,
        risk_kinds=risk_kinds_of(report.risk),
        escalates=None if esc is None else esc.ask_id,
        level=0 if esc is None else esc.level,
        item_id=item_of(report.link, report.id),
    )


# A GitHub issue or pull request: its web address, or the `owner/repo#N` the GitHub
# normaliser names it by (`ids.issueId`), which a seat may use as its work id.
_GITHUB_URL = re.compile(
    r"^https?://(?:www\.)?github\.com/([\w.-]+)/([\w.-]+)/(?:issues|pull|pulls)/(\d+)"
    r"(?:[/?#].*)?$",
    re.IGNORECASE,
)
_GITHUB_ITEM = re.compile(r"^([\w.-]+)/([\w.-]+)#(\d+)$")


def item_id_of(issue_id: str | None) -> str | None:
    """The key an issue or pull request is known by in the record: `owner/repo#N`, lowercased
    (GitHub's names ignore case; a link and a webhook may spell them differently)."""
    found = _GITHUB_ITEM.match((issue_id or "").strip())
    return None if found is None else f"{found[1]}/{found[2]}#{int(found[3])}".lower()


def item_of(link: str | None, work_id: str | None = None) -> str | None:
    """The GitHub issue or pull request a report is about: its `link` when that is one's web
    address, else its work id when that names one (`owner/repo#N`); None for anything else."""
    found = _GITHUB_URL.match((link or "").strip())
    if found is not None:
        return f"{found[1]}/{found[2]}#{int(found[3])}".lower()
    return item_id_of(work_id)


def timeout_for(trigger: str | None, timeouts: Mapping[str, int]) -> int:
    return timeouts.get(trigger or "", FALLBACK_TIMEOUT_MS)


def risk_kinds_of(risk: Risk | None) -> tuple[str, ...]:
    """The kinds of risk a report names, in a fixed order."""
    if risk is None:
        return ()
    return tuple(k for k in ("irreversible", "external", "financial") if getattr(risk, k))


def _event(
    ask: Ask, at_ms: int, event: str, reason_code: str, why: str, by: str | None = None
) -> tuple[AskEvent, ...]:
    e = AskEvent.model_validate(
        {"atMs": at_ms, "event": event, "reasonCode": reason_code, "why": why, "by": by}
    )
    history = (*ask.history, e)
    if len(history) > MAX_HISTORY:  # the first (how it began) and the latest
        history = (history[0], *history[-(MAX_HISTORY - 1) :])
    return history


def _with(ask: Ask, event: tuple[int, str, str, str, str | None], **update: object) -> Ask:
    at_ms, name, code, why, by = event
    return ask.model_copy(update={**update, "history": _event(ask, at_ms, name, code, why, by)})


def new_ask(
    decision: EngagementDecision,
    *,
    seat_id: str,
    tracking_id: str,
    attempt: int,
    now_ms: int,
    timeouts: Mapping[str, int],
    revision: int = 1,
    scope: str | None = None,
    risk_kinds: tuple[str, ...] = (),
    escalates: str | None = None,
    level: int = 0,
    item_id: str | None = None,
) -> Ask:
    """The record of an engaged decision, before the send posts anything."""
    key = decision.dedupe_key or ""
    ask = Ask(
        id=ask_id_for(key, attempt),
        seat_id=seat_id,
        work_id=decision.work_id,
        revision=revision,
        trigger=decision.trigger,
        reason_code=decision.reason_code,
        reason=decision.reason,
        body=(decision.body or "")[:MAX_BODY],
        scope=scope,
        risk_kinds=risk_kinds,
        item_id=item_id,
        targets=decision.targets,
        surface=decision.surface,
        dedupe_key=key,
        attempt=attempt,
        tracking_id=tracking_id,
        created_at_ms=now_ms,
        timeout_ms=timeout_for(decision.trigger, timeouts),
        escalates=escalates,
        level=level,
    )
    names = ", ".join(t.member_id for t in decision.targets) or "nobody"
    why = f"engaged {names} ({decision.reason_code}); the send is in flight"
    return _with(ask, (now_ms, "created", decision.reason_code or "engaged", why, None))


NEVER_SENT: frozenset[str] = frozenset({"send_failed", "send_blocked", "shadowed"})


def reopened(old: Ask, new: Ask) -> Ask | None:
    """An ask whose id a later send takes again (its attempt, released when nobody was
    asked, is the later send's): the new record, keeping what happened to the old one.
    None when the old one was sent to someone, or is this very send's."""
    if old.closed not in NEVER_SENT or old.tracking_id == new.tracking_id:
        return None
    history = (*old.history, *new.history)[-MAX_HISTORY:]
    return new.model_copy(update={"history": history, "version": old.version})


def landed(ask: Ask, landing: AskLanding, *, now_ms: int) -> Ask:
    """The send reached the provider: `open` until its deadline. An ask answered or snoozed
    while the send was in flight keeps that answer; it only learns where it landed."""
    if ask.landing is not None:
        return ask  # already known: a redelivered send
    where = landing.channel_id or landing.adapter
    why = f"sent to {where} (message {landing.message_id})"
    if ask.state != "pending":
        return _with(ask, (now_ms, "sent", "sent", why, None), landing=landing)
    if ask.escalates is not None:  # the ask it escalates keeps the time
        return _with(ask, (now_ms, "sent", "sent", why, None), landing=landing, state="open")
    deadline = now_ms + ask.timeout_ms
    return _with(
        ask,
        (now_ms, "sent", "sent", f"{why}; it times out at {when(deadline)}", None),
        landing=landing,
        state="open",
        deadline_ms=deadline,
    )


def send_ended(ask: Ask, closed: AskClose, why: str, *, now_ms: int) -> Ask:
    """The send ended without asking anybody: the ask closes, never left open. An answer
    that arrived meanwhile stands (it was given); a snooze does not (nobody was asked)."""
    if ask.state != "pending" and not (ask.state == "snoozed" and ask.landing is None):
        return ask
    return _with(
        ask, (now_ms, "closed", closed, why, None), state="closed", closed=closed, deadline_ms=None
    )


def withdrawn(ask: Ask, why: str, *, now_ms: int) -> Ask:
    """The seat's work moved on: an open ask closes as withdrawn."""
    if not ask.is_open:
        return ask
    return _with(
        ask,
        (now_ms, "closed", "withdrawn", why, None),
        state="closed",
        closed="withdrawn",
        deadline_ms=None,
    )


def closed_as(ask: Ask, closed: AskClose, root: Ask, *, now_ms: int) -> Ask | None:
    """An escalation's own ask, closed because the ask it escalates ended (answered at
    another rung, or expired); None when it already ended."""
    if not ask.is_open:
        return None
    how = root.answer.answer if root.answer else root.closed
    why = f"the ask it escalates ({root.id}) ended: {how}"
    return _with(
        ask, (now_ms, "closed", closed, why, None), state="closed", closed=closed, deadline_ms=None
    )


@dataclass(frozen=True)
class AnswerIn:
    """One answer as it arrived, from any surface."""

    verb: AnswerVerb
    by: str
    via: AnswerVia
    text: str = ""
    snooze_until_ms: int | None = None
    consent_ttl_ms: int | None = None
    key: str | None = None  # the event that carried it (a redelivery is the same answer)


def consent_id_for(ask_id: str) -> str:
    return f"consent-{ask_id.removeprefix('ask-')}"


def answer_ask(
    ask: Ask, a: AnswerIn, *, now_ms: int, consent_ttl_ms: int = DEFAULT_CONSENT_TTL_MS
) -> AnswerOutcome:
    """Apply one answer: the first valid one wins; a later one is `late_answer`, written in
    the history and changing nothing else; an invalid one is refused and changes nothing."""
    text = a.text[:MAX_ANSWER_TEXT]

    def refused(code: str, why: str) -> AnswerOutcome:
        return AnswerOutcome(outcome="refused", reason_code=code, why=why, ask=ask)

    if ask.state == "answered" and ask.answer is not None:
        first = ask.answer
        if a.key is not None and first.key == a.key:
            # The event that answered it, delivered again: the same answer, nothing new.
            why = f"the answer {first.answer} by {first.by} ({a.key}) was already recorded"
            return AnswerOutcome(outcome="answered", reason_code=first.answer, why=why, ask=ask)
        why = (
            f"{a.by}'s {a.verb} came after {first.by}'s {first.answer} at {when(first.at_ms)}: "
            "the first answer stands"
        )
        late = _with(ask, (now_ms, "late_answer", "late_answer", why, a.by))
        return AnswerOutcome(outcome="late_answer", reason_code="late_answer", why=why, ask=late)
    if ask.state == "closed":
        return refused("ask_closed", f"ask {ask.id} is closed ({ask.closed}): nothing to answer")
    if ask.is_consent and a.by not in ask.asked_ids():
        names = ", ".join(ask.asked_ids()) or "nobody"
        return refused(
            "not_a_target", f"this consent is asked of {names}; an answer by {a.by} does not count"
        )
    if a.verb == "snoozed":
        until = a.snooze_until_ms if a.snooze_until_ms is not None else now_ms + DEFAULT_SNOOZE_MS
        if until <= now_ms:
            return refused("snooze_in_past", f"snoozeUntilMs {until} is not after now ({now_ms})")
        if until - now_ms > MAX_SNOOZE_MS:
            return refused(
                "snooze_too_long", f"a snooze lasts at most {MAX_SNOOZE_MS // DAY_MS} days"
            )
        why = f"{a.by} snoozed it until {when(until)}"
        snoozed = _with(
            ask,
            (now_ms, "snoozed", "snoozed", why, a.by),
            state="snoozed",
            snooze_until_ms=until,
            deadline_ms=until,
        )
        return AnswerOutcome(outcome="snoozed", reason_code="snoozed", why=why, ask=snoozed)
    consent: ConsentRecord | None = None
    answer = AskAnswer(answer=a.verb, by=a.by, text=text, via=a.via, at_ms=now_ms, key=a.key)
    if ask.is_consent and a.verb == "approved":
        ttl = a.consent_ttl_ms or consent_ttl_ms
        consent = ConsentRecord(
            id=consent_id_for(ask.id),
            work_id=ask.work_id,
            scope=ask.scope,
            risk_kinds=ask.risk_kinds,
            seat_id=ask.seat_id,
            ask_id=ask.id,
            by=a.by,
            at_ms=now_ms,
            expires_at_ms=now_ms + ttl,
        )
        answer = answer.model_copy(
            update={"consent_id": consent.id, "consent_expires_at_ms": consent.expires_at_ms}
        )
    why = f"{a.by} answered {a.verb} ({a.via})" + (f": {text[:200]}" if text else "")
    done = _with(
        ask,
        (now_ms, "answered", a.verb, why, a.by),
        state="answered",
        answer=answer,
        deadline_ms=None,
        snooze_until_ms=None,
    )
    return AnswerOutcome(outcome="answered", reason_code=a.verb, why=why, ask=done, consent=consent)


ASK_SOURCE = "seatwire:asks"


def answered_item(outcome: AnswerOutcome, *, root: Ask | None = None) -> InboxItem | None:
    """The `ask_answered` item the seat's inbox gets for an answer that changed its ask (an
    answer or a snooze; None for a late or refused one). An escalation's answer is told as
    the answer to the ask it escalates (`root`), which is the seat's own."""
    if outcome.outcome not in ("answered", "snoozed"):
        return None
    ask = root or outcome.ask
    changed = outcome.ask
    last = changed.history[-1]
    by = last.by or ""
    if changed.answer is not None and outcome.outcome == "answered":
        a = changed.answer
        note = AskNote(
            ask_id=ask.id,
            work_id=ask.work_id,
            answer=a.answer,
            by=a.by,
            text=a.text,
            at_ms=a.at_ms,
            consent_id=a.consent_id,
            consent_expires_at_ms=a.consent_expires_at_ms,
        )
    else:
        note = AskNote(
            ask_id=ask.id,
            work_id=ask.work_id,
            answer="snoozed",
            by=by,
            at_ms=last.at_ms,
            snooze_until_ms=changed.snooze_until_ms,
        )
    delivery = f"{ask.id}:{note.answer}:{note.at_ms}"
    where = ask.landing.channel_id if ask.landing else None
    return InboxItem(
        position=1,
        delivery_id=delivery,
        family="messaging",
        source=ASK_SOURCE,
        surface="ask",
        reason="ask_answered",
        why=f"{note.by} answered your ask {ask.id} about {ask.work_id}: {note.answer}"
        + (f" (until {when(note.snooze_until_ms)})" if note.snooze_until_ms else "")
        + f"; read it with get_ask ask_id={ask.id}",
        at_ms=note.at_ms,
        candidate=Candidate(
            family="messaging",
            source=ASK_SOURCE,
            delivery_id=delivery,
            ids=CandidateIds(
                channel_id=where,
                message_id=ask.landing.message_id if ask.landing else None,
            ),
            msg=MessagePart(author_id=note.by, body=note.text),
            at_ms=note.at_ms,
        ),
        kind="ask_answered",
        ask=note,
    )


def decline_of(ask: Ask) -> DeclineRecord | None:
    """The decline record of a declined consent (None for any other ask)."""
    a = ask.answer
    if not ask.is_consent or a is None or a.answer != "declined":
        return None
    return DeclineRecord(
        work_id=ask.work_id,
        scope=ask.scope,
        revision=ask.revision,
        seat_id=ask.seat_id,
        ask_id=ask.id,
        by=a.by,
        at_ms=a.at_ms,
        text=a.text,
    )


# ---------------------------------------------------------------------- revoking a consent


@dataclass(frozen=True)
class Revocation:
    """What one request to revoke a consent did: `revoked` (the consent, marked revoked; the
    ask it was given on, with the revocation written on its answer; the seat's inbox item),
    or `refused` (nothing changes), with the reason code and why."""

    outcome: RevokeOutcome
    reason_code: str
    why: str
    consent: ConsentRecord
    ask: Ask | None = None
    item: InboxItem | None = None


def revokers(consent: ConsentRecord, ask: Ask | None) -> tuple[str, ...]:
    """Who may revoke a consent themselves: the person who gave it, and anyone else its ask
    was put to (a rung above included), since any of them could have given or refused it."""
    asked = ask.asked_ids() if ask is not None else ()
    return tuple(dict.fromkeys((consent.by, *asked)))


def revoke_consent(
    consent: ConsentRecord,
    ask: Ask | None,
    *,
    by: str,
    now_ms: int,
    anyone: bool = False,
) -> Revocation:
    """Revoke `consent` as `by`. A consent already revoked or past its expiry is refused
    (revoking twice changes nothing more); so is `by` who is not among its `revokers`,
    unless `anyone` (an operator acting for them). `ask` is the ask it was given on, when
    still kept: the revocation is written on its answer and in its history."""

    def refused(code: str, why: str) -> Revocation:
        return Revocation("refused", code, why, consent, ask)

    if consent.revoked_at_ms is not None:
        return refused(
            "already_revoked",
            f"consent {consent.id} was revoked by {consent.revoked_by} at "
            f"{when(consent.revoked_at_ms)}",
        )
    if not consent.holds_at(now_ms):
        return refused(
            "consent_expired",
            f"consent {consent.id} expired at {when(consent.expires_at_ms)}: nothing to revoke",
        )
    allowed = revokers(consent, ask)
    if not anyone and by not in allowed:
        return refused(
            "not_a_revoker",
            f"only {', '.join(allowed)} can revoke consent {consent.id}; {by} cannot",
        )
    revoked = consent.model_copy(update={"revoked_at_ms": now_ms, "revoked_by": by})
    why = (
        f"{by} revoked consent {consent.id} (given by {consent.by} at {when(consent.at_ms)}, "
        f"until {when(consent.expires_at_ms)}): a later step needing it asks again"
    )
    marked: Ask | None = None
    if ask is not None and ask.answer is not None and ask.answer.consent_id == consent.id:
        answer = ask.answer.model_copy(
            update={"consent_revoked_at_ms": now_ms, "consent_revoked_by": by}
        )
        marked = _with(ask, (now_ms, "revoked", "consent_revoked", why, by), answer=answer)
    return Revocation(
        "revoked", "consent_revoked", why, revoked, marked, revoked_item(revoked, marked or ask)
    )


def revoked_item(consent: ConsentRecord, ask: Ask | None = None) -> InboxItem:
    """The `consent_revoked` item the seat's inbox gets when a consent given on its ask is
    revoked (`consent` as revoked; `ask` for where it was given, when still kept)."""
    at_ms = consent.revoked_at_ms if consent.revoked_at_ms is not None else consent.at_ms
    by = consent.revoked_by or ""
    note = ConsentNote(
        consent_id=consent.id,
        ask_id=consent.ask_id,
        work_id=consent.work_id,
        scope=consent.scope,
        approved_by=consent.by,
        approved_at_ms=consent.at_ms,
        revoked_by=by,
        at_ms=at_ms,
    )
    delivery = f"{consent.id}:revoked:{at_ms}"
    landing = ask.landing if ask is not None else None
    return InboxItem(
        position=1,
        delivery_id=delivery,
        family="messaging",
        source=ASK_SOURCE,
        surface="ask",
        reason="consent_revoked",
        why=f"{by} revoked the consent {consent.by} gave on your ask {consent.ask_id} about "
        f"{consent.work_id}: do not take that step on it; a report needing it asks again",
        at_ms=at_ms,
        candidate=Candidate(
            family="messaging",
            source=ASK_SOURCE,
            delivery_id=delivery,
            ids=CandidateIds(
                channel_id=landing.channel_id if landing else None,
                message_id=landing.message_id if landing else None,
            ),
            msg=MessagePart(author_id=by, body=""),
            at_ms=at_ms,
        ),
        kind="consent_revoked",
        consent=note,
    )


def revocable(ask: Ask, *, now_ms: int) -> str | None:
    """The consent an answered ask's message may offer to revoke: its approval's, while it
    holds as far as the ask knows (not revoked, not expired); None otherwise."""
    a = ask.answer
    if ask.state != "answered" or a is None or a.consent_id is None:
        return None
    if a.consent_revoked_at_ms is not None:
        return None
    if a.consent_expires_at_ms is not None and a.consent_expires_at_ms <= now_ms:
        return None
    return a.consent_id


def with_root_consent(ask: Ask, root: Ask | None) -> Ask:
    """An escalation's own ask as its message shows it: the consent its answer gave is the
    one recorded on the ask it escalates (that record's id, expiry and revocation)."""
    a = ask.answer
    r = root.answer if root is not None else None
    if a is None or r is None or a.consent_id is None or r.consent_id is None:
        return ask
    fields = ("consent_id", "consent_expires_at_ms", "consent_revoked_at_ms", "consent_revoked_by")
    answer = a.model_copy(update={f: getattr(r, f) for f in fields})
    return ask.model_copy(update={"answer": answer})


# ---------------------------------------------------------------------- replies


def github_answer(action: str, review_state: str | None) -> tuple[AnswerKind, AnswerVia] | None:
    """What a GitHub event by a person asked says to the ask about its issue or pull request:
    a comment is a reply; a review approves, declines (changes requested) or, a plain
    `commented` review, replies. Anything else (an edit, a dismissal, a label) says nothing."""
    if action == "commented":
        return "replied", "github_comment"
    if action == "reviewed":
        state = (review_state or "").strip().lower()
        if state == "approved":
            return "approved", "github_review"
        if state == "changes_requested":
            return "declined", "github_review"
        if state == "commented":
            return "replied", "github_review"
    return None


def reply_refusal(ask: Ask, person: str | None, *, written_ms: int, landed_ms: int) -> str | None:
    """Why a reply (a thread message, a comment, a review) does not answer `ask`, or None when
    it does: its author must be a person the ask asked (a rung above included), and it must
    be written after the ask landed (an older message in the same thread answered something
    else). `landed_ms` is when the ask reached its surface."""
    if person is None:
        return "not_a_member"
    if person not in ask.asked_ids():
        return "not_asked"
    if ask.landing is None:
        return "not_landed"
    if written_ms < landed_ms:
        return "before_the_ask"
    return None


# ---------------------------------------------------------------------- timeouts


@dataclass(frozen=True)
class Ladder:
    """Who is above whom: each member's supervisor, and the seat's own supervisor and
    operator (the org file's)."""

    supervisors: Mapping[str, str | None]
    seat_supervisor: str | None = None
    seat_operator: str | None = None


def next_rung(ask: Ask, ladder: Ladder) -> tuple[str, Rung] | None:
    """Whom an unanswered ask goes to next: the supervisor of the person asked last, else the
    seat's supervisor, else its operator; never someone it already asked or the seat."""
    asked = set(ask.asked_ids()) | {ask.seat_id}
    last = (
        [ask.escalations[-1].target_id] if ask.escalations else [t.member_id for t in ask.targets]
    )
    for person in last:
        boss = ladder.supervisors.get(person)
        if boss and boss not in asked:
            return boss, "target_supervisor"
    if ladder.seat_supervisor and ladder.seat_supervisor not in asked:
        return ladder.seat_supervisor, "seat_supervisor"
    if ladder.seat_operator and ladder.seat_operator not in asked:
        return ladder.seat_operator, "seat_operator"
    return None


@dataclass(frozen=True)
class Due:
    """What a due ask does now: wake from a snooze, escalate one rung, or expire."""

    kind: Literal["wake", "escalate", "expire", "not_due"]
    ask: Ask
    target: tuple[str, Rung] | None = None
    why: str = ""


def _asked_line(ask: Ask) -> str:
    names = ", ".join(ask.asked_ids()) or "nobody"
    since = ask.landing.at_ms if ask.landing else ask.created_at_ms
    return f"asked {names} at {when(since)}"


def on_due(ask: Ask, ladder: Ladder, *, now_ms: int) -> Due:
    """An ask whose deadline came: a snooze ends (open again, with a new timeout); an
    unanswered ask goes one rung up, at most MAX_LEVEL rungs; past the top, or with nobody
    above, it expires (closed, with why). Not yet due, or final: nothing."""
    if not ask.is_open or ask.deadline_ms is None or ask.deadline_ms > now_ms:
        return Due("not_due", ask)
    if ask.state == "pending":
        return Due("not_due", ask)  # the send is in flight: its timeout starts when it lands
    if ask.escalates is not None and ask.state != "snoozed":
        # An escalation's own ask keeps no time of its own: the ask it escalates does, and
        # goes up (or expires) from there, closing this one with it.
        return Due("not_due", ask)
    if ask.state == "snoozed":
        own = ask.escalates is None
        deadline = now_ms + ask.timeout_ms if own else None
        why = (
            f"the snooze ended; it times out again at {when(deadline)}"
            if own
            else f"the snooze ended; the ask it escalates ({ask.escalates}) keeps the time"
        )
        woke = _with(
            ask,
            (now_ms, "woke", "snooze_ended", why, None),
            state="open" if not ask.escalations else "escalated",
            snooze_until_ms=None,
            deadline_ms=deadline,
        )
        return Due("wake", woke, why=why)
    level = len(ask.escalations)
    target = next_rung(ask, ladder) if level < MAX_LEVEL else None
    if target is None:
        why = f"{_asked_line(ask)}; no answer by {when(ask.deadline_ms)}, and " + (
            f"it already went {level} rungs up (the top of the ladder)"
            if level >= MAX_LEVEL
            else "there is nobody above to ask (no supervisor or operator in the org file)"
        )
        code = "ask_expired" if level >= MAX_LEVEL else "unroutable"
        closed = _with(
            ask,
            (now_ms, "closed", code, why, None),
            state="closed",
            closed="expired",
            deadline_ms=None,
        )
        return Due("expire", closed, why=why)
    why = (
        f"{_asked_line(ask)}; no answer by {when(ask.deadline_ms)}: asking {target[0]} "
        f"({target[1]})"
    )
    return Due("escalate", ask, target=target, why=why)


def rung_unasked(ask: Ask, level: int, code: str, why: str, *, now_ms: int) -> Ask | None:
    """A rung raised for this ask asked nobody (its decision was refused, or its send
    failed or was blocked): written down, and the ask is due at once, so the next tick goes
    on up the ladder (past that rung's person, who counts as asked) or expires it, instead of
    waiting a whole timeout on nobody. None when the ask has ended."""
    if not ask.is_open or ask.state == "snoozed":
        return None
    said = f"rung {level} asked nobody ({code}): {why}"
    return _with(ask, (now_ms, "rung_unasked", code, said, None), deadline_ms=now_ms)


def escalated(ask: Ask, step: EscalationStep, why: str, *, now_ms: int) -> Ask:
    """The ask after one rung up was raised: `escalated`, with a new deadline."""
    if any(e.level == step.level for e in ask.escalations):
        return ask  # at most one escalation per rung
    return _with(
        ask,
        (now_ms, "escalated", "ask_unanswered", why, None),
        state="escalated",
        escalations=(*ask.escalations, step),
        deadline_ms=now_ms + ask.timeout_ms,
    )


def rung_landed(root: Ask, level: int, *, now_ms: int) -> Ask | None:
    """The ask one rung up (at `level`) reached its person now: the ask it escalates waits
    its whole timeout from here, so a rung the send gate held (its person's quiet hours) is
    not passed over before it was even sent. None: nothing to change (another rung since,
    or the ask ended)."""
    if root.state != "escalated" or not root.escalations:
        return None
    if root.escalations[-1].level != level or root.deadline_ms is None:
        return None
    deadline = now_ms + root.timeout_ms
    if deadline <= root.deadline_ms:
        return None
    why = f"rung {level} reached {root.escalations[-1].target_id}; it times out at {when(deadline)}"
    return _with(root, (now_ms, "sent", "sent", why, None), deadline_ms=deadline)


def escalation_report(ask: Ask, target_id: str, level: int, *, now_ms: int) -> WorkReport:
    """The work report one rung up goes through the pipeline as: the same kind of ask (a
    consent stays a consent, with its risk), to `target_id`, saying who was asked, when,
    and that they did not answer. Built from the record alone, so raised again after a crash
    it is the same report (one tracking id, one ask)."""
    names = ", ".join(t.member_id for t in ask.targets) or "nobody"
    since = ask.landing.at_ms if ask.landing else ask.created_at_ms
    waited_h = max(0, now_ms - since) // HOUR_MS
    headline = (
        f"No answer from {names} for {waited_h} h: seat {ask.seat_id}'s ask about "
        f"{ask.work_id} needs you."
    )[:500]
    summary = (
        f"Seat {ask.seat_id} asked {', '.join(ask.asked_ids())} ({ask.reason_code}) at "
        f"{when(since)} and nobody answered within {ask.timeout_ms // 60_000} min. "
        f"This is rung {level} of {MAX_LEVEL} above the ask ({ask.id})."
    )
    scope = ask.scope or ask.work_id
    common = {
        "id": f"{ask.id}:up{level}",
        "title": f"unanswered: {ask.work_id}"[:500],
        "headline": headline,
        "summary": summary,
        "scope": scope[:500],
        "seat_id": ask.seat_id,
        "self_serve_exhausted": True,
    }
    if ask.is_consent:
        kinds = set(ask.risk_kinds) or {"irreversible"}
        risk = Risk.model_validate({k: True for k in kinds})
        return WorkReport.model_validate({**common, "risk": risk, "approver_id": target_id})
    blocker = Blocker(kind="decision", owner_id=target_id, scope=scope[:500])
    return WorkReport.model_validate({**common, "state": "blocked", "blocker": blocker})


# ---------------------------------------------------------------------- what a decision reads


@dataclass(frozen=True)
class AskRecordView:
    """What the record holds that bears on one plan: the latest ask under its dedupe key,
    the work's consents and declines, and the seat's brake."""

    latest: Ask | None = None
    consents: Sequence[ConsentRecord] = ()
    declines: Sequence[DeclineRecord] = ()
    brake: AskBrake | None = None


def _norm(scope: str | None) -> str:
    return " ".join((scope or "").lower().split())


def consent_covers(
    c: ConsentRecord, *, work_id: str, scope: str | None, risk_kinds: Iterable[str], now_ms: int
) -> bool:
    """A consent covers a later report of the same work within its scope (the same scope,
    or a consent for the whole work), for risk kinds it named, while it holds."""
    if c.work_id != work_id or not c.holds_at(now_ms):
        return False
    if c.scope and _norm(c.scope) != _norm(scope):
        return False
    return set(risk_kinds) <= set(c.risk_kinds) or not c.risk_kinds


def _nobody(
    plan: EngagementDecision, code: str, reason: str, *, guardrail: bool = False
) -> EngagementDecision:
    """A plan the record answers: nobody engaged, in the shape of a guardrail's refusal (the
    targets, surface and dedupe key it would have used, no body), with the code and why."""
    return EngagementDecision(
        trigger=plan.trigger,
        reason_code=code,
        reason=reason,
        targets=plan.targets,
        surface=plan.surface,
        work_id=plan.work_id,
        dedupe_key=plan.dedupe_key,
        guardrail=GuardrailSummary(code=code, detail=reason, counts={}) if guardrail else None,
        why=(*plan.why, f"{code}: {reason}"),
        degraded=plan.degraded,
        considered_not_engaged=plan.considered_not_engaged,
        now_ms=plan.now_ms,
    )


def read_record(
    plan: EngagementDecision,
    view: AskRecordView,
    *,
    revision: int,
    scope: str | None,
    risk_kinds: Sequence[str],
    now_ms: int,
    escalation: bool = False,
) -> EngagementDecision:
    """An engaging plan against the ask record: engage nobody when the answer is already
    known (a consent on record or declined, the same ask answered, snoozed or still
    waiting) or when the seat's asks are held. A plan that engages nobody passes through."""
    if not plan.engage:
        return plan
    if plan.trigger == CONSENT:
        for c in view.consents:
            if consent_covers(
                c, work_id=plan.work_id, scope=scope, risk_kinds=risk_kinds, now_ms=now_ms
            ):
                return _nobody(
                    plan,
                    "consent_on_record",
                    f"{c.by} approved this (consent {c.id}, ask {c.ask_id}) at {when(c.at_ms)}; it "
                    f"holds until {when(c.expires_at_ms)}",
                )
        for d in view.declines:
            if (
                d.work_id == plan.work_id
                and _norm(d.scope) == _norm(scope)
                and (revision <= d.revision)
            ):
                return _nobody(
                    plan,
                    "declined_on_record",
                    f"{d.by} declined this (ask {d.ask_id}) at {when(d.at_ms)}, for revision "
                    f"{d.revision} of the work; it is not asked again until the work changes",
                )
    latest = view.latest
    if latest is not None and latest.dedupe_key == plan.dedupe_key:
        a = latest.answer
        revoked = a is not None and a.consent_revoked_at_ms is not None
        # New facts are another reason code or target (another dedupe key). A declined ask
        # (changes requested, a refusal) is the one exception: a later revision of the work
        # is what it asked for. A consent taken back settles nothing any more.
        if (
            latest.state == "answered"
            and a is not None
            and (a.answer != "declined" or revision <= latest.revision)
            and not revoked
        ):
            return _nobody(
                plan,
                "already_answered",
                f"{a.by} answered this ask ({latest.id}) {a.answer} at {when(a.at_ms)}; the same "
                "ask is not asked again unless the seat reports something new",
            )
        if latest.state == "snoozed" and (latest.snooze_until_ms or 0) > now_ms:
            return _nobody(
                plan,
                "snoozed",
                f"ask {latest.id} is snoozed until {when(latest.snooze_until_ms)}",
            )
        if latest.is_open and not escalation:
            # The same ask still waits: past the re-engage window too, asking again would
            # repeat it; its timeout escalates it instead. Written as the guardrail's
            # `already_engaged`, which it is.
            due = f"; it times out at {when(latest.deadline_ms)}" if latest.deadline_ms else ""
            detail = (
                f"ask {latest.id} ({latest.state}) is still waiting for its answer{due}: "
                "asking again would repeat it, and its timeout escalates it instead"
            )
            return _nobody(plan, "already_engaged", detail, guardrail=True)
    b = view.brake
    if b is not None and b.held and not escalation and plan.work_id != brake_report_id(b):
        return _nobody(
            plan,
            "asks_held",
            f"seat {b.seat_id}'s asks are held since {when(b.since_ms)}: {b.why}; an operator "
            "lifts the hold",
        )
    return plan


def rung_moot(plan: EngagementDecision, root: Ask | None, ask_id: str) -> EngagementDecision:
    """An escalation's plan against the ask it escalates, read as the rung is decided: when
    that ask ended meanwhile (answered, withdrawn, expired), nobody is asked one rung up."""
    if not plan.engage:
        return plan
    if root is None:
        return _nobody(plan, "ask_closed", f"ask {ask_id} is no longer on record")
    if root.state == "answered" and root.answer is not None:
        a = root.answer
        return _nobody(
            plan,
            "already_answered",
            f"{a.by} answered ask {root.id} {a.answer} at {when(a.at_ms)}: nobody needs asking "
            "one rung up",
        )
    if not root.is_open:
        return _nobody(
            plan, "ask_closed", f"ask {root.id} ended ({root.closed}): nobody is asked one rung up"
        )
    return plan


def as_escalation(
    plan: EngagementDecision, ask_id: str, why: str, dedupe_key: str
) -> EngagementDecision:
    """An engaging plan made from an escalation report: reason code `ask_unanswered`, its
    why saying who was asked and did not answer. The dedupe key is the caller's (the
    guardrails' hash over the new reason code)."""
    if not plan.engage:
        return plan
    targets = tuple(t.model_copy(update={"rung": "supervisory"}) for t in plan.targets)
    return plan.model_copy(
        update={
            "reason_code": "ask_unanswered",
            "reason": f"nobody answered ask {ask_id}: {why}",
            "targets": targets,
            "dedupe_key": dedupe_key,
            "why": (*plan.why, f"ask_unanswered: {why}"),
        }
    )


# ---------------------------------------------------------------------- the nuisance brake

Concluded = Literal["answered", "declined", "expired"]


def concluded_as(ask: Ask) -> Concluded | None:
    """How an ask counts for its seat's brake once it ended (None: it does not count)."""
    if ask.level != 0:
        return None
    if ask.state == "answered" and ask.answer is not None:
        return "declined" if ask.answer.answer == "declined" else "answered"
    if ask.state == "closed" and ask.closed == "expired":
        return "expired"
    return None


def brake_due(
    seat_id: str, recent: Sequence[tuple[str, Concluded]], *, now_ms: int
) -> AskBrake | None:
    """The hold of a seat whose last BRAKE_WINDOW concluded asks (newest first) hold at
    least BRAKE_BAD declined or unanswered ones; None when they do not."""
    window = list(recent)[:BRAKE_WINDOW]
    bad = [ask_id for ask_id, how in window if how in ("declined", "expired")]
    if len(bad) < BRAKE_BAD:
        return None
    declined = sum(1 for _a, how in window if how == "declined")
    expired = sum(1 for _a, how in window if how == "expired")
    why = (
        f"{len(bad)} of its last {len(window)} asks went badly ({declined} declined, "
        f"{expired} unanswered); the rule is {BRAKE_BAD} of {BRAKE_WINDOW}"
    )
    return AskBrake(seat_id=seat_id, held=True, since_ms=now_ms, why=why, ask_ids=tuple(bad))


def brake_report_id(brake: AskBrake) -> str:
    """The work id of the one ask a hold raises: the hold itself does not hold it."""
    return f"asks-held:{brake.seat_id}:{brake.since_ms}"


def brake_report(brake: AskBrake, operator_id: str) -> WorkReport:
    """The one ask an operator gets to look at a held seat."""
    return WorkReport(
        id=brake_report_id(brake),
        title=f"{brake.seat_id}'s asks are held"[:500],
        headline=f"Seat {brake.seat_id}'s asks are held: {brake.why}."[:500],
        summary="People keep declining or not answering what this seat asks, so it asks "
        "nobody more until you look at it. Asks: " + ", ".join(brake.ask_ids),
        scope=f"{brake.seat_id} asks",
        state="blocked",
        blocker=Blocker(kind="decision", owner_id=operator_id, scope=f"{brake.seat_id} asks"),
        self_serve_exhausted=True,
        question="What you can do:",
        options=(
            f"see its asks: seatwire asks --seat {brake.seat_id}",
            f"let it ask again: seatwire asks release {brake.seat_id}",
        ),
        seat_id=brake.seat_id,
    )
