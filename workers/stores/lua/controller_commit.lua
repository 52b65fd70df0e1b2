-- Commit one work-controller tick (workers/stores/seat_runs.py): the seats' records it
-- changed, each only if nobody wrote it since it was read (compare-and-set on its revision,
-- seat_run_write.lua), and every seat it decided back in the due index at its next due time,
-- or out of it (only news can change its decision). A seat still at the tick's claim gets
-- its next due time; one woken during the tick (its score lowered below the claim) keeps the
-- sooner of the two, so no wake-up is lost to the tick that was deciding the seat when it
-- came.
-- KEYS: 1 the due index, 2 the index's state, then per record written its run hash and its
--       turns list
-- ARGV: 1 the tick's claim (ms), 2 records written, 3 the reconciliation's next step (ms,
--       '' for no change), 4 its cursor, 5 finished turns kept per seat, then per record
--       what seat_run_write.lua reads (revision, doc, k new turns), then 2 per seat decided
--       (seat id, next due ms or '' for none)
-- Returns one flag per record: 1 written, 0 conflict (unchanged)
local claim = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local history = tonumber(ARGV[5])
local out = {}
local j = 6
for i = 1, n do
  out[i], j = seat_run_write(KEYS[1 + 2 * i], KEYS[2 + 2 * i], history, j)
end
for k = j, #ARGV, 2 do
  local seat, due = ARGV[k], ARGV[k + 1]
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
