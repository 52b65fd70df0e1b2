-- Move an ask from `reserved` to `sending`, recording the intent BEFORE the wire call.
-- Given the send stage's start (a first delivery's: workers/stages/base.py `Start`), it runs
-- that first (stage_start.lua) and touches nothing more unless the start is admitted.
-- K: 1 op hash, 2 pending zset, 3 journal entry, [4..10 the start's 7 keys, when given].
-- A: 1 nowMs ('' = Redis TIME), 2 fencing token, 3 lease ms, 4 opId, 5 the start's
--    arguments (a JSON array of strings; '' or absent = no start).
-- Returns {verb, atMs|state, attempt}: go | reconcile (a previous try may have sent) | busy
-- (another worker holds a live lease) | expired (re-check the guardrails) | done (final) |
-- missing. `attempt` is the op's own: the ask's idempotency id is built from it, never from
-- the message, which may predate a re-reservation. Or {'start', verb, n} when a start was
-- given and not admitted (stage_start's {'dead', deliveries} or {'done', state}).
local function send_begin(K, A)
  if A[5] and A[5] ~= '' then
    local S = {}
    for i = 1, 7 do S[i] = K[3 + i] end
    local started = stage_start(S, cjson.decode(A[5]))
    if started[1] ~= 'run' then return {'start', started[1], started[2]} end
  end
  local now = tonumber(A[1])
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local state = redis.call('HGET', K[1], 'state')
  if not state then return {'missing', '', ''} end
  local attempt = redis.call('HGET', K[1], 'attempt') or ''
  if state == 'reserved' then
    if tonumber(redis.call('HGET', K[1], 'expiresAtMs')) <= now then
      local idx = redis.call('HGET', K[1], 'indexes')
      if idx then
        for _, k in ipairs(cjson.decode(idx)) do redis.call('ZREM', k, A[4]) end
      end
      redis.call('HSET', K[1], 'state', 'expired')
      redis.call('ZREM', K[2], A[4])
      return {'expired', '', attempt}
    end
    redis.call('HSET', K[1], 'state', 'sending', 'token', A[2], 'leaseUntilMs',
      now + tonumber(A[3]), 'sendingAtMs', now, 'begunAs', 'go')
    redis.call('ZREM', K[2], A[4])
    if redis.call('EXISTS', K[3]) == 1 then
      redis.call('HSET', K[3], 'state', 'sending', 'updatedAtMs', now)
    end
    return {'go', redis.call('HGET', K[1], 'atMs'), attempt}
  end
  if state == 'sending' or state == 'unknown' then
    -- The same token again is this very call re-sent after a lost reply: answer it the same
    -- (a try that began in doubt must still reconcile; an older op without `begunAs` too).
    if state == 'sending' and redis.call('HGET', K[1], 'token') == A[2] then
      local verb = redis.call('HGET', K[1], 'begunAs') or 'reconcile'
      return {verb, redis.call('HGET', K[1], 'atMs'), attempt}
    end
    local lease = tonumber(redis.call('HGET', K[1], 'leaseUntilMs') or '0')
    if state == 'sending' and lease > now then return {'busy', tostring(lease), attempt} end
    -- The reconciling try is a send in flight again: under its lease, so that a concurrent
    -- try is `busy` (not a second reconcile that may post twice), and abandonable again.
    redis.call('HSET', K[1], 'state', 'sending', 'token', A[2], 'leaseUntilMs',
      now + tonumber(A[3]), 'begunAs', 'reconcile')
    return {'reconcile', redis.call('HGET', K[1], 'atMs'), attempt}
  end
  if state == 'expired' then return {'expired', '', attempt} end
  return {'done', state, attempt}
end
