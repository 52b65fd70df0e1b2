-- End voting on a direction now (the owner's early end), all or nothing: the request's
-- receipt, the deadline moved to now (only while voting is open), the direction's revision
-- and a line of its audit log.
-- KEYS: 1 the request's receipt key (fingerprint then receipt JSON), 2 the direction hash,
--       3 the direction's log stream.
-- ARGV: 1 fingerprint (64 hex), 2 nowMs, 3 receipt JSON, 4 log entry JSON, 5 receipt TTL ms.
-- Returns {'duplicate', receipt}, {'conflict', receipt}, {'missing'}, {'closed', deadline,
-- 1 when a result is recorded else 0}, or {'recorded', the direction's revision}. Only
-- 'recorded' writes.
local receipt = redis.call('GET', KEYS[1])
if receipt then
  if string.sub(receipt, 1, 64) == ARGV[1] then
    return {'duplicate', string.sub(receipt, 65)}
  end
  return {'conflict', string.sub(receipt, 65)}
end
local deadline = redis.call('HGET', KEYS[2], 'deadlineMs')
if not deadline then return {'missing'} end
local recorded = redis.call('HEXISTS', KEYS[2], 'result')
if recorded == 1 or tonumber(ARGV[2]) >= tonumber(deadline) then
  return {'closed', deadline, recorded}
end
redis.call('HSET', KEYS[2], 'deadlineMs', ARGV[2])
local rev = redis.call('HINCRBY', KEYS[2], 'rev', 1)
redis.call('XADD', KEYS[3], '*', 'event', ARGV[4])
redis.call('SET', KEYS[1], ARGV[1] .. ARGV[3], 'PX', ARGV[5])
return {'recorded', rev}
