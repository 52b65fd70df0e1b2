"""The ask record in Redis: each ask's document and indexes, its answers recorded exactly
once, consents and declines, and each seat's brake (pipeline/asks.py decides every change).

An ask is a hash (`doc`, the JSON; `v`, its version; `at`, when it was created; `op`, the
last commit's id). A change is read, decided by the pure function, and written back by
`ask_commit.lua` only if the version is still the one read (compare-and-set), together with
what the change makes true at once: its open and due indexes, a consent or decline record, the
seat's brake window, and the seat's inbox item. So an answer is recorded with the seat's news
of it or not at all, and two answers racing are decided one after the other: the first wins,
the second reads the answered ask and is written down as `late_answer`. A commit sent again
after a lost reply finds its own op id and is answered as the first was. A consent's
revocation is written by `consent_revoke.lua` the same way: the consent record (compared with
the text read), the revocation on its ask's answer (compared on the ask's version) and the
seat's `consent_revoked` inbox item, all at once or not at all.

Retention: an open ask is kept until it ends (it always ends: answered, or closed by its
timeout ladder or its send). An ended ask is kept `retention_ms` (SEATWIRE_ASK_RETENTION_MS,
30 days by default), then Redis expires it; the indexes drop it at the next `trim`.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import redis

from contracts.asks import (
    AnswerOutcome,
    Ask,
    AskBrake,
    AskClose,
    ConsentRecord,
    DeclineRecord,
)
from contracts.engagement import EngagementDecision
from contracts.inbound import InboxItem
from pipeline.asks import (
    DEFAULT_CONSENT_TTL_MS,
    AnswerIn,
    AskRecordView,
    Concluded,
    Revocation,
    answer_ask,
    answered_item,
    closed_as,
    concluded_as,
    decline_of,
    revoke_consent,
)
from pipeline.guardrails import Tally
from workers.stores import keys
from workers.stores.inbox import DEFAULT_ROOM, InboxRoom
from workers.stores.ledger import Ledger
from workers.stores.scripts import script, text

DAY_MS = 86_400_000
ASK_RETENTION_MS = 30 * DAY_MS
MAX_TRIES = 20  # compare-and-set tries of one change before it is reported as contended
LIST_SCAN = 1_000  # newest asks of an index a listing reads


@functools.lru_cache(maxsize=2048)
def _parsed(raw: bytes | str, version: int) -> Ask:
    """An ask's document at its version, parsed once per process while it is among the 2,048
    last read: the week's asks are read whole by every status read and console page (~60 us
    a parse), most of them unchanged since (an Ask is a frozen value, so one may be shared;
    the key is the document itself, so a changed ask is parsed anew)."""
    ask = Ask.model_validate_json(raw)
    return ask.model_copy(update={"version": version})


# `create`'s answer: whether the ask is new, the stored ask, the ask of the latest earlier
# attempt under its dedupe key (if any).
Created = tuple[bool, Ask, str | None]
# ask_view_common.lua's arguments: the prefixes of an ask's and a consent's keys.
VIEW_ARGS = (keys.ask(""), keys.consent(""))


class AskMissing(LookupError):
    def __init__(self, ask_id: str) -> None:
        super().__init__(f"no ask {ask_id}")
        self.ask_id = ask_id


@dataclass(frozen=True)
class Revoked:
    """What one revocation did, and (when it revoked) the seat's inbox position of its item
    (0 when the inbox was full: written down there, as every item refused for the cap)."""

    revocation: Revocation
    position: int = 0


class AskContended(RuntimeError):
    """A change that lost its compare-and-set MAX_TRIES times in a row (never silently)."""


@dataclass(frozen=True)
class Answered:
    """What one answer did, and (when it changed the ask) the seat's inbox position."""

    outcome: AnswerOutcome
    root: Ask | None = None  # the seat's own ask, when the answer came on an escalation's
    position: int = 0


Commit = Literal["ok", "again", "conflict", "missing"]


def _how(value: str) -> Concluded:
    return "declined" if value == "declined" else "expired" if value == "expired" else "answered"


def _scope_field(scope: str | None) -> str:
    return " ".join((scope or "").lower().split()) or "-"


class AskStore:
    def __init__(
        self,
        client: redis.Redis,
        *,
        retention_ms: int = ASK_RETENTION_MS,
        consent_ttl_ms: int = DEFAULT_CONSENT_TTL_MS,
        room: InboxRoom = DEFAULT_ROOM,
    ) -> None:
        self.r = client
        self.retention_ms = retention_ms
        self.consent_ttl_ms = consent_ttl_ms
        self.room = room
        # How long one work's (or one dedupe key's) index outlives its newest ask's record:
        # the record's keeping, after the longest an ask can stay open (a week of snoozes
        # on top of its ladder, with room to spare).
        self.index_ms = retention_ms + 30 * DAY_MS
        self._create = script(client, "ask_create")
        self._commit = script(client, "ask_commit")
        self._revoke = script(client, "consent_revoke")
        self._view = script(client, "ask_view")
        self._engage_read = script(client, "engage_read")

    # ------------------------------------------------------------------ reading

    @staticmethod
    def _doc(raw: Any, version: Any) -> Ask:
        return _parsed(raw, int(version or 0))

    def get(self, ask_id: str) -> Ask | None:
        raw, v = self.r.hmget(keys.ask(ask_id), "doc", "v")
        return None if raw is None else self._doc(raw, v)

    def many(self, ask_ids: Sequence[str]) -> list[Ask]:
        """The asks of `ask_ids` that are still kept, in their order (one round trip)."""
        if not ask_ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        for ask_id in ask_ids:
            pipe.hmget(keys.ask(ask_id), "doc", "v")
        return [self._doc(raw, v) for raw, v in pipe.execute() if raw is not None]

    def by_message(self, channel_id: str, message_id: str) -> str | None:
        """The ask a sent message is (a Slack channel and ts, or a webhook's message id)."""
        value = self.r.get(keys.ask_message(channel_id, message_id))
        return None if value is None else text(value)

    def of_item(self, item_id: str, limit: int = 20) -> list[Ask]:
        """The open asks about a GitHub issue or pull request (`owner/repo#N`), newest first."""
        ids = [text(i) for i in self.r.zrevrange(keys.asks_of_item(item_id), 0, limit - 1)]
        return [a for a in self.many(ids) if a.is_open]

    def latest(self, dedupe_key: str) -> Ask | None:
        found = self.r.zrevrange(keys.ask_latest(dedupe_key), 0, 0)
        return self.get(text(found[0])) if found else None

    def of_work(self, work_id: str, limit: int = 50) -> list[Ask]:
        ids = [text(i) for i in self.r.zrevrange(keys.asks_of_work(work_id), 0, limit - 1)]
        return self.many(ids)

    def escalations_of(self, ask_id: str) -> list[Ask]:
        return self.many(sorted(text(i) for i in self.r.smembers(keys.ask_escalations(ask_id))))

    def listing(
        self,
        *,
        seat_id: str | None = None,
        person: str | None = None,
        state: str | None = None,
        since_ms: int | None = None,
        open_first: bool = False,
        until_ms: int | None = None,
    ) -> list[Ask]:
        """Asks newest first (open ones first with `open_first`), filtered; at most the newest
        LIST_SCAN of the index read (the seat's, the person's, or all), created at or before
        `until_ms` when it is given (a page after the first starts there)."""
        index = (
            keys.asks_of_seat(seat_id)
            if seat_id
            else keys.asks_of_person(person)
            if person
            else keys.ASKS_OPEN
            if state == "open"
            else keys.ASKS_ALL
        )
        low = "-inf" if since_ms is None else since_ms
        high = "+inf" if until_ms is None else until_ms
        ids = [text(i) for i in self.r.zrevrangebyscore(index, high, low, 0, LIST_SCAN)]
        asks = self.many(ids)
        if seat_id:
            asks = [a for a in asks if a.seat_id == seat_id]
        if person:
            asks = [a for a in asks if person in a.asked_ids()]
        if state == "open":
            asks = [a for a in asks if a.is_open]
        elif state:
            asks = [a for a in asks if a.state == state]
        if open_first:
            asks.sort(key=lambda a: (not a.is_open, -a.created_at_ms))
        return asks

    def due(self, now_ms: int, limit: int = 200) -> list[str]:
        return [text(i) for i in self.r.zrangebyscore(keys.ASKS_DUE, "-inf", now_ms, 0, limit)]

    def pending_since(self, before_ms: int, limit: int = 200) -> list[Ask]:
        """Open asks created before `before_ms` still pending (their send's end not yet
        written on them): for the tick to settle from the send's op."""
        ids = [
            text(i) for i in self.r.zrangebyscore(keys.ASKS_PENDING, "-inf", before_ms, 0, limit)
        ]
        return [a for a in self.many(ids) if a.state == "pending"]

    def recheck_pending(self, ask_id: str, at_ms: int) -> None:
        """Put a pending ask at the back of the pending index (still in flight at `at_ms`)."""
        self.r.zadd(keys.ASKS_PENDING, {ask_id: at_ms}, xx=True)

    def postpone(self, ask_id: str, at_ms: int) -> None:
        """Put a due ask at `at_ms` in the due index (its deadline stands on the record): an
        ask that must wait (a rung not yet sent) never holds the head of the index."""
        self.r.zadd(keys.ASKS_DUE, {ask_id: at_ms}, xx=True)

    # ------------------------------------------------------------------ consents, declines

    def consents_for(self, work_id: str) -> list[ConsentRecord]:
        ids = [text(i) for i in self.r.zrevrange(keys.consents_of_work(work_id), 0, 49)]
        return self._consents(ids)

    def _consents(self, ids: Iterable[str]) -> list[ConsentRecord]:
        ids = list(ids)
        if not ids:
            return []
        raws = self.r.mget([keys.consent(i) for i in ids])
        return [ConsentRecord.model_validate_json(raw) for raw in raws if raw is not None]

    def consents(
        self, *, now_ms: int, active: bool = True, limit: int = 200
    ) -> list[ConsentRecord]:
        low = now_ms if active else "-inf"
        ids = [text(i) for i in self.r.zrevrangebyscore(keys.CONSENTS, "+inf", low, 0, limit)]
        found = self._consents(ids)
        return [c for c in found if c.holds_at(now_ms)] if active else found

    def consent(self, consent_id: str) -> ConsentRecord | None:
        raw = self.r.get(keys.consent(consent_id))
        return None if raw is None else ConsentRecord.model_validate_json(raw)

    def revoke(self, consent_id: str, *, by: str, now_ms: int) -> ConsentRecord | None:
        """Revoke a consent for an operator (kept, marked revoked, until it would have
        expired), telling its seat: the consent as it now stands (unchanged when it was
        already revoked or had expired), None when there is none."""
        got = self.revoke_consent(consent_id, by=by, now_ms=now_ms, anyone=True)
        return None if got is None else got.revocation.consent

    def revoke_consent(
        self, consent_id: str, *, by: str, now_ms: int, anyone: bool = False
    ) -> Revoked | None:
        """Revoke a consent as `by` (pipeline/asks.py `revoke_consent` decides; `anyone`: an
        operator, for whoever they name), written in one step (`consent_revoke.lua`) with
        the revocation on the ask's answer and the seat's `consent_revoked` inbox item. A
        consent revoked already is refused and nothing is written, so revoking again (a
        retried click, a second person) tells the seat nothing more. None: no such consent."""
        for _ in range(MAX_TRIES):
            raw = self.r.get(keys.consent(consent_id))
            if raw is None:
                return None
            consent = ConsentRecord.model_validate_json(raw)
            ask = self.get(consent.ask_id)
            got = revoke_consent(consent, ask, by=by, now_ms=now_ms, anyone=anyone)
            if got.outcome != "revoked" or got.item is None:
                return Revoked(got)
            marked = got.ask if ask is not None else None
            verb, position = self._revoke(
                keys=[
                    keys.consent(consent_id),
                    keys.ask(consent.ask_id),
                    *InboxRoom.KEYS,
                    *InboxRoom.seat_keys(consent.seat_id),
                    *keys.CONTROLLER_WAKE,
                ],
                args=[
                    raw,
                    got.consent.model_dump_json(by_alias=True),
                    "" if marked is None or ask is None else ask.version,
                    "" if marked is None else marked.model_dump_json(by_alias=True),
                    secrets.token_hex(8),
                    got.item.model_dump_json(by_alias=True).replace(
                        '"position":1', '"position":0', 1
                    ),
                    *self.room.args(),
                    consent.seat_id,
                    consent.expires_at_ms + self.retention_ms,
                ],
            )
            if text(verb) == "missing":
                return None
            if text(verb) == "again":
                # Written already (a try whose reply was lost, sent again by the client): it
                # stands as that try wrote it, the seat told once.
                return Revoked(replace(got, ask=self.get(consent.ask_id) if marked else None))
            if text(verb) == "ok":
                if marked is not None and ask is not None:
                    marked = marked.model_copy(update={"version": ask.version + 1})
                    got = replace(got, ask=marked)
                return Revoked(got, position=int(position))
        raise AskContended(f"consent {consent_id}: {MAX_TRIES} changes raced this revocation")

    def declines_for(self, work_id: str) -> list[DeclineRecord]:
        raws = self.r.hvals(keys.declines_of_work(work_id))
        return [DeclineRecord.model_validate_json(raw) for raw in raws]

    # ------------------------------------------------------------------ the brake

    def brake(self, seat_id: str) -> AskBrake | None:
        """The seat's hold, or (not held) the last one lifted while it is kept; None when it
        was never held."""
        held, lifted = self.r.mget([keys.asks_brake(seat_id), keys.asks_lifted(seat_id)])
        raw = held if held is not None else lifted
        return None if raw is None else AskBrake.model_validate_json(raw)

    def concluded(self, seat_id: str, limit: int = 5) -> list[tuple[str, Concluded]]:
        """The seat's concluded asks since its brake was last lifted, newest first."""
        out: list[tuple[str, Concluded]] = []
        for raw in self.r.lrange(keys.asks_concluded(seat_id), 0, limit - 1):
            ask_id, _, how = text(raw).rpartition("|")
            out.append((ask_id, _how(how)))
        return out

    def hold(self, brake: AskBrake) -> bool:
        """Hold the seat's asks; False when they already are (one hold, one operator ask).
        Two judgements at once (a declining click and an expiry) hold it once: the record is
        written only where there is none (a lifted hold leaves none)."""
        key = keys.asks_brake(brake.seat_id)
        return bool(self.r.set(key, brake.model_dump_json(by_alias=True), nx=True))

    def note_hold(self, seat_id: str, tracking_id: str) -> None:
        current = self.brake(seat_id)
        if current is not None and current.held:
            noted = current.model_copy(update={"tracking_id": tracking_id})
            self.r.set(keys.asks_brake(seat_id), noted.model_dump_json(by_alias=True))

    def lift(self, seat_id: str, *, by: str, now_ms: int) -> AskBrake | None:
        """Lift a seat's hold; its window starts again empty. None when it was not held."""
        current = self.brake(seat_id)
        if current is None or not current.held:
            return None
        lifted = current.model_copy(update={"held": False, "lifted_at_ms": now_ms, "lifted_by": by})
        pipe = self.r.pipeline()
        pipe.delete(keys.asks_brake(seat_id), keys.asks_concluded(seat_id))
        pipe.set(
            keys.asks_lifted(seat_id), lifted.model_dump_json(by_alias=True), px=self.retention_ms
        )
        pipe.execute()
        return lifted

    def held_seats(self) -> list[AskBrake]:
        found = []
        for key in self.r.scan_iter(match=keys.asks_brake("*"), count=500):
            raw = self.r.get(key)
            if raw is not None:
                b = AskBrake.model_validate_json(raw)
                if b.held:
                    found.append(b)
        return found

    def view(self, decision: EngagementDecision, seat_id: str) -> AskRecordView:
        """What the record holds that bears on an engaging decision (one round trip:
        ask_view.lua)."""
        return self.view_of(self._view(keys=self.view_keys(decision, seat_id), args=VIEW_ARGS))

    def view_and_tally(
        self,
        decision: EngagementDecision,
        seat_id: str,
        ledger: Ledger,
        *,
        counted_as: str,
        now_ms: int,
    ) -> tuple[AskRecordView, Tally]:
        """`view`, and the ledger's `tally` of the same plan for seat `counted_as`, in one
        round trip and one snapshot (engage_read.lua). The ledger must be on this store's
        Redis."""
        ids, counted = ledger.tally_keys(decision, counted_as)
        view, tally = self._engage_read(
            keys=[*self.view_keys(decision, seat_id), *counted],
            args=[*VIEW_ARGS, now_ms, len(ids)],
        )
        return self.view_of(view), ledger.tally_of(ids, tally)

    @staticmethod
    def view_keys(decision: EngagementDecision, seat_id: str) -> list[str]:
        """ask_view_common.lua's keys for one plan, in order."""
        return [
            keys.ask_latest(decision.dedupe_key or ""),
            keys.consents_of_work(decision.work_id),
            keys.declines_of_work(decision.work_id),
            keys.asks_brake(seat_id),
        ]

    @staticmethod
    def view_of(reply: Sequence[Any]) -> AskRecordView:
        """The view from ask_view_common.lua's reply."""
        doc, version, consents, declines, brake = reply
        return AskRecordView(
            latest=AskStore._doc(doc, version) if doc else None,
            consents=tuple(ConsentRecord.model_validate_json(c) for c in consents),
            declines=tuple(DeclineRecord.model_validate_json(d) for d in declines),
            brake=AskBrake.model_validate_json(brake) if brake else None,
        )

    # ------------------------------------------------------------------ writing

    def create(self, ask: Ask) -> Created:
        """Record `ask` once: (whether it is new, the stored ask, the id of the ask of the
        latest earlier attempt under its dedupe key, if any)."""
        named, args = self.create_call(ask)
        return self.created(ask, self._create(keys=named, args=args))

    def create_call(self, ask: Ask) -> tuple[list[str], list[Any]]:
        """ask_create_common.lua's keys and arguments for recording `ask`."""
        named = [
            keys.ask(ask.id),
            keys.ASKS_ALL,
            keys.asks_of_seat(ask.seat_id),
            keys.asks_of_work(ask.work_id),
            keys.ASKS_OPEN,
            keys.ask_latest(ask.dedupe_key),
            keys.ask_escalations(ask.escalates or ask.id),
            keys.ASKS_PENDING,
            *[keys.asks_of_person(t.member_id) for t in ask.targets],
            *([keys.asks_of_item(ask.item_id)] if ask.item_id else []),
        ]
        args = [
            ask.model_dump_json(by_alias=True),
            ask.created_at_ms,
            ask.id,
            ask.attempt,
            "1" if ask.escalates else "0",
            self.index_ms,
        ]
        return named, args

    def created(self, ask: Ask, reply: Sequence[Any]) -> Created:
        """`create`'s answer from ask_create_common.lua's reply for `ask`."""
        verb, raw, before = reply
        if text(verb) == "new":
            return True, ask, text(before) or None
        stored = self.get(ask.id)
        found = stored if stored is not None else Ask.model_validate_json(raw)
        return False, found, text(before) or None

    def commit(
        self,
        before: Ask,
        after: Ask,
        *,
        consent: ConsentRecord | None = None,
        decline: DeclineRecord | None = None,
        item: InboxItem | None = None,
        item_seat: str | None = None,
        link: bool = False,
    ) -> tuple[Commit, int]:
        """Write `after` over `before` if it is still the stored version; (verb, inbox
        position of `item`, 0 when none or the inbox was full)."""
        named, args = self.commit_call(
            before,
            after,
            consent=consent,
            decline=decline,
            item=item,
            item_seat=item_seat,
            link=link,
        )
        verb, _v, position = self._commit(keys=named, args=args)
        return text(verb), int(position)  # type: ignore[return-value]

    def commit_call(
        self,
        before: Ask,
        after: Ask,
        *,
        consent: ConsentRecord | None = None,
        decline: DeclineRecord | None = None,
        item: InboxItem | None = None,
        item_seat: str | None = None,
        link: bool = False,
    ) -> tuple[list[str], list[Any]]:
        """ask_commit_common.lua's keys and arguments for `commit`."""
        new = after.model_copy(update={"version": before.version + 1})
        how = concluded_as(after) if before.is_open and not after.is_open else None
        seat = item_seat or after.seat_id
        inbox = InboxRoom.seat_keys(seat)
        message = self._message_keys(after) if link else []
        named = [
            keys.ask(after.id),
            keys.ASKS_OPEN,
            keys.ASKS_DUE,
            keys.consent(consent.id if consent else "-"),
            keys.consents_of_work(after.work_id),
            keys.CONSENTS,
            keys.declines_of_work(after.work_id),
            keys.asks_concluded(after.seat_id),
            *InboxRoom.KEYS,
            *inbox,
            keys.ASKS_PENDING,
            *(message or [keys.ask_message("-", "-")]),
            *keys.CONTROLLER_WAKE,
        ]
        args = [
            before.version,
            new.model_dump_json(by_alias=True),
            secrets.token_hex(8),  # the commit's op id: a re-sent commit finds it
            after.id,
            "1" if after.is_open else "0",
            "" if after.deadline_ms is None else after.deadline_ms,
            self.retention_ms,
            "" if consent is None else consent.model_dump_json(by_alias=True),
            "" if consent is None else consent.id,
            0 if consent is None else consent.expires_at_ms,
            "" if decline is None else _scope_field(decline.scope),
            "" if decline is None else decline.model_dump_json(by_alias=True),
            "" if how is None else f"{after.id}|{how}",
            ""
            if item is None
            else item.model_dump_json(by_alias=True).replace('"position":1', '"position":0', 1),
            *self.room.args(),
            seat,
            0 if consent is None else consent.expires_at_ms + self.retention_ms,
            "1" if message else "0",
            self._link_ms(after),
            "1" if after.state == "pending" else "0",
        ]
        return named, args

    def update(
        self,
        ask_id: str,
        change: Callable[[Ask], Ask | None],
        *,
        known: Ask | None = None,
        link: bool = False,
    ) -> Ask | None:
        """Apply `change` (None: leave it) under compare-and-set; the stored ask after it
        (None when there is no such ask). `known`: the ask as the caller last had it, tried
        first without reading it again; `link`: point its message at it in the same write."""
        for _ in range(MAX_TRIES):
            before = known if known is not None else self.get(ask_id)
            known = None
            if before is None:
                return None
            after = change(before)
            if after is None or after == before:
                return before
            verb, _pos = self.commit(before, after, link=link)
            if verb in ("ok", "again"):
                return after.model_copy(update={"version": before.version + 1})
            if verb == "missing":
                return None
        raise AskContended(f"ask {ask_id}: {MAX_TRIES} changes raced this one")

    @staticmethod
    def _message_keys(ask: Ask) -> list[str]:
        """The keys of the message an ask landed as: the message itself, and, posted as a
        reply in a thread, that thread's root (a reply to it carries the root, so the root
        leads to the ask too: the newest ask in the thread)."""
        landing = ask.landing
        if landing is None or not landing.message_id:
            return []
        where = landing.channel_id or landing.adapter
        ids = dict.fromkeys([landing.message_id, landing.thread_root_id or landing.message_id])
        return [keys.ask_message(where, i) for i in ids]

    def _link_ms(self, ask: Ask) -> int:
        """How long a message key is kept: as long as the ask could still be answered."""
        return self.retention_ms + ask.timeout_ms * 4

    def link(self, ask: Ask) -> None:
        """Remember the message an ask landed as, for its clicks and replies."""
        for key in self._message_keys(ask):
            self.r.set(key, ask.id, px=self._link_ms(ask))

    def reply_answered(self, delivery_id: str) -> bool:
        """Whether this delivered reply already answered its ask (a redelivery of it)."""
        return bool(self.r.exists(keys.ask_reply(delivery_id)))

    def note_reply(self, delivery_id: str) -> None:
        self.r.set(keys.ask_reply(delivery_id), "1", px=self.retention_ms)

    def trim_due(self, now_ms: int, every_ms: int = 3_600_000) -> bool:
        """True for the first caller in each `every_ms` (one trim an hour, however many ticks
        run)."""
        return bool(self.r.set(keys.ASKS_TRIMMED, now_ms, nx=True, px=every_ms))

    def answer(self, ask_id: str, a: AnswerIn, *, now_ms: int) -> Answered:
        """Record one answer exactly once. An answer on an escalation's own ask is the answer
        to the ask it escalates (the seat's), and is written on both."""
        for _ in range(MAX_TRIES):
            ask = self.get(ask_id)
            if ask is None:
                raise AskMissing(ask_id)
            if ask.escalates:
                root = self.get(ask.escalates)
                if root is not None:
                    done = self._answer_one(root, a, now_ms=now_ms)
                    if done is None:
                        continue
                    if done.outcome.outcome in ("answered", "snoozed"):
                        self._mirror(ask, a, now_ms=now_ms)
                    if done.outcome.outcome == "answered":
                        # The other rungs' asks end with it (the one answered shows the answer).
                        self._close_escalations(done.outcome.ask, now_ms=now_ms)
                    return Answered(done.outcome, root=done.outcome.ask, position=done.position)
            done = self._answer_one(ask, a, now_ms=now_ms)
            if done is None:
                continue
            if done.outcome.outcome == "answered" and done.outcome.ask.escalations:
                self._close_escalations(done.outcome.ask, now_ms=now_ms)
            return done
        raise AskContended(f"ask {ask_id}: {MAX_TRIES} answers raced this one")

    def _answer_one(self, ask: Ask, a: AnswerIn, *, now_ms: int) -> Answered | None:
        outcome = answer_ask(ask, a, now_ms=now_ms, consent_ttl_ms=self.consent_ttl_ms)
        if outcome.outcome == "refused" or outcome.ask == ask:
            return Answered(outcome)  # refused, or the same answer delivered again
        item = answered_item(outcome)
        verb, position = self.commit(
            ask,
            outcome.ask,
            consent=outcome.consent,
            decline=decline_of(outcome.ask),
            item=item,
        )
        if verb in ("conflict", "missing"):
            return None
        stored = outcome.ask.model_copy(update={"version": ask.version + 1})
        return Answered(outcome.model_copy(update={"ask": stored}), position=position)

    def _mirror(self, child: Ask, a: AnswerIn, *, now_ms: int) -> None:
        """The escalation's own ask shows the answer it carried (no second inbox item)."""

        def change(ask: Ask) -> Ask | None:
            got = answer_ask(ask, a, now_ms=now_ms, consent_ttl_ms=self.consent_ttl_ms)
            return got.ask if got.outcome in ("answered", "snoozed") else None

        self.update(child.id, change)

    def _close_escalations(self, root: Ask, *, now_ms: int) -> None:
        """Every escalation's own ask of an ask that ended, closed with it."""
        closed: AskClose = (
            "answered_elsewhere"
            if root.state == "answered"
            else "withdrawn"
            if root.closed == "withdrawn"
            else "expired"
        )
        for child in self.escalations_of(root.id):
            self.update(child.id, lambda c: closed_as(c, closed, root, now_ms=now_ms))

    def close_escalations(self, root: Ask, *, now_ms: int) -> None:
        self._close_escalations(root, now_ms=now_ms)

    def trim(self, now_ms: int) -> int:
        """Drop from every index the asks Redis has expired (kept `retention_ms` after they
        ended), and the consents past their keeping; how many index entries were dropped."""
        cutoff = now_ms - self.retention_ms
        dropped = 0
        indexes = [keys.ASKS_ALL]
        for pattern in ("seat", "person", "work", "item"):
            indexes += list(self.r.scan_iter(match=f"{keys.ASKS_ALL}:{pattern}:*", count=500))
        for index in indexes:
            old = [text(i) for i in self.r.zrangebyscore(index, "-inf", cutoff, 0, 1000)]
            if not old:
                continue
            pipe = self.r.pipeline(transaction=False)
            for ask_id in old:
                pipe.exists(keys.ask(ask_id))
            gone = [i for i, kept in zip(old, pipe.execute(), strict=True) if not kept]
            if gone:
                dropped += int(self.r.zrem(index, *gone))
        self.r.zremrangebyscore(keys.CONSENTS, "-inf", cutoff)
        return dropped
