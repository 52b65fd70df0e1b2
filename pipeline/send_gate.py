"""The send gate: the last pure check before an ask meets the wire.

See docs/architecture.md, "The send stage".

Pure: an `OutboundAsk`, the policy, the directory, each person's timezone and `now_ms` in;
a `SendGateVerdict` out. No clock, no tz database: the workers resolve IANA names (file I/O)
and pass each zone in as a `UtcOffset`, a function from a UTC instant to the offset in force.

Rules run in a fixed order and the first match wins. A refusal is `blocked` (the shell
records `send_blocked` with the rule); quiet hours come last and only ever DEFER, so an ask
that would be refused is refused at 3 a.m. too, and a deferred ask is re-checked on return.

    body_empty             nothing but whitespace
    body_too_short         fewer than minBodyChars characters once stripped
    body_too_long          more than maxBodyChars characters
    credentials_in_body    a token, key or private key in the body (or the new room's name)
    no_target              a DM or new room that reaches nobody
    target_not_engageable  someone it reaches is unknown, not active/online/busy, or the seat
    unknown_surface        a surface the adapters do not know
    channel_denied         the channel is on the deny list (wins over the allow list)
    dm_not_allowed         DMs are switched off
    new_room_not_allowed   new rooms are switched off
    no_channel             a reply or channel post without a channel id
    channel_not_allowed    an allow list is set and this existing channel is not on it
    quiet_hours            (defer) someone it reaches is inside quiet hours in their own time

Every person the ask reaches is checked, and one who may not be asked holds the WHOLE ask:
its words, mentions, room and dedupe key were chosen for all of them together, so sending to
the rest would be a different ask that nobody decided. The engagement stage decides again.

Credential patterns are linear-time on agent output of any length: no nested quantifiers, and
every pattern that starts with a run of token characters is anchored by a look-behind on a
superset of those characters, so no two attempts scan the same run. A pattern that starts
with a look-behind is tried at every position of the text (`re` finds no literal prefix to
skip to), ~65 us for ten patterns over an ordinary ask, so each names the literal text every
match of it contains, and a text that holds none of it is not scanned by that pattern.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from contracts.guardrails import DAY_MS, HOUR_MS
from contracts.messages import OutboundAsk
from contracts.org import Member
from contracts.send_gate import (
    WEEKDAYS,
    QuietHours,
    SendGateVerdict,
    SendOutcome,
    SendPolicy,
    SendRule,
)
from pipeline.engagement import SURFACES

UtcOffset = Callable[[int], int]
"""A timezone as pure code needs it: the offset from UTC (ms) in force at a UTC instant (ms)."""

MINUTE_MS = 60_000
# Weekdays repeat weekly and offsets change a few times a year, so a week and a day of search
# finds a moment outside everyone's quiet hours if one exists.
QUIET_SEARCH_MS = 8 * DAY_MS
_MAX_QUIET_STEPS = 1_000
_EXISTING = frozenset({"reply_in_place", "existing_channel"})
_OPENS_FOR_PEOPLE = frozenset({"dm", "new_room"})

Refusal = tuple[SendRule, str]


def fixed_offset(offset_ms: int) -> UtcOffset:
    """A zone that is always `offset_ms` from UTC (UTC itself is `fixed_offset(0)`)."""

    def offset(_utc_ms: int) -> int:
        return offset_ms

    return offset


UTC = fixed_offset(0)


# --------------------------------------------------------------------------- credentials


@dataclass(frozen=True, slots=True)
class _Pattern:
    kind: str
    regex: re.Pattern[str]
    # Every match contains one of these: a text holding none of them is not scanned. Casefolded
    # for a pattern that ignores case, and looked for in the casefolded text (every character
    # `re.IGNORECASE` matches to one of theirs casefolds to it: ſ to s, the Kelvin sign to k).
    needles: tuple[str, ...]
    folds: bool


def _p(kind: str, pattern: str, needles: tuple[str, ...], flags: int = 0) -> _Pattern:
    # Each pattern has a `secret` group; what precedes it is a fixed, public prefix.
    folds = bool(flags & re.IGNORECASE)
    return _Pattern(kind, re.compile(pattern, flags), needles, folds)


CREDENTIAL_PATTERNS: tuple[_Pattern, ...] = (
    # Every Slack token has a numeric segment after its prefix; prose like xoxb-style does not.
    _p(
        "Slack token",
        r"(?<![A-Za-z0-9-])xox[abposr]-(?P<secret>[0-9]{1,15}-[A-Za-z0-9-]{8,})",
        ("xox",),
    ),
    _p(
        "Slack app token",
        r"(?<![A-Za-z0-9-])xapp-(?P<secret>[0-9]{1,3}-[A-Za-z0-9-]{10,})",
        ("xapp-",),
    ),
    _p(
        "Slack webhook URL",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/+-]{20,})",
        ("hooks.slack.com/",),
    ),
    _p(
        "GitHub token",
        r"(?<![A-Za-z0-9_])gh[pousr]_(?P<secret>[A-Za-z0-9]{36,})",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    _p(
        "GitHub token",
        r"(?<![A-Za-z0-9_])github_pat_(?P<secret>[A-Za-z0-9_]{22,})",
        ("github_pat_",),
    ),
    _p(
        "AWS access key id",
        r"(?<![A-Za-z0-9])A[SK]IA(?P<secret>[A-Z0-9]{16})(?![A-Za-z0-9])",
        ("ASIA", "AKIA"),
    ),
    _p(
        "AWS secret access key",
        r"(?:aws_?)?secret_?access_?key(?P<secret>[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        ("secret",),
        re.IGNORECASE,
    ),
    _p(
        "private key",
        r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY(?: BLOCK)?-----"
        r"(?P<secret>)",
        ("-----BEGIN ",),
    ),
    # A digit is required: real tokens carry one, "bearer instruments/securities" does not.
    _p(
        "bearer token",
        r"(?<![A-Za-z0-9_])bearer[ \t]+"
        r"(?P<secret>(?=[A-Za-z_.~+/-]*[0-9])[A-Za-z0-9_.~+/-]{20,})",
        ("bearer",),
        re.IGNORECASE,
    ),
    _p(
        "JWT",
        r"(?<![A-Za-z0-9_-])eyJ(?P<secret>[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*)",
        ("eyJ",),
    ),
)


_BLANKS = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class CredentialHit:
    """One credential found in a text: its kind, where it starts, and a public prefix only."""

    kind: str
    at: int
    end: int
    shown: str


def find_credentials(text: str) -> tuple[CredentialHit, ...]:
    """Every credential in `text`, by position; overlapping finds (a JWT after Bearer) once."""
    hits: list[CredentialHit] = []
    folded = ""
    for pattern in CREDENTIAL_PATTERNS:
        if pattern.folds:
            folded = folded or text.casefold()
        haystack = folded if pattern.folds else text
        if not any(needle in haystack for needle in pattern.needles):
            continue
        for m in pattern.regex.finditer(text):
            prefix = _BLANKS.sub(" ", text[m.start() : m.start("secret")])
            shown = f"{prefix}…" if m.group("secret") else prefix
            hits.append(CredentialHit(pattern.kind, m.start(), m.end(), shown))
    hits.sort(key=lambda h: (h.at, -h.end))
    kept: list[CredentialHit] = []
    for hit in hits:
        if not kept or hit.at >= kept[-1].end:
            kept.append(hit)
    return tuple(kept)


def _describe(hits: Sequence[CredentialHit], where: str) -> str:
    listed = "; ".join(f"{h.kind} ({h.shown}) at offset {h.at}" for h in hits[:3])
    more = f"; and {len(hits) - 3} more" if len(hits) > 3 else ""
    return (
        f"the {where} holds {len(hits)} credential{'s' if len(hits) != 1 else ''}: "
        f"{listed}{more}; a secret posted in chat is leaked, so nothing was sent"
    )


# --------------------------------------------------------------------------- the rules


def reached_member_ids(ask: OutboundAsk) -> tuple[str, ...]:
    """The people an ask reaches: its targets in order, then anyone else it is opened with
    (the seat itself excepted: it is in every room it creates)."""
    ids = [t.member_id for t in ask.targets]
    ids += [m for m in ask.member_ids if m != ask.seat_id]
    return tuple(dict.fromkeys(i for i in ids if i))


def _body(ask: OutboundAsk, policy: SendPolicy) -> Refusal | None:
    stripped = ask.body.strip()
    if not stripped:
        return "body_empty", "the ask has no words; an empty message is not an ask"
    if len(stripped) < policy.min_body_chars:
        return "body_too_short", (
            f"the ask is {len(stripped)} characters; the minimum is {policy.min_body_chars}"
        )
    if len(ask.body) > policy.max_body_chars:
        return "body_too_long", (
            f"the ask is {len(ask.body)} characters; the limit is {policy.max_body_chars}, "
            "and anything longer belongs behind the link"
        )
    return None


def _credentials(ask: OutboundAsk, policy: SendPolicy) -> Refusal | None:
    if not policy.block_credentials:
        return None
    for where, text in (("body", ask.body), ("new room's name", ask.room_name or "")):
        hits = find_credentials(text)
        if hits:
            return "credentials_in_body", _describe(hits, where)
    return None


def _targets(
    ask: OutboundAsk, people: Sequence[str], members: Mapping[str, Member]
) -> Refusal | None:
    if not people and ask.surface in _OPENS_FOR_PEOPLE:
        return "no_target", f"surface {ask.surface} reaches nobody, so it cannot be opened"
    refused: list[str] = []
    for mid in people:
        member = members.get(mid)
        if mid == ask.seat_id:
            refused.append(f"{mid} (the seat itself)")
        elif member is None:
            refused.append(f"{mid} (not in the directory)")
        elif not member.engageable_status:
            refused.append(f"{mid} (status {member.status!r})")
    if refused:
        return "target_not_engageable", (
            f"only active, online or busy people can be asked; not {', '.join(refused)}. "
            "The whole ask is held: its words and room were chosen for all of them"
        )
    return None


def _where(ask: OutboundAsk, policy: SendPolicy) -> Refusal | None:
    surface, channel = ask.surface, ask.channel_id
    if surface not in SURFACES:
        return "unknown_surface", f"surface {surface!r} is not one of {', '.join(SURFACES)}"
    if channel and channel in policy.denied_channel_ids:
        return "channel_denied", f"channel {channel} is on the deny list"
    if surface == "dm" and not policy.allow_dm:
        return "dm_not_allowed", "DMs are switched off by the send policy"
    if surface == "new_room" and not policy.allow_new_rooms:
        return "new_room_not_allowed", "creating rooms is switched off by the send policy"
    if surface in _EXISTING:
        if not channel:
            return "no_channel", f"surface {surface} needs a channel id and this ask has none"
        allowed = policy.allowed_channel_ids
        if allowed is not None and channel not in allowed:
            return "channel_not_allowed", f"channel {channel} is not on the allow list"
    return None


# --------------------------------------------------------------------------- quiet hours


@dataclass(frozen=True, slots=True)
class QuietWindow:
    """Quiet hours in local milliseconds after midnight; `days` are weekdays, Monday = 0."""

    start_ms: int
    end_ms: int
    days: frozenset[int] | None

    @classmethod
    def of(cls, q: QuietHours) -> QuietWindow:
        days = None if q.days is None else frozenset(WEEKDAYS.index(d) for d in q.days)
        return cls(q.start_minute * MINUTE_MS, q.end_minute * MINUTE_MS, days)

    def _started_on(self, local_ms: int) -> int | None:
        """The local day (since 1970-01-01) whose window holds `local_ms`, or None."""
        day, ms = divmod(local_ms, DAY_MS)
        if self.start_ms < self.end_ms:
            started = day if self.start_ms <= ms < self.end_ms else None
        elif ms >= self.start_ms:
            started = day
        else:
            started = day - 1 if ms < self.end_ms else None
        # 1970-01-01 was a Thursday (3 with Monday = 0).
        if started is None or (self.days is not None and (started + 3) % 7 not in self.days):
            return None
        return started

    def quiet(self, zone: UtcOffset, utc_ms: int) -> bool:
        return self._started_on(utc_ms + zone(utc_ms)) is not None

    def quiet_until(self, zone: UtcOffset, utc_ms: int) -> int:
        """For a moment inside quiet hours: a later instant until which the person certainly
        stays inside: the window's local end, or the zone's next offset change if sooner."""
        offset = zone(utc_ms)
        started = self._started_on(utc_ms + offset)
        if started is None:
            raise ValueError("quiet_until is asked only for a moment inside quiet hours")
        wraps = self.end_ms <= self.start_ms
        end_utc = started * DAY_MS + self.end_ms + (DAY_MS if wraps else 0) - offset
        if zone(end_utc) == offset:
            return end_utc
        # The clocks change first (DST): the end may not exist, or come an hour later.
        lo, hi = utc_ms, end_utc
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if zone(mid) == offset else (lo, mid)
        return hi


def first_clear(window: QuietWindow, zones: Sequence[UtcOffset], from_ms: int) -> int | None:
    """The earliest instant from `from_ms` at which no zone is inside quiet hours, if one comes
    within QUIET_SEARCH_MS."""
    t = from_ms
    for _ in range(_MAX_QUIET_STEPS):
        if t > from_ms + QUIET_SEARCH_MS:
            return None
        later = [window.quiet_until(z, t) for z in zones if window.quiet(z, t)]
        if not later:
            return t
        t = max(later)
    return None


def _clock(zone: UtcOffset, utc_ms: int) -> str:
    ms = (utc_ms + zone(utc_ms)) % DAY_MS
    return f"{ms // HOUR_MS:02d}:{ms // MINUTE_MS % 60:02d}"


def _span(ms: int) -> str:
    hours, minutes = divmod(-(-ms // MINUTE_MS), 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def _quiet(
    q: QuietHours, zones: Sequence[tuple[str, UtcOffset]], now_ms: int
) -> tuple[int | None, str]:
    """(None, note) to send now, or (the instant to defer to, why)."""
    window = QuietWindow.of(q)
    offsets = [z for _, z in zones]
    clear = first_clear(window, offsets, now_ms)
    note = ""
    if clear is None:
        # Nobody's day overlaps everyone else's (three people eight hours apart, a nine-hour
        # window). Never drop: honour the first target's night, and wait for a common moment
        # only if one opens before theirs ends, so a re-check at the deferred time sends.
        primary = first_clear(window, offsets[:1], now_ms)
        primary = now_ms if primary is None else primary  # only for a zone that never settles
        common = None if primary == now_ms else first_clear(window, offsets, primary)
        clear = primary if common is None else common
        note = (
            f"no moment in the next {QUIET_SEARCH_MS // DAY_MS} days is outside everyone's quiet "
            f"hours, so only {zones[0][0]}'s are honoured"
        )
    if clear == now_ms:
        return None, note
    asleep = [name for name, z in zones if window.quiet(z, now_ms)]
    local = ", ".join(f"{name} {_clock(z, clear)}" for name, z in zones)
    why = (
        f"{', '.join(asleep)} {'is' if len(asleep) == 1 else 'are'} inside quiet hours "
        f"({q.start}-{q.end} their time); deferred {_span(clear - now_ms)} "
    )
    if note:
        return clear, f"{why}({local}): {note}"
    return clear, f"{why}to the first moment nobody it reaches is ({local})"


# --------------------------------------------------------------------------- the gate


def check_send(
    ask: OutboundAsk,
    *,
    policy: SendPolicy,
    members: Mapping[str, Member],
    timezones: Mapping[str, UtcOffset],
    default_tz: UtcOffset,
    now_ms: int,
) -> SendGateVerdict:
    """Whether `ask` may go onto the wire at `now_ms`; if not, the first rule that refuses it,
    or the instant quiet hours defer it to.

    `members` is the directory by member id. `timezones` holds each person's resolved zone; a
    person without one, and an ask that reaches nobody (a post to a room), use `default_tz`
    (the workers resolve `policy.quiet_hours.default_timezone`).
    """
    people = reached_member_ids(ask)

    def verdict(
        rule: SendRule | None, detail: str, defer_until_ms: int | None = None
    ) -> SendGateVerdict:
        outcome: SendOutcome = (
            "send" if rule is None else "defer" if defer_until_ms is not None else "blocked"
        )
        return SendGateVerdict(
            outcome=outcome,
            rule=rule or "",
            detail=detail,
            defer_until_ms=defer_until_ms,
            checked_member_ids=people,
        )

    refusal = (
        _body(ask, policy)
        or _credentials(ask, policy)
        or _targets(ask, people, members)
        or _where(ask, policy)
    )
    if refusal is not None:
        return verdict(*refusal)
    if policy.quiet_hours is not None:
        zones = [(p, timezones.get(p, default_tz)) for p in people] or [("the room", default_tz)]
        defer_until, why = _quiet(policy.quiet_hours, zones, now_ms)
        if defer_until is not None:
            return verdict("quiet_hours", why, defer_until)
        if why:
            return verdict(None, f"passes every rule; {why}")
    return verdict(None, "passes every rule")
