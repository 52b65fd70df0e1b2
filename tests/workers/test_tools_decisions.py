"""The project's directions on a real Redis (issue 13): `open_decision`, `vote`,
`get_decision`, `list_decisions`, `decide_direction` over `POST /v1/seats/{seat}/tools/{name}`,
and the people's side over `/v1/decisions` (operator token). Open notifies every other seat
atomically; votes and changed votes before the deadline only (a vote exactly at it is
refused); a person outweighs an agent; ties and approvals by the policy's resolver only; the
owner ends voting early; replays and conflicts; bad inputs named; paging; 10 concurrent
votes all counted once; and the org file's `decisions:` section checked at load."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from tests.auth import bearer, seat_token
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.errors import ConfigError
from workers.ingress.app import create_ingress
from workers.org import parse_org
from workers.settings import Settings
from workers.stores import keys

pytestmark = pytest.mark.redis

NOW = 1_800_000_000_000
TOKEN = "test-token"
OPERATOR = bearer(TOKEN)
SEATS = ["scout", "sage", *(f"s{i}" for i in range(10))]
POLICY = (
    "decisions: {ownerId: ava, minCountdownSeconds: 60, maxCountdownSeconds: 86400, "
    "resolverId: sage}"
)


def org_text(policy: str = POLICY) -> str:
    members = "\n".join(f"  - {{id: {m}}}" for m in ["ava", "bo", *SEATS])
    seats = "\n".join(f"  - {{memberId: {s}, operatorId: ava}}" for s in SEATS)
    return (
        "project: {name: Widgets, repository: acme/widgets}\n"
        f"members:\n{members}\nseats:\n{seats}\n{policy}\n"
    )


@dataclass
class Clock:
    now: int = NOW

    def __call__(self) -> int:
        return self.now


@dataclass
class Api:
    http: TestClient
    c: Container
    clock: Clock
    tokens: dict[str, str] = field(default_factory=dict)

    def auth(self, seat: str) -> dict[str, str]:
        """`seat`'s own token (issued at its first use)."""
        if seat not in self.tokens:
            self.tokens[seat] = seat_token(self.c.redis, seat)
        return bearer(self.tokens[seat])

    def tool(self, seat: str, name: str, **args: Any) -> tuple[int, dict[str, Any]]:
        resp = self.http.post(f"/v1/seats/{seat}/tools/{name}", headers=self.auth(seat), json=args)
        return resp.status_code, resp.json()

    def ok(self, seat: str, name: str, **args: Any) -> dict[str, Any]:
        status, body = self.tool(seat, name, **args)
        assert status == 200, body
        return body

    def open(self, seat: str = "scout", rid: str = "d1", **over: Any) -> str:
        args = {
            "client_request_id": rid,
            "title": "Adopt the new billing API",
            "body": "We move billing to v2 before the release.",
            "countdown_seconds": 600,
            **over,
        }
        return str(self.ok(seat, "open_decision", **args)["directionId"])

    def vote(
        self, seat: str, did: str, option: int, rid: str = "v1", rev: int = 0, **over: Any
    ) -> tuple[int, dict[str, Any]]:
        args = {
            "direction_id": did,
            "client_request_id": rid,
            "expected_revision": rev,
            "option": option,
            **over,
        }
        return self.tool(seat, "vote", **args)

    def human(self, did: str, member: str, option: int, rid: str = "h1", rev: int = 0) -> Any:
        body = {
            "memberId": member,
            "option": option,
            "expectedRevision": rev,
            "clientRequestId": rid,
        }
        return self.http.post(f"/v1/decisions/{did}/votes", headers=OPERATOR, json=body)

    def get(self, seat: str, did: str) -> dict[str, Any]:
        return self.ok(seat, "get_decision", direction_id=did)


def build(redis_client: redis.Redis, redis_url: str, tmp_path: Path, policy: str) -> Iterator[Api]:
    org = tmp_path / "org.yaml"
    org.write_text(org_text(policy))
    settings = Settings(
        redis_url=redis_url, api_token=TOKEN, org_file=org, outbox_path=tmp_path / "o"
    )
    c = bootstrap.build_container(settings, client=redis_client)
    c.app = create_app(settings, register=False)
    clock = Clock()
    with TestClient(create_ingress(c, c.app, clock_ms=clock)) as http:
        yield Api(http, c, clock)


@pytest.fixture
def api(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[Api]:
    yield from build(redis_client, redis_url, tmp_path, POLICY)


@pytest.fixture
def approving(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[Api]:
    policy = "decisions: {ownerId: ava, minCountdownSeconds: 60, requiresApproval: true}"
    yield from build(redis_client, redis_url, tmp_path, policy)


# ---------------------------------------------------------------------- opening


def test_open_freezes_the_policy_and_notifies_every_other_seat(api: Api) -> None:
    receipt = api.ok(
        "scout",
        "open_decision",
        client_request_id="d1",
        title="Adopt the new billing API",
        body="We move billing to v2.",
        countdown_seconds=600,
        affected_issues=[12, 12, 7],
    )
    did = receipt["directionId"]
    assert len(did) == 64 and all(ch in "0123456789abcdef" for ch in did)
    assert receipt["revision"] == 1 and receipt["replayed"] is False
    assert receipt["deadlineMs"] == NOW + 600_000
    assert [o["label"] for o in receipt["options"]] == ["For", "Against"]
    view = api.get("sage", did)["direction"]
    assert view["policy"]["ownerId"] == "ava" and view["policy"]["resolverId"] == "sage"
    assert view["policy"]["repository"] == "acme/widgets"
    assert view["policy"]["weights"] == {"agent": 1, "human": 2}
    assert view["affectedIssues"] == [12, 7] and view["state"] == "open"
    assert view["tally"] is None and view["result"] is None and view["votingOpen"] is True
    # every seat but the opener has it in its inbox, with a notice, in the same step
    for seat in SEATS:
        items = api.ok(seat, "get_updates")["items"]
        mine = [i for i in items if i["deliveryId"] == f"direction:{did}"]
        assert len(mine) == (0 if seat == "scout" else 1), seat
        notices = api.c.redis.hget(keys.seat_state(seat), "notices")
        assert (notices is None) == (seat == "scout")
    item = next(i for i in api.ok("sage", "get_updates")["items"])
    assert did in item["why"] and item["surface"] == "project_direction"
    log = api.http.get(f"/v1/decisions/{did}/log", headers=OPERATOR).json()["log"]
    assert [e["event"] for e in log] == ["opened"] and log[0]["by"] == "scout"


def test_the_policy_is_frozen_when_the_direction_opens(api: Api, tmp_path: Path) -> None:
    did = api.open()
    (tmp_path / "org.yaml").write_text(
        org_text("decisions: {ownerId: bo, minCountdownSeconds: 1, maxCountdownSeconds: 9}")
    )
    api.c.org.current()  # whatever the org file says now ...
    assert api.get("scout", did)["direction"]["policy"]["ownerId"] == "ava"


def test_a_countdown_outside_the_range_is_refused_naming_it(api: Api) -> None:
    for seconds in (59, 86_401):
        status, body = api.tool(
            "scout",
            "open_decision",
            client_request_id=f"d{seconds}",
            title="t",
            body="b",
            countdown_seconds=seconds,
        )
        assert (status, body["error"], body["field"]) == (
            422,
            "countdown_out_of_range",
            "countdown_seconds",
        )
        assert "60 to 86400" in body["message"]
    assert api.c.redis.zcard(keys.DIRECTIONS) == 0


def test_an_options_field_is_refused_as_the_schema_says(api: Api) -> None:
    status, body = api.tool(
        "scout",
        "open_decision",
        client_request_id="d1",
        title="t",
        body="b",
        countdown_seconds=600,
        options=["A", "B", "C"],
    )
    assert (status, body["error"], body["field"]) == (422, "invalid_arguments", "options")
    assert api.c.redis.zcard(keys.DIRECTIONS) == 0


def test_open_replays_and_conflicts(api: Api) -> None:
    first = api.ok(
        "scout",
        "open_decision",
        client_request_id="d1",
        title="t",
        body="b",
        countdown_seconds=600,
    )
    api.clock.now += 5_000
    again = api.ok(
        "scout",
        "open_decision",
        client_request_id="d1",
        title="t",
        body="b",
        countdown_seconds=600,
    )
    assert again["replayed"] is True and again["directionId"] == first["directionId"]
    assert again["deadlineMs"] == first["deadlineMs"]
    status, body = api.tool(
        "scout",
        "open_decision",
        client_request_id="d1",
        title="t2",
        body="b",
        countdown_seconds=600,
    )
    assert (status, body["error"]) == (409, "request_conflict")
    # one direction, one notice per other seat
    assert api.c.redis.zcard(keys.DIRECTIONS) == 1
    assert len(api.ok("sage", "get_updates")["items"]) == 1
    # the same request id of another seat is another direction
    other = api.ok(
        "sage",
        "open_decision",
        client_request_id="d1",
        title="t",
        body="b",
        countdown_seconds=600,
    )
    assert other["directionId"] != first["directionId"]


def test_no_decisions_section_refuses_to_open(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    for api in build(redis_client, redis_url, tmp_path, ""):
        status, body = api.tool(
            "scout",
            "open_decision",
            client_request_id="d",
            title="t",
            body="b",
            countdown_seconds=600,
        )
        assert (status, body["error"]) == (409, "decisions_not_configured")
        assert "decisions:" in body["message"]


# ---------------------------------------------------------------------- voting


def test_vote_change_and_the_deadline(api: Api) -> None:
    did = api.open()
    status, first = api.vote("sage", did, 0, reason="cheaper")
    assert status == 200 and first["vote"]["revision"] == 1 and first["vote"]["weight"] == 1
    mine = api.get("sage", did)
    assert mine["yourVote"]["option"] == 0 and mine["yourVoteRevision"] == 1
    assert api.get("scout", did)["yourVote"] is None
    # a change needs the current revision of one's own vote
    status, stale = api.vote("sage", did, 1, rid="v2", rev=0)
    assert (status, stale["error"], stale["currentRevision"]) == (409, "revision_conflict", 1)
    status, changed = api.vote("sage", did, 1, rid="v3", rev=1)
    assert status == 200 and changed["vote"]["revision"] == 2
    # exactly at the deadline: refused, and the result is recorded then
    api.clock.now = NOW + 600_000
    status, late = api.vote("scout", did, 0, rid="v4")
    assert (status, late["error"]) == (409, "voting_closed")
    assert late["deadlineMs"] == NOW + 600_000
    view = api.get("scout", did)["direction"]
    assert view["state"] == "decided" and view["result"]["winner"] == 1
    assert view["tally"][1] == {
        "option": 1,
        "label": "Against",
        "weight": 1,
        "agents": 1,
        "humans": 0,
    }
    assert view["votingOpen"] is False
    stored = api.c.redis.hget(keys.direction(did), "result")
    assert stored is not None  # durable


def test_a_vote_one_ms_before_the_deadline_counts(api: Api) -> None:
    did = api.open()
    api.clock.now = NOW + 600_000 - 1
    assert api.vote("sage", did, 0)[0] == 200
    api.clock.now += 1
    assert api.get("sage", did)["direction"]["result"]["winner"] == 0


def test_vote_replays_and_conflicts(api: Api) -> None:
    did = api.open()
    _, first = api.vote("sage", did, 0)
    api.vote("sage", did, 1, rid="v2", rev=1)
    status, replay = api.vote("sage", did, 0)
    assert status == 200 and replay["replayed"] is True
    assert replay["vote"] == first["vote"]  # the original operation, not the current vote
    status, reused = api.vote("sage", did, 1)
    assert (status, reused["error"]) == (409, "request_conflict")
    assert api.get("sage", did)["yourVote"]["option"] == 1
    # after the deadline a replay still answers its receipt
    api.clock.now = NOW + 10**9
    status, late = api.vote("sage", did, 0)
    assert status == 200 and late["replayed"] is True


def test_bad_inputs_are_named(api: Api) -> None:
    missing = "0" * 64
    status, body = api.vote("sage", missing, 0)
    assert (status, body["error"], body["field"]) == (404, "unknown_direction", "direction_id")
    status, body = api.tool("sage", "get_decision", direction_id=missing)
    assert (status, body["error"]) == (404, "unknown_direction")
    status, body = api.tool("sage", "get_decision", direction_id="XYZ")
    assert (status, body["field"]) == (422, "direction_id")
    did = api.open()
    status, body = api.vote("sage", did, 2)
    assert (status, body["field"]) == (422, "option")
    status, body = api.tool("sage", "list_decisions", cursor="not-a-cursor")
    assert (status, body["error"]) == (422, "invalid_cursor")
    resp = api.http.get(f"/v1/decisions/{missing}", headers=OPERATOR)
    assert resp.status_code == 404 and resp.json()["error"] == "unknown_direction"


def test_a_human_vote_outweighs_one_agent(api: Api) -> None:
    did = api.open()
    assert api.vote("sage", did, 0)[0] == 200
    resp = api.human(did, "bo", 1)
    assert resp.status_code == 200, resp.json()
    assert resp.json()["vote"]["weight"] == 2 and resp.json()["vote"]["kind"] == "human"
    api.clock.now = NOW + 600_000
    view = api.http.get(f"/v1/decisions/{did}", headers=OPERATOR, params={"memberId": "bo"})
    body = view.json()
    assert body["direction"]["result"]["winner"] == 1 and body["yourVote"]["option"] == 1
    assert [r["weight"] for r in body["direction"]["tally"]] == [1, 2]


def test_a_seat_cannot_vote_as_a_person_and_strangers_are_refused(api: Api) -> None:
    did = api.open()
    resp = api.human(did, "sage", 0)
    assert resp.status_code == 422 and resp.json()["error"] == "seat_not_person"
    resp = api.human(did, "nobody", 0)
    assert resp.status_code == 422 and resp.json()["error"] == "unknown_member"
    # the people's routes take the operator token, not a seat's
    resp = api.http.post(
        f"/v1/decisions/{did}/votes",
        headers=api.auth("sage"),
        json={"memberId": "bo", "option": 0, "expectedRevision": 0, "clientRequestId": "x"},
    )
    assert resp.status_code == 403
    assert api.get("sage", did)["voteCount"] == 0


def test_ten_concurrent_votes_are_each_counted_once(api: Api) -> None:
    did = api.open()
    voters = [f"s{i}" for i in range(10)]
    for seat in voters:
        api.auth(seat)  # issue the tokens first

    def cast(i: int) -> int:
        return api.vote(voters[i], did, i % 2, rid=f"c{i}")[0]

    with ThreadPoolExecutor(10) as pool:
        assert list(pool.map(cast, range(10))) == [200] * 10
    with ThreadPoolExecutor(10) as pool:  # and their retries write nothing
        assert list(pool.map(cast, range(10))) == [200] * 10
    api.clock.now = NOW + 600_000
    direction = api.get("scout", did)["direction"]
    assert [r["weight"] for r in direction["tally"]] == [5, 5]
    assert direction["state"] == "tied"
    log = api.c.decisions.log(did)
    assert [e["event"] for e in log].count("voted") == 10


# ---------------------------------------------------------------------- results


def test_a_tie_is_resolved_by_the_policys_resolver_only(api: Api) -> None:
    did = api.open()
    api.vote("s0", did, 0)
    api.vote("s1", did, 1)
    status, early = api.tool(
        "sage",
        "decide_direction",
        direction_id=did,
        client_request_id="r0",
        expected_revision=3,
        action="resolve_tie",
        option=0,
        reason="early",
    )
    assert (status, early["error"]) == (409, "voting_open")
    api.clock.now = NOW + 600_000
    got = api.get("scout", did)["direction"]
    assert got["state"] == "tied" and got["result"]["winner"] is None
    rev = got["revision"]
    args = {
        "direction_id": did,
        "client_request_id": "r1",
        "expected_revision": rev,
        "action": "resolve_tie",
        "option": 1,
        "reason": "the migration risk",
    }
    status, body = api.tool("scout", "decide_direction", **args)
    assert (status, body["error"], body["resolverId"]) == (403, "not_permitted", "sage")
    assert "sage" in body["message"]
    status, body = api.tool("sage", "decide_direction", **{**args, "option": None})
    assert (status, body["error"], body["field"]) == (422, "option_required", "option")
    status, body = api.tool("sage", "decide_direction", **{**args, "expected_revision": rev + 5})
    assert (status, body["error"], body["currentRevision"]) == (409, "revision_conflict", rev)
    status, body = api.tool(
        "sage", "decide_direction", **{**args, "action": "approve", "option": None}
    )
    assert (status, body["error"]) == (409, "wrong_state")
    done = api.ok("sage", "decide_direction", **args)
    assert done["result"]["state"] == "decided" and done["result"]["winner"] == 1
    assert done["result"]["resolution"]["reason"] == "the migration risk"
    replay = api.ok("sage", "decide_direction", **args)
    assert replay["replayed"] is True and replay["result"] == done["result"]
    status, body = api.tool("sage", "decide_direction", **{**args, "reason": "other"})
    assert (status, body["error"]) == (409, "request_conflict")
    view = api.get("scout", did)["direction"]
    assert view["state"] == "decided" and view["revision"] == rev + 1
    events = [e["event"] for e in api.c.decisions.log(did)]
    assert events == ["opened", "voted", "voted", "closed", "resolve_tie"]


def test_the_approval_flow(approving: Api) -> None:
    api = approving
    did = api.open()
    api.vote("sage", did, 0)
    api.clock.now = NOW + 600_000
    got = api.get("scout", did)["direction"]
    assert got["state"] == "awaiting_approval" and got["result"]["winner"] == 0
    # the resolver is the owner, a person: over HTTP; a seat is refused naming ava
    status, body = api.tool(
        "sage",
        "decide_direction",
        direction_id=did,
        client_request_id="a1",
        expected_revision=got["revision"],
        action="approve",
        reason="ok",
    )
    assert (status, body["error"], body["resolverId"]) == (403, "not_permitted", "ava")
    decide = {
        "by": "ava",
        "action": "approve",
        "reason": "fits the roadmap",
        "expectedRevision": got["revision"],
        "clientRequestId": "a1",
    }
    resp = api.http.post(f"/v1/decisions/{did}/decide", headers=OPERATOR, json=decide)
    assert resp.status_code == 200, resp.json()
    assert resp.json()["result"]["state"] == "decided"
    assert resp.json()["result"]["approval"]["by"] == "ava"
    resp = api.http.post(
        f"/v1/decisions/{did}/decide",
        headers=OPERATOR,
        json={
            **decide,
            "clientRequestId": "a2",
            "action": "reject",
            "expectedRevision": got["revision"] + 1,
        },
    )
    assert resp.status_code == 409 and resp.json()["error"] == "wrong_state"


def test_a_resolved_tie_still_needs_approval_and_can_be_rejected(approving: Api) -> None:
    api = approving
    did = api.open()
    api.clock.now = NOW + 600_000  # nobody voted: 0 to 0 is a tie
    got = api.get("scout", did)["direction"]
    assert got["state"] == "tied"
    body = {
        "by": "ava",
        "action": "resolve_tie",
        "option": 0,
        "reason": "go",
        "expectedRevision": got["revision"],
        "clientRequestId": "t1",
    }
    resp = api.http.post(f"/v1/decisions/{did}/decide", headers=OPERATOR, json=body)
    assert resp.json()["result"]["state"] == "awaiting_approval"
    body = {
        "by": "ava",
        "action": "reject",
        "reason": "not now",
        "expectedRevision": got["revision"] + 1,
        "clientRequestId": "t2",
    }
    resp = api.http.post(f"/v1/decisions/{did}/decide", headers=OPERATOR, json=body)
    assert resp.status_code == 200 and resp.json()["result"]["state"] == "rejected"


def test_the_owner_ends_voting_early(api: Api) -> None:
    did = api.open()
    api.vote("sage", did, 1)
    api.clock.now = NOW + 60_000
    end = {"by": "bo", "clientRequestId": "e1"}
    resp = api.http.post(f"/v1/decisions/{did}/end", headers=OPERATOR, json=end)
    assert resp.status_code == 403 and "ava" in resp.json()["message"]
    resp = api.http.post(
        f"/v1/decisions/{did}/end",
        headers=OPERATOR,
        json={"by": "ava", "clientRequestId": "e1", "reason": "clear"},
    )
    assert resp.status_code == 200 and resp.json()["deadlineMs"] == NOW + 60_000
    view = api.get("sage", did)["direction"]
    assert view["deadlineMs"] == NOW + 60_000 and view["endedEarly"] is True
    assert view["state"] == "decided" and view["result"]["winner"] == 1
    assert api.vote("scout", did, 0)[1]["error"] == "voting_closed"
    replay = api.http.post(
        f"/v1/decisions/{did}/end",
        headers=OPERATOR,
        json={"by": "ava", "clientRequestId": "e1", "reason": "clear"},
    )
    assert replay.status_code == 200 and replay.json()["replayed"] is True
    again = api.http.post(
        f"/v1/decisions/{did}/end", headers=OPERATOR, json={"by": "ava", "clientRequestId": "e2"}
    )
    assert again.status_code == 409 and again.json()["error"] == "voting_closed"


# ---------------------------------------------------------------------- listing


def test_list_pages_twenty_in_id_order(api: Api) -> None:
    ids = sorted(api.open(rid=f"d{i}") for i in range(23))
    first = api.ok("sage", "list_decisions")
    assert [d["id"] for d in first["directions"]] == ids[:20] and first["next"]
    second = api.ok("sage", "list_decisions", cursor=first["next"])
    assert [d["id"] for d in second["directions"]] == ids[20:] and second["next"] is None
    # a cursor is the caller's own
    status, body = api.tool("scout", "list_decisions", cursor=first["next"])
    assert (status, body["error"]) == (422, "invalid_cursor")
    people = api.http.get("/v1/decisions", headers=OPERATOR).json()
    assert len(people["directions"]) == 20
    assert people["directions"][0]["state"] == "open"


# ---------------------------------------------------------------------- the org file


def test_the_org_file_policy_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "org.yaml"
    with pytest.raises(ConfigError, match=r"decisions\.ownerId: 'zed'"):
        parse_org(org_text("decisions: {ownerId: zed}"), path)
    with pytest.raises(ConfigError, match=r"decisions\.resolverId"):
        parse_org(org_text("decisions: {ownerId: ava, resolverId: zed}"), path)
    with pytest.raises(ConfigError, match="minCountdownSeconds"):
        parse_org(
            org_text("decisions: {ownerId: ava, minCountdownSeconds: 90, maxCountdownSeconds: 60}"),
            path,
        )
    org = parse_org(org_text(), path)
    assert org.decisions is not None and org.decisions.resolver == "sage"
