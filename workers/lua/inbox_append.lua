-- Put a directed event in a seat's inbox once per delivery; its position is the next integer.
-- KEYS: 1 inbox stream, 2 inbox meta hash, 3 seen marker of this delivery.
-- ARGV: 1 item JSON with "position":0 as a placeholder, 2 seen ttl ms.
-- Returns {position, new 0|1}.
local seen = redis.call('GET', KEYS[3])
if seen then return {tonumber(seen), 0} end
local position = redis.call('HINCRBY', KEYS[2], 'last', 1)
local item = string.gsub(ARGV[1], '"position":0', '"position":' .. position, 1)
redis.call('XADD', KEYS[1], position .. '-0', 'item', item)
redis.call('SET', KEYS[3], position, 'PX', ARGV[2])
return {position, 1}
