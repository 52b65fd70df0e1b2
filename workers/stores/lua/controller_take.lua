-- Take the seats a work-controller tick is to decide (workers/stores/seat_runs.py): the
-- oldest-due first, at most a given number, each claimed until a time (its score set to it)
-- so that a tick that dies mid-way leaves them due again then, not lost. A wake-up during the
-- tick lowers a claimed score again (controller_wake.lua), which the tick's commit sees.
-- Also the tick's clock, which wake-ups score by, is set here. A tick whose reconciliation
-- step is due takes that many seats fewer, so that a tick never decides more than its batch.
--
-- When seats that were due as a chain began are left after this batch, the next tick
-- follows at once (the chain goes on). The state's `chain` says until when a chain runs (so
-- that beat sends no tick beside it) and `chainFrom` when it began: a chain drains what was
-- due then, and ends. Seats due only since (a wake-up scored by a later clock, a seat put
-- back at the next millisecond) do not make it go on, so a chain always ends; beat's next
-- tick takes them. The chain's last take clears both; a chain that died runs out.
-- KEYS: 1 the due index (zset), 2 the clock (string), 3 the index's state (hash)
-- ARGV: 1 now (ms, the tick's clock), 2 at most this many seats, 3 the claim's end (ms),
--       4 the fingerprint of the org the tick decides with, 5 the reconciliation step's size,
--       6 until when a chain this tick goes on with counts as running (ms)
-- Returns {'org'} when the index was filled for another org (nothing taken: the tick fills
-- it, then takes again); else {'due' or 'more', reconcile, seat...}: 'more' when the chain
-- goes on, `reconcile` the cursor of the reconciliation pass when its step is due ('' when
-- not), then the seats, oldest-due first.
redis.call('SET', KEYS[2], ARGV[1])
local state = redis.call('HMGET', KEYS[3], 'org', 'next', 'cursor', 'chain', 'chainFrom')
if state[1] ~= ARGV[4] then return {'org'} end
local out = {'due', ''}
local limit = tonumber(ARGV[2])
if state[2] and tonumber(state[2]) <= tonumber(ARGV[1]) then
  out[2] = state[3] or '0'
  limit = math.max(1, limit - tonumber(ARGV[5]))
end
local seats = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, limit)
for _, seat in ipairs(seats) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[3], seat)
  out[#out + 1] = seat
end
local from = ARGV[1]
if state[4] and tonumber(state[4]) > tonumber(ARGV[1]) and state[5] then from = state[5] end
if #redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', from, 'LIMIT', 0, 1) > 0 then
  out[1] = 'more'
  redis.call('HSET', KEYS[3], 'chain', ARGV[6], 'chainFrom', from)
else
  redis.call('HDEL', KEYS[3], 'chain', 'chainFrom')
end
return out
