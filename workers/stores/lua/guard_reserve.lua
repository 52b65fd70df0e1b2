-- Check every guardrail limit and reserve a place, as ONE atomic step (docs/architecture.md).
-- Idempotent per operation id: a re-sent EVALSHA (redis-py retries after a lost reply)
-- returns the verdict already given instead of reserving twice.
-- A place held now pushes the send stage's message with it, when one is given
-- (workers/stores/onward.py), the reservation's attempt written between its payload and tail;
-- a replay pushes nothing, for the message went out with the place.
--
-- Given the guardrail stage's start (its keys and arguments: stage_start.lua), it runs that
-- first and reserves nothing unless the start is admitted: the start and the reservation are
-- one round trip, and a start at the delivery cap is dead-lettered with nothing reserved.
--
-- A place held wakes the seat for the work controller (controller_wake.lua): an ask on its
-- way is news to it (it waits `pending_delivery` until the ask is sent or given up).
--
-- KEYS: 1 op hash, 2 pending zset, 3 by-dedupe-key, 4 by-work, 5 by-seat, 6 rooms-of-seat,
--       7 journal entry, 8..7+n by-target (one per target, in target order), [8+n..14+n the
--       start's 7 keys, when one is given], [the send queue, when a message is given], then
--       the work controller's wake keys (due, clock)
-- ARGV: 1 opId, 2 nowMs ('' = Redis TIME), 3 reengageAfterMs, 4 maxAttemptsPerAsk,
--       5 perTargetPerDay, 6 perWorkPerDay, 7 perSeatPerHour, 8 roomsPerDay,
--       9 createsRoom ('1'|'0'), 10 reservation ttl ms, 11 op key prefix, 12 retention ms,
--       13 n targets, 14 how long a window index keeps an entry (ms; two days, the longest
--       window and as much again for clock skew), 15 the send message's template ('' =
--       none), 16 its payload up to the attempt, 17 its payload after, 18 its embed,
--       19 the start's arguments (a JSON array of strings; '' = no start), 20..19+n target
--       ids, then field/value pairs stored on the op hash, the first of them `seatId` and
--       the seat's id.
-- Returns {allowed 0|1, code|'', attempt, sameKey, lastSameAtMs|-1, work, seat, rooms,
--          atMs, replay 0|1, targetCount1, ..., [the start's deliveries, when it ran]}, or
--          {'start', verb, n} when the start was not admitted (stage_start's {'dead',
--          deliveries} or {'done', state}).
local DAY, HOUR = 86400000, 3600000
local n = tonumber(ARGV[13])
local started = nil
if ARGV[19] ~= '' then
  local K = {}
  for i = 1, 7 do K[i] = KEYS[7 + n + i] end
  started = stage_start(K, cjson.decode(ARGV[19]))
  if started[1] ~= 'run' then return {'start', started[1], started[2]} end
end
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Expired reservations (their worker died before sending) stop counting. Only a reservation:
-- an op finished straight from `reserved` (op_finish cannot reach this zset) may still be
-- listed here, and an engagement must keep its place.
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, e in ipairs(expired) do
  local okey = ARGV[11] .. e
  if redis.call('HGET', okey, 'state') == 'reserved' then
    local idx = redis.call('HGET', okey, 'indexes')
    if idx then
      for _, k in ipairs(cjson.decode(idx)) do redis.call('ZREM', k, e) end
    end
    redis.call('HSET', okey, 'state', 'expired')
  end
  redis.call('ZREM', KEYS[2], e)
end

local state = redis.call('HGET', KEYS[1], 'state')
if state and state ~= 'expired' then
  local reply = cjson.decode(redis.call('HGET', KEYS[1], 'verdict'))
  reply[10] = 1
  if started then table.insert(reply, started[2]) end
  return reply
end

local same = redis.call('ZCARD', KEYS[3])
local top = redis.call('ZREVRANGE', KEYS[3], 0, 0, 'WITHSCORES')
local last = -1
if top[2] then last = tonumber(top[2]) end
local dayOpen, hourOpen = '(' .. (now - DAY), '(' .. (now - HOUR)
local work = redis.call('ZCOUNT', KEYS[4], dayOpen, '+inf')
local seat = redis.call('ZCOUNT', KEYS[5], hourOpen, '+inf')
local rooms = redis.call('ZCOUNT', KEYS[6], dayOpen, '+inf')
local perTarget = {}
for i = 1, n do perTarget[i] = redis.call('ZCOUNT', KEYS[7 + i], dayOpen, '+inf') end

-- The limits, in the order the pure judge applies them; first refusal wins.
local code = ''
local createsRoom = ARGV[9] == '1'
if last >= 0 and last > now - tonumber(ARGV[3]) then code = 'already_engaged'
elseif same >= tonumber(ARGV[4]) then code = 'rate_limited_ask'
else
  for i = 1, n do
    if perTarget[i] >= tonumber(ARGV[5]) then code = 'rate_limited_target'; break end
  end
  if code == '' then
    if work >= tonumber(ARGV[6]) then code = 'rate_limited_work'
    elseif seat >= tonumber(ARGV[7]) then code = 'rate_limited_seat'
    elseif createsRoom and rooms >= tonumber(ARGV[8]) then code = 'rate_limited_rooms'
    end
  end
end

local allowed = 0
if code == '' then allowed = 1 end
local reply = {allowed, code, same + 1, same, last, work, seat, rooms, now, 0}
for i = 1, n do reply[10 + i] = perTarget[i] end

local fields = {}
for i = 20 + n, #ARGV, 2 do
  table.insert(fields, ARGV[i]); table.insert(fields, ARGV[i + 1])
end
if #fields > 0 then redis.call('HSET', KEYS[1], unpack(fields)) end
redis.call('HSET', KEYS[1], 'verdict', cjson.encode(reply), 'checkedAtMs', now)

if allowed == 1 then
  local ttl = tonumber(ARGV[10])
  local indexes = {KEYS[3], KEYS[4], KEYS[5]}
  for i = 1, n do table.insert(indexes, KEYS[7 + i]) end
  if createsRoom then table.insert(indexes, KEYS[6]) end
  for _, k in ipairs(indexes) do
    redis.call('ZADD', k, now, ARGV[1])
    if k ~= KEYS[3] then
      -- Rolling windows never look back more than a day; keep two for clock skew.
      redis.call('ZREMRANGEBYSCORE', k, '-inf', now - tonumber(ARGV[14]))
      redis.call('PEXPIRE', k, ARGV[14])
    else
      redis.call('PEXPIRE', k, tonumber(ARGV[12]))
    end
  end
  redis.call('HSET', KEYS[1], 'state', 'reserved', 'atMs', now, 'expiresAtMs', now + ttl,
    'roomCreated', ARGV[9], 'attempt', same + 1, 'indexes', cjson.encode(indexes))
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
  if redis.call('EXISTS', KEYS[7]) == 1 then
    redis.call('HSET', KEYS[7], 'state', 'reserved', 'updatedAtMs', now)
  end
  if ARGV[15] ~= '' then
    local payload = ARGV[16] .. (same + 1) .. ARGV[17]
    redis.call('LPUSH', KEYS[#KEYS - 2], celery_message(ARGV[15], payload, ARGV[18]))
  end
  controller_wake(KEYS[#KEYS - 1], KEYS[#KEYS], ARGV[21 + n])
else
  redis.call('HSET', KEYS[1], 'state', 'refused', 'atMs', now)
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[12]))
if started then table.insert(reply, started[2]) end
return reply
