"""GitHub webhook bodies become board `Candidate`s. Pure, lenient, never raises.

Considered (event.action -> board.action):
    issues / pull_request .assigned                 assigned
    pull_request .review_requested                  review_requested
    pull_request .review_request_removed            review_request_removed (a follow-up)
    issues / pull_request .opened                   opened (the description's @mentions)
    issues / pull_request .edited                   edited (only @mentions new in the edit)
    issue_comment / pull_request_review_comment
        .created                                    commented
        .edited                                     edited (only @mentions new in the edit)
    pull_request_review .submitted                  reviewed (state in board.reviewState)
Everything else is a `Skipped` with `unsupported_event:<event>.<action>` (or
`unsupported_event:<event>` for an event without actions, such as `push`); `ping` is
`Skipped("ping")`.

One event is one delivery, however many hooks deliver it: the Candidate's `deliveryId` is
built from the event's own identity (repository, item number, event and action, the id of the
object it is about, whom it concerns, and the object's own timestamp), so the repository's
hook and the organisation's hook, each with its own X-GitHub-Delivery, are one journal entry
(the second answered `duplicate`). A redelivery of one X-GitHub-Delivery carries the same
body, so it is the same entry too. A payload without those fields falls back to
`github:<X-GitHub-Delivery>`. The X-GitHub-Delivery stays in `ids.eventId`.

Every GitHub login (actor, owner, assignees, reviewers, @mentions) goes through `logins`, a
case-insensitive map from login to member alias; an unmapped login stays as the bare login,
lowercased, so a seat whose aliases name the login still matches.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from pipeline.normalise import (
    Normalised,
    Skipped,
    as_int,
    as_list,
    as_mapping,
    as_str,
    build,
    clip,
    dig,
    unique,
)

# (event, action) -> (the payload key holding the issue or PR, board.action)
SUPPORTED: Mapping[tuple[str, str], tuple[str, str]] = {
    ("issues", "assigned"): ("issue", "assigned"),
    ("pull_request", "assigned"): ("pull_request", "assigned"),
    ("pull_request", "review_requested"): ("pull_request", "review_requested"),
    ("pull_request", "review_request_removed"): ("pull_request", "review_request_removed"),
    ("issues", "opened"): ("issue", "opened"),
    ("pull_request", "opened"): ("pull_request", "opened"),
    ("issues", "edited"): ("issue", "edited"),
    ("pull_request", "edited"): ("pull_request", "edited"),
    ("issue_comment", "created"): ("issue", "commented"),
    ("issue_comment", "edited"): ("issue", "edited"),
    ("pull_request_review_comment", "created"): ("pull_request", "commented"),
    ("pull_request_review_comment", "edited"): ("pull_request", "edited"),
    ("pull_request_review", "submitted"): ("pull_request", "reviewed"),
}
# The events whose subject is a comment (its body is the text, its id the object).
COMMENT_EVENTS = frozenset({"issue_comment", "pull_request_review_comment"})
MAX_DELIVERY_ID = 200  # Candidate.delivery_id's limit

LOGIN = re.compile(r"[A-Za-z0-9](?:-?[A-Za-z0-9])*")
MAX_LOGIN = 39
# `@` + a run of login characters (an App's bot account adds `[bot]`), not inside an email or
# a path (`a@b.com`, `x/@y`), and not followed by `/` (`@org/team`, `@types/node`), `_` or
# `@`, which no login contains.
MENTION = re.compile(r"(?<![\w.+\-/@`])@([A-Za-z0-9-]+)(\[bot\])?(?![\w/@])")
# GitHub does not notify for mentions in code or in HTML comments (issue templates). Blocks
# are cut by a linear scan (an unclosed one runs to the end, as GitHub renders it): a lazy
# `<!--.*?-->` would rescan the rest of the text from every unclosed opener, quadratic in a
# 65,536-character comment. Inline code stops at a newline, so a regex is linear there.
BLOCKS = (("```", "```"), ("~~~", "~~~"), ("<!--", "-->"))
INLINE_CODE = re.compile(r"`[^`\n]*`")


def _unmentionable_removed(text: str) -> str:
    """`text` with code blocks, HTML comments and inline code replaced by a space."""
    out: list[str] = []
    at = 0
    # The next place of each opener at or after `at`; an opener found nowhere stays -1, so
    # each one is searched past every position once: linear overall.
    following = {opener: text.find(opener) for opener, _ in BLOCKS}
    while True:
        for opener, _ in BLOCKS:
            if 0 <= following[opener] < at:
                following[opener] = text.find(opener, at)
        found = [(following[o], o, c) for o, c in BLOCKS if following[o] >= 0]
        if not found:
            break
        start, opener, closer = min(found)
        end = text.find(closer, start + len(opener))
        out.append(text[at:start])
        out.append(" ")
        if end < 0:
            at = len(text)
            break
        at = end + len(closer)
    out.append(text[at:])
    return INLINE_CODE.sub(" ", "".join(out))


def normalise_github(
    event_name: str,
    payload: Mapping[str, Any],
    *,
    delivery_id: str,
    received_at_ms: int,
    logins: Mapping[str, str] | None = None,
) -> Normalised:
    """The board Candidate for one webhook (X-GitHub-Event, body, X-GitHub-Delivery), or why
    there is none."""
    event = event_name.strip().lower() if isinstance(event_name, str) else ""
    if event == "ping":
        return Skipped("ping", "GitHub's check that the hook is reachable")
    if not isinstance(payload, Mapping):
        return Skipped("unsupported_envelope", "the body is not a JSON object")
    action = payload.get("action")
    action = action if isinstance(action, str) else None
    supported = SUPPORTED.get((event, action)) if action is not None else None
    if supported is None:
        name = f"{event[:64]}.{action[:64]}" if action is not None else event[:64]
        return Skipped(f"unsupported_event:{name}", "an event or action we do not consider")
    item_key, board_action = supported

    repo = as_str(dig(payload, "repository", "full_name"))
    item = as_mapping(payload.get(item_key))
    number = as_int(item.get("number")) if item is not None else None
    delivery = as_str(delivery_id)
    if repo is None:
        return Skipped("missing_field:repository.full_name", "no repository on the payload")
    if item is None or number is None:
        return Skipped(f"missing_field:{item_key}.number", f"no {item_key} number")
    if delivery is None:
        return Skipped("missing_field:delivery_id", "no X-GitHub-Delivery")

    comment = as_mapping(payload.get("comment")) if event in COMMENT_EVENTS else None
    if event in COMMENT_EVENTS and comment is None:
        # Falling back to the text would re-announce its old @mentions.
        return Skipped("missing_field:comment", "a comment event without the comment")
    review = as_mapping(payload.get("review")) if board_action == "reviewed" else None
    if board_action == "reviewed" and review is None:
        return Skipped("missing_field:review", "a review event without the review")
    member = _member_of(logins)
    subject = comment or review
    if subject is not None:
        body = _str(subject.get("body"))
        text = body
    else:
        text = _str(item.get("body"))
        body = "\n\n".join(p for p in (_str(item.get("title")), text) if p)
    # An assignment or review request addresses only the person it names: everyone already
    # on the item heard about it before. A comment concerns everyone on the item.
    if board_action == "assigned":
        assignees: list[object] = [payload.get("assignee")]
    else:
        assignees = [*as_list(item.get("assignees")), item.get("assignee")]
    if board_action in ("review_requested", "review_request_removed"):
        reviewers: list[object] = [payload.get("requested_reviewer")]
    else:
        reviewers = [*as_list(item.get("requested_reviewers"))]
    actor = _login(payload.get("sender"))
    author = _login(item.get("user"))
    return build(
        {
            "family": "board",
            "source": "github",
            "delivery_id": event_identity(event, action or "", repo, number, payload, item_key)
            or f"github:{delivery}",
            "ids": {
                "channel_id": repo,
                "issue_id": f"{repo}#{number}",
                "message_id": _id(subject.get("id")) if subject is not None else None,
                "event_id": delivery,
            },
            "board": {
                "action": board_action,
                "actor_id": member(actor) if actor is not None else None,
                "assignee_ids": unique(member(x) for x in _logins(assignees)),
                "reviewer_ids": unique(member(x) for x in _logins(reviewers)),
                "owner_ids": (member(author),) if author is not None else (),
                "body": clip(body),
                "mentions": unique(member(x) for x in news(board_action, text, payload)),
                "review_state": _review_state(review),
            },
            "at_ms": received_at_ms,
        }
    )


# The board actions whose text's @mentions are news: a description when the item is opened, a
# comment or review when it is posted, and an edit's text (less what it said before). An
# assignment or review request carries the item's old text, whose mentions were read already.
READS_MENTIONS = frozenset({"opened", "edited", "commented", "reviewed"})


def news(board_action: str, text: str, payload: Mapping[str, Any]) -> list[str]:
    """The logins @mentioned in `text` that this event announces: all of them for something
    new, only those the previous text did not have for an edit or a transferred issue."""
    if board_action not in READS_MENTIONS:
        return []
    found = list(mentions_in(text))
    if board_action == "edited":
        before = dig(payload, "changes", "body", "from")
        if not isinstance(before, str):
            return []  # the body did not change (a title edit): nothing new in it
    else:
        # An issue transferred from another repository is `opened` here with its old text:
        # its mentions were announced where it was opened first.
        before = dig(payload, "changes", "old_issue", "body")
    if isinstance(before, str):
        seen = {login.lower() for login in mentions_in(before)}
        found = [login for login in found if login.lower() not in seen]
    return found


def event_identity(
    event: str,
    action: str,
    repo: str,
    number: int,
    payload: Mapping[str, Any],
    item_key: str,
) -> str | None:
    """The delivery id of the event itself, the same through every hook that delivers it:
    repository, item, event.action, the object's id, whom it concerns, and its timestamp.
    None when the payload lacks the object's id or its timestamp."""
    obj = as_mapping(payload.get("review")) if event == "pull_request_review" else None
    if obj is None and event in COMMENT_EVENTS:
        obj = as_mapping(payload.get("comment"))
    obj = obj or as_mapping(payload.get(item_key))
    if obj is None:
        return None
    obj_id = _id(obj.get("id"))
    stamp = as_str(obj.get("submitted_at")) if event == "pull_request_review" else None
    stamp = stamp or as_str(obj.get("updated_at")) or as_str(obj.get("created_at"))
    if obj_id is None or stamp is None:
        return None
    # Two people assigned (or asked to review) in one change are two events, same second.
    whom = None
    if action in ("assigned", "unassigned"):
        whom = _user_key(payload.get("assignee"))
    elif action in ("review_requested", "review_request_removed"):
        whom = _user_key(payload.get("requested_reviewer"))
        whom = whom or _user_key(payload.get("requested_team"))
    subject = f"{obj_id}/{whom}" if whom else obj_id
    identity = f"github:{repo}/{number}/{event}.{action}/{subject}@{stamp}"
    if len(identity) <= MAX_DELIVERY_ID and identity.isprintable():
        return identity
    return f"github:event:{hashlib.sha256(identity.encode()).hexdigest()[:40]}"


def _user_key(user: object) -> str | None:
    """A user's (or team's) stable id, else its login or slug."""
    mapping = as_mapping(user)
    if mapping is None:
        return None
    return _id(mapping.get("id")) or as_str(mapping.get("login")) or as_str(mapping.get("slug"))


def _review_state(review: Mapping[str, Any] | None) -> str | None:
    state = as_str(review.get("state")) if review is not None else None
    return state.strip().lower()[:64] if state is not None else None


def mentions_in(text: str) -> Iterator[str]:
    """The logins @mentioned in `text`, in order, outside code and HTML comments."""
    for match in MENTION.finditer(_unmentionable_removed(text)):
        login = match.group(1)
        if len(login) <= MAX_LOGIN and LOGIN.fullmatch(login):
            yield login + (match.group(2) or "")


def _member_of(logins: Mapping[str, str] | None) -> Callable[[str], str]:
    """A function from a login to the member alias it is mapped to, else the lowered login."""
    table = {
        key.strip().lower(): value
        for key, value in (logins or {}).items()
        if isinstance(key, str) and isinstance(value, str) and value.strip()
    }

    def member(login: str) -> str:
        lowered = login.strip().lower()
        return table.get(lowered, lowered)

    return member


def _logins(users: Iterable[object]) -> Iterator[str]:
    for user in users:
        login = _login(user)
        if login is not None:
            yield login


def _login(user: object) -> str | None:
    return as_str(dig(user, "login"))


def _id(value: object) -> str | None:
    number = as_int(value)
    return str(number) if number is not None else as_str(value)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""
