"""`get_issue_coordination` and `coordinate_issue` over the tool routes on a real Redis (issue
13): claim, refresh, release, join/leave, follow/unfollow, report; 10 seats claiming at once
leave one owner and tell the rest who owns it; stale generations refused with the current
one; replays answered with the original receipt, a conflicting one a 409; a blocked report
becomes one engagement; bad inputs named; GitHub's copy of the number observed or not."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from fastapi.testclient import TestClient

from contracts.tools import CoordinateIssue
from pipeline.issues import observation_of
from tests.auth import as_seats
from workers import bootstrap
from workers.celery_app import create_app
from workers.container import Container
from workers.ingress.app import create_ingress
from workers.queues import Task
from workers.settings import Settings
from workers.stages import report_intake
from workers.stores.issues import Issues

pytestmark = pytest.mark.redis

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SEATS = [f"s{i}" for i in range(10)]
ORG = (
    "project: {name: Atlas, repository: acme/atlas}\n"
    "members:\n"
    + "".join(f"  - {{id: {s}, displayName: Seat {s}}}\n" for s in SEATS)
    + "seats:\n"
    + "".join(f"  - {{memberId: {s}}}\n" for s in SEATS)
)


class Published:
    def __init__(self) -> None:
        self.messages: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(
        self, app: Celery, task: Task, tracking: str, message: dict[str, Any], **_: Any
    ) -> None:
        self.messages.append((task.value, tracking, message))

    def of(self, task: Task) -> list[dict[str, Any]]:
        return [m for t, _, m in self.messages if t == task.value]


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> Published:
    p = Published()
    monkeypatch.setattr(report_intake, "publish", p)
    return p


@pytest.fixture
def built(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, published: Published
) -> Iterator[tuple[TestClient, Container]]:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url, api_token=TOKEN, org_file=org, outbox_path=tmp_path / "o.jsonl"
    )
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)
    with TestClient(create_ingress(container, app)) as c:
        as_seats(c)
        yield c, container


@pytest.fixture
def client(built: tuple[TestClient, Container]) -> TestClient:
    return built[0]


def tool(client: TestClient, seat: str, name: str, **args: object) -> tuple[int, dict[str, Any]]:
    resp = client.post(f"/v1/seats/{seat}/tools/{name}", headers=AUTH, json=args)
    return resp.status_code, resp.json()


def look(client: TestClient, seat: str = "s0", number: int = 7, **args: object) -> dict[str, Any]:
    status, body = tool(client, seat, "get_issue_coordination", issue_number=number, **args)
    assert status == 200, body
    return body


def act(
    client: TestClient, seat: str, action: str, rid: str, **args: object
) -> tuple[int, dict[str, Any]]:
    args.setdefault("issue_number", 7)
    return tool(client, seat, "coordinate_issue", action=action, client_request_id=rid, **args)


def test_an_untouched_issue_is_generation_one_and_nobody(client: TestClient) -> None:
    """Nobody owns it, generation 1, no participants, GitHub's copy not observed."""
    body = look(client)
    assert body["owner"] is None and body["generation"] == 1 and body["workState"] is None
    assert body["participants"] == [] and body["next"] is None
    assert body["githubObservation"] == {"status": "not_observed"}
    assert body["repository"] == "acme/atlas" and body["you"] == {"roles": []}


def test_claim_refresh_report_release(client: TestClient) -> None:
    """A claim makes the caller owner at a new generation; refresh and report keep the
    generation; release clears the owner and the work state at a new generation."""
    status, got = act(client, "s0", "claim", "c1")
    assert status == 200 and got["replayed"] is False
    receipt = got["receipt"]
    assert (receipt["outcome"], receipt["owner"], receipt["generation"]) == ("claimed", "s0", 2)
    assert receipt["clientRequestId"] == "c1" and receipt["changed"] is True
    body = look(client)
    assert body["owner"]["id"] == "s0" and body["generation"] == 2
    assert [(p["id"], p["roles"]) for p in body["participants"]] == [("s0", ["owner"])]
    assert body["participants"][0]["sinceMs"] == body["owner"]["sinceMs"] > 0

    status, got = act(client, "s0", "refresh", "r1", expected_generation=2)
    assert status == 200 and got["receipt"]["outcome"] == "refreshed"
    assert got["receipt"]["generation"] == 2
    status, got = act(client, "s0", "report", "w1", expected_generation=2, work_state="working")
    assert status == 200 and got["receipt"]["workState"] == "working"
    assert got["receipt"]["reportRevision"] == 1 and "engagement" not in got
    body = look(client, seat="s0")
    assert body["workState"]["state"] == "working" and body["workState"]["reportedBy"] == "s0"
    assert body["generation"] == 2 and body["you"] == {"roles": ["owner"]}

    status, got = act(client, "s0", "claim", "c2")  # the owner claiming again
    assert status == 200 and got["receipt"]["outcome"] == "unchanged"
    assert got["receipt"]["generation"] == 2

    status, got = act(client, "s0", "release", "x1", expected_generation=2)
    assert status == 200 and got["receipt"]["outcome"] == "released"
    assert got["receipt"]["generation"] == 3 and got["receipt"]["previousOwner"] == "s0"
    body = look(client)
    assert body["owner"] is None and body["workState"] is None and body["generation"] == 3


def test_only_the_owner_refreshes_or_releases(client: TestClient) -> None:
    """Another seat's refresh or release is a 409 naming the owner and the generation."""
    act(client, "s0", "claim", "c1")
    for action in ("refresh", "release"):
        status, body = act(client, "s1", action, f"{action}1", expected_generation=2)
        assert status == 409 and body["error"] == "not_owner"
        assert (body["owner"], body["generation"]) == ("s0", 2)
    assert look(client)["owner"]["id"] == "s0"


def test_join_leave_follow_unfollow(client: TestClient) -> None:
    """Roles are set and cleared without changing the generation; a repeat is unchanged;
    the owner cannot join; participants page with a cursor."""
    act(client, "s0", "claim", "c1")
    status, got = act(client, "s1", "join", "j1", expected_generation=2)
    assert status == 200 and got["receipt"]["outcome"] == "joined"
    assert got["receipt"]["owner"] == "s0" and got["receipt"]["generation"] == 2
    assert act(client, "s1", "join", "j2", expected_generation=2)[1]["receipt"]["outcome"] == (
        "unchanged"
    )
    assert act(client, "s1", "follow", "f1", expected_generation=2)[0] == 200
    assert act(client, "s0", "follow", "f1", expected_generation=2)[0] == 200
    status, body = act(client, "s0", "join", "j1", expected_generation=2)
    assert status == 409 and body["error"] == "is_owner" and body["field"] == "action"

    page = look(client)
    assert page["generation"] == 2
    roles = {p["id"]: p["roles"] for p in page["participants"]}
    assert roles == {"s0": ["owner", "follower"], "s1": ["contributor", "follower"]}

    status, got = act(client, "s1", "report", "w1", expected_generation=2, work_state="waiting")
    assert status == 200
    mine = next(p for p in look(client)["participants"] if p["id"] == "s1")
    assert mine["workState"]["state"] == "waiting"
    assert look(client)["workState"] is None  # the issue's work state is the owner's

    assert act(client, "s1", "leave", "l1", expected_generation=2)[1]["receipt"]["outcome"] == (
        "left"
    )
    assert act(client, "s1", "unfollow", "u1", expected_generation=2)[0] == 200
    assert [p["id"] for p in look(client)["participants"]] == ["s0"]
    status, body = act(client, "s1", "report", "w2", expected_generation=2, work_state="done")
    assert status == 409 and body["error"] == "not_a_participant"


def test_participants_page_with_a_cursor(client: TestClient, built: Any) -> None:
    """More than 20 participants: 20 on the first page, the rest after its cursor; a cursor
    of another issue is refused naming the field."""
    container: Container = built[1]
    for i in range(25):
        container.issues.coordinate(
            f"x{i:02d}",
            CoordinateIssue(
                issue_number=7, action="follow", client_request_id=f"f{i}", expected_generation=1
            ),
            now_ms=1,
        )
    first = look(client)
    assert len(first["participants"]) == 20 and first["next"]
    second = look(client, cursor=first["next"])
    assert [p["id"] for p in second["participants"]] == [f"x{i:02d}" for i in range(20, 25)]
    assert second["next"] is None
    status, body = tool(
        client, "s0", "get_issue_coordination", issue_number=8, cursor=first["next"]
    )
    assert status == 422 and body["field"] == "cursor"


def test_ten_seats_claiming_at_once_leave_one_owner(client: TestClient) -> None:
    """10 threads claim the same issue at once: exactly one owner; every other is a 409 that
    names that owner and the generation."""
    barrier = threading.Barrier(len(SEATS))
    results: dict[str, tuple[int, dict[str, Any]]] = {}

    def claim(seat: str) -> None:
        barrier.wait()
        results[seat] = act(client, seat, "claim", f"claim-{seat}")

    threads = [threading.Thread(target=claim, args=(s,)) for s in SEATS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [s for s, (status, _) in results.items() if status == 200]
    assert len(won) == 1
    owner = won[0]
    for seat, (status, body) in results.items():
        if seat != owner:
            assert status == 409 and body["error"] == "issue_owned"
            assert (body["owner"], body["generation"]) == (owner, 2)
            assert owner in body["message"]
    assert look(client)["owner"]["id"] == owner and look(client)["generation"] == 2


def test_ten_processes_worth_of_clients_claim_through_the_store(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """The same race with one Redis connection per claimer (as separate worker processes
    would have): one `claimed`, nine `owned`."""
    barrier = threading.Barrier(10)
    verbs: list[str] = []

    def claim(seat: str) -> None:
        store = Issues(redis.Redis.from_url(redis_url))
        barrier.wait()
        args = CoordinateIssue(issue_number=9, action="claim", client_request_id="same-id")
        verbs.append(store.coordinate(seat, args, now_ms=5).verb)

    threads = [threading.Thread(target=claim, args=(s,)) for s in SEATS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(verbs) == ["claimed"] + ["owned"] * 9


def test_a_stale_generation_is_refused_with_the_current_one(client: TestClient) -> None:
    """After a release and another claim, the old generation is refused for every action,
    naming the current generation and owner; nothing is written."""
    act(client, "s0", "claim", "c1")
    act(client, "s0", "release", "x1", expected_generation=2)
    act(client, "s1", "claim", "c1")
    for action, extra in [
        ("refresh", {}),
        ("release", {}),
        ("join", {}),
        ("follow", {}),
        ("report", {"work_state": "working"}),
    ]:
        status, body = act(client, "s1", action, f"{action}-old", expected_generation=2, **extra)
        assert status == 409 and body["error"] == "stale_generation", (action, body)
        assert (body["generation"], body["owner"], body["field"]) == (
            4,
            "s1",
            "expected_generation",
        )
    status, body = act(client, "s2", "claim", "c9", expected_generation=3)  # a claim may fence
    assert status == 409 and body["error"] == "stale_generation"
    assert [(p["id"], p["roles"]) for p in look(client)["participants"]] == [("s1", ["owner"])]


def test_a_replay_returns_the_original_receipt(client: TestClient, built: Any) -> None:
    """The same seat, id and input after the state moved on: the original receipt, marked
    replayed, and nothing written; the same id with other input is a 409."""
    _, first = act(client, "s0", "claim", "c1")
    act(client, "s0", "release", "x1", expected_generation=2)
    status, again = act(client, "s0", "claim", "c1")
    assert status == 200 and again["replayed"] is True
    assert again["receipt"] == first["receipt"]
    assert look(client)["owner"] is None  # the replay claimed nothing
    status, body = act(client, "s0", "claim", "c1", issue_number=8)
    assert status == 409 and body["error"] == "request_conflict"
    assert body["field"] == "client_request_id"
    status, body = act(client, "s0", "release", "x1", expected_generation=3)
    assert status == 409 and body["error"] == "request_conflict"
    container: Container = built[1]
    assert [r["outcome"] for r in container.issues.log(7)] == ["claimed", "released"]


def test_a_blocked_report_becomes_one_engagement(client: TestClient, published: Published) -> None:
    """A blocked report is a work report to the engagement stage (state blocked, the blocker's
    text, the seat as reporter, one work id per issue, the revision of the report); its
    replay publishes nothing more; a later blocked report is a new revision."""
    act(client, "s0", "claim", "c1")
    status, got = act(
        client, "s0", "report", "b1", expected_generation=2, work_state="blocked", blocker=" CI "
    )
    assert status == 200 and got["engagement"]["status"] == "new"
    assert got["receipt"]["blocker"] == "CI"
    works = published.of(Task.ENGAGEMENT)
    assert len(works) == 1
    report = works[0]["report"]
    assert (report["state"], report["blocker"]["detail"], report["seatId"]) == (
        "blocked",
        "CI",
        "s0",
    )
    assert report["id"] == "issue:acme/atlas#7" and report["revision"] == 1
    assert works[0]["seatId"] == "s0"

    status, again = act(
        client, "s0", "report", "b1", expected_generation=2, work_state="blocked", blocker=" CI "
    )
    assert status == 200 and again["replayed"] and again["engagement"]["status"] == "duplicate"
    assert len(published.of(Task.ENGAGEMENT)) == 1

    act(client, "s0", "report", "b2", expected_generation=2, work_state="blocked", blocker="DB")
    works = published.of(Task.ENGAGEMENT)
    assert len(works) == 2 and works[1]["report"]["revision"] == 2
    assert works[1]["trackingId"] != works[0]["trackingId"]
    assert look(client)["workState"]["blocker"] == "DB"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"action": "refresh"}, "expected_generation"),
        ({"action": "report", "expected_generation": 1}, "work_state"),
        ({"action": "report", "expected_generation": 1, "work_state": "blocked"}, "blocker"),
        (
            {
                "action": "report",
                "expected_generation": 1,
                "work_state": "blocked",
                "blocker": "  ",
            },
            "blocker",
        ),
        (
            {"action": "report", "expected_generation": 1, "work_state": "done", "blocker": "x"},
            "blocker",
        ),
        ({"action": "claim", "work_state": "working"}, "work_state"),
        ({"action": "steal"}, "action"),
        ({"action": "claim", "client_request_id": "has space"}, "client_request_id"),
        ({"action": "claim", "issue_number": 0}, "issue_number"),
        ({"action": "claim", "issue_number": "7"}, "issue_number"),
        ({"action": "join", "expected_generation": 0}, "expected_generation"),
        ({"action": "report", "expected_generation": 1, "work_state": "asleep"}, "work_state"),
    ],
)
def test_bad_inputs_are_named_and_write_nothing(
    client: TestClient, redis_client: redis.Redis, args: dict[str, Any], field: str
) -> None:
    body = {"issue_number": 7, "client_request_id": "r1", **args}
    status, got = tool(client, "s0", "coordinate_issue", **body)
    assert status == 422 and got["field"] == field, got
    assert look(client)["generation"] == 1
    assert not redis_client.keys("*issuereq*")


def test_github_observation_and_notes(client: TestClient, built: Any) -> None:
    """What the inbound stream recorded of the number is the result's githubObservation;
    a claim of a closed issue or a pull request's number is noted, never refused."""
    container: Container = built[1]
    payload = {
        "repository": {"full_name": "Acme/Atlas"},
        "issue": {
            "number": 7,
            "state": "closed",
            "title": "Fix billing",
            "updated_at": "2026-01-02T03:04:05Z",
        },
    }
    obs = observation_of("issues", payload, repository="acme/atlas", received_at_ms=99)
    assert obs is not None and container.issues.observe(obs) == "observed"
    body = look(client)
    assert body["githubObservation"] == {
        "status": "observed",
        "kind": "issue",
        "state": "closed",
        "title": "Fix billing",
        "sourceUpdatedAt": 1767323045000,
        "observedAt": 99,
        "reconciliationRequired": False,
    }
    status, got = act(client, "s0", "claim", "c1")
    assert status == 200 and got["receipt"]["outcome"] == "claimed"
    assert got["githubObservation"]["state"] == "closed"
    assert any("closed" in n for n in got["notes"])
    pr = {
        "repository": {"full_name": "acme/atlas"},
        "pull_request": {"number": 8, "state": "open", "updated_at": "2026-01-02T03:04:05Z"},
    }
    obs = observation_of("pull_request", pr, repository="acme/atlas", received_at_ms=5)
    assert obs is not None and container.issues.observe(obs) == "observed"
    status, got = act(client, "s0", "claim", "c2", issue_number=8)
    assert status == 200 and any("pull request" in n for n in got["notes"])


def test_observations_keep_the_newest_and_flag_conflicts(built: Any) -> None:
    """An older version changes nothing; the same time with other content, or one number
    seen as an Issue and a pull request, asks for reconciliation."""
    store: Issues = built[1].issues

    def seen(key: str, state: str, title: str, at: str) -> str:
        payload = {
            "repository": {"full_name": "acme/atlas"},
            key: {"number": 3, "state": state, "title": title, "updated_at": at},
        }
        event = "issues" if key == "issue" else "pull_request"
        obs = observation_of(event, payload, repository="acme/atlas", received_at_ms=1)
        assert obs is not None
        return store.observe(obs)

    assert seen("issue", "open", "A", "2026-01-02T00:00:00Z") == "observed"
    assert seen("issue", "closed", "A", "2026-01-01T00:00:00Z") == "older"
    assert store.observation(3)["githubState"] == "open"  # type: ignore[index]
    assert seen("issue", "open", "A", "2026-01-02T00:00:00Z") == "duplicate"
    assert store.observation(3)["reconcile"] == "0"  # type: ignore[index]
    assert seen("issue", "open", "B", "2026-01-02T00:00:00Z") == "duplicate"
    assert store.observation(3)["reconcile"] == "1"  # type: ignore[index]
    assert seen("issue", "closed", "B", "2026-01-03T00:00:00Z") == "observed"
    assert store.observation(3)["reconcile"] == "0"  # type: ignore[index]
    assert seen("pull_request", "open", "B", "2026-01-04T00:00:00Z") == "observed"
    assert store.observation(3)["reconcile"] == "1"  # type: ignore[index]


def test_a_github_webhook_is_observed_for_the_projects_repository(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, published: Published
) -> None:
    """A signed `issues` webhook of the project's repository, posted to /webhooks/github,
    is what get_issue_coordination then shows; another repository's is not observed."""
    import json

    from pipeline.signatures import github_headers

    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    settings = Settings(
        redis_url=redis_url,
        api_token=TOKEN,
        org_file=org,
        outbox_path=tmp_path / "o.jsonl",
        github_webhook_secret="gh-secret",
    )
    app = create_app(settings, register=False)
    container = bootstrap.build_container(settings, app=app)

    def event(repo: str, number: int, delivery: str) -> tuple[bytes, dict[str, str]]:
        body = json.dumps(
            {
                "action": "opened",
                "repository": {"full_name": repo},
                "issue": {
                    "number": number,
                    "state": "open",
                    "title": "Speed up the deploy",
                    "updated_at": "2026-11-30T10:00:00Z",
                    "user": {"login": "ava"},
                },
                "sender": {"login": "ava"},
            }
        ).encode()
        return body, github_headers(body, secret="gh-secret", event="issues", delivery_id=delivery)

    with TestClient(create_ingress(container, app)) as c:
        as_seats(c)
        for repo, number, delivery in (("acme/atlas", 11, "d-1"), ("other/repo", 12, "d-2")):
            body, headers = event(repo, number, delivery)
            assert c.post("/webhooks/github", content=body, headers=headers).status_code == 200
        seen = look(c, number=11)["githubObservation"]
        assert seen["state"] == "open" and seen["title"] == "Speed up the deploy"
        assert look(c, number=12)["githubObservation"] == {"status": "not_observed"}
