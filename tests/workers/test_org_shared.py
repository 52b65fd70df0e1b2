"""The org loaded once per version and shared (issue 27): the same bytes are never loaded twice
in a process, a process forked after the load finds it loaded, a prefork worker's main process
loads it before its pool forks and looks at the file again on its timer, and a changed file is
still picked up (a bad one keeps the last good org, degraded, and is not parsed again until it
changes). Loads are counted, not timed."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.concurrency.solo import TaskPool as SoloPool

import workers.org as org_module
from workers.celery_app import ORG_RECHECK_S, create_app
from workers.org import OrgSource, OrgView, learn_slack_identity, shared_view
from workers.settings import Settings


def _write(path: Path, seats: int, *, name: str = "Seat", bump: float = 0) -> Path:
    members = [{"id": f"s{i}", "displayName": f"{name} {i}"} for i in range(seats)]
    entries = [{"memberId": f"s{i}", "aliases": [f"U0S{i:05d}"]} for i in range(seats)]
    path.write_text(json.dumps({"members": members, "seats": entries}))
    stamp = time.time() + bump  # a distinct mtime, whatever the file system's resolution
    os.utime(path, (stamp, stamp))
    return path


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a view is built from the file (`OrgView.of` of a parsed org)."""
    counted: list[int] = []
    parse = org_module.parse_org

    def counting(text: str, path: Path) -> Any:
        counted.append(1)
        return parse(text, path)

    monkeypatch.setattr(org_module, "parse_org", counting)
    return counted


def test_the_same_bytes_are_loaded_once_per_process(tmp_path: Path, builds: list[int]) -> None:
    path = _write(tmp_path / "org.json", 5)
    first = OrgSource.open(path)
    second = OrgSource.open(path)
    assert builds == [1]
    assert first.current()[0] is second.current()[0] is shared_view(path)
    _write(path, 5, bump=3)  # rewritten with the same bytes: a new mtime, the same version
    assert first.current()[0] is second.current()[0]
    assert builds == [1]


def test_a_changed_file_is_picked_up_once(tmp_path: Path, builds: list[int]) -> None:
    path = _write(tmp_path / "org.json", 5)
    source, other = OrgSource.open(path), OrgSource.open(path)
    _write(path, 6, name="Agent", bump=3)
    view, degraded = source.current()
    assert degraded == [] and len(view.org.seats) == 6
    assert view.member_by_id["s5"].display_name == "Agent 5"
    assert other.current()[0] is view
    assert builds == [1, 1]


def test_a_bad_file_keeps_the_last_org_and_is_parsed_once_until_it_changes(
    tmp_path: Path, builds: list[int]
) -> None:
    path = _write(tmp_path / "org.json", 5)
    source = OrgSource.open(path)
    good = source.current()[0]
    path.write_text('{"members": [')
    os.utime(path, (time.time() + 3, time.time() + 3))
    for _ in range(5):
        view, degraded = source.current()
        assert view is good and degraded and degraded[0].startswith("directory_read_failed")
    assert builds == [1, 1]
    _write(path, 7, bump=6)
    view, degraded = source.current()
    assert degraded == [] and len(view.org.seats) == 7


def test_a_missing_file_is_degraded_and_found_again(tmp_path: Path) -> None:
    path = _write(tmp_path / "org.json", 5)
    source = OrgSource.open(path)
    moved = path.rename(tmp_path / "aside.json")
    view, degraded = source.current()
    assert len(view.org.seats) == 5 and degraded[0].startswith("directory_read_failed")
    moved.rename(path)
    assert source.current()[1] == []


def test_a_process_forked_after_the_load_finds_it_loaded(tmp_path: Path) -> None:
    """What a prefork pool process does at start: open the org file its parent loaded. With
    the loader broken in the child, the open can only succeed by finding it loaded."""
    path = _write(tmp_path / "org.json", 50)
    loaded = shared_view(path)
    pid = os.fork()
    if pid == 0:  # the child: report by exit code only, never return into pytest
        code = 1
        try:

            def broken(*_: Any, **__: Any) -> Any:
                raise AssertionError("loaded again")

            org_module.parse_org = broken
            source = OrgSource.open(path)
            code = 0 if source.current()[0] is loaded and len(loaded.org.seats) == 50 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


class FakeTimer:
    def __init__(self) -> None:
        self.calls: list[tuple[float, Any]] = []
        self.cancelled = False

    def call_repeatedly(self, secs: float, fun: Any) -> Any:
        self.calls.append((secs, fun))
        return self

    def cancel(self) -> None:
        self.cancelled = True


class FakeWorker:
    def __init__(self, app: Any, pool_cls: Any) -> None:
        self.app = app
        self.pool_cls = pool_cls
        self.timer = FakeTimer()
        self.steps: list[Any] = []


def _shared_step(app: Any) -> Any:
    found = [s for s in app.steps["worker"] if getattr(s, "__name__", "") == "SharedOrg"]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize(("pool", "rechecks"), [(PreforkPool, True), (SoloPool, False)])
def test_a_workers_main_process_loads_the_org_before_its_pool_and_rechecks_it(
    tmp_path: Path, builds: list[int], pool: Any, rechecks: bool
) -> None:
    path = _write(tmp_path / "org.json", 8)
    settings = Settings(outbox_path=tmp_path / "o.jsonl", org_file=path)
    app = create_app(settings)
    worker = FakeWorker(app, pool)
    step = _shared_step(app)(worker)
    step.create(worker)
    assert builds == [1]
    OrgSource.open(path)  # a pool process's container: found loaded
    assert builds == [1]
    step.start(worker)
    if not rechecks:
        assert worker.timer.calls == []
        return
    [(secs, recheck)] = worker.timer.calls
    assert secs == ORG_RECHECK_S
    _write(path, 9, bump=3)
    recheck()  # the timer fires: the changed file is loaded in the main process
    assert builds == [1, 1]
    assert len(OrgSource.open(path).current()[0].org.seats) == 9
    assert builds == [1, 1]
    step.stop(worker)
    assert worker.timer.cancelled


def test_a_bad_org_at_the_workers_start_is_left_to_the_pool_processes(tmp_path: Path) -> None:
    path = tmp_path / "org.json"
    path.write_text("{}")
    settings = Settings(outbox_path=tmp_path / "o.jsonl", org_file=_write(path, 1))
    app = create_app(settings)
    path.write_text('{"members": [')
    worker = FakeWorker(app, PreforkPool)
    step = _shared_step(app)(worker)
    step.create(worker)  # logged, not raised
    step.start(worker)
    assert worker.timer.calls == []


def test_identities_learned_for_every_seat_build_no_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Slack app that posts for every seat: each seat's own identities, one build."""
    path = _write(tmp_path / "org.json", 40)
    source = OrgSource.open(path)
    built: list[int] = []
    of = OrgView.of

    def counting(*args: Any, **kwargs: Any) -> OrgView:
        built.append(1)
        return of(*args, **kwargs)

    monkeypatch.setattr(OrgView, "of", counting)
    learn_slack_identity(source, {"user_id": "U0SHARED", "bot_id": "B0SHARED"})
    assert built == []
    view = source.current()[0]
    assert all(s.own >= {"u0shared", "b0shared"} for s in view.roster.seats)


def _same_roster(a: OrgView, b: OrgView) -> None:
    assert a.roster == b.roster
    assert a.seats == b.seats and a.learned == b.learned
    assert a.snapshot == b.snapshot


def test_learned_identities_change_only_their_seats_as_a_full_build_would(
    tmp_path: Path,
) -> None:
    """`with_learned` from any learned set to any other is `OrgView.of` with the second: a
    seat's bot, a bot every seat shares, an identity that is also another seat's alias, one
    taken away again."""
    path = _write(tmp_path / "org.json", 30)
    base = shared_view(path)
    steps: list[dict[str, tuple[str, ...]]] = [
        {"s3": ("B0THREE",)},
        {"s3": ("B0THREE", "U0S00007")},  # another seat's alias: both answer to it now
        {f"s{i}": ("U0SHARED", "B0SHARED") for i in range(30)},
        {"s3": ("B0THREE",), "s4": ("", "B0FOUR")},
        {},
    ]
    view = base
    for learned in steps:
        view = view.with_learned(learned)
        _same_roster(view, OrgView.of(base.org, learned, directory=base.directory))
    assert base.with_learned({}).roster is base.roster


def test_a_pool_process_learning_its_bot_does_not_build_the_org_again(
    tmp_path: Path, builds: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "org.json", 30)
    source = OrgSource.open(path)
    built: list[int] = []
    of = OrgView.of

    def counting(*args: Any, **kwargs: Any) -> OrgView:
        built.append(1)
        return of(*args, **kwargs)

    monkeypatch.setattr(OrgView, "of", counting)
    learn_slack_identity(source, {"user_id": "U0S00004", "bot_id": "B0FOUR"})
    view = source.current()[0]
    assert built == [] and builds == [1]
    assert view.roster.seats[4].own == {"b0four"}
    _write(path, 31, bump=3)  # a new version keeps what was learned
    view = source.current()[0]
    assert len(view.org.seats) == 31 and view.roster.seats[4].own == {"b0four"}
    assert built == [1] and builds == [1, 1]  # the new version, built once, learned on top
