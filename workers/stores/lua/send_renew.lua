-- Before the wire call of a try that spent time reconciling: prove it still holds the op
-- (same token, still `sending`) and extend its lease, so no other try can take the op over
-- between this check and the post. Pools that cannot kill a task at its time limit (threads,
-- solo) rely on this.
-- KEYS: 1 op hash. ARGV: 1 fencing token, 2 lease ms.
-- Returns 1 when renewed, 0 when the op is no longer this try's.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HGET', KEYS[1], 'state') == 'sending'
   and redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'leaseUntilMs', now + tonumber(ARGV[2]))
  return 1
end
return 0
