-- Hold beat's leader lease: renew it if this holder has it (an owner-checked renewal: a
-- holder whose lease lapsed never extends someone else's), take it if nobody does (a new
-- term: the epoch counter is incremented and is the term's fencing token), else stand by.
-- Time is Redis's own (TIME): the lease never depends on a beat host's clock.
-- KEYS: 1 leader hash, 2 epoch counter, 3 terms stream. ARGV: 1 holder, 2 lease ms.
-- Returns {'elected', token, holder, leaseMs} | {'renewed', token, holder, leaseMs} |
--         {'standby', token, holder, leaseMs left}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
local holder = redis.call('HGET', KEYS[1], 'holder')
if holder == ARGV[1] then
  redis.call('HSET', KEYS[1], 'atMs', now, 'untilMs', now + lease)
  redis.call('PEXPIRE', KEYS[1], lease)
  return {'renewed', redis.call('HGET', KEYS[1], 'token'), holder, lease}
end
if holder then
  return {'standby', redis.call('HGET', KEYS[1], 'token'), holder, redis.call('PTTL', KEYS[1])}
end
local token = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', token, 'sinceMs', now, 'atMs', now,
  'untilMs', now + lease)
redis.call('PEXPIRE', KEYS[1], lease)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', 100, '*', 'holder', ARGV[1], 'token', token,
  'atMs', now)
return {'elected', token, ARGV[1], lease}
