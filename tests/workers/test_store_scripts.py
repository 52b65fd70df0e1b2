"""A store's script on a client of redis-py's own connections goes to one of the pool's
connections directly (workers/stores/scripts.py `StoreScript`): it must answer as redis-py's
`Script` answers, load itself when Redis does not hold it (as after a restart), ride out a
dropped connection under the client's retry policy without running twice, and give its
connection back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import fakeredis
import pytest
import redis

from workers.bootstrap import redis_client
from workers.stores.scripts import StoreScript, source

ECHO = """
if ARGV[1] == 'error' then return redis.error_reply('NOENTRY ' .. KEYS[1]) end
if ARGV[1] == 'nil' then return false end
local n = redis.call('INCR', KEYS[1])
return {n, ARGV[1], {KEYS[1], 'nested'}, #ARGV}
"""


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    """The workers' own client (its timeouts and retry policy) on a flushed test database."""
    c = redis_client(redis_url)
    c.flushdb()
    yield c
    c.flushdb()
    c.close()


def test_it_answers_as_redis_pys_script_does(client: redis.Redis) -> None:
    mine, theirs = StoreScript(client, ECHO), client.register_script(ECHO)
    assert mine.direct
    assert mine(["a"], ["x", "y"]) == [1, b"x", [b"a", b"nested"], 2]
    assert theirs(["a"], ["x", "y"]) == [2, b"x", [b"a", b"nested"], 2]
    assert mine(["a"], ["nil"]) is None is theirs(["a"], ["nil"])
    with pytest.raises(redis.ResponseError, match=r"^NOENTRY a$"):
        mine(["a"], ["error"])
    with pytest.raises(redis.ResponseError, match=r"^NOENTRY a$"):
        theirs(["a"], ["error"])
    assert mine(["a"], ["x"])[0] == 3  # the connection is clean after an error reply


def test_it_does_not_take_redis_pys_command_path(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What it is for: one EVALSHA on a pooled connection, not `execute_command`'s layers."""
    s = StoreScript(client, ECHO)
    s(["warm"], ["x"])

    def refused(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("went through execute_command")

    monkeypatch.setattr(redis.Redis, "execute_command", refused)
    assert s(["a"], ["x"])[0] == 1


def test_a_script_redis_does_not_hold_is_loaded_and_sent_again(client: redis.Redis) -> None:
    """As after a Redis restart (a script text never loaded here: no SCRIPT FLUSH, which
    would reach every other test on the server)."""
    s = StoreScript(client, f"-- {uuid.uuid4()}\n{source('guard_tally')}")
    assert client.script_exists(s.sha) == [False]
    assert s(["d", "w", "s", "r", "p"], ["1796347331183", "0"]) == [0, -1, 0, 0, 0]
    assert client.script_exists(s.sha) == [True]


def test_a_dropped_connection_is_retried_and_the_script_runs_once(
    client: redis.Redis, redis_url: str
) -> None:
    s = StoreScript(client, ECHO)
    assert s(["n"], ["x"])[0] == 1
    # The pool's one connection, named so that only it is killed (the server is shared with
    # every other test running now).
    name = f"store-script-test-{uuid.uuid4().hex}"
    client.client_setname(name)
    killer = redis.Redis.from_url(redis_url)
    mine = [c for c in killer.client_list() if c["name"] == name]
    assert len(mine) == 1, "the script's connection is not in CLIENT LIST"
    killer.client_kill_filter(_id=mine[0]["id"])
    assert s(["n"], ["x"])[0] == 2  # reconnected under the retry policy, run once
    assert client.get("n") == b"2"
    assert name not in [c["name"] for c in killer.client_list()]  # a new connection it was
    killer.close()


def test_its_connection_goes_back_to_the_pool(client: redis.Redis) -> None:
    s = StoreScript(client, ECHO)
    for _ in range(20):
        s(["n"], ["x"])
    with pytest.raises(redis.ResponseError):
        s(["n"], ["error"])
    pool = client.connection_pool
    assert isinstance(pool, redis.ConnectionPool)
    assert pool._in_use_connections == set()
    assert len(pool._available_connections) == 1


def test_in_a_pipeline_and_on_fakeredis_it_is_redis_pys_script(client: redis.Redis) -> None:
    s = StoreScript(client, ECHO)
    pipe = client.pipeline()
    s(["p"], ["x"], client=pipe)
    s(["p"], ["x"], client=pipe)
    assert [r[0] for r in pipe.execute()] == [1, 2]

    fake = fakeredis.FakeRedis()
    on_fake = StoreScript(fake, ECHO)
    assert not on_fake.direct
    assert on_fake(["f"], ["x"]) == [1, b"x", [b"f", b"nested"], 1]
