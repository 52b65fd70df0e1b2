"""Ask records for tests, written the way the send stage writes them (pipeline/asks.py
`new_ask`, then `landed` once it is sent), without running the pipeline: for the routes,
tools and commands that read and answer the record."""

from __future__ import annotations

from contracts import EngagementDecision
from contracts.asks import Ask, AskLanding
from contracts.engagement import Target
from pipeline.asks import DEFAULT_TIMEOUTS_MS, landed, new_ask
from workers.stores.asks import AskStore

CONSENT = "irreversible_or_external"
BLOCKED = "blocked_on_other"
REVIEW = "mandatory_review"


def make_ask(
    store: AskStore,
    *,
    seat: str = "scout",
    work_id: str = "billing-migration",
    targets: tuple[str, ...] = ("ben",),
    trigger: str = BLOCKED,
    key: str | None = None,
    attempt: int = 1,
    now_ms: int,
    sent: bool = True,
    body: str = "Can you grant access to the billing database?",
    scope: str | None = "billing database",
) -> Ask:
    """One ask of `seat`, recorded at `now_ms` and (with `sent`) landed at once on the
    webhook adapter as message `m-{id}`: open until its timeout."""
    decision = EngagementDecision(
        engage=True,
        trigger=trigger,
        reason_code=f"{trigger}:test",
        reason="a test ask",
        targets=tuple(Target(member_id=t, rung="explicit") for t in targets),
        surface="dm",
        body=body,
        work_id=work_id,
        dedupe_key=key or f"{seat}-{work_id}-{trigger}",
    )
    ask = new_ask(
        decision,
        seat_id=seat,
        tracking_id=f"wr-{key or work_id}-{attempt}",
        attempt=attempt,
        now_ms=now_ms,
        timeouts=DEFAULT_TIMEOUTS_MS,
        scope=scope,
        risk_kinds=("irreversible",) if trigger == CONSENT else (),
    )
    stored = store.create(ask)[1]  # (new?, the stored ask, ...)
    if not sent:
        return stored
    landing = AskLanding(
        adapter="webhook", channel_id="webhook", message_id=f"m-{ask.id}", at_ms=now_ms
    )
    after = store.update(ask.id, lambda a: landed(a, landing, now_ms=now_ms))
    assert after is not None
    store.link(after)
    return after
