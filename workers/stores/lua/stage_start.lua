-- A worker's start of a stage's message (delivery_count.lua runs it alone; guard_reserve.lua,
-- and for a first delivery decision_record.lua and send_begin.lua, run it first, so that the
-- start and the stage's own first write are one script).
-- K: the start's 7 keys, A: its arguments, both as delivery_count.lua documents them.
-- Returns {'run', deliveries} | {'dead', deliveries} | {'done', state}.
local function stage_start(K, A)
  local state = redis.call('HGET', K[2], 'state')
  if state == 'dead' then return {'done', state} end
  local counted = A[11] == '1'
  local reason, err = 'worker_lost_loop', A[9]
  if not counted then
    local copies = tonumber(redis.call('HGET', K[1], A[12]) or '0')
    if copies > 0 then
      counted = true
      reason, err = 'stuck', A[14]
      redis.call('HSET', K[1], A[12], copies - 1)
    end
  end
  local n = tonumber(redis.call('HGET', K[1], A[1]) or '1')
  if counted then
    local max = tonumber(A[2])
    if n >= max then
      local own = {}
      for s in string.gmatch(A[10], '[^,]+') do own[s] = true end
      if state and not own[state] then return {'done', state} end
      local verdict = dead_letter(
        {entry = K[2], open = K[3], failed = K[4], dlq = K[5], record = K[6]},
        {trackingId = A[5], dlqId = A[6], stage = A[1], task = A[7],
         reason = reason, error = err, deliveries = n, now = A[4],
         message = A[8], closeAs = 'dead', finals = set_of(A, 15)})
      if verdict ~= 'dead' and verdict ~= 'missing' then return {'done', verdict} end
      return {'dead', n}
    end
    n = n + 1
    redis.call('HSET', K[1], A[1], n)
    redis.call('PEXPIRE', K[1], A[3])
  end
  redis.call('SET', K[7], A[5], 'PX', A[13])
  return {'run', n}
end
