-- Cast or change one member's vote on a direction, all or nothing: the request's receipt,
-- the deadline (strictly before it, and never once a result is recorded), the
-- compare-and-set on the member's own vote revision, the vote, the direction's revision and
-- a line of its audit log.
-- KEYS: 1 the request's receipt key (fingerprint then receipt JSON), 2 the direction hash,
--       3 the direction's log stream.
-- ARGV: 1 fingerprint (64 hex), 2 nowMs, 3 the vote's field in the direction hash,
--       4 the expected vote revision (0 = first vote), 5 the vote JSON (its revision the
--       expected one plus one), 6 receipt JSON, 7 log entry JSON, 8 receipt TTL ms.
-- Returns {'duplicate', receipt}, {'conflict', receipt} (the request id was used for
-- another input), {'missing'} (no such direction), {'closed', deadline, 1 when a result is
-- recorded else 0}, {'stale', the current vote JSON or ''}, or {'recorded', the direction's
-- revision}. Only 'recorded' writes.
local replayed = direction_replay(KEYS[1], ARGV[1])
if replayed then return replayed end
local shut = direction_shut(KEYS[2], ARGV[2])
if shut then return shut end
local current = redis.call('HGET', KEYS[2], ARGV[3])
local revision = 0
if current then revision = tonumber(cjson.decode(current).revision) end
if revision ~= tonumber(ARGV[4]) then return {'stale', current or ''} end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[5])
local rev = redis.call('HINCRBY', KEYS[2], 'rev', 1)
redis.call('XADD', KEYS[3], '*', 'event', ARGV[7])
redis.call('SET', KEYS[1], ARGV[1] .. ARGV[6], 'PX', ARGV[8])
return {'recorded', rev}
