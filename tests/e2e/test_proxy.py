"""The fault tests' RESP proxy (tests/e2e/proxy.py) against a redis-server of the test's own:
it passes commands through, loses exactly the reply it is asked to (after Redis ran the
command), refuses a command with a reset, and resets every open connection at once."""

from __future__ import annotations

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from bench.chaos import RedisServer
from tests.e2e.proxy import Action, Incomplete, Link, RespProxy, command_end, reply_end

pytestmark = pytest.mark.e2e


def client(proxy: RespProxy, retries: int = 0) -> redis.Redis:
    return redis.Redis.from_url(
        proxy.url(), socket_timeout=5, retry=Retry(NoBackoff(), retries=retries)
    )


def test_the_resp_readers_find_each_command_and_reply_boundary() -> None:
    """Commands and replies split at their boundaries, nested arrays and nulls included, and
    a buffer that ends inside one is incomplete."""
    buf = bytearray(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n")
    words, end = command_end(buf)
    assert (words, command_end(buf, end)[0]) == ([b"GET", b"k"], [b"PING"])
    replies = bytearray(b"*3\r\n:1\r\n$-1\r\n*1\r\n$2\r\nab\r\n+OK\r\n")
    first = reply_end(replies)
    assert replies[first:] == b"+OK\r\n"
    with pytest.raises(Incomplete):
        reply_end(bytearray(b"$5\r\nab"))


def test_a_lost_reply_ran_on_redis_and_the_client_saw_a_reset(server: RedisServer) -> None:
    """The first INCRBY's reply is lost: Redis ran it (the counter is 1), the client got a
    connection error; with one retry allowed, redis-py re-sends a lost one (2, then 3)."""
    lost: list[int] = []

    def rule(link: Link, command: list[bytes]) -> Action:
        if command[0].upper() == b"INCRBY" and not lost:
            lost.append(link.number)
            return Action.LOSE_REPLY
        return Action.PASS

    proxy = RespProxy(server.port, rule).start()
    direct = server.client()
    try:
        c = client(proxy)
        with pytest.raises(redis.ConnectionError):
            c.incr("n")
        assert direct.get("n") == b"1"
        lost.clear()
        retried = client(proxy, retries=1)
        assert retried.incr("n") == 3  # its first try ran (2), the re-sent one too (3)
        assert proxy.counts["lost_replies"] == 2
        c.close()
        retried.close()
    finally:
        direct.close()
        proxy.stop()


def test_a_reset_command_never_reaches_redis(server: RedisServer) -> None:
    """A SET the rule resets is not applied and the client sees a connection error; later
    commands on a new connection pass."""

    def rule(_link: Link, command: list[bytes]) -> Action:
        return Action.RESET if command[:2] == [b"SET", b"refused"] else Action.PASS

    proxy = RespProxy(server.port, rule).start()
    direct = server.client()
    try:
        c = client(proxy)
        with pytest.raises(redis.ConnectionError):
            c.set("refused", 1)
        assert c.set("fine", 1)
        assert direct.exists("refused", "fine") == 1
        assert proxy.counts["reset_commands"] == 1
        c.close()
    finally:
        direct.close()
        proxy.stop()


def test_reset_all_resets_every_open_connection(server: RedisServer) -> None:
    """Two clients with a connection each: `reset_all` resets both (redis-py finds an idle
    pooled connection reset when it takes it, and connects again: two new connections)."""
    proxy = RespProxy(server.port).start()
    try:
        clients = [client(proxy), client(proxy)]
        for c in clients:
            assert c.ping()
        assert proxy.counts["connections"] == 2
        assert proxy.reset_all() == 2
        for c in clients:
            assert c.ping()
            c.close()
        assert proxy.counts["connections"] == 4
    finally:
        proxy.stop()
