"""The one claim system (issue 13 point 1) against a real Redis: a COLLABORATE item whose
candidate names a repository issue claims that issue, through `/v1/seats/{seat}/claims/{item}`
and the steward's dispatch alike, so its owner and generation are the issue's in
`get_issue_coordination`; a seat that claimed the issue with `coordinate_issue` holds the item
off, and the other way round; a lapsed lease is taken over by a collaborator only; a close
releases only the item's own lease; two seats racing through both doors leave one owner."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from contracts.backlog import BacklogEntry
from contracts.steward import Claim, Dispatch
from contracts.tools import CoordinateIssue
from tests.auth import as_seats
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.ingress.app import create_ingress
from workers.settings import Settings
from workers.stages.steward_run import StewardRun
from workers.stores import keys
from workers.stores.backlog import Backlog
from workers.stores.claims import Claims
from workers.stores.issues import Issues

pytestmark = pytest.mark.redis

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LEASE = 60_000
T0 = 1_000_000
ISSUE = 7
ITEM = "stw_issue7"  # on scout's backlog: COLLABORATE on issue #7, scout holder, tally helps
OTHER = "stw_issue7_again"  # a second item of scout's on the same issue
SEATS = ("scout", "tally", "jo")
ORG = (
    "project: {name: Atlas, repository: acme/atlas}\n"
    "members:\n"
    + "".join(f"  - {{id: {s}, displayName: Seat {s}}}\n" for s in SEATS)
    + "seats:\n"
    + "".join(f"  - {{memberId: {s}}}\n" for s in SEATS)
)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def _entry(item_id: str, issue: int | None = ISSUE) -> BacklogEntry:
    claim: dict[str, Any] = {"holderId": "scout", "contributors": ["tally"]}
    if issue is not None:
        claim["issueNumber"] = issue
    return BacklogEntry.model_validate(
        {
            "id": item_id,
            "seatId": "scout",
            "objectiveKey": "activation",
            "title": f"item {item_id}",
            "route": "COLLABORATE",
            "addedAtMs": 1_000,
            "claim": claim,
        }
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def built(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, clock: Clock
) -> Iterator[tuple[TestClient, Container]]:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url,
        api_token=TOKEN,
        org_file=org,
        outbox_path=tmp_path / "o.jsonl",
        claim_lease_ms=LEASE,
    )
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    with TestClient(create_ingress(container, app, clock_ms=clock)) as c:
        as_seats(c)
        yield c, container


@pytest.fixture
def client(built: tuple[TestClient, Container]) -> TestClient:
    return built[0]


@pytest.fixture
def backlog(redis_client: redis.Redis) -> Backlog:
    store = Backlog(redis_client)
    store.add(_entry(ITEM))
    store.add(_entry(OTHER))
    return store


def _claim(client: TestClient, seat: str, item: str = ITEM) -> tuple[int, dict[str, Any]]:
    resp = client.post(f"/v1/seats/{seat}/claims/{item}", headers=AUTH)
    return resp.status_code, resp.json()


def _tool(client: TestClient, seat: str, name: str, **args: object) -> tuple[int, dict[str, Any]]:
    resp = client.post(f"/v1/seats/{seat}/tools/{name}", headers=AUTH, json=args)
    return resp.status_code, resp.json()


def _look(client: TestClient, seat: str = "jo") -> dict[str, Any]:
    status, body = _tool(client, seat, "get_issue_coordination", issue_number=ISSUE)
    assert status == 200, body
    return body


def _act(client: TestClient, seat: str, action: str, rid: str, **args: object) -> Any:
    return _tool(
        client,
        seat,
        "coordinate_issue",
        issue_number=ISSUE,
        action=action,
        client_request_id=rid,
        **args,
    )


def _snapshot(r: redis.Redis) -> dict[bytes, Any]:
    return {
        k: r.dump(k) for k in sorted(r.scan_iter(match="sw:*")) if not k.startswith(b"sw:token")
    }


def test_an_item_naming_an_issue_claims_the_issue(client: TestClient, backlog: Backlog) -> None:
    """A collaborator's take of the item is the issue's owner at a new generation, with its
    lease, in get_issue_coordination; the item's claim names the subject and generation;
    coordinate_issue `claim` by another seat is refused naming that owner."""
    status, body = _claim(client, "tally")
    assert status == 200 and body["status"] == "taken"
    claim = body["claim"]
    assert (claim["holderId"], claim["ownerId"], claim["untilMs"]) == ("tally", "scout", T0 + LEASE)
    assert (claim["subject"], claim["issueNumber"], claim["generation"]) == ("issue:7", ISSUE, 2)
    seen = _look(client)
    assert seen["owner"]["id"] == "tally" and seen["generation"] == 2
    assert seen["owner"]["lease"] == {"untilMs": T0 + LEASE, "itemId": ITEM}
    status, refused = _act(client, "jo", "claim", "c1")
    assert status == 409 and refused["error"] == "issue_owned"
    got = client.get(f"/v1/seats/tally/claims/{ITEM}", headers=AUTH).json()
    assert got["subject"] == "issue:7" and got["claim"]["holderId"] == "tally"
    assert [e["event"] for e in got["history"]] == ["taken"]
    assert got["history"][0]["generation"] == 2


def test_an_issue_claimed_first_holds_the_item_off(
    client: TestClient, backlog: Backlog, redis_client: redis.Redis, clock: Clock
) -> None:
    """A seat that claimed the issue with coordinate_issue owns it for good: the item's
    take by a collaborator is 409 `claim_held` naming it, with no untilMs (it never lapses),
    even long after, and writes nothing; its owner's own take keeps the claim standing."""
    status, got = _act(client, "jo", "claim", "c1")
    assert status == 200 and got["receipt"]["generation"] == 2
    before = _snapshot(redis_client)
    for later, seat in ((0, "tally"), (10 * LEASE, "scout")):
        clock.now = T0 + later
        status, body = _claim(client, seat)
        assert status == 409 and body["error"] == "claim_held", body
        assert body["holderId"] == "jo" and body["untilMs"] is None
    assert _snapshot(redis_client) == before
    seen = _look(client)
    assert seen["owner"]["id"] == "jo" and "lease" not in seen["owner"]
    got = client.get(f"/v1/seats/scout/claims/{ITEM}", headers=AUTH).json()
    assert got["claim"]["holderId"] == "jo" and got["claim"]["untilMs"] is None
    assert got["lapsed"] is False
    kept = Claims(redis_client).take(
        ITEM, "jo", owner_id="scout", now_ms=T0, lease_ms=LEASE, issue_number=ISSUE
    )
    assert kept.status == "renewed" and kept.until_ms is None and kept.generation == 2
    assert "lease" not in _look(client)["owner"]


def test_a_lapsed_lease_is_taken_over_by_a_collaborator_only(
    client: TestClient, backlog: Backlog, clock: Clock
) -> None:
    """Once the steward seat's lease lapses, coordinate_issue `claim` is still refused (it
    knows no collaborators); the item's collaborator takes it over, recorded with the
    previous owner, at a new generation the issue shows."""
    status, body = _claim(client, "scout")
    assert status == 200 and body["claim"]["generation"] == 2
    clock.now = T0 + LEASE
    status, refused = _act(client, "jo", "claim", "c1")
    assert status == 409 and refused["error"] == "issue_owned"
    status, body = _claim(client, "tally")
    assert status == 200 and body["status"] == "takeover"
    assert body["claim"]["previousHolderId"] == "scout" and body["claim"]["generation"] == 3
    seen = _look(client)
    assert seen["owner"]["id"] == "tally" and seen["generation"] == 3
    got = client.get(f"/v1/seats/tally/claims/{ITEM}", headers=AUTH).json()
    assert [(e["event"], e["previousHolderId"]) for e in got["history"]] == [
        ("taken", None),
        ("takeover", "scout"),
    ]


def test_a_lease_released_through_either_door(
    client: TestClient, backlog: Backlog, built: tuple[TestClient, Container]
) -> None:
    """The lease's owner may release it with coordinate_issue (at the current generation) or
    with DELETE; either way the other door sees nobody, and the issue log holds a receipt
    of every change, whichever door made it."""
    _claim(client, "tally")
    status, got = _act(client, "tally", "release", "x1", expected_generation=2)
    assert status == 200 and got["receipt"]["generation"] == 3
    seen = client.get(f"/v1/seats/tally/claims/{ITEM}", headers=AUTH).json()
    assert seen["claim"] is None and seen["history"][-1]["event"] == "released"
    status, body = _claim(client, "tally")
    assert status == 200 and body["status"] == "taken" and body["claim"]["generation"] == 4
    resp = client.delete(f"/v1/seats/tally/claims/{ITEM}", headers=AUTH)
    assert resp.status_code == 200 and resp.json()["status"] == "released"
    assert _look(client)["owner"] is None and _look(client)["generation"] == 5
    log = built[1].issues.log(ISSUE)
    assert [(r["outcome"], r["action"], r["generation"]) for r in log] == [
        ("taken", "take", 2),
        ("released", "release", 3),
        ("taken", "take", 4),
        ("released", "release", 5),
    ]


def test_a_close_releases_only_the_items_own_lease(
    client: TestClient, backlog: Backlog, redis_client: redis.Redis
) -> None:
    """Closing an item releases the lease it took; a standing issue claim, or the lease
    another item took on the same issue, stays (nothing written)."""
    _act(client, "jo", "claim", "c1")
    before = _snapshot(redis_client)
    closed = client.post(f"/v1/seats/scout/backlog/{OTHER}/done", headers=AUTH)
    assert closed.status_code == 200
    assert _look(client)["owner"]["id"] == "jo"
    after = _snapshot(redis_client)
    assert {k: v for k, v in after.items() if b"backlog" not in k} == {
        k: v for k, v in before.items() if b"backlog" not in k
    }
    _act(client, "jo", "release", "x1", expected_generation=2)
    assert _claim(client, "tally")[1]["status"] == "taken"  # ITEM's lease
    client.post(f"/v1/seats/scout/backlog/{OTHER}/done", headers=AUTH)  # again: not its lease
    assert _look(client)["owner"]["id"] == "tally"
    client.post(f"/v1/seats/scout/backlog/{ITEM}/done", headers=AUTH)
    assert _look(client)["owner"] is None


def test_the_steward_dispatch_claims_the_issue(built: tuple[TestClient, Container]) -> None:
    """The steward's COLLABORATE dispatch of a candidate naming an issue makes the steward
    seat the issue's owner (with its lease); its rerun renews; with the issue claimed by
    another seat first, the dispatch's claim is `held` and the issue keeps its owner."""
    _client, container = built
    steward = StewardRun.of(container, create_app(container.settings, register=False))

    def dispatch(did: str) -> Dispatch:
        return Dispatch(
            id=did,
            kind="backlog",
            route="COLLABORATE",
            objective_key="activation",
            seat_id="scout",
            target_id="tally",
            title="Pair on #7",
            reason="test",
            claim=Claim(holder_id="scout", contributors=("tally",), issue_number=ISSUE),
        )

    assert steward._dispatch(dispatch("stw_a"), T0) == "added, claim taken"
    state = container.issues.get(ISSUE)
    assert (state.owner, state.generation, state.until_ms) == ("scout", 2, T0 + LEASE)
    assert steward._dispatch(dispatch("stw_a"), T0 + 1) == "duplicate, claim renewed"
    container.issues.coordinate(
        "scout",
        CoordinateIssue.model_validate(
            {
                "issue_number": ISSUE,
                "action": "release",
                "client_request_id": "x",
                "expected_generation": 2,
            }
        ),
        now_ms=T0 + 2,
    )
    container.issues.coordinate(
        "jo",
        CoordinateIssue.model_validate(
            {"issue_number": ISSUE, "action": "claim", "client_request_id": "c"}
        ),
        now_ms=T0 + 3,
    )
    assert steward._dispatch(dispatch("stw_b"), T0 + 4) == "added, claim held"
    assert container.issues.get(ISSUE).owner == "jo"


def test_seats_racing_through_both_doors_leave_one_owner(
    backlog: Backlog, redis_client: redis.Redis, redis_url: str
) -> None:
    """Given 8 seats claiming issue #7 with coordinate_issue and 8 taking the item naming it,
    all at once, exactly one owns the issue and every other is refused naming that one."""
    seats = [f"seat{i}" for i in range(16)]
    barrier = threading.Barrier(len(seats))
    results: dict[str, tuple[bool, str | None]] = {}
    lock = threading.Lock()

    def run(i: int, seat: str) -> None:
        client = redis.Redis.from_url(redis_url)
        barrier.wait()
        if i % 2:
            got = Claims(client).take(
                ITEM, seat, owner_id="scout", now_ms=T0, lease_ms=LEASE, issue_number=ISSUE
            )
            outcome = (got.holds, got.holder_id)
        else:
            args = CoordinateIssue.model_validate(
                {"issue_number": ISSUE, "action": "claim", "client_request_id": f"c-{seat}"}
            )
            done = Issues(client).coordinate(seat, args, now_ms=T0)
            outcome = (done.verb == "claimed", seat if done.verb == "claimed" else done.owner)
        with lock:
            results[seat] = outcome
        client.close()

    threads = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate(seats)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    winners = [s for s, (won, _) in results.items() if won]
    assert len(winners) == 1, results
    [winner] = winners
    assert all(owner == winner for _, owner in results.values())
    assert Issues(redis_client).get(ISSUE).owner == winner
    assert Issues(redis_client).get(ISSUE).generation == 2


def test_a_claim_stored_before_the_doors_were_one_is_read_and_renamed(
    backlog: Backlog, redis_client: redis.Redis
) -> None:
    """An item claim written with the old `holder` field is its owner: another seat is held
    off, its holder renews, and the write names it `owner`."""
    redis_client.hset(
        keys.claim("stw_old"),
        mapping={"holder": "scout", "ownerId": "scout", "sinceMs": T0, "untilMs": T0 + LEASE},
    )
    backlog.add(_entry("stw_old", issue=None))
    claims = Claims(redis_client)
    state = claims.get("stw_old")
    assert state is not None and state.holder_id == "scout" and state.generation == 1
    held = claims.take("stw_old", "tally", owner_id="scout", now_ms=T0 + 1, lease_ms=LEASE)
    assert held.status == "held" and held.holder_id == "scout"
    renewed = claims.take("stw_old", "scout", owner_id="scout", now_ms=T0 + 2, lease_ms=LEASE)
    assert renewed.status == "renewed" and renewed.since_ms == T0
    stored = redis_client.hgetall(keys.claim("stw_old"))
    assert stored[b"owner"] == b"scout" and b"holder" not in stored


def test_the_claims_routes_fence_on_an_optional_generation(
    client: TestClient, backlog: Backlog, redis_client: redis.Redis
) -> None:
    """`?expectedGeneration=` on POST and DELETE: a stale one is 409 `stale_generation`
    naming the current generation and writes nothing; the current one goes through; a bad
    one is a 4xx naming the field; leaving it out works as before."""
    before = _snapshot(redis_client)
    resp = client.post(f"/v1/seats/tally/claims/{ITEM}?expectedGeneration=5", headers=AUTH)
    assert resp.status_code == 409 and resp.json()["error"] == "stale_generation"
    assert resp.json()["generation"] == 1
    assert _snapshot(redis_client) == before
    resp = client.post(f"/v1/seats/tally/claims/{ITEM}?expectedGeneration=1", headers=AUTH)
    assert resp.status_code == 200 and resp.json()["claim"]["generation"] == 2
    before = _snapshot(redis_client)
    resp = client.delete(f"/v1/seats/tally/claims/{ITEM}?expectedGeneration=1", headers=AUTH)
    assert resp.status_code == 409 and resp.json()["error"] == "stale_generation"
    assert (resp.json()["generation"], resp.json()["holderId"]) == (2, "tally")
    assert _snapshot(redis_client) == before
    bad = client.delete(f"/v1/seats/tally/claims/{ITEM}?expectedGeneration=zero", headers=AUTH)
    assert 400 <= bad.status_code < 500 and "expectedGeneration" in bad.text
    assert _snapshot(redis_client) == before
    resp = client.delete(f"/v1/seats/tally/claims/{ITEM}?expectedGeneration=2", headers=AUTH)
    assert resp.status_code == 200 and resp.json()["status"] == "released"
    assert _look(client)["generation"] == 3
