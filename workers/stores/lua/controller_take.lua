-- Take the seats a work-controller tick is to decide (workers/stores/seat_runs.py): the
-- oldest-due first, at most a given number, each claimed until a time (its score set to it)
-- so that a tick that dies mid-way leaves them due again then, not lost. A wake-up during the
-- tick lowers a claimed score again (controller_wake.lua), which the tick's commit sees.
-- Also the tick's clock, which wake-ups score by, is set here.
-- KEYS: 1 the due index (zset), 2 the clock (string), 3 the index's state (hash)
-- ARGV: 1 now (ms, the tick's clock), 2 at most this many seats, 3 the claim's end (ms),
--       4 the fingerprint of the org the tick decides with
-- Returns {'org'} when the index was filled for another org (nothing taken: the tick fills
-- it, then takes again); else {'due', reconcile, seat...}: `reconcile` is the cursor of the
-- reconciliation pass when its step is due ('' when not), then the seats, oldest-due first.
redis.call('SET', KEYS[2], ARGV[1])
local state = redis.call('HMGET', KEYS[3], 'org', 'next', 'cursor')
if state[1] ~= ARGV[4] then return {'org'} end
local out = {'due', ''}
if state[2] and tonumber(state[2]) <= tonumber(ARGV[1]) then out[2] = state[3] or '0' end
local seats = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, seat in ipairs(seats) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[3], seat)
  out[#out + 1] = seat
end
return out
