"""`find_agents` pages from an index built once per org version (issue 27): the same pages and
the same cursors as the listing it replaced, which sorted and filtered every seat per call.
The old listing is written out here as the reference and both walk every page of every
prefix, on orgs whose names mix case, share a name, casefold to more letters (ß) or are
missing (the member id stands in)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from contracts import Member, Org, Seat
from workers.org import OrgView, SeatsByName, seat_name

PAGE = 20
NAMES = [
    "alice",
    "Alice",
    "ALBERT",
    "bob",
    "Bob",
    "straße",
    "STRASSE",
    "Strauss",
    "Émile",
    "émile",
    "zoë",
    "Zoe",
    "",
    "a",
    "A",
    "ab",
    "aB",
    "Ab",
    "ſam",
    "sam",
    "Sam",
    "x y",
]


def reference(
    view: OrgView, prefix: str, after: tuple[str, str] | None
) -> tuple[list[tuple[str, str]], bool]:
    """`find_agents`'s listing before the index, as it was written."""
    members = view.member_by_id
    named = sorted(
        (
            (seat_name(members.get(s.member_id), s.member_id), s.member_id, s)
            for s in view.org.seats
        ),
        key=lambda e: (e[0], e[1]),
    )
    chosen = [
        (name, sid)
        for name, sid, _seat in named
        if name.casefold().startswith(prefix) and (after is None or (name, sid) > after)
    ]
    return chosen[:PAGE], len(chosen) > PAGE


def _org(seed: int, n: int) -> OrgView:
    rng = random.Random(seed)
    members, seats = [], []
    for i in range(n):
        mid = f"m{rng.randrange(10_000):04d}x{i}"
        base = rng.choice(NAMES)
        name = base + (str(rng.randrange(30)) if rng.random() < 0.5 else "")
        members.append(Member.model_validate({"id": mid, "displayName": name}))
        seats.append(Seat.model_validate({"memberId": mid}))
    seats.append(Seat.model_validate({"memberId": "no-member"}))  # named by its id
    return OrgView.of(Org(members=tuple(members), seats=tuple(seats)))


def _walk(view: OrgView, prefix: str) -> list[Any]:
    """Every page of `prefix`, following the cursors, by the index and by the reference."""
    pages = []
    after: tuple[str, str] | None = None
    while True:
        got, more = view.seats_by_name.page(prefix, after, PAGE)
        page = [(name, sid) for name, sid, _seat in got]
        assert (page, more) == reference(view, prefix, after), (prefix, after)
        pages.append(page)
        if not more:
            return pages
        after = page[-1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_page_of_every_prefix_is_the_old_listings(seed: int) -> None:
    view = _org(seed, 180)
    prefixes = {""} | {n[:k].casefold() for n in NAMES for k in (1, 2, 3)} | {"q", "zz", "ss"}
    for prefix in sorted(prefixes):
        pages = _walk(view, prefix)
        seen = [sid for page in pages for _name, sid in page]
        assert len(seen) == len(set(seen))  # no seat twice across the pages


def test_a_cursor_between_or_beyond_the_seats_resumes_where_the_old_one_did() -> None:
    """A cursor names a (name, id) that need not be a seat now (one left the org, or a
    hand-made cursor): the next page starts after it all the same."""
    view = _org(9, 60)
    keys = [(name, sid) for name, sid, _s in view.seats_by_name.entries]
    for after in [
        ("", ""),
        keys[10],
        (keys[10][0], keys[10][1] + "!"),
        ("alice", "zzz"),
        ("\U0010ffff", ""),
        ("Alice", ""),
    ]:
        for prefix in ("", "a", "al", "st", "é"):
            got, more = view.seats_by_name.page(prefix, after, PAGE)
            assert ([(n, s) for n, s, _ in got], more) == reference(view, prefix, after)


def test_the_index_is_built_once_per_org_version() -> None:
    view = _org(4, 30)
    assert view.seats_by_name is view.seats_by_name
    assert isinstance(view.seats_by_name, SeatsByName)
