-- Send one message between seats, all at once and only once: the sender's request record
-- (its client_message_id), its rate, the message, its place in its thread, and a directed
-- item in each recipient's inbox with the recipient's notices.
-- KEYS: 1 request hash, 2 message hash, 3 thread zset, 4 the sender's rate zset,
--       5 the hash of the message replied to (KEYS[2] when it starts a thread),
--       then 3 per recipient (inbox stream, inbox meta, seat counters hash).
-- ARGV: 1 nowMs, 2 fingerprint, 3 receipt JSON, 4 message JSON, 5 inbox item JSON (with
--       "position":0 for the script to fill in), 6 thread id, 7 message id, 8 the id of the
--       message replied to ('' for a new thread), 9 min interval ms, 10 hourly limit,
--       11 window ms (an hour), 12 recipient count.
-- Returns {'duplicate', receipt} (the same send again: nothing written),
--   {'conflict', receipt} (the id was used for another send: nothing written),
--   {'unknown'} (the message replied to does not exist: nothing written),
--   {'limited', intervalAtMs, hourlyAtMs} (0 for a limit that does not bind: nothing
--   written), or {'ok', receipt}.
local now = tonumber(ARGV[1])
local stored = redis.call('HGET', KEYS[1], 'fingerprint')
if stored then
  local earlier = redis.call('HGET', KEYS[1], 'doc')
  if stored == ARGV[2] then return {'duplicate', earlier} end
  return {'conflict', earlier}
end
if ARGV[8] ~= '' and redis.call('HGET', KEYS[5], 'threadId') ~= ARGV[6] then
  return {'unknown'}
end

redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - tonumber(ARGV[11]))
local interval_at, hourly_at = 0, 0
local last = redis.call('ZREVRANGE', KEYS[4], 0, 0, 'WITHSCORES')
if last[2] and now - tonumber(last[2]) < tonumber(ARGV[9]) then
  interval_at = tonumber(last[2]) + tonumber(ARGV[9])
end
local count, limit = redis.call('ZCARD', KEYS[4]), tonumber(ARGV[10])
if count >= limit then
  local oldest = redis.call('ZRANGE', KEYS[4], count - limit, count - limit, 'WITHSCORES')
  hourly_at = tonumber(oldest[2]) + tonumber(ARGV[11])
end
if interval_at > 0 or hourly_at > 0 then return {'limited', interval_at, hourly_at} end

-- strictly after the thread's last message, whatever the callers' clocks say
local score = now
local top = redis.call('ZREVRANGE', KEYS[3], 0, 0, 'WITHSCORES')
if top[2] and tonumber(top[2]) >= score then score = tonumber(top[2]) + 1 end
redis.call('ZADD', KEYS[3], score, ARGV[7])
redis.call('HSET', KEYS[2], 'doc', ARGV[4], 'threadId', ARGV[6])
redis.call('ZADD', KEYS[4], now, ARGV[7])
redis.call('PEXPIRE', KEYS[4], ARGV[11])
redis.call('HSET', KEYS[1], 'fingerprint', ARGV[2], 'doc', ARGV[3])

local k = 6
for _ = 1, tonumber(ARGV[12]) do
  inbox_put(KEYS[k], KEYS[k + 1], ARGV[5], KEYS[k + 2])
  k = k + 3
end
return {'ok', ARGV[3]}
