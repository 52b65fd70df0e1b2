-- One item into a seat's inbox: the next position (the meta hash's `last`), the item under the
-- stream id `{position}-0` with its "position":0 filled in, and, with the seat's counters hash,
-- one more notice for the work controller. Every script that puts items in an inbox puts them
-- here, so an inbox has one rule for its positions and one for its bound.
--
-- The bound: an inbox holds at most `room.cap` unread items (given, not yet acknowledged).
-- The unread items are never dropped to make room; an item that finds the inbox full is not
-- put in it, and that is written down where the seat and its operators look: a ledger row
-- (reason code `inbox_full`, naming the item's delivery), the inbox's `overflowed` count
-- (which the seat's next read of its updates reports), and the deployment's count in the
-- stats hash (`inboxOverflowed`, exported as a metric).
-- `room` is what the calling script read from its arguments (inbox_room): the cap, how the
-- seat's ledger rows are kept (retention ms, row cap), the row's JSON (its time, seat and
-- work id filled in here), the stats hash and the set of seats with a ledger
-- (workers/stores/inbox.py InboxRoom), and the work controller's wake keys, which every
-- script that puts items in an inbox is given last among its KEYS (controller_wake.lua): an
-- item put wakes its seat. Returns the position, or 0 when the inbox was full.
local function inbox_room(cap, keep_ms, maxlen, row, stats, ledger_seats)
  return {cap = tonumber(cap), keep_ms = keep_ms, maxlen = maxlen, row = row, stats = stats,
    ledger_seats = ledger_seats, due = KEYS[#KEYS - 1], clock = KEYS[#KEYS]}
end

local function inbox_put(stream, meta, item, counters, seat, ledger, room)
  local got = redis.call('HMGET', meta, 'last', 'acked')
  local last, acked = tonumber(got[1] or '0'), tonumber(got[2] or '0')
  if last - acked >= room.cap then
    local t = redis.call('TIME')
    local row = cjson.decode(room.row)
    row.atMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    row.seatId = seat
    row.workId = cjson.decode(item).deliveryId
    row = cjson.encode(row)
    redis.call('XADD', ledger, 'MAXLEN', '~', room.maxlen, '*', 'row', row)
    ledger_trim(ledger, room.keep_ms)
    redis.call('SADD', room.ledger_seats, seat)
    redis.call('HINCRBY', meta, 'overflowed', 1)
    redis.call('HINCRBY', room.stats, 'inboxOverflowed', 1)
    return 0
  end
  local position = last + 1
  redis.call('HSET', meta, 'last', position)
  redis.call('XADD', stream, position .. '-0', 'item',
    (string.gsub(item, '"position":0', '"position":' .. position, 1)))
  if counters then redis.call('HINCRBY', counters, 'notices', 1) end
  controller_wake(room.due, room.clock, seat)
  return position
end
