-- Commit one work-controller tick (workers/stores/seat_runs.py): the seats' records it
-- changed, each only if nobody wrote it since it was read (compare-and-set on its revision),
-- and every seat it decided back in the due index at its next due time, or out of it (only
-- news can change its decision). A seat still at the tick's claim gets its next due time; one
-- woken during the tick (its score lowered below the claim) keeps the sooner of the two, so
-- no wake-up is lost to the tick that was deciding the seat when it came.
-- KEYS: 1 the due index, 2 the index's state, then one run hash per record written
-- ARGV: 1 the tick's claim (ms), 2 records written, 3 the reconciliation's next step (ms,
--       '' for no change), 4 its cursor, then 2 per record (revision read, doc), then 2 per
--       seat decided (seat id, next due ms or '' for none)
-- Returns one flag per record: 1 written, 0 conflict (unchanged)
local claim = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local out = {}
for i = 1, n do
  local key = KEYS[2 + i]
  local current = redis.call('HGET', key, 'rev') or '0'
  if current == ARGV[3 + 2 * i] then
    redis.call('HSET', key, 'rev', tonumber(current) + 1, 'doc', ARGV[4 + 2 * i])
    out[i] = 1
  else
    out[i] = 0
  end
end
for j = 5 + 2 * n, #ARGV, 2 do
  local seat, due = ARGV[j], ARGV[j + 1]
  local score = redis.call('ZSCORE', KEYS[1], seat)
  if score and tonumber(score) == claim then
    if due == '' then
      redis.call('ZREM', KEYS[1], seat)
    else
      redis.call('ZADD', KEYS[1], due, seat)
    end
  elseif due ~= '' then
    redis.call('ZADD', KEYS[1], 'LT', due, seat)
  end
end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], 'next', ARGV[3], 'cursor', ARGV[4]) end
return out
