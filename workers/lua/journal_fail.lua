-- A stage gave up on an entry: record where and why, and keep it findable in the failed
-- index, unless the entry is gone (nothing to mark; never create a stub) or already final
-- (a stage that gave up after its own write landed must not reopen a finished event).
-- KEYS: 1 journal entry, 2 open index, 3 failed index.
-- ARGV: 1 trackingId, 2 stage, 3 error, 4 nowMs, 5..n the final states.
-- Returns 'failed', 'missing' or the final state the entry keeps.
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return 'missing' end
for i = 5, #ARGV do
  if state == ARGV[i] then return state end
end
redis.call('HSET', KEYS[1], 'state', 'failed', 'failedStage', ARGV[2], 'error', ARGV[3],
  'updatedAtMs', ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 'failed'
