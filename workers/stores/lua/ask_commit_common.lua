-- Write one change of an ask, if nobody changed it since it was read (compare-and-set on its
-- version), with everything that change makes true at once: its place in the open and due
-- indexes, and optionally a consent record, a decline record, the seat's brake window entry
-- and the seat's inbox item (so an answer is never recorded without the seat hearing of it,
-- nor told twice). A commit sent again after a lost reply is answered 'again' (its op id).
-- K: 1 the ask's hash, 2 open asks (zset), 3 due asks (zset), 4 consent doc (string),
--   5 the work's consents (zset), 6 all consents (zset), 7 the work's declines (hash),
--   8 the seat's concluded asks (list), 9 stats hash, 10 ledger seats set,
--   11 inbox stream, 12 inbox meta, 13 seat counters, 14 seat ledger stream,
--   15 the pending asks (zset), 16.. the message it landed as, and its thread's root
--   (strings: its id, for replies), then the work controller's wake keys (controller_wake.lua).
-- A: 1 expected version, 2 new doc, 3 op id, 4 ask id, 5 open (1/0), 6 deadline ms or '',
--   7 keep ms once final (0: no expiry), 8 consent doc or '', 9 consent id,
--   10 consent expires at ms, 11 decline scope field or '', 12 decline doc,
--   13 concluded entry or '', 14 inbox item or '', 15..18 the inbox room (inbox_room),
--   19 the seat id, 20 the consent doc's own expiry (ms since the epoch),
--   21 '1' to point the message key at the ask, 22 how long that key is kept (ms),
--   23 '1' while the ask is still pending (its send not yet ended).
-- Returns {'ok', version, position} / {'again', version, 0} / {'conflict', version, 0}.
local function ask_commit(K, A)
  local got = redis.call('HMGET', K[1], 'v', 'op')
  if not got[1] then return {'missing', -1, 0} end
  local v = tonumber(got[1])
  if got[2] == A[3] then return {'again', v, 0} end
  if v ~= tonumber(A[1]) then return {'conflict', v, 0} end
  v = v + 1
  redis.call('HSET', K[1], 'doc', A[2], 'v', v, 'op', A[3])
  local id = A[4]
  if A[5] == '1' then
    redis.call('ZADD', K[2], redis.call('HGET', K[1], 'at') or 0, id)
  else
    redis.call('ZREM', K[2], id)
    if tonumber(A[7]) > 0 then redis.call('PEXPIRE', K[1], A[7]) end
  end
  if A[6] ~= '' then
    redis.call('ZADD', K[3], A[6], id)
  else
    redis.call('ZREM', K[3], id)
  end
  if A[8] ~= '' then
    redis.call('SET', K[4], A[8], 'PXAT', A[20])
    redis.call('ZADD', K[5], A[10], A[9])
    redis.call('PEXPIREAT', K[5], A[20])
    redis.call('ZADD', K[6], A[10], A[9])
  end
  if A[11] ~= '' then
    redis.call('HSET', K[7], A[11], A[12])
    redis.call('PEXPIRE', K[7], A[7])
  end
  if A[13] ~= '' then
    redis.call('LPUSH', K[8], A[13])
    redis.call('LTRIM', K[8], 0, 19)
  end
  if A[21] == '1' then
    for i = 16, #K - 2 do redis.call('SET', K[i], id, 'PX', A[22]) end
  end
  if A[23] ~= '1' then redis.call('ZREM', K[15], id) end
  local position = 0
  if A[14] ~= '' then
    local room = inbox_room(A[15], A[16], A[17], A[18], K[9], K[10])
    position = inbox_put(K[11], K[12], A[14], K[13], A[19], K[14], room)
  end
  return {'ok', v, position}
end
