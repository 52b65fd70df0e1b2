-- A send that provably did not reach the provider (a 429, a refused connection): give the op
-- back to `reserved` and drop the lease, so the next try sends without reconciling first.
-- KEYS: 1 op hash. ARGV: 1 fencing token, 2 reason.
-- Returns 1 when released, 0 when the token no longer holds the op (another try took over).
if redis.call('HGET', KEYS[1], 'state') == 'sending'
   and redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'state', 'reserved', 'leaseUntilMs', '0', 'lastRetry', ARGV[2])
  redis.call('HINCRBY', KEYS[1], 'notSent', 1)
  return 1
end
return 0
