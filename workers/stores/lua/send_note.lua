-- Write down a step of a send in flight (a room it created, a channel it opened), so a retry
-- after a crash finds it instead of doing it twice. Fenced: only the try holding the lease.
-- KEYS: 1 op hash. ARGV: 1 fencing token, then field, value pairs (fields are prefixed
-- `note:` so they never collide with the op's own).
-- Returns 1 when written, 0 when the token no longer holds the op.
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], 'note:' .. ARGV[i], ARGV[i + 1])
end
return 1
