-- A worker starts a stage's message (before its body runs: the body may kill the process).
-- Marks it running (KEYS 7, a TTL of the task time limit: the sweeper copies no message that
-- is running) and counts the start as a delivery when it is a REdelivery: kombu put it back
-- (ARGV 11) or it is a sweeper copy (one outstanding in the copies field is used up). The
-- first delivery is implied, so its count costs nothing more than the mark. A message that
-- waited in its queue, however long, counts nothing. At the cap the message is
-- dead-lettered instead (`worker_lost_loop`, or `stuck` for a sweeper copy) and the caller
-- acks it.
-- KEYS: 1 delivery counters, 2 entry, 3 open index, 4 failed index, 5 dlq, 6 letter,
--       7 running mark.
-- ARGV: 1 stage, 2 max deliveries, 3 counter ttl ms, 4 nowMs, 5 trackingId, 6 dlqId, 7 task,
--       8 message JSON, 9 error text, 10 the entry states this stage's message is for
--       (comma-separated), 11 redelivered ('1' | '0'), 12 the copies field, 13 running mark
--       ttl ms, 14 error text of a copy at the cap, 15.. final states.
-- Returns {'run', deliveries} | {'dead', deliveries} | {'done', state} (an entry already
-- dead-lettered, or at the cap an entry that is final or has moved past this stage: a stale
-- copy, acked without running, and the entry's own later stage goes on).
local state = redis.call('HGET', KEYS[2], 'state')
if state == 'dead' then return {'done', state} end
local counted = ARGV[11] == '1'
local reason, err = 'worker_lost_loop', ARGV[9]
if not counted then
  local copies = tonumber(redis.call('HGET', KEYS[1], ARGV[12]) or '0')
  if copies > 0 then
    counted = true
    reason, err = 'stuck', ARGV[14]
    redis.call('HSET', KEYS[1], ARGV[12], copies - 1)
  end
end
local n = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '1')
if counted then
  local max = tonumber(ARGV[2])
  if n >= max then
    local own = {}
    for s in string.gmatch(ARGV[10], '[^,]+') do own[s] = true end
    if state and not own[state] then return {'done', state} end
    local verdict = dead_letter(
      {entry = KEYS[2], open = KEYS[3], failed = KEYS[4], dlq = KEYS[5], record = KEYS[6]},
      {trackingId = ARGV[5], dlqId = ARGV[6], stage = ARGV[1], task = ARGV[7],
       reason = reason, error = err, deliveries = n, now = ARGV[4],
       message = ARGV[8], closeAs = 'dead', finals = set_of(ARGV, 15)})
    if verdict ~= 'dead' and verdict ~= 'missing' then return {'done', verdict} end
    return {'dead', n}
  end
  n = n + 1
  redis.call('HSET', KEYS[1], ARGV[1], n)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
redis.call('SET', KEYS[7], ARGV[5], 'PX', ARGV[13])
return {'run', n}
