-- Record a direction's result, all or nothing, on a compare-and-set of its revision: its
-- closure once the deadline has passed (no request: the first reader or writer records it,
-- and the votes are final by then), or the resolver's decision on it (with the request's
-- receipt).
-- KEYS: 1 the request's receipt key (KEYS[2] for a closure), 2 the direction hash,
--       3 the direction's log stream.
-- ARGV: 1 fingerprint ('' for a closure), 2 receipt JSON ('' for a closure), 3 receipt TTL
--       ms, 4 the expected direction revision, 5 nowMs, 6 1 for a closure (else 0), 7 the
--       result JSON, 8 log entry JSON.
-- Returns {'duplicate', receipt}, {'conflict', receipt}, {'missing'}, {'closed', the
-- recorded result JSON} (a closure that another caller recorded first), {'stale', the
-- current revision}, or {'recorded', the direction's revision}. Only 'recorded' writes.
if ARGV[1] ~= '' then
  local replayed = direction_replay(KEYS[1], ARGV[1])
  if replayed then return replayed end
end
local deadline = redis.call('HGET', KEYS[2], 'deadlineMs')
if not deadline then return {'missing'} end
local rev = tonumber(redis.call('HGET', KEYS[2], 'rev'))
if ARGV[6] == '1' then
  local result = redis.call('HGET', KEYS[2], 'result')
  if result then return {'closed', result} end
  if tonumber(ARGV[5]) < tonumber(deadline) then return {'stale', rev} end
end
if rev ~= tonumber(ARGV[4]) then return {'stale', rev} end
redis.call('HSET', KEYS[2], 'result', ARGV[7])
rev = redis.call('HINCRBY', KEYS[2], 'rev', 1)
redis.call('XADD', KEYS[3], '*', 'event', ARGV[8])
if ARGV[1] ~= '' then
  redis.call('SET', KEYS[1], ARGV[1] .. ARGV[2], 'PX', ARGV[3])
end
return {'recorded', rev}
