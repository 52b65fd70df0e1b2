-- End voting on a direction now (the owner's early end), all or nothing: the request's
-- receipt, the deadline moved to now (only while voting is open), the direction's revision
-- and a line of its audit log.
-- KEYS: 1 the request's receipt key (fingerprint then receipt JSON), 2 the direction hash,
--       3 the direction's log stream.
-- ARGV: 1 fingerprint (64 hex), 2 nowMs, 3 receipt JSON, 4 log entry JSON, 5 receipt TTL ms.
-- Returns {'duplicate', receipt}, {'conflict', receipt}, {'missing'}, {'closed', deadline,
-- 1 when a result is recorded else 0}, or {'recorded', the direction's revision}. Only
-- 'recorded' writes.
local replayed = direction_replay(KEYS[1], ARGV[1])
if replayed then return replayed end
local shut = direction_shut(KEYS[2], ARGV[2])
if shut then return shut end
redis.call('HSET', KEYS[2], 'deadlineMs', ARGV[2])
local rev = redis.call('HINCRBY', KEYS[2], 'rev', 1)
redis.call('XADD', KEYS[3], '*', 'event', ARGV[4])
redis.call('SET', KEYS[1], ARGV[1] .. ARGV[3], 'PX', ARGV[5])
return {'recorded', rev}
