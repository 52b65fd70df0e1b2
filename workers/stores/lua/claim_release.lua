-- Release a COLLABORATE item's claim on its subject (subject_common): its owner lets go, or
-- the item was closed. A close releases only the lease this item's claim took (the subject's
-- `item` is this one, or unrecorded): a standing issue claim, or a lease another item took
-- on the same issue, stays. A release is a new generation, logged with a receipt. An item's
-- hash keeps `ownerId`, so the item is still found by id; a later take is `taken`.
-- KEYS: 1 subject hash, 2 subject log stream
-- ARGV: 1 the releasing seat, 2 the owner it must be ('' = whoever holds this item's lease:
--       a close), 3 nowMs, 4 retention ms ('0' = the keys never expire: an issue), 5 log cap
--       (entries), 6 item id, 7 the subject ('item:<id>' | 'issue:<n>'), 8 the issue number
--       ('' = none), 9 the receipt's action (release or close), 10 the generation the
--       caller expects ('' = any)
-- Returns {verb, owner, generation}: 'released' (written, logged: the previous owner) |
-- 'not_holder' (another seat owns it: that owner) | 'stale' (the generation is not the
-- expected one) | 'none' (nobody owns it, or a close found no lease of this item's); only
-- 'released' writes anything.
local hash, log = KEYS[1], KEYS[2]
local owner = subject_owner(hash)
local generation = subject_generation(hash)
if ARGV[10] ~= '' and tonumber(ARGV[10]) ~= generation then
  return {'stale', owner, tostring(generation)}
end
if owner == '' then return {'none', '', tostring(generation)} end
if ARGV[2] ~= '' and owner ~= ARGV[2] then return {'not_holder', owner, tostring(generation)} end
if ARGV[2] == '' then
  local leased = redis.call('HGET', hash, 'item')
  if not redis.call('HGET', hash, 'untilMs') or (leased and leased ~= ARGV[6]) then
    return {'none', owner, tostring(generation)}
  end
end
local now, retention = tonumber(ARGV[3]), tonumber(ARGV[4])
generation = generation + 1
subject_drop(hash, generation, ARGV[8] == '')
local r = {outcome = 'released', action = ARGV[9],
  subject = ARGV[7], itemId = ARGV[6], seatId = ARGV[1], owner = cjson.null,
  previousOwner = owner, generation = generation, atMs = now, changed = true,
  clientRequestId = cjson.null}
if ARGV[8] ~= '' then r.issueNumber = tonumber(ARGV[8]) end
subject_log(log, ARGV[5], 'released', ARGV[1], owner, now, '', generation, cjson.encode(r))
if retention > 0 then
  redis.call('PEXPIRE', hash, retention)
  redis.call('PEXPIRE', log, retention)
end
return {'released', owner, tostring(generation)}
