-- Count one REdelivery of a stage's message before its body runs (the body may kill the
-- process): the first delivery is implied, so the common path costs no round trip. At the
-- cap the message is dead-lettered instead (`worker_lost_loop`) and the caller acks it.
-- KEYS: 1 delivery counters, 2 entry, 3 open index, 4 failed index, 5 dlq, 6 letter.
-- ARGV: 1 stage, 2 max deliveries, 3 counter ttl ms, 4 nowMs, 5 trackingId, 6 dlqId, 7 task,
--       8 message JSON, 9 error text, 10 the entry states this stage's message is for
--       (comma-separated), 11.. final states.
-- Returns {'run', deliveries} | {'dead', deliveries} | {'done', state} (an entry already
-- dead-lettered, or at the cap an entry that is final or has moved past this stage: a stale
-- copy, acked without running, and the entry's own later stage goes on).
local state = redis.call('HGET', KEYS[2], 'state')
if state == 'dead' then return {'done', state} end
local n = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '1')
local max = tonumber(ARGV[2])
if n >= max then
  local own = {}
  for s in string.gmatch(ARGV[10], '[^,]+') do own[s] = true end
  if state and not own[state] then return {'done', state} end
  local verdict = dead_letter(
    {entry = KEYS[2], open = KEYS[3], failed = KEYS[4], dlq = KEYS[5], record = KEYS[6]},
    {trackingId = ARGV[5], dlqId = ARGV[6], stage = ARGV[1], task = ARGV[7],
     reason = 'worker_lost_loop', error = ARGV[9], deliveries = n, now = ARGV[4],
     message = ARGV[8], closeAs = 'dead', finals = set_of(ARGV, 11)})
  if verdict ~= 'dead' and verdict ~= 'missing' then return {'done', verdict} end
  return {'dead', n}
end
redis.call('HSET', KEYS[1], ARGV[1], n + 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {'run', n + 1}
