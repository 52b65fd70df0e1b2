-- The ledger's tally of one plan, alone (guard_count.lua says what it counts).
-- KEYS: 1 by-dedupe-key, 2 by-work, 3 by-seat, 4 rooms-of-seat, 5 pending zset,
--       6..5+n by-target (one per target, in target order).
-- ARGV: 1 nowMs, 2 n targets.
-- Returns {sameKey, lastSameAtMs|-1, work, seat, rooms, targetCount1, ...}.
return guard_count(KEYS, ARGV)
