-- A send that provably did not reach the provider (a 429, a refused connection): give the op
-- back to `reserved` and drop the lease, so the next try sends without reconciling first.
-- Counts the refusal by kind on the op, so each kind's budget of tries is the op's own,
-- whatever the broker's retry count says.
-- KEYS: 1 op hash. ARGV: 1 fencing token, 2 reason, 3 counter field
--       (rateLimited|notSent|deferred).
-- Returns the count of that kind (>= 1) when released, 0 when the token no longer holds the op.
if redis.call('HGET', KEYS[1], 'state') == 'sending'
   and redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'state', 'reserved', 'leaseUntilMs', '0', 'lastRetry', ARGV[2])
  return redis.call('HINCRBY', KEYS[1], ARGV[3], 1)
end
return 0
