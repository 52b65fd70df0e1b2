-- Create a journal entry once. KEYS: entry, open-index.
-- ARGV: trackingId, kind, seatId, payload, nowMs, deadlineMs, fingerprint.
-- Returns {"new", "", ""} or {state, enqueuedAtMs, fingerprint} of the entry already there.
-- A repeat counts the delivery (`deliveries`: how often the event was received), unless both
-- it and the entry carry a fingerprint and they differ: that conflict is refused by the caller
-- and must change nothing.
local state = redis.call('HGET', KEYS[1], 'state')
if state then
  local stored = redis.call('HGET', KEYS[1], 'fingerprint') or ''
  if ARGV[7] == '' or stored == '' or stored == ARGV[7] then
    redis.call('HINCRBY', KEYS[1], 'deliveries', 1)
  end
  return {state, redis.call('HGET', KEYS[1], 'enqueuedAtMs') or '', stored}
end
redis.call('HSET', KEYS[1], 'trackingId', ARGV[1], 'kind', ARGV[2], 'seatId', ARGV[3],
  'payload', ARGV[4], 'state', 'accepted', 'acceptedAtMs', ARGV[5], 'updatedAtMs', ARGV[5],
  'fingerprint', ARGV[7], 'deliveries', 1)
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
return {'new', '', ''}
