"""Beat with one leader: a fenced lease in Redis, and the Celery scheduler that holds it.

What this owns:

- `Lease`: beat's leader lease (`keys.BEAT_LEADER`), taken or renewed on every scheduler tick
  by Lua on Redis's own clock (workers/stores/lua/leader_hold.lua). Renewal is checked
  against the holder; a free lease is taken as a new TERM, whose fencing token is the next
  value of a counter (`keys.BEAT_EPOCH`) that only ever grows. Every election is appended to
  `keys.BEAT_TERMS`. A clean shutdown gives the lease up (`release`).
- `LeaderScheduler`: a `celery.beat.Scheduler` that sends due ticks only while it holds the
  lease, by its own clock (monotonic), for the lease less a margin counted from BEFORE the
  renewal was asked: it stops sending before Redis can give the lease to anyone else. Every
  tick it sends carries its token (`fence=`). A beat that is not the leader stands by and
  asks again every `poll_s` (a quarter of the lease): it takes over at most lease + poll_s
  after the leader's last renewal.
- `admit_tick`: what every beat-driven tick asks first, on the worker that runs it: is its
  token still the current one? A deposed leader's stale ticks (queued before it lost the
  lease, or sent by a beat that was paused past it) do nothing; and the sweeper's claims and
  the parking lot's release check the token again atomically in their own Lua, so a tick
  whose beat is deposed while the tick runs writes nothing more either.
- `status`: who leads (`seatwire beat status`).

Why not celery-redbeat (2.x, the well-kept Redis scheduler): its lock is a redis-py `Lock`
whose token is a random value only the scheduler knows, so nothing it sends can be checked
by the worker that runs it: a beat that stalls past its lock (a host pause: redbeat 218 and
230 end in `LockNotOwnedError`) has already sent, or sends on waking, ticks that run next to
the new leader's. It takes the lock in a `beat_init` signal handler, whose exceptions Celery
swallows, so a connection error while taking it left a standby scheduling too (208, 238);
and it extended the lock without checking it still owned it (127). Here an error while
asking for the lease is never leadership (the scheduler keeps only what its last successful
renewal gave it, then stands by), a renewal is owner-checked in Lua, and the fencing token
makes the writes themselves refuse a deposed leader. RedBeat would also have added a
persisted schedule Seatwire does not need (two fixed intervals from the settings).

Not pure: Redis and Celery.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import redis
from celery import Celery, beat

from workers.stores import keys
from workers.stores.scripts import script, text

log = logging.getLogger("seatwire.beat")


@dataclass(frozen=True)
class Term:
    """One answer of the lease: `elected` (a new term), `renewed` or `standby`."""

    verb: str
    token: int | None
    holder: str
    lease_ms: int  # for a standby: how long the leader's lease has left

    @property
    def leading(self) -> bool:
        return self.verb in ("elected", "renewed")


def holder_id() -> str:
    """This process's name on the lease: host, pid and a random suffix (a restarted beat that
    got the same pid is still a new holder)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Lease:
    """Beat's leader lease on one Redis, for one holder."""

    def __init__(self, client: redis.Redis, *, holder: str, lease_ms: int) -> None:
        self.r = client
        self.holder = holder
        self.lease_ms = lease_ms
        self._hold = script(client, "leader_hold")
        self._release = script(client, "leader_release")

    def hold(self) -> Term:
        """Renew the lease if this holder has it, take it if it is free, else stand by."""
        verb, token, holder, ms = self._hold(
            keys=[keys.BEAT_LEADER, keys.BEAT_EPOCH, keys.BEAT_TERMS],
            args=[self.holder, self.lease_ms],
        )
        return Term(
            verb=text(verb),
            token=int(token) if token is not None else None,
            holder=text(holder),
            lease_ms=int(ms),
        )

    def release(self) -> bool:
        """Give the lease up if this holder still has it; True when it did."""
        reply = self._release(keys=[keys.BEAT_LEADER], args=[self.holder])
        return text(reply[0]) == "released"


def current_token(client: redis.Redis) -> int | None:
    """The newest term's fencing token (None before any beat was ever elected)."""
    raw = client.get(keys.BEAT_EPOCH)
    return int(raw) if raw is not None else None


def admit_tick(client: redis.Redis, fence: int | None, *, in_process: bool) -> str:
    """'' when a beat-driven tick may run, else why not: its token is not the current term's
    (a deposed leader's), or it carries none and was not run in process (a beat from before
    the lease, or a hand-made message)."""
    if fence is None:
        return "" if in_process else "it carries no fencing token"
    current = current_token(client)
    if current != fence:
        return f"its token {fence} is not the current leader's ({current})"
    return ""


@dataclass(frozen=True)
class LeaderStatus:
    holder: str | None
    token: int | None  # the leader's token, or the last one issued when there is no leader
    since_ms: int | None
    renewed_ms: int | None
    expires_in_ms: int | None
    terms: list[dict[str, str]]  # the latest elections, newest first

    def to_wire(self) -> dict[str, Any]:
        return {
            "leader": self.holder,
            "token": self.token,
            "sinceMs": self.since_ms,
            "renewedAtMs": self.renewed_ms,
            "expiresInMs": self.expires_in_ms,
            "terms": self.terms,
        }


def status(client: redis.Redis, *, terms: int = 5) -> LeaderStatus:
    """Who holds the lease now, and the latest elections."""
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(keys.BEAT_LEADER)
    pipe.pttl(keys.BEAT_LEADER)
    pipe.get(keys.BEAT_EPOCH)
    pipe.xrevrange(keys.BEAT_TERMS, count=terms)
    raw, ttl, epoch, history = pipe.execute()
    f = {text(k): text(v) for k, v in raw.items()}
    elections = [{text(k): text(v) for k, v in fields.items()} for _, fields in history]
    if not f:
        return LeaderStatus(None, int(epoch) if epoch else None, None, None, None, elections)
    return LeaderStatus(
        holder=f.get("holder"),
        token=int(f["token"]) if f.get("token") else None,
        since_ms=int(f["sinceMs"]) if f.get("sinceMs") else None,
        renewed_ms=int(f["atMs"]) if f.get("atMs") else None,
        expires_in_ms=int(ttl) if ttl is not None and int(ttl) >= 0 else None,
        terms=elections,
    )


class LeaderScheduler(beat.Scheduler):  # type: ignore[misc]  # celery ships no type hints
    """Celery's in-memory scheduler, sending only while it holds the lease, each tick it
    sends carrying its token. Bound to a lease by `scheduler_for`.

    `gates` (task name -> a check) lets a row send only when its check says there is work:
    the controller's tick is sent only when a seat is due, so an idle deployment publishes no
    task every second. A check that fails sends the tick (it then finds out for itself)."""

    lease: ClassVar[Lease]
    gates: ClassVar[Mapping[str, Callable[[], bool]]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._token: int | None = None
        self._valid_until = 0.0  # monotonic: the end of the lease as this process may assume
        self._leader = ""
        super().__init__(*args, **kwargs)

    @property
    def poll_s(self) -> float:
        return self.lease.lease_ms / 4000

    @property
    def margin_s(self) -> float:
        return min(1.0, self.lease.lease_ms / 5000)

    def leading(self) -> bool:
        return self._token is not None and time.monotonic() < self._valid_until

    def _hold(self) -> None:
        asked = time.monotonic()
        try:
            term = self.lease.hold()
        except Exception as exc:  # never leadership (redbeat 208/238): keep what the last
            # renewal gave, which runs out before Redis could give the lease to another
            log.warning(
                "beat: could not renew the leader lease (%s); leading=%s", exc, self.leading()
            )
            return
        if term.leading:
            if term.verb == "elected":
                log.warning("beat: elected leader %s with token %s", self.lease.holder, term.token)
            self._token = term.token
            self._valid_until = asked + term.lease_ms / 1000 - self.margin_s
        else:
            if self._token is not None or self._leader != term.holder:
                log.warning(
                    "beat: standing by; the leader is %s (token %s, %d ms left)",
                    term.holder,
                    term.token,
                    term.lease_ms,
                )
            self._token, self._valid_until, self._leader = None, 0.0, term.holder

    def tick(self, *args: Any, **kwargs: Any) -> float:
        self._hold()
        if not self.leading():
            return self.poll_s
        return float(min(super().tick(*args, **kwargs), self.poll_s))

    def apply_async(
        self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any
    ) -> Any:
        if not self.leading():  # the lease may have run out while this tick was sending
            log.warning("beat: not the leader any more; %s not sent", entry.task)
            return None
        gate = self.gates.get(entry.task)
        if gate is not None and not self._open(entry.task, gate):
            return None
        token = self._token
        entry.kwargs = {**(entry.kwargs or {}), "fence": token}
        result = super().apply_async(entry, producer, advance, **kwargs)
        log.info(
            "beat: %s sent %s with token %s at %d",
            self.lease.holder,
            entry.task,
            token,
            time.time_ns() // 1_000_000,
        )
        return result

    @staticmethod
    def _open(task: str, gate: Callable[[], bool]) -> bool:
        try:
            return gate()
        except Exception as exc:
            log.warning("beat: could not ask whether %s has work (%s); sent anyway", task, exc)
            return True

    def close(self) -> None:
        try:
            if self.lease.release():
                log.warning("beat: gave the leader lease up")
        except Exception as exc:  # it runs out by itself
            log.warning("beat: could not give the leader lease up: %s", exc)
        super().close()


def scheduler_for(
    lease: Lease, gates: Mapping[str, Callable[[], bool]] | None = None
) -> type[LeaderScheduler]:
    """A `LeaderScheduler` class bound to `lease` and `gates` (Celery builds the scheduler
    itself)."""
    return type(
        "BoundLeaderScheduler", (LeaderScheduler,), {"lease": lease, "gates": dict(gates or {})}
    )


def start_scheduler(
    app: Celery, lease: Lease, gates: Mapping[str, Callable[[], bool]] | None = None
) -> Any:
    """Run beat's scheduler in a thread of THIS process (Celery's `worker --beat` forks it
    into a child that outlives a SIGKILLed parent): it dies with the process. Returns the
    service; `stop()` it on shutdown (which gives the lease up)."""
    service = beat.EmbeddedService(app, thread=True, scheduler_cls=scheduler_for(lease, gates))
    service.start()
    return service
