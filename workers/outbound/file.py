"""The `file` outbound adapter: asks appended to a JSONL outbox (the embedded default).

Exactly-once is the send stage's job (intent recorded before the write, reconciliation after
a crash); this adapter supplies the two primitives it needs: `send` and `reconcile`, which
looks for a line carrying the idempotency id. Lines are written under an exclusive `flock`
so several worker processes can share one outbox without interleaving.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from pathlib import Path

from contracts.asks import Ask
from contracts.messages import OutboundAsk, SendResult
from workers.errors import ConfigError, TransientError
from workers.outbound.base import SendContext

_SLUG = re.compile(r"[^a-z0-9]+")


def _room_slug(ask: OutboundAsk) -> str:
    base = _SLUG.sub("-", (ask.room_name or ask.work_id).lower()).strip("-")[:60] or "ask"
    return f"room:{base}-{ask.idempotency_id[-8:]}"


def channel_for(ask: OutboundAsk) -> tuple[str, bool]:
    """The channel an ask lands in on a file outbox, and whether a room was created for it."""
    if ask.surface == "dm":
        return f"dm:{ask.member_ids[0]}", False
    if ask.surface == "new_room":
        return _room_slug(ask), True
    if ask.channel_id:
        return ask.channel_id, False
    raise ValueError(f"surface {ask.surface} needs a channel id")


class FileOutbox:
    name = "file"

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self.path = path
        self.fsync = fsync

    def check(self) -> str:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
        except OSError as exc:
            raise ConfigError(f"cannot write the outbox {self.path}: {exc}") from exc
        return f"file outbox {self.path}"

    def send(self, ask: OutboundAsk, ctx: SendContext) -> SendResult:
        channel_id, created = channel_for(ask)
        result = SendResult(
            channel_id=channel_id, message_id=f"file:{ask.idempotency_id}", room_created=created
        )
        line = json.dumps(
            {
                "atMs": ctx.now_ms,
                **ask.to_wire(),
                "channelId": channel_id,
                "messageId": result.message_id,
                "roomCreated": created,
            },
            ensure_ascii=False,
        )
        data = (line + "\n").encode()
        try:
            fd = self._open()
        except OSError as exc:
            raise TransientError(f"cannot open outbox {self.path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            start = _repair_torn_tail(fd)
            try:
                _write_all(fd, data)
                if self.fsync:
                    os.fsync(fd)
            except OSError as exc:
                # Never leave half a line: the next append would be glued onto it and both
                # asks would be unreadable to reconciliation.
                os.ftruncate(fd, start)
                raise TransientError(f"cannot append to outbox {self.path}: {exc}") from exc
        finally:
            os.close(fd)  # closing releases the lock
        return result

    def _open(self) -> int:
        """The outbox for appending, its directory made first if it is missing (only then: a
        send pays no mkdir for a directory that is there)."""
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT
        try:
            return os.open(self.path, flags, 0o644)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, flags, 0o644)

    def show_answer(self, ask: Ask) -> bool:
        """An ask once written here is not changed: its answer lives in the ask record."""
        return False

    def reconcile(self, ask: OutboundAsk, ctx: SendContext) -> SendResult | None:
        """The earlier write of this ask, if it reached the outbox."""
        for record in read_outbox(self.path):
            if record.get("idempotencyId") == ask.idempotency_id:
                return SendResult(
                    channel_id=record["channelId"],
                    message_id=record["messageId"],
                    room_created=bool(record.get("roomCreated")),
                )
        return None


def _repair_torn_tail(fd: int) -> int:
    """Cut a line a crashed writer left unfinished (it was never readable, so never sent);
    returns the offset the next line starts at. Called under the exclusive lock."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    chunk = 4096
    end = size
    while end > 0:
        begin = max(0, end - chunk)
        newline = os.pread(fd, end - begin, begin).rfind(b"\n")
        if newline >= 0:
            keep = begin + newline + 1
            os.ftruncate(fd, keep)
            return keep
        end = begin
    os.ftruncate(fd, 0)
    return 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError("short write to the outbox")
        view = view[written:]


def read_outbox(path: Path) -> list[dict[str, object]]:
    """Every complete line of an outbox; a torn last line (a crash mid-write) is skipped."""
    if not path.exists():
        return []
    records = []
    with path.open("rb") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
        for raw in fh:
            if not raw.endswith(b"\n"):
                break
            try:
                records.append(json.loads(raw))
            except json.JSONDecodeError:
                continue
    return records
