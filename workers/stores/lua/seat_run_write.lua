-- Write one seat's work-controller record (workers/stores/seat_runs.py) if nobody wrote it
-- since it was read: a compare-and-set on its revision. The record's finished turns are not
-- in its doc but in a list beside it, because every controller decision reads and parses the
-- doc and almost none needs the turns: the turns the write adds are pushed there, and the
-- list trimmed to the last `history`.
-- ARGV from `i`: the revision read ('0' = absent), the doc, k, then the k new turns' JSON
-- (oldest first).
-- Returns 1 written (its revision is now one more) or 0 (a conflict: nothing written), and
-- the index of the next record's first argument.
local function seat_run_write(run, turns, history, i)
  local k = tonumber(ARGV[i + 2])
  local current = redis.call('HGET', run, 'rev') or '0'
  if current ~= ARGV[i] then return 0, i + 3 + k end
  redis.call('HSET', run, 'rev', tonumber(current) + 1, 'doc', ARGV[i + 1])
  if k > 0 then
    redis.call('RPUSH', turns, unpack(ARGV, i + 3, i + 2 + k))
    redis.call('LTRIM', turns, -history, -1)
  end
  return 1, i + 3 + k
end
