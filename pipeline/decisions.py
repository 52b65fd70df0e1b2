"""The rules of the project's directions (issue 13; the tools `open_decision`, `vote`,
`get_decision`, `list_decisions`, `decide_direction`). Pure: no I/O, no clock; the store
(workers/stores/decisions.py), the tools (workers/tools/decisions.py) and the people's HTTP
routes (workers/ingress/decisions.py) apply them.

A direction is a question with exactly two options, For (0) and Against (1). It is opened by
a seat under the org file's `decisions:` policy, which is frozen into it (with the
repository) at that moment: the owner, the permitted countdown, who resolves ties and
approvals, and whether an outcome needs approval. Its id is derived from (opener,
client_request_id), so a retry is the same direction. Its deadline is the opening time plus
the countdown; the owner may end voting early, which moves the deadline to that moment.

A vote is a member's own, changed by compare-and-set on its revision (0 casts the first), and
only strictly before the deadline. A seat's vote weighs 1, a person's (a member who is not a
seat, over HTTP) 2. Once the deadline has passed the result is computed from the votes alone,
so any reader computes the same one, and it is recorded once: the option with more weight
wins; equal weights (no votes included) are `tied` until the policy's resolver resolves the
tie; a winner of a policy that requires approval is `awaiting_approval` until the resolver
approves it (`decided`) or rejects it (`rejected`). Tie resolution does not approve.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from contracts.engagement import EngagementDecision
from contracts.messages import WorkEnvelope
from contracts.org import DecisionPolicy, Member
from contracts.tools import ToolError
from contracts.work import WorkReport
from pipeline.cursors import canonical, digest, pack, unpack
from pipeline.launches import iso
from pipeline.send_gate import find_credentials

OPTIONS: tuple[dict[str, Any], ...] = (
    {"index": 0, "label": "For"},
    {"index": 1, "label": "Against"},
)
AGENT, HUMAN = "agent", "human"
WEIGHTS = {AGENT: 1, HUMAN: 2}
OPEN = "open"
TIED = "tied"
AWAITING_APPROVAL = "awaiting_approval"
DECIDED = "decided"
REJECTED = "rejected"
RESOLVE_TIE, APPROVE, REJECT = "resolve_tie", "approve", "reject"
PAGE = 20


dumps = canonical  # what is stored and fingerprinted


def direction_id(opener: str, client_request_id: str) -> str:
    """The 64-hex id of the direction `opener` opens with `client_request_id`."""
    return hashlib.sha256(f"direction\n{opener}\n{client_request_id}".encode()).hexdigest()


def fingerprint(operation: str, fields: Mapping[str, Any]) -> str:
    """What tells a replay (the same input again) from another input under the same id."""
    return digest([operation, dict(fields)])


def vote_field(member_id: str) -> str:
    """The direction hash's field that holds `member_id`'s vote."""
    return f"vote:{member_id}"


# ------------------------------------------------------------------ opening


def no_policy() -> ToolError:
    return ToolError(
        "decisions_not_configured",
        "the org file has no `decisions:` section (ownerId, minCountdownSeconds, "
        "maxCountdownSeconds, resolverId, requiresApproval), so no direction can be opened; "
        "ask the operator to add one. Nothing was written",
        status=409,
    )


def check_countdown(policy: DecisionPolicy, seconds: int) -> None:
    """A 422 naming the permitted range when `seconds` is outside it."""
    low, high = policy.min_countdown_seconds, policy.max_countdown_seconds
    if not low <= seconds <= high:
        raise ToolError(
            "countdown_out_of_range",
            f"countdown_seconds: {seconds} is outside the project's permitted range, {low} to "
            f"{high} seconds; choose a countdown within it. Nothing was written",
            field="countdown_seconds",
            status=422,
            minCountdownSeconds=low,
            maxCountdownSeconds=high,
        )


def check_text(fields: Iterable[tuple[str, str]]) -> None:
    """A 422 for a credential in any of the texts (a direction is shown to everyone)."""
    for name, value in fields:
        hits = find_credentials(value)
        if hits:
            kinds = ", ".join(sorted({h.kind for h in hits}))
            raise ToolError(
                "credentials_refused",
                f"{name}: holds a credential ({kinds}); a direction is stored and shown to "
                "the whole project, so it never holds a secret: write it without. Nothing "
                "was written",
                field=name,
                status=422,
            )


def policy_snapshot(policy: DecisionPolicy, repository: str | None) -> dict[str, Any]:
    """The policy as frozen into a direction when it opens."""
    return {
        "ownerId": policy.owner_id,
        "resolverId": policy.resolver,
        "minCountdownSeconds": policy.min_countdown_seconds,
        "maxCountdownSeconds": policy.max_countdown_seconds,
        "requiresApproval": policy.requires_approval,
        "channelId": policy.channel_id,
        "weights": dict(WEIGHTS),
        "repository": repository,
    }


def open_doc(
    *,
    opener: str,
    client_request_id: str,
    title: str,
    body: str,
    countdown_seconds: int,
    affected_issues: Iterable[int],
    policy: dict[str, Any],
    now_ms: int,
) -> dict[str, Any]:
    """The direction's fixed part, as stored (never changed after)."""
    return {
        "id": direction_id(opener, client_request_id),
        "title": title,
        "body": body,
        "options": [dict(o) for o in OPTIONS],
        "affectedIssues": list(dict.fromkeys(affected_issues)),
        "openedBy": opener,
        "openedAtMs": now_ms,
        "countdownSeconds": countdown_seconds,
        "scheduledDeadlineMs": now_ms + countdown_seconds * 1000,
        "policy": policy,
    }


def open_fields(
    title: str, body: str, countdown_seconds: int, affected_issues: Iterable[int]
) -> dict[str, Any]:
    """The input an open's fingerprint covers."""
    return {
        "title": title,
        "body": body,
        "countdownSeconds": countdown_seconds,
        "affectedIssues": list(affected_issues),
    }


def open_receipt(doc: Mapping[str, Any], client_request_id: str) -> dict[str, Any]:
    return {
        "directionId": doc["id"],
        "clientRequestId": client_request_id,
        "revision": 1,
        "openedAtMs": doc["openedAtMs"],
        "deadlineMs": doc["scheduledDeadlineMs"],
        "options": doc["options"],
        "policy": doc["policy"],
    }


def notice_why(doc: Mapping[str, Any]) -> str:
    return (
        f"{doc['openedBy']} opened a project direction (open_decision): {doc['title']!r}. "
        f"Read it with get_decision direction_id={doc['id']}; vote For (0) or Against (1) "
        f"with `vote` before its deadline ({doc['scheduledDeadlineMs']} Unix ms; the owner "
        "may end voting earlier)"
    )


# ------------------------------------------------------------------ voting


def voting_open(deadline_ms: int, result: Mapping[str, Any] | None, now_ms: int) -> bool:
    """Votes are taken strictly before the deadline, and never once a result is recorded."""
    return result is None and now_ms < deadline_ms


def vote_doc(
    *, member_id: str, kind: str, option: int, reason: str, revision: int, now_ms: int
) -> dict[str, Any]:
    return {
        "memberId": member_id,
        "kind": kind,
        "weight": WEIGHTS[kind],
        "option": option,
        "reason": reason,
        "revision": revision,
        "atMs": now_ms,
    }


def vote_fields(direction: str, option: int, reason: str, expected_revision: int) -> dict[str, Any]:
    return {
        "directionId": direction,
        "option": option,
        "reason": reason,
        "expectedRevision": expected_revision,
    }


def vote_receipt(direction: str, client_request_id: str, vote: Mapping[str, Any]) -> dict[str, Any]:
    return {"directionId": direction, "clientRequestId": client_request_id, "vote": dict(vote)}


def closed_refusal(deadline_ms: int, now_ms: int, recorded: bool) -> ToolError:
    why = (
        "its result is recorded"
        if recorded and now_ms < deadline_ms
        else f"its deadline was {deadline_ms} (Unix ms) and it is now {now_ms}: a vote at or "
        "after the deadline is refused"
    )
    return ToolError(
        "voting_closed",
        f"direction_id: voting on this direction has ended ({why}); read the result with "
        "get_decision. Nothing was written",
        field="direction_id",
        status=409,
        deadlineMs=deadline_ms,
        serverTime=now_ms,
    )


def stale_vote(current: Mapping[str, Any] | None, expected: int) -> ToolError:
    revision = 0 if current is None else int(current["revision"])
    if revision == 0:
        why = "you have not voted on this direction; cast your first vote with expected_revision 0"
    else:
        why = (
            f"your vote is at revision {revision}, not {expected}; read it (get_decision "
            f"yourVote) and change it with expected_revision {revision}"
        )
    return ToolError(
        "revision_conflict",
        f"expected_revision: {why}. Nothing was written",
        field="expected_revision",
        status=409,
        currentRevision=revision,
        vote=None if current is None else dict(current),
    )


# ------------------------------------------------------------------ the result


def tally(votes: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per option: its weight, and how many agent and human votes gave it."""
    rows = [
        {"option": o["index"], "label": o["label"], "weight": 0, "agents": 0, "humans": 0}
        for o in OPTIONS
    ]
    for vote in votes:
        row = rows[int(vote["option"])]
        row["weight"] += int(vote["weight"])
        row["agents" if vote["kind"] == AGENT else "humans"] += 1
    return rows


def close(
    votes: Iterable[Mapping[str, Any]], policy: Mapping[str, Any], deadline_ms: int
) -> dict[str, Any]:
    """The result at the deadline: the heavier option, `tied` on equal weight, and
    `awaiting_approval` for a winner when the policy requires approval."""
    rows = tally(votes)
    weight_for, weight_against = rows[0]["weight"], rows[1]["weight"]
    winner = None if weight_for == weight_against else (0 if weight_for > weight_against else 1)
    approval = AWAITING_APPROVAL if policy["requiresApproval"] else DECIDED
    state = TIED if winner is None else approval
    return {
        "state": state,
        "winner": winner,
        "winnerLabel": None if winner is None else OPTIONS[winner]["label"],
        "tally": rows,
        "closedAtMs": deadline_ms,
        "requiresApproval": bool(policy["requiresApproval"]),
        "resolution": None,
        "approval": None,
    }


def decide_refusal(
    *,
    policy: Mapping[str, Any],
    result: Mapping[str, Any] | None,
    revision: int,
    deadline_ms: int,
    actor: str,
    action: str,
    option: int | None,
    expected_revision: int,
) -> ToolError | None:
    """Why `actor` may not take `action` now; None when it may."""
    if action == RESOLVE_TIE and option is None:
        return ToolError(
            "option_required",
            "option: resolve_tie needs the winning option, 0 (For) or 1 (Against). Nothing "
            "was written",
            field="option",
            status=422,
        )
    if action != RESOLVE_TIE and option is not None:
        return ToolError(
            "option_not_allowed",
            f"option: {action} decides on the recorded winner; leave option out (it is only "
            "for resolve_tie). Nothing was written",
            field="option",
            status=422,
        )
    resolver = policy["resolverId"]
    if actor != resolver:
        return ToolError(
            "not_permitted",
            f"only {resolver} (the direction's frozen policy, resolverId) may resolve its "
            f"ties and approve or reject its outcome, not {actor}. Nothing was written",
            status=403,
            resolverId=resolver,
        )
    if result is None:
        return ToolError(
            "voting_open",
            f"direction_id: voting is open until {deadline_ms} (Unix ms) and there is no "
            "result to decide on yet; decide after the deadline. Nothing was written",
            field="direction_id",
            status=409,
            deadlineMs=deadline_ms,
        )
    if expected_revision != revision:
        return ToolError(
            "revision_conflict",
            f"expected_revision: the direction is at revision {revision}, not "
            f"{expected_revision}; read it (get_decision) and decide with expected_revision "
            f"{revision}. Nothing was written",
            field="expected_revision",
            status=409,
            currentRevision=revision,
            result=dict(result),
        )
    state = result["state"]
    wanted = TIED if action == RESOLVE_TIE else AWAITING_APPROVAL
    if state != wanted:
        what = "a tied result" if wanted == TIED else "an outcome awaiting approval"
        return ToolError(
            "wrong_state",
            f"action: {action} is for {what}, and this direction's result is {state}. "
            "Nothing was written",
            field="action",
            status=409,
            state=state,
        )
    return None


def decide(
    result: Mapping[str, Any],
    *,
    actor: str,
    action: str,
    option: int | None,
    reason: str,
    now_ms: int,
) -> dict[str, Any]:
    """The result after an allowed `decide_refusal`-checked action."""
    after = dict(result)
    if action == RESOLVE_TIE:
        assert option is not None
        after["winner"] = option
        after["winnerLabel"] = OPTIONS[option]["label"]
        after["resolution"] = {"by": actor, "option": option, "reason": reason, "atMs": now_ms}
        after["state"] = AWAITING_APPROVAL if result["requiresApproval"] else DECIDED
    else:
        approved = action == APPROVE
        after["approval"] = {"by": actor, "approved": approved, "reason": reason, "atMs": now_ms}
        after["state"] = DECIDED if approved else REJECTED
    return after


def decide_fields(
    direction: str, expected_revision: int, action: str, option: int | None, reason: str
) -> dict[str, Any]:
    return {
        "directionId": direction,
        "expectedRevision": expected_revision,
        "action": action,
        "option": option,
        "reason": reason,
    }


def end_refusal(policy: Mapping[str, Any], actor: str) -> ToolError | None:
    owner = policy["ownerId"]
    if actor == owner:
        return None
    return ToolError(
        "not_permitted",
        f"by: only the project owner, {owner} (the direction's frozen policy, ownerId), may "
        f"end voting early, not {actor}. Nothing was written",
        field="by",
        status=403,
        ownerId=owner,
    )


# ------------------------------------------------------------------ reading


def view(
    doc: Mapping[str, Any],
    *,
    deadline_ms: int,
    revision: int,
    result: Mapping[str, Any] | None,
    now_ms: int,
) -> dict[str, Any]:
    """A direction as read: its fixed part, current deadline, revision, state, tally and
    result (both null while unknown)."""
    return {
        **dict(doc),
        "deadlineMs": deadline_ms,
        "endedEarly": deadline_ms < int(doc["scheduledDeadlineMs"]),
        "votingOpen": voting_open(deadline_ms, result, now_ms),
        "revision": revision,
        "state": OPEN if result is None else result["state"],
        "tally": None if result is None else result["tally"],
        "result": None if result is None else dict(result),
    }


def summary(full: Mapping[str, Any]) -> dict[str, Any]:
    """A direction in a listing: without its body and policy."""
    keep = ("id", "title", "openedBy", "openedAtMs", "deadlineMs", "votingOpen", "revision")
    result = full["result"]
    return {
        **{k: full[k] for k in keep},
        "state": full["state"],
        "winner": None if result is None else result["winner"],
    }


def cursor_of(viewer: str, after: str) -> str:
    return pack({"v": viewer, "a": after})


def cursor_after(cursor: str, viewer: str) -> str:
    """The direction id a cursor of `viewer`'s continues after; a 422 for any other."""
    data = unpack(cursor)
    if isinstance(data, dict) and data.get("v") == viewer and isinstance(data.get("a"), str):
        return str(data["a"])
    raise ToolError(
        "invalid_cursor",
        "cursor: not a cursor of your listing; pass the `next` of your previous page",
        field="cursor",
        status=422,
    )


def log_entry(event: str, by: str | None, now_ms: int, **detail: Any) -> str:
    """One line of a direction's audit log (JSON): what happened, by whom, when."""
    return dumps({"event": event, "by": by, "atMs": now_ms, **detail})


# ------------------------------------------------------------------ people, in Slack
#
# A policy with a `channelId` has each direction posted there when it opens (an engagement of
# the opening seat, through the guardrail and send stages like any ask, exactly once). A
# person's reply in that post's thread is their vote: the directedness stage finds the post by
# the reply's thread (the sent-message index) and reads the reply here.

WORK_PREFIX = "direction:"
MAX_COUNTDOWN_MS = 31_536_000 * 1000  # the policy's own bound (contracts/org.py)
DAY_MS = 86_400_000
_MENTION = re.compile(r"<[@#!][^>]*>")
_VOTE = re.compile(
    r"^(?:i\s+)?(?:vote\s+)?(for|against|yes|no|\+1|-1|:\+1:|:-1:|:thumbsup:|:thumbsdown:|"
    r"\U0001F44D|\U0001F44E)[\U0001F3FB-\U0001F3FF]?"  # a thumb's skin tone
    # a reason after punctuation, or after a dash with a space before it (`no-one` is a word)
    r"(?:\s*[:,.!\u2014]+\s*(?P<reason>.*)|\s+-+\s*(?P<after_dash>.*)|\s*)$",
    re.IGNORECASE | re.DOTALL,
)
_FOR = frozenset({"for", "yes", "+1", ":+1:", ":thumbsup:", "\U0001f44d"})
REPLY_REASON_CHARS = 280  # a vote's reason, as the vote route allows


def work_id(direction: str) -> str:
    """The work id a direction's post is sent under."""
    return f"{WORK_PREFIX}{direction}"


def direction_of(work: str) -> str | None:
    """The direction a sent message's work id is the post of, or None."""
    if not work.startswith(WORK_PREFIX):
        return None
    found = work[len(WORK_PREFIX) :]
    return found if len(found) == 64 and all(c in "0123456789abcdef" for c in found) else None


def post_tracking_id(direction: str) -> str:
    """The journal entry a direction's post goes through the pipeline as."""
    return f"direction-{direction}"


def thread_ttl_ms(work: str) -> int | None:
    """How long the sent-message index keeps a send of `work`: a direction's post is kept
    past the longest countdown a policy allows (its replies are votes until its deadline);
    None, the send's own retention, for any other."""
    return MAX_COUNTDOWN_MS + DAY_MS if direction_of(work) is not None else None


def when(ms: int) -> str:
    """`2026-12-01 17:30 UTC`."""
    return f"{iso(ms)[:16].replace('T', ' ')} UTC"


def post_body(doc: Mapping[str, Any]) -> str:
    """The words of a direction's post: the question, and how a person votes on it."""
    policy = doc["policy"]
    approval = (
        f" The outcome then needs {policy['resolverId']}'s approval."
        if policy.get("requiresApproval")
        else ""
    )
    return (
        f"*Direction for a vote:* {doc['title']}\n\n{doc['body']}\n\n"
        f"Opened by {doc['openedBy']}. Reply in this thread with *for* or *against* "
        "(optionally followed by a reason, as in `against: not before the release`) before "
        f"{when(doc['scheduledDeadlineMs'])}; your latest reply counts. A person's vote weighs "
        f"{WEIGHTS[HUMAN]}, a seat's {WEIGHTS[AGENT]}. {policy['ownerId']} may end voting "
        f"earlier.{approval}"
    )


def post_decision(doc: Mapping[str, Any], channel_id: str) -> EngagementDecision:
    """The engagement that posts a direction in `channel_id`: the opening seat's ask of the
    people there, decided by the direction's rules (not the engagement stage), then checked
    by the guardrails and sent once like any other."""
    direction = str(doc["id"])
    return EngagementDecision(
        engage=True,
        trigger="direction_opened",
        reason_code="direction_posted",
        reason=(
            f"{doc['openedBy']} opened the direction {doc['title']!r}; the people of the "
            f"project vote on it by replying in its thread in {channel_id}"
        ),
        surface="existing_channel",
        channel_id=channel_id,
        body=post_body(doc),
        work_id=work_id(direction),
        dedupe_key=post_tracking_id(direction),
        why=(f"decisions.channelId is {channel_id}",),
        now_ms=int(doc["openedAtMs"]),
    )


def post_envelope(doc: Mapping[str, Any]) -> WorkEnvelope:
    """The work the post's journal entry stands for: the opening seat's direction, put to the
    people with its two options."""
    direction = str(doc["id"])
    return WorkEnvelope(
        tracking_id=post_tracking_id(direction),
        seat_id=str(doc["openedBy"]),
        accepted_at_ms=int(doc["openedAtMs"]),
        report=WorkReport(
            id=work_id(direction),
            title=str(doc["title"]),
            summary=str(doc["body"]),
            question="For or Against?",
            options=tuple(str(o["label"]) for o in doc["options"]),
        ),
    )


def reply_vote(body: str) -> tuple[int, str] | None:
    """The vote a reply casts, (option, reason), or None when it is not a vote. A vote is the
    whole reply, or its first word followed by punctuation and a reason: `for`, `against`,
    `yes`, `no`, `+1`, `-1` or a thumb, optionally after `vote` or `I vote`; mentions are
    ignored. `for the record, ...` is not a vote."""
    text = _MENTION.sub(" ", body).strip()
    found = _VOTE.match(text)
    if found is None:
        return None
    option = 0 if found.group(1).casefold() in _FOR else 1
    said = found.group("reason") or found.group("after_dash") or ""
    reason = " ".join(said.split())[:REPLY_REASON_CHARS]
    return option, reason


_SLACK_TS = re.compile(r"^(\d{1,12})\.(\d{1,6})$")


def reply_written_ms(at_ms: int, message_id: str | None, now_ms: int) -> int:
    """When a reply was written: its Slack message ts (to the millisecond) when it has one,
    else the event's time; never later than `now_ms`, so nothing is judged in the future."""
    found = _SLACK_TS.match(message_id or "")
    if found is not None:
        at_ms = int(found.group(1)) * 1000 + int(found.group(2).ljust(6, "0")[:3])
    return min(at_ms, now_ms)


def reply_request_id(delivery_id: str) -> str:
    """The vote's client request id for one delivered reply: a redelivery replays it."""
    return "reply-" + hashlib.sha256(delivery_id.encode()).hexdigest()[:40]


def person_of(
    author_id: str, members: Iterable[Member], seat_ids: Iterable[str]
) -> tuple[str | None, str]:
    """The member a reply's author is (by id or any alias, ignoring case) and, when they may
    not vote by replying, why: (member, '') | (None, 'not_a_member') | (seat, 'seat_not_person')."""
    wanted = author_id.strip().casefold()
    seats = set(seat_ids)
    for member in members:
        known = {member.id.casefold(), *(a.strip().casefold() for a in member.aliases)}
        if wanted and wanted in known:
            return (member.id, "seat_not_person") if member.id in seats else (member.id, "")
    return None, "not_a_member"
