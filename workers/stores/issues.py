"""Issue coordination in Redis (issue 13, the tool `coordinate_issue`): per repository issue
number, one owner at a time, its contributors and followers, work-state reports, and what the
inbound stream observed of the number on GitHub. The rules are pipeline/issues.py's.

    keys.issue(n)             hash: owner, generation, sinceMs, refreshedAtMs, the owner's
                              report (workState, blocker, reportedBy, reportedAtMs), reports
                              (the last report revision)
    keys.issue_members(n)     hash: seat -> its participant record (JSON: contributor,
                              follower, sinceMs, its own last report)
    keys.issue_log(n)         stream: every change, with its receipt (capped at LOG_CAP)
    keys.issue_request(s, id) hash: a seat's request id -> input fingerprint and receipt
    keys.issue_observed(n)    hash: GitHub's newest version of the number seen (kind,
                              githubState, title, sourceUpdatedAtMs, observedAtMs, reconcile)

Every mutation is one Lua script (issue_claim, issue_refresh, issue_release, issue_member,
issue_report, each with subject_common and issue_common in front): the replay check, the
generation check, the write, the receipt and the log land together or not at all, and a
refusal writes nothing. Receipts are kept `RECEIPT_RETENTION_MS` (30 days), so a retry within
that time is a replay.

The issue's owner is the owner of the claim subject `issue:<n>` of the one claim system
(workers/stores/claims.py, whose docstring holds the decisions): the goal steward's
COLLABORATE lease on an item whose candidate names the issue is the same owner, in the same
hash, with the same generation. A claim made here is a standing claim (no `untilMs`: it never
expires by itself); an owner that came through the claims door holds a lease (`untilMs`, the
`item` that took it, its backlog's `ownerId`), which `get` shows. A `claim` here never takes a
lease over, lapsed or not (`owned`); a `refresh` by the lease's owner records refreshedAtMs
but does not extend the lease (the steward's rerun or the claims route renews it); a
`release` by the lease's owner ends it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

import redis

from contracts.journal import IssueVerb
from contracts.tools import CoordinateIssue
from pipeline.issues import FIRST_GENERATION, Observation, fingerprint
from workers.stores import keys
from workers.stores.claims import ISSUE_LOG_CAP
from workers.stores.scripts import script, text

RECEIPT_RETENTION_MS = 30 * 86_400_000
LOG_CAP = ISSUE_LOG_CAP

# action -> (script, extra ARGV) for the member script: role, set, contributor role, outcome.
MEMBER_ARGS: dict[str, tuple[str, str, str, str]] = {
    "join": ("contributor", "1", "1", "joined"),
    "leave": ("contributor", "0", "1", "left"),
    "follow": ("follower", "1", "0", "followed"),
    "unfollow": ("follower", "0", "0", "unfollowed"),
}
IssueReply = IssueVerb | str  # an IssueVerb, or `replayed` / `conflict`


@dataclass(frozen=True)
class Coordinated:
    """What one mutation did: `verb` (its outcome, a refusal, `replayed` or `conflict`), the
    receipt (kept, or the original one of a replay), and the owner and generation a refusal
    names."""

    verb: IssueReply
    receipt: dict[str, Any] | None = None
    owner: str | None = None
    generation: int | None = None


@dataclass(frozen=True)
class IssueState:
    number: int
    owner: str | None
    generation: int
    since_ms: int | None
    refreshed_at_ms: int | None
    work_state: str | None
    blocker: str | None
    reported_by: str | None
    reported_at_ms: int | None
    members: dict[str, dict[str, Any]]
    until_ms: int | None = None  # a COLLABORATE lease's end (None: a standing claim, or none)
    lease_item: str | None = None  # the backlog item whose claim took the lease


class Issues:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._scripts = {
            name: script(client, f"issue_{name}")
            for name in ("claim", "refresh", "release", "member", "report")
        }
        self._observe = script(client, "issue_observe")

    def coordinate(self, seat_id: str, args: CoordinateIssue, *, now_ms: int) -> Coordinated:
        """Seat `seat_id`'s mutation `args` (already checked by pipeline.issues.problem_of)."""
        n = args.issue_number
        base: list[str | int] = [
            seat_id,
            n,
            args.action,
            args.client_request_id,
            fingerprint(args),
            "" if args.expected_generation is None else args.expected_generation,
            now_ms,
            RECEIPT_RETENTION_MS,
            LOG_CAP,
        ]
        extra: list[str | int] = []
        name: str = args.action
        if args.action in MEMBER_ARGS:
            name, extra = "member", list(MEMBER_ARGS[args.action])
        elif args.action == "report":
            name, extra = "report", [args.work_state or "", (args.blocker or "").strip()]
        reply = self._scripts[name](
            keys=[
                keys.issue(n),
                keys.issue_members(n),
                keys.issue_log(n),
                keys.issue_request(seat_id, args.client_request_id),
            ],
            args=[*base, *extra],
        )
        verb = text(reply[0])
        if len(reply) == 2:  # {verb, receipt}: an outcome, a replay, or a conflict ('')
            body = text(reply[1])
            return Coordinated(verb, json.loads(body) if body else None)
        owner, generation = text(reply[1]), int(text(reply[2]))
        return Coordinated(verb, None, owner or None, generation)

    def get(self, number: int) -> IssueState:
        """The issue's coordination now (generation 1 and nobody for an untouched number)."""
        pipe = self.r.pipeline(transaction=False)
        pipe.hgetall(keys.issue(number))
        pipe.hgetall(keys.issue_members(number))
        raw, members_raw = pipe.execute()
        f = {text(k): text(v) for k, v in raw.items()}

        def num(name: str) -> int | None:
            return int(f[name]) if f.get(name) else None

        return IssueState(
            number=number,
            owner=f.get("owner") or None,
            generation=num("generation") or FIRST_GENERATION,
            since_ms=num("sinceMs") if f.get("owner") else None,
            refreshed_at_ms=num("refreshedAtMs") if f.get("owner") else None,
            work_state=f.get("workState") or None,
            blocker=f.get("blocker") or None,
            reported_by=f.get("reportedBy") or None,
            reported_at_ms=num("reportedAtMs"),
            until_ms=num("untilMs") if f.get("owner") else None,
            lease_item=(f.get("item") or None) if f.get("owner") else None,
            members={
                text(k): cast(dict[str, Any], json.loads(text(v))) for k, v in members_raw.items()
            },
        )

    def log(self, number: int) -> list[dict[str, Any]]:
        """Every change still kept, oldest first: its receipt."""
        out = []
        for _id, fields in self.r.xrange(keys.issue_log(number)) or []:
            if fields:
                f = {text(k): text(v) for k, v in fields.items()}
                out.append(json.loads(f["receipt"]))
        return out

    def observe(self, obs: Observation) -> IssueVerb | str:
        """Record one observation of GitHub's (the newest by GitHub's update time wins):
        `observed`, `older` or `duplicate`."""
        reply = self._observe(
            keys=[keys.issue_observed(obs.number)],
            args=[obs.kind, obs.state, obs.title, obs.source_updated_at_ms, obs.observed_at_ms],
        )
        return text(reply[0])

    def observation(self, number: int) -> dict[str, str] | None:
        """The stored observation of the number, or None when the stream never saw it."""
        raw = self.r.hgetall(keys.issue_observed(number))
        return {text(k): text(v) for k, v in raw.items()} or None
