-- Take every parked message that is due (at most a batch), removing each as it is taken:
-- two beats by mistake never both re-enqueue one. A message whose re-enqueue then fails is
-- still covered by its journal entry's deadline (the sweeper's).
-- Fenced (beat's tick): with a token, nothing is taken unless it is the current leader's
-- (the epoch counter's value): a deposed beat's stale tick takes nothing.
-- KEYS: 1 parked zset, 2 parked messages hash, 3 beat epoch (optional).
-- ARGV: 1 nowMs, 2 batch size, 3 fencing token (optional; '' = unfenced).
-- Returns the records taken (JSON), oldest due first.
if ARGV[3] and ARGV[3] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[3] then return {} end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, member in ipairs(due) do
  local record = redis.call('HGET', KEYS[2], member)
  redis.call('ZREM', KEYS[1], member)
  redis.call('HDEL', KEYS[2], member)
  if record then out[#out + 1] = record end
end
return out
