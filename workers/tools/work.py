"""`find_work` (issue 13, docs/tools.md): the GitHub Issues, pull requests and milestones of the
project's repository as the inbound stream observed them (workers/stores/work.py), never
read from GitHub. Filtered by kind (default issue), state (default open), an exact label and
a milestone number (Issues and pull requests only), in number order, at most 20 items or
24 KiB of them (at least one) a page with an opaque `next` cursor, and a `coverage` note:
what is here is partial and an observation, not accepted progress.
"""

from __future__ import annotations

from typing import Any

from contracts.tools import FindWork
from pipeline.work_items import (
    COVERAGE,
    PAGE_BYTES,
    PAGE_ITEMS,
    encode_cursor,
    filters_of,
    page_of,
)
from workers.tools.base import ToolContext, tool


@tool(
    "find_work",
    "At most 20 observed GitHub work summaries (24 KiB budget) of the project's repository: "
    "kind issue, pull_request or milestone, open or closed; Issues and pull requests also by "
    "exact label and milestone number. Follow `next` for more. Only what webhooks delivered "
    "(never read from GitHub): coverage is partial and an empty page does not prove there is "
    "no work; timestamps, draft/merge facts and milestone Issue counts are observations, not "
    "accepted progress. Only Issues join coordination: check GitHub and current claims "
    "before taking responsibility.",
)
def find_work(ctx: ToolContext, args: FindWork) -> dict[str, Any]:
    filters = filters_of(args)
    found = ctx.container.work.find(filters, want=PAGE_ITEMS + 1)
    page, more = page_of(found, limit=PAGE_ITEMS, budget=PAGE_BYTES)
    nxt = encode_cursor(filters, int(page[-1]["number"])) if more and page else None
    return {
        "items": list(page),
        "next": nxt,
        "filters": filters.wire(),
        "repository": ctx.container.org.current()[0].org.project.repository,
        "coverage": {"partial": True, "source": "github_webhooks", "note": COVERAGE},
        "serverTime": ctx.now_ms,
    }
