"""A TCP proxy in front of a redis-server, for the fault tests that need the network between a
worker and Redis to fail at a chosen moment: `RespProxy`.

It passes bytes through both ways and reads the RESP stream enough to know where each
command and each reply starts and ends, so that a rule (a function of the connection and the
command) can decide, command by command:

- `PASS`: forward it;
- `RESET`: forward nothing of it, and reset (RST) the connection both ways: the command never
  reaches Redis, the client sees `ConnectionResetError`;
- `LOSE_REPLY`: forward it, wait until Redis has answered it (so it ran), then reset the
  client's side instead of passing that reply on: the command ran, the client never hears so.

`reset_all()` resets every connection open at that moment (each live one gets an RST), as a
network blip does. The proxy runs an asyncio loop on a thread of its own; its methods are for
the test's thread. It never interprets a reply beyond its boundaries, so it works for pub/sub
and blocking commands too (a rule only ever asks to lose the reply of a command that has one).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum


class Action(Enum):
    PASS = "pass"
    RESET = "reset"
    LOSE_REPLY = "lose_reply"


class Incomplete(Exception):
    """The buffer ends inside a command or a reply: wait for more bytes."""


def _line(buf: bytearray | bytes, at: int) -> tuple[bytes, int]:
    end = buf.find(b"\r\n", at)
    if end < 0:
        raise Incomplete
    return bytes(buf[at:end]), end + 2


def command_end(buf: bytearray, at: int = 0) -> tuple[list[bytes], int]:
    """The command starting at `at` (its words) and where it ends. redis-py sends arrays of
    bulk strings; an inline command (a plain line) is read as words split on spaces."""
    if at >= len(buf):
        raise Incomplete
    if buf[at : at + 1] != b"*":
        line, end = _line(buf, at)
        return line.split(), end
    head, pos = _line(buf, at)
    words = []
    for _ in range(int(head[1:])):
        size_line, pos = _line(buf, pos)
        if size_line[:1] != b"$":
            raise ValueError(f"not a RESP bulk string in a command: {size_line[:20]!r}")
        size = int(size_line[1:])
        if pos + size + 2 > len(buf):
            raise Incomplete
        words.append(bytes(buf[pos : pos + size]))
        pos += size + 2
    return words, pos


_LINE_TYPES = frozenset(b"+-:_,#(")
_BULK_TYPES = frozenset(b"$=!")
_AGGREGATES = {ord("*"): 1, ord("~"): 1, ord(">"): 1, ord("%"): 2, ord("|"): 2}


def reply_end(buf: bytearray, at: int = 0) -> int:
    """Where the reply (RESP2 or RESP3) starting at `at` ends."""
    if at >= len(buf):
        raise Incomplete
    kind = buf[at]
    head, pos = _line(buf, at)
    if kind in _LINE_TYPES:
        return pos
    if kind in _BULK_TYPES:
        size = int(head[1:])
        if size < 0:
            return pos
        if pos + size + 2 > len(buf):
            raise Incomplete
        return pos + size + 2
    if kind in _AGGREGATES:
        count = int(head[1:])
        for _ in range(max(count, 0) * _AGGREGATES[kind]):
            pos = reply_end(buf, pos)
        if kind == ord("|"):  # an attribute precedes the reply it describes
            pos = reply_end(buf, pos)
        return pos
    raise ValueError(f"not a RESP reply: {bytes(buf[at : at + 20])!r}")


def _rst(transport: asyncio.BaseTransport | None) -> None:
    """Close with an RST rather than a FIN (linger on, timeout 0), as a peer that vanished."""
    if transport is None or transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()  # type: ignore[attr-defined]


Rule = Callable[["Link", list[bytes]], Action]


def passthrough(_link: Link, _command: list[bytes]) -> Action:
    return Action.PASS


@dataclass
class Link:
    """One client connection and its own connection to Redis."""

    number: int
    proxy: RespProxy
    client: asyncio.Transport | None = None
    upstream: asyncio.Transport | None = None
    inbound: bytearray = field(default_factory=bytearray)  # client bytes not yet parsed
    outbound: bytearray = field(default_factory=bytearray)  # Redis bytes not yet parsed
    waiting: bytearray = field(default_factory=bytearray)  # parsed, held until upstream is up
    forwarded: int = 0  # commands passed to Redis
    replied: int = 0  # replies read from Redis
    lose_at: int | None = None  # the index of the reply to lose, then reset
    closed: bool = False

    def from_client(self, data: bytes) -> None:
        if self.closed:
            return
        self.inbound += data
        out = bytearray()
        at = 0
        while self.lose_at is None:
            try:
                words, end = command_end(self.inbound, at)
            except Incomplete:
                break
            action = self.proxy.rule(self, words) if words else Action.PASS
            if action is Action.RESET:
                self.proxy.count("reset_commands")
                self._send_upstream(out)
                self.close()
                return
            out += self.inbound[at:end]
            if action is Action.LOSE_REPLY:
                # What the client sent after it (pipelined) never reaches Redis.
                self.lose_at = self.forwarded
            self.forwarded += 1
            at = end
        del self.inbound[:at]
        if self.lose_at is not None:
            self.inbound.clear()
        self._send_upstream(out)

    def _send_upstream(self, out: bytearray) -> None:
        if not out:
            return
        if self.upstream is None:
            self.waiting += out
        else:
            self.upstream.write(bytes(out))

    def upstream_ready(self, transport: asyncio.Transport) -> None:
        self.upstream = transport
        if self.closed:
            _rst(transport)
            return
        if self.waiting:
            transport.write(bytes(self.waiting))
            self.waiting.clear()

    def from_upstream(self, data: bytes) -> None:
        if self.closed:
            return
        self.outbound += data
        at = 0
        # Every reply is counted (a rule may ask for the next one to be lost); a reply with
        # no command (a pub/sub message) is counted too, and never asked for.
        while self.lose_at is None or self.replied < self.lose_at:
            try:
                at = reply_end(self.outbound, at)
            except Incomplete:
                break
            self.replied += 1
        if at and self.client is not None:
            self.client.write(bytes(self.outbound[:at]))
        del self.outbound[:at]
        if self.lose_at is not None and self.replied == self.lose_at:
            try:
                reply_end(self.outbound, 0)
            except Incomplete:
                return
            self.proxy.count("lost_replies")  # Redis answered it: it ran; the client never hears
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        _rst(self.client)
        _rst(self.upstream)
        self.proxy.links.pop(self.number, None)


def _guarded(link: Link, handle: Callable[[bytes], None], data: bytes) -> None:
    """`handle(data)`; bytes that are not RESP are counted and end the connection (a test
    that reads `counts` sees it) rather than stalling it unseen."""
    try:
        handle(data)
    except ValueError:
        link.proxy.count("not_resp")
        link.close()


class _ClientSide(asyncio.Protocol):
    def __init__(self, proxy: RespProxy) -> None:
        self.proxy = proxy
        self.link: Link | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.link = self.proxy.open_link(transport)

    def data_received(self, data: bytes) -> None:
        assert self.link is not None
        _guarded(self.link, self.link.from_client, data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.link is not None:
            self.link.close()


class _UpstreamSide(asyncio.Protocol):
    def __init__(self, link: Link) -> None:
        self.link = link

    def data_received(self, data: bytes) -> None:
        _guarded(self.link, self.link.from_upstream, data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.link.close()


class RespProxy:
    """A proxy on a free local port in front of `upstream_port`; `rule` decides per command
    (set or replace it at any time; it runs on the proxy's thread and must not block)."""

    def __init__(self, upstream_port: int, rule: Rule = passthrough) -> None:
        self.upstream_port = upstream_port
        self.port = 0  # bound at `start`, by the kernel: no race for a free port
        self.rule = rule
        self.links: dict[int, Link] = {}
        self.counts: dict[str, int] = {}
        self._opened = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def open_link(self, client: asyncio.Transport) -> Link:
        self._opened += 1
        link = Link(self._opened, self, client=client)
        self.links[link.number] = link
        self.count("connections")
        self._loop.create_task(self._connect(link))
        return link

    async def _connect(self, link: Link) -> None:
        try:
            transport, _ = await self._loop.create_connection(
                lambda: _UpstreamSide(link), "127.0.0.1", self.upstream_port
            )
        except OSError:  # Redis is down: the client sees its connection reset
            link.close()
            return
        link.upstream_ready(transport)

    def start(self) -> RespProxy:
        self._thread.start()
        server = self._call(self._loop.create_server(lambda: _ClientSide(self), "127.0.0.1", 0))
        assert isinstance(server, asyncio.Server)
        self._server = server
        self.port = int(server.sockets[0].getsockname()[1])
        return self

    def _call(self, coro: object) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)  # type: ignore[arg-type]

    def reset_all(self) -> int:
        """RST every connection open now; how many there were."""

        async def reset() -> int:
            links = list(self.links.values())
            for link in links:
                link.close()
            self.count("reset_all_connections", len(links))
            return len(links)

        found = self._call(reset())
        assert isinstance(found, int)
        return found

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for link in list(self.links.values()):
                link.close()

        if self._thread.is_alive():
            self._call(close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop.close()
