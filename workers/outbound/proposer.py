"""The proposer client: asks a configured endpoint (`SEATWIRE_PROPOSER_URL`) for work
candidates for one objective's gap (issue 10 point 2, docs/architecture.md). Not pure: HTTP.

A proposer only proposes. What it returns is a list of `Proposal(source="proposer")` that the
planner (`pipeline.goals.steward.plan_run`) puts through every admission gate after the
playbook, exactly like a playbook template; nothing here admits, dispatches or writes. So:

- it never bypasses a gate: there is no field a proposer can send that skips one;
- it never poses as the playbook: any `source` it sends is overridden to "proposer" (the
  planner lets playbook-tagged proposals stand in for the playbook, which a remote endpoint
  must never be able to do);
- it never raises for anything the endpoint does: an unreachable, slow, redirecting, failing,
  oversized or malformed answer is a `ProposerFailure` with its reason, which the planner
  audits as `proposer_failed` while the playbook is still used; valid candidates of a partly
  bad answer are kept, each bad one is a failure of its own;
- it never follows a redirect, never reads more than `max_body_bytes` of an answer, and never
  keeps more than `max_candidates` of them;
- it never logs, and never puts the URL's credentials or query string in a failure: failures
  name the endpoint as scheme://host[:port]/path only.

The exchange: `POST <url>` with `{objective, gap, nowMs, maxCandidates}` (the contracts' wire
shapes), answered 2xx with `{"candidates": [...]}` or a bare JSON list. Each candidate is a
`WorkCandidate` object, flat or as `{candidate: {...}}`. Failures name a candidate by its
position in the answer's list, counting from 0.

Time: httpx bounds connect, each read and the write by `timeout_s`; the body as a whole must
also arrive within `timeout_s` of sending, so a proposer that trickles cannot hold the run.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx
from pydantic import ValidationError

from contracts.goals import Gap, Objective
from contracts.steward import ObjectiveProposals, Proposal, ProposerFailure
from workers.errors import ConfigError
from workers.settings import Settings

MAX_BODY_BYTES = 256 * 1024
MAX_CANDIDATES = 50
# How many field errors of one invalid candidate the failure spells out.
_MAX_ERRORS_SHOWN = 3


class CandidateProposer(Protocol):
    """What the steward shell asks for candidates; fakes implement the same."""

    def propose(self, objective: Objective, gap: Gap, *, now_ms: int) -> ObjectiveProposals: ...


class Proposer:
    """The HTTP proposer at one URL. `client` is the testing seam (and shares a pool)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        client: httpx.Client | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_candidates: int = MAX_CANDIDATES,
    ) -> None:
        self._url = url.strip()
        self.endpoint = public_endpoint(self._url)
        if not self.endpoint:
            raise ConfigError(
                "SEATWIRE_PROPOSER_URL must be an http:// or https:// URL with a host"
            )
        self.timeout_s = timeout_s
        self.max_body_bytes = max_body_bytes
        self.max_candidates = max_candidates
        self._secrets = _secrets_of(self._url)
        self._owns_client = client is None
        self._client = client or httpx.Client(timeout=timeout_s, follow_redirects=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> Proposer | None:
        """The configured proposer, or None when `SEATWIRE_PROPOSER_URL` is unset."""
        if not settings.proposer_url:
            return None
        return cls(settings.proposer_url, timeout_s=settings.proposer_timeout_s)

    def __repr__(self) -> str:
        return f"Proposer({self.endpoint!r}, timeout_s={self.timeout_s:g})"

    def close(self) -> None:
        """Close the HTTP client if this proposer made it."""
        if self._owns_client:
            self._client.close()

    def propose(self, objective: Objective, gap: Gap, *, now_ms: int) -> ObjectiveProposals:
        """The endpoint's candidates for this gap, and every way its answer failed."""
        body = json.dumps(
            {
                "objective": objective.to_wire(),
                "gap": gap.to_wire(),
                "nowMs": now_ms,
                "maxCandidates": self.max_candidates,
            },
            ensure_ascii=False,
        ).encode()
        raw = self._fetch(body)
        if isinstance(raw, ProposerFailure):
            return ObjectiveProposals(failures=(raw,))
        return self._read(raw)

    def _fail(self, reason: str) -> ProposerFailure:
        return ProposerFailure(reason=_scrub(reason, self._secrets), proposer=self.endpoint)

    def _fetch(self, body: bytes) -> bytes | ProposerFailure:
        """The answer's body, or why there is none to read."""
        started = time.monotonic()
        headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "user-agent": "seatwire-proposer",
        }
        try:
            with self._client.stream(
                "POST",
                self._url,
                content=body,
                headers=headers,
                timeout=self.timeout_s,
                follow_redirects=False,
            ) as response:
                return self._body(response, started)
        except httpx.HTTPError as exc:
            return self._fail(self._transport_reason(exc))
        except httpx.InvalidURL:
            return self._fail("the proposer URL is not a valid URL")

    def _body(self, response: httpx.Response, started: float) -> bytes | ProposerFailure:
        status = response.status_code
        if 300 <= status < 400:
            return self._fail(f"answered HTTP {status}; redirects are not followed")
        if not 200 <= status < 300:
            return self._fail(f"answered HTTP {status}")
        cap = self.max_body_bytes
        too_big = f"answer is larger than {_size(cap)}; stopped reading"
        declared = response.headers.get("content-length", "")
        if declared.strip().isdecimal() and int(declared) > cap:
            return self._fail(f"answer is larger than {_size(cap)} ({declared} bytes declared)")
        data = bytearray()
        for chunk in response.iter_bytes():
            data += chunk
            if len(data) > cap:
                return self._fail(too_big)
            if time.monotonic() - started > self.timeout_s:
                return self._fail(
                    f"answer took longer than {self.timeout_s:g} s in all; stopped reading"
                )
        return bytes(data)

    def _transport_reason(self, exc: httpx.HTTPError) -> str:
        t = f"{self.timeout_s:g} s"
        if isinstance(exc, httpx.ConnectTimeout):
            return f"connect timeout: no connection within {t}"
        if isinstance(exc, httpx.ReadTimeout):
            return f"read timeout: no answer within {t}"
        if isinstance(exc, httpx.WriteTimeout):
            return f"write timeout: the request could not be sent within {t}"
        if isinstance(exc, httpx.TimeoutException):
            return f"timeout after {t} ({type(exc).__name__})"
        if isinstance(exc, httpx.ConnectError):
            return _connect_reason(exc, urlsplit(self._url).hostname or "")
        if isinstance(exc, httpx.DecodingError):
            return "answer could not be decoded (bad content-encoding)"
        return f"transport error: {type(exc).__name__}: {exc}"

    def _read(self, raw: bytes) -> ObjectiveProposals:
        """The candidates of an answer's body; every way it is malformed is a failure."""
        try:
            answer: Any = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            what = "empty" if not raw.strip() else f"not JSON ({_first_line(exc)})"
            return ObjectiveProposals(failures=(self._fail(f"answer is {what}"),))
        items = _items_of(answer)
        if items is None:
            return ObjectiveProposals(
                failures=(
                    self._fail(
                        "answer must be a JSON list of candidates or an object with a "
                        f'"candidates" list; got {_kind(answer)}'
                    ),
                )
            )
        failures: list[ProposerFailure] = []
        if len(items) > self.max_candidates:
            dropped = len(items) - self.max_candidates
            failures.append(
                self._fail(
                    f"sent {len(items)} candidates, more than the {self.max_candidates} "
                    f"allowed; kept the first {self.max_candidates}, dropped {dropped}"
                )
            )
            items = items[: self.max_candidates]
        proposals: list[Proposal] = []
        for index, item in enumerate(items):
            try:
                proposals.append(as_proposal(item))
            except ValidationError as exc:
                failures.append(self._fail(f"candidate {index}: {_summary(exc)}"))
        return ObjectiveProposals(candidates=tuple(proposals), failures=tuple(failures))


def as_proposal(item: object) -> Proposal:
    """One proposer candidate as a Proposal from "proposer", whatever source it claims.

    Raises `ValidationError` when it is not a valid `WorkCandidate`.
    """
    if isinstance(item, Mapping):
        inner = (
            item["candidate"]
            if "candidate" in item
            else {k: v for k, v in item.items() if k != "source"}
        )
    else:
        inner = item
    return Proposal.model_validate({"source": "proposer", "candidate": inner})


def public_endpoint(url: str) -> str:
    """The URL as scheme://host[:port]/path: no credentials, query or fragment. Empty when
    it is not an http(s) URL with a host."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return ""
    if parts.scheme.lower() not in ("http", "https") or not host:
        return ""
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((parts.scheme.lower(), netloc, parts.path, "", ""))


def _secrets_of(url: str) -> tuple[str, ...]:
    """What of the URL must never appear in a failure, longest first."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return (url,)
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    found = {url, userinfo, parts.password or "", parts.query, parts.fragment}
    if userinfo:
        found.add(parts.netloc)
    return tuple(sorted((s for s in found if s), key=len, reverse=True))


def _scrub(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def _connect_reason(exc: BaseException, host: str) -> str:
    """Which way a connection could not be made: DNS, refused, or another OS error."""
    cause: BaseException | None = exc
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, socket.gaierror):
            return f"DNS lookup failed for {host}: {cause.strerror or cause}"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused: nothing is listening there"
        if isinstance(cause, OSError) and cause.strerror:
            return f"cannot connect: {cause.strerror}"
        cause = cause.__cause__ or cause.__context__
    return f"cannot connect: {_first_line(exc) or type(exc).__name__}"


def _items_of(answer: object) -> list[object] | None:
    if isinstance(answer, list):
        return answer
    if isinstance(answer, dict) and isinstance(answer.get("candidates"), list):
        items: list[object] = answer["candidates"]
        return items
    return None


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return 'an object without a "candidates" list'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def _summary(exc: ValidationError) -> str:
    """The field errors of an invalid candidate, without echoing its values."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    shown = []
    for error in errors[:_MAX_ERRORS_SHOWN]:
        loc = [str(p) for p in error["loc"]]
        # Every candidate is validated as Proposal.candidate; that step is noise here.
        loc = loc[1:] if loc[:1] == ["candidate"] else loc
        where = ".".join(loc) or "candidate"
        shown.append(f"{where}: {error['msg'][:120]}")
    more = len(errors) - _MAX_ERRORS_SHOWN
    return "; ".join(shown) + (f" (and {more} more)" if more > 0 else "")


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else ""


def _size(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} bytes"
