-- Write one change of an ask, if nobody changed it since it was read (compare-and-set on its
-- version), with everything that change makes true at once: its place in the open and due
-- indexes, and optionally a consent record, a decline record, the seat's brake window entry
-- and the seat's inbox item (so an answer is never recorded without the seat hearing of it,
-- nor told twice). A commit sent again after a lost reply is answered 'again' (its op id).
-- KEYS: 1 the ask's hash, 2 open asks (zset), 3 due asks (zset), 4 consent doc (string),
--   5 the work's consents (zset), 6 all consents (zset), 7 the work's declines (hash),
--   8 the seat's concluded asks (list), 9 stats hash, 10 ledger seats set,
--   11 inbox stream, 12 inbox meta, 13 seat counters, 14 seat ledger stream,
--   15 the pending asks (zset), 16.. the message it landed as, and its thread's root
--   (strings: its id, for replies), then the work controller's wake keys (controller_wake.lua).
-- ARGV: 1 expected version, 2 new doc, 3 op id, 4 ask id, 5 open (1/0), 6 deadline ms or '',
--   7 keep ms once final (0: no expiry), 8 consent doc or '', 9 consent id,
--   10 consent expires at ms, 11 decline scope field or '', 12 decline doc,
--   13 concluded entry or '', 14 inbox item or '', 15..18 the inbox room (inbox_room),
--   19 the seat id, 20 the consent doc's own expiry (ms since the epoch),
--   21 '1' to point the message key at the ask, 22 how long that key is kept (ms),
--   23 '1' while the ask is still pending (its send not yet ended).
-- Returns {'ok', version, position} / {'again', version, 0} / {'conflict', version, 0}.
local got = redis.call('HMGET', KEYS[1], 'v', 'op')
if not got[1] then return {'missing', -1, 0} end
local v = tonumber(got[1])
if got[2] == ARGV[3] then return {'again', v, 0} end
if v ~= tonumber(ARGV[1]) then return {'conflict', v, 0} end
v = v + 1
redis.call('HSET', KEYS[1], 'doc', ARGV[2], 'v', v, 'op', ARGV[3])
local id = ARGV[4]
if ARGV[5] == '1' then
  redis.call('ZADD', KEYS[2], redis.call('HGET', KEYS[1], 'at') or 0, id)
else
  redis.call('ZREM', KEYS[2], id)
  if tonumber(ARGV[7]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[7]) end
end
if ARGV[6] ~= '' then
  redis.call('ZADD', KEYS[3], ARGV[6], id)
else
  redis.call('ZREM', KEYS[3], id)
end
if ARGV[8] ~= '' then
  redis.call('SET', KEYS[4], ARGV[8], 'PXAT', ARGV[20])
  redis.call('ZADD', KEYS[5], ARGV[10], ARGV[9])
  redis.call('PEXPIREAT', KEYS[5], ARGV[20])
  redis.call('ZADD', KEYS[6], ARGV[10], ARGV[9])
end
if ARGV[11] ~= '' then
  redis.call('HSET', KEYS[7], ARGV[11], ARGV[12])
  redis.call('PEXPIRE', KEYS[7], ARGV[7])
end
if ARGV[13] ~= '' then
  redis.call('LPUSH', KEYS[8], ARGV[13])
  redis.call('LTRIM', KEYS[8], 0, 19)
end
if ARGV[21] == '1' then
  for i = 16, #KEYS - 2 do redis.call('SET', KEYS[i], id, 'PX', ARGV[22]) end
end
if ARGV[23] ~= '1' then redis.call('ZREM', KEYS[15], id) end
local position = 0
if ARGV[14] ~= '' then
  local room = inbox_room(ARGV[15], ARGV[16], ARGV[17], ARGV[18], KEYS[9], KEYS[10])
  position = inbox_put(KEYS[11], KEYS[12], ARGV[14], KEYS[13], ARGV[19], KEYS[14], room)
end
return {'ok', v, position}
