"""Why a seat's main-session launch failed, when to rotate its id, and when to ask a person. Pure.

Three concerns: a failed launch (name it, count identical failures, escalate), the main
session's identity (when to relaunch, rotate or back off; the record after a rotation; a fresh
record) and the resume target (is the resumed transcript on disk?).

    classify_launch_failure   one launch's outcome -> {kind, proven, detail}
    launch_failure_signature  what counts as "the same failure again" (never the session id)
    parse_launch_failures     the persisted streak file -> streak | None
    launch_failure_streak     streak after one more outcome (None: clear the file)
    escalation_decision       has this stopped being a retry?
    escalation_hint           the operator's one sentence, the request for a person first
    rotation_decision         relaunch | rotate (proven or inferred) | backoff
    rotate_main_session       the record after a rotation; new_main_session a fresh one
    resume_target_state       present | missing | unknown, from a directory listing
    iso / parse_iso           `Date#toISOString` and `Date.parse` for ms timestamps, by hand

Each function takes its arguments as one camelCase mapping, or as keywords (snake or camel
case), and returns a plain dict with camelCase keys. Time and randomness arrive as arguments
(`now`, `uuid`); the directory lister is injected per call or replaced with
`set_default_lister`; by default it is `os.listdir` (the one I/O this module may do, pinned
by issue 12 and allowed by name in tests/test_architecture.py).
"""

from __future__ import annotations

import json
import math
import os  # for os.listdir only: the default lister issue 12 pins (see tests/test_architecture.py)
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Final, TypeGuard

from pipeline.js import _JS_SPACE as JS_SPACE
from pipeline.js import (
    EMPTY,
    UNDEFINED,
    either,
    field,
    is_array,
    is_finite,
    js_str,
    num_str,
    present,
    to_number,
    truthy,
)

IDENTICAL_FAILURE_LIMIT: Final = 3
FAILURE_WINDOW_MS: Final = 20_000
MAX_ROTATIONS_PER_HOUR: Final = 3
BACKOFF_MS: Final = 600_000
HOUR_MS: Final = 3_600_000
TRANSCRIPT_ROOT: Final = ".claude/projects"
ROTATED_REASON_MAX: Final = 300

# The runtime's wording, not ours: a list so a second phrasing is one more line.
RESUME_MISSING_PATTERNS: Final = (
    re.compile(r"no conversation found with session id", re.IGNORECASE),
    re.compile(r"no conversation found matching", re.IGNORECASE),
    re.compile(r"session .{0,80}? not found", re.IGNORECASE),
)
BINARY_MISSING_PATTERNS: Final = (
    re.compile(r"command not found", re.IGNORECASE),
    re.compile(r"no such file or directory", re.IGNORECASE),
    re.compile(r"\bENOENT\b"),
)

Lister = Callable[[str], object]
Args = Mapping[str, object] | None

_MAX_TIME_MS: Final = 8_640_000_000_000_000  # TimeClip: ±1e8 days around the epoch
_DAY_MS: Final = 86_400_000
_ISO = re.compile(
    r"([+-][0-9]{6}|[0-9]{4})(?:-([0-9]{2})(?:-([0-9]{2}))?)?"
    r"(?:T([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]+))?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?",
    re.IGNORECASE,  # V8 reads a lower-case "t" and "z" too
)
_JS_LINE_BREAKS = str.maketrans({"\r": "\n", "\u2028": "\n", "\u2029": "\n"})

_default_lister: Lister | None = os.listdir


# --------------------------------------------------------------------------- arguments


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _args(a: Args, kw: Mapping[str, object]) -> Mapping[str, object]:
    """The arguments as one object: the mapping given, with keywords (snake_case or camelCase)
    laid over it under their camelCase keys."""
    if not kw:
        return EMPTY if a is None else a
    if a is not None and not isinstance(a, Mapping):
        raise TypeError("pass the arguments as one mapping or as keywords, not both")
    merged: dict[str, object] = dict(a or {})
    for key, value in kw.items():
        merged[_camel(key)] = value
    return merged


def _is_str(value: object, expected: str) -> bool:
    """JavaScript's `value === "expected"`."""
    return isinstance(value, str) and value == expected


def _js_integer(value: object) -> int | None:
    """`Number.isInteger(value) ? value : null`; a boolean is not a number, 3.0 is 3, and an
    integer past 2**53 is the double JavaScript would hold (past 1e308, Infinity: none)."""
    if not is_finite(value):
        return None
    try:
        as_double = float(value)
    except OverflowError:
        return None
    return int(as_double) if as_double == int(as_double) else None


def _js_trim(text: str) -> str:
    return text.strip(JS_SPACE)


def _utf16_slice(text: str, units: int) -> str:
    """`text.slice(0, units)`: JavaScript counts UTF-16 code units, so a character outside the
    BMP is two of them and may be cut in half."""
    raw = text.encode("utf-16-le", "surrogatepass")[: 2 * units]
    return raw.decode("utf-16-le", "surrogatepass")


def _now_ms(now: object) -> int | float:
    value = now() if callable(now) else now
    if not is_finite(value):
        raise ValueError("now is required (int ms or a zero-arg callable): time is an argument")
    return value


# --------------------------------------------------------------------------- time


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date; a day past the month's end rolls
    into the next month, as V8's parser lets it."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m - 3 if m > 2 else m + 9) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (m <= 2), m, d


def iso(ms: int | float) -> str:
    """`new Date(ms).toISOString()`; a time JavaScript calls invalid raises ValueError (its
    RangeError)."""
    if not is_finite(ms) or abs(ms) > _MAX_TIME_MS:
        raise ValueError(f"invalid time value: {ms!r}")
    t = int(ms)  # TimeClip truncates toward zero
    days, in_day = divmod(t, _DAY_MS)
    y, m, d = _civil_from_days(days)
    hh, rest = divmod(in_day, 3_600_000)
    mm, rest = divmod(rest, 60_000)
    ss, milli = divmod(rest, 1000)
    year = f"{y:04d}" if 0 <= y <= 9999 else f"{'-' if y < 0 else '+'}{abs(y):06d}"
    return f"{year}-{m:02d}-{d:02d}T{hh:02d}:{mm:02d}:{ss:02d}.{milli:03d}Z"


def parse_iso(text: object) -> int | None:
    """`Date.parse` of the ISO-8601 date-time format, in ms; None where JavaScript gives NaN.

    A date-time without an offset is local time in JavaScript; a pure function knows no local
    zone, so it reads as UTC (what Node prints under TZ=UTC). V8's looser legacy formats are
    not read: they are not what this module ever writes.
    """
    s = js_str(text)
    match = _ISO.fullmatch(s)
    if match is None:
        return None
    year_s, month_s, day_s, hh_s, mi_s, ss_s, frac_s, zone = match.groups()
    if year_s == "-000000":
        return None
    year = int(year_s)
    month, day = int(month_s or 1), int(day_s or 1)
    hh, mi, ss = int(hh_s or 0), int(mi_s or 0), int(ss_s or 0)
    milli = int((frac_s or "0")[:3].ljust(3, "0"))
    if not (1 <= month <= 12 and 1 <= day <= 31 and mi < 60 and ss < 60):
        return None
    if hh > 24 or (hh == 24 and (mi or ss or milli)):
        return None
    offset = 0
    if zone and zone.upper() != "Z":
        oh, om = int(zone[1:3]), int(zone[4:6])
        if oh > 23 or om > 59:
            return None
        offset = (oh * 60 + om) * 60_000 * (-1 if zone[0] == "-" else 1)
    ms = (
        _days_from_civil(year, month, day) * _DAY_MS
        + ((hh * 60 + mi) * 60 + ss) * 1000
        + milli
        - offset
    )
    return ms if abs(ms) <= _MAX_TIME_MS else None


def _within_hour(rotations: object, t: int | float) -> list[object]:
    """The rotations stamped less than an hour before `t`; an unparseable stamp is not recent,
    as `t - NaN < HOUR_MS` is false."""
    kept: list[object] = []
    for r in rotations if is_array(rotations) else []:
        at = parse_iso(r)
        if at is not None and t - at < HOUR_MS:
            kept.append(r)
    return kept


# --------------------------------------------------------------------------- failures


def _any_match(patterns: Iterable[re.Pattern[str]], text: str) -> bool:
    """`patterns.some((re) => re.test(text))` under JavaScript's rules: `.` stops at any line
    terminator, `\\b` and `/i` know only ASCII letters, and `.{0,80}` counts UTF-16 units. No
    pattern names a non-ASCII character, so each one only ever meets `.` and can stand in as
    a neutral NUL per code unit."""
    view = "".join(
        c if c < "\x80" else "\x00\x00" if c > "\uffff" else "\x00"
        for c in text.translate(_JS_LINE_BREAKS)
    )
    return any(p.search(view) for p in patterns)


def classify_launch_failure(a: Args = None, **kw: object) -> dict[str, object]:
    """Name the failure of one launch. Output is evidence; its absence proves nothing, so with
    none the verdict rests on the exit code and the mode."""
    a = _args(a, kw)
    raw_exit = field(a, "exitCode")
    exit_code = to_number(raw_exit) if present(raw_exit) else None
    output = field(a, "output")
    text = output if isinstance(output, str) else ""
    beat_seen = field(a, "beatSeen") is True
    failed = exit_code is None or exit_code != 0

    if not failed:
        if beat_seen:
            return {"kind": "none", "proven": True, "detail": "the session ran and exited cleanly"}
        return {
            "kind": "none",
            "proven": False,
            "detail": "the session exited cleanly without beating",
        }
    # What the runtime said in words outranks anything inferred from timing or codes.
    if _is_str(field(a, "mode"), "resume") and _any_match(RESUME_MISSING_PATTERNS, text):
        return {
            "kind": "resume-target-missing",
            "proven": True,
            "detail": "the runtime reported that the conversation this launch tried to resume "
            "does not exist on this machine",
        }
    if exit_code == 127 or _any_match(BINARY_MISSING_PATTERNS, text):
        return {
            "kind": "binary-missing",
            "proven": True,
            "detail": "the launcher could not find the binary it was told to run",
        }
    shown = "unknown" if exit_code is None else num_str(exit_code)
    if not beat_seen:
        return {
            "kind": "never-beaten",
            "proven": False,
            "detail": f"the launch ended (exit {shown}) without ever writing a heartbeat",
        }
    return {
        "kind": "nonzero-exit",
        "proven": False,
        "detail": f"the session beat, then ended with exit {shown}",
    }


def launch_failure_signature(a: Args = None, **kw: object) -> str:
    """Mode and kind, never the session id: a rotation that fails the same way is the same
    fault, and an id in the signature would restart the count on every rotation. The exit
    code is kept only where the kind does not already name the fault."""
    a = _args(a, kw)
    kind = js_str(either(field(a, "kind"), "unknown"))
    mode = "resume" if _is_str(field(a, "mode"), "resume") else "session-id"
    if kind == "none":
        return ""
    if kind in ("never-beaten", "nonzero-exit"):
        raw_exit = field(a, "exitCode")
        shown = num_str(to_number(raw_exit)) if present(raw_exit) else "unknown"
        return f"{mode}:{kind}:{shown}"
    return f"{mode}:{kind}"


def _no_js_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def parse_launch_failures(text: object) -> dict[str, object] | None:
    """The persisted streak, or None for anything unreadable: a corrupt counter must never be
    able to escalate on its own."""
    if not isinstance(text, str) or not _js_trim(text):
        return None
    try:
        raw = json.loads(text, parse_constant=_no_js_constant)
    except ValueError:
        return None
    if not isinstance(raw, dict):  # an array, a number, a string or null
        return None
    signature = raw.get("signature")
    streak = _js_integer(raw.get("streak"))
    if not isinstance(signature, str) or not signature or streak is None or streak <= 0:
        return None

    def text_of(key: str) -> str:
        value = raw.get(key)
        return value if isinstance(value, str) else ""

    return {
        "signature": signature,
        "streak": streak,
        "firstAt": text_of("firstAt"),
        "lastAt": text_of("lastAt"),
        "escalatedAt": text_of("escalatedAt"),
    }


def _plus_one(value: object) -> object:
    """JavaScript's `value + 1`: a number adds, a string concatenates."""
    if isinstance(value, str):
        return value + "1"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value + 1
    if value is None or isinstance(value, bool):
        return int(bool(value)) + 1
    if value is UNDEFINED:
        return math.nan
    return js_str(value) + "1"


def launch_failure_streak(
    prior: object, outcome: Args = None, **kw: object
) -> dict[str, object] | None:
    """The streak after one more outcome: the same signature extends it, a different one
    restarts at 1 (two faults are two problems), a success (empty signature) clears it."""
    outcome = _args(outcome, kw)
    raw_sig, raw_at = field(outcome, "signature"), field(outcome, "at")
    signature = raw_sig if isinstance(raw_sig, str) else ""
    at = raw_at if isinstance(raw_at, str) else ""
    if not signature:
        return None
    if truthy(prior) and _is_str(field(prior, "signature"), signature):
        return {
            "signature": signature,
            "streak": _plus_one(field(prior, "streak")),
            "firstAt": either(field(prior, "firstAt"), at),
            "lastAt": at,
            "escalatedAt": either(field(prior, "escalatedAt"), ""),
        }
    return {"signature": signature, "streak": 1, "firstAt": at, "lastAt": at, "escalatedAt": ""}


def escalation_decision(a: Args = None, **kw: object) -> dict[str, object]:
    """Escalate on the launch that reaches the limit and on every one after it (a one-shot
    flag would be cleared by the next launch and look healed); `fresh` marks the first."""
    a = _args(a, kw)
    given_limit = _js_integer(field(a, "limit"))
    limit = given_limit if given_limit is not None and given_limit > 0 else IDENTICAL_FAILURE_LIMIT
    given_streak = _js_integer(field(a, "streak"))
    streak = given_streak if given_streak is not None and given_streak > 0 else 0
    if streak < limit:
        return {
            "escalate": False,
            "fresh": False,
            "streak": streak,
            "limit": limit,
            "reason": f"launch failure {num_str(streak)}/{num_str(limit)} — retrying",
        }
    return {
        "escalate": True,
        "fresh": not truthy(field(a, "escalatedAt")),
        "streak": streak,
        "limit": limit,
        "reason": f"{num_str(streak)} consecutive launches have failed the same way "
        f"(limit {num_str(limit)}) — this is a fault, not a retry",
    }


def escalation_hint(a: Args = None, **kw: object) -> str:
    """The operator's one sentence. The channel cuts it at 200 characters, so the count and
    the request for a person come first and the diagnosis trails."""
    a = _args(a, kw)
    sig = js_str(either(field(a, "signature"), "unknown"))
    streak = to_number(field(a, "streak"))
    count = streak if truthy(streak) else 0
    detail = _js_trim(js_str(either(field(a, "detail"), "")))
    session_id = field(a, "sessionId")
    ident = f" Session {session_id}." if isinstance(session_id, str) and session_id else ""
    return (
        f"{num_str(count)}× in a row, identically — retries are not fixing it and this needs "
        f"a person. {detail or sig}.{ident}"
    )


# --------------------------------------------------------------------------- rotation


def _given_or(a: object, camel: str, default: int) -> int | float:
    """`a.camel ?? default`, read as the number a `<` / `>=` comparison makes of it."""
    value = field(a, camel)
    return to_number(value) if present(value) else default


def rotation_decision(a: Args = None, **kw: object) -> dict[str, object]:
    """relaunch, rotate or back off after a main-session launch ended.

    A proven missing resume target rotates at once and outside the hourly budget: the budget
    bounds blind rotation, and throttling the one repair that works is how the seat stayed
    down for days. Otherwise only a failed resume rotates: inside the window unless it beat
    (it started, so its transcript is good), or never-beaten at the escalation limit as the
    last untried repair; never when the supervisor ended the session itself.
    """
    a = _args(a, kw)
    window_ms = _given_or(a, "failureWindowMs", FAILURE_WINDOW_MS)
    max_rotations = _given_or(a, "maxRotationsPerHour", MAX_ROTATIONS_PER_HOUR)
    backoff_ms = field(a, "backoffMs")
    duration_ms = to_number(field(a, "endedAt")) - to_number(field(a, "startedAt"))
    exit_code = field(a, "exitCode")
    clean = is_finite(exit_code) and exit_code == 0  # strict: the string "0" is a failure
    if not _is_str(field(a, "mode"), "resume"):
        return {"action": "relaunch"}
    if field(a, "resumeTargetMissing") is True:
        return {
            "action": "rotate",
            "proven": True,
            "why": "the conversation this launch resumed does not exist on this machine",
        }
    if clean or field(a, "selfStopped") is True:
        return {"action": "relaunch"}
    beat_seen = field(a, "beatSeen")
    inside_window = duration_ms < window_ms and beat_seen is not True  # NaN: outside
    last_resort = beat_seen is False and field(a, "streakAtLimit") is True
    if not inside_window and not last_resort:
        return {"action": "relaunch"}
    t = _now_ms(field(a, "now"))
    recent = _within_hour(either(field(field(a, "record"), "rotations"), []), t)
    if len(recent) >= max_rotations:
        return {"action": "backoff", "sleepMs": backoff_ms if present(backoff_ms) else BACKOFF_MS}
    return {
        "action": "rotate",
        "proven": False,
        "why": "the resume died inside the failure window"
        if inside_window
        else "every recent launch has failed identically and never beaten — a fresh id is the "
        "last untried repair",
    }


def new_main_session(opts: Args = None, **kw: object) -> dict[str, object]:
    """A fresh main-session record, in the shape a session record is read back in: id,
    creation stamp, no resumes, no rotations."""
    opts = _args(opts, kw)
    uuid = field(opts, "uuid")
    if not callable(uuid):
        raise ValueError("uuid is required (a zero-arg callable): randomness is an argument")
    t = _now_ms(field(opts, "now"))
    return {"sessionId": uuid(), "createdAt": iso(t), "resumes": 0, "rotations": []}


def rotate_main_session(record: object, opts: Args = None, **kw: object) -> dict[str, object]:
    """The record after a rotation, both halves of the repair in one write: a fresh id to go
    to, and the dead id kept only as `rotatedFrom` (provenance, never resumed). The last
    hour's rotations carry over with this one stamped; `rotatedReason` tells a proven repair
    from a guess."""
    opts = _args(opts, kw)
    t = _now_ms(field(opts, "now"))
    fresh = new_main_session({"now": t, "uuid": field(opts, "uuid")})
    kept = _within_hour(either(field(record, "rotations"), []), t)
    raw_reason = field(opts, "reason")
    reason = _js_trim(raw_reason) if isinstance(raw_reason, str) else ""
    rotated: dict[str, object] = {**fresh, "rotations": [*kept, iso(t)]}
    old_id = field(record, "sessionId")
    if old_id is not UNDEFINED:  # JSON drops an undefined key; a null one stays
        rotated["rotatedFrom"] = old_id
    if reason:
        rotated["rotatedReason"] = _utf16_slice(reason, ROTATED_REASON_MAX)
    return rotated


# --------------------------------------------------------------------------- resume target


def set_default_lister(lister: Lister | None) -> Lister | None:
    """Register the directory lister `resume_target_state` uses when none is passed (the shell
    registers `os.listdir`; this layer may not touch the file system). Returns the previous."""
    global _default_lister
    previous, _default_lister = _default_lister, lister
    return previous


def project_slug(project_dir: object) -> str:
    """Claude Code's directory name for a project: every character but an ASCII letter or
    digit becomes "-", counted in UTF-16 units as JavaScript's regex does (so a character
    outside the BMP becomes "--")."""
    text = js_str(either(project_dir, ""))
    return "".join(
        c if c.isascii() and c.isalnum() else "--" if c > "\uffff" else "-" for c in text
    )


def _posix_join(*parts: str) -> str:
    """Node's `path.posix.join`: the non-empty parts joined by "/", then normalised (repeated
    slashes collapse, "." drops, ".." climbs where it can)."""
    joined = "/".join(p for p in parts if p)
    if not joined:
        return "."
    absolute = joined.startswith("/")
    segments: list[str] = []
    for segment in joined.split("/"):
        if segment in ("", "."):
            continue
        if segment == ".." and segments and segments[-1] != "..":
            segments.pop()
        elif segment != ".." or not absolute:
            segments.append(segment)
    body = "/".join(segments)
    if joined.endswith("/") and body:
        body += "/"
    if absolute:
        return "/" + body
    return body or ("./" if joined.endswith("/") else ".")


def _is_listing(entries: object) -> TypeGuard[Iterable[object]]:
    """A listing is a sequence of entries; anything else lists nothing, as a non-array does."""
    return isinstance(entries, Iterable) and not isinstance(entries, str | bytes | Mapping)


def _entry_name(entry: object) -> str:
    name = field(entry, "name")
    return js_str(name if truthy(entry) and truthy(name) else entry)


def resume_target_state(a: Args = None, deps: object = None, **kw: object) -> dict[str, object]:
    """Is the transcript this launch would `--resume` on disk, at
    `<home>/.claude/projects/<slug>/<id>.jsonl`? Fail-open: `missing` only on positive
    evidence (the directory lists transcripts and this id is not one of them); an absent,
    unreadable or empty directory, or another engine's layout, is `unknown`."""
    a = _args(a, kw)
    raw_home = field(a, "homeDir")
    home = raw_home if isinstance(raw_home, str) else ""
    session_id = js_str(either(field(a, "sessionId"), "")).lower()
    engine = field(a, "engine")
    if truthy(engine) and not _is_str(engine, "claude"):
        return {
            "state": "unknown",
            "dir": "",
            "reason": f"engine {js_str(engine)} does not keep transcripts here",
        }
    if not home or not session_id:
        return {"state": "unknown", "dir": "", "reason": "no home directory or session id to check"}
    directory = _posix_join(home, TRANSCRIPT_ROOT, project_slug(field(a, "projectDir")))
    given = field(deps, "readdirSync")
    lister = given if callable(given) else _default_lister
    if lister is None:
        raise RuntimeError(
            "resume_target_state needs a directory lister: pass deps={'readdirSync': f} "
            "or register one with set_default_lister (the default is os.listdir)"
        )
    try:
        entries = lister(directory)
        names = [_entry_name(e) for e in entries] if _is_listing(entries) else []
    except Exception:  # any failure to list is "could not tell", never "missing"
        return {
            "state": "unknown",
            "dir": directory,
            "reason": "the project's transcript directory is absent or unreadable",
        }
    transcripts = [n for n in names if n.lower().endswith(".jsonl")]
    if any(n.lower() == f"{session_id}.jsonl" for n in transcripts):
        return {"state": "present", "dir": directory, "reason": "the transcript is on disk"}
    # An empty directory is also what a seat looks like before its first session writes.
    if not transcripts:
        return {
            "state": "unknown",
            "dir": directory,
            "reason": "the project's transcript directory holds no transcripts at all",
        }
    return {
        "state": "missing",
        "dir": directory,
        "reason": f"{len(transcripts)} transcript(s) on disk for this project and none of them "
        f"is {session_id}",
    }
