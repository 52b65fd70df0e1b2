"""The ask figures (pipeline/ask_figures.py): asks by state, and per seat and per person how
the concluded asks went, over a window; labels bounded to the org's names. Pure."""

from __future__ import annotations

from contracts.asks import Ask, AskAnswer
from contracts.engagement import Target
from pipeline.ask_figures import OTHER, Tally, bounded, figures

NOW = 1_800_000_000_000


def ask(
    n: int,
    *,
    seat: str = "scout",
    targets: tuple[str, ...] = ("ben",),
    state: str = "open",
    answer: str | None = None,
    closed: str | None = None,
    at: int = NOW,
    level: int = 0,
) -> Ask:
    said = {"answer": answer, "by": targets[0], "via": "api", "atMs": at}
    given = None if answer is None else AskAnswer.model_validate(said)
    return Ask.model_validate(
        {
            "id": f"ask-{n}",
            "seatId": seat,
            "workId": "w",
            "dedupeKey": f"k{n}",
            "trackingId": f"t{n}",
            "createdAtMs": at,
            "state": state,
            "answer": given,
            "closed": closed,
            "level": level,
            "targets": [Target(member_id=t).to_wire() for t in targets],
        }
    )


def test_states_ratios_and_the_window() -> None:
    asks = [
        ask(1, state="open"),
        ask(2, state="answered", answer="done"),
        ask(3, state="answered", answer="declined"),
        ask(4, state="closed", closed="expired"),
        ask(5, state="closed", closed="withdrawn"),  # asked nobody's patience: not concluded
        ask(6, state="answered", answer="declined", at=NOW - 10),  # before the window
        ask(7, state="open", at=NOW - 10),  # still waiting: counted whatever its age
        ask(8, state="closed", closed="expired", level=1, targets=("ava",)),  # an escalation
        ask(1, state="open"),  # the same ask read twice counts once
    ]
    found = figures(asks, since_ms=NOW)
    assert found.by_state == {
        "pending": 0,
        "open": 2,
        "snoozed": 0,
        "escalated": 0,
        "answered": 2,
        "closed": 3,
    }
    assert found.seats == {"scout": Tally(concluded=3, unanswered=1, declined=1)}
    assert found.persons == {
        "ben": Tally(concluded=3, unanswered=1, declined=1),
        "ava": Tally(concluded=1, unanswered=1, declined=0),
    }
    assert found.seats["scout"].declined_ratio == 1 / 3
    assert Tally().unanswered_ratio is None  # nothing concluded: no ratio, never 0


def test_labels_are_bounded_to_the_org_and_a_cap() -> None:
    tallies = {
        "ben": Tally(5, 1, 1),
        "ava": Tally(2, 0, 1),
        "gus": Tally(3, 3, 0),
        "stranger": Tally(1, 1, 0),
    }
    kept = bounded(tallies, known={"ben", "ava", "gus"}, cap=2)
    assert kept == {"ben": Tally(5, 1, 1), "gus": Tally(3, 3, 0), OTHER: Tally(3, 1, 1)}
    assert bounded({}, known={"ben"}) == {}
