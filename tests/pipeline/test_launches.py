"""Unit tests for pipeline.launches: naming a failed launch, counting identical failures,
escalating, rotating the main-session id, and the resume-target preflight. Pure.

The named fault is replayed end to end: a `--resume` of a conversation that is not on the
machine, which exits 1 after two seconds, every launch, for days.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.launches import (
    BACKOFF_MS,
    BINARY_MISSING_PATTERNS,
    FAILURE_WINDOW_MS,
    HOUR_MS,
    IDENTICAL_FAILURE_LIMIT,
    MAX_ROTATIONS_PER_HOUR,
    RESUME_MISSING_PATTERNS,
    TRANSCRIPT_ROOT,
    classify_launch_failure,
    escalation_decision,
    escalation_hint,
    iso,
    launch_failure_signature,
    launch_failure_streak,
    new_main_session,
    parse_iso,
    parse_launch_failures,
    project_slug,
    resume_target_state,
    rotate_main_session,
    rotation_decision,
    set_default_lister,
)

NOW = 1_758_794_400_000  # 2025-09-25T10:00:00.000Z
DEAD_ID = "e953a33e-97a0-4d13-9fd4-6a77cd7a68c9"
MISSING_OUTPUT = f"No conversation found with session ID: {DEAD_ID}"
HOME = "/Users/james"
PROJECT = "/Users/james/hq"
DIR = "/Users/james/.claude/projects/-Users-james-hq"


def minutes_ago(n: float) -> str:
    return iso(NOW - int(n * 60_000))


def resume(**over: Any) -> dict[str, Any]:
    """A resume launch that failed (exit 1) after two seconds, never beating."""
    return {
        "record": {"sessionId": DEAD_ID, "rotations": []},
        "mode": "resume",
        "exitCode": 1,
        "startedAt": NOW - 2_000,
        "endedAt": NOW,
        "now": NOW,
        **over,
    }


SPENT = {"sessionId": DEAD_ID, "rotations": [minutes_ago(50), minutes_ago(30), minutes_ago(5)]}


# --------------------------------------------------------------------------- constants


def test_the_constants_are_the_seeds() -> None:
    """The limits and paths carry their pinned values."""
    assert IDENTICAL_FAILURE_LIMIT == 3
    assert FAILURE_WINDOW_MS == 20_000
    assert MAX_ROTATIONS_PER_HOUR == 3
    assert BACKOFF_MS == 600_000
    assert HOUR_MS == 3_600_000
    assert TRANSCRIPT_ROOT == ".claude/projects"


def test_the_patterns_keep_the_seeds_text_and_case_rules() -> None:
    """The runtime's phrasings are matched case-insensitively; ENOENT only in capitals."""
    assert [p.pattern for p in RESUME_MISSING_PATTERNS] == [
        "no conversation found with session id",
        "no conversation found matching",
        "session .{0,80}? not found",
    ]
    assert [p.pattern for p in BINARY_MISSING_PATTERNS] == [
        "command not found",
        "no such file or directory",
        r"\bENOENT\b",
    ]
    assert BINARY_MISSING_PATTERNS[2].search("enoent") is None
    assert RESUME_MISSING_PATTERNS[0].search(MISSING_OUTPUT.upper())


# --------------------------------------------------------------------------- the named fault


def test_the_named_fault_is_a_proven_missing_resume_target() -> None:
    """The runtime's "No conversation found" on a resume is named, and proven, from its words."""
    verdict = classify_launch_failure({"mode": "resume", "exitCode": 1, "output": MISSING_OUTPUT})
    assert verdict == {
        "kind": "resume-target-missing",
        "proven": True,
        "detail": "the runtime reported that the conversation this launch tried to resume "
        "does not exist on this machine",
    }


def test_keywords_read_the_same_as_the_mapping() -> None:
    """snake_case keywords stand for the camelCase keys."""
    assert classify_launch_failure(
        mode="resume", exit_code=1, output=MISSING_OUTPUT
    ) == classify_launch_failure({"mode": "resume", "exitCode": 1, "output": MISSING_OUTPUT})


def test_a_proven_missing_target_rotates_at_once_even_with_the_budget_spent() -> None:
    """Proven outranks inferred and is not rationed: three rotations this hour do not stop it."""
    decision = rotation_decision(resume(record=SPENT, resumeTargetMissing=True))
    assert decision == {
        "action": "rotate",
        "proven": True,
        "why": "the conversation this launch resumed does not exist on this machine",
    }


def test_a_proven_missing_target_rotates_even_after_a_long_clean_run() -> None:
    """The proven verdict does not depend on the window, the exit code or a heartbeat."""
    decision = rotation_decision(
        resume(exitCode=0, startedAt=NOW - HOUR_MS, beatSeen=True, resumeTargetMissing=True)
    )
    assert decision["action"] == "rotate" and decision["proven"] is True


def test_the_signature_of_the_named_fault_carries_no_session_id() -> None:
    """A fresh id failing the same way is the same fault, so the id is not in the signature."""
    verdict = classify_launch_failure(mode="resume", exit_code=1, output=MISSING_OUTPUT)
    signature = launch_failure_signature(mode="resume", kind=verdict["kind"], exit_code=1)
    assert signature == "resume:resume-target-missing"
    assert DEAD_ID not in signature


def test_the_named_fault_replayed_streaks_escalates_once_then_clears() -> None:
    """The same failure after each rotation counts up to an escalation that stays on, with
    `fresh` only on the first crossing; a success clears it and a new fault restarts at 1."""
    sig = "resume:resume-target-missing"
    first = launch_failure_streak(None, {"signature": sig, "at": minutes_ago(3)})
    assert first == {
        "signature": sig,
        "streak": 1,
        "firstAt": minutes_ago(3),
        "lastAt": minutes_ago(3),
        "escalatedAt": "",
    }
    second = launch_failure_streak(first, {"signature": sig, "at": minutes_ago(2)})
    assert second is not None and second["streak"] == 2
    assert second["firstAt"] == minutes_ago(3) and second["lastAt"] == minutes_ago(2)
    assert escalation_decision(streak=2)["escalate"] is False

    third = launch_failure_streak(second, signature=sig, at=minutes_ago(1))
    assert third is not None and third["streak"] == 3
    crossing = escalation_decision(streak=third["streak"], escalated_at=third["escalatedAt"])
    assert crossing["escalate"] is True and crossing["fresh"] is True

    marked = {**third, "escalatedAt": minutes_ago(1)}
    fourth = launch_failure_streak(marked, {"signature": sig, "at": iso(NOW)})
    assert fourth is not None and fourth["streak"] == 4
    assert fourth["escalatedAt"] == minutes_ago(1)
    again = escalation_decision(fourth)
    assert again["escalate"] is True and again["fresh"] is False

    assert launch_failure_streak(fourth, {"signature": "", "at": iso(NOW)}) is None
    other = launch_failure_streak(fourth, {"signature": "resume:binary-missing", "at": iso(NOW)})
    assert other is not None and other["streak"] == 1 and other["escalatedAt"] == ""


def test_the_streak_survives_the_file_round_trip() -> None:
    """What launch_failure_streak returns, written as JSON, parses back unchanged."""
    import json

    streak = launch_failure_streak(None, {"signature": "resume:x", "at": iso(NOW)})
    assert parse_launch_failures(json.dumps(streak)) == streak


# --------------------------------------------------------------------------- classification


@pytest.mark.parametrize(
    ("beat", "proven", "detail"),
    [
        (True, True, "the session ran and exited cleanly"),
        (False, False, "the session exited cleanly without beating"),
    ],
)
def test_exit_zero_is_no_failure(beat: bool, proven: bool, detail: str) -> None:
    """Exit 0 names nothing; it is proven clean only when the session also beat."""
    verdict = classify_launch_failure(mode="resume", exit_code=0, beat_seen=beat)
    assert verdict == {"kind": "none", "proven": proven, "detail": detail}


def test_exit_127_is_a_missing_binary() -> None:
    """A shell's 127 names the missing binary even with no output at all."""
    verdict = classify_launch_failure(mode="session-id", exit_code=127)
    assert verdict["kind"] == "binary-missing" and verdict["proven"] is True


@pytest.mark.parametrize("output", ["zsh: command not found: claude", "spawn claude ENOENT"])
def test_the_binary_missing_words_name_the_binary(output: str) -> None:
    """ "command not found" or ENOENT on the screen names a missing binary whatever the exit."""
    assert classify_launch_failure(mode="resume", exit_code=1, output=output)["kind"] == (
        "binary-missing"
    )


def test_a_missing_conversation_outside_a_resume_is_not_a_missing_target() -> None:
    """The resume-missing words count only for a launch that resumed."""
    verdict = classify_launch_failure(mode="session-id", exit_code=1, output=MISSING_OUTPUT)
    assert verdict["kind"] == "never-beaten"


def test_an_unknown_exit_is_a_failure() -> None:
    """exitCode None (the exit file was never written) is a failure, printed as unknown."""
    verdict = classify_launch_failure(mode="resume", exit_code=None)
    assert verdict == {
        "kind": "never-beaten",
        "proven": False,
        "detail": "the launch ended (exit unknown) without ever writing a heartbeat",
    }


def test_a_failure_after_a_beat_is_a_nonzero_exit() -> None:
    """A session that beat and then failed is inferred, with its exit code in the detail."""
    verdict = classify_launch_failure(mode="session-id", exit_code=2, beat_seen=True)
    assert verdict == {
        "kind": "nonzero-exit",
        "proven": False,
        "detail": "the session beat, then ended with exit 2",
    }


def test_the_patterns_follow_javascripts_line_rules() -> None:
    """`.` in a pattern does not cross a carriage return or a line separator, as in JavaScript."""
    for sep in ("\r", "\n", "\u2028"):
        output = f"session abc{sep} not found"
        assert classify_launch_failure(mode="resume", exit_code=1, output=output)["kind"] == (
            "never-beaten"
        )
    output = "error: session abc not found"
    assert classify_launch_failure(mode="resume", exit_code=1, output=output)["kind"] == (
        "resume-target-missing"
    )


# --------------------------------------------------------------------------- signature


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            {"mode": "resume", "kind": "never-beaten", "exitCode": None},
            "resume:never-beaten:unknown",
        ),
        (
            {"mode": "session-id", "kind": "nonzero-exit", "exitCode": 2},
            "session-id:nonzero-exit:2",
        ),
        (
            {"mode": "resume", "kind": "resume-target-missing", "exitCode": 1},
            "resume:resume-target-missing",
        ),
        ({"mode": "other", "kind": "binary-missing", "exitCode": 127}, "session-id:binary-missing"),
        ({"mode": "resume", "kind": "none", "exitCode": 0}, ""),
        ({"mode": "resume"}, "resume:unknown"),
    ],
)
def test_signature_formats(args: dict[str, Any], expected: str) -> None:
    """Mode and kind, the exit code only where the kind does not name the fault."""
    assert launch_failure_signature(args) == expected


def test_a_flapping_exit_code_does_not_split_a_named_fault() -> None:
    """Two exits of the same named fault share one signature."""
    assert launch_failure_signature(
        mode="resume", kind="binary-missing", exit_code=1
    ) == launch_failure_signature(mode="resume", kind="binary-missing", exit_code=127)


# --------------------------------------------------------------------------- the streak file


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "   ",
        "{corrupt",
        "[1, 2]",
        "null",
        "7",
        '"text"',
        '{"signature": "s", "streak": 0}',
        '{"signature": "s", "streak": -2}',
        '{"signature": "s", "streak": 1.5}',
        '{"signature": "s", "streak": "3"}',
        '{"signature": "s", "streak": true}',
        '{"signature": "s", "streak": NaN}',
        '{"signature": "", "streak": 3}',
        '{"streak": 3}',
    ],
)
def test_an_unreadable_streak_file_is_no_streak(text: str | None) -> None:
    """A corrupt, non-object or zero-streak file is no streak, so it cannot escalate."""
    assert parse_launch_failures(text) is None


def test_a_streak_file_reads_with_missing_stamps_as_empty() -> None:
    """A whole-number float is an integer (as in JavaScript); absent stamps read as ""."""
    parsed = parse_launch_failures('{"signature": "s", "streak": 3.0, "lastAt": 5}')
    assert parsed == {"signature": "s", "streak": 3, "firstAt": "", "lastAt": "", "escalatedAt": ""}


# --------------------------------------------------------------------------- escalation


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            {"streak": 2},
            {
                "escalate": False,
                "fresh": False,
                "streak": 2,
                "limit": 3,
                "reason": "launch failure 2/3 — retrying",
            },
        ),
        (
            {"streak": 3, "escalatedAt": ""},
            {
                "escalate": True,
                "fresh": True,
                "streak": 3,
                "limit": 3,
                "reason": "3 consecutive launches have failed the same way (limit 3) — this is a "
                "fault, not a retry",
            },
        ),
        (
            {"streak": "9", "limit": 0},
            {
                "escalate": False,
                "fresh": False,
                "streak": 0,
                "limit": 3,
                "reason": "launch failure 0/3 — retrying",
            },
        ),
    ],
)
def test_escalation_decision(args: dict[str, Any], expected: dict[str, Any]) -> None:
    """Escalate from the limit on; a non-integer streak or limit reads as 0 or the default."""
    assert escalation_decision(args) == expected


def test_a_custom_limit_is_honoured() -> None:
    """An explicit positive integer limit replaces the default."""
    assert escalation_decision(streak=2, limit=2)["escalate"] is True


def test_the_hint_has_the_exact_seed_format() -> None:
    """Count, the request for a person, the detail, then the session id."""
    hint = escalation_hint(
        signature="resume:resume-target-missing",
        streak=3,
        detail="  the conversation is gone  ",
        session_id=DEAD_ID,
    )
    assert hint == (
        "3× in a row, identically — retries are not fixing it and this needs a person. "
        f"the conversation is gone. Session {DEAD_ID}."
    )


def test_the_hint_falls_back_to_the_signature_and_a_zero_count() -> None:
    """No detail prints the signature; an absent or non-numeric streak prints 0."""
    assert escalation_hint(signature="resume:x", streak="many") == (
        "0× in a row, identically — retries are not fixing it and this needs a person. resume:x."
    )
    assert escalation_hint({}).endswith("needs a person. unknown.")


def test_the_request_for_a_person_survives_the_200_character_cut() -> None:
    """The verdict leads: even with a 1000-character detail the ask is in the first 200."""
    hint = escalation_hint(signature="s", streak=12, detail="x" * 1000, session_id=DEAD_ID)
    assert "this needs a person" in hint[:200]


# --------------------------------------------------------------------------- rotation


def test_beating_inside_the_window_relaunches() -> None:
    """A launch that wrote a heartbeat did start, so dying early does not rotate it."""
    assert rotation_decision(resume(beatSeen=True)) == {"action": "relaunch"}


def test_dying_inside_the_window_rotates_as_a_guess() -> None:
    """A failed resume inside the window rotates, unproven."""
    assert rotation_decision(resume()) == {
        "action": "rotate",
        "proven": False,
        "why": "the resume died inside the failure window",
    }


def test_an_unknown_exit_inside_the_window_rotates() -> None:
    """A missing exit file inside the window is a failure, so it rotates."""
    assert rotation_decision(resume(exitCode=None))["action"] == "rotate"


@pytest.mark.parametrize(
    "over",
    [
        {"mode": "session-id"},
        {"exitCode": 0},
        {"selfStopped": True},
        {"startedAt": NOW - 60_000},
        {"startedAt": NOW - 60_000, "beatSeen": False},
        {"startedAt": NOW - 60_000, "streakAtLimit": True},
        {"startedAt": NOW - 60_000, "beatSeen": False, "streakAtLimit": True, "selfStopped": True},
        {"startedAt": None, "endedAt": "later"},
    ],
)
def test_these_launches_relaunch(over: dict[str, Any]) -> None:
    """Not a resume, a clean exit, our own stop, or outside the window without the last
    resort (never beaten AND at the limit) all relaunch the same id; a NaN duration is
    outside the window."""
    assert rotation_decision(resume(**over)) == {"action": "relaunch"}


def test_never_beaten_at_the_limit_rotates_as_the_last_resort() -> None:
    """Outside the window, a never-beaten launch at the escalation limit rotates anyway."""
    decision = rotation_decision(
        resume(startedAt=NOW - HOUR_MS, beatSeen=False, streakAtLimit=True)
    )
    assert decision == {
        "action": "rotate",
        "proven": False,
        "why": "every recent launch has failed identically and never beaten — a fresh id is the "
        "last untried repair",
    }


def test_a_spent_budget_backs_off() -> None:
    """Three rotations in the last hour turn an inferred rotation into a backoff."""
    assert rotation_decision(resume(record=SPENT)) == {"action": "backoff", "sleepMs": BACKOFF_MS}


def test_old_and_unparseable_rotations_do_not_spend_the_budget() -> None:
    """Only rotations stamped within the hour count; a stamp that does not parse never does."""
    record = {"rotations": [minutes_ago(61), minutes_ago(90), "not a date", minutes_ago(5)]}
    assert rotation_decision(resume(record=record))["action"] == "rotate"


def test_the_budget_window_and_backoff_are_overridable() -> None:
    """maxRotationsPerHour, failureWindowMs and backoffMs replace the defaults."""
    one = {"rotations": [minutes_ago(5)]}
    assert rotation_decision(resume(record=one, max_rotations_per_hour=1, backoff_ms=5)) == {
        "action": "backoff",
        "sleepMs": 5,
    }
    late = resume(startedAt=NOW - 30_000)
    assert rotation_decision(late) == {"action": "relaunch"}
    assert rotation_decision({**late, "failureWindowMs": 60_000})["action"] == "rotate"


def test_now_may_be_a_callable_and_is_read_only_when_needed() -> None:
    """`now` may be a zero-arg callable; a relaunch never needs the clock."""
    calls: list[int] = []

    def clock() -> int:
        calls.append(1)
        return NOW

    assert rotation_decision(resume(record=SPENT, now=clock))["action"] == "backoff"
    assert calls == [1]
    assert rotation_decision(resume(mode="session-id", now=None)) == {"action": "relaunch"}
    with pytest.raises(ValueError, match="now"):
        rotation_decision(resume(now=None))


def test_rotation_keeps_the_last_hours_rotations_and_stamps_this_one() -> None:
    """The fresh record carries a new id, the dead id as provenance and the recent rotations."""
    record = {"sessionId": DEAD_ID, "resumes": 7, "rotations": [minutes_ago(61), minutes_ago(10)]}
    rotated = rotate_main_session(record, {"now": NOW, "uuid": lambda: "fresh-id", "reason": " r "})
    assert rotated == {
        "sessionId": "fresh-id",
        "createdAt": "2025-09-25T10:00:00.000Z",
        "resumes": 0,
        "rotations": [minutes_ago(10), "2025-09-25T10:00:00.000Z"],
        "rotatedFrom": DEAD_ID,
        "rotatedReason": "r",
    }


def test_the_rotation_reason_is_cut_to_300_and_omitted_when_blank() -> None:
    """A long reason keeps its first 300 characters; a blank or non-string one is left out."""
    record = {"sessionId": DEAD_ID, "rotations": []}
    long = rotate_main_session(record, now=NOW, uuid=lambda: "u", reason="  " + "y" * 400)
    assert long["rotatedReason"] == "y" * 300
    for reason in ("   ", "", None, 5):
        rotated = rotate_main_session(record, now=NOW, uuid=lambda: "u", reason=reason)
        assert "rotatedReason" not in rotated


def test_minting_needs_the_randomness_passed_in() -> None:
    """Without a uuid callable no id is minted: randomness is an argument."""
    with pytest.raises(ValueError, match="uuid"):
        rotate_main_session({"sessionId": DEAD_ID}, now=NOW)
    assert new_main_session(now=NOW, uuid=lambda: "n") == {
        "sessionId": "n",
        "createdAt": "2025-09-25T10:00:00.000Z",
        "resumes": 0,
        "rotations": [],
    }


# --------------------------------------------------------------------------- time


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (1_758_794_400_123, "2025-09-25T10:00:00.123Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),
        (8_640_000_000_000_000, "+275760-09-13T00:00:00.000Z"),
        (-8_640_000_000_000_000, "-271821-04-20T00:00:00.000Z"),
        (-62_198_755_200_001, "-000002-12-31T23:59:59.999Z"),
    ],
)
def test_iso_prints_as_javascript_does(ms: int, text: str) -> None:
    """iso() is `new Date(ms).toISOString()`, extended years included."""
    assert iso(ms) == text
    assert parse_iso(text) == ms


def test_iso_refuses_what_javascript_calls_invalid() -> None:
    """Past the TimeClip range or not finite, toISOString throws; so does iso()."""
    for bad in (8_640_000_000_000_001, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            iso(bad)


@given(st.integers(-8_640_000_000_000_000, 8_640_000_000_000_000))
def test_iso_and_parse_iso_round_trip(ms: int) -> None:
    """Every valid time prints and parses back to itself."""
    assert parse_iso(iso(ms)) == ms


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2025-09-25T11:30:00.000+01:30", NOW),
        ("2025-09-25T05:00:00-05:00", NOW),
        ("2025-09-25T10:00:00Z", NOW),
        ("2025-09-25T10:00Z", NOW),
        ("2025-09-25", NOW - 10 * HOUR_MS),
        ("2025-09-25T10:00:00.1234Z", NOW + 123),
        ("2015-02-30T00:00:00Z", 1_425_254_400_000),
        ("2025-09-25T24:00:00Z", NOW + 14 * HOUR_MS),
        ("2025-09-25T10:00:60Z", None),
        ("2025-13-01T00:00:00Z", None),
        ("2025-09-25T10:00:00+24:00", None),
        ("+275760-09-13T00:00:00.001Z", None),
        ("-000000-01-01T00:00:00Z", None),
        ("yesterday", None),
        ("", None),
    ],
)
def test_parse_iso_reads_what_date_parse_reads(text: str, ms: int | None) -> None:
    """Offsets, short forms and V8's day roll-over parse; out-of-range fields give None."""
    assert parse_iso(text) == ms


# --------------------------------------------------------------------------- resume target


def lister(entries: object) -> dict[str, Callable[[str], object]]:
    """deps whose readdirSync lists `entries` for the seat's transcript directory only."""

    def readdir(path: str) -> object:
        if path != DIR:
            raise FileNotFoundError(path)
        return entries

    return {"readdirSync": readdir}


def target(**over: Any) -> dict[str, Any]:
    return {"homeDir": HOME, "projectDir": PROJECT, "sessionId": DEAD_ID, **over}


def test_the_project_slug_replaces_every_non_alphanumeric() -> None:
    """Every character but an ASCII letter or digit is a dash; outside the BMP, two."""
    assert project_slug("/Users/x/hq") == "-Users-x-hq"
    assert project_slug("a b_c.d9") == "a-b-c-d9"
    assert project_slug("é😀") == "---"
    assert project_slug(None) == ""


def test_a_listed_transcript_is_present_whatever_its_case() -> None:
    """The id matches its `.jsonl` case-insensitively."""
    state = resume_target_state(target(sessionId=DEAD_ID.upper()), lister([f"{DEAD_ID}.JSONL"]))
    assert state == {"state": "present", "dir": DIR, "reason": "the transcript is on disk"}


def test_entries_may_be_objects_with_a_name() -> None:
    """A listing of entries with a name (dirents, mappings) reads their names."""

    class Entry:
        def __init__(self, name: str) -> None:
            self.name = name

    assert resume_target_state(target(), lister([Entry(f"{DEAD_ID}.jsonl")]))["state"] == "present"
    assert resume_target_state(target(), lister([{"name": f"{DEAD_ID}.jsonl"}]))["state"] == (
        "present"
    )


def test_other_transcripts_without_this_one_is_missing() -> None:
    """Missing is said only on positive evidence: transcripts listed, this id not among them."""
    state = resume_target_state(target(), lister(["a.jsonl", "b.jsonl", f"{DEAD_ID}.json"]))
    assert state == {
        "state": "missing",
        "dir": DIR,
        "reason": f"2 transcript(s) on disk for this project and none of them is {DEAD_ID}",
    }


@pytest.mark.parametrize(
    ("a", "entries", "reason"),
    [
        (target(), None, "the project's transcript directory is absent or unreadable"),
        (target(), [], "the project's transcript directory holds no transcripts at all"),
        (target(), ["notes.txt"], "the project's transcript directory holds no transcripts at all"),
        (target(engine="cohort"), [], "engine cohort does not keep transcripts here"),
        (target(homeDir=""), [], "no home directory or session id to check"),
        (target(sessionId=None), [], "no home directory or session id to check"),
    ],
)
def test_fail_open_is_unknown(a: dict[str, Any], entries: object, reason: str) -> None:
    """An absent or empty directory, no transcripts, another engine, no home or id: unknown."""
    deps = lister(entries) if entries is not None else {"readdirSync": _absent}
    state = resume_target_state(a, deps)
    assert state["state"] == "unknown" and state["reason"] == reason


def _absent(path: str) -> object:
    raise FileNotFoundError(path)


def test_the_directory_is_joined_as_node_joins_it() -> None:
    """Repeated slashes collapse and a trailing one does not double up."""
    seen: list[str] = []

    def readdir(path: str) -> list[str]:
        seen.append(path)
        return []

    resume_target_state(target(home_dir="/Users//james/"), {"readdirSync": readdir})
    assert seen == [DIR]


@pytest.fixture
def no_default_lister() -> Iterator[None]:
    previous = set_default_lister(None)
    yield
    set_default_lister(previous)


@pytest.mark.usefixtures("no_default_lister")
def test_the_default_lister_is_registered_by_the_shell() -> None:
    """Without deps the registered lister is used; with none registered, a clear error."""
    with pytest.raises(RuntimeError, match="set_default_lister"):
        resume_target_state(target())
    assert resume_target_state(target(engine="cohort"))["state"] == "unknown"
    set_default_lister(lambda path: [f"{DEAD_ID}.jsonl"] if path == DIR else [])
    assert resume_target_state(target())["state"] == "present"
