"""Every state a record can be in and every verb a Lua script answers with, by name. Pure data.

Until now these were string literals spread over the Lua scripts and the stores; here each
has a `Literal` type and a frozenset (or tuple) of its values, and tests/test_journal_states.py
fails when a script uses one that is not named here.

The records, and whose states are whose:

    journal entry   sw:j:{trackingId}, one per accepted event, `kind` work or inbound
      work report     accepted -> decided -> reserved -> sending -> final
                      final: engaged nobody refused send_failed send_blocked shadowed off
      inbound event   accepted -> final: directed ambient skipped
      either          closed by a give-up: failed (a stage gave up) or dead (the delivery
                      cap, the sweeper); out of the open index yet NOT final: a replay of the
                      dead letter reopens the entry in the state it remembers (`deadFrom`)
    send op         sw:g:op:{opId}, the guardrail reservation that becomes the send
                      reserved -> sending -> unknown (in doubt) -> sending ... -> final
                      reserved -> expired (lapsed; re-reserved by guard_reserve)
                      final: engaged shadowed send_failed send_blocked, and refused
    dead letter     sw:dlq:{id}: no state field; a reason, and the state (`closeAs`) it
                    gave its journal entry

Verbs are the first element of a script's reply. The fenced send scripts (send_abandon,
send_renew, send_note, park) answer 1 or 0, and send_release the count of releases of its
kind (0 when the token no longer holds the op): integers, no verbs. decision_record answers
the stored decision's JSON.
"""

from __future__ import annotations

from typing import Literal, get_args

# --------------------------------------------------------------------- journal entries

EntryKind = Literal["work", "inbound"]
ENTRY_KINDS: tuple[EntryKind, ...] = get_args(EntryKind)

# Not final: the sweeper re-enqueues an entry in one of these to the stage that is next.
# `unknown` is listed for the send stage in the stage table (workers/queues.py: a send in
# doubt), though no script writes it onto an entry: send_abandon marks only the op, so the
# entry stays `sending`.
WorkOpenState = Literal["accepted", "decided", "reserved", "sending", "unknown"]
WORK_OPEN_STATES: frozenset[WorkOpenState] = frozenset(get_args(WorkOpenState))

# Final: the entry leaves the open index and nothing writes its state again. `nobody`,
# `refused` and `off` come from the engagement stage (decision_record), `refused` also from
# the guardrail stage, the rest from the send stage (op_finish).
WorkFinalState = Literal[
    "engaged",
    "nobody",  # considered, and nobody is to be asked (with its reason code)
    "refused",  # a guardrail said no
    "send_failed",
    "send_blocked",  # the send gate said no
    "shadowed",  # send mode shadow: decided and recorded as what would have been sent
    "off",  # send mode off: nothing was decided
]
WORK_FINAL_STATES: frozenset[WorkFinalState] = frozenset(get_args(WorkFinalState))

InboundOpenState = Literal["accepted"]
InboundFinalState = Literal["directed", "ambient", "skipped"]
INBOUND_FINAL_STATES: frozenset[InboundFinalState] = frozenset(get_args(InboundFinalState))

# Closed by a give-up: out of the open index, not final (a replay reopens it). An inbound
# entry that `failed` may still be recorded by a late directedness run (inbound_record).
ClosedState = Literal["failed", "dead"]
CLOSED_STATES: frozenset[ClosedState] = frozenset(get_args(ClosedState))

FinalState = Literal[WorkFinalState, InboundFinalState]
# The list every dead-letter script is given (ARGV `finals`): an entry in one of these has
# ended, so it is never dead-lettered, re-enqueued or reopened.
FINAL_STATES: frozenset[FinalState] = frozenset(get_args(FinalState))

OpenState = Literal[WorkOpenState, InboundOpenState]
OPEN_STATES: frozenset[OpenState] = frozenset(get_args(OpenState))

WorkEntryState = Literal[WorkOpenState, WorkFinalState, ClosedState]
InboundEntryState = Literal[InboundOpenState, InboundFinalState, ClosedState]
JournalState = Literal[WorkEntryState, InboundEntryState]
JOURNAL_STATES: frozenset[JournalState] = frozenset(get_args(JournalState))

# --------------------------------------------------------------------- send ops

# In flight: the send stage's. All three hold a place against the limits.
OpLiveState = Literal["reserved", "sending", "unknown"]
OP_LIVE_STATES: frozenset[OpLiveState] = frozenset(get_args(OpLiveState))

# A reservation that lapsed before anything was sent (its worker died): it no longer counts,
# and the next send (send_begin answers `expired`) or reservation re-checks the limits.
OpLapsedState = Literal["expired"]

# Final. op_finish answers `done` for the first four; `refused` is written by guard_reserve,
# and op_finish(refused) completes its record (ledger row, journal entry) once.
OpFinalState = Literal["engaged", "shadowed", "send_failed", "send_blocked", "refused"]
OP_FINAL_STATES: frozenset[OpFinalState] = frozenset(get_args(OpFinalState))
# The outcomes op_finish takes (its ARGV 1) are exactly the final states.
OpOutcome = OpFinalState

OpState = Literal[OpLiveState, OpLapsedState, OpFinalState]
OP_STATES: frozenset[OpState] = frozenset(get_args(OpState))

# The op's `begunAs` field: how the try holding the lease began, so a re-sent send_begin
# (same token, its reply lost) is answered the same.
BegunAs = Literal["go", "reconcile"]

# The op's counters of releases by kind (send_release ARGV 3): each kind's budget of tries
# is the op's own, not the broker's retry count.
ReleaseCounter = Literal["rateLimited", "notSent", "deferred"]
RELEASE_COUNTERS: tuple[ReleaseCounter, ...] = get_args(ReleaseCounter)

# --------------------------------------------------------------------- ledger rows

# The guardrail refusals guard_reserve.lua names (the row outcome of a `refused` op), in the
# order the limits are checked.
RefusalCode = Literal[
    "already_engaged",
    "rate_limited_ask",
    "rate_limited_target",
    "rate_limited_work",
    "rate_limited_seat",
    "rate_limited_rooms",
]
REFUSAL_CODES: tuple[RefusalCode, ...] = get_args(RefusalCode)

# A considered "nobody" that is not a guardrail's: no trigger (`none`) or no place to ask.
NobodyCode = Literal["none", "unroutable"]

# Every outcome a ledger row can carry (contracts.guardrails.Outcome is this type):
# an op's state (a refused op's row carries its refusal code instead), a refusal code, a
# nobody code, or `off`.
OpRowState = Literal[
    OpLiveState, OpLapsedState, "engaged", "shadowed", "send_failed", "send_blocked"
]
LedgerOutcome = Literal[OpRowState, RefusalCode, NobodyCode, "off"]
LEDGER_OUTCOMES: frozenset[LedgerOutcome] = frozenset(get_args(LedgerOutcome))

# --------------------------------------------------------------------- dead letters

CloseAs = ClosedState  # the state a dead letter gives its journal entry

# Why a message was dead-lettered. Besides these, `permanent:<error type>` (a stage's
# permanent error) and `unknown_state:<state>` (the sweeper found a state leading nowhere).
DeadLetterReason = Literal[
    "worker_lost_loop",  # delivery_count: redelivered to the cap, its process died each time
    # sweep_claim: started to the cap with no progress; delivery_count: a sweeper copy
    # started at the cap
    "stuck",
    "max_retries",  # a transient error outlasted its retries
    "failed",  # the sweeper found an entry a stage failed, still open
]
DEAD_LETTER_REASONS: tuple[DeadLetterReason, ...] = get_args(DeadLetterReason)
DEAD_LETTER_REASON_PREFIXES = ("permanent:", "unknown_state:")

# --------------------------------------------------------------------- script verbs

# send_begin: {verb, atMs | leaseUntilMs | state | '', attempt}.
SendBeginVerb = Literal[
    "go",  # reserved -> sending: post (info: the op's reservation time)
    "reconcile",  # a previous try may have sent: look first (info: reservation time)
    "busy",  # another try holds a live lease (info: lease end, ms)
    "expired",  # the reservation lapsed: re-check the limits (info: '')
    "done",  # the op is final (info: its state)
    "missing",  # no op: the guardrail stage never ran (info: '')
]
SEND_BEGIN_VERBS: tuple[SendBeginVerb, ...] = get_args(SendBeginVerb)

# op_finish: {verb, state}.
OpFinishVerb = Literal[
    "ok",  # recorded now
    "done",  # final already: the state it keeps
    "stale",  # the token no longer holds the op: another try decides
]
OP_FINISH_VERBS: tuple[OpFinishVerb, ...] = get_args(OpFinishVerb)

# delivery_count (stage_start.lua): {verb, deliveries | state}.
DeliveryVerb = Literal["run", "dead", "done"]
# guard_reserve with the guardrail stage's start: {'start', DeliveryVerb, deliveries | state}
# when that start was not admitted (nothing reserved), else its verdict.
GuardReserveVerb = Literal["start"]
# dead_letter / stage_give_up: a verb, or the final state the entry keeps.
DeadLetterVerb = Literal["dead", "missing"]
# dlq_replay: {verb, ...}; workers' replay adds `nomessage` (a letter with nothing to publish).
ReplayVerb = Literal["ok", "final", "replayed", "unknown", "missing"]
ReplayOutcome = Literal[ReplayVerb, "nomessage"]
# sweep_claim: {verb, ...}. `waiting` (a copy is in its queue), `running` (a worker holds
# its running mark) and `moved` (its state moved within a deadline) only move the deadline
# on; `fenced` writes nothing (the tick's beat leader was deposed).
SweepVerb = Literal[
    "requeue", "waiting", "running", "moved", "dead", "skip", "fenced", "vanished", "closed"
]
# leader_hold: {verb, token, holder, leaseMs}; leader_release: {released} | {not_holder}
# (ClaimVerb's words). Only `elected` and `renewed` write.
LeaderVerb = Literal["elected", "renewed", "standby"]
# journal_accept and journal_skip: {'new', ...}, or the state of the entry already there.
AcceptVerb = Literal["new"]
# journal_enqueue: {verb, state, storedFingerprint}.
EnqueueVerb = Literal["new", "requeued", "duplicate", "conflict"]
# inbound_record: {verb, state, seat, position, ...}; `snapshot` (nothing written): the org
# version's snapshot is missing, and the caller sends it.
InboundRecordVerb = Literal["ok", "done", "snapshot"]
# inbox_ack: {verb, acknowledged, last}.
InboxAckVerb = Literal["ok", "beyond"]
# sample_record: {verb, stored JSON}; cost_record: {verb} or {conflict, stored JSON}; only
# `recorded` writes (cost_record refuses a frame older than its retention as `expired`).
RecordVerb = Literal["recorded", "duplicate", "conflict", "expired"]
# backlog_add: {verb, revision}; backlog_done: {verb}; only `added` and `done` write.
BacklogVerb = Literal["added", "duplicate", "done", "already_done", "unknown"]
# claim_take: {verb, owner, untilMs, sinceMs, previous, generation} on the one owner record
# (subject_common.lua, workers/stores/claims.py); only `held` and `not_open` write nothing.
ClaimTakeVerb = Literal[
    "taken",  # nobody held it: the caller does now
    "renewed",  # the caller held it already: its lease is extended
    "held",  # another seat holds an unlapsed lease: nothing written
    "takeover",  # the holder's lease lapsed: the caller holds it now, and that is recorded
    "not_open",  # the item is not open on its owner's backlog: nothing written
    "stale",  # the subject's generation is not the one the caller expected: nothing written
]
# claim_release (`Claims.release` and `Claims.close`): {verb, owner, generation}; only
# `released` writes.
ClaimReleaseVerb = Literal["released", "not_holder", "none", "stale"]
ClaimVerb = Literal[ClaimTakeVerb, ClaimReleaseVerb]

# rate_take: {verb, retryAfterUs}; only `allowed` writes (the ingress's per-source limit).
RateVerb = Literal["allowed", "limited"]
# issue_claim/refresh/release/member/report: {verb, receipt} or {refusal, owner, generation};
# issue_observe: {verb}. Only the outcomes before `unchanged` change the issue.
IssueVerb = Literal[
    "claimed",
    "refreshed",
    "released",
    "joined",
    "left",
    "followed",
    "unfollowed",
    "reported",
    "unchanged",
    "owned",
    "not_owner",
    "is_owner",
    "not_participant",
    "stale",
    "observed",
    "older",
]

# ask_create: {verb, doc}; ask_commit: {verb, version, inbox position}. `again`: this very
# commit was applied already (its reply was lost); `conflict`: the ask changed since it was read.
AskVerb = Literal["new", "exists", "ok", "again", "conflict", "missing"]
# controller_take: {'org'} (the due index was filled for another org: nothing taken) or
# {'due' or 'more', reconciliation cursor or '', seat...} ('more': the next tick follows).
ControllerTakeVerb = Literal["org", "due", "more"]

ScriptVerb = Literal[
    AskVerb,
    ControllerTakeVerb,
    SendBeginVerb,
    OpFinishVerb,
    DeliveryVerb,
    GuardReserveVerb,
    DeadLetterVerb,
    ReplayOutcome,
    SweepVerb,
    AcceptVerb,
    EnqueueVerb,
    InboundRecordVerb,
    InboxAckVerb,
    RecordVerb,
    BacklogVerb,
    ClaimVerb,
    RateVerb,
    IssueVerb,
    LeaderVerb,
]
SCRIPT_VERBS: frozenset[ScriptVerb] = frozenset(get_args(ScriptVerb))
