"""The rules of issue coordination (issue 13, the tool `coordinate_issue`), pure: what a call
must carry, its fingerprint (a replay's identity), the notes a call earns from what GitHub was
observed to be, what a webhook says about an issue number, a participants page, and the work
report a `blocked` report becomes. workers/stores/issues.py does the atomic part in Redis.

One repository (the project card's) and, per issue number, one owner at a time. Its
`generation` is 1 before anyone coordinates the number and rises by one on every ownership
change (a claim, a release) and on nothing else: joining, leaving, following, reporting and a
refresh leave it, so that a contributor joining never makes the owner's next call stale. Every
mutation but `claim` must name the current generation (`expected_generation`); a claim may.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from contracts.tools import CoordinateIssue
from contracts.work import Blocker, WorkReport
from pipeline.cursors import digest, pack, unpack
from pipeline.launches import parse_iso

Action = Literal["claim", "refresh", "release", "join", "leave", "follow", "unfollow", "report"]
Kind = Literal["issue", "pull_request"]
Role = Literal["owner", "contributor", "follower"]

FIRST_GENERATION = 1  # an issue number nobody has coordinated yet
PAGE = 20  # participants a page
NOTED = frozenset({"claim", "refresh", "join"})  # the actions a closed issue or a PR notes
# GitHub events whose payload carries the issue or pull request they are about.
ITEM_KEYS: Mapping[str, str] = {
    "issues": "issue",
    "issue_comment": "issue",
    "pull_request": "pull_request",
    "pull_request_review": "pull_request",
    "pull_request_review_comment": "pull_request",
}
MAX_TITLE = 500


@dataclass(frozen=True)
class Problem:
    """A call that is refused before anything is read: the field and what to do."""

    field: str
    message: str


def problem_of(args: CoordinateIssue) -> Problem | None:
    """What the call lacks or carries in excess for its action, or None. The input model has
    already checked each field alone; these are the rules between them."""
    if args.action != "claim" and args.expected_generation is None:
        return Problem(
            "expected_generation",
            f"{args.action} needs the issue's current generation: read it with "
            "get_issue_coordination and pass it as expected_generation",
        )
    if args.action != "report":
        for name in ("work_state", "blocker"):
            if getattr(args, name) is not None:
                return Problem(name, f"{name} goes only with action report; leave it out")
        return None
    if args.work_state is None:
        return Problem(
            "work_state", "report needs work_state: working, waiting, blocked, paused or done"
        )
    blocker = (args.blocker or "").strip()
    if args.work_state == "blocked" and not blocker:
        return Problem("blocker", "a blocked report needs blocker: what blocks the work, in text")
    if args.work_state != "blocked" and args.blocker is not None:
        return Problem("blocker", "blocker goes only with work_state blocked; leave it out")
    return None


def fingerprint(args: CoordinateIssue) -> str:
    """The identity of a call's input: a replay of its `client_request_id` must carry the same
    (the id itself is the key, so it is not part of it)."""
    doc = {
        "issue": args.issue_number,
        "action": args.action,
        "generation": args.expected_generation,
        "workState": args.work_state,
        "blocker": args.blocker.strip() if args.blocker is not None else None,
    }
    return digest(doc)


# ------------------------------------------------------------------ GitHub's copy


@dataclass(frozen=True)
class Observation:
    """What the inbound stream saw of one issue number: the newest version GitHub sent."""

    number: int
    kind: Kind
    state: Literal["open", "closed"]
    title: str
    source_updated_at_ms: int  # GitHub's `updated_at`
    observed_at_ms: int  # when Seatwire recorded that version


def observation_of(
    event: str, payload: Mapping[str, Any], *, repository: str | None, received_at_ms: int
) -> Observation | None:
    """What one GitHub webhook says about an issue number of the configured `repository`, or
    None (another repository, another event, a payload without the facts). Lenient: never
    raises."""
    key = ITEM_KEYS.get(event.strip().lower()) if isinstance(event, str) else None
    repo = dig(payload, "repository", "full_name")
    if key is None or not repository or not isinstance(repo, str):
        return None
    if repo.casefold() != repository.casefold():
        return None
    item = payload.get(key)
    if not isinstance(item, Mapping):
        return None
    number, state, updated = item.get("number"), item.get("state"), item.get("updated_at")
    if isinstance(number, bool) or not isinstance(number, int) or number <= 0:
        return None
    if state not in ("open", "closed"):
        return None
    updated_ms = iso_ms(updated)
    if updated_ms is None:
        return None
    # An issue_comment's `issue` is a pull request when it carries `pull_request`.
    kind: Kind = "pull_request" if key == "pull_request" or "pull_request" in item else "issue"
    title = item.get("title")
    return Observation(
        number=number,
        kind=kind,
        state=state,
        title=title[:MAX_TITLE] if isinstance(title, str) else "",
        source_updated_at_ms=updated_ms,
        observed_at_ms=received_at_ms,
    )


def observation_wire(found: Mapping[str, str] | None) -> dict[str, Any]:
    """`githubObservation` from the stored hash (workers/stores/issues.py), or `not_observed`."""
    if not found or "kind" not in found:
        return {"status": "not_observed"}
    return {
        "status": "observed",
        "kind": found["kind"],
        "state": found.get("githubState", ""),
        "title": found.get("title", ""),
        "sourceUpdatedAt": int(found.get("sourceUpdatedAtMs", "0")),
        "observedAt": int(found.get("observedAtMs", "0")),
        "reconciliationRequired": found.get("reconcile") == "1",
    }


def notes_for(action: str, observation: Mapping[str, Any]) -> list[str]:
    """The notes a claim, refresh or join earns from GitHub's copy: it refuses nothing."""
    if action not in NOTED or observation.get("status") != "observed":
        return []
    notes = []
    if observation.get("kind") == "pull_request":
        notes.append(
            "this number was observed as a pull request, not an Issue: coordination is "
            "recorded anyway"
        )
    elif observation.get("state") == "closed":
        notes.append("this Issue was observed as closed: coordination is recorded anyway")
    if observation.get("reconciliationRequired"):
        notes.append("GitHub's observations of this number conflicted: check it on GitHub")
    return notes


# ------------------------------------------------------------------ participants


def participants(
    owner: str | None,
    members: Mapping[str, Mapping[str, Any]],
    *,
    after: str | None,
    limit: int = PAGE,
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the issue's participants in seat-id order after the seat `after`: each with
    its roles, since when and its last report; and the last seat id when there are more."""
    ids = sorted({*members, *((owner,) if owner else ())})
    chosen = [s for s in ids if after is None or s > after]
    page = chosen[:limit]
    out = []
    for seat in page:
        m = members.get(seat, {})
        roles: list[Role] = []
        if seat == owner:
            roles.append("owner")
        if m.get("contributor"):
            roles.append("contributor")
        if m.get("follower"):
            roles.append("follower")
        entry: dict[str, Any] = {"id": seat, "roles": roles, "sinceMs": m.get("sinceMs")}
        if m.get("workState"):
            entry["workState"] = _report(m)
        out.append(entry)
    return out, (page[-1] if page and len(chosen) > limit else None)


def _report(m: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "state": m.get("workState"),
        "blocker": m.get("blocker") or None,
        "reportedAt": m.get("reportedAtMs"),
    }


def encode_cursor(number: int, seat: str) -> str:
    return pack([number, seat])


def decode_cursor(cursor: str, number: int) -> str | None:
    """The seat id a cursor of this issue's pages continues after; None when it is not one."""
    data = unpack(cursor)
    if not (isinstance(data, list) and len(data) == 2):
        return None
    got, seat = data
    return seat if got == number and isinstance(seat, str) else None


# ------------------------------------------------------------------ the engagement


def work_id(repository: str | None, number: int) -> str:
    """The one work id of an issue's blocked reports (each report a new revision of it)."""
    where = repository or "repo"
    return f"issue:{where}#{number}"[:200]


def blocked_report(
    *,
    repository: str | None,
    number: int,
    seat_id: str,
    blocker: str,
    revision: int,
    title: str = "",
) -> WorkReport:
    """The work report a `blocked` report becomes: the engagement stage decides who, if
    anyone, must be asked."""
    name = f"{repository}#{number}" if repository else f"issue #{number}"
    return WorkReport(
        id=work_id(repository, number),
        title=(f"{name}: {title}" if title else name)[:500],
        summary=f"{seat_id} reports {name} blocked: {blocker}"[:8000],
        scope=name[:500],
        link=f"https://github.com/{repository}/issues/{number}" if repository else None,
        state="blocked",
        blocker=Blocker(detail=blocker, scope=name[:500]),
        seat_id=seat_id,
        revision=revision,
    )


def dig(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def iso_ms(value: Any) -> int | None:
    """GitHub's time (`2026-01-02T03:04:05Z`) as Unix ms, or None when it is not one."""
    return parse_iso(value) if isinstance(value, str) else None


def roles_of(owner: str | None, seat: str, member: Mapping[str, Any] | None) -> Sequence[Role]:
    """The caller's roles on the issue."""
    roles: list[Role] = ["owner"] if owner == seat else []
    if member and member.get("contributor"):
        roles.append("contributor")
    if member and member.get("follower"):
        roles.append("follower")
    return roles
