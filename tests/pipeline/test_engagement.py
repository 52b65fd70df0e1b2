"""Unit tests for the engagement decision (docs/architecture.md): triggers, target ladder, surface,
ask.

Pure: no server, no clock. Each expectation pins one branch of the decision
(docs/architecture.md, "Engagement"); fixtures are small literal camelCase dicts.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts import Channel, LedgerRow, Member, Mention, WorkReport
from pipeline.engagement import (
    Directory,
    choose_surface,
    compose_ask,
    decide_engagement,
    evaluate_triggers,
    resolve_targets,
)
from pipeline.guardrails import dedupe_key_for

NOW = 1_700_000_000_000
HOUR = 3_600_000
ME = "seat-1"


# --------------------------------------------------------------------------- fixtures


def member(id: str, **kw: Any) -> dict[str, Any]:
    """A directory entry as a camelCase dict."""
    return {"id": id, **kw}


def target(id: str, name: str | None = None) -> dict[str, Any]:
    """A resolved target as choose_surface / compose_ask receive it."""
    return {"memberId": id, "name": name or id.capitalize()}


def blocked_work(**kw: Any) -> dict[str, Any]:
    """A piece of work blocked on a decision owned by `owen`, self-serve exhausted."""
    work: dict[str, Any] = {
        "id": "w1",
        "title": "Migrate billing",
        "state": "blocked",
        "blocker": {"kind": "decision", "ownerId": "owen", "detail": "pick a cutover date"},
        "selfServeExhausted": True,
    }
    work.update(kw)
    return work


def ctx(**kw: Any) -> dict[str, Any]:
    """A decide_engagement context: seat `seat-1`, owen in the directory, empty ledger."""
    base: dict[str, Any] = {
        "me": ME,
        "directory": [member(ME), member("owen", displayName="Owen Ops")],
        "channels": [],
        "ledger": [],
        "nowMs": NOW,
    }
    base.update(kw)
    return base


def fired_codes(work: Any) -> list[str]:
    return [f["code"] for f in evaluate_triggers(work)["fired"]]


def suppressed_codes(work: Any) -> list[str]:
    return [s["code"] for s in evaluate_triggers(work)["suppressed"]]


def ladder(targets: list[Any]) -> list[tuple[str, str]]:
    return [(t.member_id, t.rung) for t in targets]


# =========================================================================== 1. whether


class TestEvaluateTriggers:
    def test_nothing_fires_for_plain_in_progress_work(self) -> None:
        """Work with no risk, blocker, review or commitment fires and suppresses nothing."""
        assert evaluate_triggers({"id": "w", "state": "in_progress"}) == {
            "fired": [],
            "suppressed": [],
        }
        assert evaluate_triggers() == {"fired": [], "suppressed": []}

    def test_irreversible_risk_fires_consent_required(self) -> None:
        """An imminent irreversible act fires irreversible_or_external with consent_required."""
        # given work about to do something irreversible
        work = {"id": "w", "title": "Drop table", "risk": {"irreversible": True}}
        # when triggers are evaluated (state defaults to in_progress)
        fired = evaluate_triggers(work)["fired"]
        # then consent is required, scoped to the title
        assert [(f["trigger"], f["code"], f["scope"]) for f in fired] == [
            ("irreversible_or_external", "consent_required:irreversible", "Drop table")
        ]

    @pytest.mark.parametrize(
        ("risk", "code"),
        [
            ({"external": True}, "consent_required:external"),
            ({"financial": True}, "consent_required:financial"),
            ({"external": True, "financial": True}, "consent_required:external+financial"),
            ({"financial": True, "irreversible": True}, "consent_required:irreversible+financial"),
            (
                {"financial": True, "external": True, "irreversible": True},
                "consent_required:irreversible+external+financial",
            ),
            ({"external": True, "irreversible": False}, "consent_required:external"),
        ],
    )
    def test_consent_code_lists_risk_kinds_in_fixed_order(
        self, risk: dict[str, bool], code: str
    ) -> None:
        """The consent code joins the truthy risk kinds as irreversible, external, financial."""
        assert fired_codes({"id": "w", "state": "blocked", "risk": risk}) == [code]

    @pytest.mark.parametrize(
        ("work", "scope"),
        [
            ({"scope": "prod db", "blocker": {"scope": "b"}, "title": "t"}, "prod db"),
            ({"blocker": {"scope": "b"}, "title": "t"}, "b"),
            ({"title": "t"}, "t"),
            ({}, ""),
        ],
    )
    def test_consent_scope_prefers_work_scope_then_blocker_scope_then_title(
        self, work: dict[str, Any], scope: str
    ) -> None:
        """The consent trigger's scope is work.scope, else blocker.scope, else the title."""
        work = {"id": "w", "risk": {"external": True}, **work}
        fired = evaluate_triggers(work)["fired"]
        assert fired[0]["scope"] == scope

    def test_risk_on_done_work_is_suppressed_as_act_already_taken(self) -> None:
        """Risk on finished work suppresses consent with act_already_taken instead of firing."""
        result = evaluate_triggers({"id": "w", "state": "DONE", "risk": {"external": True}})
        assert result["fired"] == []
        assert [(s["trigger"], s["code"]) for s in result["suppressed"]] == [
            ("irreversible_or_external", "act_already_taken")
        ]

    @pytest.mark.parametrize("kind", ["decision", "access", "information", "approval"])
    def test_other_owned_blocker_fires_blocked_kind(self, kind: str) -> None:
        """Blocked on an other-owned kind with self-serve exhausted fires blocked:<kind>."""
        work = {
            "id": "w",
            "title": "T",
            "state": "blocked",
            "blocker": {"kind": kind.upper()},
            "selfServeExhausted": True,
        }
        result = evaluate_triggers(work)
        assert result["suppressed"] == []
        [fired] = result["fired"]
        assert (fired["trigger"], fired["code"], fired["ownerId"]) == (
            "blocked_on_other",
            f"blocked:{kind}",
            None,
        )
        assert fired["scope"] == "T"

    def test_failed_state_also_evaluates_the_blocker(self) -> None:
        """A failed run with an other-owned blocker fires the blocked trigger like a blocked one."""
        work = blocked_work(state="failed")
        assert fired_codes(work) == ["blocked:decision"]

    def test_blocked_trigger_carries_owner_scope_and_detail(self) -> None:
        """The blocked trigger takes ownerId, scope and detail from the blocker."""
        work = blocked_work(
            scope="work scope",
            blocker={"kind": "access", "ownerId": "ana", "scope": "vault", "detail": "need a key"},
        )
        [fired] = evaluate_triggers(work)["fired"]
        assert (fired["ownerId"], fired["scope"], fired["detail"]) == ("ana", "vault", "need a key")

    def test_capacity_blocker_with_explicit_owner_fires(self) -> None:
        """A capacity blocker qualifies only because it names an explicit ownerId."""
        work = blocked_work(blocker={"kind": "capacity", "ownerId": "ops-lead"})
        [fired] = evaluate_triggers(work)["fired"]
        assert (fired["code"], fired["ownerId"]) == ("blocked:capacity", "ops-lead")

    def test_blocker_with_owner_but_no_kind_fires_blocked_unspecified(self) -> None:
        """An owned blocker without a kind fires as blocked:unspecified."""
        assert fired_codes(blocked_work(blocker={"ownerId": "ana"})) == ["blocked:unspecified"]

    @pytest.mark.parametrize(
        ("blocker", "code", "needs"),
        [
            ({"kind": "access"}, "blocked:access", "the access it needs"),
            ({"kind": "information"}, "blocked:information", "the information it needs"),
            ({"kind": "approval"}, "blocked:approval", "the approval it needs"),
            ({"ownerId": "ana"}, "blocked:unspecified", "what it needs"),
        ],
    )
    def test_a_blocker_without_detail_is_described_in_words_that_fit_its_kind(
        self, blocker: dict[str, Any], code: str, needs: str
    ) -> None:
        """With no detail of its own, the fired blocker reads right for every kind (never
        "blocked on a access"); the reason code is the kind's as before."""
        [fired] = evaluate_triggers(blocked_work(blocker=blocker))["fired"]
        assert (fired["code"], fired["detail"]) == (
            code,
            f"blocked until another party gives {needs}",
        )

    @pytest.mark.parametrize("state", ["blocked", "failed"])
    def test_blocked_without_blocker_is_blocker_unnamed(self, state: str) -> None:
        """A blocked or failed state that names no blocker is suppressed as blocker_unnamed."""
        result = evaluate_triggers({"id": "w", "state": state, "selfServeExhausted": True})
        assert result["fired"] == []
        assert [(s["trigger"], s["code"]) for s in result["suppressed"]] == [
            ("blocked_on_other", "blocker_unnamed")
        ]

    @pytest.mark.parametrize(
        ("blocker", "kind_in_detail"),
        [
            ({"kind": "capacity"}, '"capacity"'),
            ({"kind": "weather"}, '"weather"'),
            ({"scope": "tests"}, '"unknown"'),
            # `work.blocker || null`, as JavaScript reads it: an empty object is a named blocker.
            ({}, '"unknown"'),
        ],
    )
    def test_blocker_of_my_own_is_suppressed_as_blocker_is_mine(
        self, blocker: dict[str, Any], kind_in_detail: str
    ) -> None:
        """A capacity or unknown-kind blocker without an owner is suppressed as blocker_is_mine."""
        result = evaluate_triggers(blocked_work(blocker=blocker))
        assert result["fired"] == []
        [s] = result["suppressed"]
        assert (s["trigger"], s["code"]) == ("blocked_on_other", "blocker_is_mine")
        assert kind_in_detail in s["detail"]

    @pytest.mark.parametrize("flag", [None, False, "yes", "true", 1, [True]])
    def test_self_serve_must_be_exactly_true(self, flag: Any) -> None:
        """Unless selfServeExhausted is exactly True the blocker is self_serve_available."""
        work = blocked_work()
        if flag is None:
            del work["selfServeExhausted"]
        else:
            work["selfServeExhausted"] = flag
        result = evaluate_triggers(work)
        assert result["fired"] == []
        assert [(s["trigger"], s["code"]) for s in result["suppressed"]] == [
            ("blocked_on_other", "self_serve_available")
        ]

    def test_blocker_is_ignored_while_work_is_in_progress(self) -> None:
        """A blocker on work that is not blocked or failed neither fires nor suppresses."""
        assert evaluate_triggers(blocked_work(state="in_progress")) == {
            "fired": [],
            "suppressed": [],
        }

    def test_required_review_fires_review_required_kind(self) -> None:
        """A required review fires review_required:<kind> with the reviewer as owner."""
        work = {
            "id": "w",
            "title": "T",
            "scope": "S",
            "review": {"required": True, "kind": "Security", "reviewerId": "rev"},
        }
        [fired] = evaluate_triggers(work)["fired"]
        assert (fired["trigger"], fired["code"], fired["ownerId"], fired["scope"]) == (
            "mandatory_review",
            "review_required:security",
            "rev",
            "S",
        )

    def test_required_review_without_kind_is_unspecified(self) -> None:
        """A required review with no kind fires review_required:unspecified and no owner."""
        work = {"id": "w", "review": {"required": True, "requested": True, "scope": "R"}}
        [fired] = evaluate_triggers(work)["fired"]
        assert (fired["code"], fired["ownerId"], fired["scope"]) == (
            "review_required:unspecified",
            None,
            "R",
        )
        assert suppressed_codes(work) == []

    def test_requested_but_optional_review_is_suppressed(self) -> None:
        """A review that is only requested is suppressed as review_optional."""
        result = evaluate_triggers({"id": "w", "review": {"requested": True}})
        assert result["fired"] == []
        assert [(s["trigger"], s["code"]) for s in result["suppressed"]] == [
            ("mandatory_review", "review_optional")
        ]

    def test_review_neither_required_nor_requested_is_silent(self) -> None:
        """A review object with neither flag neither fires nor suppresses."""
        assert evaluate_triggers({"id": "w", "review": {"kind": "x"}}) == {
            "fired": [],
            "suppressed": [],
        }

    def test_commitment_at_risk_fires_commitment_slipping(self) -> None:
        """A commitment marked at risk fires commitment_slipping owned by the person owed."""
        work = {"id": "w", "title": "T", "commitment": {"toMemberId": "cara", "atRisk": True}}
        [fired] = evaluate_triggers(work)["fired"]
        assert (fired["trigger"], fired["code"], fired["ownerId"]) == (
            "commitment_at_risk",
            "commitment_slipping",
            "cara",
        )

    def test_commitment_on_failed_run_fires_commitment_failed(self) -> None:
        """A failed run with a commitment fires commitment_failed even when not marked at risk."""
        work = {"id": "w", "state": "failed", "commitment": {"toMemberId": "cara"}}
        result = evaluate_triggers(work)
        assert [f["code"] for f in result["fired"]] == ["commitment_failed"]
        assert [s["code"] for s in result["suppressed"]] == ["blocker_unnamed"]

    def test_commitment_on_track_is_suppressed(self) -> None:
        """A commitment that is on track is suppressed as commitment_on_track."""
        result = evaluate_triggers({"id": "w", "commitment": {"toMemberId": "cara"}})
        assert result["fired"] == []
        assert [(s["trigger"], s["code"]) for s in result["suppressed"]] == [
            ("commitment_at_risk", "commitment_on_track")
        ]

    def test_commitment_without_recipient_is_ignored(self) -> None:
        """A commitment naming nobody neither fires nor suppresses."""
        assert evaluate_triggers({"id": "w", "commitment": {"atRisk": True}}) == {
            "fired": [],
            "suppressed": [],
        }

    def test_fired_triggers_are_sorted_by_cost_of_not_engaging(self) -> None:
        """All four triggers fire in rank order: irreversible, blocked, review, commitment."""
        work = blocked_work(
            state="failed",
            risk={"irreversible": True},
            review={"required": True, "kind": "legal"},
            commitment={"toMemberId": "cara"},
        )
        fired = evaluate_triggers(work)["fired"]
        assert [(f["trigger"], f["code"]) for f in fired] == [
            ("irreversible_or_external", "consent_required:irreversible"),
            ("blocked_on_other", "blocked:decision"),
            ("mandatory_review", "review_required:legal"),
            ("commitment_at_risk", "commitment_failed"),
        ]

    def test_suppressions_accumulate_alongside_fired(self) -> None:
        """A fired trigger does not hide the others' suppressions."""
        work = {
            "id": "w",
            "state": "blocked",
            "risk": {"external": True},
            "review": {"requested": True},
            "commitment": {"toMemberId": "c"},
        }
        result = evaluate_triggers(work)
        assert [f["code"] for f in result["fired"]] == ["consent_required:external"]
        assert [s["code"] for s in result["suppressed"]] == [
            "blocker_unnamed",
            "review_optional",
            "commitment_on_track",
        ]

    def test_work_report_contract_evaluates_like_the_dict(self) -> None:
        """A WorkReport contract gives the same verdict as the camelCase dict it validates."""
        work = blocked_work(review={"required": True, "reviewerId": "rev"})
        assert evaluate_triggers(WorkReport.model_validate(work)) == evaluate_triggers(work)


# =========================================================================== 2. who


class TestResolveTargetsExplicit:
    def test_trigger_owner_is_explicit_with_directory_details(self) -> None:
        """The trigger's owner is targeted on the explicit rung with name, role and team."""
        directory = [
            member("ana", displayName="Ana", roleTitle="Head of Finance", teamName="Finance")
        ]
        trig = {"trigger": "blocked_on_other", "ownerId": "ana"}
        out = resolve_targets({"id": "w"}, trig, directory, ME)
        [t] = out["targets"]
        assert (t.member_id, t.name, t.role, t.team, t.rung) == (
            "ana",
            "Ana",
            "Head of Finance",
            "Finance",
            "explicit",
        )
        assert any(line.startswith("ana (explicit): ") for line in out["why"])

    @pytest.mark.parametrize(
        "work",
        [
            {"blocker": {"ownerId": "x"}},
            {"review": {"reviewerId": "x"}},
            {"approverId": "x"},
            {"commitment": {"toMemberId": "x", "atRisk": True}},
            {"state": "failed", "commitment": {"toMemberId": "x"}},
            {"state": "failed", "origin": {"requesterId": "x"}},
        ],
        ids=[
            "blocker-owner",
            "reviewer",
            "approver",
            "commitment-at-risk",
            "commitment-failed",
            "requester-on-failure",
        ],
    )
    def test_each_named_party_is_explicit(self, work: dict[str, Any]) -> None:
        """Blocker owner, reviewer, approver, owed person and (on failure) requester: explicit."""
        out = resolve_targets({"id": "w", **work}, {"trigger": "blocked_on_other"}, [], ME)
        assert ladder(out["targets"]) == [("x", "explicit")]

    def test_commitment_on_track_recipient_is_not_explicit(self) -> None:
        """The person owed an on-track commitment is not named explicitly."""
        work = {"id": "w", "state": "blocked", "commitment": {"toMemberId": "cara"}}
        out = resolve_targets(work, {"trigger": "blocked_on_other"}, [], ME)
        assert out["targets"] == []

    def test_requester_is_explicit_for_commitment_at_risk(self) -> None:
        """The requester is explicit when the trigger is commitment_at_risk."""
        work = {"id": "w", "state": "in_progress", "origin": {"requesterId": "rita"}}
        out = resolve_targets(work, {"trigger": "commitment_at_risk"}, [], ME)
        assert ladder(out["targets"]) == [("rita", "explicit")]

    def test_requester_is_not_copied_onto_an_unrelated_blocker(self) -> None:
        """On a blocked (not failed) trigger the requester is not added beside the blocker owner."""
        work = blocked_work(origin={"requesterId": "rita"})
        trig = evaluate_triggers(work)["fired"][0]
        out = resolve_targets(work, trig, [member("owen"), member("rita")], ME)
        assert ladder(out["targets"]) == [("owen", "explicit")]

    def test_requester_alone_on_a_blocked_trigger_falls_to_supervisor(self) -> None:
        """A blocked trigger naming only a requester goes up the line, not to the requester."""
        work = {"id": "w", "state": "blocked", "origin": {"requesterId": "rita"}}
        directory = [member(ME, supervisorId="boss"), member("boss"), member("rita")]
        out = resolve_targets(work, {"trigger": "blocked_on_other"}, directory, ME)
        assert ladder(out["targets"]) == [("boss", "supervisory")]

    def test_explicit_order_dedupes_and_caps_at_three(self) -> None:
        """Explicit names keep the order the work gives them, appear once, and stop at three."""
        work = {
            "id": "w",
            "state": "failed",
            "blocker": {"ownerId": "trig"},  # same person as the trigger owner
            "review": {"reviewerId": "rev"},
            "approverId": "appr",
            "commitment": {"toMemberId": "owed"},
            "origin": {"requesterId": "req"},
        }
        out = resolve_targets(work, {"trigger": "blocked_on_other", "ownerId": "trig"}, [], ME)
        assert ladder(out["targets"]) == [
            ("trig", "explicit"),
            ("rev", "explicit"),
            ("appr", "explicit"),
        ]

    def test_max_targets_overrides_the_cap(self) -> None:
        """max_targets limits how many people one ask may name."""
        work = {"id": "w", "approverId": "appr", "review": {"reviewerId": "rev"}}
        out = resolve_targets(work, {"ownerId": "trig"}, [], ME, max_targets=1)
        assert ladder(out["targets"]) == [("trig", "explicit")]

    def test_non_numeric_max_targets_falls_back_to_three(self) -> None:
        """A boolean max_targets is not a finite number, so the cap stays 3."""
        work = {"id": "w", "approverId": "appr", "review": {"reviewerId": "rev"}}
        out = resolve_targets(work, {"ownerId": "trig"}, [], ME, max_targets=True)
        assert [t.member_id for t in out["targets"]] == ["trig", "rev", "appr"]

    def test_unknown_id_is_still_targeted_with_its_id_as_name(self) -> None:
        """A named id missing from the directory is targeted explicitly, named by its id."""
        out = resolve_targets({"id": "w"}, {"ownerId": " ghost "}, [member("ana")], ME)
        [t] = out["targets"]
        assert (t.member_id, t.name, t.role, t.team, t.rung) == (
            "ghost",
            "ghost",
            "",
            "",
            "explicit",
        )

    @pytest.mark.parametrize("status", ["active", "ONLINE", "busy", "", None])
    def test_engageable_statuses(self, status: str | None) -> None:
        """Active, online, busy or an absent status is engageable."""
        out = resolve_targets({"id": "w"}, {"ownerId": "ana"}, [member("ana", status=status)], ME)
        assert ladder(out["targets"]) == [("ana", "explicit")]

    @pytest.mark.parametrize("status", ["archived", "INACTIVE", "bench", "away"])
    def test_named_but_unengageable_member_is_skipped_and_falls_through(self, status: str) -> None:
        """A named archived/inactive member is skipped (said in why) and the ladder goes on."""
        directory = [
            member("olga", status=status),
            member("dana", owns=["billing"]),
        ]
        work = {"id": "w", "title": "Billing export"}
        out = resolve_targets(
            work, {"trigger": "blocked_on_other", "ownerId": "olga"}, directory, ME
        )
        assert ladder(out["targets"]) == [("dana", "ownership")]
        assert f"skipped olga: not an engageable seat (status={status.lower()})" in out["why"]

    def test_skipped_named_member_with_no_owner_reaches_the_supervisor(self) -> None:
        """An archived named person and no owner of the scope sends the ask to the supervisor."""
        directory = [
            member(ME, supervisorId="boss"),
            member("boss", displayName="Bea"),
            member("olga", status="archived"),
        ]
        work = {"id": "w", "title": "Quarterly thing"}
        out = resolve_targets(work, {"ownerId": "olga"}, directory, ME)
        assert ladder(out["targets"]) == [("boss", "supervisory")]
        assert out["targets"][0].name == "Bea"
        assert any(line.startswith("skipped olga") for line in out["why"])

    def test_me_in_directory_is_skipped_never_targeted(self) -> None:
        """The seat itself named as owner is skipped, never targeted."""
        directory = [member(ME), member("ana")]
        out = resolve_targets({"id": "w"}, {"ownerId": ME}, directory, ME)
        assert out["targets"] == []
        assert f"skipped {ME}: not an engageable seat (status=unknown)" in out["why"]

    def test_me_absent_from_directory_is_dropped_never_targeted(self) -> None:
        """The seat itself named as owner is dropped even when it is not in the directory."""
        out = resolve_targets({"id": "w", "approverId": "ana"}, {"ownerId": ME}, [], ME)
        assert ladder(out["targets"]) == [("ana", "explicit")]


class TestResolveTargetsOwnership:
    def test_owns_substring_matches_a_scope_token(self) -> None:
        """A member whose owns[] entry contains a scope token is picked on the ownership rung."""
        directory = [member("ana"), member("dana", owns=["Billing-Exports"])]
        out = resolve_targets({"id": "w", "title": "Billing export for EU"}, {}, directory, ME)
        [t] = out["targets"]
        assert (t.member_id, t.rung) == ("dana", "ownership")
        assert 'owning "billing-exports"' in t.why

    def test_escalation_path_naming_the_scope_is_ownership(self) -> None:
        """A member whose escalation path names a scope token is picked on the ownership rung."""
        directory = [member("paz", escalationPath="Payments > Finance lead")]
        out = resolve_targets({"id": "w", "scope": "payments outage"}, {}, directory, ME)
        [t] = out["targets"]
        assert (t.member_id, t.rung) == ("paz", "ownership")
        assert "escalation path" in t.why

    def test_ownership_beats_expertise(self) -> None:
        """When someone owns the scope, role-title matches are not consulted."""
        directory = [
            member("eve", roleTitle="Payments engineer"),
            member("oli", owns=["payments"]),
        ]
        out = resolve_targets({"id": "w", "scope": "payments refund"}, {}, directory, ME)
        assert ladder(out["targets"]) == [("oli", "ownership")]

    def test_trigger_scope_wins_over_work_scope_and_title(self) -> None:
        """The scope matched is the trigger's, then the work's, then the title."""
        directory = [member("sec", owns=["security"]), member("bil", owns=["billing"])]
        work = {"id": "w", "scope": "security", "title": "security"}
        out = resolve_targets(work, {"scope": "billing"}, directory, ME)
        assert ladder(out["targets"]) == [("bil", "ownership")]

    def test_stopwords_and_short_words_do_not_match(self) -> None:
        """Stopwords and words under three characters are not scope tokens."""
        directory = [member(ME, supervisorId="boss"), member("boss"), member("x", owns=["the ui"])]
        out = resolve_targets({"id": "w", "title": "the ui"}, {}, directory, ME)
        assert ladder(out["targets"]) == [("boss", "supervisory")]

    def test_owners_are_capped_in_directory_order(self) -> None:
        """Four owners of the scope yield the first three in directory order."""
        directory = [member(f"o{i}", owns=["search"]) for i in range(4)]
        out = resolve_targets({"id": "w", "title": "search"}, {}, directory, ME)
        assert ladder(out["targets"]) == [(f"o{i}", "ownership") for i in range(3)]

    def test_unengageable_owner_and_me_are_not_picked(self) -> None:
        """An archived owner and the seat itself are passed over on the ownership rung."""
        directory = [
            member(ME, owns=["search"]),
            member("old", owns=["search"], status="archived"),
            member("new", owns=["search"]),
        ]
        out = resolve_targets({"id": "w", "title": "search"}, {}, directory, ME)
        assert ladder(out["targets"]) == [("new", "ownership")]


class TestResolveTargetsExpertise:
    @pytest.mark.parametrize(
        ("scope", "profile", "picked"),
        [
            ("api ops", {"roleTitle": "API Ops lead"}, True),  # two short tokens
            ("api", {"roleTitle": "API engineer"}, False),  # one short token: coincidence
            ("data pipeline", {"tagline": "data person"}, False),  # one 4-char token
            ("infra budget", {"teamName": "Infra"}, True),  # one token of exactly 5
            ("kubernetes upgrade", {"title": "Kubernetes admin"}, True),  # one long token
        ],
    )
    def test_expertise_needs_two_tokens_or_one_of_five_characters(
        self, scope: str, profile: dict[str, str], picked: bool
    ) -> None:
        """Expertise picks on two distinct token hits or one hit of at least 5 characters."""
        out = resolve_targets({"id": "w", "scope": scope}, {}, [member("ex", **profile)], ME)
        assert ladder(out["targets"]) == ([("ex", "expertise")] if picked else [])

    def test_expertise_why_names_the_matched_tokens(self) -> None:
        """The expertise reason lists the matched tokens."""
        out = resolve_targets(
            {"id": "w", "scope": "api ops"}, {}, [member("ex", roleTitle="API Ops lead")], ME
        )
        assert out["targets"][0].why == 'their role/team matches this scope on "api", "ops"'

    def test_expertise_ranks_by_score(self) -> None:
        """Higher expertise scores come first, whatever the directory order."""
        directory = [
            member("two", roleTitle="API person", teamName="Payments"),  # api+payments: 2+1
            member("one", roleTitle="Fraud analyst"),  # fraud: 1+1
            member("three", roleTitle="Fraud payments api analyst"),  # 3+1
            member("none", roleTitle="Designer"),
        ]
        out = resolve_targets({"id": "w", "scope": "payments fraud api"}, {}, directory, ME)
        assert ladder(out["targets"]) == [
            ("three", "expertise"),
            ("two", "expertise"),
            ("one", "expertise"),
        ]

    def test_expertise_skips_unengageable_members(self) -> None:
        """A busy member matches on expertise; an archived one does not."""
        directory = [
            member("gone", roleTitle="Kubernetes admin", status="archived"),
            member("here", roleTitle="Kubernetes admin", status="busy"),
        ]
        out = resolve_targets({"id": "w", "scope": "kubernetes"}, {}, directory, ME)
        assert ladder(out["targets"]) == [("here", "expertise")]


class TestResolveTargetsSupervisory:
    def test_supervisor_from_my_directory_entry_wins_over_argument(self) -> None:
        """The seat's own supervisorId is used before the supervisor_id argument."""
        directory = [member(ME, supervisorId="boss"), member("boss")]
        out = resolve_targets({"id": "w", "title": "x"}, {}, directory, ME, supervisor_id="other")
        assert ladder(out["targets"]) == [("boss", "supervisory")]

    def test_supervisor_from_argument_when_directory_has_none(self) -> None:
        """Without a supervisorId on my entry the supervisor_id argument is the escalation."""
        out = resolve_targets({"id": "w"}, {}, [member(ME)], ME, supervisor_id="lead")
        [t] = out["targets"]
        assert (t.member_id, t.name, t.rung) == ("lead", "lead", "supervisory")

    def test_archived_supervisor_is_skipped_and_nobody_is_targeted(self) -> None:
        """An archived supervisor is skipped, leaving no target and a 'no target' why."""
        directory = [member(ME, supervisorId="boss"), member("boss", status="archived")]
        out = resolve_targets({"id": "w", "title": "x"}, {}, directory, ME)
        assert out["targets"] == []
        assert out["why"][-1].startswith("no target:")

    def test_nobody_means_empty_targets_and_a_no_target_why(self) -> None:
        """With no owner, expert or supervisor the targets are empty and why says 'no target'."""
        out = resolve_targets(
            {"id": "w", "title": "Orphan"}, {"scope": "orphan"}, [member("a")], ME
        )
        assert out["targets"] == []
        assert out["why"] == [
            'no target: none of the 1 directory entries owns "orphan", and this seat has no '
            "supervisor"
        ]


# =========================================================================== 3. where


class TestChooseSurface:
    def test_reply_in_place_when_origin_room_holds_everyone(self) -> None:
        """The origin room holding every target is the surface, in its thread."""
        work = {"origin": {"channelId": "C1", "threadRootId": "T1"}}
        channels = [{"id": "C1", "name": "eng", "memberIds": ["ana", "bo", ME, "zed"]}]
        out = choose_surface(work, [target("ana"), target("bo")], channels, ME)
        assert (out["surface"], out["channelId"], out["threadRootId"], out["roomName"]) == (
            "reply_in_place",
            "C1",
            "T1",
            None,
        )
        assert out["memberIds"] == ["ana", "bo"]

    def test_reply_in_place_beats_a_dm_for_one_target(self) -> None:
        """One target already in the origin room gets a reply there, not a DM."""
        work = {"origin": {"channelId": "C1"}}
        channels = [{"id": "C1", "memberIds": ["ana"]}]
        out = choose_surface(work, [target("ana")], channels, ME)
        assert (out["surface"], out["channelId"], out["threadRootId"]) == (
            "reply_in_place",
            "C1",
            None,
        )

    @pytest.mark.parametrize(
        "channels",
        [[], [{"id": "C1", "memberIds": []}], [{"id": "C1"}]],
        ids=["room-not-listed", "room-listed-empty", "room-listed-no-roster"],
    )
    def test_reply_in_place_to_sole_requester_when_roster_unknown(
        self, channels: list[dict[str, Any]]
    ) -> None:
        """The sole requester is replied to in place even when the origin roster is unknown."""
        work = {"origin": {"channelId": "C1", "threadRootId": "T9", "requesterId": "rita"}}
        out = choose_surface(work, [target("rita")], channels, ME)
        assert (out["surface"], out["channelId"], out["threadRootId"]) == (
            "reply_in_place",
            "C1",
            "T9",
        )
        assert "asked" in out["why"]

    def test_unknown_roster_and_target_not_requester_is_a_dm(self) -> None:
        """An unknown origin roster does not count as holding a target who is not the requester."""
        work = {"origin": {"channelId": "C1", "requesterId": "rita"}}
        out = choose_surface(work, [target("owen")], [], ME)
        assert (out["surface"], out["channelId"]) == ("dm", None)

    def test_known_roster_without_the_requester_is_a_dm(self) -> None:
        """A readable origin roster that lacks the requester is not assumed to hold them."""
        work = {"origin": {"channelId": "C1", "requesterId": "rita"}}
        channels = [{"id": "C1", "memberIds": ["owen", ME]}]
        out = choose_surface(work, [target("rita")], channels, ME)
        assert out["surface"] == "dm"

    def test_requester_plus_another_with_unknown_roster_is_not_a_reply(self) -> None:
        """Two targets with an unknown origin roster are not replied to in place."""
        work = {"origin": {"channelId": "C1", "requesterId": "rita"}}
        out = choose_surface(work, [target("rita"), target("owen")], [], ME)
        assert out["surface"] == "new_room"

    def test_dm_for_one_target(self) -> None:
        """One target and no origin room is a DM."""
        out = choose_surface({"id": "w"}, [target("ana")], [], ME)
        assert out == {
            "surface": "dm",
            "channelId": None,
            "threadRootId": None,
            "roomName": None,
            "memberIds": ["ana"],
            "why": out["why"],
        }

    def test_existing_channel_is_the_smallest_room_holding_all_and_me(self) -> None:
        """Of the rooms holding every target and me, the smallest is used."""
        channels = [
            {"id": "BIG", "name": "all-hands", "memberIds": ["ana", "bo", ME, "x", "y"]},
            {"id": "SMALL", "name": "billing", "memberIds": ["ana", "bo", ME]},
            {"id": "PARTIAL", "name": "ana-only", "memberIds": ["ana", ME]},
        ]
        out = choose_surface({"id": "w"}, [target("ana"), target("bo")], channels, ME)
        assert (out["surface"], out["channelId"], out["roomName"], out["threadRootId"]) == (
            "existing_channel",
            "SMALL",
            "billing",
            None,
        )

    def test_a_room_holding_two_targets_holds_both_of_them(self) -> None:
        """Two targets are "both of them", three "all 3 of them"."""
        room = {"id": "R", "name": "billing", "memberIds": ["ana", "bo", "cy", ME]}
        two = choose_surface({"id": "w"}, [target("ana"), target("bo")], [room], ME)
        assert two["why"].startswith("billing already holds both of them (4 members")
        three = [target("ana"), target("bo"), target("cy")]
        assert "holds all 3 of them" in choose_surface({"id": "w"}, three, [room], ME)["why"]

    def test_room_without_me_is_not_used(self) -> None:
        """A room I am not in is skipped even when it is the smallest holding the targets."""
        channels = [
            {"id": "NOME", "name": "private", "memberIds": ["ana", "bo"]},
            {"id": "WITHME", "name": "bigger", "memberIds": ["ana", "bo", ME, "x"]},
        ]
        out = choose_surface({"id": "w"}, [target("ana"), target("bo")], channels, ME)
        assert (out["surface"], out["channelId"]) == ("existing_channel", "WITHME")

    def test_only_rooms_without_me_means_a_new_room(self) -> None:
        """When every room holding the targets lacks me, a new room is created."""
        channels = [{"id": "NOME", "memberIds": ["ana", "bo"]}]
        out = choose_surface({"title": "T"}, [target("ana"), target("bo")], channels, ME)
        assert out["surface"] == "new_room"

    def test_equal_sized_rooms_prefer_private_over_public(self) -> None:
        """A tie on size prefers a private or group room over a public one."""
        channels = [
            {"id": "PUB", "kind": "PUBLIC", "memberIds": ["ana", "bo", ME]},
            {"id": "PRIV", "kind": "private", "memberIds": ["ana", "bo", ME]},
        ]
        out = choose_surface({"id": "w"}, [target("ana"), target("bo")], channels, ME)
        assert (out["surface"], out["channelId"]) == ("existing_channel", "PRIV")

    def test_channel_shapes_channelid_members_objects(self) -> None:
        """Rooms given as channelId/members with member objects are understood."""
        channels = [
            {"channelId": "C7", "slug": "ops", "members": [{"memberId": "ana"}, {"id": "bo"}, ME]}
        ]
        out = choose_surface({"id": "w"}, [target("ana"), target("bo")], channels, ME)
        assert (out["surface"], out["channelId"], out["roomName"]) == (
            "existing_channel",
            "C7",
            "ops",
        )

    def test_new_room_for_two_targets_with_no_room(self) -> None:
        """Two or more targets with no room that holds them get a new, non-durable room."""
        out = choose_surface({"title": "Pick a vendor"}, [target("ana"), target("bo")], [], ME)
        assert (out["surface"], out["roomName"], out["durableChannel"], out["channelId"]) == (
            "new_room",
            "Pick a vendor",
            False,
            None,
        )
        assert out["memberIds"] == ["ana", "bo"]

    @pytest.mark.parametrize(
        ("work", "room_name", "durable"),
        [
            ({"title": "x" * 150, "durable": True}, "x" * 100, True),
            ({"durable": True}, "Needs a decision", True),
            ({"title": "", "durable": "yes"}, "Needs a decision", False),
        ],
    )
    def test_new_room_name_and_durability(
        self, work: dict[str, Any], room_name: str, durable: bool
    ) -> None:
        """The room name is the title cut to 100 or 'Needs a decision'; durable only when True."""
        out = choose_surface(work, [target("ana"), target("bo")], [], ME)
        assert (out["surface"], out["roomName"], out["durableChannel"]) == (
            "new_room",
            room_name,
            durable,
        )

    def test_channel_contracts_are_accepted(self) -> None:
        """Channel contracts choose the same surface as the equivalent dicts."""
        raw = [
            {"id": "A", "kind": "PUBLIC", "name": "a", "memberIds": ["ana", "bo", ME, "x"]},
            {"id": "B", "kind": "PRIVATE", "name": "b", "memberIds": ["ana", "bo", ME]},
        ]
        models = [Channel.model_validate(c) for c in raw]
        targets = [target("ana"), target("bo")]
        assert choose_surface({}, targets, models, ME) == choose_surface({}, targets, raw, ME)
        assert choose_surface({}, targets, models, ME)["channelId"] == "B"


# =========================================================================== 4. what it says


class TestComposeAsk:
    def test_full_template_in_order(self) -> None:
        """Headline, blank, summary, stopped, tried (max 5), ask, question+options, link."""
        work = {
            "id": "w1",
            "title": "  Migrate billing ",
            "summary": " Moved the cron jobs. ",
            "tried": ["a", "b", "c", "d", "e", "f"],
            "question": "Which credentials should I use?",
            "options": ["staging", " prod ", "neither"],
            "link": "https://board/w1",
        }
        trig = {"trigger": "blocked_on_other", "detail": "need prod DB creds"}
        body = compose_ask(work, trig, [target("ana", "Ana")], "dm")
        assert body == (
            "**Blocked:** Migrate billing\n"
            "\n"
            "Moved the cron jobs.\n"
            "Where it stopped: need prod DB creds\n"
            "\n"
            "What I've already tried:\n"
            "- a\n- b\n- c\n- d\n- e\n"
            "\n"
            "I can't clear this myself.\n"
            "\n"
            "Which credentials should I use?\n"
            "- staging\n- prod\n- neither\n"
            "\n"
            "https://board/w1"
        )

    @pytest.mark.parametrize(
        ("trigger", "head", "ask"),
        [
            ("blocked_on_other", "**Blocked:** T", "I can't clear this myself."),
            (
                "irreversible_or_external",
                "**Needs your go-ahead:** T",
                "I'm not taking this step without a yes — it can't be undone.",
            ),
            (
                "mandatory_review",
                "**Ready for review:** T",
                "It needs your sign-off before it lands.",
            ),
            (
                "commitment_at_risk",
                "**Heads-up on T**",
                "You asked for this and it isn't going to land as promised, so you're hearing it "
                "from me rather than finding out.",
            ),
        ],
    )
    def test_headline_and_ask_line_by_trigger(self, trigger: str, head: str, ask: str) -> None:
        """Each trigger has its own headline and ask line; no question means an @-mention close."""
        body = compose_ask({"title": "T"}, {"trigger": trigger}, [target("ana", "Ana")], "dm")
        assert body == f"{head}\n\n{ask}\n\n@Ana — what would you like me to do?"

    def test_unknown_trigger_uses_bold_title_and_no_ask_line(self) -> None:
        """An unknown trigger gets the bare bold title and no ask line, without blank runs."""
        body = compose_ask({"title": "T", "question": "Q?"}, {"trigger": "other"}, [], None)
        assert body == "**T**\n\nQ?"

    @pytest.mark.parametrize(
        ("work", "head"),
        [
            ({"id": "w-9"}, "**Blocked:** w-9"),
            ({}, "**Blocked:** this piece of work"),
        ],
    )
    def test_headline_falls_back_to_id_then_placeholder(
        self, work: dict[str, Any], head: str
    ) -> None:
        """Without a title the headline names the work id, else 'this piece of work'."""
        assert compose_ask(work, {"trigger": "blocked_on_other"}, [], None).startswith(head + "\n")

    @pytest.mark.parametrize(
        ("options", "listed"),
        [
            ([], []),
            (["only"], []),
            (["a", "  ", "b"], ["- a", "- b"]),
            (["1", "2", "3", "4", "5", "6", "7"], ["- 1", "- 2", "- 3", "- 4", "- 5"]),
        ],
    )
    def test_options_listed_only_when_two_or_more(
        self, options: list[str], listed: list[str]
    ) -> None:
        """Options follow the question only when at least two are non-blank, at most five."""
        body = compose_ask(
            {"title": "T", "question": "Which?", "options": options},
            {"trigger": "mandatory_review"},
            [target("ana")],
            None,
        )
        assert body.split("\n")[-1 - len(listed) :] == ["Which?", *listed]

    def test_question_replaces_the_mention_close(self) -> None:
        """A question is asked instead of the '@Name — what would you like me to do?' line."""
        body = compose_ask(
            {"title": "T", "question": "Go?"}, {"trigger": "x"}, [target("ana")], None
        )
        assert "what would you like me to do" not in body

    def test_mention_close_names_every_target_and_link_is_last(self) -> None:
        """Without a question every target is @-named, and the link comes after that line."""
        body = compose_ask(
            {"title": "T", "link": "https://x"},
            {"trigger": "blocked_on_other"},
            [target("ana", "Ana Ng"), target("bo", "Bo")],
            None,
        )
        assert body.endswith("\n\n@Ana Ng @Bo — what would you like me to do?\n\nhttps://x")

    def test_no_question_and_no_targets_has_no_mention_line(self) -> None:
        """With neither a question nor targets the ask ends on the ask line."""
        body = compose_ask({"title": "T"}, {"trigger": "blocked_on_other"}, [], None)
        assert body == "**Blocked:** T\n\nI can't clear this myself."

    def test_target_contracts_render_names(self) -> None:
        """Target contracts render their names in the mention close."""
        trig = {"trigger": "blocked_on_other", "ownerId": "owen"}
        targets = resolve_targets({"id": "w"}, trig, [member("owen", displayName="Owen")], ME)[
            "targets"
        ]
        assert compose_ask({"title": "T"}, trig, targets, "dm").endswith(
            "@Owen — what would you like me to do?"
        )

    @given(
        summary=st.text(max_size=40),
        detail=st.text(max_size=40),
        tried=st.lists(st.text(max_size=10), max_size=8),
        question=st.text(max_size=20),
        options=st.lists(st.text(max_size=10), max_size=8),
        link=st.text(max_size=20),
    )
    def test_never_three_newlines_and_always_trimmed(
        self,
        summary: str,
        detail: str,
        tried: list[str],
        question: str,
        options: list[str],
        link: str,
    ) -> None:
        """Whatever the inputs, the body has no blank-line runs and no outer whitespace."""
        work = {
            "title": "T",
            "summary": summary,
            "tried": tried,
            "question": question,
            "options": options,
            "link": link,
        }
        body = compose_ask(work, {"trigger": "blocked_on_other", "detail": detail}, [target("a")])
        assert "\n\n\n" not in body
        assert body == body.strip()
        assert body.startswith("**Blocked:** T\n\n")


# =========================================================================== 5. the decision


class TestDecideEngagementNobody:
    def test_self_contained_explains_what_was_examined(self) -> None:
        """No trigger and no suppression is self_contained with a why listing what was examined."""
        d = decide_engagement({"id": "w1", "title": "Tidy"}, ctx())
        assert (d.engage, d.reason_code, d.trigger, d.surface, d.targets) == (
            False,
            "self_contained",
            None,
            "none",
            (),
        )
        assert d.why[0].startswith(
            "no trigger fired: state=in_progress, blocker=none, risk=none, review=none, "
            "commitment=none"
        )
        assert (d.work_id, d.now_ms, d.dedupe_key, d.body, d.attempt) == (
            "w1",
            NOW,
            None,
            None,
            None,
        )

    def test_self_contained_why_names_a_present_blocker(self) -> None:
        """The examined list names an in-progress blocker (an empty one as unspecified)."""
        d1 = decide_engagement({"id": "w", "blocker": {"kind": "Access"}}, ctx())
        d2 = decide_engagement({"id": "w", "blocker": {}}, ctx())
        assert "blocker=access," in d1.why[0]
        assert "blocker=unspecified," in d2.why[0]

    @pytest.mark.parametrize(
        ("work", "code"),
        [
            ({"state": "done", "risk": {"financial": True}}, "act_already_taken"),
            ({"state": "blocked"}, "blocker_unnamed"),
            ({"state": "blocked", "blocker": {"kind": "capacity"}}, "blocker_is_mine"),
            ({"state": "blocked", "blocker": {"kind": "access"}}, "self_serve_available"),
            ({"review": {"requested": True}}, "review_optional"),
            ({"commitment": {"toMemberId": "owen"}}, "commitment_on_track"),
        ],
    )
    def test_suppression_code_becomes_the_reason_code(
        self, work: dict[str, Any], code: str
    ) -> None:
        """When nothing fires, the suppression code is the reason code and its detail the reason."""
        work = {"id": "w", **work}
        d = decide_engagement(work, ctx())
        [s] = evaluate_triggers(work)["suppressed"]
        assert (d.engage, d.reason_code, d.reason, d.targets) == (False, code, s["detail"], ())
        assert d.why[0].startswith(f"trigger {s['trigger']} did not fire")

    def test_first_suppression_wins_and_all_are_explained(self) -> None:
        """With several suppressions the first is the reason code and each gets a why line."""
        work = {"id": "w", "state": "blocked", "review": {"requested": True}}
        d = decide_engagement(work, ctx())
        assert d.reason_code == "blocker_unnamed"
        assert [line.split(" did not fire")[0] for line in d.why] == [
            "trigger blocked_on_other",
            "trigger mandatory_review",
        ]

    def test_interested_parties_are_considered_not_engaged(self) -> None:
        """Interested parties are recorded as considered, explained, and never targeted."""
        directory = [member(ME), member("owen"), member("ivy"), member("ian")]
        work = blocked_work(interestedParties=["ivy", "ian", ""])
        d = decide_engagement(work, ctx(directory=directory))
        assert d.engage is True
        assert d.considered_not_engaged == ("ivy", "ian")
        assert [t.member_id for t in d.targets] == ["owen"]
        assert [m.member_id for m in d.mentions] == ["owen"]
        assert any(
            line.startswith("2 interested parties (ivy, ian) considered and not messaged")
            for line in d.why
        )

    def test_interested_party_is_recorded_on_a_nobody_decision_too(self) -> None:
        """A self-contained decision still records the single interested party."""
        d = decide_engagement({"id": "w", "interestedParties": ["ivy"]}, ctx())
        assert (d.reason_code, d.considered_not_engaged) == ("self_contained", ("ivy",))
        assert any(line.startswith("1 interested party (ivy)") for line in d.why)

    def test_unroutable_is_loud(self) -> None:
        """A fired trigger with nobody to ask is unroutable and degraded says so."""
        work = blocked_work(blocker={"kind": "decision"})
        d = decide_engagement(work, ctx(directory=[member(ME)]))
        assert (d.engage, d.reason_code, d.trigger, d.targets, d.surface) == (
            False,
            "unroutable",
            "blocked_on_other",
            (),
            "none",
        )
        assert d.degraded == ("engagement_unroutable",)
        assert any(line.startswith("no target:") for line in d.why)

    def test_degraded_from_context_is_preserved(self) -> None:
        """Degraded legs passed in the context stay on the decision, engaged or unroutable."""
        work = blocked_work(blocker={"kind": "decision"})
        d = decide_engagement(work, ctx(directory=[], degraded=["directory_read_failed:x"]))
        assert d.degraded == ("directory_read_failed:x", "engagement_unroutable")
        d2 = decide_engagement(blocked_work(), ctx(degraded=["channels_read_threw:boom"]))
        assert (d2.engage, d2.degraded) == (True, ("channels_read_threw:boom",))


class TestDecideEngagementEngage:
    def test_engages_the_blocker_owner_by_dm(self) -> None:
        """A blocked decision owned by a reachable person is an engagement by DM with a body."""
        d = decide_engagement(blocked_work(), ctx())
        assert (d.engage, d.trigger, d.reason_code, d.reason, d.surface) == (
            True,
            "blocked_on_other",
            "blocked:decision",
            "pick a cutover date",
            "dm",
        )
        assert ladder(list(d.targets)) == [("owen", "explicit")]
        assert d.targets[0].name == "Owen Ops"
        assert d.member_ids == ("owen",)
        assert d.mentions == (Mention(member_id="owen"),)
        assert d.dedupe_key == dedupe_key_for("w1", "blocked:decision", ["owen"])
        assert (d.attempt, d.guardrail, d.channel_id, d.durable_channel) == (1, None, None, False)
        assert d.body == compose_ask(
            blocked_work(), evaluate_triggers(blocked_work())["fired"][0], list(d.targets)
        )
        assert d.why[0] == "trigger blocked_on_other (blocked:decision): pick a cutover date"
        assert d.why[-1].startswith("surface dm: ")

    def test_extra_fired_triggers_ride_along_in_why(self) -> None:
        """Triggers beyond the primary one are listed as 'also firing' in why."""
        work = blocked_work(risk={"external": True}, review={"required": True})
        d = decide_engagement(work, ctx())
        assert (d.trigger, d.reason_code) == (
            "irreversible_or_external",
            "consent_required:external",
        )
        assert "also firing: blocked_on_other (blocked:decision)" in d.why
        assert "also firing: mandatory_review (review_required:unspecified)" in d.why

    def test_mentions_are_exactly_the_targets_in_a_new_durable_room(self) -> None:
        """Several targets are all mentioned and a durable work gets a named room."""
        work = {
            "id": "w2",
            "title": "Vendor choice",
            "state": "failed",
            "blocker": {"kind": "decision", "ownerId": "ana"},
            "selfServeExhausted": True,
            "review": {"reviewerId": "bo"},
            "durable": True,
        }
        directory = [member(ME), member("ana"), member("bo")]
        d = decide_engagement(work, ctx(directory=directory))
        assert (d.engage, d.surface, d.room_name, d.durable_channel) == (
            True,
            "new_room",
            "Vendor choice",
            True,
        )
        assert (
            [m.member_id for m in d.mentions] == [t.member_id for t in d.targets] == ["ana", "bo"]
        )
        assert d.member_ids == ("ana", "bo")

    def test_reply_in_place_carries_channel_and_thread(self) -> None:
        """A reply in place puts the origin channel and thread on the decision."""
        work = blocked_work(origin={"channelId": "C1", "threadRootId": "T1"})
        channels = [{"id": "C1", "name": "eng", "memberIds": [ME, "owen"]}]
        d = decide_engagement(work, ctx(channels=channels))
        assert (d.surface, d.channel_id, d.thread_root_id) == ("reply_in_place", "C1", "T1")

    def test_existing_channel_carries_channel_and_room_name(self) -> None:
        """An existing room puts its id and name on the decision."""
        work = blocked_work(approverId="ana")
        channels = [{"id": "C2", "name": "billing", "memberIds": [ME, "owen", "ana"]}]
        directory = [member(ME), member("owen"), member("ana")]
        d = decide_engagement(work, ctx(channels=channels, directory=directory))
        assert (d.surface, d.channel_id, d.room_name) == ("existing_channel", "C2", "billing")

    def test_supervisor_and_max_targets_come_from_context(self) -> None:
        """ctx.supervisorId routes an ownerless ask upward; ctx.maxTargets caps the names."""
        orphan = blocked_work(blocker={"kind": "decision"})
        d = decide_engagement(orphan, ctx(supervisorId="lead"))
        assert ladder(list(d.targets)) == [("lead", "supervisory")]
        many = blocked_work(approverId="ana", review={"reviewerId": "bo"})
        d2 = decide_engagement(many, ctx(maxTargets=2))
        assert [t.member_id for t in d2.targets] == ["owen", "bo"]

    def test_model_dump_is_camel_case_with_the_seed_keys(self) -> None:
        """The decision dumps to its camelCase decision object."""
        dumped = decide_engagement(blocked_work(), ctx()).model_dump(by_alias=True)
        assert set(dumped) == {
            "engage",
            "trigger",
            "reasonCode",
            "reason",
            "targets",
            "surface",
            "channelId",
            "threadRootId",
            "roomName",
            "durableChannel",
            "memberIds",
            "mentions",
            "body",
            "workId",
            "dedupeKey",
            "attempt",
            "guardrail",
            "why",
            "degraded",
            "consideredNotEngaged",
            "nowMs",
        }
        assert set(dumped["targets"][0]) == {"memberId", "name", "role", "team", "rung", "why"}
        assert dumped["mentions"] == ({"memberId": "owen"},)
        assert (dumped["reasonCode"], dumped["workId"], dumped["nowMs"]) == (
            "blocked:decision",
            "w1",
            NOW,
        )

    def test_contracts_and_dicts_give_the_same_decision(self) -> None:
        """WorkReport, Member and Channel contracts decide exactly like their camelCase dicts."""
        work = {
            "id": "w3",
            "title": "Kubernetes upgrade",
            "state": "blocked",
            "blocker": {"kind": "access", "scope": "kubernetes cluster"},
            "selfServeExhausted": True,
            "interestedParties": ["ivy"],
        }
        directory = [
            member(ME, supervisorId="boss"),
            member("k1", displayName="Kim", roleTitle="Kubernetes admin", status="online"),
            member("k2", roleTitle="Cluster kubernetes lead", teamName="Platform"),
            member("boss"),
        ]
        channels = [
            {"id": "C1", "kind": "PUBLIC", "name": "platform", "memberIds": [ME, "k1", "k2", "z"]},
            {"id": "C2", "kind": "PRIVATE", "name": "k8s", "memberIds": [ME, "k1", "k2"]},
        ]
        as_dicts = decide_engagement(work, ctx(directory=directory, channels=channels))
        as_models = decide_engagement(
            WorkReport.model_validate(work),
            ctx(
                directory=[Member.model_validate(m) for m in directory],
                channels=[Channel.model_validate(c) for c in channels],
            ),
        )
        assert as_models == as_dicts
        assert (as_dicts.engage, as_dicts.surface, as_dicts.channel_id) == (
            True,
            "existing_channel",
            "C2",
        )
        assert ladder(list(as_dicts.targets)) == [("k2", "expertise"), ("k1", "expertise")]

    def test_prepared_directory_equals_a_plain_list(self) -> None:
        """A Directory.of(members), reused, decides exactly like the plain member list."""
        directory = [member(ME), member("dana", owns=["billing"]), member("owen")]
        prepared = Directory.of(directory)
        work = blocked_work(blocker={"kind": "decision", "scope": "billing"})
        plain = decide_engagement(work, ctx(directory=directory))
        assert decide_engagement(work, ctx(directory=prepared)) == plain
        assert decide_engagement(work, ctx(directory=prepared)) == plain
        assert ladder(list(plain.targets)) == [("dana", "ownership")]

    def test_context_object_with_snake_case_attributes(self) -> None:
        """A context object with snake_case attributes is read like the camelCase dict."""
        obj = SimpleNamespace(
            me=ME,
            directory=[member("owen", displayName="Owen Ops")],
            channels=[],
            ledger=[],
            now_ms=NOW,
            limits=None,
            supervisor_id=None,
            max_targets=None,
            degraded=None,
        )
        assert decide_engagement(blocked_work(), obj) == decide_engagement(blocked_work(), ctx())

    @pytest.mark.parametrize("now", [None, "1700000000000", 1.5e12, True])
    def test_missing_or_non_integer_now_raises(self, now: Any) -> None:
        """Without an integer nowMs the decision refuses: it has no clock of its own."""
        c = ctx()
        if now is None:
            del c["nowMs"]
        else:
            c["nowMs"] = now
        with pytest.raises(ValueError, match="nowMs"):
            decide_engagement(blocked_work(), c)


class TestDecideEngagementGuardrails:
    KEY = dedupe_key_for("w1", "blocked:decision", ["owen"])

    def ledger_row(self, ago_ms: int, **kw: Any) -> dict[str, Any]:
        row = {
            "atMs": NOW - ago_ms,
            "seatId": ME,
            "workId": "w1",
            "dedupeKey": self.KEY,
            "engaged": True,
            "outcome": "engaged",
            "targets": [{"memberId": "owen"}],
        }
        row.update(kw)
        return row

    def test_same_ask_an_hour_ago_is_refused_as_already_engaged(self) -> None:
        """A refusal keeps targets, surface, dedupe key and the guardrail code/detail/counts."""
        d = decide_engagement(blocked_work(), ctx(ledger=[self.ledger_row(HOUR)]))
        assert (d.engage, d.reason_code, d.trigger, d.surface, d.dedupe_key) == (
            False,
            "already_engaged",
            "blocked_on_other",
            "dm",
            self.KEY,
        )
        assert ladder(list(d.targets)) == [("owen", "explicit")]
        assert d.guardrail is not None
        assert d.guardrail.code == "already_engaged"
        assert d.guardrail.detail == d.reason
        assert d.guardrail.counts["sameKey"] == 1
        assert d.guardrail.counts["targets"] == {"owen": 1}
        assert (d.body, d.mentions, d.attempt, d.channel_id) == (None, (), None, None)
        assert d.why[-1] == f"guardrail already_engaged: {d.reason}"

    def test_re_ask_after_the_window_is_attempt_two(self) -> None:
        """The same ask engaged seven hours ago may go again, as attempt 2."""
        d = decide_engagement(
            blocked_work(), ctx(ledger=[LedgerRow.model_validate(self.ledger_row(7 * HOUR))])
        )
        assert (d.engage, d.attempt, d.dedupe_key, d.guardrail) == (True, 2, self.KEY, None)

    def test_limits_from_context_as_camel_case_dict(self) -> None:
        """ctx.limits as a camelCase dict overrides the defaults it names."""
        ledger = [self.ledger_row(HOUR)]
        d = decide_engagement(blocked_work(), ctx(ledger=ledger, limits={"reengageAfterMs": 1000}))
        assert (d.engage, d.attempt) == (True, 2)

    def test_seat_limit_counts_this_seat_only(self) -> None:
        """Ten engagements by this seat in the hour refuse; the same rows by another seat do not."""
        rows = [
            self.ledger_row(
                60_000 * (i + 1), workId=f"o{i}", dedupeKey=f"k{i}", targets=[{"memberId": f"p{i}"}]
            )
            for i in range(10)
        ]
        mine = decide_engagement(blocked_work(), ctx(ledger=rows))
        assert mine.reason_code == "rate_limited_seat"
        theirs = [{**r, "seatId": "seat-2"} for r in rows]
        assert decide_engagement(blocked_work(), ctx(ledger=theirs)).engage is True

    def test_room_limit_applies_only_when_a_room_would_be_created(self) -> None:
        """Two rooms created today refuse a new room but not a DM."""
        rows = [
            self.ledger_row(
                HOUR * (i + 1),
                workId=f"o{i}",
                dedupeKey=f"k{i}",
                targets=[{"memberId": f"p{i}"}],
                roomCreated=True,
            )
            for i in range(2)
        ]
        two = blocked_work(approverId="ana")
        directory = [member(ME), member("owen"), member("ana")]
        d = decide_engagement(two, ctx(ledger=rows, directory=directory))
        assert (d.engage, d.surface, d.reason_code) == (False, "new_room", "rate_limited_rooms")
        assert decide_engagement(blocked_work(), ctx(ledger=rows)).surface == "dm"
        assert decide_engagement(blocked_work(), ctx(ledger=rows)).engage is True
