"""Unit tests for the send gate (docs/architecture.md, "The send stage").

Pure: asks are literal contracts, `now_ms` is a constant, and zones are real tz database
zones adapted here the way the workers adapt them (zoneinfo is file I/O, so pipeline/ only
ever sees a `UtcOffset`). Each rule refuses with its code, the order between rules is pinned,
quiet-hours edges (midnight, boundaries, several zones, DST both ways) are exact, and no
credential ever reaches a verdict's detail.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC as UTC_TZ
from datetime import datetime, timedelta
from functools import cache
from typing import Any
from unittest.mock import patch
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

import pipeline.send_gate as send_gate_module
from contracts import Member, QuietHours, SendGateVerdict, SendPolicy, Target
from contracts.messages import OutboundAsk
from contracts.send_gate import SEND_RULES
from pipeline.send_gate import (
    CREDENTIAL_PATTERNS,
    UTC,
    CredentialHit,
    UtcOffset,
    check_send,
    find_credentials,
    fixed_offset,
    reached_member_ids,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC_TZ)
MS = timedelta(milliseconds=1)
HOUR = 3_600_000
MINUTE = 60_000


@cache
def zone(name: str) -> UtcOffset:
    """An IANA zone as the workers hand it to the gate: UTC ms in, offset ms out."""
    tz = ZoneInfo(name)

    def offset(utc_ms: int) -> int:
        delta = (EPOCH + utc_ms * MS).astimezone(tz).utcoffset()
        assert delta is not None
        return delta // MS

    return offset


def at(y: int, mo: int, d: int, h: int = 0, mi: int = 0, tz: str = "UTC") -> int:
    """Epoch ms of a wall-clock time in `tz` (the earlier one when a fall-back repeats it)."""
    return (datetime(y, mo, d, h, mi, tzinfo=ZoneInfo(tz)) - EPOCH) // MS


NOW = at(2024, 1, 10, 12)  # a Wednesday, noon UTC, no DST anywhere near
SEAT = "seat-a"
DIRECTORY = {
    m.id: m
    for m in (
        Member(id="ana", status="active"),
        Member(id="bo", status="online"),
        Member(id="cy", status="busy"),
        Member(id="dee", status="archived"),
        Member(id="eve", status="away"),
        Member(id=SEAT, status="active"),
    )
}
NIGHT = QuietHours(start="22:00", end="07:00")
QUIET = SendPolicy(quiet_hours=NIGHT)


def ask(
    *,
    targets: tuple[str, ...] = ("ana",),
    surface: str = "dm",
    channel: str | None = None,
    body: str = "Blocked: can you approve the billing migration?",
    member_ids: tuple[str, ...] | None = None,
    room_name: str | None = None,
) -> OutboundAsk:
    """An outbound ask from SEAT; a DM to ana unless told otherwise."""
    return OutboundAsk(
        idempotency_id="engage-k-1",
        tracking_id="t1",
        seat_id=SEAT,
        work_id="w1",
        attempt=1,
        surface=surface,
        channel_id=channel,
        room_name=room_name,
        member_ids=targets if member_ids is None else member_ids,
        targets=tuple(Target(member_id=t) for t in targets),
        body=body,
    )


def check(
    a: OutboundAsk | None = None,
    *,
    policy: SendPolicy | None = None,
    tz: dict[str, str] | None = None,
    default_tz: str = "UTC",
    now: int = NOW,
) -> SendGateVerdict:
    """check_send against DIRECTORY, with zones given by IANA name."""
    return check_send(
        ask() if a is None else a,
        policy=SendPolicy() if policy is None else policy,
        members=DIRECTORY,
        timezones={mid: zone(name) for mid, name in (tz or {}).items()},
        default_tz=zone(default_tz),
        now_ms=now,
    )


def blocked(v: SendGateVerdict) -> str:
    """The rule of a refusal (and that it is one)."""
    assert (v.outcome, v.defer_until_ms) == ("blocked", None), v
    return v.rule


def deferred_until(v: SendGateVerdict) -> int:
    """The instant a quiet-hours verdict defers to (and that it is one)."""
    assert (v.outcome, v.rule) == ("defer", "quiet_hours"), v
    assert v.defer_until_ms is not None
    return v.defer_until_ms


# --------------------------------------------------------------------------- defaults


def test_default_policy_is_what_an_org_wants_on_day_one() -> None:
    """Defaults: 1..3,000 characters, any channel, DMs and rooms allowed, credentials blocked."""
    assert SendPolicy().to_wire() == {
        "maxBodyChars": 3000,
        "minBodyChars": 1,
        "allowedChannelIds": None,
        "deniedChannelIds": [],
        "allowDm": True,
        "allowNewRooms": True,
        "quietHours": None,
        "blockCredentials": True,
    }
    assert QuietHours().to_wire() == {
        "start": "22:00",
        "end": "07:00",
        "days": None,
        "defaultTimezone": "UTC",
    }


def test_a_plain_ask_is_sent_with_the_people_it_reaches() -> None:
    """A short clean DM to an active person passes every rule and names who was checked."""
    v = check()
    assert (v.outcome, v.rule, v.defer_until_ms, v.checked_member_ids) == (
        "send",
        "",
        None,
        ("ana",),
    )


def test_the_documented_order_is_the_contracts_order() -> None:
    """The module docstring lists the rule codes in exactly the order of SEND_RULES."""
    doc = send_gate_module.__doc__ or ""
    listed = [c for c in re.findall(r"^    ([a-z_]+) {2,}", doc, re.MULTILINE)]
    assert tuple(listed) == SEND_RULES


# --------------------------------------------------------------------------- body


@pytest.mark.parametrize("body", ["", "   ", "\n\t \n"])
def test_blank_body_is_body_empty(body: str) -> None:
    """A body of nothing but whitespace is refused as body_empty."""
    assert blocked(check(ask(body=body))) == "body_empty"


def test_body_below_the_minimum_is_body_too_short() -> None:
    """Under minBodyChars once stripped refuses; exactly the minimum passes."""
    policy = SendPolicy(min_body_chars=5)
    v = check(ask(body="  ok?  "), policy=policy)
    assert blocked(v) == "body_too_short"
    assert "3 characters" in v.detail
    assert check(ask(body=" ok?!! "), policy=policy).outcome == "send"


def test_body_length_edge_is_exact() -> None:
    """maxBodyChars characters pass; one more is body_too_long, naming both numbers."""
    assert check(ask(body="x" * 3000)).outcome == "send"
    v = check(ask(body="x" * 3001))
    assert blocked(v) == "body_too_long"
    assert "3001" in v.detail and "3000" in v.detail


def test_too_long_wins_over_credentials() -> None:
    """Rule order: a long body holding a token is refused for its length first."""
    token = "ghp_" + "A1b2" * 9
    assert blocked(check(ask(body=token + " " + "x" * 3000))) == "body_too_long"


# --------------------------------------------------------------------------- credentials

SLACK_BOT = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
GITHUB = "ghp_" + "Zq8" * 12
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

# (body, kind, the public prefix the detail may show, the secret the detail must not show)
CREDENTIALS = [
    (f"token is {SLACK_BOT} ok", "Slack token", "xoxb-…", SLACK_BOT[5:]),
    ("user xoxp-2211-3344556677-abcdef0123456789", "Slack token", "xoxp-…", "3344556677"),
    ("xapp-1-A0123ABCD-1234567890-abcdef0123", "Slack app token", "xapp-…", "A0123ABCD"),
    (
        "POST https://hooks.slack.com/services/T0123ABCD/B0123ABCD/abcdefghijklmnopqrstuvwx",
        "Slack webhook URL",
        "hooks.slack.com/services/…",
        "T0123ABCD/B0123ABCD",
    ),
    (f"use {GITHUB}", "GitHub token", "ghp_…", GITHUB[4:]),
    ("ghs_" + "k" * 36, "GitHub token", "ghs_…", "k" * 36),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "GitHub token", "github_pat_…", "11ABC"),
    (f"key {AWS_ID} here", "AWS access key id", "AKIA…", AWS_ID[4:]),
    ("ASIAY34FZKBOKMUTVV7A", "AWS access key id", "ASIA…", "Y34FZKBOKMUTVV7A"),
    (
        f"aws_secret_access_key = {AWS_SECRET}",
        "AWS secret access key",
        "aws_secret_access_key…",
        AWS_SECRET,
    ),
    (
        f'{{"SecretAccessKey": "{AWS_SECRET}"}}',
        "AWS secret access key",
        "SecretAccessKey…",
        AWS_SECRET,
    ),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
        "private key",
        "-----BEGIN RSA PRIVATE KEY-----",
        "MIIEow",
    ),
    ("-----BEGIN PRIVATE KEY-----\nMIIE", "private key", "-----BEGIN PRIVATE KEY-----", "MIIE"),
    ("-----BEGIN EC PRIVATE KEY-----", "private key", "EC PRIVATE KEY", "\n"),
    ("-----BEGIN DSA PRIVATE KEY-----", "private key", "DSA PRIVATE KEY", "\n"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----", "private key", "OPENSSH PRIVATE KEY", "\n"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----", "private key", "PGP PRIVATE KEY BLOCK", "\n"),
    ("-----BEGIN ENCRYPTED PRIVATE KEY-----", "private key", "ENCRYPTED PRIVATE KEY", "\n"),
    (
        "Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "bearer token",
        "Bearer …",
        "9f8e7d6c5b4a",
    ),
    ("curl -H 'bearer ya29.a0AfH6SMBx7-token_value'", "bearer token", "bearer …", "ya29.a0"),
    (f"session {JWT}", "JWT", "eyJ…", JWT[3:20]),
]


@pytest.mark.parametrize(("body", "kind", "shown", "secret"), CREDENTIALS)
def test_each_credential_kind_is_refused_without_echoing_it(
    body: str, kind: str, shown: str, secret: str
) -> None:
    """Every kind refuses as credentials_in_body; the detail names the kind and a fixed prefix
    only, never the secret."""
    v = check(ask(body=body))
    assert blocked(v) == "credentials_in_body"
    assert kind in v.detail and shown in v.detail
    assert secret not in v.detail


@pytest.mark.parametrize(
    "body",
    [
        "The AKIA prefix marks an AWS access key id; never paste one.",
        "I hate to be the Bearer of bad news, but the migration failed.",
        "bearer instruments/securities-and-derivatives are out of scope",
        "Use an xoxb token for the bot, not xoxp. The xoxb-style token lives in the vault.",
        "Set SLACK_BOT_TOKEN=xoxb-your-token-here in the env file.",
        "Tokens look like ghp_ followed by 36 characters; github_pat_ is the new form.",
        "JWTs start with eyJ because that is base64 for a brace and a quote.",
        "The -----BEGIN PUBLIC KEY----- block and a CERTIFICATE are public.",
        "Webhooks go to hooks.slack.com/services/... (see the runbook).",
        "aws_secret_access_key is read from the vault, never from chat.",
        "Order AKIA1234 is 8 characters; ASIAN markets open at 9.",
    ],
)
def test_prose_about_credentials_is_not_a_credential(body: str) -> None:
    """Talking about token formats is not leaking a token: the ask is sent."""
    assert find_credentials(body) == ()
    assert check(ask(body=body)).outcome == "send"


def test_several_credentials_are_listed_by_position_and_overlaps_once() -> None:
    """The detail lists each find at its offset; a JWT after Bearer is one find, not two."""
    body = f"a {AWS_ID} then Bearer {JWT} then {GITHUB}"
    hits = find_credentials(body)
    assert [(h.kind, h.at) for h in hits] == [
        ("AWS access key id", 2),
        ("bearer token", body.index("Bearer")),
        ("GitHub token", body.index(GITHUB)),
    ]
    v = check(ask(body=body))
    assert "3 credentials" in v.detail and "offset 2" in v.detail
    assert JWT[3:] not in v.detail and AWS_ID[4:] not in v.detail


def scanned_in_full(text: str) -> tuple[CredentialHit, ...]:
    """What `find_credentials` finds when every pattern scans the whole text: each pattern's
    needles replaced by the empty string, which every text holds."""
    every = tuple(replace(p, needles=("",)) for p in CREDENTIAL_PATTERNS)
    with patch.object(send_gate_module, "CREDENTIAL_PATTERNS", every):
        return find_credentials(text)


# Every credential above, and each as it may be written otherwise: tabs for spaces, in upper
# and lower case, and with the characters `re.IGNORECASE` takes for an ASCII letter (ſ for s,
# the Kelvin sign for k).
WRITTEN = sorted(
    {
        variant
        for body, *_ in CREDENTIALS
        for variant in (
            body,
            body.replace(" ", "\t"),
            body.upper(),
            body.lower(),
            body.replace("s", "ſ").replace("k", "\u212a"),
        )
    }
)
# Fragments a text is built of: the credentials, parts of them, the needles in other cases,
# and characters that case-blind matching treats apart (ı, İ, ß).
FRAGMENTS = [
    *WRITTEN,
    *(body[: len(body) // 2] for body, *_ in CREDENTIALS),
    *(body[len(body) // 2 :] for body, *_ in CREDENTIALS),
    "SECRET_ACCESS_KEY=",
    "ſecret_acceſs_\u212aey: ",
    "BEARER ",
    "Bearer\t",
    "beareR ",
    "ıİß",
    "xoxb-",
    "AKIA",
    "eyJ",
    "-----BEGIN ",
    "AbCdEfGh0123456789/+AbCdEfGh0123456789/+",
    " ",
    "\n",
    "_",
    "-",
]


@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=6), max_size=8).map("".join))
def test_the_needles_skip_no_credential(text: str) -> None:
    """A pattern skipped because the text holds none of its needles would have found
    nothing: what the gate finds is what every pattern finds scanning the whole text."""
    assert find_credentials(text) == scanned_in_full(text)


@pytest.mark.parametrize("body", WRITTEN)
def test_every_match_holds_a_needle_of_its_pattern(body: str) -> None:
    """Whatever a pattern matches in a credential, however it is written, holds one of that
    pattern's needles (casefolded where the pattern ignores case), so no needle is missing."""
    assert find_credentials(body) == scanned_in_full(body)
    for pattern in CREDENTIAL_PATTERNS:
        for m in pattern.regex.finditer(body):
            found = m.group(0).casefold() if pattern.folds else m.group(0)
            assert any(n in found for n in pattern.needles), (pattern.kind, m.group(0))


def test_a_pattern_that_ignores_case_matches_only_what_casefolds_to_its_needles() -> None:
    """Every character `re.IGNORECASE` takes for a letter of a case-blind pattern's needles
    casefolds to that letter, so looking for the needles in the casefolded text misses no
    match (ſ is an s to `re` and to `casefold`; ß, which `casefold` makes ss, is no s to
    `re`)."""
    letters = {c for p in CREDENTIAL_PATTERNS if p.folds for n in p.needles for c in n}
    assert all(n == n.casefold() for p in CREDENTIAL_PATTERNS if p.folds for n in p.needles)
    every = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000)
    for letter in sorted(letters):
        taken = set(re.findall(re.escape(letter), every, re.IGNORECASE))
        assert taken, letter
        assert {c.casefold() for c in taken} == {letter}, letter


def test_a_credential_in_the_new_rooms_name_is_refused() -> None:
    """A room name is posted too (to the whole workspace): a token in it refuses."""
    a = ask(targets=("ana", "bo"), surface="new_room", room_name=f"fix {GITHUB}")
    v = check(a)
    assert blocked(v) == "credentials_in_body"
    assert "room's name" in v.detail and GITHUB[4:] not in v.detail


def test_credentials_can_be_allowed_by_policy() -> None:
    """blockCredentials=false lets a body with a token through (an operator's choice)."""
    assert check(ask(body=SLACK_BOT), policy=SendPolicy(block_credentials=False)).outcome == "send"


def test_credentials_win_over_an_unengageable_target() -> None:
    """Rule order: a token in an ask to an archived person is refused for the token."""
    assert blocked(check(ask(targets=("dee",), body=AWS_ID))) == "credentials_in_body"


ADVERSARIAL = {
    "slack prefixes": "xoxb-" * 8_000,
    "slack digits": "xoxb-1" * 6_667,
    "jwt one long segment": "eyJ" + "A" * 39_997,
    "jwt many dots": "eyJaaaa.eyJ" * 3_637,
    "bearer no digit": "Bearer " + "a" * 39_993,
    "bearer repeated": "bearer a-" * 4_445,
    "github prefixes": "ghp_" * 10_000,
    "github pat": "github_pat_" * 3_637,
    "aws key names": "aws_secret_access_key" + " " * 39_979,
    "aws ids": "AKIA" * 10_000,
    "pem headers": "-----BEGIN RSA PRIVATE KEY" * 1_539,
    "webhooks": "hooks.slack.com/services/" * 1_600,
    "alnum run": "a1" * 20_000,
}


# A scan's cost is counted, not timed: a wall-clock bound flakes under load, and benchmarks are
# never timed assertions in the test suite. `Backtracker` runs each credential pattern's own
# parse tree the way sre (a backtracking matcher) runs it and counts its steps; it must find
# exactly what `re` finds, so it is the same search, and a linear scan takes a bounded number
# of steps a character. Today's worst is 5 (the AWS secret key pattern reads a run of blanks
# and gives it back); a scan that rereads a run from every position it starts at (a pattern
# without its look-behind anchor) takes thousands a character on 40,000 characters.
LINEAR_STEPS_PER_CHAR = 10

# `re`'s own parser (private, without a stub): the model runs the very tree `re` compiles.
_RE_PARSER: Any = importlib.import_module("re._parser")

_Then = Callable[[int], int | None]  # the rest of the pattern from a position: its end or None
_Matcher = Callable[[int, _Then], int | None]


class _OverBudget(Exception):
    """The scan took more steps than it was allowed."""


class Backtracker:
    """A step-counting model of `re`'s matcher (sre is a backtracking engine): it runs the
    parse tree `re` builds for `pattern` and backtracks as sre does (greedy repeats longest
    first, then one shorter at a time; branches in order), counting a step for each character
    it tests and for each position `finditer` tries a match at. A position no match can begin
    at costs one step, as in sre's scan for a match's first character. Only the constructs
    the credential patterns use are modelled: any other is an error, never a wrong count."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        if pattern.flags & ~(re.IGNORECASE | re.UNICODE):
            raise NotImplementedError(f"flags {pattern.flags:#x} are not modelled")
        self.fold = bool(pattern.flags & re.IGNORECASE)
        parsed = _RE_PARSER.parse(pattern.pattern, pattern.flags)
        self.match = self._seq(parsed)
        starts, empty = self._first(parsed)
        # Where a match can begin (anywhere, for a pattern that can match the empty string).
        self.starts = (
            None if starts is None or empty else re.compile(f"[{re.escape(''.join(starts))}]")
        )
        self.text = ""
        self.steps = 0
        self.budget = 0

    def spans(self, text: str, budget: int) -> list[tuple[int, int]] | None:
        """What `finditer(text)` finds, as spans; None once the scan takes over `budget` steps."""
        self.text, self.steps, self.budget = text, 0, budget
        found: list[tuple[int, int]] = []
        pos = 0
        try:
            while (hit := self._search(pos)) is not None:
                found.append(hit)
                pos = hit[1] if hit[1] > hit[0] else hit[1] + 1  # past an empty match
        except _OverBudget:
            return None
        return found

    def _step(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > self.budget:
            raise _OverBudget

    def _search(self, start: int) -> tuple[int, int] | None:
        while start <= len(self.text):
            if self.starts is not None:
                found = self.starts.search(self.text, start)
                skip_to = len(self.text) + 1 if found is None else found.start()
                self._step(skip_to - start)  # one step a position no match begins at
                if found is None:
                    return None
                start = skip_to
            self._step()
            end = self.match(start, lambda j: j)
            if end is not None:
                return start, end
            start += 1
        return None

    # ------------------------------------------------------------------ the matchers

    def _seq(self, parsed: Any) -> _Matcher:
        nodes = [self._node(op.name, av) for op, av in parsed]

        def seq(i: int, then: _Then, k: int = 0) -> int | None:
            if k == len(nodes):
                return then(i)
            return nodes[k](i, lambda j: seq(j, then, k + 1))

        return seq

    def _node(self, name: str, av: Any) -> _Matcher:
        if name in ("LITERAL", "NOT_LITERAL", "IN"):
            chars, negate = self._class(name, av)

            def char(i: int, then: _Then) -> int | None:
                self._step()
                if i < len(self.text) and (self.text[i] in chars) != negate:
                    return then(i + 1)
                return None

            return char
        if name == "SUBPATTERN":
            _group, add_flags, del_flags, sub = av
            if add_flags or del_flags:
                raise NotImplementedError("inline flags are not modelled")
            return self._seq(sub)
        if name == "BRANCH":
            alternatives = [self._seq(alternative) for alternative in av[1]]

            def branch(i: int, then: _Then) -> int | None:
                for alternative in alternatives:
                    if (end := alternative(i, then)) is not None:
                        return end
                return None

            return branch
        if name == "MAX_REPEAT":
            return self._repeat(*av)
        if name in ("ASSERT", "ASSERT_NOT"):
            direction, sub = av
            lo, hi = sub.getwidth()
            if direction < 0 and lo != hi:
                raise NotImplementedError("a look-behind of varying width")
            back = 0 if direction > 0 else lo
            body, positive = self._seq(sub), name == "ASSERT"

            def look(i: int, then: _Then) -> int | None:
                hit = i >= back and body(i - back, lambda j: j) is not None
                return then(i) if hit == positive else None

            return look
        raise NotImplementedError(f"{name} is not modelled")

    def _repeat(self, lo: int, hi: int, sub: Any) -> _Matcher:
        if len(sub) == 1 and sub[0][0].name in ("LITERAL", "NOT_LITERAL", "IN"):
            chars, negate = self._class(sub[0][0].name, sub[0][1])

            def run(i: int, then: _Then) -> int | None:  # sre's one-character repeat
                text, count = self.text, 0
                while count < hi:
                    self._step()
                    if i + count < len(text) and (text[i + count] in chars) != negate:
                        count += 1
                    else:
                        break
                for n in range(count, lo - 1, -1):  # the longest run first
                    if (end := then(i + n)) is not None:
                        return end
                return None

            return run
        body = self._seq(sub)

        def rounds(i: int, then: _Then, done: int = 0) -> int | None:
            if done < hi:
                # One more round first; a round that matched nothing ends the repeat, as in sre.
                def more(j: int) -> int | None:
                    return rounds(j, then, done + 1) if j > i else None

                if (end := body(i, more)) is not None:
                    return end
            return then(i) if done >= lo else None

        return rounds

    # ------------------------------------------------------------------ characters

    def _class(self, name: str, av: Any) -> tuple[frozenset[str], bool]:
        if name != "IN":
            return self._forms({chr(av)}), name == "NOT_LITERAL"
        chars: set[str] = set()
        negate = False
        for op, item in av:
            if op.name == "NEGATE":
                negate = True
            elif op.name == "LITERAL":
                chars.add(chr(item))
            elif op.name == "RANGE" and item[1] - item[0] < 1024:
                chars.update(chr(c) for c in range(item[0], item[1] + 1))
            else:
                raise NotImplementedError(f"{op.name} in a character class is not modelled")
        return self._forms(chars), negate

    def _forms(self, chars: set[str]) -> frozenset[str]:
        if not self.fold:
            return frozenset(chars)
        return frozenset(f for c in chars for f in (c, c.lower(), c.upper()))

    def _first(self, parsed: Any) -> tuple[frozenset[str] | None, bool]:
        """The characters a match of `parsed` can begin with (None: any), and whether it can
        match the empty string."""
        seen: set[str] = set()
        for op, av in parsed:
            name = op.name
            if name in ("ASSERT", "ASSERT_NOT"):
                continue
            if name in ("LITERAL", "NOT_LITERAL", "IN"):
                chars, negate = self._class(name, av)
                first, empty = (None if negate else chars), False
            elif name == "SUBPATTERN":
                first, empty = self._first(av[3])
            elif name == "MAX_REPEAT":
                first, empty = self._first(av[2])
                empty = empty or av[0] == 0
            elif name == "BRANCH":
                firsts = [self._first(alternative) for alternative in av[1]]
                known = [f for f, _ in firsts if f is not None]
                first = frozenset().union(*known) if len(known) == len(firsts) else None
                empty = any(e for _, e in firsts)
            else:
                raise NotImplementedError(f"{name} is not modelled")
            if first is None:
                return None, False
            seen |= first
            if not empty:
                return frozenset(seen), False
        return frozenset(seen), True


def scan_steps(pattern: re.Pattern[str], text: str) -> int | None:
    """The steps `pattern`'s scan of `text` takes, checked to find what `re` finds; None if
    it takes more than LINEAR_STEPS_PER_CHAR a character."""
    model = Backtracker(pattern)
    spans = model.spans(text, budget=LINEAR_STEPS_PER_CHAR * len(text))
    if spans is None:
        return None
    assert spans == [m.span() for m in pattern.finditer(text)], pattern.pattern
    return model.steps


@pytest.mark.parametrize("body", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_a_40k_adversarial_body_is_scanned_in_linear_time(body: str) -> None:
    """A 40,000-character body built to make a backtracking regex go quadratic is scanned by
    every credential pattern in a number of steps linear in its length (counted, not timed),
    and the gate checks it."""
    body = (body * 2)[:40_000]
    for pattern in CREDENTIAL_PATTERNS:
        steps = scan_steps(pattern.regex, body)
        assert steps is not None, (
            f"{pattern.kind}: over {LINEAR_STEPS_PER_CHAR} steps a character on "
            f"{len(body)} characters, so not linear"
        )
    check(ask(body=body), policy=SendPolicy(max_body_chars=40_000))


def test_the_step_count_catches_a_scan_that_is_not_linear() -> None:
    """The count tells a linear scan from a quadratic one: the JWT pattern without its
    look-behind rereads the rest of a run of `eyJ` from each of them; with it, one pass."""
    body = "eyJ" * 13_334
    [jwt] = [p.regex for p in CREDENTIAL_PATTERNS if p.kind == "JWT"]
    anchor = "(?<![A-Za-z0-9_-])"
    assert jwt.pattern.startswith(anchor)
    assert scan_steps(jwt, body) is not None
    assert scan_steps(re.compile(jwt.pattern.removeprefix(anchor)), body) is None


# --------------------------------------------------------------------------- targets


@pytest.mark.parametrize("status", ["active", "online", "busy", "", "Active ", "archived", "away"])
def test_engageable_is_the_directorys_definition(status: str) -> None:
    """The gate sends exactly when Member.engageable_status says the person can be asked."""
    members = {"zed": Member(id="zed", status=status)}
    v = check_send(
        ask(targets=("zed",)),
        policy=SendPolicy(),
        members=members,
        timezones={},
        default_tz=UTC,
        now_ms=NOW,
    )
    assert (v.outcome == "send") is members["zed"].engageable_status


def test_an_archived_target_is_blocked_not_sent() -> None:
    """An ask to an archived person is refused as target_not_engageable, naming the status."""
    v = check(ask(targets=("dee",)))
    assert blocked(v) == "target_not_engageable"
    assert "dee (status 'archived')" in v.detail


def test_a_target_missing_from_the_directory_is_not_engageable() -> None:
    """Nobody by that id in the directory: refused, saying so."""
    v = check(ask(targets=("ghost",)))
    assert blocked(v) == "target_not_engageable"
    assert "ghost (not in the directory)" in v.detail


def test_the_seat_cannot_ask_itself() -> None:
    """A target that is the asking seat reaches nobody: refused."""
    v = check(ask(targets=(SEAT,)))
    assert blocked(v) == "target_not_engageable"
    assert "the seat itself" in v.detail


def test_one_unengageable_target_holds_the_whole_ask() -> None:
    """Of several targets, one archived holds the whole ask; the detail names only that one."""
    v = check(ask(targets=("ana", "dee", "bo"), surface="new_room"))
    assert blocked(v) == "target_not_engageable"
    assert "dee" in v.detail and "ana (" not in v.detail and "bo (" not in v.detail
    assert v.checked_member_ids == ("ana", "dee", "bo")


def test_everyone_the_ask_is_opened_with_is_checked_but_the_seat_itself() -> None:
    """A member the room is opened with counts as reached; the seat in its own room does not."""
    a = ask(targets=("ana",), surface="new_room", member_ids=("ana", SEAT, "eve"))
    assert reached_member_ids(a) == ("ana", "eve")
    v = check(a)
    assert blocked(v) == "target_not_engageable"
    assert "eve (status 'away')" in v.detail
    assert check(ask(targets=("ana",), member_ids=("ana", SEAT))).outcome == "send"


@pytest.mark.parametrize("surface", ["dm", "new_room"])
def test_a_dm_or_new_room_that_reaches_nobody_is_no_target(surface: str) -> None:
    """A conversation opened for people, with no people, is refused as no_target."""
    assert blocked(check(ask(targets=(), surface=surface))) == "no_target"


def test_a_post_to_a_room_without_a_person_is_sent() -> None:
    """A reply in place that names nobody is a post to the room, judged on the room alone."""
    v = check(ask(targets=(), surface="reply_in_place", channel="C1"))
    assert (v.outcome, v.checked_member_ids) == ("send", ())


def test_target_rules_win_over_channel_rules() -> None:
    """Rule order: an archived target in a denied channel is refused for the target."""
    a = ask(targets=("dee",), surface="existing_channel", channel="C-bad")
    assert blocked(check(a, policy=SendPolicy(denied_channel_ids=("C-bad",)))) == (
        "target_not_engageable"
    )


# --------------------------------------------------------------------------- channels


@pytest.mark.parametrize("surface", ["none", "email", ""])
def test_a_surface_the_adapters_do_not_know_is_refused(surface: str) -> None:
    """Anything but the four surfaces is unknown_surface, never a quiet no-op."""
    assert blocked(check(ask(surface=surface, channel="C1"))) == "unknown_surface"


@pytest.mark.parametrize("surface", ["reply_in_place", "existing_channel", "dm"])
def test_a_denied_channel_is_refused_on_any_surface(surface: str) -> None:
    """A channel on the deny list refuses, whatever the surface that names it."""
    policy = SendPolicy(denied_channel_ids=("C-ops",))
    assert blocked(check(ask(surface=surface, channel="C-ops"), policy=policy)) == "channel_denied"


def test_deny_wins_over_allow() -> None:
    """A channel both allowed and denied is denied."""
    policy = SendPolicy(allowed_channel_ids=("C1",), denied_channel_ids=("C1",))
    v = check(ask(surface="existing_channel", channel="C1"), policy=policy)
    assert blocked(v) == "channel_denied"


def test_dms_can_be_switched_off() -> None:
    """allowDm=false refuses a DM as dm_not_allowed."""
    assert blocked(check(policy=SendPolicy(allow_dm=False))) == "dm_not_allowed"


def test_new_rooms_can_be_switched_off() -> None:
    """allowNewRooms=false refuses a new room as new_room_not_allowed."""
    a = ask(targets=("ana", "bo"), surface="new_room")
    assert blocked(check(a, policy=SendPolicy(allow_new_rooms=False))) == "new_room_not_allowed"


@pytest.mark.parametrize("surface", ["reply_in_place", "existing_channel"])
def test_a_post_into_an_existing_conversation_needs_its_channel(surface: str) -> None:
    """A reply or channel post without a channel id is no_channel."""
    assert blocked(check(ask(surface=surface, channel=None))) == "no_channel"


def test_a_refusal_names_the_surface_as_its_identifier() -> None:
    """The detail names the surface as it is spelled, so no article can be wrong for it
    ("a existing_channel")."""
    v = check(ask(surface="existing_channel", channel=None))
    assert v.detail == "surface existing_channel needs a channel id and this ask has none"
    v = check(ask(targets=(), surface="new_room"))
    assert v.detail == "surface new_room reaches nobody, so it cannot be opened"


@pytest.mark.parametrize("surface", ["reply_in_place", "existing_channel"])
def test_the_allow_list_governs_existing_conversations(surface: str) -> None:
    """With an allow list, only its channels pass; without one, any channel does."""
    policy = SendPolicy(allowed_channel_ids=("C1",))
    assert check(ask(surface=surface, channel="C1"), policy=policy).outcome == "send"
    v = check(ask(surface=surface, channel="C2"), policy=policy)
    assert blocked(v) == "channel_not_allowed"
    assert check(ask(surface=surface, channel="C2")).outcome == "send"


def test_the_allow_list_does_not_govern_what_seatwire_opens() -> None:
    """An empty allow list still lets a DM and a new room through (their own switches rule)."""
    policy = SendPolicy(allowed_channel_ids=())
    assert check(policy=policy).outcome == "send"
    assert check(ask(targets=("ana", "bo"), surface="new_room"), policy=policy).outcome == "send"


def test_a_blocked_ask_is_blocked_at_night_too() -> None:
    """Rule order: quiet hours come last, so a refusal at 3 a.m. is a refusal, not a defer."""
    policy = SendPolicy(quiet_hours=NIGHT, allow_dm=False)
    assert blocked(check(policy=policy, now=at(2024, 1, 10, 3))) == "dm_not_allowed"


# --------------------------------------------------------------------------- quiet hours


def test_inside_a_window_that_wraps_midnight_defers_to_its_end() -> None:
    """At 23:00 and at 03:00 in a 22:00-07:00 window the ask waits for 07:00; at noon it goes."""
    assert deferred_until(check(policy=QUIET, now=at(2024, 1, 10, 23))) == at(2024, 1, 11, 7)
    assert deferred_until(check(policy=QUIET, now=at(2024, 1, 11, 3))) == at(2024, 1, 11, 7)
    assert check(policy=QUIET, now=at(2024, 1, 10, 12)).outcome == "send"


def test_window_boundaries_are_exact() -> None:
    """The start is inside and the end is not, to the millisecond."""
    start, end = at(2024, 1, 10, 22), at(2024, 1, 11, 7)
    assert check(policy=QUIET, now=start - 1).outcome == "send"
    assert deferred_until(check(policy=QUIET, now=start)) == end
    assert deferred_until(check(policy=QUIET, now=end - 1)) == end
    assert check(policy=QUIET, now=end).outcome == "send"


def test_a_daytime_window_that_does_not_wrap() -> None:
    """A 12:00-13:30 window defers a 12:15 ask to 13:30 and lets 13:30 through."""
    policy = SendPolicy(quiet_hours=QuietHours(start="12:00", end="13:30"))
    assert deferred_until(check(policy=policy, now=at(2024, 1, 10, 12, 15))) == at(
        2024, 1, 10, 13, 30
    )
    assert check(policy=policy, now=at(2024, 1, 10, 13, 30)).outcome == "send"
    assert check(policy=policy, now=at(2024, 1, 10, 11, 59)).outcome == "send"


def test_quiet_hours_are_the_targets_own_time() -> None:
    """At 03:00 UTC a New Yorker (22:00 local) waits until 07:00 New York; a Tokyo target goes."""
    now = at(2024, 1, 10, 3)
    v = check(policy=QUIET, tz={"ana": "America/New_York"}, now=now)
    assert deferred_until(v) == at(2024, 1, 10, 7, tz="America/New_York")
    assert "ana 07:00" in v.detail
    assert check(policy=QUIET, tz={"ana": "Asia/Tokyo"}, now=now).outcome == "send"


def test_a_person_without_a_timezone_uses_the_default() -> None:
    """A target missing from the timezones uses default_tz, not UTC."""
    now = at(2024, 1, 10, 23, tz="Europe/Berlin")
    v = check(policy=QUIET, default_tz="Europe/Berlin", now=now)
    assert deferred_until(v) == at(2024, 1, 11, 7, tz="Europe/Berlin")


def test_a_post_without_a_person_uses_the_default_timezone() -> None:
    """A reply to the room that names nobody is judged on the default zone's night."""
    a = ask(targets=(), surface="reply_in_place", channel="C1")
    now = at(2024, 1, 10, 23, tz="Asia/Kolkata")
    v = check(a, policy=QUIET, default_tz="Asia/Kolkata", now=now)
    assert deferred_until(v) == at(2024, 1, 11, 7, tz="Asia/Kolkata")
    assert "the room" in v.detail


def test_two_targets_whose_nights_overlap_partly_wait_for_both() -> None:
    """London asleep 22-07 UTC and New York 03-12 UTC: at 02:00 UTC the ask waits till 12:00."""
    a = ask(targets=("ana", "bo"), surface="new_room")
    tz = {"ana": "Europe/London", "bo": "America/New_York"}
    v = check(a, policy=QUIET, tz=tz, now=at(2024, 1, 10, 2))
    assert deferred_until(v) == at(2024, 1, 10, 12)
    assert "ana is inside" in v.detail
    # London's night runs straight into New York's, so the first common moment is 12:00.
    assert check(a, policy=QUIET, tz=tz, now=at(2024, 1, 10, 12)).outcome == "send"
    assert check(a, policy=QUIET, tz=tz, now=at(2024, 1, 10, 21)).outcome == "send"


def test_one_targets_night_starting_defers_the_others_day() -> None:
    """At 21:30 UTC London is awake but New York is too; at 22:00 London sleeps: wait till 12:00."""
    a = ask(targets=("ana", "bo"), surface="new_room")
    tz = {"ana": "Europe/London", "bo": "America/New_York"}
    assert check(a, policy=QUIET, tz=tz, now=at(2024, 1, 10, 21, 30)).outcome == "send"
    assert deferred_until(check(a, policy=QUIET, tz=tz, now=at(2024, 1, 10, 22))) == at(
        2024, 1, 11, 12
    )


def test_an_end_skipped_by_spring_forward_ends_at_the_jump() -> None:
    """London, 31 Mar 2024: 01:00 GMT jumps to 02:00 BST, so a 01:30 end never happens; the
    night ends at the jump, and a re-check then sends."""
    policy = SendPolicy(quiet_hours=QuietHours(start="22:00", end="01:30"))
    tz = {"ana": "Europe/London"}
    v = check(policy=policy, tz=tz, now=at(2024, 3, 31, 0, 30))
    assert deferred_until(v) == at(2024, 3, 31, 1)  # 01:00 UTC == 02:00 BST
    assert "ana 02:00" in v.detail
    assert check(policy=policy, tz=tz, now=at(2024, 3, 31, 1)).outcome == "send"


def test_new_york_spring_forward_with_an_end_inside_the_gap() -> None:
    """New York, 10 Mar 2024: 02:00 EST jumps to 03:00 EDT; a 02:30 end ends at 07:00 UTC."""
    policy = SendPolicy(quiet_hours=QuietHours(start="22:00", end="02:30"))
    v = check(policy=policy, tz={"ana": "America/New_York"}, now=at(2024, 3, 10, 5))
    assert deferred_until(v) == at(2024, 3, 10, 7)


def test_a_start_inside_the_spring_forward_gap_starts_at_the_jump() -> None:
    """A 02:15-06:00 window on New York's spring-forward day begins at 03:00 EDT."""
    policy = SendPolicy(quiet_hours=QuietHours(start="02:15", end="06:00"))
    tz = {"ana": "America/New_York"}
    assert check(policy=policy, tz=tz, now=at(2024, 3, 10, 7) - 1).outcome == "send"
    v = check(policy=policy, tz=tz, now=at(2024, 3, 10, 7))
    assert deferred_until(v) == at(2024, 3, 10, 6, tz="America/New_York")


def test_fall_back_makes_the_night_an_hour_longer() -> None:
    """London, 27 Oct 2024: clocks go back at 02:00 BST, so 22:00 BST to 07:00 GMT is ten hours."""
    tz = {"ana": "Europe/London"}
    v = check(policy=QUIET, tz=tz, now=at(2024, 10, 26, 22, tz="Europe/London"))
    assert deferred_until(v) == at(2024, 10, 27, 7)
    assert "10 h 0 min" in v.detail


def test_an_end_repeated_by_fall_back_ends_at_its_first_occurrence() -> None:
    """New York, 3 Nov 2024: 01:30 happens twice; the window ends at the first, and the ask
    sent then is not deferred again."""
    policy = SendPolicy(quiet_hours=QuietHours(start="22:00", end="01:30"))
    tz = {"ana": "America/New_York"}
    v = check(policy=policy, tz=tz, now=at(2024, 11, 3, 0, 30, tz="America/New_York"))
    first_0130 = at(2024, 11, 3, 1, 30, tz="America/New_York")  # EDT, 05:30 UTC
    assert deferred_until(v) == first_0130 == at(2024, 11, 3, 5, 30)
    assert check(policy=policy, tz=tz, now=first_0130).outcome == "send"


def test_days_name_the_evening_a_window_starts_on() -> None:
    """With weekdays only, Friday's night runs into Saturday; Saturday's and Sunday's do not."""
    policy = SendPolicy(
        quiet_hours=QuietHours(start="22:00", end="07:00", days=("mon", "tue", "wed", "thu", "fri"))
    )
    friday, saturday, sunday, monday = (at(2024, 1, d) for d in (12, 13, 14, 15))
    assert deferred_until(check(policy=policy, now=friday + 23 * HOUR)) == saturday + 7 * HOUR
    assert deferred_until(check(policy=policy, now=saturday + 3 * HOUR)) == saturday + 7 * HOUR
    assert check(policy=policy, now=saturday + 23 * HOUR).outcome == "send"
    assert check(policy=policy, now=monday + 3 * HOUR).outcome == "send"  # Sunday's night
    assert deferred_until(check(policy=policy, now=monday + 22 * HOUR)) == monday + 31 * HOUR
    assert check(policy=policy, now=sunday + 22 * HOUR).outcome == "send"


def test_when_no_moment_suits_everyone_the_first_targets_night_is_honoured() -> None:
    """San Francisco, London and Singapore with 22:00-07:00 nights are never all awake: the
    ask waits for the first target's morning, and is sent when it comes back then."""
    a = ask(targets=("ana", "bo", "cy"), surface="new_room")
    tz = {"ana": "Europe/London", "bo": "America/Los_Angeles", "cy": "Asia/Singapore"}
    v = check(a, policy=QUIET, tz=tz, now=at(2024, 1, 10, 2))
    until = deferred_until(v)
    assert until == at(2024, 1, 10, 7)
    assert "only ana's are honoured" in v.detail
    again = check(a, policy=QUIET, tz=tz, now=until)
    assert again.outcome == "send" and "only ana's are honoured" in again.detail


def test_a_deferred_ask_is_sent_when_it_comes_back() -> None:
    """Re-checking at deferUntilMs sends, for each target's zone and a late-night start."""
    for name in ("UTC", "Europe/London", "America/New_York", "Asia/Kolkata", "Pacific/Chatham"):
        v = check(policy=QUIET, tz={"ana": name}, now=at(2024, 1, 10, 23, 59, tz=name))
        assert check(policy=QUIET, tz={"ana": name}, now=deferred_until(v)).outcome == "send"


# --------------------------------------------------------------------------- policy validation


@pytest.mark.parametrize("bad", ["7:00", "24:00", "12:60", "noon", "", "07:00:00", "-1:00"])
def test_a_bad_time_is_a_clear_error(bad: str) -> None:
    """A start or end that is not 24-hour HH:MM is refused, quoting what was given."""
    with pytest.raises(ValidationError, match="HH:MM"):
        QuietHours(start=bad, end="07:00")
    with pytest.raises(ValidationError, match="HH:MM"):
        SendPolicy.model_validate({"quietHours": {"start": "22:00", "end": bad}})


def test_equal_start_and_end_is_ambiguous() -> None:
    """22:00-22:00 could mean never or always: refused."""
    with pytest.raises(ValidationError, match="never or all day"):
        QuietHours(start="22:00", end="22:00")


def test_days_are_read_leniently_and_must_name_some_day() -> None:
    """Day names are case-insensitive and may be spelled out; none, or a non-day, is refused."""
    q = QuietHours.model_validate({"days": ["Friday", "MON", "tue", "mon"]})
    assert q.days == ("mon", "tue", "fri")
    with pytest.raises(ValidationError, match="empty list of days"):
        QuietHours(days=())
    with pytest.raises(ValidationError):
        QuietHours.model_validate({"days": ["someday"]})


@pytest.mark.parametrize("name", ["Europe/London", "UTC", "America/Argentina/Buenos_Aires"])
def test_default_timezone_takes_iana_names(name: str) -> None:
    """IANA zone names are accepted as the default timezone."""
    assert QuietHours(default_timezone=name).default_timezone == name


@pytest.mark.parametrize("name", ["", "Europe London", "../etc/passwd", "/Europe/London"])
def test_default_timezone_must_look_like_an_iana_name(name: str) -> None:
    """A default timezone that cannot be an IANA name is refused at load."""
    with pytest.raises(ValidationError, match="IANA"):
        QuietHours(default_timezone=name)


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ({"minBodyChars": 10, "maxBodyChars": 5}, "no body could pass"),
        ({"maxBodyChars": 40_001}, "40000"),
        ({"maxBodyChars": 0}, "greater than or equal to 1"),
        ({"minBodyChars": 0}, "greater than or equal to 1"),
        ({"deniedChannelIDs": ["C1"]}, "deniedChannelIDs"),
        ({"quietHours": {"start": "22:00", "ends": "07:00"}}, "ends"),
    ],
)
def test_policy_validation_errors(raw: dict[str, Any], match: str) -> None:
    """Impossible lengths and misspelt keys stop the load, naming the problem."""
    with pytest.raises(ValidationError, match=match):
        SendPolicy.model_validate(raw)


def test_policy_round_trips_camel_case() -> None:
    """A policy read from camelCase configuration dumps back to the same JSON."""
    raw = {
        "maxBodyChars": 2000,
        "minBodyChars": 10,
        "allowedChannelIds": ["C1", "C2"],
        "deniedChannelIds": ["C9"],
        "allowDm": False,
        "allowNewRooms": True,
        "quietHours": {
            "start": "21:30",
            "end": "06:45",
            "days": ["mon", "fri"],
            "defaultTimezone": "Europe/London",
        },
        "blockCredentials": True,
    }
    assert SendPolicy.model_validate(raw).to_wire() == raw


@pytest.mark.parametrize(
    "fields",
    [
        {"outcome": "send", "rule": "quiet_hours"},
        {"outcome": "blocked", "rule": ""},
        {"outcome": "defer", "rule": "quiet_hours"},
        {"outcome": "blocked", "rule": "no_target", "deferUntilMs": 5},
    ],
)
def test_a_verdict_cannot_contradict_itself(fields: dict[str, Any]) -> None:
    """A rule exactly when not sent; deferUntilMs exactly when deferred."""
    with pytest.raises(ValidationError):
        SendGateVerdict.model_validate(fields)


# --------------------------------------------------------------------------- properties

ZONES = (
    "UTC",
    "Europe/London",
    "America/New_York",
    "America/St_Johns",
    "Asia/Kolkata",
    "Pacific/Chatham",
    "Australia/Lord_Howe",  # a half-hour DST shift
    "Pacific/Kiritimati",
)
# DST transitions, so the property looks hardest where the clocks change.
TRANSITIONS = (
    at(2024, 3, 10, 7),
    at(2024, 3, 31, 1),
    at(2024, 10, 27, 1),
    at(2024, 11, 3, 6),
    at(2024, 4, 6, 15),
    at(2024, 10, 5, 16),
)
minutes = st.integers(min_value=0, max_value=24 * 60 - 1)
quiet_hours = st.builds(
    lambda start, shift, days: QuietHours(
        start=f"{start // 60:02d}:{start % 60:02d}",
        end=f"{(start + shift) % 1440 // 60:02d}:{(start + shift) % 60:02d}",
        days=days,
    ),
    start=minutes,
    shift=st.integers(min_value=1, max_value=24 * 60 - 1),
    days=st.none() | st.lists(st.sampled_from(["mon", "tue", "sat", "sun"]), min_size=1),
)
channels = st.sampled_from(["C1", "C2", "C3"])
policies = st.builds(
    SendPolicy,
    max_body_chars=st.integers(min_value=5, max_value=200),
    min_body_chars=st.integers(min_value=1, max_value=5),
    allowed_channel_ids=st.none() | st.lists(channels, max_size=3).map(tuple),
    denied_channel_ids=st.lists(channels, max_size=2).map(tuple),
    allow_dm=st.booleans(),
    allow_new_rooms=st.booleans(),
    quiet_hours=st.none() | quiet_hours,
    block_credentials=st.booleans(),
)
bodies = st.lists(
    st.sampled_from(["please approve", " ", "\n", AWS_ID, "Bearer of news", "eyJ", "xoxb"])
    | st.text(max_size=30),
    max_size=6,
).map(" ".join)
instants = st.integers(min_value=at(2024, 1, 1), max_value=at(2027, 1, 1)) | st.builds(
    lambda base, delta: base + delta,
    st.sampled_from(TRANSITIONS),
    st.integers(min_value=-2 * 24 * HOUR, max_value=2 * 24 * HOUR),
)
people = st.lists(st.sampled_from(["ana", "bo", "cy", "dee", "ghost"]), max_size=3, unique=True)


@given(
    policy=policies,
    body=bodies,
    targets=people,
    surface=st.sampled_from(["reply_in_place", "dm", "existing_channel", "new_room", "none"]),
    channel=st.none() | channels,
    zones=st.dictionaries(st.sampled_from(["ana", "bo", "cy"]), st.sampled_from(ZONES)),
    default_zone=st.sampled_from(ZONES),
    now=instants,
)
def test_every_verdict_is_well_formed_and_a_defer_is_final(
    policy: SendPolicy,
    body: str,
    targets: list[str],
    surface: str,
    channel: str | None,
    zones: dict[str, str],
    default_zone: str,
    now: int,
) -> None:
    """Any ask under any policy: one of three outcomes with a documented rule; a defer is to a
    later instant, and the same ask checked then is sent."""
    a = ask(targets=tuple(targets), surface=surface, channel=channel, body=body)
    v = check(a, policy=policy, tz=zones, default_tz=default_zone, now=now)
    assert v.outcome in ("send", "blocked", "defer")
    assert (v.rule == "") is (v.outcome == "send")
    assert v.rule == "" or v.rule in SEND_RULES
    if v.outcome == "defer":
        assert v.rule == "quiet_hours"
        assert v.defer_until_ms is not None and v.defer_until_ms > now
        again = check(a, policy=policy, tz=zones, default_tz=default_zone, now=v.defer_until_ms)
        assert again.outcome == "send", again
    else:
        assert v.defer_until_ms is None


@given(secret=st.sampled_from([c[0] for c in CREDENTIALS]), noise=st.text(max_size=40))
def test_a_credential_anywhere_is_found_and_never_echoed(secret: str, noise: str) -> None:
    """A credential inside any surrounding text is refused, and the detail holds no more than
    the public prefix of any token in the body."""
    body = f"{noise} {secret} {noise}"
    v = check(ask(body=body))
    assert blocked(v) == "credentials_in_body"
    for hit in find_credentials(body):
        assert hit.shown in v.detail
        if hit.shown.endswith("…"):  # a token, not a PEM header (which is public)
            assert body[hit.at : hit.end] not in v.detail


@given(offset_min=st.integers(min_value=-14 * 60, max_value=14 * 60), now=instants)
def test_fixed_offsets_defer_to_the_local_end(offset_min: int, now: int) -> None:
    """For a zone with a fixed offset, a defer lands exactly on a local 07:00."""
    v = check_send(
        ask(),
        policy=QUIET,
        members=DIRECTORY,
        timezones={"ana": fixed_offset(offset_min * MINUTE)},
        default_tz=UTC,
        now_ms=now,
    )
    if v.outcome == "defer":
        assert v.defer_until_ms is not None
        assert (v.defer_until_ms + offset_min * MINUTE) % (24 * HOUR) == 7 * HOUR
