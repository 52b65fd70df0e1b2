"""A fake Slack Web API server: the oracle the outbound fault tests count duplicates with.

It owns a small, thread-safe model of one workspace (channels, DMs, messages) served over
real HTTP in Slack's wire format, a per-method fault script, and two records: every APPLIED
post (`posts()`) and every request received (`requests()`). Real worker processes talk to it
with `slack_sdk.WebClient(base_url=fake.url, token=fake.token)`. It is test code: no state
survives the process.

Two ways to run it:

    with FakeSlack() as slack:            # in-process, 127.0.0.1 and a free port
        slack.script("chat.postMessage", [rate_limited(retry_after=2), None, apply_then_reset()])
        ...                                # slack.url, slack.token; slack.posts()

    python -m tests.fake_slack --port 9090 [--token T]   # own process, until SIGTERM
        -> prints "fake-slack listening on http://127.0.0.1:9090/api/"
        driven from elsewhere with FakeSlackControl("http://127.0.0.1:9090/api/")

Wire format (as slack_sdk 3.x sends it, and as Slack accepts it): every method is reachable
with GET or POST; parameters come from the query string, an `application/x-www-form-urlencoded`
body or an `application/json` body, merged in that order. The token comes from
`Authorization: Bearer <token>` or a `token` parameter. An API error is HTTP 200 with
`{"ok": false, "error": code}`; a rate limit is HTTP 429 with `Retry-After: <seconds>`.

Methods: auth.test, conversations.open / create / invite / info / history / replies,
chat.postMessage, chat.update. Anything else is `unknown_method`.

chat.update changes a message the bot posted, in place, as Slack does: its text, its blocks
when given (left as they were when not; `[]` removes them) and its metadata when given; history
and replies show the message as last updated. Each applied update is recorded
(`updates()`: channel, ts, text, blocks); `posts()` keeps every post as it was posted.

Faults (`Fault` values, built with the functions below), scripted per API method name:

    rate_limited(retry_after)   429 + Retry-After, body error "ratelimited"     not applied
    http_error(status)          that status, a non-JSON body                    not applied
    error(code, applied=False)  200 {"ok": false, "error": code}                applied if asked
    apply_then_hang(seconds)    applied, then the answer waits `seconds`        applied
    apply_then_reset()          applied, then the TCP connection is reset       applied
    apply_then_500()            applied, then HTTP 500                          applied

`script(method, [fault | None, ...])` queues faults for the next calls; `chaos(method,
{fault: p}, seed=)` draws one per call from a seeded RNG (drawn on every call, so the n-th
draw depends only on `seed`; a non-empty script wins); `rate_limit(method, per_channel_per_s)`
answers 429 to a call that would apply within 1/N s of the last applied one in that channel.
The fault of an applying call is stored on its `Post`. "Applied" for methods other than
chat.postMessage means the method took effect (a channel opened, created, users invited).

Control API (JSON, no auth), for a fake in another process; FakeSlackControl wraps it:

    GET  /_control/info                 {url, token, bot_user_id, id_field, post_count}
    GET  /_control/posts                {posts: [Post]}
    GET  /_control/updates              {updates: [Update]}
    GET  /_control/requests             {requests: [RequestRecord]}
    GET  /_control/duplicates?field=F   {duplicates: {key: count}}
    GET  /_control/members?channel=C    {members: [user]}
    POST /_control/reset                {}                      clear everything
    POST /_control/clear_faults         {}                      scripts, chaos, limits
    POST /_control/script               {method, faults: [Fault | null]}
    POST /_control/chaos                {method, faults: [{fault, p}], seed}
    POST /_control/rate_limit           {method, per_channel_per_s, retry_after}
    POST /_control/add_channel          {channel, name, members, private, bot_member}
    POST /_control/archive              {channel}
    POST /_control/unknown_user         {user}

A Fault in JSON is `{"kind": "error", "code": "fatal_error", "applied": true, ...}` (the
dataclass fields). A bad control request answers 400 `{error}`.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import random
import re
import signal
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

import httpx

TOKEN = "xoxb-seatwire-fake"
BOT_USER_ID = "U0SEATWIREBOT"
BOT_ID = "B0SEATWIRE"
APP_ID = "A0SEATWIRE"
TEAM_ID = "T0SEATWIRE"
TEAM = "Seatwire Fake"
ID_FIELD = "idempotency_id"
POST_METHOD = "chat.postMessage"
MAX_TEXT = 40_000
MAX_CHANNEL_NAME = 80
MAX_MPIM_USERS = 8
HISTORY_LIMIT_MAX = 999
REPLIES_LIMIT_MAX = 1000
_NAME = re.compile(r"^[a-z0-9_\-]+$")


# --- faults -----------------------------------------------------------------------------------


class FaultKind(StrEnum):
    RATE_LIMITED = "rate_limited"
    HTTP_ERROR = "http_error"
    ERROR = "error"
    APPLY_THEN_HANG = "apply_then_hang"
    APPLY_THEN_RESET = "apply_then_reset"
    APPLY_THEN_500 = "apply_then_500"


_APPLYING = {FaultKind.APPLY_THEN_HANG, FaultKind.APPLY_THEN_RESET, FaultKind.APPLY_THEN_500}


@dataclass(frozen=True)
class Fault:
    """How one call is served. Build with the functions below rather than by hand."""

    kind: FaultKind
    retry_after: int = 0
    status: int = 0
    code: str = ""
    applied: bool = False
    seconds: float = 0.0

    @property
    def applies(self) -> bool:
        """Whether the call takes effect before the fault shows."""
        return self.kind in _APPLYING or (self.kind is FaultKind.ERROR and self.applied)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "kind": str(self.kind)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fault:
        return cls(
            kind=FaultKind(data["kind"]),
            retry_after=int(data.get("retry_after", 0)),
            status=int(data.get("status", 0)),
            code=str(data.get("code", "")),
            applied=bool(data.get("applied", False)),
            seconds=float(data.get("seconds", 0.0)),
        )

    def __str__(self) -> str:
        match self.kind:
            case FaultKind.RATE_LIMITED:
                return f"rate_limited(retry_after={self.retry_after})"
            case FaultKind.HTTP_ERROR:
                return f"http_error(status={self.status})"
            case FaultKind.ERROR:
                return f"error({self.code!r}, applied={self.applied})"
            case FaultKind.APPLY_THEN_HANG:
                return f"apply_then_hang(seconds={self.seconds})"
            case _:
                return f"{self.kind}()"


def rate_limited(retry_after: int = 1) -> Fault:
    """HTTP 429 with `Retry-After: retry_after` and error "ratelimited"; not applied."""
    if retry_after < 0:
        raise ValueError("retry_after must be >= 0")
    return Fault(FaultKind.RATE_LIMITED, retry_after=retry_after)


def http_error(status: int = 500) -> Fault:
    """That HTTP status with a non-JSON body, as a load balancer sends it; not applied."""
    if not 500 <= status <= 599:
        raise ValueError("http_error is for 5xx statuses")
    return Fault(FaultKind.HTTP_ERROR, status=status)


def error(code: str, *, applied: bool = False) -> Fault:
    """HTTP 200 `{"ok": false, "error": code}`; with applied=True the call took effect first."""
    if not code:
        raise ValueError("an error needs a code")
    return Fault(FaultKind.ERROR, code=code, applied=applied)


def apply_then_hang(seconds: float) -> Fault:
    """Apply, then wait `seconds` before answering normally (a shorter client times out)."""
    if seconds < 0:
        raise ValueError("seconds must be >= 0")
    return Fault(FaultKind.APPLY_THEN_HANG, seconds=seconds)


def apply_then_reset() -> Fault:
    """Apply, then reset the TCP connection without a byte of response."""
    return Fault(FaultKind.APPLY_THEN_RESET)


def apply_then_500() -> Fault:
    """Apply, then answer HTTP 500."""
    return Fault(FaultKind.APPLY_THEN_500)


FaultSource = Literal["script", "chaos", "limit"]


@dataclass
class _Chaos:
    weights: list[tuple[Fault, float]]
    rng: random.Random

    def draw(self) -> Fault | None:
        r = self.rng.random()
        for fault, p in self.weights:
            if r < p:
                return fault
            r -= p
        return None


@dataclass(frozen=True)
class _Limit:
    interval: float
    retry_after: int


# --- records ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Post:
    """One applied chat.postMessage, in the order applied."""

    seq: int
    channel: str
    ts: str
    text: str
    thread_ts: str | None
    metadata: dict[str, Any] | None
    fault: Fault | None
    applied_mono: float
    applied_wall: float
    blocks: list[Any] | None = None
    reply_broadcast: bool = False

    def payload_field(self, name: str = ID_FIELD) -> Any:
        """metadata.event_payload[name], or None."""
        return _payload_field(self.metadata, name)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "fault": self.fault.to_json() if self.fault else None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Post:
        fault = data.get("fault")
        return cls(**{**data, "fault": Fault.from_json(fault) if fault else None})


@dataclass(frozen=True)
class Update:
    """One applied chat.update, in the order applied: what the message became. `blocks` and
    `metadata` are None when the call left them as they were."""

    seq: int
    channel: str
    ts: str
    text: str
    blocks: list[Any] | None
    metadata: dict[str, Any] | None
    applied_wall: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Update:
        return cls(**data)


@dataclass(frozen=True)
class RequestRecord:
    """One Web API request as served. status 0 means the connection was reset unanswered."""

    seq: int
    method: str
    http_method: str
    mono: float
    wall: float
    channel: str | None
    metadata_id: str | None
    fault: Fault | None
    fault_source: FaultSource | None
    applied: bool
    status: int
    error: str | None
    retry_after: int | None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "fault": self.fault.to_json() if self.fault else None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RequestRecord:
        fault = data.get("fault")
        return cls(**{**data, "fault": Fault.from_json(fault) if fault else None})


@dataclass(frozen=True)
class RetryWait:
    """A 429 in a channel and how long the client waited before its next call there."""

    channel: str
    retry_after: int
    waited: float

    @property
    def margin(self) -> float:
        """waited - Retry-After; negative means the client came back too early."""
        return self.waited - self.retry_after


def retry_waits(records: Iterable[RequestRecord], method: str = POST_METHOD) -> list[RetryWait]:
    """For every 429 of `method` followed by another call to the same channel, the wait."""
    pending: dict[str, RequestRecord] = {}
    waits: list[RetryWait] = []
    for rec in sorted(records, key=lambda r: r.seq):
        if rec.method != method or rec.channel is None:
            continue
        prior = pending.pop(rec.channel, None)
        if prior is not None:
            waits.append(RetryWait(rec.channel, prior.retry_after or 0, rec.mono - prior.mono))
        if rec.status == 429:
            pending[rec.channel] = rec
    return waits


def count_duplicates(posts: Iterable[Post], key: Callable[[Post], Any]) -> dict[Any, int]:
    """The keys that more than one post carries, with their counts (posts with key None skipped)."""
    counts: dict[Any, int] = {}
    for post in posts:
        k = key(post)
        if k is not None:
            counts[k] = counts.get(k, 0) + 1
    return {k: n for k, n in counts.items() if n > 1}


def _payload_field(metadata: Any, name: str) -> Any:
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            return None
    if not isinstance(metadata, dict):
        return None
    payload = metadata.get("event_payload")
    return payload.get(name) if isinstance(payload, dict) else None


# --- the workspace model ----------------------------------------------------------------------


class _ApiError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class _Channel:
    id: str
    name: str
    kind: Literal["channel", "im", "mpim"]
    private: bool
    members: set[str]
    created: int
    bot_member: bool = True
    archived: bool = False


@dataclass(frozen=True)
class _Reply:
    status: int  # 0: reset the connection instead
    body: dict[str, Any] | str
    headers: dict[str, str] = field(default_factory=dict)
    hang: float = 0.0


class _Params:
    """Request parameters from any encoding; form values are strings, JSON values anything."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)

    def text(self, key: str) -> str | None:
        value = self.values.get(key)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, dict | list):
            return json.dumps(value)
        return str(value)

    def flag(self, key: str) -> bool:
        value = self.values.get(key)
        if isinstance(value, bool):
            return value
        return str(value).strip().lower() in ("1", "true") if value is not None else False

    def number(self, key: str, default: int) -> int:
        value = self.values.get(key)
        if value in (None, ""):
            return default
        try:
            return int(str(value))
        except ValueError:
            raise _ApiError("invalid_arguments") from None

    def structured(self, key: str, error_code: str) -> Any:
        """A JSON object/array sent as itself (JSON body) or as a JSON string (form body)."""
        value = self.values.get(key)
        if isinstance(value, str):
            if not value.strip():
                return None
            try:
                return json.loads(value)
            except ValueError:
                raise _ApiError(error_code) from None
        return value

    def users(self, key: str = "users") -> list[str]:
        value = self.values.get(key)
        if isinstance(value, list):
            return [str(u).strip() for u in value if str(u).strip()]
        if isinstance(value, str):
            return [u.strip() for u in value.split(",") if u.strip()]
        return []


def _us(ts: str) -> int:
    """A Slack ts ("1700000000.000100") as integer microseconds."""
    return int(Decimal(ts) * 1_000_000)


def _ts_bound(p: _Params, key: str, default: int) -> int:
    raw = p.text(key)
    if raw in (None, ""):
        return default
    try:
        return _us(raw)
    except (InvalidOperation, ValueError):
        raise _ApiError(f"invalid_ts_{key}") from None


def _cursor(us: int) -> str:
    return base64.b64encode(f"next_ts:{us}".encode()).decode()


def _from_cursor(cursor: str | None) -> int | None:
    if not cursor:
        return None
    try:
        decoded = base64.b64decode(cursor.encode(), validate=True).decode()
        prefix, _, value = decoded.partition(":")
        if prefix != "next_ts":
            raise ValueError(decoded)
        return int(value)
    except ValueError:
        raise _ApiError("invalid_cursor") from None


def _page(
    posts: list[Post], p: _Params, *, newest_first: bool, limit_max: int
) -> tuple[list[Post], str | None]:
    """Slack's paging over ts: oldest/latest/inclusive bounds, limit, and a ts cursor."""
    inclusive = p.flag("inclusive")
    oldest = _ts_bound(p, "oldest", 0)
    latest = _ts_bound(p, "latest", 1 << 62)
    limit = p.number("limit", 100)
    limit = min(limit if limit > 0 else 100, limit_max)
    after = _from_cursor(p.text("cursor"))

    def inside(post: Post) -> bool:
        us = _us(post.ts)
        if inclusive:
            return oldest <= us <= latest
        return oldest < us < latest

    chosen = [post for post in posts if inside(post)]
    chosen.sort(key=lambda post: _us(post.ts), reverse=newest_first)
    if after is not None:
        if newest_first:
            chosen = [post for post in chosen if _us(post.ts) <= after]
        else:
            chosen = [post for post in chosen if _us(post.ts) >= after]
    page, rest = chosen[:limit], chosen[limit:]
    return page, (_cursor(_us(rest[0].ts)) if rest else None)


class FakeSlack:
    """The fake: a workspace model, a fault script and the records, behind an HTTP server."""

    def __init__(
        self,
        *,
        token: str = TOKEN,
        bot_user_id: str = BOT_USER_ID,
        id_field: str = ID_FIELD,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.token = token
        self.bot_user_id = bot_user_id
        self.id_field = id_field
        self._address = (host, port)
        self._lock = threading.Lock()
        self.stopping = threading.Event()  # wakes every hanging answer on stop
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._last_ts_us = 0
        self._ids = itertools.count(1)  # never reset: an id is never reused
        self._reset_locked()

    # --- lifecycle

    @property
    def url(self) -> str:
        """The Web API base, e.g. http://127.0.0.1:PORT/api/ (the trailing slash matters)."""
        if self._server is None:
            raise RuntimeError("FakeSlack is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/api/"

    def start(self) -> FakeSlack:
        if self._server is not None:
            raise RuntimeError("FakeSlack is already started")
        self.stopping.clear()
        self._server = _Server(self._address, _Handler, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-slack",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- scripting

    def script(self, method: str, faults: Iterable[Fault | None]) -> None:
        """Queue faults for the next calls of `method` (None: serve that call normally)."""
        with self._lock:
            self._scripts.setdefault(method, deque()).extend(faults)

    def chaos(self, method: str, faults: Mapping[Fault, float], *, seed: int | None = None) -> None:
        """Every call of `method` draws a fault with these probabilities (the rest: normal)."""
        weights = list(faults.items())
        if any(p < 0 for _, p in weights) or sum(p for _, p in weights) > 1 + 1e-9:
            raise ValueError("probabilities must be >= 0 and sum to at most 1")
        with self._lock:
            self._chaos[method] = _Chaos(weights, random.Random(seed))

    def rate_limit(
        self, method: str = POST_METHOD, *, per_channel_per_s: float = 1.0, retry_after: int = 1
    ) -> None:
        """Answer 429 to a call that would apply within 1/N s of the last applied one there."""
        if per_channel_per_s <= 0:
            raise ValueError("per_channel_per_s must be > 0")
        with self._lock:
            self._limits[method] = _Limit(1.0 / per_channel_per_s, retry_after)

    def clear_faults(self) -> None:
        """Drop scripts, chaos and rate limits; keep channels and records."""
        with self._lock:
            self._clear_faults_locked()

    def reset(self) -> None:
        """Clear faults, posts, the request log, channels and unknown users."""
        with self._lock:
            self._reset_locked()

    # --- the workspace

    def add_channel(
        self,
        channel_id: str,
        *,
        name: str | None = None,
        members: Iterable[str] = (),
        private: bool = False,
        bot_member: bool = True,
    ) -> None:
        """Register a channel (D... is a DM, G... a group DM); bot_member=False: not_in_channel."""
        kind: Literal["channel", "im", "mpim"] = (
            "im"
            if channel_id.startswith("D")
            else "mpim"
            if channel_id.startswith("G")
            else "channel"
        )
        users = set(members)
        with self._lock:
            self._channels[channel_id] = _Channel(
                id=channel_id,
                name=name if name is not None else channel_id.lower(),
                kind=kind,
                private=private or kind != "channel",
                members=users | ({self.bot_user_id} if bot_member else set()),
                created=int(time.time()),
                bot_member=bot_member,
            )
            self._by_channel.setdefault(channel_id, [])
            if kind != "channel" and users:
                self._dms[frozenset(users - {self.bot_user_id})] = channel_id

    def archive(self, channel_id: str) -> None:
        with self._lock:
            self._channel_locked(channel_id).archived = True

    def unknown_user(self, user_id: str) -> None:
        """From now on this user id answers user_not_found."""
        with self._lock:
            self._unknown_users.add(user_id)

    def members(self, channel_id: str) -> set[str]:
        with self._lock:
            return set(self._channel_locked(channel_id).members)

    # --- the records

    def posts(self, channel: str | None = None) -> list[Post]:
        """Every applied post, in the order applied (of one channel if given)."""
        with self._lock:
            return [p for p in self._posts if channel is None or p.channel == channel]

    def updates(self, channel: str | None = None) -> list[Update]:
        """Every applied chat.update, in the order applied (of one channel if given)."""
        with self._lock:
            return [u for u in self._updates if channel is None or u.channel == channel]

    def requests(self) -> list[RequestRecord]:
        """Every Web API request received, in order."""
        with self._lock:
            return list(self._requests)

    def duplicates(
        self, field: str | None = None, *, key: Callable[[Post], Any] | None = None
    ) -> dict[Any, int]:
        """Keys applied more than once: by default metadata.event_payload[id_field]."""
        name = field or self.id_field
        return count_duplicates(self.posts(), key or (lambda post: post.payload_field(name)))

    def retry_waits(self, method: str = POST_METHOD) -> list[RetryWait]:
        return retry_waits(self.requests(), method)

    # --- serving (called by the HTTP handler threads)

    def handle(
        self,
        method: str,
        params: Mapping[str, Any],
        token: str | None,
        *,
        http_method: str = "POST",
        parse_error: str | None = None,
    ) -> _Reply:
        """Serve one Web API call: draw a fault, apply or not, record, return the answer."""
        p = _Params(params)
        with self._lock:
            mono, wall = time.monotonic(), time.time()
            fault, source = self._draw_fault_locked(method)
            applied = False
            body: dict[str, Any]
            if fault is not None and not fault.applies:
                reply = _fault_reply(fault)
                body = reply.body if isinstance(reply.body, dict) else {}
            else:
                limit = self._limits.get(method)
                channel = p.text("channel")
                try:
                    if parse_error:
                        raise _ApiError(parse_error)
                    self._authorize(token)
                    if (
                        limit is not None
                        and channel
                        and self._over_limit(method, channel, limit, mono)
                    ):
                        fault, source = rate_limited(limit.retry_after), "limit"
                        raise _ApiError("ratelimited")
                    body = self._dispatch(method, p, fault)
                    applied = True
                    if limit is not None and channel:
                        self._last_applied[(method, channel)] = mono
                except _ApiError as exc:
                    body = {"ok": False, "error": exc.code}
                reply = self._shape(fault, body, applied)
            self._record(method, http_method, p, (mono, wall), fault, source, applied, body, reply)
            return reply

    def _record(
        self,
        method: str,
        http_method: str,
        p: _Params,
        at: tuple[float, float],
        fault: Fault | None,
        source: FaultSource | None,
        applied: bool,
        body: Mapping[str, Any],
        reply: _Reply,
    ) -> None:
        retry_after = reply.headers.get("Retry-After")
        self._requests.append(
            RequestRecord(
                seq=len(self._requests) + 1,
                method=method,
                http_method=http_method,
                mono=at[0],
                wall=at[1],
                channel=_channel_of(p, body),
                metadata_id=_str_or_none(_payload_field(p.values.get("metadata"), self.id_field)),
                fault=fault,
                fault_source=source,
                applied=applied,
                status=reply.status,
                error=_error_of(reply),
                retry_after=int(retry_after) if retry_after is not None else None,
            )
        )

    def _shape(self, fault: Fault | None, body: dict[str, Any], applied: bool) -> _Reply:
        if fault is None:
            return _Reply(200, body)
        if fault.kind is FaultKind.RATE_LIMITED:
            return _fault_reply(fault)
        if fault.kind is FaultKind.ERROR:
            return _Reply(200, {"ok": False, "error": fault.code} if applied else body)
        if fault.kind is FaultKind.APPLY_THEN_500:
            return _Reply(500, "Internal Server Error")
        if fault.kind is FaultKind.APPLY_THEN_RESET:
            return _Reply(0, "")
        return _Reply(200, body, hang=fault.seconds)

    def _draw_fault_locked(self, method: str) -> tuple[Fault | None, FaultSource | None]:
        chaos = self._chaos.get(method)
        drawn = chaos.draw() if chaos is not None else None  # drawn every call: reproducible
        queue = self._scripts.get(method)
        if queue:
            fault = queue.popleft()
            return fault, ("script" if fault is not None else None)
        return drawn, ("chaos" if drawn is not None else None)

    def _over_limit(self, method: str, channel: str, limit: _Limit, now: float) -> bool:
        last = self._last_applied.get((method, channel))
        return last is not None and now - last < limit.interval

    def _authorize(self, token: str | None) -> None:
        if not token:
            raise _ApiError("not_authed")
        if token != self.token:
            raise _ApiError("invalid_auth")

    def _dispatch(self, method: str, p: _Params, fault: Fault | None) -> dict[str, Any]:
        match method:
            case "auth.test":
                return self._auth_test()
            case "conversations.open":
                return self._open(p)
            case "conversations.create":
                return self._create(p)
            case "conversations.invite":
                return self._invite(p)
            case "conversations.info":
                ch = self._known(p)
                return {"ok": True, "channel": self._channel_json(ch)}
            case "conversations.list":
                return self._list(p)
            case "conversations.history":
                return self._history(p)
            case "conversations.replies":
                return self._replies(p)
            case "chat.postMessage":
                return self._post(p, fault)
            case "chat.update":
                return self._update(p)
        raise _ApiError("unknown_method")

    # --- the methods

    def _auth_test(self) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://seatwire-fake.slack.com/",
            "team": TEAM,
            "team_id": TEAM_ID,
            "user": "seatwire",
            "user_id": self.bot_user_id,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _open(self, p: _Params) -> dict[str, Any]:
        existing = p.text("channel")
        if existing:
            ch = self._channels.get(existing)
            if ch is None or ch.kind == "channel":
                raise _ApiError("channel_not_found")
            return {"ok": True, "already_open": True, "channel": self._channel_json(ch)}
        users = {u for u in p.users() if u != self.bot_user_id}
        if not users:
            raise _ApiError("users_list_not_supplied")
        if len(users) > MAX_MPIM_USERS:
            raise _ApiError("too_many_users")
        if users & self._unknown_users:
            raise _ApiError("user_not_found")
        key = frozenset(users)
        channel_id = self._dms.get(key)
        if channel_id is not None:
            ch = self._channels[channel_id]
            return {
                "ok": True,
                "no_op": True,
                "already_open": True,
                "channel": self._channel_json(ch),
            }
        kind: Literal["im", "mpim"] = "im" if len(users) == 1 else "mpim"
        ch = self._new_channel("D" if kind == "im" else "G", "", kind, True, users)
        if kind == "mpim":
            ch.name = "mpdm-" + "--".join(sorted(users | {self.bot_user_id})).lower() + "-1"
        self._dms[key] = ch.id
        return {"ok": True, "channel": self._channel_json(ch)}

    def _create(self, p: _Params) -> dict[str, Any]:
        name = p.text("name") or ""
        if not name:
            raise _ApiError("invalid_name_required")
        if len(name) > MAX_CHANNEL_NAME:
            raise _ApiError("invalid_name_maxlength")
        if not _NAME.match(name):
            raise _ApiError("invalid_name_specials")
        if any(c.name == name and c.kind == "channel" for c in self._channels.values()):
            raise _ApiError("name_taken")
        ch = self._new_channel("C", name, "channel", p.flag("is_private"), set())
        return {"ok": True, "channel": self._channel_json(ch)}

    def _invite(self, p: _Params) -> dict[str, Any]:
        ch = self._known(p)
        if ch.kind != "channel":
            raise _ApiError("method_not_supported_for_channel_type")
        if ch.archived:
            raise _ApiError("is_archived")
        if not ch.bot_member:
            raise _ApiError("not_in_channel")
        users = p.users()
        if not users:
            raise _ApiError("no_user")
        if self.bot_user_id in users:
            raise _ApiError("cant_invite_self")
        if set(users) & self._unknown_users:
            raise _ApiError("user_not_found")
        if set(users) <= ch.members:
            raise _ApiError("already_in_channel")
        ch.members.update(users)
        return {"ok": True, "channel": self._channel_json(ch)}

    def _list(self, p: _Params) -> dict[str, Any]:
        """Channels (not DMs) of the requested types, in creation order; the cursor is an
        offset."""
        types = set((p.text("types") or "public_channel").split(","))
        archived_too = not p.flag("exclude_archived")
        chosen = [
            ch
            for ch in self._channels.values()
            if ch.kind == "channel"
            and ("private_channel" if ch.private else "public_channel") in types
            and (archived_too or not ch.archived)
        ]
        start = int(p.text("cursor") or 0)
        limit = min(max(p.number("limit", 100), 1), 1000)
        page = chosen[start : start + limit]
        body: dict[str, Any] = {"ok": True, "channels": [self._channel_json(ch) for ch in page]}
        more = start + limit < len(chosen)
        body["response_metadata"] = {"next_cursor": str(start + limit) if more else ""}
        return body

    def _history(self, p: _Params) -> dict[str, Any]:
        ch = self._readable(p)
        posts = self._by_channel[ch.id]
        top = [m for m in posts if m.thread_ts in (None, m.ts) or m.reply_broadcast]
        page, next_cursor = _page(top, p, newest_first=True, limit_max=HISTORY_LIMIT_MAX)
        body: dict[str, Any] = {
            "ok": True,
            "messages": [self._message_json(m, p.flag("include_all_metadata")) for m in page],
            "has_more": next_cursor is not None,
            "pin_count": 0,
        }
        if next_cursor is not None:
            body["response_metadata"] = {"next_cursor": next_cursor}
        return body

    def _replies(self, p: _Params) -> dict[str, Any]:
        ch = self._readable(p)
        ts = p.text("ts")
        posts = self._by_channel[ch.id]
        parent = next((m for m in posts if m.ts == ts), None)
        if parent is None:
            raise _ApiError("thread_not_found")
        root = parent.thread_ts or parent.ts
        thread = [m for m in posts if m.ts == root or m.thread_ts == root]
        page, next_cursor = _page(thread, p, newest_first=False, limit_max=REPLIES_LIMIT_MAX)
        body: dict[str, Any] = {
            "ok": True,
            "messages": [self._message_json(m, p.flag("include_all_metadata")) for m in page],
            "has_more": next_cursor is not None,
        }
        if next_cursor is not None:
            body["response_metadata"] = {"next_cursor": next_cursor}
        return body

    def _post(self, p: _Params, fault: Fault | None) -> dict[str, Any]:
        ch = self._known(p)
        if ch.archived:
            raise _ApiError("is_archived")
        if not ch.bot_member:
            raise _ApiError("not_in_channel")
        text = p.text("text") or ""
        blocks = p.structured("blocks", "invalid_blocks_format")
        attachments = p.structured("attachments", "invalid_attachments")
        if not text and not blocks and not attachments:
            raise _ApiError("no_text")
        if len(text) > MAX_TEXT:
            raise _ApiError("msg_too_long")
        metadata = p.structured("metadata", "invalid_metadata_format")
        if metadata is not None and not (
            isinstance(metadata, dict)
            and isinstance(metadata.get("event_type"), str)
            and isinstance(metadata.get("event_payload"), dict)
        ):
            raise _ApiError("invalid_metadata_format")
        post = Post(
            seq=len(self._posts) + 1,
            channel=ch.id,
            ts=self._next_ts(),
            text=text,
            thread_ts=p.text("thread_ts") or None,
            metadata=metadata,
            fault=fault,
            applied_mono=time.monotonic(),
            applied_wall=time.time(),
            blocks=blocks if isinstance(blocks, list) else None,
            reply_broadcast=p.flag("reply_broadcast"),
        )
        self._posts.append(post)
        self._by_channel[ch.id].append(post)
        return {
            "ok": True,
            "channel": ch.id,
            "ts": post.ts,
            "message": self._message_json(post, include_metadata=True),
        }

    def _update(self, p: _Params) -> dict[str, Any]:
        ch = self._known(p)
        if ch.archived:
            raise _ApiError("is_archived")
        ts = p.text("ts") or ""
        post = next((m for m in self._by_channel.get(ch.id, []) if m.ts == ts), None)
        if post is None:
            raise _ApiError("message_not_found")
        text = p.text("text") or ""
        blocks = p.structured("blocks", "invalid_blocks_format")
        if blocks is not None and not isinstance(blocks, list):
            raise _ApiError("invalid_blocks_format")
        if not text and not blocks:
            raise _ApiError("no_text")
        if len(text) > MAX_TEXT:
            raise _ApiError("msg_too_long")
        metadata = p.structured("metadata", "invalid_metadata_format")
        if metadata is not None and not isinstance(metadata, dict):
            raise _ApiError("invalid_metadata_format")
        update = Update(
            seq=len(self._updates) + 1,
            channel=ch.id,
            ts=ts,
            text=text,
            blocks=blocks,
            metadata=metadata,
            applied_wall=time.time(),
        )
        self._updates.append(update)
        edits = [u for u in self._updates if (u.channel, u.ts) == (ch.id, ts)]
        return {
            "ok": True,
            "channel": ch.id,
            "ts": ts,
            "text": text,
            "message": self._message_json(post, include_metadata=False, edits=edits),
        }

    # --- helpers (lock held)

    def _reset_locked(self) -> None:
        self._channels: dict[str, _Channel] = {}
        self._dms: dict[frozenset[str], str] = {}
        self._unknown_users: set[str] = set()
        self._posts: list[Post] = []
        self._updates: list[Update] = []
        self._by_channel: dict[str, list[Post]] = {}
        self._requests: list[RequestRecord] = []
        self._clear_faults_locked()

    def _clear_faults_locked(self) -> None:
        self._scripts: dict[str, deque[Fault | None]] = {}
        self._chaos: dict[str, _Chaos] = {}
        self._limits: dict[str, _Limit] = {}
        self._last_applied: dict[tuple[str, str], float] = {}

    def _next_ts(self) -> str:
        us = max(int(time.time() * 1_000_000), self._last_ts_us + 1)
        self._last_ts_us = us
        return f"{us // 1_000_000}.{us % 1_000_000:06d}"

    def _new_channel(
        self,
        prefix: str,
        name: str,
        kind: Literal["channel", "im", "mpim"],
        private: bool,
        users: set[str],
    ) -> _Channel:
        channel_id = f"{prefix}{next(self._ids):010d}"
        ch = _Channel(
            id=channel_id,
            name=name or channel_id.lower(),
            kind=kind,
            private=private,
            members=users | {self.bot_user_id},
            created=int(time.time()),
        )
        self._channels[channel_id] = ch
        self._by_channel[channel_id] = []
        return ch

    def _channel_locked(self, channel_id: str) -> _Channel:
        ch = self._channels.get(channel_id)
        if ch is None:
            raise KeyError(f"no channel {channel_id!r}")
        return ch

    def _known(self, p: _Params) -> _Channel:
        ref = (p.text("channel") or "").strip()
        ch = self._channels.get(ref)
        if ch is None and ref:
            name = ref.removeprefix("#")
            ch = next(
                (c for c in self._channels.values() if c.kind == "channel" and c.name == name),
                None,
            )
        if ch is None:
            raise _ApiError("channel_not_found")
        return ch

    def _readable(self, p: _Params) -> _Channel:
        ch = self._known(p)
        if not ch.bot_member:
            raise _ApiError("not_in_channel")
        return ch

    def _channel_json(self, ch: _Channel) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": ch.id,
            "created": ch.created,
            "is_archived": ch.archived,
            "is_im": ch.kind == "im",
            "is_mpim": ch.kind == "mpim",
            "is_private": ch.private,
            "is_channel": ch.kind == "channel" and not ch.private,
            "is_group": ch.kind == "channel" and ch.private,
            "is_member": ch.bot_member,
        }
        if ch.kind == "im":
            others = sorted(ch.members - {self.bot_user_id})
            data["user"] = others[0] if others else self.bot_user_id
            data["is_open"] = True
        else:
            data["name"] = ch.name
            data["name_normalized"] = ch.name
            data["num_members"] = len(ch.members)
        return data

    def _message_json(
        self, post: Post, include_metadata: bool, edits: list[Update] | None = None
    ) -> dict[str, Any]:
        """The message as it stands: as posted, then each chat.update of it applied."""
        if edits is None:
            edits = [u for u in self._updates if (u.channel, u.ts) == (post.channel, post.ts)]
        text, blocks, metadata = post.text, post.blocks, post.metadata
        for edit in edits:
            text = edit.text
            blocks = edit.blocks if edit.blocks is not None else blocks
            metadata = edit.metadata if edit.metadata is not None else metadata
        message: dict[str, Any] = {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "team": TEAM_ID,
            "text": text,
            "ts": post.ts,
        }
        if edits:
            message["edited"] = {"user": self.bot_user_id, "ts": f"{edits[-1].applied_wall:.6f}"}
        if blocks:
            message["blocks"] = blocks
        if post.thread_ts is not None and post.thread_ts != post.ts:
            message["thread_ts"] = post.thread_ts
            message["parent_user_id"] = self.bot_user_id
        else:
            replies = [m for m in self._by_channel.get(post.channel, []) if m.thread_ts == post.ts]
            if replies:
                message["thread_ts"] = post.ts
                message["reply_count"] = len(replies)
                message["reply_users"] = [self.bot_user_id]
                message["reply_users_count"] = 1
                message["latest_reply"] = replies[-1].ts
        if include_metadata and metadata is not None:
            message["metadata"] = metadata
        return message


def _fault_reply(fault: Fault) -> _Reply:
    if fault.kind is FaultKind.RATE_LIMITED:
        return _Reply(
            429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(fault.retry_after)}
        )
    if fault.kind is FaultKind.HTTP_ERROR:
        return _Reply(fault.status, f"HTTP {fault.status}: the fake's upstream is unavailable")
    return _Reply(200, {"ok": False, "error": fault.code})


def _channel_of(p: _Params, body: Mapping[str, Any]) -> str | None:
    channel = p.text("channel")
    if channel:
        return channel
    answered = body.get("channel")
    if isinstance(answered, dict):
        return _str_or_none(answered.get("id"))
    return _str_or_none(answered)


def _error_of(reply: _Reply) -> str | None:
    if isinstance(reply.body, dict) and reply.body.get("ok") is False:
        return _str_or_none(reply.body.get("error"))
    return None if reply.status == 200 else f"http_{reply.status}"


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


# --- HTTP -------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # a benchmark's burst of connections is not refused

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], fake: FakeSlack
    ) -> None:
        self.fake = fake
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: a client that went away mid-answer is what the faults are for."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # keep-alive clients would otherwise wait on delayed ACKs
    wbufsize = -1  # headers and body leave in one write (flushed after each request)
    server: _Server

    def do_GET(self) -> None:
        self._route()

    def do_POST(self) -> None:
        self._route()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the request log is the record."""

    def _route(self) -> None:
        try:
            url = urlsplit(self.path)
            raw = self._read_body()
            if url.path.startswith("/api/"):
                self._api(url.path.removeprefix("/api/"), url.query, raw)
            elif url.path.startswith("/_control/"):
                self._control(url.path.removeprefix("/_control/"), url.query, raw)
            else:
                self._send(404, "not found")
        except OSError:  # the client went away (or the connection was reset on purpose)
            self.close_connection = True

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _api(self, method: str, query: str, raw: bytes) -> None:
        fake = self.server.fake
        params: dict[str, Any] = dict(parse_qsl(query, keep_blank_values=True))
        parse_error = None
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if raw:
            if ctype == "application/json":
                try:
                    decoded = json.loads(raw)
                except ValueError:
                    decoded = None
                if isinstance(decoded, dict):
                    params.update(decoded)
                else:
                    parse_error = "invalid_json"
            elif ctype in ("application/x-www-form-urlencoded", ""):
                params.update(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
            else:
                parse_error = "invalid_form_data"
        auth = self.headers.get("Authorization", "")
        bearer = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        token = bearer or _Params(params).text("token")
        reply = fake.handle(
            method, params, token, http_method=self.command, parse_error=parse_error
        )
        if reply.status == 0:
            self._abort()
            return
        if reply.hang > 0:
            fake.stopping.wait(reply.hang)
        self._send(reply.status, reply.body, reply.headers)

    def _abort(self) -> None:
        """Close with SO_LINGER (1, 0): the kernel sends RST, the client sees a reset."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.rfile.close()  # the last reference to the socket: this is the real close
        self.wfile.close()

    def _control(self, route: str, query: str, raw: bytes) -> None:
        handler = _CONTROL.get((self.command, route))
        if handler is None:
            self._send(404, {"error": f"no control route {self.command} {route}"})
            return
        try:
            payload = json.loads(raw) if raw else {}
            if not isinstance(payload, dict):
                raise TypeError("the body must be a JSON object")
            result = handler(self.server.fake, payload, dict(parse_qsl(query)))
        except (KeyError, TypeError, ValueError) as exc:
            self._send(400, {"error": f"{type(exc).__name__}: {exc}"})
            return
        self._send(200, result)

    def _send(
        self, status: int, body: Mapping[str, Any] | str, headers: Mapping[str, str] | None = None
    ) -> None:
        if isinstance(body, str):
            data, ctype = body.encode(), "text/plain; charset=utf-8"
        else:
            data, ctype = json.dumps(body).encode(), "application/json; charset=utf-8"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


# --- the control API --------------------------------------------------------------------------

_Route = Callable[[FakeSlack, dict[str, Any], dict[str, str]], dict[str, Any]]


def _c_info(fake: FakeSlack, _: dict[str, Any], __: dict[str, str]) -> dict[str, Any]:
    return {
        "url": fake.url,
        "token": fake.token,
        "bot_user_id": fake.bot_user_id,
        "id_field": fake.id_field,
        "post_count": len(fake.posts()),  # cheap to poll, unlike /_control/posts
    }


def _c_posts(fake: FakeSlack, _: dict[str, Any], q: dict[str, str]) -> dict[str, Any]:
    return {"posts": [p.to_json() for p in fake.posts(q.get("channel"))]}


def _c_updates(fake: FakeSlack, _: dict[str, Any], q: dict[str, str]) -> dict[str, Any]:
    return {"updates": [u.to_json() for u in fake.updates(q.get("channel"))]}


def _c_requests(fake: FakeSlack, _: dict[str, Any], __: dict[str, str]) -> dict[str, Any]:
    return {"requests": [r.to_json() for r in fake.requests()]}


def _c_duplicates(fake: FakeSlack, _: dict[str, Any], q: dict[str, str]) -> dict[str, Any]:
    return {"duplicates": {str(k): n for k, n in fake.duplicates(q.get("field")).items()}}


def _c_members(fake: FakeSlack, _: dict[str, Any], q: dict[str, str]) -> dict[str, Any]:
    return {"members": sorted(fake.members(q["channel"]))}


def _c_reset(fake: FakeSlack, _: dict[str, Any], __: dict[str, str]) -> dict[str, Any]:
    fake.reset()
    return {}


def _c_clear_faults(fake: FakeSlack, _: dict[str, Any], __: dict[str, str]) -> dict[str, Any]:
    fake.clear_faults()
    return {}


def _c_script(fake: FakeSlack, b: dict[str, Any], __: dict[str, str]) -> dict[str, Any]:
    fake.script(b["method"], [Fault.from_json(f) if f else None for f in b["faults"]])
    return {}


def _c_chaos(fake: FakeSlack, b: dict[str, Any], __: dict[str, str]) -> dict[str, Any]:
    weights = {Fault.from_json(w["fault"]): float(w["p"]) for w in b["faults"]}
    fake.chaos(b["method"], weights, seed=b.get("seed"))
    return {}


def _c_rate_limit(fake: FakeSlack, b: dict[str, Any], __: dict[str, str]) -> dict[str, Any]:
    fake.rate_limit(
        b.get("method", POST_METHOD),
        per_channel_per_s=float(b.get("per_channel_per_s", 1.0)),
        retry_after=int(b.get("retry_after", 1)),
    )
    return {}


def _c_add_channel(fake: FakeSlack, b: dict[str, Any], __: dict[str, str]) -> dict[str, Any]:
    fake.add_channel(
        b["channel"],
        name=b.get("name"),
        members=b.get("members", ()),
        private=bool(b.get("private", False)),
        bot_member=bool(b.get("bot_member", True)),
    )
    return {}


def _c_archive(fake: FakeSlack, b: dict[str, Any], __: dict[str, str]) -> dict[str, Any]:
    fake.archive(b["channel"])
    return {}


def _c_unknown_user(fake: FakeSlack, b: dict[str, Any], __: dict[str, str]) -> dict[str, Any]:
    fake.unknown_user(b["user"])
    return {}


_CONTROL: dict[tuple[str, str], _Route] = {
    ("GET", "info"): _c_info,
    ("GET", "posts"): _c_posts,
    ("GET", "updates"): _c_updates,
    ("GET", "requests"): _c_requests,
    ("GET", "duplicates"): _c_duplicates,
    ("GET", "members"): _c_members,
    ("POST", "reset"): _c_reset,
    ("POST", "clear_faults"): _c_clear_faults,
    ("POST", "script"): _c_script,
    ("POST", "chaos"): _c_chaos,
    ("POST", "rate_limit"): _c_rate_limit,
    ("POST", "add_channel"): _c_add_channel,
    ("POST", "archive"): _c_archive,
    ("POST", "unknown_user"): _c_unknown_user,
}


class FakeSlackControl:
    """Drives a FakeSlack in another process through /_control/, with FakeSlack's method names."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        self._http = httpx.Client(
            base_url=f"{parts.scheme}://{parts.netloc}/_control/",
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> FakeSlackControl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, route: str, **params: str) -> dict[str, Any]:
        response = self._http.get(route, params=params)
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def _post(self, route: str, body: Mapping[str, Any] | None = None) -> None:
        self._http.post(route, json=dict(body or {})).raise_for_status()

    def info(self) -> dict[str, Any]:
        return self._get("info")

    def script(self, method: str, faults: Iterable[Fault | None]) -> None:
        encoded = [f.to_json() if f is not None else None for f in faults]
        self._post("script", {"method": method, "faults": encoded})

    def chaos(self, method: str, faults: Mapping[Fault, float], *, seed: int | None = None) -> None:
        weights = [{"fault": f.to_json(), "p": p} for f, p in faults.items()]
        self._post("chaos", {"method": method, "faults": weights, "seed": seed})

    def rate_limit(
        self, method: str = POST_METHOD, *, per_channel_per_s: float = 1.0, retry_after: int = 1
    ) -> None:
        body = {
            "method": method,
            "per_channel_per_s": per_channel_per_s,
            "retry_after": retry_after,
        }
        self._post("rate_limit", body)

    def clear_faults(self) -> None:
        self._post("clear_faults")

    def reset(self) -> None:
        self._post("reset")

    def add_channel(
        self,
        channel_id: str,
        *,
        name: str | None = None,
        members: Iterable[str] = (),
        private: bool = False,
        bot_member: bool = True,
    ) -> None:
        body = {
            "channel": channel_id,
            "name": name,
            "members": list(members),
            "private": private,
            "bot_member": bot_member,
        }
        self._post("add_channel", body)

    def archive(self, channel_id: str) -> None:
        self._post("archive", {"channel": channel_id})

    def unknown_user(self, user_id: str) -> None:
        self._post("unknown_user", {"user": user_id})

    def members(self, channel_id: str) -> set[str]:
        return set(self._get("members", channel=channel_id)["members"])

    def posts(self, channel: str | None = None) -> list[Post]:
        params = {"channel": channel} if channel is not None else {}
        return [Post.from_json(p) for p in self._get("posts", **params)["posts"]]

    def updates(self, channel: str | None = None) -> list[Update]:
        params = {"channel": channel} if channel is not None else {}
        return [Update.from_json(u) for u in self._get("updates", **params)["updates"]]

    def requests(self) -> list[RequestRecord]:
        return [RequestRecord.from_json(r) for r in self._get("requests")["requests"]]

    def duplicates(
        self, field: str | None = None, *, key: Callable[[Post], Any] | None = None
    ) -> dict[Any, int]:
        """As FakeSlack.duplicates; a `key` function is applied here to the fetched posts."""
        if key is not None:
            return count_duplicates(self.posts(), key)
        params = {"field": field} if field else {}
        counts: dict[Any, int] = self._get("duplicates", **params)["duplicates"]
        return counts

    def retry_waits(self, method: str = POST_METHOD) -> list[RetryWait]:
        return retry_waits(self.requests(), method)


# --- as a process -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fake_slack", description="A fake Slack Web API for the fault tests."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9090, help="0 picks a free port")
    parser.add_argument("--token", default=TOKEN)
    parser.add_argument("--bot-user-id", default=BOT_USER_ID)
    parser.add_argument("--id-field", default=ID_FIELD, help="metadata.event_payload key")
    args = parser.parse_args(argv)

    done = threading.Event()

    def stop(signum: int, frame: object) -> None:
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    fake = FakeSlack(
        token=args.token,
        bot_user_id=args.bot_user_id,
        id_field=args.id_field,
        host=args.host,
        port=args.port,
    )
    with fake:
        print(f"fake-slack listening on {fake.url}", flush=True)
        while not done.wait(0.2):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
