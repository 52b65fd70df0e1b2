-- Claim one overdue journal entry for a re-enqueue, as a compare-and-set on its deadline:
-- only while its score in the open index is still the one the sweep read, and its state the
-- one the message was built from. Two sweeps racing (two beats by mistake) re-enqueue it
-- once; an entry that moved on meanwhile is left to the next tick.
-- Each re-enqueue counts a delivery of that stage's message; at the cap, or when the sweep
-- gives the entry up itself (a stage failed it, or its state leads nowhere), it is
-- dead-lettered instead.
-- KEYS: 1 entry, 2 open index, 3 delivery counters, 4 failed index, 5 dlq, 6 letter.
-- ARGV: 1 trackingId, 2 deadline read, 3 new deadline, 4 state read, 5 stage, 6 max
--       deliveries, 7 nowMs, 8 dlqId, 9 task, 10 message JSON, 11 counter ttl ms,
--       12 give-up reason ('' = re-enqueue), 13 give-up error, 14 close as (dead|failed),
--       15.. final states.
-- Returns {'requeue', deliveries} | {'dead', deliveries} | {'skip'} | {'vanished'} |
--         {'closed', state} (final, yet still listed: only unlisted).
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return {'skip'} end
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {'vanished'}
end
local finals = set_of(ARGV, 15)
if finals[state] or state == 'dead' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {'closed', state}
end
if state ~= ARGV[4] then return {'skip'} end
local n = tonumber(redis.call('HGET', KEYS[3], ARGV[5]) or '1')
local reason, err = ARGV[12], ARGV[13]
if reason == '' and n >= tonumber(ARGV[6]) then
  reason = 'stuck'
  err = 'no progress past its deadline after ' .. n .. ' deliveries (state ' .. state .. ')'
end
if reason ~= '' then
  dead_letter(
    {entry = KEYS[1], open = KEYS[2], failed = KEYS[4], dlq = KEYS[5], record = KEYS[6]},
    {trackingId = ARGV[1], dlqId = ARGV[8], stage = ARGV[5], task = ARGV[9], reason = reason,
     error = err, deliveries = n, now = ARGV[7], message = ARGV[10], closeAs = ARGV[14],
     finals = finals})
  return {'dead', n}
end
redis.call('HSET', KEYS[3], ARGV[5], n + 1)
redis.call('PEXPIRE', KEYS[3], ARGV[11])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return {'requeue', n + 1}
