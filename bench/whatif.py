"""Run the `seatwire` command with an experimental patch applied in this process only.

    uv run python -m bench.whatif no-ledger-read worker --queues engagement,guardrails,send

Used by `bench.pipeline --what-if` to ESTIMATE what a change in workers/ would buy before
anyone makes it. Nothing in workers/ is modified; the patch lives in this process (and the
pool processes it forks). Results of a what-if run are not Seatwire's figures.

Patches:
  no-ledger-read  the engagement stage's `Ledger.rows_for` returns no rows, i.e. the cost of
                  that read drops to zero (an upper bound for replacing it by one O(1) tally
                  read; the guardrail stage still checks and reserves atomically).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def _no_ledger_read() -> None:
    from workers.stores import Ledger

    def rows_for(self: Any, **_: Any) -> list[Any]:
        return []

    Ledger.rows_for = rows_for  # type: ignore[method-assign]


PATCHES: dict[str, Callable[[], None]] = {"no-ledger-read": _no_ledger_read}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in PATCHES:
        raise SystemExit(f"usage: python -m bench.whatif {{{','.join(PATCHES)}}} <seatwire args>")
    PATCHES[sys.argv.pop(1)]()
    from workers.cli import main as seatwire

    seatwire()


if __name__ == "__main__":
    main()
