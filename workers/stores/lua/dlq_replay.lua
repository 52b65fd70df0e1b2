-- Replay one dead letter: reopen its journal entry (the state it had before, the open index
-- with a fresh deadline, its delivery count for that stage reset) and take the letter off
-- the queue, returning the message for the caller to publish. If that publish is lost, the
-- reopened entry's deadline brings it back through the sweeper.
-- The letter is kept as a tombstone (`replayedAtMs`, expiring), so a second replay is a
-- no-op that says so rather than an unknown id.
-- KEYS: 1 dlq, 2 letter, 3 entry, 4 open index, 5 failed index, 6 delivery counters.
-- ARGV: 1 dlqId, 2 nowMs, 3 new deadline, 4 state to restore when the entry does not say,
--       5 tombstone ttl ms, 6.. final states.
-- Returns {'ok', task, trackingId, message} | {'final', state} (the event ended meanwhile:
-- letter removed, nothing to publish) | {'replayed', atMs} | {'unknown'} |
-- {'missing'} (the journal entry is gone: nothing changed).
if redis.call('EXISTS', KEYS[2]) == 0 then return {'unknown'} end
local replayed = redis.call('HGET', KEYS[2], 'replayedAtMs')
if replayed then return {'replayed', replayed} end
local tracking = redis.call('HGET', KEYS[2], 'trackingId')
local stage = redis.call('HGET', KEYS[2], 'stage')
local state = redis.call('HGET', KEYS[3], 'state')
if not state then return {'missing'} end
local function retire()
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HSET', KEYS[2], 'replayedAtMs', ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
end
if set_of(ARGV, 6)[state] then
  retire()
  return {'final', state}
end
if state == 'dead' or state == 'failed' then
  local restored = redis.call('HGET', KEYS[3], 'deadFrom') or ARGV[4]
  redis.call('HSET', KEYS[3], 'state', restored, 'updatedAtMs', ARGV[2])
  redis.call('HDEL', KEYS[3], 'deadFrom', 'failedStage', 'error', 'deadReason', 'deadAtMs')
end
redis.call('ZADD', KEYS[4], ARGV[3], tracking)
redis.call('ZREM', KEYS[5], tracking)
redis.call('HDEL', KEYS[6], stage)
retire()
return {'ok', redis.call('HGET', KEYS[2], 'task'), tracking, redis.call('HGET', KEYS[2], 'message')}
