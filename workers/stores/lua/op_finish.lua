-- Record an ask's final outcome once (op_finish_common.lua says how), alone.
-- KEYS: 1 op hash, 2 journal entry, 3 journal open index, 4 seat ledger stream, 5 seats set,
--       6 the sent message's index hash, 7.. the fact sets the seat joins when engaged.
-- ARGV: 1 outcome, 2 ledger row JSON, 3 fencing token ('' = no check), 4 nowMs,
--       5 trackingId, 6 seatId, 7 opId, 8 messageId, 9 channelId, 10 idempotencyId,
--       11 retention ms of a final journal entry, 12 ledger stream cap, 13 workId,
--       14 how long the sent message's index is kept (ms), 15 how long a ledger row is kept
--       (ms), 16 how long a fact is kept (ms).
-- Returns {'ok'|'done'|'stale', state}.
return op_finish(KEYS, ARGV)
