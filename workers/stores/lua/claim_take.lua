-- Take or renew a COLLABORATE item's claim on its subject (the item itself, or the issue
-- number it names), or take it over from an owner whose lease lapsed. One script on the one
-- owner record (subject_common), so two seats can never both own the subject, whichever door
-- they came through: another seat's live lease, or a standing issue claim (no untilMs: it
-- never lapses), is `held`.
-- KEYS: 1 subject hash, 2 subject participants hash, 3 subject log stream, 4 the owner's
--       open-items zset
-- ARGV: 1 item id, 2 taker seat, 3 owner seat (whose backlog holds the item), 4 nowMs,
--       5 lease ms, 6 retention ms (the keys are kept this long after the lease ends; '0' =
--       they never expire: an issue), 7 log cap (entries), 8 the subject ('item:<id>' |
--       'issue:<n>'), 9 the issue number ('' = none), 10 the receipt's action (take),
--       11 the generation the caller expects ('' = any)
-- Returns {verb, owner, untilMs, sinceMs, previous, generation}: 'taken' | 'renewed' |
-- 'takeover' (written, logged with a receipt), 'held' (another seat owns it: that owner, its
-- untilMs ('' = a standing claim) and the generation, nothing written) | 'stale' (the
-- generation is not the expected one: the owner, its untilMs and the generation, nothing
-- written) | 'not_open' (the item is not open on the owner's backlog, nothing written).
if not redis.call('ZSCORE', KEYS[4], ARGV[1]) then return {'not_open', '', '', '', '', ''} end
local hash, members, log = KEYS[1], KEYS[2], KEYS[3]
local item, seat, ownerId = ARGV[1], ARGV[2], ARGV[3]
local now, retention = tonumber(ARGV[4]), tonumber(ARGV[6])
local owner = subject_owner(hash)
local lease = redis.call('HGET', hash, 'untilMs')
local generation = subject_generation(hash)
if ARGV[11] ~= '' and tonumber(ARGV[11]) ~= generation then
  return {'stale', owner, lease or '', '', '', tostring(generation)}
end
local since = now
local verb = 'taken'
local previous = ''
local untilMs = tostring(now + tonumber(ARGV[5]))
if owner == seat then
  verb = 'renewed'
  since = tonumber(redis.call('HGET', hash, 'sinceMs') or now)
  if not lease then
    untilMs = '' -- a standing claim: it never lapses, and a renewal never shortens it
  elseif tonumber(lease) > tonumber(untilMs) then
    untilMs = lease -- a renewal never shortens the lease
  end
  redis.call('HSET', hash, 'owner', seat, 'refreshedAtMs', now)
  redis.call('HDEL', hash, 'holder')
  if untilMs ~= '' then
    redis.call('HSET', hash, 'untilMs', untilMs, 'item', item, 'ownerId', ownerId)
  end
elseif owner ~= '' then
  if not lease or tonumber(lease) > now then
    return {'held', owner, lease or '', '', '', tostring(generation)}
  end
  verb = 'takeover'
  previous = owner
end
if verb ~= 'renewed' then
  generation = generation + 1
  subject_own(hash, members, seat, generation, now, untilMs, item, ownerId)
end
local r = {outcome = verb, action = ARGV[10], subject = ARGV[8], itemId = item, seatId = seat,
  owner = seat, generation = generation, atMs = now, changed = true,
  clientRequestId = cjson.null, untilMs = untilMs ~= '' and tonumber(untilMs) or cjson.null}
if ARGV[9] ~= '' then r.issueNumber = tonumber(ARGV[9]) end
if previous ~= '' then r.previousOwner = previous end
subject_log(log, ARGV[7], verb, seat, previous, now, untilMs, generation, cjson.encode(r))
if retention > 0 then
  local keep = tonumber(untilMs) - now + retention
  redis.call('PEXPIRE', hash, keep)
  redis.call('PEXPIRE', log, keep)
end
return {verb, seat, untilMs, tostring(since), previous, tostring(generation)}
