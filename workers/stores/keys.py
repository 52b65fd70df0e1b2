"""Every Redis key Seatwire writes, in one place (arq's habit). Nothing else builds key names.

Seatwire needs ONE Redis primary (not a cluster): the guardrail script touches keys it
discovers while running (expired reservations), which a cluster would refuse.
"""

from __future__ import annotations

PREFIX = "sw:"

JOURNAL_OPEN = f"{PREFIX}j:open"  # zset trackingId -> deadline ms, every non-final entry
JOURNAL_FAILED = f"{PREFIX}j:failed"  # zset trackingId -> ms, entries a stage gave up on
LEDGER_SEATS = f"{PREFIX}ledger:seats"  # set of seat ids that have a ledger stream
# Deployment-wide counts the scripts keep (hash): `inboxOverflowed`, the items directed to a
# seat whose inbox was full (workers/stores/inbox.py); exported as metrics.
STATS = f"{PREFIX}stats"
PENDING = f"{PREFIX}g:pending"  # zset opId -> reservation expiry ms
OP_PREFIX = f"{PREFIX}g:op:"
# The delivery cap, the dead-letter queue and the parking lot (docs/reliability.md).
DLQ = f"{PREFIX}dlq"  # zset dlqId -> dead-lettered at ms; each one's record is dead_letter(id)
PARKED = f"{PREFIX}park"  # zset taskId -> due ms, stage messages waiting to be re-enqueued
PARKED_MESSAGES = f"{PREFIX}park:msg"  # hash taskId -> the parked message and why (JSON)
# Beat's leader lease (workers/recovery/leader.py): the hash of the holder, its fencing
# token, since and until when; the counter every election increments (the fencing token a
# beat-driven write compares with); a capped stream of elections (holder, token, atMs).
BEAT_LEADER = f"{PREFIX}beat:leader"
BEAT_EPOCH = f"{PREFIX}beat:epoch"
BEAT_TERMS = f"{PREFIX}beat:terms"
# Hash of each beat-driven tick's last finish (tick name -> ms): `seatwire status` and the
# `seatwire_last_tick_timestamp_seconds` metric read it, so a beat that stopped is seen.
TICKS = f"{PREFIX}ticks"


def journal(tracking_id: str) -> str:
    return f"{PREFIX}j:{tracking_id}"


def deliveries(tracking_id: str) -> str:
    """How often each stage's message of one entry was STARTED by a worker (hash stage ->
    count), and how many sweeper copies of it are still to start (`copies_field`); a count is
    written only when a redelivery or a sweeper copy starts, the first delivery is implied."""
    return f"{PREFIX}j:{tracking_id}:dlv"


def copies_field(stage: str) -> str:
    """The field of `deliveries` counting a stage's sweeper copies not yet started."""
    return f"{stage}:copies"


def running(tracking_id: str, stage: str) -> str:
    """Set (with a TTL of the task time limit) while a worker runs a stage's message of one
    entry: the sweeper never re-enqueues a message that is running."""
    return f"{PREFIX}j:{tracking_id}:run:{stage}"


def dead_letter(dlq_id: str) -> str:
    """One dead letter: where, why, how often, and the message to replay (hash)."""
    return f"{PREFIX}dlq:{dlq_id}"


def ledger_stream(seat_id: str) -> str:
    return f"{PREFIX}ledger:{seat_id}"


def op(op_id: str) -> str:
    return f"{OP_PREFIX}{op_id}"


def by_dedupe_key(dedupe_key: str) -> str:
    return f"{PREFIX}g:dk:{dedupe_key}"


def by_target(member_id: str) -> str:
    return f"{PREFIX}g:target:{member_id}"


def by_work(work_id: str) -> str:
    return f"{PREFIX}g:work:{work_id}"


def by_seat(seat_id: str) -> str:
    return f"{PREFIX}g:seat:{seat_id}"


def rooms_of(seat_id: str) -> str:
    return f"{PREFIX}g:rooms:{seat_id}"


def inbox(seat_id: str) -> str:
    """A seat's inbox: a stream whose entry ids are the items' positions (`{position}-0`)."""
    return f"{PREFIX}inbox:{seat_id}"


def inbox_meta(seat_id: str) -> str:
    """A seat's inbox counters: `last` (highest position given) and `acked`."""
    return f"{PREFIX}inbox:{seat_id}:meta"


def org_snapshot(version: str) -> str:
    """What the trace needs of one org version (its seats and listed channels, JSON) to derive
    the verdicts of the seats an event did not concern; kept as long as the last event decided
    against it."""
    return f"{PREFIX}orgv:{version}"


def seat_verdicts(tracking_id: str) -> str:
    """An inbound event's verdict per seat (hash seatId -> SeatVerdict JSON): its audit rows."""
    return f"{PREFIX}j:{tracking_id}:seats"


def seat_state(seat_id: str) -> str:
    """A seat's counters: `notices` (directed events ever put in its inbox), and `lastCallMs`
    (when it last called one of its tools: its contact freshness)."""
    return f"{PREFIX}seat:{seat_id}"


def spoke_in(channel_id: str, root_id: str) -> str:
    """Seats that have spoken in one thread (set of seat ids)."""
    return f"{PREFIX}f:spoke:{channel_id}:{root_id}"


def named_in(channel_id: str, root_id: str) -> str:
    """Seats that have been named or mentioned in one thread (set of seat ids)."""
    return f"{PREFIX}f:named:{channel_id}:{root_id}"


def channel_seats(channel_id: str) -> str:
    """Seats learned to belong to a channel: they sent there, or a DM was delivered to them."""
    return f"{PREFIX}f:chan:{channel_id}"


def item_seats(item_id: str) -> str:
    """Seats a board item belongs to (assigned to them)."""
    return f"{PREFIX}f:item:{item_id}"


def slack_cooldown(channel_id: str) -> str:
    """A Slack conversation no post may go to until the key expires (after a 429 there)."""
    return f"{PREFIX}slack:cool:{channel_id}"


def objective_samples(objective_key: str) -> str:
    """Zset of one objective's KPI samples (member: the sample's JSON, score: its atMs)."""
    return f"{PREFIX}kpi:{objective_key}"


def objective_sample_ids(objective_key: str) -> str:
    """Hash of one objective's sample ids (`{atMs}:{source}`) -> the sample's JSON, so a
    sample posted again is recognised, and one posted again with other content is refused."""
    return f"{PREFIX}kpi:ids:{objective_key}"


def cost_frames(seat_id: str) -> str:
    """Zset of one seat's turn cost frame ids, scored by the frame's atMs."""
    return f"{PREFIX}cost:{seat_id}"


def cost_frame_ids(seat_id: str) -> str:
    """Hash of one seat's cost frame ids -> the frame's JSON (a frame posted again is one)."""
    return f"{PREFIX}cost:ids:{seat_id}"


def cost_by_objective(objective_key: str) -> str:
    """Zset of one objective's frames, every seat's: `seat US frame id` -> atMs."""
    return f"{PREFIX}cost:obj:{objective_key}"


def backlog(seat_id: str) -> str:
    """Hash of one seat's backlog items: item id (the steward's dispatch id) -> item JSON."""
    return f"{PREFIX}backlog:{seat_id}"


# Hash of every backlog item's seat, org-wide: item id -> the seat whose backlog holds it
# (workers/stores/backlog.py), written by the script that adds the item, so a claim route finds
# an item by its id alone in one lookup. Its ':'-prefixed fields (no item id starts with ':')
# mark the org seat sets whose backlogs written before the index were indexed. Outside the
# `backlog:` names, which a seat id completes (a seat may be called anything).
BACKLOG_OWNERS = f"{PREFIX}item-owners"


def backlog_open(seat_id: str) -> str:
    """Zset of one seat's open backlog item ids, scored by when they were added (ms)."""
    return f"{PREFIX}backlog:open:{seat_id}"


def backlog_open_for(seat_id: str, objective_key: str) -> str:
    """Zset of one seat's open items for one objective (what a steward run reads), by added ms."""
    return f"{PREFIX}backlog:open:{seat_id}:{objective_key}"


STEWARD_AUDIT = f"{PREFIX}steward:audit"  # stream of every steward audit entry, all objectives


def steward_audit(objective_key: str) -> str:
    """Stream of one objective's steward audit entries, oldest first."""
    return f"{PREFIX}steward:audit:{objective_key}"


def steward_lease(objective_key: str) -> str:
    """One objective's steward-run lease: the token of the run holding it, with a TTL."""
    return f"{PREFIX}steward:lease:{objective_key}"


def steward_pending(objective_key: str) -> str:
    """Hash of one objective's planned dispatches not yet done: dispatch id -> its JSON. Written
    with the run's audit, emptied as each is done; a run that died leaves the rest here."""
    return f"{PREFIX}steward:pending:{objective_key}"


def steward_dispatched(objective_key: str) -> str:
    """Zset of one objective's dispatch ids carried out, scored by when (ms); kept long
    enough that a sample still deciding never has its work planned again."""
    return f"{PREFIX}steward:done:{objective_key}"


def steward_overrides(objective_key: str) -> str:
    """Hash of one objective's operator overrides: candidate key -> the override JSON."""
    return f"{PREFIX}steward:override:{objective_key}"


def claim(item_id: str) -> str:
    """Hash of one COLLABORATE item's exclusive claim (the subject `item:<id>` of the one claim
    system, workers/stores/claims.py): owner, generation, until when, since when."""
    return f"{PREFIX}claim:{item_id}"


def claim_history(item_id: str) -> str:
    """Stream of one claim's takes, renewals, takeovers and releases, oldest first."""
    return f"{PREFIX}claim:{item_id}:log"


def claim_members(item_id: str) -> str:
    """Hash of an item subject's participants (the claim scripts' shape; nothing joins an
    item, so it stays empty): seat id -> role JSON."""
    return f"{PREFIX}claim:{item_id}:members"


# The ingress's per-source rate limit (workers/ingress/ratelimit.py): zset source -> its
# bucket's theoretical arrival time (us); members in the past are pruned on every take.
RATE_LIMIT = f"{PREFIX}rl:tat"


PROJECT = f"{PREFIX}project"  # hash of the project's flags: `started`, `paused` ('1' | '0')
# The work controller's due index (workers/stores/seat_runs.py): a zset of seat ids scored by
# when each is next to be decided (ms on the controller tick's clock). A seat whose decision
# nothing but news could change is not in it. A wake-up lowers a seat's score to the clock of
# the last tick (CONTROLLER_CLOCK, a string of ms), so wake-ups sort fairly among timers
# whatever clock the tick runs on. (Not under `ctl:`: that is every seat's record.)
CONTROLLER_DUE = f"{PREFIX}controller:due"
CONTROLLER_CLOCK = f"{PREFIX}controller:clock"
# What a script that makes a seat's news is given, LAST among its keys, to wake the seat
# (workers/stores/lua/controller_wake.lua).
CONTROLLER_WAKE = (CONTROLLER_DUE, CONTROLLER_CLOCK)
# Hash of the due index's own state: `org` (the fingerprint of the org the index was filled
# for: a new one wakes every seat), `cursor` and `next` (where the reconciliation pass is,
# and when its next step is due), `chain` and `chainFrom` (until when a chain of ticks runs,
# and the clock it began at: workers/stores/lua/controller_take.lua).
CONTROLLER_STATE = f"{PREFIX}controller:index"


def seat_run(seat_id: str) -> str:
    """Hash of one seat's work-controller record (workers/stores/seat_runs.py): `rev`, the
    compare-and-set revision, and `doc`, the SeatRun JSON without its finished turns."""
    return f"{PREFIX}ctl:{seat_id}"


def seat_turns(seat_id: str) -> str:
    """List of one seat's last finished turns (TurnRecord JSON, oldest first), written with
    its record under the record's revision (workers/stores/lua/seat_run_write.lua)."""
    return f"{PREFIX}ctl:{seat_id}:turns"


# ---------------------------------------------------------------- a seat's tools (issue 13)
# Messages between seats (workers/stores/messages.py).


def message(message_id: str) -> str:
    """Hash of one message between seats: its fields and body."""
    return f"{PREFIX}msg:{message_id}"


def thread(thread_id: str) -> str:
    """Zset of a thread's message ids, in creation order."""
    return f"{PREFIX}thread:{thread_id}"


def message_request(seat_id: str, client_message_id: str) -> str:
    """A seat's `client_message_id` -> the message it sent (the send is never repeated)."""
    return f"{PREFIX}msgreq:{seat_id}:{client_message_id}"


def message_rate(seat_id: str) -> str:
    """Zset of when a seat sent its messages (the 5 s / 60 an hour limits)."""
    return f"{PREFIX}msgrate:{seat_id}"


# Work intents: a seat's durable recovery checkpoints (workers/stores/intents.py).


def intents(seat_id: str) -> str:
    """Hash of a seat's work intents: intent id -> the intent's JSON (with its revision)."""
    return f"{PREFIX}intent:{seat_id}"


def intent_request(seat_id: str, client_request_id: str) -> str:
    """A seat's `client_request_id` -> the receipt of the intent write it made."""
    return f"{PREFIX}intentreq:{seat_id}:{client_request_id}"


def intent_meta(seat_id: str) -> str:
    """Hash of a seat's intent counters: `revision` (every write), `runnable` (how many)."""
    return f"{PREFIX}intent:{seat_id}:meta"


# Issue coordination: one owner per repository issue (workers/stores/issues.py).


def issue(number: int) -> str:
    """Hash of one repository issue's coordination (the subject `issue:<n>` of the one claim
    system, workers/stores/claims.py): owner, generation, lease, work state, ..."""
    return f"{PREFIX}issue:{number}"


def issue_members(number: int) -> str:
    """Hash of an issue's participants: seat id -> role (contributor, follower) JSON."""
    return f"{PREFIX}issue:{number}:members"


def issue_log(number: int) -> str:
    """Stream of an issue's coordination changes, oldest first (capped)."""
    return f"{PREFIX}issue:{number}:log"


def issue_request(seat_id: str, client_request_id: str) -> str:
    """A seat's `client_request_id` -> the receipt of its coordination call (replays)."""
    return f"{PREFIX}issuereq:{seat_id}:{client_request_id}"


def issue_observed(number: int) -> str:
    """Hash of what the inbound stream saw of one issue number on GitHub (newest version)."""
    return f"{PREFIX}issue:{number}:github"


# Project directions: decisions with two options, votes, a deadline (workers/stores/decisions.py).


def sent_message(channel_id: str, message_id: str) -> str:
    """Hash of what one engaged send put at this place (work id, tracking id, seat, op), so a
    reply in its thread can be traced back; kept for the send's retention."""
    return f"{PREFIX}sent:{channel_id}:{message_id}"


def direction(direction_id: str) -> str:
    """Hash of one project direction: its frozen policy, deadline, votes, tally, result."""
    return f"{PREFIX}dir:{direction_id}"


DIRECTIONS = f"{PREFIX}dir:index"  # zset of every direction id (score 0: id order)


def direction_request(actor_id: str, client_request_id: str) -> str:
    """An actor's `client_request_id` -> the receipt of its direction call (replays)."""
    return f"{PREFIX}dirreq:{actor_id}:{client_request_id}"


# GitHub work summaries the inbound stream observed, for `find_work` (workers/stores/work.py).


def work_item(kind: str, number: int) -> str:
    """Hash of one observed GitHub issue, pull request or milestone's summary."""
    return f"{PREFIX}work:{kind}:{number}"


def work_index(kind: str, state: str) -> str:
    """Zset of the observed items of one kind in one state, by number."""
    return f"{PREFIX}work:{kind}:{state}"


# API tokens (issue 13 point 6, workers/stores/tokens.py): hash sha256(token) hex -> the
# token's role, seat, label and issue time (JSON). Never the token itself.
TOKENS = f"{PREFIX}tokens"


# find_work's indexes beside work_item and work_index (workers/stores/work.py).


def work_label(kind: str, state: str, label: str) -> str:
    """Zset of the observed items of one kind and state carrying one exact label, by number."""
    return f"{PREFIX}work:{kind}:{state}:label:{label}"


def work_milestone(kind: str, state: str, milestone: int) -> str:
    """Zset of the observed items of one kind and state in one milestone, by number."""
    return f"{PREFIX}work:{kind}:{state}:milestone:{milestone}"


def work_expiry(kind: str) -> str:
    """Zset of the kind's closed or removed items (item key -> ms when it may be dropped)."""
    return f"{PREFIX}work:{kind}:expiry"


def direction_log(direction_id: str) -> str:
    """Stream of one direction's audit: every change, oldest first."""
    return f"{PREFIX}dir:{direction_id}:log"


# The ask record (workers/stores/asks.py): each ask's hash (doc, version, created at, last op),
# its indexes (zsets of ask ids by created ms: all, per seat, per person asked, per work, the
# open ones; the due ones by deadline ms), the latest ask under each dedupe key, the message
# each landed as (for replies and clicks), consents and declines, and each seat's brake.
ASKS_ALL = f"{PREFIX}asks"
ASKS_OPEN = f"{PREFIX}asks:open"
ASKS_DUE = f"{PREFIX}asks:due"
ASKS_PENDING = f"{PREFIX}asks:pending"  # zset askId -> created ms, asks whose send is in flight
CONSENTS = f"{PREFIX}consents"  # zset consentId -> expires at ms
# Set (with a TTL of an hour) when a tick trimmed the ask indexes: one trim an hour.
ASKS_TRIMMED = f"{PREFIX}asks:trimmed"


def ask(ask_id: str) -> str:
    return f"{PREFIX}ask:{ask_id}"


def asks_of_seat(seat_id: str) -> str:
    return f"{PREFIX}asks:seat:{seat_id}"


def asks_of_person(member_id: str) -> str:
    return f"{PREFIX}asks:person:{member_id}"


def asks_of_work(work_id: str) -> str:
    return f"{PREFIX}asks:work:{work_id}"


def asks_of_item(item_id: str) -> str:
    """Zset: the asks about one GitHub issue or pull request (`owner/repo#N`, lowercased)."""
    return f"{PREFIX}asks:item:{item_id}"


def ask_reply(delivery_id: str) -> str:
    """Set once a delivered reply (a thread message, a comment, a review) answered its ask:
    a redelivery of the same event answers nothing a second time."""
    return f"{PREFIX}asks:reply:{delivery_id}"


def ask_latest(dedupe_key: str) -> str:
    """Zset: the asks under a dedupe key by attempt (the latest is the highest)."""
    return f"{PREFIX}asks:key:{dedupe_key}"


def ask_message(channel_id: str, message_id: str) -> str:
    """The ask a sent message is (Slack channel and ts, or a webhook's message id)."""
    return f"{PREFIX}asks:msg:{channel_id}:{message_id}"


def consent(consent_id: str) -> str:
    return f"{PREFIX}consent:{consent_id}"


def consents_of_work(work_id: str) -> str:
    return f"{PREFIX}consents:work:{work_id}"


def declines_of_work(work_id: str) -> str:
    """Hash: normalised scope -> the decline record (JSON)."""
    return f"{PREFIX}declines:work:{work_id}"


def asks_concluded(seat_id: str) -> str:
    """List, newest first: `askId|how` of the seat's concluded asks (the brake's window)."""
    return f"{PREFIX}asks:concluded:{seat_id}"


def asks_lifted(seat_id: str) -> str:
    """The seat's last lifted hold (kept for the record; `asks_brake` is the hold itself)."""
    return f"{PREFIX}asks:lifted:{seat_id}"


def asks_brake(seat_id: str) -> str:
    return f"{PREFIX}asks:brake:{seat_id}"


def ask_escalations(ask_id: str) -> str:
    """Set: the ids of the asks an ask's escalations were sent as."""
    return f"{PREFIX}asks:up:{ask_id}"


def console_session(session_hash: str) -> str:
    """One web console session (workers/stores/console.py), by the sha256 of the cookie's
    value: who it is (the operator, or the people an answer link named), its CSRF token and
    expiry (JSON); the key expires with the session."""
    return f"{PREFIX}console:session:{session_hash}"


def console_login_failures(source: str) -> str:
    """Failed console logins from one client address in the current window (a counter that
    expires with the window): workers/stores/console.py."""
    return f"{PREFIX}console:login-failures:{source}"
