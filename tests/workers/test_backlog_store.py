"""The backlog store against a real Redis: an item is added once by its dispatch id, the
seat's revision rises once per new item, and an item is closed exactly once."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from pydantic import ValidationError

from contracts.backlog import BacklogEntry
from workers.stores import keys
from workers.stores.backlog import REVISION_FIELD, Backlog

SEAT = "U1"


def _entry(item_id: str = "stw_1", **fields: Any) -> BacklogEntry:
    wire: dict[str, Any] = {
        "id": item_id,
        "seatId": SEAT,
        "objectiveKey": "activation",
        "title": "Call ten trial users",
        "route": "SELF",
        "addedAtMs": 1_000,
        **fields,
    }
    return BacklogEntry.model_validate(wire)


@pytest.fixture
def backlog(redis_client: redis.Redis) -> Backlog:
    return Backlog(redis_client)


def test_an_item_is_added_open_and_bumps_the_revision(backlog: Backlog) -> None:
    """A new item is `added`, listed as open, and the seat's revision goes from 0 to 1."""
    assert backlog.revision(SEAT) == 0
    added = backlog.add(_entry())
    assert added.status == "added" and added.revision == 1
    assert [e.id for e in backlog.open_items(SEAT)] == ["stw_1"]
    assert backlog.get(SEAT, "stw_1") == _entry()


def test_the_same_id_again_is_a_duplicate_and_the_first_write_wins(
    backlog: Backlog, redis_client: redis.Redis
) -> None:
    """Adding an id twice, even with other content, is `duplicate`: one item, the first one,
    and the revision bumped only once."""
    backlog.add(_entry())
    again = backlog.add(_entry(title="Something else", addedAtMs=5_000))
    assert again.status == "duplicate" and again.revision == 1
    assert backlog.revision(SEAT) == 1
    stored = backlog.get(SEAT, "stw_1")
    assert stored is not None and stored.title == "Call ten trial users"
    assert redis_client.zscore(keys.backlog_open(SEAT), "stw_1") == 1_000


def test_the_revision_counts_each_new_item_once(backlog: Backlog) -> None:
    """Three distinct items and two repeats leave the revision at 3."""
    for item_id in ["a", "b", "a", "c", "b"]:
        backlog.add(_entry(item_id))
    assert backlog.revision(SEAT) == 3


def test_open_items_are_oldest_first_and_per_seat(backlog: Backlog) -> None:
    """Open items come back in the order they were added; another seat's are not listed."""
    backlog.add(_entry("late", addedAtMs=3_000))
    backlog.add(_entry("early", addedAtMs=1_000))
    backlog.add(_entry("other", seatId="U2"))
    assert [e.id for e in backlog.open_items(SEAT)] == ["early", "late"]
    assert [e.id for e in backlog.open_items("U2")] == ["other"]


def test_an_item_is_done_once(backlog: Backlog, redis_client: redis.Redis) -> None:
    """The first close is `done` with who and when; a second is `already_done` and keeps
    the first close."""
    backlog.add(_entry())
    first = backlog.done(SEAT, "stw_1", by="U1", now_ms=2_000)
    assert first.status == "done" and first.entry is not None
    assert first.entry.state == "done" and first.entry.done_by == "U1"
    again = backlog.done(SEAT, "stw_1", by="U9", now_ms=9_000)
    assert again.status == "already_done" and again.entry == first.entry
    assert backlog.open_items(SEAT) == [] and redis_client.zcard(keys.backlog_open(SEAT)) == 0
    assert [e.id for e in backlog.items(SEAT, "done")] == ["stw_1"]
    assert backlog.revision(SEAT) == 1


def test_closing_an_unknown_item_writes_nothing(
    backlog: Backlog, redis_client: redis.Redis
) -> None:
    """Closing an id the seat does not have is `unknown` and leaves no key behind."""
    assert backlog.done(SEAT, "nope", by="U1", now_ms=1).status == "unknown"
    assert backlog.done(SEAT, REVISION_FIELD, by="U1", now_ms=1).status == "unknown"
    assert list(redis_client.scan_iter(match="sw:backlog*")) == []


def test_the_views_split_open_and_done_and_skip_the_revision(backlog: Backlog) -> None:
    """`open`, `done` and `all` list what they say, and the revision field is never an item."""
    backlog.add(_entry("a", addedAtMs=1))
    backlog.add(_entry("b", addedAtMs=2))
    backlog.done(SEAT, "a", by="U1", now_ms=3)
    assert [e.id for e in backlog.items(SEAT, "open")] == ["b"]
    assert [e.id for e in backlog.items(SEAT, "done")] == ["a"]
    assert [e.id for e in backlog.items(SEAT, "all")] == ["a", "b"]


def test_an_id_in_the_reserved_namespace_is_refused() -> None:
    """An id starting with ':' could collide with the revision field, so the contract refuses it."""
    with pytest.raises(ValidationError):
        _entry(":revision")


def test_review_and_claim_round_trip(backlog: Backlog) -> None:
    """A NEEDS_REVIEW item keeps its review requirement and a COLLABORATE item its claim."""
    review = {"kind": "approval", "reason": "gated-action-class", "reviewerId": "U7"}
    backlog.add(_entry("r", route="NEEDS_REVIEW", review=review))
    backlog.add(_entry("c", route="COLLABORATE", claim={"holderId": "U1", "contributors": ["U2"]}))
    got_r, got_c = backlog.get(SEAT, "r"), backlog.get(SEAT, "c")
    assert got_r is not None and got_r.review is not None and got_r.review.reviewer_id == "U7"
    assert got_c is not None and got_c.claim is not None and got_c.claim.contributors == ("U2",)


def test_open_items_of_one_objective_come_from_its_own_index(
    backlog: Backlog, redis_client: redis.Redis
) -> None:
    """A steward run reads the open items of its objective only: another objective's items
    on the same seat are not read, and a closed item leaves both indexes."""
    backlog.add(_entry("mine"))
    backlog.add(_entry("theirs", objectiveKey="other"))
    assert [e.id for e in backlog.open_items(SEAT, "activation")] == ["mine"]
    assert [e.id for e in backlog.open_items(SEAT, "other")] == ["theirs"]
    backlog.done(SEAT, "mine", by="U1", now_ms=2_000)
    assert backlog.open_items(SEAT, "activation") == []
    assert redis_client.zcard(keys.backlog_open_for(SEAT, "activation")) == 0
    assert [e.id for e in backlog.open_items(SEAT)] == ["theirs"]
