"""`seatwire demo --json` as a newcomer's script would run it: a process with no Seatwire
configuration, its stdout read by a machine. The text view of the same run is tested
in-process (tests/workers/test_demo_run.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.cluster import SEATWIRE

pytestmark = pytest.mark.e2e


def test_demo_json_is_one_document_and_nothing_else(tmp_path: Path) -> None:
    """stdout is one JSON document (no log line, no progress, no markup) holding every
    part's cases and the summary, and the exit status is the summary's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEATWIRE_")}
    done = subprocess.run(
        [SEATWIRE, "demo", "--json"],
        cwd=tmp_path,
        env={**env, "COLUMNS": "80"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)  # the whole of stdout, or this raises
    assert doc["mode"].startswith("embedded")
    assert [s["key"] for s in doc["sections"]] == [
        "work",
        "inbound",
        "steward",
        "controller",
        "tools",
        "asks",
    ]
    cases = [c for s in doc["sections"] for c in s["cases"]]
    assert len(cases) == doc["summary"]["cases"] == 38
    assert all(c["check"]["ok"] for c in cases)
    assert doc["summary"]["checks"] == {"passed": 39, "total": 39}
    assert doc["summary"]["exitCode"] == 0
    assert doc["summary"]["counts"]["work"]["engaged"] == 5
    assert "[" not in doc["sections"][0]["title"]  # no rich markup in the words
