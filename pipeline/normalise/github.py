"""GitHub webhook bodies become board `Candidate`s. Pure, lenient, never raises.

Considered: `issues` and `pull_request` assigned, `pull_request` review_requested,
`issue_comment` and `pull_request_review_comment` created. Everything else is a `Skipped`
with `unsupported_event:<event>.<action>`; `ping` is `Skipped("ping")`.

Every GitHub login (actor, owner, assignees, reviewers, @mentions) goes through `logins`, a
case-insensitive map from login to member alias; an unmapped login stays as the bare login,
lowercased, so a seat whose aliases name the login still matches.
"""

from __future__ import annotations

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
    ("issue_comment", "created"): ("issue", "commented"),
    ("pull_request_review_comment", "created"): ("pull_request", "commented"),
}

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

    comment = as_mapping(payload.get("comment")) if board_action == "commented" else None
    if board_action == "commented" and comment is None:
        # Falling back to the text would re-announce its old @mentions.
        return Skipped("missing_field:comment", "a comment event without the comment")
    member = _member_of(logins)
    if comment is not None:
        body = _str(comment.get("body"))
    else:
        body = "\n\n".join(p for p in (_str(item.get("title")), _str(item.get("body"))) if p)
    # An assignment or review request addresses only the person it names: everyone already
    # on the item heard about it before. A comment concerns everyone on the item.
    if board_action == "assigned":
        assignees: list[object] = [payload.get("assignee")]
    else:
        assignees = [*as_list(item.get("assignees")), item.get("assignee")]
    if board_action == "review_requested":
        reviewers: list[object] = [payload.get("requested_reviewer")]
    else:
        reviewers = [*as_list(item.get("requested_reviewers"))]
    actor = _login(payload.get("sender"))
    author = _login(item.get("user"))
    return build(
        {
            "family": "board",
            "source": "github",
            "delivery_id": f"github:{delivery}",
            "ids": {
                "channel_id": repo,
                "issue_id": f"{repo}#{number}",
                "message_id": _id(comment.get("id")) if comment is not None else None,
                "event_id": delivery,
            },
            "board": {
                "action": board_action,
                "actor_id": member(actor) if actor is not None else None,
                "assignee_ids": unique(member(x) for x in _logins(assignees)),
                "reviewer_ids": unique(member(x) for x in _logins(reviewers)),
                "owner_ids": (member(author),) if author is not None else (),
                "body": clip(body),
                # Only a comment's @mentions are news; the item's own text was seen when
                # it was opened or edited (GitHub notifies on those, not on assignment).
                "mentions": unique(member(x) for x in mentions_in(body))
                if comment is not None
                else (),
            },
            "at_ms": received_at_ms,
        }
    )


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
