-- Give beat's leader lease up (a clean shutdown), only if this holder still has it: the
-- standby takes over at its next try instead of after the lease runs out.
-- KEYS: 1 leader hash. ARGV: 1 holder.
-- Returns {'released'} | {'not_holder'}.
if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[1] then return {'not_holder'} end
redis.call('DEL', KEYS[1])
return {'released'}
