"""GitHub webhook bodies, shaped as GitHub documents them, become board Candidates.

Pure: fixtures are JSON files under fixtures/github; the delivery id (X-GitHub-Delivery) and
the receive time are constants passed in.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import Candidate
from pipeline.normalise import Skipped
from pipeline.normalise.github import mentions_in, normalise_github
from tests.pipeline.strategies import JSON, JSON_SCALARS

FIXTURES = Path(__file__).parent / "fixtures" / "github"
RECEIVED = 1_718_060_000_000
DELIVERY = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
LOGINS = {
    "Seatwire-Scout": "scout",
    "ann-lee": "ann",
    "BOBSMITH": "U0BOB00002",
    "carol": "carol@acme.com",
    "seatwire[bot]": "scout",
}

# fixture name -> X-GitHub-Event
EVENTS = {
    "issues_assigned": "issues",
    "issues_opened": "issues",
    "pull_request_assigned": "pull_request",
    "pull_request_review_requested": "pull_request",
    "issue_comment_created": "issue_comment",
    "pull_request_review_comment_created": "pull_request_review_comment",
    "ping": "ping",
}


def load(name: str) -> dict[str, Any]:
    """A fresh copy of one fixture body."""
    loaded: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return loaded


def normalised(
    name: str, payload: dict[str, Any] | None = None, logins: dict[str, str] | None = None
) -> Candidate | Skipped:
    return normalise_github(
        EVENTS[name],
        load(name) if payload is None else payload,
        delivery_id=DELIVERY,
        received_at_ms=RECEIVED,
        logins=logins,
    )


def candidate(
    name: str, payload: dict[str, Any] | None = None, logins: dict[str, str] | None = None
) -> Candidate:
    out = normalised(name, payload, logins)
    assert isinstance(out, Candidate), out
    return out


def skipped(name: str, payload: dict[str, Any] | None = None) -> Skipped:
    out = normalised(name, payload)
    assert isinstance(out, Skipped), out
    return out


# ---------------------------------------------------------------- each event


def test_issue_assigned_becomes_a_full_board_candidate() -> None:
    """issues.assigned maps repo, issue, delivery, actor, assignees, owner, body and time."""
    c = candidate("issues_assigned")
    wire = c.to_wire()
    body = wire["board"].pop("body")
    assert wire == {
        "family": "board",
        "source": "github",
        "deliveryId": "github:acme/billing-api/42/issues.assigned/2000000042/1003"
        "@2024-06-10T09:30:00Z",
        "ids": {
            "channelId": "acme/billing-api",
            "messageId": None,
            "threadRootId": None,
            "issueId": "acme/billing-api#42",
            "callId": None,
            "eventId": DELIVERY,
        },
        "msg": None,
        "board": {
            "action": "assigned",
            "actorId": "ann-lee",
            "assigneeIds": ["seatwire-scout"],
            "reviewerIds": [],
            "ownerIds": ["ann-lee"],
            "mentions": [],
            "reviewState": None,
        },
        "call": None,
        "calendar": None,
        "atMs": RECEIVED,
    }
    assert body.startswith("Invoices double-charged after plan change\n\nThe nightly invoice")


def test_pull_request_assigned_names_only_the_newly_assigned() -> None:
    """pull_request.assigned addresses the person just assigned, not those assigned before
    (they heard already); the PR's requested reviewers stay as context."""
    c = candidate("pull_request_assigned")
    assert c.board is not None
    assert c.board.action == "assigned"
    assert c.board.assignee_ids == ("ann-lee",)
    assert c.board.reviewer_ids == ("seatwire-scout", "carol")
    assert c.ids.issue_id == "acme/billing-api#57"


def test_review_requested_names_only_the_requested_reviewer() -> None:
    """review_requested addresses the reviewer just asked, not reviewers asked before, and
    does not re-announce the PR text's old @mentions."""
    c = candidate("pull_request_review_requested")
    assert c.board is not None
    assert c.board.action == "review_requested"
    assert c.board.reviewer_ids == ("seatwire-scout",)
    assert c.board.owner_ids == ("bobsmith",)
    assert c.board.actor_id == "bobsmith"
    assert c.board.body.startswith("Billing migration to ledger v2\n\nMoves invoices")
    assert c.board.mentions == ()


def test_the_payloads_own_reviewer_and_assignee_count_without_the_item_snapshot() -> None:
    """requested_reviewer and assignee on the payload count even if the item omits them."""
    review = load("pull_request_review_requested")
    review["pull_request"]["requested_reviewers"] = []
    assigned = load("issues_assigned")
    assigned["issue"]["assignees"] = []
    assigned["issue"]["assignee"] = None
    reviewed, assigned_c = (
        candidate("pull_request_review_requested", review),
        candidate("issues_assigned", assigned),
    )
    assert reviewed.board is not None and reviewed.board.reviewer_ids == ("seatwire-scout",)
    assert assigned_c.board is not None and assigned_c.board.assignee_ids == ("seatwire-scout",)


def test_a_team_review_request_keeps_the_individual_reviewers_only() -> None:
    """A request to a team (requested_team, no requested_reviewer) adds no team as a person."""
    payload = load("pull_request_review_requested")
    del payload["requested_reviewer"]
    payload["requested_team"] = {"name": "Billing", "slug": "billing", "id": 77}
    payload["pull_request"]["requested_reviewers"] = []
    c = candidate("pull_request_review_requested", payload)
    assert c.board is not None and c.board.reviewer_ids == ()


def test_an_issue_comment_is_the_comment_with_its_mentions() -> None:
    """issue_comment.created carries the comment body, author as actor and comment id."""
    c = candidate("issue_comment_created")
    assert c.board is not None
    assert c.board.action == "commented"
    assert c.board.actor_id == "bobsmith"
    assert c.board.owner_ids == ("ann-lee",)
    assert c.board.assignee_ids == ("bobsmith",)
    assert c.board.body.startswith("@Seatwire-Scout could you bisect this?")
    assert c.board.mentions == ("seatwire-scout", "ann-lee")  # not @billing-worker in the fence
    assert c.ids.message_id == "1987654321"
    assert c.ids.issue_id == "acme/billing-api#42"


def test_a_review_comment_is_a_comment_on_the_pull_request() -> None:
    """pull_request_review_comment.created uses the PR's number, people and the comment."""
    c = candidate("pull_request_review_comment_created")
    assert c.board is not None
    assert c.board.action == "commented"
    assert c.ids.issue_id == "acme/billing-api#57"
    assert c.ids.message_id == "1600000001"
    assert c.board.actor_id == "carol"
    assert c.board.owner_ids == ("bobsmith",)
    assert c.board.reviewer_ids == ("seatwire-scout", "carol")
    assert c.board.body == "Is this idempotent if the ledger retries? @bobsmith @seatwire-scout"
    assert c.board.mentions == ("bobsmith", "seatwire-scout")


def test_a_comment_on_a_pull_request_via_issue_comment_is_keyed_by_its_number() -> None:
    """A PR conversation comment arrives as issue_comment and keys on the shared number."""
    payload = load("issue_comment_created")
    payload["issue"]["number"] = 57
    payload["issue"]["pull_request"] = {
        "url": "https://api.github.com/repos/acme/billing-api/pulls/57"
    }
    assert candidate("issue_comment_created", payload).ids.issue_id == "acme/billing-api#57"


def test_null_bodies_are_empty_not_errors() -> None:
    """GitHub sends `"body": null` for empty descriptions; that is an empty body."""
    payload = load("issues_assigned")
    payload["issue"]["body"] = None
    c = candidate("issues_assigned", payload)
    assert c.board is not None
    assert (c.board.body, c.board.mentions) == ("Invoices double-charged after plan change", ())


# ---------------------------------------------------------------- login mapping


def test_every_login_is_mapped_to_its_member_alias_case_insensitively() -> None:
    """Actor, owner, assignees, reviewers and @mentions all go through the login map."""
    c = candidate("pull_request_review_comment_created", logins=LOGINS)
    assert c.board is not None
    assert c.board.actor_id == "carol@acme.com"
    assert c.board.owner_ids == ("U0BOB00002",)
    assert c.board.assignee_ids == ("U0BOB00002",)
    assert c.board.reviewer_ids == ("scout", "carol@acme.com")
    assert c.board.mentions == ("U0BOB00002", "scout")


def test_mapped_mentions_of_one_member_collapse_to_one() -> None:
    """Two logins of the same member, or one login in two cases, are one mention."""
    payload = load("issue_comment_created")
    payload["comment"]["body"] = "@seatwire-scout @SEATWIRE-SCOUT @seatwire[bot] @Ann-Lee"
    c = candidate("issue_comment_created", payload, logins=LOGINS)
    assert c.board is not None and c.board.mentions == ("scout", "ann")


def test_unmapped_logins_stay_as_the_lowercased_login() -> None:
    """A login absent from the map is kept bare and lowercased, so an alias can match it."""
    c = candidate("issue_comment_created", logins={"someone-else": "x"})
    assert c.board is not None
    assert c.board.owner_ids == ("ann-lee",)
    assert c.board.mentions == ("seatwire-scout", "ann-lee")


def test_a_bot_sender_is_mapped_like_any_login() -> None:
    """Our own GitHub App's comments map to the seat, for own-echo downstream."""
    payload = load("issue_comment_created")
    payload["sender"]["login"] = "seatwire[bot]"
    c = candidate("issue_comment_created", payload, logins=LOGINS)
    assert c.board is not None and c.board.actor_id == "scout"


# ---------------------------------------------------------------- mention grammar


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ping @alice.", ["alice"]),
        ("(@alice), @bob! @carol? @dave: @erin's", ["alice", "bob", "carol", "dave", "erin"]),
        ("cc:@alice\n@bob-smith", ["alice", "bob-smith"]),
        ("write to alice@example.com or ops@acme.io", []),
        ("see @foo/bar and @types/node", []),
        ("path/@alice and x.@bob", []),
        ("`@alice` and\n```\n@bob\n```\n~~~\n@carol\n~~~", []),
        ("<!-- @triage-team please -->@dave", ["dave"]),
        # An unclosed comment or fence runs to the end, as GitHub renders it.
        ("@ann <!-- @bob @carl", ["ann"]),
        ("@ann\n```\n@bob", ["ann"]),
        ("```@x``` @ann ~~~ @bob ~~~ <!-- @c --> @dan `@e` @fay", ["ann", "dan", "fay"]),
        ("<!--" * 16_000 + " @ann", []),
        ("`" * 3 * 20_001 + " @ann", []),
        ("@-alice @alice- @a--b @alice_b @alice@bob", []),
        ("@" + "a" * 39, ["a" * 39]),
        ("@" + "a" * 40, []),
        ("@A1-b2-C3 @42", ["A1-b2-C3", "42"]),
        ("@renovate[bot] rebase, @dependabot rebase", ["renovate[bot]", "dependabot"]),
        ("email@ but @ alone and @", []),
    ],
)
def test_mentions_follow_githubs_login_grammar(text: str, expected: list[str]) -> None:
    """Only real `@login` tokens count: not emails, paths, teams, code, comments or bad logins."""
    assert list(mentions_in(text)) == expected


# ---------------------------------------------------------------- skips


def test_ping_is_skipped() -> None:
    """GitHub's hook check is acknowledged, not considered."""
    assert skipped("ping").reason == "ping"


@pytest.mark.parametrize(
    ("event", "action", "reason"),
    [
        ("issues", "closed", "unsupported_event:issues.closed"),
        ("issues", "unassigned", "unsupported_event:issues.unassigned"),
        ("issue_comment", "deleted", "unsupported_event:issue_comment.deleted"),
        ("pull_request", "synchronize", "unsupported_event:pull_request.synchronize"),
        ("pull_request_review", "dismissed", "unsupported_event:pull_request_review.dismissed"),
        (
            "pull_request_review_comment",
            "deleted",
            "unsupported_event:pull_request_review_comment.deleted",
        ),
        ("push", None, "unsupported_event:push"),
        ("star", "created", "unsupported_event:star.created"),
    ],
)
def test_other_events_and_actions_are_skipped_by_name(
    event: str, action: str | None, reason: str
) -> None:
    """Anything but the considered event/action pairs is skipped with its name."""
    payload = load("issue_comment_created")
    if action is None:
        del payload["action"]
    else:
        payload["action"] = action
    out = normalise_github(event, payload, delivery_id=DELIVERY, received_at_ms=RECEIVED)
    assert isinstance(out, Skipped) and out.reason == reason


def test_an_opened_issue_reads_the_mentions_in_its_description() -> None:
    """issues.opened: the description's @mentions are news (GitHub notifies on them)."""
    c = candidate("issues_opened", logins=LOGINS)
    assert c.board is not None and c.board.action == "opened"
    assert list(mentions_in(load("issues_opened")["issue"]["body"])) == ["bobsmith"]
    assert c.board.mentions == ("U0BOB00002",)  # through the case-insensitive login map


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda p: p.pop("repository"), "missing_field:repository.full_name"),
        (lambda p: p["repository"].update(full_name=""), "missing_field:repository.full_name"),
        (lambda p: p.pop("issue"), "missing_field:issue.number"),
        (lambda p: p["issue"].update(number=True), "missing_field:issue.number"),
        (lambda p: p["issue"].update(number=-3), "missing_field:issue.number"),
        (lambda p: p.pop("comment"), "missing_field:comment"),
        (lambda p: p.update(comment="nice"), "missing_field:comment"),
    ],
)
def test_a_body_missing_what_identifies_the_item_is_skipped(mutate: Any, reason: str) -> None:
    """Without the repository, the item's number or the comment, the skip names what is missing."""
    payload = load("issue_comment_created")
    mutate(payload)
    assert skipped("issue_comment_created", payload).reason == reason


def test_a_numeric_string_number_is_accepted() -> None:
    """A number sent as digits is still the item's number."""
    payload = load("issues_assigned")
    payload["issue"]["number"] = "42"
    assert candidate("issues_assigned", payload).ids.issue_id == "acme/billing-api#42"


def test_a_blank_delivery_id_is_skipped() -> None:
    """Without X-GitHub-Delivery there is no idempotency key, so nothing is produced."""
    out = normalise_github(
        "issues", load("issues_assigned"), delivery_id=" ", received_at_ms=RECEIVED
    )
    assert out == Skipped("missing_field:delivery_id", "no X-GitHub-Delivery")


def test_a_body_that_is_not_an_object_is_skipped() -> None:
    """A JSON array body is refused, not indexed."""
    out = normalise_github("issues", [], delivery_id=DELIVERY, received_at_ms=RECEIVED)  # type: ignore[arg-type]
    assert isinstance(out, Skipped) and out.reason == "unsupported_envelope"


def test_missing_people_are_empty_not_errors() -> None:
    """No sender, no author and malformed assignee entries leave those fields empty."""
    payload = load("issues_assigned")
    del payload["sender"]
    payload["issue"]["user"] = None
    payload["issue"]["assignees"] = [None, "bob", {"login": 7}, {"login": "Bob"}]
    del payload["issue"]["assignee"]
    payload["assignee"] = {"login": 7}
    c = candidate("issues_assigned", payload)
    assert c.board is not None
    assert (c.board.actor_id, c.board.owner_ids, c.board.assignee_ids) == (None, (), ())
    payload["action"] = "unassigned"  # not handled: skipped with its reason, not half-read
    assert isinstance(normalised("issues_assigned", payload), Skipped)


# ---------------------------------------------------------------- never raises

GITHUB_KEYS = st.sampled_from(
    [
        "action",
        "issue",
        "pull_request",
        "comment",
        "repository",
        "full_name",
        "number",
        "user",
        "login",
        "assignee",
        "assignees",
        "requested_reviewer",
        "requested_reviewers",
        "sender",
        "body",
        "title",
        "id",
    ]
)
GITHUB_JSON = st.recursive(
    JSON_SCALARS | st.sampled_from(["assigned", "created", "review_requested", "@alice x"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(GITHUB_KEYS, inner, max_size=6),
    max_leaves=30,
)
EVENT_NAMES = st.sampled_from(sorted(set(EVENTS.values()))) | st.text(max_size=20)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON document."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths(value, (*prefix, index))
    return found


@settings(max_examples=300, deadline=None)
@given(
    EVENT_NAMES,
    st.dictionaries(st.text(max_size=10), JSON, max_size=6) | GITHUB_JSON,
    st.text(max_size=40),
    st.none() | st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3),
)
def test_arbitrary_json_never_raises(
    event: str, payload: Any, delivery: str, logins: dict[str, str] | None
) -> None:
    """Any event name, JSON body, delivery id and login map give a Candidate or a Skipped."""
    out = normalise_github(
        event, payload, delivery_id=delivery, received_at_ms=RECEIVED, logins=logins
    )
    assert isinstance(out, Candidate | Skipped)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(EVENTS)), st.data())
def test_real_bodies_with_any_field_replaced_never_raise(name: str, data: st.DataObject) -> None:
    """A real webhook body with one field anywhere replaced by any JSON value never raises."""
    payload = load(name)
    path = data.draw(st.sampled_from(paths(payload)[1:]))
    mutated = copy.deepcopy(payload)
    parent: Any = mutated
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = data.draw(JSON | GITHUB_JSON)
    out = normalise_github(
        EVENTS[name], mutated, delivery_id=DELIVERY, received_at_ms=RECEIVED, logins=LOGINS
    )
    assert isinstance(out, Candidate | Skipped)


# ---------------------------------------------------------------- opened, edited, reviews


def run(event: str, payload: dict[str, Any], delivery: str = DELIVERY) -> Candidate:
    out = normalise_github(
        event, payload, delivery_id=delivery, received_at_ms=RECEIVED, logins=LOGINS
    )
    assert isinstance(out, Candidate), out
    return out


def test_an_edited_comment_announces_only_the_mentions_it_added() -> None:
    """issue_comment.edited: mentions already in the old text (changes.body.from) were read
    when it was posted; only the ones the edit added are news."""
    payload = load("issue_comment_created")
    payload["action"] = "edited"
    payload["changes"] = {"body": {"from": "@ann-lee the retry path looks suspicious."}}
    payload["comment"]["body"] = "@ann-lee the retry path looks suspicious. cc @carol"
    c = run("issue_comment", payload)
    assert c.board is not None and c.board.action == "edited"
    assert c.board.mentions == ("carol@acme.com",)


def test_an_edit_that_did_not_change_the_text_announces_nobody() -> None:
    """issues.edited without changes.body (a title edit) re-reads no mention."""
    payload = load("issues_opened")
    payload["action"] = "edited"
    payload["changes"] = {"title": {"from": "old title"}}
    c = run("issues", payload)
    assert c.board is not None and (c.board.action, c.board.mentions) == ("edited", ())


def test_a_transferred_issue_does_not_announce_its_mentions_again() -> None:
    """issues.opened for an issue transferred in (changes.old_issue) carries its old text, whose
    mentions were announced where it was opened first."""
    payload = load("issues_opened")
    payload["changes"] = {"old_issue": {"body": payload["issue"]["body"]}}
    c = run("issues", payload)
    assert c.board is not None and c.board.mentions == ()


def test_a_submitted_review_is_read_with_its_state() -> None:
    """pull_request_review.submitted: action `reviewed`, the state in board.reviewState, the
    review's text and @mentions, the PR's owner and assignees, the review as the message."""
    payload = load("pull_request_review_requested")
    payload["action"] = "submitted"
    payload["review"] = {
        "id": 80,
        "user": {"login": "carol"},
        "body": "Needs a migration test. @ann-lee?",
        "state": "CHANGES_REQUESTED",
        "submitted_at": "2024-06-10T10:00:00Z",
    }
    c = run("pull_request_review", payload)
    assert c.board is not None
    assert (c.board.action, c.board.review_state) == ("reviewed", "changes_requested")
    assert c.board.owner_ids == ("U0BOB00002",) and c.board.mentions == ("ann",)
    assert c.ids.message_id == "80" and c.ids.issue_id == "acme/billing-api#57"
    assert c.delivery_id.endswith("/pull_request_review.submitted/80@2024-06-10T10:00:00Z")


def test_a_review_event_without_the_review_is_skipped() -> None:
    payload = load("pull_request_review_requested")
    payload["action"] = "submitted"
    out = normalise_github("pull_request_review", payload, delivery_id=DELIVERY, received_at_ms=1)
    assert isinstance(out, Skipped) and out.reason == "missing_field:review"


def test_a_withdrawn_review_request_names_the_reviewer_it_was_asked_of() -> None:
    """review_request_removed addresses the reviewer named on the payload."""
    payload = load("pull_request_review_requested")
    payload["action"] = "review_request_removed"
    c = run("pull_request", payload)
    assert c.board is not None
    assert (c.board.action, c.board.reviewer_ids) == ("review_request_removed", ("scout",))


def test_one_event_through_two_hooks_has_one_delivery_id() -> None:
    """The organisation's hook adds `organization` and has its own X-GitHub-Delivery: the
    Candidate's deliveryId is the event's own identity all the same; X-GitHub-Delivery stays
    in ids.eventId."""
    repo_hook = run("issue_comment", load("issue_comment_created"), "guid-repo")
    org_payload = {**load("issue_comment_created"), "organization": {"login": "acme"}}
    org_hook = run("issue_comment", org_payload, "guid-org")
    assert repo_hook.delivery_id == org_hook.delivery_id
    assert repo_hook.delivery_id.startswith("github:acme/billing-api/42/issue_comment.created/")
    assert (repo_hook.ids.event_id, org_hook.ids.event_id) == ("guid-repo", "guid-org")


def test_two_people_assigned_in_one_change_are_two_events() -> None:
    """Same issue, same second, two assignees: two delivery ids (the subject is part of it)."""
    first = load("issues_assigned")
    second = copy.deepcopy(first)
    second["assignee"] = {"login": "ann-lee", "id": 1001}
    assert run("issues", first).delivery_id != run("issues", second).delivery_id


def test_without_the_events_timestamp_the_delivery_id_is_the_hooks() -> None:
    """A payload without the object's timestamp falls back to github:<X-GitHub-Delivery>."""
    payload = load("issue_comment_created")
    payload["comment"].pop("updated_at", None)
    payload["comment"].pop("created_at", None)
    assert run("issue_comment", payload).delivery_id == f"github:{DELIVERY}"
