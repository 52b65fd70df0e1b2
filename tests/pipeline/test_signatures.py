"""Webhook signatures (fault test 27, docs/reliability.md): the right ones pass; every malformed,
stale or forged one is refused with a reason and never raises."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.signatures import Refused, Verified, verify_github, verify_slack

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW = 1_800_000_000
BODY = b'{"type":"event_callback","event_id":"Ev1"}'


def slack_headers(body: bytes = BODY, ts: int | str = NOW, secret: str = SECRET) -> dict[str, str]:
    base = f"v0:{ts}:".encode() + body
    sig = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": sig}


def github_headers(body: bytes = BODY, secret: str = SECRET) -> dict[str, str]:
    return {
        "X-Hub-Signature-256": "sha256="
        + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    }


def test_slack_request_signed_as_slack_signs_is_verified() -> None:
    """A correctly signed, current Slack request passes; header names are case-insensitive."""
    assert verify_slack(slack_headers(), BODY, secret=SECRET, now_s=NOW) == Verified()
    lowered = {k.lower(): v for k, v in slack_headers().items()}
    assert verify_slack(lowered, BODY, secret=SECRET, now_s=NOW).ok


@pytest.mark.parametrize(
    ("offset", "ok"), [(299, True), (300, True), (301, False), (-299, True), (-301, False)]
)
def test_slack_timestamp_tolerance_is_five_minutes_either_way(offset: int, ok: bool) -> None:
    """A timestamp more than 300 s from now, in either direction, is stale."""
    got = verify_slack(slack_headers(ts=NOW + offset), BODY, secret=SECRET, now_s=NOW)
    assert got.ok is ok
    if not ok:
        assert isinstance(got, Refused) and got.reason == "stale_timestamp"


def _with(headers: dict[str, str], **changes: str | None) -> dict[str, str]:
    out = dict(headers)
    for k, v in changes.items():
        name = k.replace("_", "-")
        if v is None:
            out.pop(name, None)
        else:
            out[name] = v
    return out


GOOD = slack_headers()
SIG = GOOD["X-Slack-Signature"]


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        (_with(GOOD, X_Slack_Signature=None), "missing_signature"),
        (_with(GOOD, X_Slack_Request_Timestamp=None), "missing_signature"),
        (_with(GOOD, X_Slack_Request_Timestamp="abc"), "bad_timestamp"),
        (_with(GOOD, X_Slack_Request_Timestamp=""), "bad_timestamp"),
        (_with(GOOD, X_Slack_Request_Timestamp="1e9"), "bad_timestamp"),
        (_with(GOOD, X_Slack_Request_Timestamp="-1"), "bad_timestamp"),
        (_with(GOOD, X_Slack_Request_Timestamp="1" * 30), "bad_timestamp"),
        (_with(GOOD, X_Slack_Request_Timestamp=f"{NOW}.5"), "bad_timestamp"),
        (_with(GOOD, X_Slack_Signature="v1=" + SIG[3:]), "bad_signature"),
        (_with(GOOD, X_Slack_Signature="v0=" + SIG[3:].upper()), "bad_signature"),
        (_with(GOOD, X_Slack_Signature="v0=" + SIG[3:-1]), "bad_signature"),
        (_with(GOOD, X_Slack_Signature="v0=" + "0" * 64), "bad_signature"),
        (_with(GOOD, X_Slack_Signature="garbage"), "bad_signature"),
        ({**GOOD, "x-slack-signature": "v0=" + "1" * 64}, "missing_signature"),  # duplicated
    ],
)
def test_malformed_or_forged_slack_headers_are_refused_with_a_reason(
    headers: dict[str, str], reason: str
) -> None:
    """Each bad header is a refusal naming why, not an exception."""
    got = verify_slack(headers, BODY, secret=SECRET, now_s=NOW)
    assert isinstance(got, Refused) and got.reason == reason and got.detail


def test_slack_signature_over_a_different_body_is_refused() -> None:
    """A signature over re-serialised JSON does not verify the raw body."""
    other = b'{"event_id": "Ev1", "type": "event_callback"}'
    got = verify_slack(slack_headers(body=other), BODY, secret=SECRET, now_s=NOW)
    assert isinstance(got, Refused) and got.reason == "bad_signature"


@pytest.mark.parametrize("secret", ["", "   ", None])
def test_empty_secret_is_a_configuration_error(secret: str | None) -> None:
    """An empty signing secret is refused outright: it would check against nothing."""
    with pytest.raises(ValueError, match="empty"):
        verify_slack(GOOD, BODY, secret=secret, now_s=NOW)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        verify_github(github_headers(), BODY, secret=secret)  # type: ignore[arg-type]


def test_github_sha256_signature_is_verified() -> None:
    """A GitHub delivery signed with the webhook secret passes."""
    assert verify_github(github_headers(), BODY, secret=SECRET).ok


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "missing_signature"),
        ({"X-Hub-Signature": "sha1=" + "a" * 40}, "missing_signature"),  # SHA-1 only
        ({"X-Hub-Signature-256": "sha1=" + "a" * 64}, "bad_signature"),
        ({"X-Hub-Signature-256": "sha256=" + "A" * 64}, "bad_signature"),
        ({"X-Hub-Signature-256": "sha256=xyz"}, "bad_signature"),
        ({"X-Hub-Signature-256": "sha256=" + "0" * 64}, "bad_signature"),
        (github_headers(secret="another-secret"), "bad_signature"),
    ],
)
def test_bad_github_signatures_are_refused(headers: dict[str, str], reason: str) -> None:
    """Missing, SHA-1-only, malformed or wrong signatures are refused with a reason."""
    got = verify_github(headers, BODY, secret=SECRET)
    assert isinstance(got, Refused) and got.reason == reason


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "X-Slack-Signature",
                "X-Slack-Request-Timestamp",
                "X-Hub-Signature-256",
                "Content-Type",
            ]
        ),
        st.text(max_size=80),
    ),
    st.binary(max_size=200),
)
def test_arbitrary_headers_never_raise_and_never_verify(
    headers: dict[str, str], body: bytes
) -> None:
    """Fuzzed headers and bodies are refused or (never, without the secret) verified, and no
    input raises."""
    assert not verify_slack(headers, body, secret=SECRET, now_s=NOW).ok
    assert not verify_github(headers, body, secret=SECRET).ok
