-- Record an ask's final outcome once: the op state, the ledger row, the journal entry (its
-- payload trimmed: journal_common.lua).
-- A definite failure releases the reservation (it never reached anyone); `engaged` keeps it,
-- and so does `shadowed` (shadow mode counts what it would have sent, as `on` would).
-- A message that went out is indexed by where it is (KEYS 6: its channel and message id), so
-- a reply in its thread can be traced to the work it asked about (a direction's post, whose
-- replies are votes: workers/stages/directions.py).
-- An engaged send also records what it taught (the seat joins the sets of KEYS 7..: the
-- thread it spoke in, the channel), in the same step as its outcome.
-- KEYS: 1 op hash, 2 journal entry, 3 journal open index, 4 seat ledger stream, 5 seats set,
--       6 the sent message's index hash, 7.. the fact sets the seat joins when engaged.
-- ARGV: 1 outcome (engaged|shadowed|send_failed|send_blocked|refused), 2 ledger row JSON,
--       3 fencing token ('' = no check), 4 nowMs, 5 trackingId, 6 seatId, 7 opId,
--       8 messageId, 9 channelId, 10 idempotencyId, 11 retention ms of a final journal entry,
--       12 ledger stream cap, 13 workId, 14 how long the sent message's index is kept (ms),
--       15 how long a ledger row is kept (ms): older rows are trimmed as a row is added,
--       16 how long a fact is kept (ms).
-- Returns {'ok'|'done'|'stale', state}.
local state = redis.call('HGET', KEYS[1], 'state')
if state == 'engaged' or state == 'send_failed' or state == 'send_blocked'
   or state == 'shadowed' then
  return {'done', state}
end
if not state then return redis.error_reply('NOOP op ' .. ARGV[7] .. ' does not exist') end
if ARGV[1] == 'refused' then
  if state ~= 'refused' then
    return redis.error_reply('BADSTATE op ' .. ARGV[7] .. ' is ' .. state .. ', not refused')
  end
elseif ARGV[3] ~= '' and redis.call('HGET', KEYS[1], 'token') ~= ARGV[3] then
  return {'stale', state}
end
if ARGV[1] == 'send_failed' or ARGV[1] == 'send_blocked' then
  local idx = redis.call('HGET', KEYS[1], 'indexes')
  if idx then
    for _, k in ipairs(cjson.decode(idx)) do redis.call('ZREM', k, ARGV[7]) end
  end
end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'finalAtMs', ARGV[4], 'messageId', ARGV[8],
  'channelId', ARGV[9], 'idempotencyId', ARGV[10])
if ARGV[1] == 'engaged' and ARGV[8] ~= '' then
  redis.call('HSET', KEYS[6], 'workId', ARGV[13], 'trackingId', ARGV[5], 'seatId', ARGV[6],
    'opId', ARGV[7])
  redis.call('PEXPIRE', KEYS[6], ARGV[14])
end
if ARGV[1] == 'engaged' then
  for i = 7, #KEYS do
    redis.call('SADD', KEYS[i], ARGV[6])
    redis.call('PEXPIRE', KEYS[i], ARGV[16])
  end
end
if redis.call('HSETNX', KEYS[1], 'logged', '1') == 1 then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[12], '*', 'row', ARGV[2])
  ledger_trim(KEYS[4], ARGV[15])
  redis.call('SADD', KEYS[5], ARGV[6])
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], 'state', ARGV[1], 'finalAtMs', ARGV[4], 'updatedAtMs', ARGV[4])
  journal_trim(KEYS[2])
  redis.call('ZREM', KEYS[3], ARGV[5])
  redis.call('PEXPIRE', KEYS[2], ARGV[11])
end
return {'ok', ARGV[1]}
