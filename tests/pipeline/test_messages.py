"""The pure rules of the seats' messages (pipeline/messages.py): recipients, body, client id,
ids and fingerprints, cursors and page sizes."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline import messages as rules

SEATS = {"scout", "sage", "tally"}


def plan(**over: object) -> rules.Outgoing:
    args: dict[str, Any] = {
        "sender": "scout",
        "to": ["sage"],
        "body": "hello",
        "thread_id": None,
        "client_message_id": "c-1",
        "seat_ids": SEATS,
    }
    return rules.plan(**{**args, **over})


def refused(**over: object) -> rules.Refused:
    with pytest.raises(rules.Refused) as info:
        plan(**over)
    return info.value


def test_a_send_is_deterministic_and_skips_the_sender() -> None:
    out = plan(to=["sage", "scout", "tally", "sage"])
    assert out.recipients == ("sage", "tally") and out.skipped == ("scout",)
    assert out.message_id == rules.message_id("scout", "c-1") == plan().message_id
    assert out.message_id != rules.message_id("sage", "c-1")
    assert plan(to=["tally", "sage"]).fingerprint == plan(to=["sage", "tally"]).fingerprint
    assert plan(body="other").fingerprint != plan().fingerprint
    assert plan(thread_id="msg-x").fingerprint != plan().fingerprint


@pytest.mark.parametrize(
    ("over", "code", "field", "status"),
    [
        ({"to": []}, "no_recipients", "to", 422),
        ({"to": [f"s{i}" for i in range(21)]}, "too_many_recipients", "to", 422),
        ({"to": ["sage", "ghost", "ava"]}, "unknown_recipient", "to", 422),
        ({"to": ["project"]}, "project_send_not_allowed", "to", 403),
        ({"to": ["scout"]}, "only_yourself", "to", 422),
        ({"body": ""}, "empty_body", "body", 422),
        ({"body": "  \n"}, "empty_body", "body", 422),
        ({"body": "x" * 2001}, "body_too_long", "body", 422),
        ({"body": "token ghp_" + "a1" * 20}, "credential_in_body", "body", 422),
        ({"client_message_id": ""}, "invalid_client_message_id", "client_message_id", 422),
        ({"client_message_id": "a" * 65}, "invalid_client_message_id", "client_message_id", 422),
        ({"client_message_id": "a b"}, "invalid_client_message_id", "client_message_id", 422),
        ({"client_message_id": "ok\n"}, "invalid_client_message_id", "client_message_id", 422),
        ({"client_message_id": "é"}, "invalid_client_message_id", "client_message_id", 422),
    ],
)
def test_bad_sends_are_refused_naming_the_field(
    over: dict[str, Any], code: str, field: str, status: int
) -> None:
    exc = refused(**over)
    assert (exc.code, exc.field, exc.status) == (code, field, status)
    assert field in exc.message


def test_limits_are_inclusive() -> None:
    assert plan(body="€" * 2000, client_message_id="A_b-9" * 12 + "abcd").recipients == ("sage",)
    assert refused(to=["sage", "ghost", "nobody"]).extra["unknown"] == ["ghost", "nobody"]
    assert plan(to=["sage"] * 20).recipients == ("sage",)


def test_a_cursor_round_trips_only_in_its_thread() -> None:
    cursor = rules.encode_cursor("msg-a", 1234)
    assert rules.decode_cursor(cursor, "msg-a") == 1234
    for bad, thread in ((cursor, "msg-b"), ("nope", "msg-a"), ("WzEsMl0=", "msg-a")):
        with pytest.raises(rules.Refused) as info:
            rules.decode_cursor(bad, thread)
        assert info.value.field == "cursor"


def test_a_rate_refusal_says_when() -> None:
    exc = rules.rate_refusal(10_000, 12_000, 0)
    assert exc.status == 429 and exc.extra["retryAfterMs"] == 2_000
    assert exc.extra["nextAllowedAtMs"] == 12_000 and "5 seconds" in exc.message
    hourly = rules.rate_refusal(10_000, 0, 50_000)
    assert hourly.extra["nextAllowedAtMs"] == 50_000 and "60 messages" in hourly.message


def test_the_inbox_item_is_a_directed_message() -> None:
    doc = rules.message_doc(
        message_id="msg-b",
        thread_id="msg-a",
        reply_to="msg-a",
        sender="scout",
        recipients=["sage"],
        body="hi",
        sent_at_ms=5,
    )
    item = rules.inbox_item(doc, "sage")
    wire = item.model_dump_json(by_alias=True)
    assert wire.startswith('{"position":0,')
    assert item.candidate.msg is not None and item.candidate.msg.parent_author_id == "sage"
    assert item.candidate.ids.thread_root_id == "msg-a" and item.surface == rules.SURFACE
