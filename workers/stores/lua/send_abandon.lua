-- A send attempt failed in a way that may or may not have reached the wire: mark the op
-- `unknown` and drop the lease, so the next try reconciles before it posts anything.
-- KEYS: 1 op hash. ARGV: 1 fencing token.
if redis.call('HGET', KEYS[1], 'state') == 'sending'
   and redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'state', 'unknown', 'leaseUntilMs', '0')
  return 1
end
return 0
