-- Take or renew one item's exclusive claim, or take it over from a holder whose lease lapsed.
-- One script, so two seats can never both hold it: a live lease of another seat is `held`.
-- KEYS: 1 claim hash, 2 claim history stream, 3 the owner's open-items zset
-- ARGV: 1 item id, 2 taker seat, 3 owner seat, 4 nowMs, 5 lease ms, 6 retention ms (kept
--       after the lease ends), 7 history cap (entries)
-- Returns {verb, holder, untilMs, sinceMs, previous}: 'taken' | 'renewed' | 'takeover'
-- (written, with the history), 'held' (another seat's live lease: its holder and untilMs,
-- nothing written) | 'not_open' (the item is not open on the owner's backlog, nothing written).
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then return {'not_open', '', '', '', ''} end
local now = tonumber(ARGV[4])
local holder = redis.call('HGET', KEYS[1], 'holder')
local held = tonumber(redis.call('HGET', KEYS[1], 'untilMs') or '0')
local since = now
local verb = 'taken'
local previous = ''
local untilMs = now + tonumber(ARGV[5])
if holder == ARGV[2] then
  verb = 'renewed'
  since = tonumber(redis.call('HGET', KEYS[1], 'sinceMs') or now)
  if held > untilMs then untilMs = held end -- a renewal never shortens the lease
elseif holder then
  if held > now then return {'held', holder, tostring(held), '', ''} end
  verb = 'takeover'
  previous = holder
end
redis.call('HSET', KEYS[1], 'holder', ARGV[2], 'ownerId', ARGV[3], 'sinceMs', since,
  'untilMs', untilMs)
redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[7], '*', 'event', verb, 'seatId', ARGV[2],
  'previous', previous, 'atMs', now, 'untilMs', untilMs)
local keep = untilMs - now + tonumber(ARGV[6])
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('PEXPIRE', KEYS[2], keep)
return {verb, ARGV[2], tostring(untilMs), tostring(since), previous}
