"""`seatwire demo` run once, embedded and in-process: every case of every part ends as
expected, and both views of the run (text at 80 columns, as piped; JSON) show all of it."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from workers.demo import collect_demo
from workers.demo.view import DemoReport, Quiet, TextView
from workers.settings import Settings


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DemoReport, Path]]:
    """One demo run with no configuration, in a fresh directory: its report and outbox."""
    where = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(where)
        yield collect_demo(Settings(), Quiet()), where / ".seatwire/demo/outbox.jsonl"


@pytest.fixture(scope="module")
def text(run: tuple[DemoReport, Path]) -> str:
    """The text view as `seatwire demo | cat` prints it: a console that is not a terminal,
    80 columns wide."""
    report, _ = run
    out = io.StringIO()
    view = TextView(Console(file=out, width=80))
    view.header(report.mode, report.ingress)
    for section in report.sections:
        view.section(section)
    view.summary(report)
    return out.getvalue()


def blocks(text: str) -> list[str]:
    """The text cut into case blocks, each from its numbered heading to its check."""
    return re.findall(r"^ ?\d+\. .*?^    check: .*?$", text, flags=re.M | re.S)


def test_every_case_of_every_part_ends_as_expected(run: tuple[DemoReport, Path]) -> None:
    """No configuration: every check passes, and the outbox holds the scenario's five asks,
    then the steward's two (Ava's HANDOFF, Gus's escalation), then relay's escalation to
    its operator, verdict first; then the answers part's three asks and its escalation (the
    scenario's review, unanswered past the shortened timeout too, may climb as well)."""
    report, outbox = run
    assert report.exit_code == 0
    assert [s.key for s in report.sections] == [
        "work",
        "inbound",
        "steward",
        "controller",
        "tools",
        "asks",
    ]
    assert all(check.ok for check in report.checks)
    work = report.sections[0]
    assert [c.value("reasonCode") for c in work.cases] == [
        "blocked:access",
        "duplicate",
        "consent_required:irreversible",
        "review_required:security",
        "commitment_failed",
        "blocked:decision",
        "self_serve_available",
        "self_contained",
        "unroutable",
        "already_engaged",
    ]
    lines = [json.loads(x) for x in outbox.open()]
    assert sorted(x["memberIds"] for x in lines[5:7]) == [["ava"], ["gus"]]
    assert (lines[7]["seatId"], lines[7]["memberIds"]) == ("relay", ["ava"])
    assert lines[7]["body"].startswith("**3× in a row, identically — retries are not fixing it")
    answers = [x for x in lines[8:] if x["workId"].startswith("demo-")]
    assert [x["memberIds"] for x in answers] == [["ben"], ["ben"], ["jo"]]
    up = [x for x in lines[8:] if x["reasonCode"] == "ask_unanswered"]
    assert ["emil"] in [x["memberIds"] for x in up]


def test_piped_at_80_columns_every_outcome_and_reason_code_is_whole(
    run: tuple[DemoReport, Path], text: str
) -> None:
    """Each case is one block, and its outcome and every reason code stand whole on one
    line; no line is wider than 80 columns; the check is explained once at the top."""
    report, _ = run
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "\x1b[" not in text
    assert 'prints "as expected", or "NOT as expected"' in text
    found = blocks(text)
    cases = [(s.key, c) for s in report.sections for c in s.cases]
    assert len(found) == len(cases) == 38
    for block, (part, case) in zip(found, cases, strict=True):
        rows = block.splitlines()
        assert " ".join(case.heading.split()) in " ".join(block.split()), case.heading
        outcome = str(case.value("outcome"))
        assert any(re.fullmatch(rf" +outcome: +{re.escape(outcome)}", row) for row in rows)
        codes = case.value("reasonCode") or case.value("reasonCodes")
        if codes is None:  # a tool call that succeeded has no reason code to give
            assert part == "tools", case.heading
            continue
        for code in codes if isinstance(codes, tuple) else (codes,):
            assert any(re.search(rf"(?<!\S){re.escape(str(code))}(,|$)", row) for row in rows)
        assert rows[-1].split(":", 1)[1].strip() == "as expected"


def test_the_summary_counts_every_part_and_says_what_to_try_next(text: str) -> None:
    """The run ends with a summary of each part and the checks, then commands that exist."""
    summary = " ".join(text[text.index("\nSummary\n") :].split())
    for expected in (
        "work reports: 10 cases: 5 engaged, 3 nobody, 1 refused by a guardrail "
        "(already_engaged), 1 duplicate (no-op)",
        "inbound events: 13 events in 15 deliveries: 6 reached a seat, 4 ambient for every "
        "seat, 2 skipped, 1 duplicate",
        "goal steward: 4 objectives: 3 candidates admitted and 7 rejected over two runs",
        "work controller: 3 seats, by reason code: scout notices, tally idle, relay failure_limit",
        "checks: 39 of 39 as expected; the demo exits with status 0",
        "Next, try: uv run seatwire demo --json",
        "uv run seatwire up",
    ):
        assert expected in summary, expected
    assert "acknowledge with position" not in text


def test_the_json_view_agrees_with_the_text_view(run: tuple[DemoReport, Path], text: str) -> None:
    """The JSON document has every case the text shows, with the same outcome, reason codes,
    why lines and check, and the same summary."""
    report, _ = run
    doc: dict[str, Any] = json.loads(json.dumps(report.json()))
    flat = " ".join(text.split())
    cases = [c for s in doc["sections"] for c in s["cases"]]
    assert len(cases) == len(blocks(text))
    for case, block in zip(cases, blocks(text), strict=True):
        said = " ".join(block.split())
        assert said.split(". ", 1)[1].startswith(
            " ".join(f"{case['subject']}: {case['title']}".lstrip(": ").split())
        )
        assert f"outcome: {case['outcome']}" in said
        codes = case.get("reasonCode") or case.get("reasonCodes") or []
        for code in codes if isinstance(codes, list) else [codes]:
            assert code in said
        for why in case["why"]:
            assert " ".join(why.split()) in said
        assert said.endswith(f"check: {case['check']['words']}")
    for line in doc["summary"]["lines"].values():
        assert " ".join(line.split()) in flat
    assert doc["summary"]["checks"] == {"passed": 39, "total": 39}
    assert doc["summary"]["exitCode"] == 0
