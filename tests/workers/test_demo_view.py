"""The demo's text view at 80 columns and its JSON view: rendered from literal reports, so
each rule is seen on the case that would break it (workers/demo/view.py)."""

from __future__ import annotations

import io
import json

from rich.console import Console

from workers.demo.view import (
    Case,
    Check,
    DemoReport,
    Field,
    Finding,
    NextStep,
    Section,
    TextView,
    render_text,
    wrap,
)

URL = "https://example.com/" + "a-very-long-path/" * 6 + "pr/812"


def unbroken(lines: list[str], width: int = 80) -> list[str]:
    """The lines wider than `width` that are not one token too long for any line, after the
    indentation and a `label:` (what wrapping between words cannot avoid)."""
    return [
        line
        for line in lines
        if len(line) > width and not any(len(token) > width // 2 for token in line.split())
    ]


def case(code: str, *, ok: bool = True, why: tuple[str, ...] = ()) -> Case:
    return Case(
        "blocked on an access grant, asked by DM, in words long enough to need a second line",
        (
            Field("outcome", "outcome", "engaged"),
            Field("reasonCode", "reason code", code),
            Field("targets", "targets (rung)", ("ben (ownership)", "chloe (explicit)") * 4),
        ),
        Check(ok, "engaged, reason code blocked:access"),
        why,
        subject="scout",
    )


def report(*cases: Case, findings: tuple[Finding, ...] = ()) -> DemoReport:
    section = Section(
        key="work",
        label="work reports",
        title="Work reports: every decision, written down",
        intro="Each report posted as its seat to POST /v1/seats/{seat}/work and followed.",
        cases=cases,
        summary=f"{len(cases)} cases",
        counts=(("cases", len(cases)),),
        findings=findings,
        notes=("Against a Redis, `uv run seatwire seat status SEAT` shows each seat.",),
    )
    steps = (
        NextStep(("curl -s -H 'Authorization: Bearer x'", "localhost:8080/v1/seats"), "seats"),
    )
    return DemoReport("embedded", "http://127.0.0.1:1", (section,), steps)


def plain(r: DemoReport, width: int = 80) -> list[str]:
    return [text for text, _style in render_text(r, width)]


def test_wrapping_breaks_between_words_only() -> None:
    """A word longer than the line stands alone past the edge; nothing is ever cut."""
    text = f"see {URL} for the review_required:security reason, self_serve_available too"
    lines = wrap(text, 40, "  - ", "    ")
    assert " ".join(line.strip(" -") for line in lines) == text
    assert any(line.strip() == URL for line in lines)
    assert all(len(line) <= 40 for line in lines if URL not in line)


def test_every_identifier_stays_whole_at_80_columns() -> None:
    """Reason codes, targets and a URL in a `why` line: each appears whole on one line, and
    only the URL's line runs past 80 columns."""
    codes = ("consent_required:irreversible+external", "self_serve_available", "blocked:access")
    why = (f"the review is at {URL}", "trigger blocked_on_other did not fire: " + "x " * 50)
    lines = plain(report(*(case(code, why=why) for code in codes)))
    for code in codes:
        assert any(f"reason code:    {code}" in line for line in lines), code
    assert sum(line.count("ben (ownership)") for line in lines) == 3 * 4
    assert unbroken(lines) == []
    assert [line for line in lines if len(line) > 80] == [f"        {URL}"] * 3


def test_narrower_consoles_wrap_narrower_and_wide_ones_stop_at_80() -> None:
    """The view wraps at the console's width up to 80, and rich neither folds nor crops."""
    for width, limit in ((60, 60), (200, 80)):
        out = io.StringIO()
        view = TextView(Console(file=out, width=width))
        r = report(case("self_serve_available"))
        view.header(r.mode, r.ingress)
        for section in r.sections:
            view.section(section)
        view.summary(r)
        lines = out.getvalue().splitlines()
        assert max(len(line) for line in lines) <= limit
        assert lines == plain(r, limit)
        assert "\x1b[" not in out.getvalue()  # not a terminal: no colour codes


def test_a_quoted_command_and_a_route_are_kept_on_one_line() -> None:
    """`uv run seatwire seat status SEAT` and `POST /v1/seats/{seat}/work` are never split,
    so they can be copied whole; a long command is continued with a backslash."""
    lines = plain(report(case("blocked:access")))
    assert any("`uv run seatwire seat status SEAT`" in line for line in lines)
    assert any("POST /v1/seats/{seat}/work" in line for line in lines)
    assert "    curl -s -H 'Authorization: Bearer x' \\" in lines
    assert "      localhost:8080/v1/seats" in lines


def test_a_check_says_what_it_expected_and_the_summary_counts_it() -> None:
    """A failed case says NOT as expected with what was expected; a failed finding counts
    too; the summary and the exit status follow from both."""
    bad = Finding("The outbox holds 6 asks", Check(False, "exactly the 5 engaged asks"))
    r = report(case("blocked:access"), case("blocked:decision", ok=False), findings=(bad,))
    lines = plain(r)
    assert "    check:          as expected" in lines
    assert "    check:          NOT as expected: expected engaged, reason code" in lines
    assert "                    blocked:access" in lines
    assert "The outbox holds 6 asks: NOT as expected: expected exactly the 5 engaged asks" in lines
    assert any("1 of 3 as expected; the demo exits with status 1" in line for line in lines)
    assert r.exit_code == 1
    assert report(case("blocked:access")).exit_code == 0


def test_the_json_view_is_the_text_views_report() -> None:
    """Every case of the JSON document carries the fields, why lines and check the text
    shows, and its summary is the text's summary."""
    r = report(case("blocked:access", why=("ben (ownership): owns it",)), case("unroutable"))
    doc = json.loads(json.dumps(r.json()))
    text = "\n".join(plain(r))
    cases = doc["sections"][0]["cases"]
    assert [c["reasonCode"] for c in cases] == ["blocked:access", "unroutable"]
    assert cases[0]["targets"][:2] == ["ben (ownership)", "chloe (explicit)"]
    assert cases[0]["why"] == ["ben (ownership): owns it"]
    assert cases[0]["check"] == {
        "ok": True,
        "expected": "engaged, reason code blocked:access",
        "words": "as expected",
    }
    assert doc["summary"]["checks"] == {"passed": 2, "total": 2}
    assert doc["summary"]["exitCode"] == 0
    for line in doc["summary"]["lines"].values():
        assert " ".join(line.split()) in " ".join(text.split())
    assert doc["next"][0]["command"].startswith("curl -s")
