-- Acknowledge every item up to a position, once they are handled; they are then dropped. The
-- items refused while the inbox was full (`overflowed`) have then been reported: the next
-- read counts only those refused after this acknowledgement (`overflowSeen`).
-- An acknowledgement is news for the seat's controller (what is pending changed): it wakes
-- the seat (controller_wake.lua).
-- KEYS: 1 inbox stream, 2 inbox meta hash, 3-4 the work controller's wake keys.
-- ARGV: 1 position, 2 the seat id.
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
  controller_wake(KEYS[#KEYS - 1], KEYS[#KEYS], ARGV[2])
end
return {'ok', acked, last}
