-- Shared by every script that gives an entry up; workers/stores/scripts.py puts this text in
-- front of each of them (Redis has no script-to-script calls).
--
-- dead_letter(k, a): write one dead letter and close its journal entry.
--   k: entry, open, failed (index), dlq (zset), record (hash)
--   a: trackingId, dlqId, stage, task, reason, error, deliveries, now, message,
--      closeAs ('dead' | 'failed'), finals (set of final states)
-- The letter's id is its task id, so writing it twice (a re-sent EVALSHA, a sweep racing the
-- stage) leaves ONE letter. The entry gets state `closeAs` with where and why, remembers the
-- state it had (`deadFrom`: what a replay restores) and leaves the open index: the sweeper
-- no longer retries it. An entry already final is left alone and no letter is written (the
-- event ended; nothing to replay); a missing one is never created, but its letter is kept.
-- Returns 'dead' | 'missing' | the final state the entry keeps.
local function dead_letter(k, a)
  local state = redis.call('HGET', k.entry, 'state')
  if state and a.finals[state] then return state end
  redis.call('HSET', k.record, 'trackingId', a.trackingId, 'stage', a.stage, 'task', a.task,
    'reason', a.reason, 'error', a.error, 'deliveries', a.deliveries, 'atMs', a.now,
    'message', a.message)
  redis.call('HDEL', k.record, 'replayedAtMs')
  redis.call('PERSIST', k.record)
  redis.call('ZADD', k.dlq, a.now, a.dlqId)
  if not state then return 'missing' end
  if state ~= 'dead' and state ~= 'failed' then
    redis.call('HSET', k.entry, 'deadFrom', state)
  end
  redis.call('HSET', k.entry, 'state', a.closeAs, 'failedStage', a.stage, 'error', a.error,
    'deadReason', a.reason, 'deadAtMs', a.now, 'updatedAtMs', a.now)
  redis.call('ZREM', k.open, a.trackingId)
  if a.closeAs == 'failed' then redis.call('ZADD', k.failed, a.now, a.trackingId) end
  return 'dead'
end

local function set_of(list, from)
  local s = {}
  for i = from, #list do s[list[i]] = true end
  return s
end
