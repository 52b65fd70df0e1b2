"""The indexed directory decides exactly as the old one did (issue 14: an expertise rung in O(k)).

A differential test: `reference_directory.py` is a frozen copy of the ladder before the
inverted indexes and the bounded selection. On random directories (ids that repeat or differ
only by spaces, mixed-case and punctuated owns/paths/roles, words that are substrings of
others, statuses that rule members out, the seat itself in the directory) and random work,
the live `decide_engagement` must give the same decision, field for field: targets and their
order, rungs, why lines, reason codes. One prepared `Directory` serves several works in a row,
so its lazily built indexes and memos are reused as they are in a worker.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import Member
from pipeline.engagement import Directory, decide_engagement
from tests.pipeline import reference_directory as reference

NOW = 1_700_000_000_000

# Few words, so members share them; some are substrings of others ("bill" in "billing",
# "pay" in "payments", "ops" in "devops"), some are short (one match is too weak), some long
# (one match is enough), some stopwords, one with a digit.
WORDS = [
    "billing",
    "bill",
    "payments",
    "pay",
    "api",
    "ops",
    "devops",
    "search",
    "engineer",
    "platform",
    "data",
    "legal",
    "recruiter",
    "k8s",
    "the",
    "and",
    "ledger",
    "led",
]
IDS = [*(f"m{i}" for i in range(1, 13)), "m1 ", " m2", "seat", "boss"]
STATUSES = ["active", "online", "busy", "away", "archived", "", "ACTIVE", "Busy", None]


def _phrase(max_words: int) -> st.SearchStrategy[str]:
    """A few pool words joined by a space, a hyphen or nothing, sometimes capitalised."""
    word = st.sampled_from(WORDS).map(str) | st.sampled_from(WORDS).map(str.title)
    sep = st.sampled_from([" ", " ", " ", "-", "/ ", ""])
    return st.tuples(st.lists(word, min_size=1, max_size=max_words), sep).map(
        lambda ws_sep: ws_sep[1].join(ws_sep[0])
    )


def _maybe(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | inner


@st.composite
def _mapping_member(draw: st.DrawFn) -> dict[str, Any]:
    """A member as a camelCase dict, with any of its optional keys."""
    m: dict[str, Any] = {
        draw(st.sampled_from(["id", "id", "memberId", "slug"])): draw(st.sampled_from(IDS))
    }
    for key, value in (
        ("displayName", _maybe(st.sampled_from(["Ada", "Ben", ""]))),
        ("status", st.sampled_from(STATUSES)),
        ("roleTitle", _maybe(_phrase(3))),
        ("title", _maybe(_phrase(2))),
        ("tagline", _maybe(_phrase(3))),
        ("teamName", _maybe(_phrase(2))),
        ("owns", _maybe(st.lists(_phrase(3), max_size=3))),
        ("escalationPath", _maybe(_phrase(3))),
        ("supervisorId", _maybe(st.sampled_from(IDS))),
        ("aliases", _maybe(st.lists(st.sampled_from(["github:ada", "U123"]), max_size=2))),
    ):
        # Most keys present, so members overlap; owns and paths rarer, so that the ownership
        # rung does not take every scope and the expertise rung gets its turn.
        rare = key in ("owns", "escalationPath")
        if draw(st.integers(0, 3)) > (2 if rare else 0):
            m[key] = draw(value)
    return {k: v for k, v in m.items() if v is not None}


@st.composite
def _contract_member(draw: st.DrawFn) -> Member:
    """A member as the validated `Member` contract the workers hold."""
    return Member(
        id=draw(st.sampled_from(IDS)),
        display_name=draw(st.sampled_from(["Ada", "Ben", ""])),
        status=draw(st.sampled_from([s for s in STATUSES if s is not None])),
        role_title=draw(st.just("") | _phrase(3)),
        tagline=draw(st.just("") | _phrase(3)),
        team_name=draw(st.just("") | _phrase(2)),
        owns=tuple(draw(st.lists(_phrase(3), max_size=2))) if draw(st.booleans()) else (),
        escalation_path=draw(st.just("") | st.just("") | _phrase(3)),
        supervisor_id=draw(_maybe(st.sampled_from(IDS))),
    )


members = st.lists(_mapping_member() | _contract_member(), max_size=16)


@st.composite
def _work(draw: st.DrawFn) -> dict[str, Any]:
    """Work that mostly fires and mostly reaches the ownership or expertise rung."""
    scope = draw(_maybe(_phrase(4)))
    blocker: dict[str, Any] = {
        "kind": draw(st.sampled_from(["decision", "approval", "information", "access"])),
        "detail": "needs a call",
    }
    if scope is not None:
        blocker["scope"] = scope
    if draw(st.integers(0, 5)) == 0:
        blocker["ownerId"] = draw(st.sampled_from(IDS))
    work: dict[str, Any] = {
        "id": f"w{draw(st.integers(0, 9))}",
        "title": draw(_phrase(3)),
        "state": draw(st.sampled_from(["blocked", "blocked", "blocked", "failed", "in_progress"])),
        "blocker": blocker,
        "selfServeExhausted": draw(st.booleans() | st.just(True)),
    }
    if draw(st.booleans()):
        work["scope"] = draw(_phrase(4))
    if draw(st.integers(0, 4)) == 0:
        work["review"] = {"required": True, "reviewerId": draw(st.sampled_from(IDS))}
    return work


@st.composite
def _context(draw: st.DrawFn) -> dict[str, Any]:
    """Everything but the directory: the seat, its supervisor, the cap."""
    ctx: dict[str, Any] = {"me": draw(st.sampled_from(["seat", "m1", "m3", ""])), "nowMs": NOW}
    if draw(st.booleans()):
        ctx["supervisorId"] = draw(st.sampled_from(["boss", "m4", "nobody"]))
    cap = draw(st.sampled_from([None, None, 0, 1, 2, 3, 5, 2.5, -1]))
    if cap is not None:
        ctx["maxTargets"] = cap
    return ctx


def _decided(decision: Any) -> dict[str, Any]:
    """The whole decision as plain data, so a difference in any field shows."""
    dumped: dict[str, Any] = decision.model_dump(mode="json")
    return dumped


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    directory=members,
    cases=st.lists(st.tuples(_work(), _context()), min_size=1, max_size=6),
)
def test_the_indexed_ladder_decides_as_the_reference(
    directory: list[Any], cases: list[tuple[dict[str, Any], dict[str, Any]]]
) -> None:
    """Given a random directory and works, the prepared and the plain directory both give
    the reference's decision, field for field, however many decisions share the index."""
    prepared = Directory.of(directory)
    for work, ctx in cases:
        expected = _decided(reference.decide_engagement(work, {**ctx, "directory": directory}))
        assert _decided(decide_engagement(work, {**ctx, "directory": prepared})) == expected
        assert _decided(decide_engagement(work, {**ctx, "directory": directory})) == expected


ROLES = ["Data Engineer", "Platform Engineer", "Billing Data Engineer", "Legal Recruiter", "Ops"]
TEAMS = ["Platform", "Data", "Payments", "Search", ""]


@st.composite
def _crowd(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Many members (distinct ids) with a handful of role and team texts: ties everywhere."""
    size = draw(st.integers(5, 60))
    crowd = []
    for i in range(size):
        m: dict[str, Any] = {
            "id": f"p{i}",
            "roleTitle": draw(st.sampled_from(ROLES)),
            "teamName": draw(st.sampled_from(TEAMS)),
            "status": draw(st.sampled_from(["active", "active", "busy", "archived", "away"])),
        }
        if draw(st.integers(0, 5)) == 0:
            m["owns"] = [draw(_phrase(2))]
        if draw(st.integers(0, 5)) == 0:
            m["tagline"] = draw(_phrase(2))
        crowd.append(m)
    return crowd


@settings(max_examples=80, deadline=None)
@given(directory=_crowd(), scope=_phrase(5))
def test_ties_and_the_cap_follow_the_reference_on_a_crowded_directory(
    directory: list[dict[str, Any]], scope: str
) -> None:
    """Given many members with the same few role words, the expertise and ownership picks
    (best score first, directory order breaking ties, stopping at the cap) are the
    reference's."""
    prepared = Directory.of(directory)
    work = {
        "id": "w1",
        "title": scope,
        "state": "blocked",
        "blocker": {"kind": "information", "scope": scope, "detail": "who knows"},
        "selfServeExhausted": True,
    }
    for cap in (1, 2, 3, 7, 20):
        ctx: dict[str, Any] = {"me": "seat", "nowMs": NOW, "maxTargets": cap}
        expected = _decided(reference.decide_engagement(work, {**ctx, "directory": directory}))
        assert _decided(decide_engagement(work, {**ctx, "directory": prepared})) == expected


def test_the_index_is_built_once_and_kept_on_the_directory() -> None:
    """Given a prepared directory, when two decisions reach the expertise rung, then both
    read the same index object: it is built on first use and kept for the org version."""
    directory = Directory.of(
        [{"id": f"m{i}", "roleTitle": "Data Engineer", "teamName": "Platform"} for i in range(5)]
    )
    work = {
        "id": "w1",
        "title": "data platform",
        "state": "blocked",
        "blocker": {"kind": "information", "scope": "data platform", "detail": "who knows"},
        "selfServeExhausted": True,
    }
    first = decide_engagement(work, {"me": "seat", "nowMs": NOW, "directory": directory})
    index = directory._profiles
    second = decide_engagement(work, {"me": "seat", "nowMs": NOW, "directory": directory})
    assert directory._profiles is index
    assert [t.member_id for t in first.targets] == ["m0", "m1", "m2"]
    assert first.targets == second.targets
