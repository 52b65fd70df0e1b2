"""Answer links (pipeline/answer_links.py): a token answers one ask, as one of its targets,
until it expires; anything changed in it, or signed with another key, is no link. Pure."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from contracts.asks import Ask
from pipeline.answer_links import (
    LinkClaim,
    LinkRefused,
    derived_key,
    link_expiry,
    read,
    sign,
)
from pipeline.asks import DAY_MS, HOUR_MS, MAX_SNOOZE_MS
from pipeline.cursors import pack

KEY = b"k" * 32
NOW = 1_800_000_000_000


def test_a_signed_link_reads_back_until_it_expires() -> None:
    token = sign(KEY, "ask-abc-1", ["ben", "gus"], NOW + 10)
    assert read(KEY, token, now_ms=NOW) == LinkClaim("ask-abc-1", NOW + 10, ("ben", "gus"))
    expired = read(KEY, token, now_ms=NOW + 10)
    assert isinstance(expired, LinkRefused) and expired.code == "link_expired"


@pytest.mark.parametrize(
    "tamper",
    [
        lambda t: t.replace(t.partition(".")[0], pack(["a1", "ask-abc-1", NOW + 10, ["jo"]])),
        lambda t: t.replace(t.partition(".")[0], pack(["a1", "ask-xyz-1", NOW + 10, ["ben"]])),
        lambda t: t.replace(t.partition(".")[0], pack(["a1", "ask-abc-1", NOW + DAY_MS, ["ben"]])),
        lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),
        lambda t: t.partition(".")[0],
        lambda t: "." + t.partition(".")[2],
        lambda t: "",
        lambda t: "x" * 5_000,
    ],
)
def test_a_changed_token_is_no_link(tamper: Callable[[str], str]) -> None:
    token = sign(KEY, "ask-abc-1", ["ben"], NOW + 10)
    changed = tamper(token)
    got = read(KEY, changed, now_ms=NOW)
    assert isinstance(got, LinkRefused) and got.code == "invalid_link", changed


def test_another_key_is_no_link_and_the_derived_key_hides_the_token() -> None:
    token = sign(KEY, "ask-abc-1", ["ben"], NOW + 10)
    got = read(b"another key", token, now_ms=NOW)
    assert isinstance(got, LinkRefused) and got.code == "invalid_link"
    derived = derived_key(None, "operator-token")
    assert derived is not None and b"operator-token" not in derived and len(derived) == 32
    assert derived_key("  secret ", "operator-token") == b"secret"
    assert derived_key(None, None) is None and derived_key(" ", "") is None


def test_a_link_lives_as_long_as_its_ask_can_be_answered() -> None:
    ask = Ask(
        id="ask-abc-1",
        seat_id="scout",
        work_id="w",
        dedupe_key="abc",
        tracking_id="t",
        created_at_ms=NOW,
        timeout_ms=4 * HOUR_MS,
    )
    # Its own rung and the two above it, one maximal snooze, and a day for a deferred send.
    assert link_expiry(ask) == NOW + 3 * 4 * HOUR_MS + MAX_SNOOZE_MS + DAY_MS
