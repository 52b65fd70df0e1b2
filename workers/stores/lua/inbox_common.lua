-- One item into a seat's inbox: the next position (the meta hash's `last`), the item under the
-- stream id `{position}-0` with its "position":0 filled in, and, with the seat's counters hash,
-- one more notice for the work controller. Every script that puts items in an inbox puts them
-- here, so an inbox has one rule for its positions. Returns the position.
local function inbox_put(stream, meta, item, counters)
  local position = redis.call('HINCRBY', meta, 'last', 1)
  redis.call('XADD', stream, position .. '-0', 'item',
    (string.gsub(item, '"position":0', '"position":' .. position, 1)))
  if counters then redis.call('HINCRBY', counters, 'notices', 1) end
  return position
end
