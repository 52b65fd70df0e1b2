-- Acknowledge every item up to a position, once they are handled; they are then dropped. The
-- items refused while the inbox was full (`overflowed`) have then been reported: the next
-- read counts only those refused after this acknowledgement (`overflowSeen`).
-- KEYS: 1 inbox stream, 2 inbox meta hash. ARGV: 1 position.
-- Returns {'ok', acknowledged, last} or {'beyond', acknowledged, last} for a position never
-- given (a 409: acknowledging what was not delivered would silently skip future items).
local last = tonumber(redis.call('HGET', KEYS[2], 'last') or '0')
local acked = tonumber(redis.call('HGET', KEYS[2], 'acked') or '0')
local position = tonumber(ARGV[1])
if position > last then return {'beyond', acked, last} end
if position > acked then
  acked = position
  redis.call('HSET', KEYS[2], 'acked', acked,
    'overflowSeen', redis.call('HGET', KEYS[2], 'overflowed') or 0)
  redis.call('XTRIM', KEYS[1], 'MINID', (acked + 1) .. '-0')
end
return {'ok', acked, last}
