"""How the ingress journals an event and enqueues its first task before it answers 2xx.

Two ways, one contract (`Intake.accept`):

- `RedisIntake`, when the Celery broker IS the stores' Redis (the default: only
  SEATWIRE_REDIS_URL set). The journal entry and the Celery message are written by one Lua
  script (workers/stores/lua/journal_enqueue.lua): atomic, one round trip, awaited on the
  event loop.
  Celery's `send_task` costs about 0.4 ms of CPU a message and a worker thread per request;
  this is what lets one ingress process keep up with Slack. The message is Celery's protocol-2
  message exactly as kombu's Redis transport stores it (`celery_message`, workers/broker.py);
  tests/workers/test_intake.py pins it to what Celery itself writes.
- `CeleryIntake`, for any other broker (another Redis, RabbitMQ, the embedded in-memory one):
  journal, then Celery's publish, then mark the entry enqueued, in a worker thread.

Either way a repeat of an event is a no-op, an entry journalled earlier but never enqueued is
enqueued by the repeat, and a repeat with other content (`fingerprint`) is a conflict that
changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import redis.asyncio as aioredis
from celery import Celery
from fastapi.concurrency import run_in_threadpool
from redis._parsers import Encoder
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeout

from workers.broker import EMBED, INGRESS_PUBLISH_RETRY, celery_message, publish
from workers.broker import shares_broker as shares_broker  # where it was defined until issue 14
from workers.queues import TASK_QUEUE, Task
from workers.settings import Settings
from workers.stores import keys
from workers.stores.journal import Journal
from workers.stores.scripts import source, text

Verb = Literal["new", "requeued", "duplicate", "conflict"]


@dataclass(frozen=True)
class Enqueued:
    verb: Verb
    state: str  # the journal entry's state (before this call, for a repeat)

    @property
    def new(self) -> bool:
        return self.verb == "new"


@dataclass(frozen=True)
class Arrival:
    """One event or report to journal and enqueue: its first task, its journal entry's
    tracking id, kind and seat, the envelope (`payload`, JSON), and the fingerprint that
    tells a changed repeat (409) from a plain one ('' when any repeat is plain)."""

    task: Task
    tracking_id: str
    kind: str
    seat_id: str
    payload: str
    fingerprint: str
    now_ms: int


class Intake(Protocol):
    async def accept(self, arrival: Arrival) -> Enqueued: ...

    async def aclose(self) -> None: ...


class GroupCommit:
    """The scripts of concurrent requests, sent to Redis as one pipeline per round trip.

    A request queues its script call and awaits its own reply. One flush at a time is in
    flight; whatever arrives meanwhile goes in the next one, so under load a round trip
    carries many events and costs each a fraction of a command's client overhead (redis-py's
    per-command work is most of what an accept costs). Each script is atomic on its own and
    idempotent for its event, so a batch that fails is failed back to every caller (a 503;
    the sender retries) and a batch re-sent after NOSCRIPT changes nothing twice.
    """

    def __init__(
        self, client: aioredis.Redis, source: str, *, timeout_s: float | None = None
    ) -> None:
        self.client = client
        self.source = source
        # One deadline for a whole round trip (the connection, the write, every reply); None:
        # the client's socket timeout.
        self.timeout_s = timeout_s
        self.sha: str | None = None
        self.pending: list[tuple[list[Any], asyncio.Future[Any]]] = []
        self.flushing: asyncio.Task[None] | None = None
        # The connection the flushes use, kept from one to the next (one flush at a time):
        # taking it from the pool and giving it back cost each round trip the pool's lock,
        # its readiness check and its bookkeeping.
        self.conn: Any = None

    async def call(self, args: list[Any]) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending.append((args, future))
        if self.flushing is None:
            self.flushing = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        try:
            while self.pending:
                batch, self.pending = self.pending, []
                try:
                    replies = await self._run(batch)
                except Exception as exc:  # the connection failed: every caller learns it
                    replies = [exc] * len(batch)
                for (_, future), reply in zip(batch, replies, strict=True):
                    if future.done():  # its request gave up (budget): the reply is unread
                        continue
                    if isinstance(reply, Exception):
                        future.set_exception(reply)
                    else:
                        future.set_result(reply)
        finally:
            self.flushing = None

    async def _pipelined(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send every command in one write on one connection and read each reply in order;
        an error reply is returned in its place (the stream stays aligned). redis-py's
        connection API without its Pipeline object, whose per-command bookkeeping was most of
        an accept's client cost. A broken or timed-out connection is dropped, the error raised.

        One deadline covers the round trip (the client's socket timeout, or `timeout_s`),
        rather than one timer per reply (redis-py's own read sets one up for every reply it
        reads) and a task for the write (redis-py waits for a write with `wait_for` when the
        client has a socket timeout: PerLoop's clients have none, the deadline is here)."""
        pool = self.client.connection_pool
        conn = self.conn
        deadline = self.timeout_s
        if deadline is None:
            deadline = pool.connection_kwargs.get("socket_timeout")
        try:
            async with asyncio.timeout(deadline):
                if conn is None:
                    # redis-py leaves ConnectionPool.get_connection unannotated.
                    conn = self.conn = await pool.get_connection()  # type: ignore[no-untyped-call]
                await conn.send_packed_command(packed(commands, conn.encoder))
                replies: list[Any] = []
                for _ in commands:
                    try:
                        replies.append(await conn.read_response(timeout=math.inf))
                    except ResponseError as exc:
                        replies.append(exc)
            return replies
        except BaseException as exc:
            await self._drop()
            if isinstance(exc, TimeoutError):
                raise RedisTimeout(f"Timeout reading {len(commands)} replies from Redis") from None
            raise

    async def _drop(self) -> None:
        """Close the flushes' connection (a failed round trip may have left replies unread)
        and give it back to the pool; the next flush takes a fresh one."""
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                await conn.disconnect()
            finally:
                await self.client.connection_pool.release(conn)

    async def aclose(self) -> None:
        """Wait for the flush in flight, then give the connection back."""
        if self.flushing is not None:
            await asyncio.wait([self.flushing])
        conn, self.conn = self.conn, None
        if conn is not None:
            await self.client.connection_pool.release(conn)

    async def _run(self, batch: list[tuple[list[Any], asyncio.Future[Any]]]) -> list[Any]:
        for _ in range(2):
            if self.sha is None:
                async with asyncio.timeout(self.timeout_s):
                    self.sha = str(await self.client.script_load(self.source))
            replies = await self._pipelined([("EVALSHA", self.sha, *args) for args, _ in batch])
            if not any(isinstance(r, NoScriptError) for r in replies):
                return replies
            self.sha = None  # Redis restarted without the script: load it, send again
        return replies


def packed(commands: list[tuple[Any, ...]], encoder: Encoder) -> bytes:
    """`commands` in Redis's protocol: the bytes redis-py's `pack_commands` sends for them.
    Its packer joins each argument onto the bytes packed so far, copying them again per
    argument: 9 µs for a Slack event's script call (fifteen arguments, two of them the
    event's JSON), 4 µs here (issue 27). Each argument is encoded once, by the connection's
    encoder (a str straight to UTF-8 when that is what it would do), and the whole is joined
    once. Each command's name is one word (EVALSHA): redis-py would split a name with a space
    in it ("CONFIG GET"), this does not."""
    utf8 = encoder.encoding == "utf-8" and encoder.encoding_errors == "strict"
    encode: Callable[[Any], bytes | bytearray | memoryview] = encoder.encode
    out: list[bytes] = []
    for command in commands:
        out.append(b"*%d\r\n" % len(command))
        for arg in command:
            data = arg.encode() if utf8 and type(arg) is str else bytes(encode(arg))
            out += (b"$%d\r\n" % len(data), data, b"\r\n")
    return b"".join(out)


class PerLoop:
    """One `GroupCommit` per event loop on one Redis URL (a connection belongs to the loop
    that opened it), each with the given timeouts and retry budget; `aclose` closes this
    loop's after its last flush."""

    def __init__(
        self, url: str, source: str, *, timeout_s: float, retry_cap_s: float, retries: int
    ) -> None:
        self.url = url
        self.source = source
        self.timeout_s = timeout_s
        self.retry = (retry_cap_s, retries)
        self._clients: dict[asyncio.AbstractEventLoop, GroupCommit] = {}

    def here(self) -> GroupCommit:
        loop = asyncio.get_running_loop()
        found = self._clients.get(loop)
        if found is None:
            cap, retries = self.retry
            client = aioredis.Redis.from_url(
                self.url,
                # No socket timeout: the group commit puts one deadline on each round trip.
                socket_timeout=None,
                socket_connect_timeout=self.timeout_s,
                health_check_interval=30,
                retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=cap), retries=retries),
            )
            found = self._clients[loop] = GroupCommit(client, self.source, timeout_s=self.timeout_s)
        return found

    async def aclose(self) -> None:
        found = self._clients.pop(asyncio.get_running_loop(), None)
        if found is not None:
            await found.aclose()
            await found.client.aclose()


class RedisIntake:
    """Journal + enqueue in one script on the broker's own Redis, from the event loop."""

    def __init__(self, url: str, *, deadline_ms: int) -> None:
        self.url = url
        self.deadline_ms = deadline_ms
        self._loops = PerLoop(
            url, source("journal_enqueue"), timeout_s=2, retry_cap_s=0.5, retries=2
        )

    def script_call(self, arrival: Arrival) -> tuple[list[str], list[str | int]]:
        """The keys and arguments of journal_enqueue.lua for one arrival (bench.pipeline
        feeds its reports through the same call, synchronously)."""
        a = arrival
        return (
            [keys.journal(a.tracking_id), keys.JOURNAL_OPEN, TASK_QUEUE[a.task].value],
            [
                a.tracking_id,
                a.kind,
                a.seat_id,
                a.payload,
                a.now_ms,
                a.now_ms + self.deadline_ms,
                a.fingerprint,
                celery_message(a.task, a.tracking_id),
                EMBED,
            ],
        )

    async def accept(self, arrival: Arrival) -> Enqueued:
        k, args = self.script_call(arrival)
        verb, state, _stored = await self._loops.here().call([len(k), *k, *args])
        return Enqueued(verb=text(verb), state=text(state))  # type: ignore[arg-type]

    async def aclose(self) -> None:
        await self._loops.aclose()


class CeleryIntake:
    """Journal, publish through Celery, mark enqueued: for a broker that is not the stores'."""

    def __init__(self, journal: Journal, app: Celery) -> None:
        self.journal = journal
        self.app = app

    def _accept(self, arrival: Arrival) -> Enqueued:
        a = arrival
        result = self.journal.accept(
            a.tracking_id,
            kind=a.kind,
            seat_id=a.seat_id,
            payload=a.payload,
            now_ms=a.now_ms,
            fingerprint=a.fingerprint,
        )
        if not result.new and a.fingerprint and result.fingerprint not in ("", a.fingerprint):
            return Enqueued("conflict", result.state)
        if not result.new and not (result.state == "accepted" and not result.enqueued):
            return Enqueued("duplicate", result.state)
        message = json.loads(a.payload)
        if not result.new:
            stored = self.journal.get(a.tracking_id)
            message = stored["payload"] if stored else message
        publish(self.app, a.task, a.tracking_id, message, retry_policy=INGRESS_PUBLISH_RETRY)
        self.journal.mark_enqueued(a.tracking_id, a.now_ms)
        return Enqueued("new" if result.new else "requeued", result.state)

    async def accept(self, arrival: Arrival) -> Enqueued:
        return await run_in_threadpool(self._accept, arrival)

    async def aclose(self) -> None:
        return None


def intake_for(settings: Settings, journal: Journal, app: Celery) -> Intake:
    if shares_broker(settings):
        assert settings.redis_url is not None
        return RedisIntake(settings.redis_url, deadline_ms=settings.journal_deadline_ms)
    return CeleryIntake(journal, app)
