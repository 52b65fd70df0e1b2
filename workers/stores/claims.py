"""The one claim system (issue 13 point 1, issue 10 point 2; docs/tools.md): who owns a
claim subject, in Redis, so that two seats can never both own it, whichever door they use.

A subject is `issue:<n>` (a repository issue) or `item:<id>` (a COLLABORATE backlog item
whose candidate names no issue). Two doors lead to it, and both run Lua scripts that share
one owner record (`lua/subject_common.lua`: the owner, the generation, the lease, the log):

- `coordinate_issue` / `get_issue_coordination` (workers/stores/issues.py, the issue_*.lua
  scripts): an issue number's coordination, with `client_request_id` receipts;
- this module's `Claims` (claim_take.lua, claim_release.lua): the goal steward's COLLABORATE
  lease, taken by the steward's dispatch (workers/stages/steward_run.py) and by collaborators
  through `/v1/seats/{seat}/claims/{item}` (workers/ingress/backlog.py). A COLLABORATE item
  whose candidate names an issue (`WorkCandidate.issueNumber` -> `Claim.issueNumber`) claims
  the subject `issue:<n>`, so its owner and generation are the issue's in
  get_issue_coordination, and a seat that claimed the issue there holds the item off (`held`).

The decisions, written down:

- One hash per subject, on the keys each door used before (`keys.issue(n)` for an issue,
  `keys.claim(id)` for an item; their log streams `keys.issue_log(n)` / `keys.claim_history
  (id)`), so stored state needs no migration. A hash written before the doors were one names
  an item's owner `holder`: it is read as the owner and renamed by the next write.
- Generation: 1 before any owner, +1 on every change of owner (claim, take, takeover,
  release, close), never on a renewal, a refresh, a join or a report. Both doors' results
  carry it, and both fence on it: coordinate_issue requires `expected_generation` on every
  action but claim; the claims routes take an optional `expectedGeneration` (optional, so
  that callers written before it keep working), and a stale one writes nothing (`stale`).
- Receipts: every mutation that writes is logged with its receipt (outcome, action, subject,
  seat, owner, previous owner, generation, untilMs). `coordinate_issue` also keeps a receipt
  per (seat, client_request_id) for replays; the claims door has no request id (its routes
  take none) and needs none: a take by the owner is `renewed`, a repeated release `none`.
- The lease: only the COLLABORATE door sets `untilMs` (now + `claim_lease_ms`). An issue
  claimed with coordinate_issue is a standing claim: no `untilMs`, it never lapses, the
  claims door answers `held` to anyone else, and a renewal by its own owner keeps it standing
  (a renewal never shortens a claim). A lapsed lease is not cleared by time: its owner still
  owns it (may renew, refresh, release); a collaborator of the item may take it over through
  the claims door (`takeover`, logged with the previous owner); coordinate_issue `claim` does
  not (it answers `owned`: it knows no collaborators).
- A take needs the item open on its owner's backlog (`keys.backlog_open(owner)`, checked
  inside the script), so a claim never outlives a close that raced it.
- Closing an item releases the lease its own claim took (the subject's `item` is that item);
  a standing issue claim, or a lease another item took on the same issue, stays.
- Memory: an item subject's keys expire `RETENTION_MS` (30 days) after the lease ends (a
  relative PEXPIRE, so a test clock works) or after a release, and keep `ownerId` after a
  release, so the item is still found by id alone (`owner`). An issue subject never expires
  (its participants and reports live there too). Logs keep at most `HISTORY_CAP` entries.

    take     taken | renewed | takeover (written, logged)   held | stale | not_open (nothing)
    release  released (written, logged)                     not_holder | stale | none (nothing)
    close    released (the item's own lease, logged)        none (nothing)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import cast

import redis

from contracts.backlog import ClaimEvent, ClaimEventKind, ClaimResult, ClaimState
from contracts.journal import ClaimReleaseVerb, ClaimTakeVerb
from contracts.steward import claim_subject
from workers.stores import keys
from workers.stores.scripts import script, text

RETENTION_MS = 30 * 86_400_000  # how long an item claim and its history outlive the lease
HISTORY_CAP = 256  # log entries kept per item subject (the oldest are trimmed)
ISSUE_LOG_CAP = 512  # log entries kept per issue subject (workers/stores/issues.py)
# The issue door's outcomes that change the owner, as the claim history names them.
OWNER_EVENTS: dict[str, ClaimEventKind] = {
    "taken": "taken",
    "renewed": "renewed",
    "takeover": "takeover",
    "released": "released",
    "claimed": "taken",
}


@dataclass(frozen=True)
class Subject:
    """One claim subject and its keys: the owner hash, its participants, its log."""

    name: str
    hash: str
    members: str
    log: str
    issue_number: int | None
    retention_ms: int  # 0: the keys never expire
    cap: int


def subject_of(item_id: str, issue_number: int | None = None) -> Subject:
    """The subject an item's claim is on: the issue it names, else the item itself."""
    name = claim_subject(item_id, issue_number)
    if issue_number is not None:
        return Subject(
            name,
            keys.issue(issue_number),
            keys.issue_members(issue_number),
            keys.issue_log(issue_number),
            issue_number,
            0,
            ISSUE_LOG_CAP,
        )
    return Subject(
        name,
        keys.claim(item_id),
        keys.claim_members(item_id),
        keys.claim_history(item_id),
        None,
        RETENTION_MS,
        HISTORY_CAP,
    )


def _int(value: str) -> int | None:
    return int(value) if value else None


class Claims:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._take = script(client, "claim_take")
        self._release = script(client, "claim_release")

    def take(
        self,
        item_id: str,
        seat_id: str,
        *,
        owner_id: str,
        now_ms: int,
        lease_ms: int,
        issue_number: int | None = None,
        expected_generation: int | None = None,
    ) -> ClaimResult:
        """Seat `seat_id` takes, renews or takes over the claim of `item_id` (an item open on
        `owner_id`'s backlog; on the issue `issue_number` when it names one) until `now_ms +
        lease_ms`; `held` (another seat owns the subject, named in the result), `stale` (the
        subject is not at `expected_generation`, when given) and `not_open` write nothing."""
        s = subject_of(item_id, issue_number)
        reply = self._take(
            keys=[s.hash, s.members, s.log, keys.backlog_open(owner_id)],
            args=[
                item_id,
                seat_id,
                owner_id,
                now_ms,
                lease_ms,
                s.retention_ms,
                s.cap,
                s.name,
                "" if issue_number is None else issue_number,
                "take",
                "" if expected_generation is None else expected_generation,
            ],
        )
        verb = cast(ClaimTakeVerb, text(reply[0]))
        if verb == "not_open":
            return ClaimResult(
                status=verb, item_id=item_id, subject=s.name, issue_number=issue_number
            )
        holder, until, since, previous, generation = (text(v) for v in reply[1:6])
        return ClaimResult(
            status=verb,
            item_id=item_id,
            holder_id=holder,
            owner_id=owner_id,
            since_ms=_int(since),
            until_ms=_int(until),
            previous_holder_id=previous or None,
            generation=_int(generation),
            subject=s.name,
            issue_number=issue_number,
        )

    def release(
        self,
        item_id: str,
        seat_id: str,
        *,
        now_ms: int,
        issue_number: int | None = None,
        expected_generation: int | None = None,
    ) -> ClaimReleaseVerb:
        """The owner `seat_id` lets the claim go: `released`; `not_holder` when another seat
        owns the subject, `stale` when it is not at `expected_generation` (when given), `none`
        when nobody owns it (all three write nothing)."""
        return self._run_release(
            item_id, seat_id, seat_id, now_ms, issue_number, expected_generation
        )

    def close(
        self, item_id: str, *, by: str, now_ms: int, issue_number: int | None = None
    ) -> ClaimReleaseVerb:
        """The item was closed by `by`: whoever holds the lease its claim took is released
        (`released`, the log naming `by` and the previous owner), or `none`."""
        return self._run_release(item_id, by, "", now_ms, issue_number)

    def _run_release(
        self,
        item_id: str,
        by: str,
        holder: str,
        now_ms: int,
        issue_number: int | None,
        expected_generation: int | None = None,
    ) -> ClaimReleaseVerb:
        s = subject_of(item_id, issue_number)
        reply = self._release(
            keys=[s.hash, s.log],
            args=[
                by,
                holder,
                now_ms,
                s.retention_ms,
                s.cap,
                item_id,
                s.name,
                "" if issue_number is None else issue_number,
                "release" if holder else "close",
                "" if expected_generation is None else expected_generation,
            ],
        )
        return cast(ClaimReleaseVerb, text(reply[0]))

    def get(
        self, item_id: str, *, issue_number: int | None = None, owner_id: str | None = None
    ) -> ClaimState | None:
        """Who owns the claim's subject now, as stored (see `ClaimState.lapsed`); None when
        nobody. `owner_id` (the item's backlog seat) names the owner when the subject's owner
        came through the issue door, which records none."""
        s = subject_of(item_id, issue_number)
        owner, legacy, backlog_owner, since, until, generation = self.r.hmget(
            s.hash, ["owner", "holder", "ownerId", "sinceMs", "untilMs", "generation"]
        )
        holder = owner or legacy
        seat = backlog_owner if backlog_owner is not None else owner_id
        if not holder or seat is None or since is None:
            return None
        if until is None and issue_number is None:  # an item's claim is always a lease
            return None
        return ClaimState(
            item_id=item_id,
            holder_id=text(holder),
            owner_id=text(seat),
            since_ms=int(since),
            until_ms=None if until is None else int(until),
            generation=1 if generation is None else int(generation),
            subject=s.name,
            issue_number=issue_number,
        )

    def generation(self, item_id: str, *, issue_number: int | None = None) -> int:
        """The generation of the claim's subject now (1 before anyone owned it)."""
        value = self.r.hget(subject_of(item_id, issue_number).hash, "generation")
        return 1 if value is None else int(text(value))

    def owner(self, item_id: str) -> str | None:
        """The seat whose backlog holds `item_id`, as its claim recorded it (held or not; an
        item whose claim is on an issue records none here)."""
        value = self.r.hget(keys.claim(item_id), "ownerId")
        return None if value is None else text(value)

    def history(self, item_id: str, *, issue_number: int | None = None) -> list[ClaimEvent]:
        """Every change of owner still logged for the claim's subject, oldest first (for an
        issue: through either door; joins, follows and reports are not claim events)."""
        events: list[ClaimEvent] = []
        s = subject_of(item_id, issue_number)
        for _id, fields in self.r.xrange(s.log) or []:
            if fields is None:  # only a deleted entry read through a group has no fields
                continue
            f = {text(k): text(v) for k, v in fields.items()}
            kind = OWNER_EVENTS.get(f.get("event", ""))
            if kind is None:
                continue
            previous = f.get("previous") or None
            if previous is None and kind == "released" and f.get("receipt"):
                previous = json.loads(f["receipt"]).get("previousOwner")
            events.append(
                ClaimEvent(
                    event=kind,
                    seat_id=f["seatId"],
                    previous_holder_id=previous,
                    at_ms=int(f["atMs"]),
                    until_ms=_int(f.get("untilMs", "")),
                    generation=_int(f.get("generation", "")),
                )
            )
        return events
