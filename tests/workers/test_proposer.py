"""The proposer client against a real local HTTP server: every way an answer can go."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from contracts.goals import Gap, Objective
from contracts.steward import ObjectiveProposals
from workers.errors import ConfigError
from workers.outbound.proposer import (
    MAX_BODY_BYTES,
    MAX_CANDIDATES,
    Proposer,
    as_proposal,
    public_endpoint,
)
from workers.settings import Settings

NOW_MS = 1_700_000_000_000
OBJECTIVE = Objective(key="pipeline", state="active", metric="deals", target=10, seat_id="s1")
GAP = Gap(gap=4, target=10, value=6, normalized_gap=0.4, trend="flat")
FAST = 0.3  # seconds: the timeout every test proposer has


def cand(title: str, **extra: Any) -> dict[str, Any]:
    return {"title": title, "advances": ["pipeline"], "why": {"reason": "gap"}, **extra}


Route = Callable[[BaseHTTPRequestHandler], None]


@dataclass
class Server:
    base: str
    routes: dict[str, Route]
    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def proposer(self, path: str, *, timeout_s: float = FAST, **kw: Any) -> Proposer:
        return Proposer(self.base + path, timeout_s=timeout_s, **kw)


def send_json(handler: BaseHTTPRequestHandler, value: object, status: int = 200) -> None:
    body = json.dumps(value).encode()
    send_raw(handler, body, status=status)


def send_raw(
    handler: BaseHTTPRequestHandler,
    body: bytes,
    *,
    status: int = 200,
    length: bool = True,
    headers: dict[str, str] | None = None,
) -> None:
    try:
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        if length:
            handler.send_header("content-length", str(len(body)))
        for k, v in (headers or {}).items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(body)
    except OSError:
        pass  # the client stopped reading, as it should


@pytest.fixture
def server() -> Iterator[Server]:
    routes: dict[str, Route] = {}
    state: dict[str, Server] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            size = int(self.headers.get("content-length", "0"))
            srv = state["server"]
            srv.requests.append((self.path, dict(self.headers), self.rfile.read(size)))
            routes[self.path.split("?")[0]](self)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    srv = Server(base=f"http://127.0.0.1:{httpd.server_address[1]}", routes=routes)
    state["server"] = srv
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield srv
    finally:
        srv.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(2)


def titles(result: ObjectiveProposals) -> list[str]:
    return [p.candidate.title for p in result.candidates]


def reasons(result: ObjectiveProposals) -> list[str]:
    return [f.reason for f in result.failures]


def test_a_bare_list_becomes_proposer_proposals_and_the_request_carries_the_gap(
    server: Server,
) -> None:
    """A 200 with a JSON list gives one proposal per candidate, from "proposer"."""
    server.routes["/list"] = lambda h: send_json(h, [cand("Call ten leads"), cand("Write memo")])
    result = server.proposer("/list").propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    assert titles(result) == ["Call ten leads", "Write memo"]
    assert {p.source for p in result.candidates} == {"proposer"}
    assert result.candidates[0].candidate.advances == ("pipeline",)
    assert result.failures == ()
    (_, headers, body) = server.requests[0]
    sent = json.loads(body)
    assert sent == {
        "objective": OBJECTIVE.to_wire(),
        "gap": GAP.to_wire(),
        "nowMs": NOW_MS,
        "maxCandidates": MAX_CANDIDATES,
    }
    assert headers["content-type"] == "application/json"


def test_a_wrapped_object_is_read_like_a_list(server: Server) -> None:
    """`{"candidates": [...]}` is the same as the bare list; nested `candidate` works too."""
    server.routes["/wrapped"] = lambda h: send_json(
        h, {"candidates": [cand("A"), {"candidate": cand("B")}], "note": "ignored"}
    )
    result = server.proposer("/wrapped").propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    assert titles(result) == ["A", "B"]
    assert result.failures == ()


def test_a_candidate_tagged_playbook_comes_back_as_proposer(server: Server) -> None:
    """A proposer can never pose as the playbook, flat or nested."""
    server.routes["/pose"] = lambda h: send_json(
        h,
        [
            {"source": "playbook", **cand("Flat")},
            {"source": "playbook", "candidate": cand("Nested")},
        ],
    )
    result = server.proposer("/pose").propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    assert [(p.source, p.candidate.title) for p in result.candidates] == [
        ("proposer", "Flat"),
        ("proposer", "Nested"),
    ]
    assert as_proposal({"source": "playbook", "title": "x"}).source == "proposer"


def test_a_server_error_is_a_failure_naming_the_status(server: Server) -> None:
    """A 500 yields no candidates and a failure that says HTTP 500 and which proposer."""
    server.routes["/boom"] = lambda h: send_json(h, {"error": "down"}, status=500)
    result = server.proposer("/boom").propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    assert result.candidates == ()
    (failure,) = result.failures
    assert failure.reason == "answered HTTP 500"
    assert failure.proposer == server.base + "/boom"


def test_a_redirect_is_not_followed(server: Server) -> None:
    """A 307 is a failure; the target is never asked."""
    server.routes["/moved"] = lambda h: send_raw(h, b"", status=307, headers={"location": "/list"})
    server.routes["/list"] = lambda h: send_json(h, [cand("A")])
    result = server.proposer("/moved").propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    assert result.candidates == ()
    assert reasons(result) == ["answered HTTP 307; redirects are not followed"]
    assert [path for path, _, _ in server.requests] == ["/moved"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"<html>oops</html>", "answer is not JSON"),
        (b"", "answer is empty"),
        (b"\xff\xfe{", "answer is not JSON"),
        (b"[" * 100_000, "answer is not JSON"),
    ],
)
def test_a_body_that_is_not_json_is_a_failure(server: Server, body: bytes, expected: str) -> None:
    """HTML, an empty body, bad UTF-8 or absurd nesting: no candidates, one failure."""
    server.routes["/junk"] = lambda h: send_raw(h, body)
    result = server.proposer("/junk").propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    assert result.candidates == ()
    (reason,) = reasons(result)
    assert reason.startswith(expected)


@pytest.mark.parametrize(
    ("answer", "got"),
    [
        ({"items": [cand("A")]}, 'an object without a "candidates" list'),
        ({"candidates": None}, 'an object without a "candidates" list'),
        ("a string", "a string"),
        (42, "a number"),
        (None, "null"),
    ],
)
def test_a_wrong_top_level_shape_is_a_failure(server: Server, answer: object, got: str) -> None:
    """Only a list or `{candidates: list}` is read; anything else says what it got."""
    server.routes["/shape"] = lambda h: send_json(h, answer)
    result = server.proposer("/shape").propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    assert result.candidates == ()
    (reason,) = reasons(result)
    assert reason.startswith("answer must be a JSON list of candidates")
    assert reason.endswith(f"got {got}")


@pytest.mark.parametrize("declared", [True, False])
def test_an_oversize_body_is_refused_without_reading_it_all(server: Server, declared: bool) -> None:
    """Over the cap, declared or streamed without a length, is a failure and no candidates."""
    big = json.dumps([cand("x" * 1000) for _ in range(300)]).encode()
    assert len(big) > MAX_BODY_BYTES
    server.routes["/big"] = lambda h: send_raw(h, big, length=declared)
    result = server.proposer("/big").propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    assert result.candidates == ()
    (reason,) = reasons(result)
    assert reason.startswith("answer is larger than 256 KiB")


def test_more_than_the_cap_keeps_the_first_and_says_how_many_were_dropped(
    server: Server,
) -> None:
    """53 candidates: the first 50 are kept, and a failure says 3 were dropped."""
    server.routes["/many"] = lambda h: send_json(h, [cand(f"T{i}") for i in range(53)])
    result = server.proposer("/many").propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    assert titles(result) == [f"T{i}" for i in range(50)]
    assert reasons(result) == [
        "sent 53 candidates, more than the 50 allowed; kept the first 50, dropped 3"
    ]


def test_invalid_candidates_are_failures_and_the_valid_ones_are_kept(server: Server) -> None:
    """Each bad candidate is named by position with its field error; the rest survive."""
    server.routes["/mixed"] = lambda h: send_json(
        h,
        [
            cand("Good one"),
            cand("Negative", estMicros=-5),
            "not an object",
            cand("Bad role", collaborators=[{"memberId": "ann", "role": "boss"}]),
            cand("Good two"),
        ],
    )
    result = server.proposer("/mixed").propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    assert titles(result) == ["Good one", "Good two"]
    got = reasons(result)
    assert len(got) == 3
    assert got[0].startswith("candidate 1: estMicros: ")
    assert got[1].startswith("candidate 2: candidate: ")
    assert got[2].startswith("candidate 3: collaborators.0.role: ")
    assert "boss" not in " ".join(got)  # field errors, not the values sent


def test_a_slow_answer_is_a_read_timeout_naming_the_timeout(server: Server) -> None:
    """No answer within the timeout: a failure that says read timeout and 0.3 s, quickly."""

    def slow(h: BaseHTTPRequestHandler) -> None:
        server.release.wait(60)  # released at teardown
        send_json(h, [cand("Too late")])

    server.routes["/slow"] = slow
    started = time.monotonic()
    result = server.proposer("/slow").propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    # Far above 0.3 s for a loaded machine, far below the minute the answer would take.
    assert time.monotonic() - started < 20
    assert result.candidates == ()
    assert reasons(result) == ["read timeout: no answer within 0.3 s"]


def test_a_trickling_answer_is_cut_off_at_the_overall_deadline(server: Server) -> None:
    """Bytes that keep coming just inside the read timeout still cannot hold the run."""

    def trickle(h: BaseHTTPRequestHandler) -> None:
        try:
            h.send_response(200)
            h.end_headers()
            h.wfile.write(b"[")
            while not server.release.wait(0.05):
                h.wfile.write(b" ")
                h.wfile.flush()
        except OSError:
            pass

    server.routes["/trickle"] = trickle
    started = time.monotonic()
    result = server.proposer("/trickle").propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    assert time.monotonic() - started < 20  # the trickle never ends: any finish is the cut
    assert reasons(result) == ["answer took longer than 0.3 s in all; stopped reading"]


def test_nothing_listening_is_connection_refused() -> None:
    """A closed port is a failure that says the connection was refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = Proposer(f"http://127.0.0.1:{port}/p", timeout_s=FAST).propose(
        OBJECTIVE, GAP, now_ms=NOW_MS
    )
    assert result.candidates == ()
    (failure,) = result.failures
    assert failure.reason == "connection refused: nothing is listening there"
    assert failure.proposer == f"http://127.0.0.1:{port}/p"


def test_a_dns_failure_says_so() -> None:
    """A name that does not resolve is reported as a DNS failure naming the host."""

    def unresolvable(request: httpx.Request) -> httpx.Response:
        try:
            raise socket.gaierror(-2, "Name or service not known")
        except socket.gaierror as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc

    client = httpx.Client(transport=httpx.MockTransport(unresolvable))
    proposer = Proposer("https://ideas.example/p", timeout_s=FAST, client=client)
    result = proposer.propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    assert reasons(result) == ["DNS lookup failed for ideas.example: Name or service not known"]


def test_a_connect_timeout_names_the_timeout() -> None:
    """A connect that times out says which timeout, and its value."""

    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("timed out", request=request)

    client = httpx.Client(transport=httpx.MockTransport(hang))
    result = Proposer("https://ideas.example/p", timeout_s=1.5, client=client).propose(
        OBJECTIVE, GAP, now_ms=NOW_MS
    )
    assert reasons(result) == ["connect timeout: no connection within 1.5 s"]


def test_credentials_and_query_never_appear_in_a_failure(server: Server) -> None:
    """The URL's user, password and query are sent but never named in what is recorded."""
    server.routes["/auth"] = lambda h: send_json(h, {"error": "nope"}, status=403)
    host = server.base.removeprefix("http://")
    url = f"http://bot:hunter2-secret@{host}/auth?token=tok-secret-123"
    proposer = Proposer(url, timeout_s=FAST)
    result = proposer.propose(OBJECTIVE, GAP, now_ms=NOW_MS)
    (failure,) = result.failures
    assert failure.proposer == f"{server.base}/auth"
    recorded = json.dumps(result.to_wire()) + repr(proposer)
    for secret in ("hunter2-secret", "tok-secret-123", "bot:"):
        assert secret not in recorded
    path, headers, _ = server.requests[0]
    assert path == "/auth?token=tok-secret-123"
    assert headers["Authorization"].startswith("Basic ")


def test_public_endpoint_strips_credentials_query_and_fragment() -> None:
    """Only scheme, host, port and path survive; a non-http URL has no endpoint."""
    assert public_endpoint("HTTPS://u:p@Ideas.Example:8443/v1/p?k=s#f") == (
        "https://ideas.example:8443/v1/p"
    )
    assert public_endpoint("http://[::1]:9/p") == "http://[::1]:9/p"
    assert public_endpoint("ftp://ideas.example/p") == ""
    assert public_endpoint("http://host:notaport/p") == ""


def test_from_settings_is_none_without_a_url_and_a_bad_url_is_refused_at_start() -> None:
    """No SEATWIRE_PROPOSER_URL, no proposer; a URL that is not http(s) is a ConfigError."""
    assert Proposer.from_settings(Settings(proposer_url=None)) is None
    assert Proposer.from_settings(Settings(proposer_url="  ")) is None
    made = Proposer.from_settings(
        Settings(proposer_url="https://ideas.example/p", proposer_timeout_s=2)
    )
    assert made is not None
    assert (made.endpoint, made.timeout_s) == ("https://ideas.example/p", 2)
    made.close()
    with pytest.raises(ConfigError):
        Proposer("file:///etc/passwd", timeout_s=1)
