-- Revoke one consent, with everything that makes true at once: the consent record marked
-- revoked, the ask it was given on showing the revocation on its answer (when that ask is
-- still kept), and the seat's `consent_revoked` inbox item. Compare-and-set on both: the
-- consent record must still be the text read (so two revocations racing make one, and a
-- revoked consent is never revoked again), and the ask still the version read.
-- KEYS: 1 the consent doc (string), 2 the ask's hash, 3 stats hash, 4 ledger seats set,
--   5 inbox stream, 6 inbox meta, 7 seat counters, 8 seat ledger stream.
--       and last the work controller's wake keys (controller_wake.lua).
-- ARGV: 1 the consent doc as read, 2 the consent doc revoked, 3 the ask's version as read
--   ('' when no ask is written), 4 the ask's new doc, 5 op id, 6 inbox item,
--   7..10 the inbox room (inbox_room), 11 the seat id, 12 until when the consent doc is kept
--   (ms since the epoch: its expiry and the retention after it, as when it was written).
-- Returns {'ok', position} / {'again', 0} (this very revocation is already written: the same
--   person at the same ms, a try sent again after its reply was lost) / {'conflict', 0}
--   (either changed since it was read; read again) / {'missing', 0} (the consent is gone).
local doc = redis.call('GET', KEYS[1])
if not doc then return {'missing', 0} end
if doc == ARGV[2] then return {'again', 0} end
if doc ~= ARGV[1] then return {'conflict', 0} end
if ARGV[3] ~= '' then
  local v = redis.call('HGET', KEYS[2], 'v')
  if not v or tonumber(v) ~= tonumber(ARGV[3]) then return {'conflict', 0} end
  redis.call('HSET', KEYS[2], 'doc', ARGV[4], 'v', tonumber(v) + 1, 'op', ARGV[5])
end
redis.call('SET', KEYS[1], ARGV[2], 'PXAT', ARGV[12])
local room = inbox_room(ARGV[7], ARGV[8], ARGV[9], ARGV[10], KEYS[3], KEYS[4])
local position = inbox_put(KEYS[5], KEYS[6], ARGV[6], KEYS[7], ARGV[11], KEYS[8], room)
return {'ok', position}
