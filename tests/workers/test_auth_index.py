"""Token look-up at any size of org (issue 27): an embedded seat's development token is found
in an index built once per org version, not by hashing every seat's token per request; the
answer is the same as before for every seat and every wrong token, and a changed org file
is indexed again."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import fakeredis
import pytest

from workers.ingress import auth as auth_module
from workers.ingress.auth import OPERATOR, Authenticator
from workers.org import OrgSource
from workers.settings import EMBEDDED_TOKEN, Settings
from workers.stores.tokens import Tokens, dev_token


def _write_org(path: Path, seats: list[str], *, bump: int = 0) -> Path:
    members: list[dict[str, Any]] = [{"id": "ops", "displayName": "Ops"}]
    members += [
        {"id": s, "displayName": f"Seat {s}", "aliases": [f"{s}@example.com"]} for s in seats
    ]
    entries = [{"memberId": s, "operatorId": "ops"} for s in seats]
    path.write_text(json.dumps({"members": members, "seats": entries}))
    stamp = time.time() + bump  # a distinct mtime, whatever the file system's resolution
    os.utime(path, (stamp, stamp))
    return path


def _auth(path: Path, *, embedded: bool = True, **extra: Any) -> Authenticator:
    settings = Settings(outbox_path=path.parent / "o.jsonl", org_file=path, **extra)
    assert settings.embedded is embedded
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    return Authenticator(settings, Tokens(client), OrgSource.open(path))


def _seats(n: int) -> list[str]:
    return [f"seat{i:04d}" for i in range(n)]


def test_every_seats_dev_token_is_that_seat_and_nothing_else_passes(tmp_path: Path) -> None:
    seats = _seats(300)
    auth = _auth(_write_org(tmp_path / "org.json", seats))
    for seat in seats:
        found = auth.fast(dev_token(EMBEDDED_TOKEN, seat))
        assert found is not None and found.role == "seat"
        assert found.seat is not None and found.seat.member_id == seat
    assert auth.fast(EMBEDDED_TOKEN) == OPERATOR
    good = dev_token(EMBEDDED_TOKEN, seats[7])
    wrong = [
        dev_token("another-key", seats[7]),  # another deployment's
        dev_token(EMBEDDED_TOKEN, "not-a-seat"),
        good[:-1],
        good[:-1] + ("0" if good[-1] != "0" else "1"),
        good + "0",
        good.upper(),
        "",
        "swdev_",
    ]
    for token in wrong:
        assert auth.fast(token) is None, token


def test_the_index_is_built_once_per_org_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seats' tokens are derived once for an org version, whatever the number of
    requests; a changed org file is indexed again: a new seat is let in, a removed one not."""
    derived: list[str] = []

    def counting(key: str, seat_id: str) -> str:
        derived.append(seat_id)
        return dev_token(key, seat_id)

    monkeypatch.setattr(auth_module, "dev_token", counting)
    path = _write_org(tmp_path / "org.json", _seats(50))
    auth = _auth(path)
    for _ in range(20):
        for seat in ("seat0000", "seat0049"):
            assert auth.fast(dev_token(EMBEDDED_TOKEN, seat)) is not None
        assert auth.fast("wrong") is None
    assert len(derived) == 50
    _write_org(path, [*_seats(49), "newcomer"], bump=5)
    assert auth.fast(dev_token(EMBEDDED_TOKEN, "newcomer")) is not None
    assert auth.fast(dev_token(EMBEDDED_TOKEN, "seat0049")) is None
    assert auth.fast(dev_token(EMBEDDED_TOKEN, "seat0048")) is not None
    assert len(derived) == 100


def test_outside_embedded_mode_no_dev_token_passes(tmp_path: Path) -> None:
    path = _write_org(tmp_path / "org.json", _seats(3))
    auth = _auth(path, embedded=False, redis_url="redis://127.0.0.1:1/0", api_token="op-token")
    assert auth.dev_tokens() is None
    assert auth.fast(dev_token(EMBEDDED_TOKEN, "seat0001")) is None
    assert auth.fast(dev_token("op-token", "seat0001")) is None
    assert auth.fast("op-token") == OPERATOR


def test_a_store_token_is_its_seat_and_a_seat_gone_from_the_org_is_nobody(
    tmp_path: Path,
) -> None:
    path = _write_org(tmp_path / "org.json", _seats(5))
    auth = _auth(path)
    token, _ = auth.tokens.issue("seat", seat_id="seat0003", label="t", now_ms=1)
    gone, _ = auth.tokens.issue("seat", seat_id="seat0004", label="t", now_ms=1)
    found = auth.caller(token)
    assert found is not None and found.seat is not None and found.seat.member_id == "seat0003"
    assert auth.caller(token + "x") is None
    _write_org(path, _seats(4), bump=5)
    assert auth.caller(gone) is None
