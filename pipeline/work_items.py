"""What the inbound stream saw of the project's GitHub work, for `find_work` (issue 13):
reading a webhook payload into work summaries, the filters a call means (with its
cursor), and the page (at most 20 items or 24 KiB of them, at least one). Pure: the
workers/stores/work.py store keeps the summaries in Redis, workers/tools/work.py serves them.

A summary is one (kind, number) of the project's repository: an Issue, a pull request or a
milestone, with its title, open or closed state, exact label names, milestone number
(Issues and pull requests), draft and merged (pull requests, when the payload says), open and
closed Issue counts (milestones), GitHub's `updated_at` and when Seatwire observed it. One
webhook may carry two: an Issue's or pull request's payload embeds its milestone, which is
then observed too. An Issue that was deleted or transferred away, and a deleted milestone,
is a removal (a tombstone that keeps an older redelivery from bringing it back).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from contracts.tools import FindWork, ToolError
from pipeline.cursors import pack, unpack
from pipeline.issues import ITEM_KEYS, dig, iso_ms

Kind = Literal["issue", "pull_request", "milestone"]
GitHubState = Literal["open", "closed"]

PAGE_ITEMS = 20  # items a page at most
PAGE_BYTES = 24 * 1024  # the items of a page, as compact UTF-8 JSON, at most (but one)
MAX_TITLE = 500  # characters of a title kept
MAX_LABELS = 100  # labels kept per item (GitHub allows 100)
MAX_LABEL = 100  # characters of a label name; a longer one cannot be asked for, so not kept
MAX_URL = 500
CURSOR_VERSION = 1

# `issues` actions after which the number is no longer the repository's Issue.
REMOVING_ISSUE_ACTIONS = frozenset({"deleted", "transferred"})

COVERAGE = (
    "Partial: only what GitHub webhooks delivered to Seatwire for the project's repository "
    "since it started listening (Seatwire never calls GitHub), so an item never delivered is "
    "missing and an empty page does not prove there is no work. Timestamps, draft and merge "
    "facts and milestone Issue counts are observations of GitHub's copy, not accepted "
    "progress; stage and progress are unknown. Only Issues join coordination "
    "(get_issue_coordination): check GitHub and current claims before taking responsibility."
)


@dataclass(frozen=True)
class WorkSummary:
    """The newest version of one item a webhook showed (or its removal)."""

    kind: Kind
    number: int
    state: GitHubState
    title: str
    source_updated_at_ms: int  # GitHub's `updated_at`
    observed_at_ms: int  # when Seatwire recorded that version
    labels: tuple[str, ...] = ()
    milestone: int | None = None  # Issues and pull requests
    url: str | None = None
    draft: bool | None = None  # pull requests; None when the payload did not say
    merged: bool | None = None
    open_issues: int | None = None  # milestones
    closed_issues: int | None = None
    removed: bool = False  # deleted or transferred away: kept only as a tombstone

    @property
    def is_open(self) -> bool:
        """Open and not removed: kept until it closes (closed items are dropped in time)."""
        return not self.removed and self.state == "open"

    def doc(self) -> dict[str, Any]:
        """What is stored and answered, but draft and merged (kept apart: a payload that
        does not carry them leaves the known values)."""
        doc: dict[str, Any] = {
            "kind": self.kind,
            "number": self.number,
            "title": self.title,
            "state": self.state,
        }
        if self.kind == "milestone":
            doc["openIssues"] = self.open_issues
            doc["closedIssues"] = self.closed_issues
        else:
            doc["labels"] = list(self.labels)
            doc["milestone"] = self.milestone
        doc["url"] = self.url
        doc["sourceUpdatedAt"] = self.source_updated_at_ms
        doc["observedAt"] = self.observed_at_ms
        if self.removed:
            doc["removed"] = True
        return doc

    def fingerprint(self) -> str:
        """The version's content, but when it was observed: a redelivery has the same."""
        doc = {**self.doc(), "observedAt": None, "draft": self.draft, "merged": self.merged}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def summaries_of(
    event: str, payload: Mapping[str, Any], *, repository: str | None, received_at_ms: int
) -> list[WorkSummary]:
    """The work summaries one GitHub webhook carries for the configured `repository`: none
    for another repository, another event or a payload without the facts. Lenient: never
    raises."""
    if not isinstance(event, str) or not isinstance(payload, Mapping) or not repository:
        return []
    repo = dig(payload, "repository", "full_name")
    if not isinstance(repo, str) or repo.casefold() != repository.casefold():
        return []
    event = event.strip().lower()
    action = payload.get("action")
    found: list[WorkSummary] = []
    if event == "milestone":
        ms = _milestone(payload.get("milestone"), received_at_ms, removed=action == "deleted")
        return [ms] if ms is not None else []
    key = ITEM_KEYS.get(event)
    if key is None:
        return []
    raw = payload.get(key)
    removed = event == "issues" and action in REMOVING_ISSUE_ACTIONS
    item = _item(key, raw, received_at_ms, removed=removed)
    if item is not None:
        found.append(item)
    if isinstance(raw, Mapping):
        ms = _milestone(raw.get("milestone"), received_at_ms, removed=False)
        if ms is not None:
            found.append(ms)
    return found


def _base(raw: Any) -> tuple[int, GitHubState, str, int, str | None] | None:
    """Number, state, title, updated_at ms and URL of a GitHub object, or None."""
    if not isinstance(raw, Mapping):
        return None
    number, state, updated = raw.get("number"), raw.get("state"), iso_ms(raw.get("updated_at"))
    if isinstance(number, bool) or not isinstance(number, int) or number <= 0:
        return None
    if state not in ("open", "closed") or updated is None:
        return None
    title = raw.get("title")
    url = raw.get("html_url")
    keep_url = url if isinstance(url, str) and url.startswith("https://") else None
    if keep_url is not None and len(keep_url) > MAX_URL:
        keep_url = None
    return (
        number,
        "open" if state == "open" else "closed",
        title[:MAX_TITLE] if isinstance(title, str) else "",
        updated,
        keep_url,
    )


def _item(key: str, raw: Any, received_at_ms: int, *, removed: bool) -> WorkSummary | None:
    base = _base(raw)
    if base is None or not isinstance(raw, Mapping):
        return None
    number, state, title, updated, url = base
    # An issue_comment's (or an issues event's) `issue` is a pull request when it carries
    # `pull_request`.
    is_pr = key == "pull_request" or "pull_request" in raw
    labels: list[str] = []
    for label in raw.get("labels") or []:
        name = label.get("name") if isinstance(label, Mapping) else None
        if isinstance(name, str) and 0 < len(name) <= MAX_LABEL and name not in labels:
            labels.append(name)
    milestone = _number(dig(raw, "milestone", "number"))
    draft = raw.get("draft") if isinstance(raw.get("draft"), bool) else None
    merged: bool | None = None
    if isinstance(raw.get("merged"), bool):
        merged = raw["merged"]
    elif "merged_at" in raw:
        merged = raw["merged_at"] is not None
    elif isinstance(raw.get("pull_request"), Mapping) and "merged_at" in raw["pull_request"]:
        merged = raw["pull_request"]["merged_at"] is not None
    return WorkSummary(
        kind="pull_request" if is_pr else "issue",
        number=number,
        state=state,
        title=title,
        source_updated_at_ms=updated,
        observed_at_ms=received_at_ms,
        labels=tuple(labels[:MAX_LABELS]),
        milestone=milestone,
        url=url,
        draft=draft if is_pr else None,
        merged=merged if is_pr else None,
        removed=removed,
    )


def _milestone(raw: Any, received_at_ms: int, *, removed: bool) -> WorkSummary | None:
    base = _base(raw)
    if base is None or not isinstance(raw, Mapping):
        return None
    number, state, title, updated, url = base
    return WorkSummary(
        kind="milestone",
        number=number,
        state=state,
        title=title,
        source_updated_at_ms=updated,
        observed_at_ms=received_at_ms,
        url=url,
        open_issues=_count(raw.get("open_issues")),
        closed_issues=_count(raw.get("closed_issues")),
        removed=removed,
    )


def _number(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value if ok else None


def _count(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None


def wire(doc: Mapping[str, Any], draft: str | None, merged: str | None) -> dict[str, Any]:
    """One item as `find_work` answers it, from the stored doc and the stored draft and
    merged flags ('1', '0' or None when never observed)."""
    out = {k: v for k, v in doc.items() if k != "removed"}
    if doc.get("kind") == "pull_request":
        out["draft"] = None if draft is None else draft == "1"
        out["merged"] = None if merged is None else merged == "1"
    return out


# ------------------------------------------------------------------ filters and cursors


@dataclass(frozen=True)
class Filters:
    """What a page is of, and after which number it starts (None: the first page)."""

    kind: Kind
    state: GitHubState
    label: str | None
    milestone: int | None
    after: int | None = None

    def matches(self, doc: Mapping[str, Any]) -> bool:
        if doc.get("kind") != self.kind or doc.get("state") != self.state or doc.get("removed"):
            return False
        if self.label is not None and self.label not in (doc.get("labels") or ()):
            return False
        return self.milestone is None or doc.get("milestone") == self.milestone

    def wire(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "state": self.state,
            "label": self.label,
            "milestone": self.milestone,
        }


FILTER_FIELDS = ("kind", "state", "label", "milestone")


def _bad_cursor(why: str) -> ToolError:
    return ToolError(
        "invalid_cursor",
        f"cursor: {why}; pass the `next` of the previous page unchanged, or leave cursor out "
        "for the first page",
        field="cursor",
        status=422,
    )


def filters_of(args: FindWork) -> Filters:
    """The filters a call means. With a cursor, the cursor's filters hold: a filter given
    with it must be the same (the field is named when not). A label or milestone filter
    with kind milestone is refused."""
    if args.cursor is None:
        chosen = Filters(args.kind, args.state, args.label, args.milestone)
    else:
        chosen = decode_cursor(args.cursor)
        given = args.model_fields_set
        for name in FILTER_FIELDS:
            if name in given and getattr(args, name) != getattr(chosen, name):
                raise ToolError(
                    "cursor_mismatch",
                    f"{name}: the cursor continues a page with {name} "
                    f"{getattr(chosen, name)!r}, not {getattr(args, name)!r}; leave {name} "
                    "out (or the same) with this cursor, or leave cursor out for a new search",
                    field=name,
                    status=422,
                )
    if chosen.kind == "milestone":
        for name in ("label", "milestone"):
            if getattr(chosen, name) is not None:
                raise ToolError(
                    "invalid_arguments",
                    f"{name}: filters Issues and pull requests only; leave it out with kind "
                    "milestone",
                    field=name,
                    status=422,
                )
    return chosen


def encode_cursor(filters: Filters, after: int) -> str:
    doc = [CURSOR_VERSION, filters.kind, filters.state, filters.label, filters.milestone, after]
    return pack(doc)


def decode_cursor(cursor: str) -> Filters:
    doc = unpack(cursor)
    if not isinstance(doc, list) or len(doc) != 6 or doc[0] != CURSOR_VERSION:
        raise _bad_cursor("not a cursor this tool gave")
    _v, kind, state, label, milestone, after = doc
    valid = (
        kind in ("issue", "pull_request", "milestone")
        and state in ("open", "closed")
        and (label is None or (isinstance(label, str) and 0 < len(label) <= MAX_LABEL))
        and (milestone is None or _number(milestone) is not None)
        and _number(after) is not None
    )
    if not valid:
        raise _bad_cursor("not a cursor this tool gave")
    return Filters(kind, state, label, milestone, after)


# ------------------------------------------------------------------ the page


def size_of(item: Mapping[str, Any]) -> int:
    """Bytes of one item as compact UTF-8 JSON (what the 24 KiB budget counts)."""
    return len(json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode())


def page_of(
    items: Sequence[Mapping[str, Any]],
    *,
    limit: int = PAGE_ITEMS,
    budget: int = PAGE_BYTES,
) -> tuple[list[Mapping[str, Any]], bool]:
    """The first items, in order, that fit `limit` and `budget` (at least one), and whether
    any is left after them."""
    page: list[Mapping[str, Any]] = []
    used = 0
    for item in items:
        size = size_of(item)
        if page and (len(page) >= limit or used + size > budget):
            return page, True
        page.append(item)
        used += size
    return page, False
