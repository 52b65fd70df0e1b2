-- Record an ask's final outcome once: the op state, the ledger row, the journal entry (its
-- payload trimmed: journal_common.lua).
-- A definite failure releases the reservation (it never reached anyone); `engaged` keeps it,
-- and so does `shadowed` (shadow mode counts what it would have sent, as `on` would).
-- A message that went out is indexed by where it is (KEYS 6: its channel and message id), so
-- a reply in its thread can be traced to the work it asked about (a direction's post, whose
-- replies are votes: workers/stages/directions.py).
-- An engaged send also records what it taught (the seat joins the sets of KEYS 7..: the
-- thread it spoke in, the channel), in the same step as its outcome.
-- K: 1 op hash, 2 journal entry, 3 journal open index, 4 seat ledger stream, 5 seats set,
--       6 the sent message's index hash, 7.. the fact sets the seat joins when engaged.
-- A: 1 outcome (engaged|shadowed|send_failed|send_blocked|refused), 2 ledger row JSON,
--       3 fencing token ('' = no check), 4 nowMs, 5 trackingId, 6 seatId, 7 opId,
--       8 messageId, 9 channelId, 10 idempotencyId, 11 retention ms of a final journal entry,
--       12 ledger stream cap, 13 workId, 14 how long the sent message's index is kept (ms),
--       15 how long a ledger row is kept (ms): older rows are trimmed as a row is added,
--       16 how long a fact is kept (ms).
-- Returns {'ok'|'done'|'stale', state}.
local function op_finish(K, A)
  local state = redis.call('HGET', K[1], 'state')
  if state == 'engaged' or state == 'send_failed' or state == 'send_blocked'
     or state == 'shadowed' then
    return {'done', state}
  end
  if not state then return redis.error_reply('NOOP op ' .. A[7] .. ' does not exist') end
  if A[1] == 'refused' then
    if state ~= 'refused' then
      return redis.error_reply('BADSTATE op ' .. A[7] .. ' is ' .. state .. ', not refused')
    end
  elseif A[3] ~= '' and redis.call('HGET', K[1], 'token') ~= A[3] then
    return {'stale', state}
  end
  if A[1] == 'send_failed' or A[1] == 'send_blocked' then
    local idx = redis.call('HGET', K[1], 'indexes')
    if idx then
      for _, k in ipairs(cjson.decode(idx)) do redis.call('ZREM', k, A[7]) end
    end
  end
  redis.call('HSET', K[1], 'state', A[1], 'finalAtMs', A[4], 'messageId', A[8],
    'channelId', A[9], 'idempotencyId', A[10])
  if A[1] == 'engaged' and A[8] ~= '' then
    redis.call('HSET', K[6], 'workId', A[13], 'trackingId', A[5], 'seatId', A[6],
      'opId', A[7])
    redis.call('PEXPIRE', K[6], A[14])
  end
  if A[1] == 'engaged' then
    for i = 7, #K do
      redis.call('SADD', K[i], A[6])
      redis.call('PEXPIRE', K[i], A[16])
    end
  end
  if redis.call('HSETNX', K[1], 'logged', '1') == 1 then
    redis.call('XADD', K[4], 'MAXLEN', '~', A[12], '*', 'row', A[2])
    ledger_trim(K[4], A[15])
    redis.call('SADD', K[5], A[6])
  end
  if redis.call('EXISTS', K[2]) == 1 then
    redis.call('HSET', K[2], 'state', A[1], 'finalAtMs', A[4], 'updatedAtMs', A[4])
    journal_trim(K[2])
    redis.call('ZREM', K[3], A[5])
    redis.call('PEXPIRE', K[2], A[11])
  end
  return {'ok', A[1]}
end
