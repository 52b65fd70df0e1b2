"""Revoking a consent, pure: who may, what a revocation writes (the consent, its ask's answer,
the seat's item), that nothing is revoked twice, and that the record no longer answers a later
plan once its consent is revoked."""

from __future__ import annotations

from contracts.asks import Ask, AskLanding, ConsentRecord, EscalationStep
from contracts.engagement import EngagementDecision, Target
from pipeline.asks import (
    DEFAULT_TIMEOUTS_MS,
    AnswerIn,
    AskRecordView,
    answer_ask,
    escalated,
    landed,
    new_ask,
    read_record,
    revocable,
    revoke_consent,
    revokers,
    with_root_consent,
)

NOW = 1_800_000_000_000
CONSENT = "irreversible_or_external"


def _decision() -> EngagementDecision:
    return EngagementDecision(
        engage=True,
        trigger=CONSENT,
        reason_code="consent:irreversible",
        reason="drop the table",
        targets=(Target(member_id="ben"), Target(member_id="chloe")),
        surface="dm",
        work_id="w-1",
        dedupe_key="k1",
        attempt=1,
        body="May I drop it?",
        now_ms=NOW,
    )


def _approved(by: str = "ben", *, up: str | None = None) -> tuple[Ask, ConsentRecord]:
    """The consent asked of ben and chloe (and, with `up`, one rung up of `up` too),
    approved by `by`."""
    ask = new_ask(
        _decision(),
        seat_id="scout",
        tracking_id="t-1",
        attempt=1,
        now_ms=NOW,
        timeouts=DEFAULT_TIMEOUTS_MS,
        scope="billing database",
        risk_kinds=("irreversible",),
    )
    landing = AskLanding(adapter="slack", channel_id="D1", message_id="1.1", at_ms=NOW + 10)
    ask = landed(ask, landing, now_ms=NOW + 10)
    if up is not None:
        step = EscalationStep(
            level=1, target_id=up, rung="target_supervisor", at_ms=NOW + 15, tracking_id="t-up"
        )
        ask = escalated(ask, step, "ben did not answer", now_ms=NOW + 15)
    out = answer_ask(ask, AnswerIn("approved", by, "api"), now_ms=NOW + 20)
    assert out.consent is not None
    return out.ask, out.consent


def test_the_approver_and_the_others_asked_may_revoke_and_nobody_else() -> None:
    ask, consent = _approved()
    assert revokers(consent, ask) == ("ben", "chloe")
    step = EscalationStep(
        level=1, target_id="ava", rung="target_supervisor", at_ms=NOW + 5, tracking_id="t-up"
    )
    climbed = ask.model_copy(update={"escalations": (step,)})
    assert revokers(consent, climbed) == ("ben", "chloe", "ava")
    assert revokers(consent, None) == ("ben",)
    refused = revoke_consent(consent, ask, by="jo", now_ms=NOW + 30)
    assert (refused.outcome, refused.reason_code) == ("refused", "not_a_revoker")
    assert refused.item is None and refused.ask == ask and refused.consent == consent
    operator = revoke_consent(consent, ask, by="jo", now_ms=NOW + 30, anyone=True)
    assert operator.outcome == "revoked" and operator.consent.revoked_by == "jo"


def test_a_revocation_marks_the_consent_and_its_answer_and_tells_the_seat() -> None:
    ask, consent = _approved()
    got = revoke_consent(consent, ask, by="chloe", now_ms=NOW + 30)
    assert (got.outcome, got.reason_code) == ("revoked", "consent_revoked")
    assert (got.consent.revoked_by, got.consent.revoked_at_ms) == ("chloe", NOW + 30)
    assert got.ask is not None and got.ask.answer is not None
    assert got.ask.answer.answer == "approved" and got.ask.state == "answered"
    assert (got.ask.answer.consent_revoked_by, got.ask.answer.consent_revoked_at_ms) == (
        "chloe",
        NOW + 30,
    )
    last = got.ask.history[-1]
    assert (last.event, last.reason_code, last.by) == ("revoked", "consent_revoked", "chloe")
    item = got.item
    assert item is not None and item.kind == "consent_revoked" and item.ask is None
    assert item.consent is not None
    assert (item.consent.consent_id, item.consent.approved_by, item.consent.revoked_by) == (
        got.consent.id,
        "ben",
        "chloe",
    )
    assert item.candidate.ids.channel_id == "D1" and item.delivery_id.endswith(f":{NOW + 30}")
    assert revocable(ask, now_ms=NOW + 30) == got.consent.id
    assert revocable(got.ask, now_ms=NOW + 30) is None


def test_nothing_is_revoked_twice_nor_after_it_expired() -> None:
    ask, consent = _approved()
    first = revoke_consent(consent, ask, by="ben", now_ms=NOW + 30)
    again = revoke_consent(first.consent, first.ask, by="chloe", now_ms=NOW + 40)
    assert (again.outcome, again.reason_code, again.item) == ("refused", "already_revoked", None)
    late = revoke_consent(consent, ask, by="ben", now_ms=consent.expires_at_ms)
    assert (late.outcome, late.reason_code) == ("refused", "consent_expired")
    assert revocable(ask, now_ms=consent.expires_at_ms) is None


def test_a_revoked_consent_no_longer_answers_a_later_plan() -> None:
    ask, consent = _approved()
    plan = _decision()

    def read(view: AskRecordView) -> EngagementDecision:
        return read_record(
            plan,
            view,
            revision=1,
            scope="billing database",
            risk_kinds=("irreversible",),
            now_ms=NOW + 60,
        )

    on_record = read(AskRecordView(latest=ask, consents=(consent,)))
    assert on_record.reason_code == "consent_on_record"
    got = revoke_consent(consent, ask, by="ben", now_ms=NOW + 50)
    after = read(AskRecordView(latest=got.ask, consents=(got.consent,)))
    assert after.engage and after.reason_code == plan.reason_code
    # The same ask answered (not a consent's revocation) still is `already_answered`.
    assert read(AskRecordView(latest=ask)).reason_code == "already_answered"


def test_an_escalations_message_shows_the_consent_of_the_ask_it_escalates() -> None:
    root, consent = _approved(by="ava", up="ava")
    child = root.model_copy(
        update={
            "id": "ask-up-1",
            "escalates": root.id,
            "level": 1,
            "escalations": (),
            "targets": (Target(member_id="ava"),),
        }
    )
    child = answer_ask(
        child.model_copy(update={"state": "open", "answer": None}),
        AnswerIn("approved", "ava", "slack_button"),
        now_ms=NOW + 20,
    ).ask
    assert child.answer is not None and child.answer.consent_id != consent.id
    shown = with_root_consent(child, root)
    assert shown.answer is not None and shown.answer.consent_id == consent.id
    assert revocable(shown, now_ms=NOW + 30) == consent.id
    revoked = revoke_consent(consent, root, by="ava", now_ms=NOW + 30)
    after = with_root_consent(child, revoked.ask)
    assert after.answer is not None and after.answer.consent_revoked_by == "ava"
    assert revocable(after, now_ms=NOW + 30) is None
    assert with_root_consent(child, None) == child
