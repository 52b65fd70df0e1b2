"""The file outbox never leaves half a line: a torn tail is repaired, a short write rolled back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contracts.messages import OutboundAsk
from workers.errors import TransientError
from workers.outbound.base import SendContext
from workers.outbound.file import FileOutbox, read_outbox


def _ask(n: int) -> OutboundAsk:
    return OutboundAsk(
        idempotency_id=f"engage-k-{n}",
        tracking_id=f"t{n}",
        seat_id="scout",
        work_id=f"w{n}",
        attempt=1,
        surface="dm",
        member_ids=("ben",),
        body=f"ask {n}",
    )


def test_torn_tail_from_a_crashed_writer_is_cut_before_the_next_line(tmp_path: Path) -> None:
    """A half-written line left by a crash is removed, so the next ask stays readable."""
    box = FileOutbox(tmp_path / "o.jsonl", fsync=False)
    box.send(_ask(1), SendContext(now_ms=1, since_ms=1))
    with (tmp_path / "o.jsonl").open("ab") as fh:
        fh.write(b'{"idempotencyId": "engage-k-2", "bo')
    assert box.reconcile(_ask(2), SendContext(now_ms=9, since_ms=0)) is None
    box.send(_ask(3), SendContext(now_ms=3, since_ms=3))
    ids = [r["idempotencyId"] for r in read_outbox(tmp_path / "o.jsonl")]
    assert ids == ["engage-k-1", "engage-k-3"]
    assert box.reconcile(_ask(3), SendContext(now_ms=9, since_ms=0)) is not None


def test_short_write_is_rolled_back_and_retryable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that stops halfway raises a transient error and leaves the file as it was."""
    box = FileOutbox(tmp_path / "o.jsonl", fsync=False)
    box.send(_ask(1), SendContext(now_ms=1, since_ms=1))
    before = (tmp_path / "o.jsonl").read_bytes()
    real_write = os.write
    calls = []

    def half_then_fail(fd: int, data: bytes | memoryview) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("workers.outbound.file.os.write", half_then_fail)
    with pytest.raises(TransientError, match="No space left"):
        box.send(_ask(2), SendContext(now_ms=2, since_ms=2))
    monkeypatch.undo()
    assert (tmp_path / "o.jsonl").read_bytes() == before
    box.send(_ask(2), SendContext(now_ms=2, since_ms=2))
    assert [r["idempotencyId"] for r in read_outbox(tmp_path / "o.jsonl")] == [
        "engage-k-1",
        "engage-k-2",
    ]


def test_a_missing_directory_is_made_and_one_that_cannot_be_is_a_transient_error(
    tmp_path: Path,
) -> None:
    """The outbox's directory is made on the first send that finds it missing (an operator
    who removed it loses nothing after); a path that cannot hold it is retried, not lost."""
    box = FileOutbox(tmp_path / "gone" / "deeper" / "o.jsonl", fsync=False)
    box.send(_ask(1), SendContext(now_ms=1, since_ms=1))
    (tmp_path / "gone" / "deeper" / "o.jsonl").unlink()
    (tmp_path / "gone" / "deeper").rmdir()
    box.send(_ask(2), SendContext(now_ms=2, since_ms=2))
    assert [r["idempotencyId"] for r in read_outbox(box.path)] == ["engage-k-2"]
    (tmp_path / "file").write_text("")
    blocked = FileOutbox(tmp_path / "file" / "o.jsonl", fsync=False)
    with pytest.raises(TransientError, match="cannot open outbox"):
        blocked.send(_ask(3), SendContext(now_ms=3, since_ms=3))
