"""Unit tests for the engagement ledger's limits (docs/architecture.md, "Guardrails").

Pure: ledgers are literal rows, `now_ms` is a constant. Each limit is shown to refuse with its
code, the order between adjacent limits is pinned, and the window edges are exact.
"""

from __future__ import annotations

from itertools import permutations
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts import LedgerRow, Limits, Target
from contracts.guardrails import DAY_MS, HOUR_MS
from pipeline.guardrails import DEFAULT_LIMITS, check_guardrails, dedupe_key_for

NOW = 1_700_000_000_000
KEY = "key-under-test"
SEAT = "seat-a"
WORK = "w1"


def row(
    ago_ms: int = HOUR_MS,
    *,
    key: str = "other-key",
    work: str = "other-work",
    seat: str = "seat-z",
    targets: tuple[str, ...] = ("nobody",),
    outcome: str = "engaged",
    room: bool = False,
    expires_in_ms: int | None = None,
) -> dict[str, Any]:
    """A ledger row in the wire's camelCase, `ago_ms` before NOW; neutral unless told otherwise."""
    out: dict[str, Any] = {
        "atMs": NOW - ago_ms,
        "seatId": seat,
        "workId": work,
        "dedupeKey": key,
        "engaged": outcome == "engaged",
        "outcome": outcome,
        "roomCreated": room,
        "targets": [{"memberId": t} for t in targets],
    }
    if expires_in_ms is not None:
        out["expiresAtMs"] = NOW + expires_in_ms
    return out


def check(
    rows: list[Any],
    *,
    targets: tuple[Any, ...] = ("ana",),
    creates_room: bool = False,
    limits: Limits = DEFAULT_LIMITS,
    key: str = KEY,
) -> Any:
    """check_guardrails for the ask under test: KEY, WORK, SEAT, targeting ana by default."""
    return check_guardrails(
        rows,
        now_ms=NOW,
        dedupe_key=key,
        work_id=WORK,
        seat_id=SEAT,
        targets=list(targets),
        creates_room=creates_room,
        limits=limits,
    )


# --------------------------------------------------------------------------- defaults


def test_default_limits_match_the_design_table() -> None:
    """The defaults are the design table: 6 h, 3, 4/person/day, 3/work/day, 10/seat/h, 2."""
    assert DEFAULT_LIMITS.model_dump(by_alias=True) == {
        "reengageAfterMs": 6 * HOUR_MS,
        "maxAttemptsPerAsk": 3,
        "perTargetPerDay": 4,
        "perWorkPerDay": 3,
        "perSeatPerHour": 10,
        "roomsPerDay": 2,
    }


def test_empty_ledger_is_allowed_as_first_attempt() -> None:
    """Nothing in the ledger: allowed, no code, attempt 1, every count zero."""
    v = check([], targets=("ana", "bo"), creates_room=True)
    assert (v.allowed, v.code, v.attempt) == (True, None, 1)
    assert v.counts == {
        "sameKey": 0,
        "targets": {"ana": 0, "bo": 0},
        "work": 0,
        "seat": 0,
        "rooms": 0,
    }


# --------------------------------------------------------------------------- each limit


def test_same_key_within_window_is_already_engaged() -> None:
    """The same key engaged an hour ago refuses with already_engaged, naming the numbers."""
    v = check([row(HOUR_MS, key=KEY)])
    assert (v.allowed, v.code, v.attempt) == (False, "already_engaged", 2)
    assert "60 min" in v.detail
    assert "360 min" in v.detail


@pytest.mark.parametrize(
    ("ago_ms", "said"),
    [(0, "less than a minute ago"), (29_999, "less than a minute ago"), (90_000, "2 min ago")],
)
def test_an_ask_that_just_went_out_is_not_said_to_be_0_min_old(ago_ms: int, said: str) -> None:
    """Refused moments after the first ask, the detail says so in words, not "0 min ago"."""
    v = check([row(ago_ms, key=KEY)])
    assert (v.allowed, v.code) == (False, "already_engaged")
    assert v.detail == f"this exact ask went out {said}; the re-engage window is 360 min"


def test_reengage_window_edge() -> None:
    """Exactly reengageAfterMs later the ask may go again; one millisecond sooner it may not."""
    at_edge = check([row(6 * HOUR_MS, key=KEY)])
    assert (at_edge.allowed, at_edge.attempt) == (True, 2)
    inside = check([row(6 * HOUR_MS - 1, key=KEY)])
    assert (inside.allowed, inside.code) == (False, "already_engaged")


def test_third_ask_is_allowed_and_fourth_is_rate_limited_ask() -> None:
    """Two earlier asks allow a third (attempt 3); three refuse with rate_limited_ask."""
    two = [row(7 * HOUR_MS, key=KEY), row(30 * DAY_MS, key=KEY)]
    assert (check(two).allowed, check(two).attempt) == (True, 3)
    three = [*two, row(60 * DAY_MS, key=KEY)]
    v = check(three)
    assert (v.allowed, v.code, v.attempt) == (False, "rate_limited_ask", 4)
    assert "3 times" in v.detail


def test_person_engaged_four_times_today_is_rate_limited_target() -> None:
    """Four engagements of one person in 24 h refuse with rate_limited_target naming them."""
    rows = [row(HOUR_MS * (i + 1), key=f"k{i}", targets=("ana",)) for i in range(4)]
    v = check(rows, targets=("bo", "ana"))
    assert (v.allowed, v.code) == (False, "rate_limited_target")
    assert "ana" in v.detail
    assert v.counts["targets"] == {"bo": 0, "ana": 4}
    assert check(rows[:3], targets=("bo", "ana")).allowed is True


def test_per_target_counts_rows_of_all_seats() -> None:
    """The per-person limit counts engagements by every seat together, not only this one."""
    rows = [row(HOUR_MS, key=f"k{i}", seat=f"seat-{i}", targets=("ana", "x")) for i in range(4)]
    v = check(rows)
    assert (v.code, v.counts["targets"], v.counts["seat"]) == ("rate_limited_target", {"ana": 4}, 0)


def test_work_engaged_three_times_today_is_rate_limited_work() -> None:
    """Three engagements about one work item in 24 h refuse with rate_limited_work."""
    rows = [row(HOUR_MS, key=f"k{i}", work=WORK, targets=(f"p{i}",)) for i in range(3)]
    v = check(rows)
    assert (v.allowed, v.code, v.counts["work"]) == (False, "rate_limited_work", 3)
    assert check(rows[:2]).allowed is True


def test_seat_engaging_ten_times_an_hour_is_rate_limited_seat() -> None:
    """Ten engagements by this seat in the last hour refuse with rate_limited_seat."""
    rows = [row(60_000 * (i + 1), key=f"k{i}", seat=SEAT, targets=(f"p{i}",)) for i in range(10)]
    v = check(rows)
    assert (v.allowed, v.code, v.counts["seat"]) == (False, "rate_limited_seat", 10)
    assert check(rows[:9]).allowed is True
    other_seat = [{**r, "seatId": "seat-b"} for r in rows]
    assert check(other_seat).allowed is True


def test_rooms_limit_applies_only_when_creating_a_room() -> None:
    """Two rooms by this seat today refuse another room but not an ask that creates none."""
    rows = [
        row(HOUR_MS * (i + 1), key=f"k{i}", seat=SEAT, targets=(f"p{i}",), room=True)
        for i in range(2)
    ]
    v = check(rows, creates_room=True)
    assert (v.allowed, v.code, v.counts["rooms"]) == (False, "rate_limited_rooms", 2)
    assert check(rows, creates_room=False).allowed is True
    assert check(rows[:1], creates_room=True).allowed is True


def test_rooms_created_by_another_seat_do_not_count() -> None:
    """Rooms are counted per seat."""
    rows = [row(HOUR_MS, key=f"k{i}", seat="seat-b", room=True) for i in range(2)]
    assert check(rows, creates_room=True).allowed is True


# --------------------------------------------------------------------------- order


def _order_cases() -> list[tuple[str, list[dict[str, Any]], bool, str, Limits, str]]:
    """(name, rows, creates_room, first code, limits relaxing the first, second code)."""
    same_key_recent = [row(HOUR_MS, key=KEY), row(7 * HOUR_MS, key=KEY), row(8 * HOUR_MS, key=KEY)]
    ask_and_target = [
        row(7 * HOUR_MS, key=KEY, targets=("ana",)),
        row(8 * HOUR_MS, key=KEY, targets=("ana",)),
        row(9 * HOUR_MS, key=KEY, targets=("ana",)),
        row(HOUR_MS, key="k-other", targets=("ana",)),
    ]
    target_and_work = [row(HOUR_MS, key=f"k{i}", work=WORK, targets=("ana",)) for i in range(4)]
    work_and_seat = [
        row(
            60_000 * (i + 1),
            key=f"k{i}",
            seat=SEAT,
            work=WORK if i < 3 else f"o{i}",
            targets=(f"p{i}",),
        )
        for i in range(10)
    ]
    seat_and_rooms = [
        row(60_000 * (i + 1), key=f"k{i}", seat=SEAT, work=f"o{i}", targets=(f"p{i}",), room=i < 2)
        for i in range(10)
    ]
    return [
        (
            "engaged-before-ask",
            same_key_recent,
            False,
            "already_engaged",
            Limits(reengage_after_ms=0),
            "rate_limited_ask",
        ),
        (
            "ask-before-target",
            ask_and_target,
            False,
            "rate_limited_ask",
            Limits(max_attempts_per_ask=10),
            "rate_limited_target",
        ),
        (
            "target-before-work",
            target_and_work,
            False,
            "rate_limited_target",
            Limits(per_target_per_day=10),
            "rate_limited_work",
        ),
        (
            "work-before-seat",
            work_and_seat,
            False,
            "rate_limited_work",
            Limits(per_work_per_day=10),
            "rate_limited_seat",
        ),
        (
            "seat-before-rooms",
            seat_and_rooms,
            True,
            "rate_limited_seat",
            Limits(per_seat_per_hour=20),
            "rate_limited_rooms",
        ),
    ]


@pytest.mark.parametrize(
    ("rows", "creates_room", "first", "relaxed", "second"),
    [case[1:] for case in _order_cases()],
    ids=[case[0] for case in _order_cases()],
)
def test_earlier_limit_wins_when_two_are_exceeded(
    rows: list[dict[str, Any]], creates_room: bool, first: str, relaxed: Limits, second: str
) -> None:
    """With two adjacent limits exceeded the earlier refuses; relaxing it reveals the later one."""
    assert check(rows, creates_room=creates_room).code == first
    assert check(rows, creates_room=creates_room, limits=relaxed).code == second


# --------------------------------------------------------------------------- what counts


@pytest.mark.parametrize(
    ("outcome", "expires_in_ms"),
    [("engaged", None), ("sending", None), ("unknown", None), ("reserved", 1)],
)
def test_counted_outcomes_hold_a_place(outcome: str, expires_in_ms: int | None) -> None:
    """Engaged, sending, unknown and a live reservation count against the limits."""
    v = check([row(HOUR_MS, key=KEY, outcome=outcome, expires_in_ms=expires_in_ms)])
    assert (v.code, v.counts["sameKey"], v.counts["targets"]) == ("already_engaged", 1, {"ana": 0})


@pytest.mark.parametrize(
    ("outcome", "expires_in_ms"),
    [
        ("send_failed", None),
        ("send_blocked", None),
        ("none", None),
        ("unroutable", None),
        ("already_engaged", None),
        ("rate_limited_target", None),
        ("expired", None),
        ("reserved", 0),  # expiresAtMs == now: expired
        ("reserved", -1),
    ],
)
def test_uncounted_outcomes_do_not_count(outcome: str, expires_in_ms: int | None) -> None:
    """Failed, blocked, refused, 'nobody' rows and expired reservations hold no place."""
    rows = [
        row(
            HOUR_MS * (i + 1),
            key=KEY,
            work=WORK,
            seat=SEAT,
            targets=("ana",),
            room=True,
            outcome=outcome,
            expires_in_ms=expires_in_ms,
        )
        for i in range(5)
    ]
    v = check(rows, creates_room=True)
    assert (v.allowed, v.attempt) == (True, 1)
    assert v.counts == {"sameKey": 0, "targets": {"ana": 0}, "work": 0, "seat": 0, "rooms": 0}


def test_attempt_counts_only_counted_same_key_rows() -> None:
    """attempt is the counted rows under this key plus one, however old they are."""
    rows = [
        row(7 * HOUR_MS, key=KEY),
        row(400 * DAY_MS, key=KEY),
        row(8 * HOUR_MS, key=KEY, outcome="send_failed"),
        row(9 * HOUR_MS, key="another"),
    ]
    v = check(rows)
    assert (v.allowed, v.attempt, v.counts["sameKey"]) == (True, 3, 2)


# --------------------------------------------------------------------------- window edges


@pytest.mark.parametrize(
    ("window", "make", "code", "creates_room"),
    [
        (
            DAY_MS,
            lambda ago, i: row(ago, key=f"k{i}", targets=("ana",)),
            "rate_limited_target",
            False,
        ),
        (
            DAY_MS,
            lambda ago, i: row(ago, key=f"k{i}", work=WORK, targets=(f"p{i}",)),
            "rate_limited_work",
            False,
        ),
        (
            HOUR_MS,
            lambda ago, i: row(ago, key=f"k{i}", seat=SEAT, targets=(f"p{i}",)),
            "rate_limited_seat",
            False,
        ),
        (
            DAY_MS,
            lambda ago, i: row(ago, key=f"k{i}", seat=SEAT, targets=(f"p{i}",), room=True),
            "rate_limited_rooms",
            True,
        ),
    ],
    ids=["target-24h", "work-24h", "seat-1h", "rooms-24h"],
)
def test_rolling_window_edges(window: int, make: Any, code: str, creates_room: bool) -> None:
    """A row exactly one window old has left it; one millisecond younger still counts."""
    limit = {
        "rate_limited_target": DEFAULT_LIMITS.per_target_per_day,
        "rate_limited_work": DEFAULT_LIMITS.per_work_per_day,
        "rate_limited_seat": DEFAULT_LIMITS.per_seat_per_hour,
        "rate_limited_rooms": DEFAULT_LIMITS.rooms_per_day,
    }[code]
    inside = [make(1_000 * (i + 1), i) for i in range(limit - 1)]
    at_edge = check([*inside, make(window, 99)], creates_room=creates_room)
    assert (at_edge.allowed, at_edge.code) == (True, None)
    just_inside = check([*inside, make(window - 1, 99)], creates_room=creates_room)
    assert (just_inside.allowed, just_inside.code) == (False, code)


# --------------------------------------------------------------------------- custom limits


def test_custom_limits_override_each_default() -> None:
    """Custom Limits tighten or loosen each check."""
    one_ana = [row(HOUR_MS, key="k", targets=("ana",))]
    assert check(one_ana, limits=Limits(per_target_per_day=1)).code == "rate_limited_target"
    assert check([row(1, key=KEY)], limits=Limits(reengage_after_ms=0)).allowed is True
    assert check([], creates_room=True, limits=Limits(rooms_per_day=0)).code == "rate_limited_rooms"
    strict = Limits.model_validate({"maxAttemptsPerAsk": 1, "reengageAfterMs": 0})
    assert check([row(DAY_MS * 9, key=KEY)], limits=strict).code == "rate_limited_ask"


# --------------------------------------------------------------------------- input shapes


def test_rows_and_targets_accept_contracts_dicts_and_ids() -> None:
    """LedgerRow contracts and dicts, and Target/dict/str targets, give the same verdict."""
    rows = [row(HOUR_MS, key=f"k{i}", targets=("ana",)) for i in range(4)]
    models = [LedgerRow.model_validate(r) for r in rows]
    expected = check(rows)
    assert expected.code == "rate_limited_target"
    assert check(models) == expected
    assert check(rows, targets=(Target(member_id="ana"),)) == expected
    assert check(rows, targets=({"memberId": "ana"},)) == expected


def test_duplicate_targets_are_counted_once() -> None:
    """A target listed twice appears once in the counts."""
    assert check([], targets=("ana", "ana")).counts["targets"] == {"ana": 0}


# --------------------------------------------------------------------------- dedupe key


def test_dedupe_key_is_short_stable_and_pinned() -> None:
    """The key is 16 hex characters, stable, and pinned so rows already written still match."""
    key = dedupe_key_for("w1", "blocked:decision", ["owen"])
    assert key == dedupe_key_for("w1", "blocked:decision", ["owen"])
    assert len(key) == 16
    assert int(key, 16) >= 0
    assert key == "f14be14eef9ee4f3"


def test_dedupe_key_ignores_target_order_and_shape() -> None:
    """Target order and whether targets are ids, dicts or Target contracts do not change the key."""
    expected = dedupe_key_for("w1", "c", ["a", "b", "c"])
    for perm in permutations(["a", "b", "c"]):
        assert dedupe_key_for("w1", "c", list(perm)) == expected
    assert dedupe_key_for("w1", "c", [{"memberId": "c"}, Target(member_id="a"), "b"]) == expected


@pytest.mark.parametrize(
    "other",
    [
        ("w2", "blocked:decision", ["owen"]),
        ("w1", "blocked:access", ["owen"]),
        ("w1", "blocked:decision", ["ana"]),
        ("w1", "blocked:decision", ["owen", "ana"]),
        ("w1", "blocked:decision", []),
    ],
)
def test_dedupe_key_differs_by_work_reason_and_targets(other: tuple[str, str, list[str]]) -> None:
    """A different work id, reason code or target set gives a different key."""
    assert dedupe_key_for(*other) != dedupe_key_for("w1", "blocked:decision", ["owen"])


def test_dedupe_key_fields_do_not_run_together() -> None:
    """Moving characters between work id and reason code changes the key."""
    assert dedupe_key_for("ab", "c", ["x"]) != dedupe_key_for("a", "bc", ["x"])


short_ids = st.text(alphabet="abcdefghij0123456789-", min_size=1, max_size=6)


@given(
    work=short_ids,
    reason=short_ids,
    targets=st.lists(short_ids, max_size=5, unique=True),
    data=st.data(),
)
def test_dedupe_key_is_permutation_invariant(
    work: str, reason: str, targets: list[str], data: st.DataObject
) -> None:
    """Any permutation of the targets yields the same key."""
    shuffled = data.draw(st.permutations(targets))
    assert dedupe_key_for(work, reason, shuffled) == dedupe_key_for(work, reason, targets)


# --------------------------------------------------------------------------- properties

COUNTED = ("engaged", "sending", "unknown")
ANY_OUTCOME = (*COUNTED, "send_failed", "send_blocked", "none", "reserved")

ledger_rows = st.builds(
    lambda ago, key, work, seat, target, outcome, room, expires: row(
        ago,
        key=key,
        work=work,
        seat=seat,
        targets=(target,),
        outcome=outcome,
        room=room,
        expires_in_ms=expires if outcome == "reserved" else None,
    ),
    ago=st.integers(min_value=0, max_value=3 * DAY_MS),
    key=st.sampled_from([KEY, "k2", "k3"]),
    work=st.sampled_from([WORK, "w2"]),
    seat=st.sampled_from([SEAT, "seat-b"]),
    target=st.sampled_from(["ana", "bo", "cy"]),
    outcome=st.sampled_from(ANY_OUTCOME),
    room=st.booleans(),
    expires=st.integers(min_value=-HOUR_MS, max_value=HOUR_MS),
)


@given(
    rows=st.lists(ledger_rows, max_size=25),
    age=st.integers(min_value=0, max_value=DEFAULT_LIMITS.reengage_after_ms - 1),
    outcome=st.sampled_from(COUNTED),
    creates_room=st.booleans(),
)
def test_never_allows_a_counted_same_key_row_inside_the_window(
    rows: list[dict[str, Any]], age: int, outcome: str, creates_room: bool
) -> None:
    """Whatever else is in the ledger, a counted same-key row inside the window refuses."""
    ledger = [*rows, row(age, key=KEY, outcome=outcome)]
    v = check(ledger, targets=("ana", "bo"), creates_room=creates_room)
    assert (v.allowed, v.code) == (False, "already_engaged")


@given(
    rows=st.lists(ledger_rows, max_size=25),
    extra=ledger_rows,
    creates_room=st.booleans(),
)
def test_adding_a_row_never_turns_a_refusal_into_an_allowance(
    rows: list[dict[str, Any]], extra: dict[str, Any], creates_room: bool
) -> None:
    """The limits are monotone: one more ledger row can only keep or cause a refusal."""
    before = check(rows, targets=("ana", "bo"), creates_room=creates_room)
    after = check([*rows, extra], targets=("ana", "bo"), creates_room=creates_room)
    if not before.allowed:
        assert not after.allowed
    assert after.attempt >= before.attempt
