-- Send one message between seats, all at once and only once: the sender's request record
-- (its client_message_id), its rate, the message, its place in its thread, and a directed
-- item in each recipient's inbox with the recipient's notices.
-- KEYS: 1 request hash, 2 message hash, 3 thread zset, 4 the sender's rate zset,
--       5 the hash of the message replied to (KEYS[2] when it starts a thread), 6 the stats
--       hash, 7 the set of seats with a ledger, then 4 per recipient (inbox stream, inbox
--       meta, seat counters hash, seat ledger stream).
--       and last the work controller's wake keys (controller_wake.lua).
-- ARGV: 1 nowMs, 2 fingerprint, 3 receipt JSON, 4 message JSON, 5 inbox item JSON (with
--       "position":0 for the script to fill in), 6 thread id, 7 message id, 8 the id of the
--       message replied to ('' for a new thread), 9 min interval ms, 10 hourly limit,
--       11 window ms (an hour), 12 recipient count, 13 inbox cap, 14 ledger retention ms,
--       15 ledger row cap, 16 the overflow row's JSON, 17 how long a message, its request
--       record and an idle thread are kept (ms), then 1 per recipient: its seat id.
-- Returns {'duplicate', receipt} (the same send again: nothing written),
--   {'conflict', receipt} (the id was used for another send: nothing written),
--   {'unknown'} (the message replied to does not exist: nothing written),
--   {'limited', intervalAtMs, hourlyAtMs} (0 for a limit that does not bind: nothing
--   written), or {'ok', receipt, seatId...} naming the recipients whose inbox was full
--   (inbox_common.lua: the message is not in their inbox, their ledgers have the row).
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
-- kept for the retention: each message from when it was sent, the thread while it is used
-- (the places older than the retention go as one is added), the request record with it
local keep = tonumber(ARGV[17])
redis.call('ZADD', KEYS[3], score, ARGV[7])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. (score - keep))
redis.call('PEXPIRE', KEYS[3], keep)
redis.call('HSET', KEYS[2], 'doc', ARGV[4], 'threadId', ARGV[6])
redis.call('PEXPIRE', KEYS[2], keep)
redis.call('ZADD', KEYS[4], now, ARGV[7])
redis.call('PEXPIRE', KEYS[4], ARGV[11])
redis.call('HSET', KEYS[1], 'fingerprint', ARGV[2], 'doc', ARGV[3])
redis.call('PEXPIRE', KEYS[1], keep)

local room = inbox_room(ARGV[13], ARGV[14], ARGV[15], ARGV[16], KEYS[6], KEYS[7])
local out = {'ok', ARGV[3]}
local k = 8
for i = 1, tonumber(ARGV[12]) do
  local seat = ARGV[17 + i]
  if inbox_put(KEYS[k], KEYS[k + 1], ARGV[5], KEYS[k + 2], seat, KEYS[k + 3], room) == 0 then
    out[#out + 1] = seat
  end
  k = k + 4
end
return out
