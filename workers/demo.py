"""`seatwire demo`: the bundled scenario pushed over HTTP through a running Seatwire, then a
table of every decision and the outbox, checked against what each case must end as."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from rich.console import Console
from rich.table import Table

from workers.embedded import EmbeddedSystem, free_port
from workers.outbox import read_outbox
from workers.settings import REPO_ROOT, Settings

SCENARIO = REPO_ROOT / "examples" / "scenario.yaml"
FINAL = {"engaged", "nobody", "refused", "send_failed", "send_blocked", "failed"}


def _wait_final(http: httpx.Client, tracking_id: str, timeout_s: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        body: dict[str, Any] = http.get(f"/v1/work/{tracking_id}").raise_for_status().json()
        if body["state"] in FINAL:
            return body
        if time.monotonic() > deadline:
            raise TimeoutError(f"{tracking_id} still {body['state']} after {timeout_s} s")
        time.sleep(0.01)


def _steps(scenario: list[dict[str, Any]], suffix: str) -> list[dict[str, Any]]:
    """Resolve `repeat` (post an earlier report again) and `revise` (a later revision of it)."""
    steps = []
    for step in scenario:
        step = copy.deepcopy(step)
        if "repeat" in step:
            step["report"] = steps[step["repeat"]]["report"]
            step["expect"] = {"duplicate": True}
        elif "revise" in step:
            earlier = copy.deepcopy(steps[step["revise"]]["report"])
            earlier["revision"] = earlier.get("revision", 1) + 1
            step["report"] = earlier
        else:
            step["report"]["id"] += suffix
        steps.append(step)
    return steps


def run_demo(settings: Settings, console: Console) -> int:
    outbox = Path(".seatwire/demo/outbox.jsonl")
    outbox.parent.mkdir(parents=True, exist_ok=True)
    outbox.unlink(missing_ok=True)
    settings = settings.model_copy(update={"outbox_path": outbox, "outbox_fsync": False})
    # On a real, shared Redis the ledger outlives this run: give the work ids a fresh suffix.
    suffix = "" if settings.embedded else f"-{int(time.time())}"
    system = EmbeddedSystem(settings)
    api = system.start()
    base = system.serve_in_background(api, "127.0.0.1", free_port())
    mode = (
        "embedded (in-process Redis stand-in, in-memory broker)"
        if settings.embedded
        else f"Redis at {settings.redis_url}"
    )
    console.print(f"[bold]Seatwire demo[/bold] — {mode}; ingress on {base}")
    steps = _steps(yaml.safe_load(SCENARIO.read_text()), suffix)
    results = []
    try:
        with httpx.Client(
            base_url=base, timeout=10, headers={"Authorization": f"Bearer {settings.token()}"}
        ) as http:
            for step in steps:
                resp = http.post(f"/v1/seats/{step['seat']}/work", json=step["report"])
                if resp.status_code != 202:
                    raise RuntimeError(f"{step['name']}: HTTP {resp.status_code} {resp.text}")
                posted = resp.json()
                final = _wait_final(http, posted["trackingId"])
                results.append((step, posted, final))
    finally:
        system.stop()

    table = Table(title="Every decision, written down", show_lines=True)
    for col in (
        "#",
        "case",
        "seat",
        "outcome",
        "trigger",
        "reason code",
        "targets (rung)",
        "surface",
        "check",
    ):
        table.add_column(col, overflow="fold")
    failures = 0
    engaged_ids = set()
    for i, (step, posted, final) in enumerate(results, 1):
        d = final.get("decision") or {}
        outcome = (
            "duplicate (no-op)"
            if posted["status"] == "duplicate"
            else ("ENGAGED" if final["state"] == "engaged" else f"nobody ({final['state']})")
        )
        if final["state"] == "engaged" and posted["status"] != "duplicate":
            engaged_ids.add(final["send"]["idempotencyId"])
        ok = _check(step.get("expect", {}), posted, final)
        failures += 0 if ok else 1
        table.add_row(
            str(i),
            step["name"],
            step["seat"],
            outcome,
            d.get("trigger") or "-",
            d.get("reasonCode") or "-",
            ", ".join(f"{t['memberId']} ({t['rung']})" for t in d.get("targets", [])) or "-",
            d.get("surface") or "-",
            "[green]ok[/green]" if ok else "[red]UNEXPECTED[/red]",
        )
    console.print(table)

    lines = read_outbox(outbox)
    console.print(f"\n[bold]Outbox[/bold] {outbox} — {len(lines)} ask(s)")
    for rec in lines:
        console.rule(f"{rec['idempotencyId']} -> {rec['channelId']} ({rec['surface']})")
        console.print(str(rec["body"]), markup=False)
    outbox_ids = {str(rec["idempotencyId"]) for rec in lines}
    if outbox_ids != engaged_ids or len(lines) != len(outbox_ids):
        failures += 1
        console.print(
            f"[red]outbox does not hold exactly the engaged asks[/red]: "
            f"{json.dumps(sorted(outbox_ids))} vs {json.dumps(sorted(engaged_ids))}"
        )
    else:
        console.print(
            f"\n[green]The outbox holds exactly the {len(engaged_ids)} engaged asks, "
            "once each.[/green]"
        )
    return 1 if failures else 0


def _check(expect: dict[str, Any], posted: dict[str, Any], final: dict[str, Any]) -> bool:
    if expect.get("duplicate"):
        return bool(posted["status"] == "duplicate")
    d = final.get("decision") or {}
    engaged = final["state"] == "engaged"
    return all(
        [
            expect.get("engaged", engaged) == engaged,
            expect.get("reasonCode", d.get("reasonCode")) == d.get("reasonCode"),
            expect.get("surface", d.get("surface")) == d.get("surface"),
        ]
    )
