-- Claim one overdue journal entry for a re-enqueue, as a compare-and-set on its deadline:
-- only while its score in the open index is still the one the sweep read, and its state the
-- one the message was built from. Two sweeps racing re-enqueue it once; an entry that moved
-- on meanwhile is left to the next tick. Fenced: with a token, nothing is written unless it
-- is the current beat leader's (a deposed beat's stale tick claims nothing).
-- A message that is still there is never copied: one waiting in its queue (the sweep looked:
-- ARGV 16) or running (a worker holds its running mark, KEYS 8) only has its deadline moved.
-- Nor is an entry that moved within a deadline (its `updatedAtMs`): the stage that moved it
-- may not have published the next stage's message yet, and the deadline counts from then.
-- Otherwise it is re-enqueued and one copy is noted as outstanding (the delivery is counted
-- when a worker STARTS it: delivery_count); once that stage's message has started the cap
-- of times, or when the sweep gives the entry up itself (a stage failed it, or its state
-- leads nowhere), it is dead-lettered instead.
-- KEYS: 1 entry, 2 open index, 3 delivery counters, 4 failed index, 5 dlq, 6 letter,
--       7 beat epoch, 8 running mark of this stage's message.
-- ARGV: 1 trackingId, 2 deadline read, 3 new deadline, 4 state read, 5 stage, 6 max
--       deliveries, 7 nowMs, 8 dlqId, 9 task, 10 message JSON, 11 counter ttl ms,
--       12 give-up reason ('' = re-enqueue), 13 give-up error, 14 close as (dead|failed),
--       15 fencing token ('' = unfenced), 16 waiting ('1': a copy is in its queue),
--       17 the copies field, 18.. final states.
-- Returns {'requeue', deliveries} | {'waiting', deliveries} | {'running', deliveries} |
--         {'moved', deliveries} |
--         {'dead', deliveries} | {'skip'} | {'fenced'} | {'vanished'} |
--         {'closed', state} (final, yet still listed: only unlisted).
if ARGV[15] ~= '' and redis.call('GET', KEYS[7]) ~= ARGV[15] then return {'fenced'} end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return {'skip'} end
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {'vanished'}
end
local finals = set_of(ARGV, 18)
if finals[state] or state == 'dead' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {'closed', state}
end
if state ~= ARGV[4] then return {'skip'} end
local n = tonumber(redis.call('HGET', KEYS[3], ARGV[5]) or '1')
local reason, err = ARGV[12], ARGV[13]
if reason == '' then
  if ARGV[16] == '1' then
    redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
    return {'waiting', n}
  end
  if redis.call('EXISTS', KEYS[8]) == 1 then
    redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
    return {'running', n}
  end
  local moved = tonumber(redis.call('HGET', KEYS[1], 'updatedAtMs') or '')
  local now = tonumber(ARGV[7])
  local due = moved and moved + tonumber(ARGV[3]) - now
  if due and due > now then
    redis.call('ZADD', KEYS[2], math.min(due, tonumber(ARGV[3])), ARGV[1])  -- a skewed clock
    return {'moved', n}
  end
  if n >= tonumber(ARGV[6]) then
    reason = 'stuck'
    err = 'no progress past its deadline after ' .. n .. ' deliveries (state ' .. state .. ')'
  end
end
if reason ~= '' then
  dead_letter(
    {entry = KEYS[1], open = KEYS[2], failed = KEYS[4], dlq = KEYS[5], record = KEYS[6]},
    {trackingId = ARGV[1], dlqId = ARGV[8], stage = ARGV[5], task = ARGV[9], reason = reason,
     error = err, deliveries = n, now = ARGV[7], message = ARGV[10], closeAs = ARGV[14],
     finals = finals})
  return {'dead', n}
end
redis.call('HINCRBY', KEYS[3], ARGV[17], 1)
redis.call('PEXPIRE', KEYS[3], ARGV[11])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return {'requeue', n}
