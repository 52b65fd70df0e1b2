"""The deterministic ids of a steward run's dispatches. Pure.

A dispatch id is `stw_` + 16 hex of sha256 over the objective key, a subject and the sample
the decision was made on (`atMs`, `source`; none without one). The subject is
`candidate:<candidate_key>` (`#n` for the n-th repeat of a key in the run), or `gap:escalate`
/ `gap:drift`. A rerun after a crash yields the same ids, so the shell does each at most once;
a new sample is a new decision.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata

from contracts.steward import SampleRef

ID_PREFIX = "stw_"
ID_SCHEME = "steward-dispatch-v1"  # bump to change every id at once, never silently
_WORD = re.compile(r"[^\W_]+")


def candidate_key(title: str) -> str:
    """A candidate's identity across runs: its title's words, folded, joined by `-`."""
    return "-".join(_WORD.findall(unicodedata.normalize("NFKC", title).casefold()))


def dispatch_id(objective_key: str, subject: str, sample: SampleRef | None) -> str:
    """The deterministic id of one dispatch: the same objective, subject and sample, the same id."""
    decided_on = [sample.at_ms, sample.source] if sample is not None else [None, None]
    material = json.dumps([ID_SCHEME, objective_key, subject, *decided_on], ensure_ascii=False)
    return ID_PREFIX + hashlib.sha256(material.encode()).hexdigest()[:16]


def candidate_dispatch_id(
    objective_key: str, title: str, sample: SampleRef | None, repeat: int = 0
) -> str:
    """The id a candidate is dispatched under; `repeat` counts earlier candidates of its key."""
    subject = f"candidate:{candidate_key(title)}" + (f"#{repeat}" if repeat else "")
    return dispatch_id(objective_key, subject, sample)


def gap_dispatch_id(objective_key: str, action: str, sample: SampleRef | None) -> str:
    """The id of what a gap decision dispatches (`escalate`, `drift`), per stale sample."""
    return dispatch_id(objective_key, f"gap:{action}", sample)
