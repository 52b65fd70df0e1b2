-- Journal an inbound event that names nobody (a system notice, an action we do not consider)
-- as final state 'skipped' with its reason, once; a repeat only counts the delivery.
-- KEYS: 1 journal entry. ARGV: 1 trackingId, 2 kind, 3 payload, 4 nowMs, 5 reason,
--       6 detail, 7 retention ms.
-- Returns {'new'} or {state} of the entry already there.
local state = redis.call('HGET', KEYS[1], 'state')
if state then
  redis.call('HINCRBY', KEYS[1], 'deliveries', 1)
  return {state}
end
redis.call('HSET', KEYS[1], 'trackingId', ARGV[1], 'kind', ARGV[2], 'seatId', '',
  'payload', ARGV[3], 'state', 'skipped', 'acceptedAtMs', ARGV[4], 'updatedAtMs', ARGV[4],
  'reason', ARGV[5], 'detail', ARGV[6], 'deliveries', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[7])
return {'new'}
