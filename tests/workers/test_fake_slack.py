"""The fake Slack Web API speaks the wire format slack_sdk sends, and serves every scripted fault.

Every test drives it with the real `slack_sdk.WebClient` (no retry handlers), because the
outbound fault tests trust it as their oracle: if it lied here, they would too.
"""

from __future__ import annotations

import contextlib
import errno
import json
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from tests.fake_slack import (
    BOT_USER_ID,
    FakeSlack,
    FakeSlackControl,
    Fault,
    FaultKind,
    apply_then_500,
    apply_then_hang,
    apply_then_reset,
    error,
    http_error,
    rate_limited,
    retry_waits,
)
from workers.settings import REPO_ROOT

CH = "C0GENERAL"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_channel(CH, name="general")
        yield fake


def client_for(fake: FakeSlack, *, timeout: float = 5, token: str | None = "") -> WebClient:
    return WebClient(
        token=fake.token if token == "" else token,
        base_url=fake.url,
        retry_handlers=[],
        timeout=timeout,  # type: ignore[arg-type]  # urllib takes a float
    )


@pytest.fixture
def client(slack: FakeSlack) -> WebClient:
    return client_for(slack)


def meta(ident: str, **extra: Any) -> dict[str, Any]:
    return {"event_type": "seatwire_ask", "event_payload": {"idempotency_id": ident, **extra}}


def api_error(exc: pytest.ExceptionInfo[SlackApiError]) -> tuple[int, str]:
    response = exc.value.response
    return response.status_code, response.get("error")


# --- methods ----------------------------------------------------------------------------------


def test_auth_test_names_the_bot_and_rejects_a_wrong_or_missing_token(slack: FakeSlack) -> None:
    """auth.test answers the bot identity; a wrong token is invalid_auth, none is not_authed."""
    assert client_for(slack).auth_test()["user_id"] == BOT_USER_ID
    with pytest.raises(SlackApiError) as wrong:
        client_for(slack, token="xoxb-wrong").auth_test()
    assert api_error(wrong) == (200, "invalid_auth")
    with pytest.raises(SlackApiError) as missing:
        client_for(slack, token=None).chat_postMessage(channel=CH, text="hi")
    assert api_error(missing) == (200, "not_authed")
    assert slack.posts() == []


def test_dm_open_is_idempotent_and_a_group_dm_is_an_mpim(
    client: WebClient, slack: FakeSlack
) -> None:
    """The same users always get the same conversation: D... for one, G... for several."""
    first = client.conversations_open(users=["U1"])["channel"]
    again = client.conversations_open(users="U1", return_im=True)["channel"]
    other = client.conversations_open(users=["U2"])["channel"]
    assert first["id"] == again["id"] != other["id"]
    assert first["id"].startswith("D") and first["is_im"]
    group = client.conversations_open(users=["U1", "U2"])["channel"]
    same = client.conversations_open(users=["U2", "U1"])["channel"]
    assert group["id"] == same["id"] and group["id"].startswith("G") and group["is_mpim"]
    slack.unknown_user("U404")
    with pytest.raises(SlackApiError) as exc:
        client.conversations_open(users=["U404"])
    assert api_error(exc) == (200, "user_not_found")
    assert client.chat_postMessage(channel=first["id"], text="a DM")["channel"] == first["id"]


def test_create_then_invite_follows_slack_errors(client: WebClient, slack: FakeSlack) -> None:
    """create makes C...; a taken or malformed name fails; re-inviting members fails."""
    created = client.conversations_create(name="seatwire-ask-1", is_private=True)["channel"]
    assert created["id"].startswith("C") and created["is_private"]
    for name, code in [
        ("seatwire-ask-1", "name_taken"),
        ("Bad Name", "invalid_name_specials"),
        ("x" * 81, "invalid_name_maxlength"),
    ]:
        with pytest.raises(SlackApiError) as exc:
            client.conversations_create(name=name)
        assert api_error(exc) == (200, code)
    client.conversations_invite(channel=created["id"], users=["U1", "U2"])
    assert slack.members(created["id"]) == {BOT_USER_ID, "U1", "U2"}
    with pytest.raises(SlackApiError) as again:
        client.conversations_invite(channel=created["id"], users="U2,U1")
    assert api_error(again) == (200, "already_in_channel")
    client.conversations_invite(channel=created["id"], users=["U1", "U3"])
    assert slack.members(created["id"]) == {BOT_USER_ID, "U1", "U2", "U3"}
    with pytest.raises(SlackApiError) as missing:
        client.conversations_invite(channel="C404", users=["U1"])
    assert api_error(missing) == (200, "channel_not_found")
    slack.archive(created["id"])
    with pytest.raises(SlackApiError) as archived:
        client.conversations_invite(channel=created["id"], users=["U9"])
    assert api_error(archived) == (200, "is_archived")
    info = client.conversations_info(channel=created["id"])["channel"]
    assert (info["name"], info["is_archived"]) == ("seatwire-ask-1", True)


def test_post_records_metadata_and_thread_with_increasing_ts(
    client: WebClient, slack: FakeSlack
) -> None:
    """A JSON post is applied with its metadata; a reply keeps thread_ts; ts only grows."""
    parent = client.chat_postMessage(channel=CH, text="ask", metadata=meta("s-1"))
    assert parent["message"]["metadata"] == meta("s-1")
    assert parent["message"]["bot_id"] and parent["channel"] == CH
    reply = client.chat_postMessage(channel=CH, text="more", thread_ts=parent["ts"])
    assert reply["message"]["thread_ts"] == parent["ts"]
    posts = slack.posts()
    assert [(p.channel, p.text, p.thread_ts) for p in posts] == [
        (CH, "ask", None),
        (CH, "more", parent["ts"]),
    ]
    assert posts[0].metadata == meta("s-1") and posts[0].payload_field() == "s-1"
    assert posts[0].fault is None
    assert float(posts[0].ts) < float(posts[1].ts)
    assert slack.requests()[0].metadata_id == "s-1"


def test_form_and_query_encodings_are_accepted(client: WebClient, slack: FakeSlack) -> None:
    """metadata as a JSON string in a form body, and a GET with a query string, both work."""
    form = client.api_call(
        "chat.postMessage",
        params={"channel": CH, "text": "form", "metadata": json.dumps(meta("s-form"))},
    )
    assert form["ok"]
    got = httpx.get(
        slack.url + "conversations.history",
        params={"channel": CH, "include_all_metadata": "true"},
        headers={"Authorization": f"Bearer {slack.token}"},
    ).json()
    assert got["messages"][0]["metadata"] == meta("s-form")
    via_token_param = httpx.get(slack.url + "auth.test", params={"token": slack.token}).json()
    assert via_token_param["ok"]
    bad = httpx.post(
        slack.url + "chat.postMessage",
        content=b"[1]",
        headers={"Authorization": f"Bearer {slack.token}", "Content-Type": "application/json"},
    ).json()
    assert bad == {"ok": False, "error": "invalid_json"}
    assert [p.metadata for p in slack.posts()] == [meta("s-form")]


def test_history_hides_replies_and_metadata_unless_asked(client: WebClient) -> None:
    """history: top-level newest first, no replies, metadata only with include_all_metadata."""
    one = client.chat_postMessage(channel=CH, text="one", metadata=meta("s-1"))["ts"]
    client.chat_postMessage(channel=CH, text="reply", thread_ts=one, metadata=meta("s-r"))
    client.chat_postMessage(channel=CH, text="two", metadata=meta("s-2"))
    plain = client.conversations_history(channel=CH)["messages"]
    assert [m["text"] for m in plain] == ["two", "one"]
    assert all("metadata" not in m for m in plain)
    assert plain[1]["reply_count"] == 1 and plain[1]["thread_ts"] == one
    full = client.conversations_history(channel=CH, include_all_metadata=True)["messages"]
    assert [m["metadata"]["event_payload"]["idempotency_id"] for m in full] == ["s-2", "s-1"]
    thread = client.conversations_replies(channel=CH, ts=one, include_all_metadata=True)
    assert [m["text"] for m in thread["messages"]] == ["one", "reply"]
    assert thread["messages"][1]["metadata"] == meta("s-r")
    with pytest.raises(SlackApiError) as exc:
        client.conversations_history(channel="C404")
    assert api_error(exc) == (200, "channel_not_found")


def test_history_pages_with_a_cursor_and_honours_bounds(client: WebClient) -> None:
    """limit + next_cursor walk every message once; oldest/latest/inclusive bound the set."""
    ts = [client.chat_postMessage(channel=CH, text=f"m{i}")["ts"] for i in range(5)]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = client.conversations_history(channel=CH, limit=2, cursor=cursor)
        pages += 1
        seen += [m["ts"] for m in page["messages"]]
        if not page["has_more"]:
            break
        cursor = page["response_metadata"]["next_cursor"]
    assert (pages, seen) == (3, ts[::-1])
    window = client.conversations_history(channel=CH, oldest=ts[1], latest=ts[3])["messages"]
    assert [m["ts"] for m in window] == [ts[2]]
    closed = client.conversations_history(channel=CH, oldest=ts[1], latest=ts[3], inclusive=True)[
        "messages"
    ]
    assert [m["ts"] for m in closed] == [ts[3], ts[2], ts[1]]
    replies = client.conversations_replies(channel=CH, ts=ts[0], limit=1)
    assert [m["ts"] for m in replies["messages"]] == [ts[0]] and not replies["has_more"]


@pytest.mark.parametrize(
    ("setup", "kwargs", "code"),
    [
        (None, {"channel": "C404", "text": "x"}, "channel_not_found"),
        ("archive", {"channel": CH, "text": "x"}, "is_archived"),
        ("outsider", {"channel": "C0OUTSIDE", "text": "x"}, "not_in_channel"),
        (None, {"channel": CH, "text": "x" * 40_001}, "msg_too_long"),
        (None, {"channel": CH, "text": ""}, "no_text"),
    ],
)
def test_post_errors_are_ok_false_and_not_applied(
    client: WebClient, slack: FakeSlack, setup: str | None, kwargs: dict[str, Any], code: str
) -> None:
    """Slack's own permanent post errors arrive as HTTP 200 ok:false and store nothing."""
    if setup == "archive":
        slack.archive(CH)
    if setup == "outsider":
        slack.add_channel("C0OUTSIDE", name="outside", bot_member=False)
    with pytest.raises(SlackApiError) as exc:
        # chat_postMessage's own wire format (a JSON body), minus its warning about empty text
        client.api_call("chat.postMessage", json=kwargs)
    assert api_error(exc) == (200, code)
    assert slack.posts() == []
    assert [(r.applied, r.error) for r in slack.requests()] == [(False, code)]


# --- faults -----------------------------------------------------------------------------------


def test_rate_limited_is_429_with_retry_after_and_not_applied(
    client: WebClient, slack: FakeSlack
) -> None:
    """429 carries Retry-After and error ratelimited; nothing is stored; then service resumes."""
    slack.script("chat.postMessage", [rate_limited(retry_after=7)])
    with pytest.raises(SlackApiError) as exc:
        client.chat_postMessage(channel=CH, text="x", metadata=meta("s-1"))
    assert api_error(exc) == (429, "ratelimited")
    assert exc.value.response.headers["Retry-After"] == "7"
    assert slack.posts() == []
    client.chat_postMessage(channel=CH, text="x", metadata=meta("s-1"))
    first, second = slack.requests()
    assert (first.status, first.retry_after, first.applied, first.fault_source) == (
        429,
        7,
        False,
        "script",
    )
    assert (second.status, second.applied, second.fault) == (200, True, None)


@pytest.mark.parametrize("status", [500, 503])
def test_http_error_is_that_status_and_not_applied(
    client: WebClient, slack: FakeSlack, status: int
) -> None:
    """A 5xx fault answers that status with a non-JSON body and stores nothing."""
    slack.script("chat.postMessage", [http_error(status)])
    with pytest.raises(SlackApiError) as exc:
        client.chat_postMessage(channel=CH, text="x")
    assert exc.value.response.status_code == status
    assert slack.posts() == []


def test_ok_false_errors_store_the_post_only_when_applied(
    client: WebClient, slack: FakeSlack
) -> None:
    """error(code) is ok:false either way; applied=True stores the post first, with its fault."""
    not_applied, applied = error("internal_error"), error("fatal_error", applied=True)
    slack.script("chat.postMessage", [not_applied, applied])
    for send_id, code in [("s-1", "internal_error"), ("s-2", "fatal_error")]:
        with pytest.raises(SlackApiError) as exc:
            client.chat_postMessage(channel=CH, text="x", metadata=meta(send_id))
        assert api_error(exc) == (200, code)
    assert [(p.payload_field(), p.fault) for p in slack.posts()] == [("s-2", applied)]
    assert [r.applied for r in slack.requests()] == [False, True]


def test_apply_then_hang_times_the_client_out_after_storing(slack: FakeSlack) -> None:
    """The client gives up at its timeout; the post is already stored."""
    slack.script("chat.postMessage", [apply_then_hang(30)])
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        client_for(slack, timeout=0.5).chat_postMessage(channel=CH, text="x", metadata=meta("s"))
    assert time.monotonic() - started < 20  # far below the 30 s hang, even on a loaded machine
    assert [(p.payload_field(), p.fault) for p in slack.posts()] == [("s", apply_then_hang(30))]


def test_apply_then_hang_answers_normally_after_the_wait(
    client: WebClient, slack: FakeSlack
) -> None:
    """A patient client gets the normal ok answer, late."""
    slack.script("chat.postMessage", [apply_then_hang(0.2)])
    started = time.monotonic()
    assert client.chat_postMessage(channel=CH, text="x")["ok"]
    assert time.monotonic() - started >= 0.2


def test_apply_then_reset_resets_the_connection_after_storing(
    client: WebClient, slack: FakeSlack
) -> None:
    """The client sees a TCP reset (ECONNRESET); the post is stored."""
    slack.script("chat.postMessage", [apply_then_reset()])
    with pytest.raises(ConnectionResetError) as exc:
        client.chat_postMessage(channel=CH, text="x", metadata=meta("s-rst"))
    assert exc.value.errno == errno.ECONNRESET  # a real RST, not a polite FIN
    assert [p.payload_field() for p in slack.posts()] == ["s-rst"]
    assert [(r.status, r.applied) for r in slack.requests()] == [(0, True)]
    assert client.chat_postMessage(channel=CH, text="after")["ok"]


def test_apply_then_500_stores_then_answers_500(client: WebClient, slack: FakeSlack) -> None:
    """HTTP 500 although the post was applied: the ambiguous case a sender must reconcile."""
    slack.script("chat.postMessage", [apply_then_500()])
    with pytest.raises(SlackApiError) as exc:
        client.chat_postMessage(channel=CH, text="x", metadata=meta("s-500"))
    assert exc.value.response.status_code == 500
    assert [p.payload_field() for p in slack.posts()] == ["s-500"]


def test_script_serves_faults_in_order_then_reverts(client: WebClient, slack: FakeSlack) -> None:
    """Scripted faults are taken one per call, None serves normally, then all calls are normal."""
    slack.script("chat.postMessage", [rate_limited(1), None, http_error(503)])
    slack.script("conversations.history", [rate_limited(3)])
    statuses = []
    for _ in range(4):
        try:
            statuses.append(client.chat_postMessage(channel=CH, text="x").status_code)
        except SlackApiError as failed:
            statuses.append(failed.response.status_code)
    assert statuses == [429, 200, 503, 200]
    with pytest.raises(SlackApiError) as limited:
        client.conversations_history(channel=CH)
    assert api_error(limited) == (429, "ratelimited")
    assert len(client.conversations_history(channel=CH)["messages"]) == 2


def _chaos_run(seed: int, calls: int = 40) -> list[int]:
    with FakeSlack() as fake:
        fake.add_channel(CH)
        fake.chaos("chat.postMessage", {rate_limited(2): 0.3, http_error(500): 0.2}, seed=seed)
        web = client_for(fake)
        for _ in range(calls):
            with contextlib.suppress(SlackApiError):
                web.chat_postMessage(channel=CH, text="x")
        return [r.status for r in fake.requests()]


def test_chaos_is_reproducible_from_its_seed() -> None:
    """The same seed serves the same faults in the same order; another seed does not."""
    first, again, other = _chaos_run(7), _chaos_run(7), _chaos_run(8)
    assert first == again
    assert first != other
    assert {200, 429, 500} <= set(first)


def test_script_wins_over_chaos(client: WebClient, slack: FakeSlack) -> None:
    """With both set, the scripted fault serves the call."""
    slack.chaos("chat.postMessage", {http_error(500): 1.0}, seed=1)
    slack.script("chat.postMessage", [None, error("channel_not_found")])
    assert client.chat_postMessage(channel=CH, text="x")["ok"]
    with pytest.raises(SlackApiError) as scripted:
        client.chat_postMessage(channel=CH, text="x")
    assert api_error(scripted) == (200, "channel_not_found")
    with pytest.raises(SlackApiError) as drawn:
        client.chat_postMessage(channel=CH, text="x")
    assert drawn.value.response.status_code == 500
    assert [r.fault_source for r in slack.requests()] == [None, "script", "chaos"]


def test_rate_limit_caps_applied_posts_per_channel(client: WebClient, slack: FakeSlack) -> None:
    """Within 1/N s of an applied post in a channel a post gets 429; other channels are free."""
    slack.add_channel("C0OTHER")
    # One post a second: the second post lands inside that second even on a loaded machine.
    slack.rate_limit("chat.postMessage", per_channel_per_s=1, retry_after=30)
    client.chat_postMessage(channel=CH, text="1")
    with pytest.raises(SlackApiError) as exc:
        client.chat_postMessage(channel=CH, text="2")
    assert api_error(exc) == (429, "ratelimited")
    assert exc.value.response.headers["Retry-After"] == "30"
    client.chat_postMessage(channel="C0OTHER", text="elsewhere")
    time.sleep(1.1)  # past the window: time has to pass, and more of it on a loaded machine
    client.chat_postMessage(channel=CH, text="3")
    assert [p.text for p in slack.posts()] == ["1", "elsewhere", "3"]
    limited = [r for r in slack.requests() if r.status == 429]
    assert [(r.fault_source, r.channel) for r in limited] == [("limit", CH)]
    (wait,) = slack.retry_waits()
    assert wait.channel == CH and wait.retry_after == 30
    assert 1 < wait.waited < 30 and wait.margin < 0  # came back before Retry-After elapsed


def test_duplicates_counts_ids_applied_more_than_once(client: WebClient, slack: FakeSlack) -> None:
    """duplicates() keys on metadata.event_payload.<field>, or any key function."""
    for send_id in ["a", "b", "a", "a"]:
        client.chat_postMessage(channel=CH, text="x", metadata=meta(send_id, send_id=send_id))
    client.chat_postMessage(channel=CH, text="no metadata")
    assert slack.duplicates() == {"a": 3}
    assert slack.duplicates(field="send_id") == {"a": 3}
    assert slack.duplicates(key=lambda p: p.text) == {"x": 4}


def test_faults_round_trip_through_json() -> None:
    """Every fault kind survives the control API's JSON."""
    faults = [
        rate_limited(2),
        http_error(503),
        error("internal_error", applied=True),
        apply_then_hang(1.5),
        apply_then_reset(),
        apply_then_500(),
    ]
    assert [Fault.from_json(json.loads(json.dumps(f.to_json()))) for f in faults] == faults
    assert {f.kind for f in faults} == set(FaultKind)


def test_retry_waits_pairs_each_429_with_the_next_call_to_that_channel(slack: FakeSlack) -> None:
    """A 429 followed by a call elsewhere is not a wait; the next call to the channel is."""
    client = client_for(slack)
    slack.add_channel("C0OTHER")
    slack.script("chat.postMessage", [rate_limited(0)])
    with pytest.raises(SlackApiError):
        client.chat_postMessage(channel=CH, text="x")
    client.chat_postMessage(channel="C0OTHER", text="y")
    client.chat_postMessage(channel=CH, text="x")
    (wait,) = retry_waits(slack.requests())
    assert wait.channel == CH and wait.retry_after == 0 and wait.margin >= 0


# --- as a process -----------------------------------------------------------------------------


def _first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise TimeoutError("fake-slack printed nothing")
    return proc.stdout.readline().strip()


# A bound, not an expectation: a Python process starting on a loaded 2-core machine can take
# tens of seconds to print its first line.
PROCESS_S = 120


@pytest.mark.e2e
def test_process_mode_is_driven_through_the_control_api() -> None:
    """`python -m tests.fake_slack` serves the API; FakeSlackControl scripts and reads it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_slack", "--port", "0", "--token", "xoxb-proc"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = _first_line(proc, timeout=PROCESS_S)
        assert line.startswith("fake-slack listening on http://127.0.0.1:")
        url = line.removeprefix("fake-slack listening on ")
        web = WebClient(token="xoxb-proc", base_url=url, retry_handlers=[], timeout=30)
        with FakeSlackControl(url) as control:
            assert control.info()["url"] == url
            control.add_channel(CH, name="general", members=["U1"])
            assert control.members(CH) == {BOT_USER_ID, "U1"}
            control.script(
                "chat.postMessage", [rate_limited(3), error("fatal_error", applied=True)]
            )
            with pytest.raises(SlackApiError) as limited:
                web.chat_postMessage(channel=CH, text="x", metadata=meta("p-1"))
            assert limited.value.response.headers["Retry-After"] == "3"
            with pytest.raises(SlackApiError):
                web.chat_postMessage(channel=CH, text="x", metadata=meta("p-1"))
            web.chat_postMessage(channel=CH, text="x", metadata=meta("p-1"))
            posts = control.posts()
            assert [(p.payload_field(), p.fault) for p in posts] == [
                ("p-1", error("fatal_error", applied=True)),
                ("p-1", None),
            ]
            assert control.duplicates() == {"p-1": 2}
            assert control.duplicates(key=lambda p: p.channel) == {CH: 2}
            requests = control.requests()
            assert [(r.status, r.fault_source, r.metadata_id) for r in requests] == [
                (429, "script", "p-1"),
                (200, "script", "p-1"),
                (200, None, "p-1"),
            ]
            assert [w.retry_after for w in control.retry_waits()] == [3]
            control.chaos("chat.postMessage", {http_error(503): 1.0}, seed=3)
            with pytest.raises(SlackApiError) as chaos:
                web.chat_postMessage(channel=CH, text="x")
            assert chaos.value.response.status_code == 503
            control.clear_faults()
            control.rate_limit(per_channel_per_s=0.05, retry_after=2)  # 20 s: the next is in it
            web.chat_postMessage(channel=CH, text="y")
            with pytest.raises(SlackApiError) as capped:
                web.chat_postMessage(channel=CH, text="z")
            assert capped.value.response.status_code == 429
            control.unknown_user("U404")
            with pytest.raises(SlackApiError):
                web.conversations_open(users=["U404"])
            control.archive(CH)
            control.clear_faults()
            with pytest.raises(SlackApiError) as archived:
                web.chat_postMessage(channel=CH, text="x")
            assert archived.value.response.get("error") == "is_archived"
            with pytest.raises(httpx.HTTPStatusError):
                control.archive("C404")
            control.reset()
            assert control.posts() == [] and control.requests() == []
        proc.terminate()
        assert proc.wait(timeout=PROCESS_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
