-- Release one item's claim: its holder lets go, or the item was closed (any holder goes).
-- The hash keeps `ownerId`, so the item is still found by id; a later take is `taken`.
-- KEYS: 1 claim hash, 2 claim history stream
-- ARGV: 1 the releasing seat, 2 the holder it must be ('' = whoever holds it: a close),
--       3 nowMs, 4 retention ms, 5 history cap (entries)
-- Returns {verb, holder}: 'released' (written, with the history) | 'not_holder' (another seat
-- holds it: that holder) | 'none' (nobody holds it); only 'released' writes anything.
local holder = redis.call('HGET', KEYS[1], 'holder')
if not holder then return {'none', ''} end
if ARGV[2] ~= '' and holder ~= ARGV[2] then return {'not_holder', holder} end
local now = tonumber(ARGV[3])
redis.call('HDEL', KEYS[1], 'holder', 'sinceMs', 'untilMs')
redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[5], '*', 'event', 'released', 'seatId', ARGV[1],
  'previous', holder, 'atMs', now)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return {'released', holder}
