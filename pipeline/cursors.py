"""The opaque paging cursor every tool hands out (a JSON value, compact, in URL-safe base64),
and the canonical JSON and digest its inputs are fingerprinted by. Pure.

A tool puts in it whatever scopes and resumes its listing (its filters, the last key read,
who may use it) and checks that on the way back; `unpack` only says whether the text is a
cursor at all (None when it is not), so each tool refuses a wrong one in its own words.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json


def pack(value: object) -> str:
    """`value` (JSON-able) as a cursor."""
    raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def unpack(cursor: str) -> object | None:
    """The value a cursor holds; None for text that is not one."""
    try:
        raw = base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode())
        value: object = json.loads(raw)
    except (ValueError, binascii.Error):
        return None
    return value


def canonical(value: object) -> str:
    """`value` as canonical JSON: sorted keys, no blanks, UTF-8 kept. Equal values, equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(value: object) -> str:
    """The 64 hex digits (SHA-256) of `value`'s canonical JSON: a tool's input fingerprint,
    which tells a replay (the same input under a request id) from another input."""
    return hashlib.sha256(canonical(value).encode()).hexdigest()
