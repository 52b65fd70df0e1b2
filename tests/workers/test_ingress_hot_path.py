"""The cheaper steps of the Slack webhook's hot path (issue 27) give the answers of the steps
they replaced: the group commit's packer writes the bytes redis-py writes, the surrogate
pre-check never lets a lone surrogate through, a Celery message is filled in as before, one
deadline covers a batch's replies, and the provider routes are tried before the /v1 routers."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import Any
from unittest import mock

import pytest
import redis.asyncio as aioredis
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.asyncio.connection import Connection
from redis.exceptions import DataError
from redis.exceptions import TimeoutError as RedisTimeout
from starlette.routing import Route

from workers import broker
from workers.broker import celery_body, celery_message, foreign_message
from workers.ingress.http import may_hold_surrogate, parse_json
from workers.ingress.intake import GroupCommit, packed
from workers.queues import TASK_QUEUE, Task, task_id

# ------------------------------------------------------------------ the packer


def _redis_py(commands: list[tuple[Any, ...]], conn: Connection) -> bytes:
    return b"".join(bytes(chunk) for chunk in conn.pack_commands(commands))


ARG = st.one_of(
    st.text(max_size=300),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.binary(max_size=300),
    st.floats(allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(ARG, max_size=20), min_size=1, max_size=5))
def test_the_packer_writes_the_bytes_redis_py_writes(args: list[list[Any]]) -> None:
    conn = Connection()
    commands = [("EVALSHA", "f" * 40, *a) for a in args]
    assert packed(commands, conn.encoder) == _redis_py(commands, conn)


def test_the_packer_takes_what_redis_py_takes_and_refuses_what_it_refuses() -> None:
    conn = Connection()
    big = "é" * 100_000  # past redis-py's buffer cutoff: it sends it as a chunk of its own
    commands = [("EVALSHA", "x", 1, "k", big, memoryview(b"mv"), bytearray(b"ba"), 2.5)]
    assert packed(commands, conn.encoder) == _redis_py(commands, conn)
    for bad in (True, None, object()):
        with pytest.raises(DataError):
            packed([("EVALSHA", bad)], conn.encoder)
    # A connection that encodes otherwise is followed, not assumed to be UTF-8.
    latin = Connection(encoding="latin-1")
    assert packed([("SET", "k", "é")], latin.encoder) == _redis_py([("SET", "k", "é")], latin)


# ------------------------------------------------------------------ the surrogate pre-check


def _full(raw: bytes) -> object:
    """`parse_json` as it was: decode, then encode the whole document again to find one."""
    data = json.loads(raw)
    json.dumps(data, ensure_ascii=False).encode("utf-8")
    return data


PIECES = st.sampled_from(
    [
        b'"a"',
        b'"\\ud800"',
        b'"\\uDBFF"',
        b'"x\\udc00y"',
        b'"\\ud83d\\ude00"',
        b'"\\\\ud800"',  # an escaped backslash and the text "ud800": no surrogate
        '"\U0001f600 é 한"'.encode(),
        b'"\xed\xa0\x80"',  # a surrogate written in UTF-8: json.loads takes it (surrogatepass)
        b'"\xed\x9f\xbf"',  # U+D7FF, a Hangul syllable: an 0xED lead byte, no surrogate
        b"1",
        b"null",
    ]
)


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    items = draw(st.lists(PIECES, max_size=6))
    raw = b"[" + b",".join(items) + b"]"
    encoding = draw(st.sampled_from(["utf-8", "utf-16", "utf-16-le", "utf-32-be", "bom"]))
    if encoding == "utf-8":
        return raw
    text = raw.decode("utf-8", "surrogatepass")
    if encoding == "bom":
        return b"\xef\xbb\xbf" + raw
    return text.encode(encoding, "surrogatepass")


@settings(max_examples=500, deadline=None)
@given(documents())
def test_no_lone_surrogate_passes_the_pre_check(raw: bytes) -> None:
    """Whatever the full check refuses, `may_hold_surrogate` flags, and `parse_json` refuses;
    whatever it takes, `parse_json` gives the same value."""
    try:
        expected: object = _full(raw)
    except UnicodeEncodeError:
        assert may_hold_surrogate(raw)
        with pytest.raises(ValueError, match="surrogate"):
            parse_json(raw)
        return
    except ValueError:  # not JSON in the first place (a BOM json.loads refuses, say)
        with pytest.raises(ValueError):
            parse_json(raw)
        return
    assert parse_json(raw) == expected


def test_a_plain_slack_event_needs_no_second_encoding() -> None:
    fixture = "tests/pipeline/fixtures/slack/message_channel_mention.json"
    with open(fixture, "rb") as fh:
        raw = fh.read()
    assert not may_hold_surrogate(raw)
    assert may_hold_surrogate(raw.replace(b'"text": "', b'"text": "\\ud800', 1))


def test_nesting_too_deep_is_still_refused() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json(b"[" * 100_000 + b"]" * 100_000)


# ------------------------------------------------------------------ the Celery message


def _replaced(
    template: str,
    tid: str,
    argsrepr: str,
    payload: str | None,
    root: str | None,
    parent: str | None,
    tag: str,
) -> str:
    """The message as `_filled` built it before: one `str.replace` per slot, in turn."""
    message = (
        template.replace("@tid@", tid)
        .replace("@root@", root or tid)
        .replace('"@parent@"', json.dumps(parent))
        .replace("@argsrepr@", argsrepr)
        .replace("@origin@", f"gen{os.getpid()}@{broker._HOST}")
        .replace("@tag@", tag)
    )
    if payload is not None:
        message = message.replace('"@body@"', json.dumps(celery_body(payload)))
    return message


@pytest.mark.parametrize("task", list(Task))
@pytest.mark.parametrize("payload", [None, json.dumps({"trackingId": "t", "q": 'a "b" \\ c'})])
@pytest.mark.parametrize("ids", [(None, None), ("root-1", "parent-1")])
def test_a_message_is_filled_in_as_before(
    task: Task, payload: str | None, ids: tuple[str | None, str | None]
) -> None:
    tag = uuid.uuid4()
    with mock.patch("workers.broker._tag", return_value=str(tag)):
        ours = celery_message(task, "inbound:abc", payload, root_id=ids[0], parent_id=ids[1])
    tid = task_id("inbound:abc", TASK_QUEUE[task])
    assert ours == _replaced(
        broker._TEMPLATES[task], tid, "[inbound:abc]", payload, ids[0], ids[1], str(tag)
    )
    if payload is not None:
        assert json.loads(json.loads(ours)["body"]) == json.loads(celery_body(payload))


def test_a_delivery_tag_is_a_random_version_4_uuid() -> None:
    tags = {broker._tag() for _ in range(1000)}
    assert len(tags) == 1000
    for tag in tags:
        parsed = uuid.UUID(tag)
        assert str(parsed) == tag
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    message = json.loads(celery_message(Task.DIRECTEDNESS, "inbound:abc"))
    assert uuid.UUID(message["properties"]["delivery_tag"]).version == 4


def test_a_value_that_spells_a_slot_is_written_as_it_is() -> None:
    """One pass: an id holding the text of another slot is not filled in a second time."""
    message = json.loads(foreign_message("noop", "q", "id-@tag@-@root@", '{"a": "@tid@"}'))
    assert message["headers"]["id"] == "id-@tag@-@root@"
    assert message["headers"]["root_id"] == "id-@tag@-@root@"
    assert json.loads(message["body"])[0] == [{"a": "@tid@"}]


# ------------------------------------------------------------------ one deadline per batch


async def _stalled_batch() -> list[object]:
    """Five calls in one batch to a server that answers a connection's handshake and never
    answers a script (a Redis that stalls mid-batch); what each caller got, once the flush
    is over."""
    scripts: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readline():  # *N, then N bulk strings: $len, the bytes
            args = []
            for _ in range(int(head[1:])):
                size = int((await reader.readline())[1:])
                args.append((await reader.readexactly(size + 2))[:-2])
            if args[0].upper() == b"EVALSHA":
                scripts.append(args[-1])
            else:
                writer.write(b"+OK\r\n")

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = aioredis.Redis(host="127.0.0.1", port=port, socket_timeout=0.2, protocol=2)
    commit = GroupCommit(client, "return 1")
    commit.sha = "0" * 40  # no SCRIPT LOAD: the stall is on the batch's replies
    try:
        results = await asyncio.gather(
            *(commit.call([0, i]) for i in range(5)), return_exceptions=True
        )
        assert commit.flushing is None
        assert sorted(scripts) == [b"0", b"1", b"2", b"3", b"4"]  # every call was sent
        return list(results)
    finally:
        await client.aclose()
        server.close()


def test_a_stalled_batch_fails_every_caller_with_redis_s_timeout() -> None:
    results = asyncio.run(_stalled_batch())
    assert len(results) == 5
    assert all(isinstance(r, RedisTimeout) for r in results), results


async def _in_order(redis_url: str, args: list[str]) -> list[object]:
    client = aioredis.Redis.from_url(redis_url, socket_timeout=2)
    script = "if ARGV[1] == 'bad' then return redis.error_reply('no') end return ARGV[1]"
    commit = GroupCommit(client, script)
    try:
        return list(
            await asyncio.gather(*(commit.call([0, a]) for a in args), return_exceptions=True)
        )
    finally:
        await client.aclose()


def test_a_batch_s_replies_come_back_in_order(redis_url: str) -> None:
    results = asyncio.run(_in_order(redis_url, ["a", "bad", "c", "é"]))
    assert results[0] == b"a" and results[2] == b"c" and results[3] == "é".encode()
    assert isinstance(results[1], Exception) and "no" in str(results[1])


# ------------------------------------------------------------------ the route order


def test_the_provider_routes_are_tried_before_the_v1_routers(redis_url: str) -> None:
    from workers import bootstrap
    from workers.celery_app import create_app
    from workers.ingress.app import create_ingress
    from workers.settings import Settings

    settings = Settings(redis_url=redis_url, api_token="t")
    app = create_app(settings, register=False)
    api = create_ingress(bootstrap.build_container(settings, app=app), app)
    paths = [getattr(r, "path", None) if isinstance(r, Route) else None for r in api.routes]
    first_router = paths.index(None)
    for path in ("/webhooks/slack", "/webhooks/slack/interactions", "/webhooks/github"):
        assert paths.index(path) < first_router, paths
