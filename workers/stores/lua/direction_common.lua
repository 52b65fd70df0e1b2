-- Shared by the direction scripts (workers/stores/decisions.py): scripts.py puts this text in
-- front of each of them (Redis has no script-to-script calls).

-- The answer to a request already made under this receipt key: {'duplicate', receipt} for
-- the same input (`fingerprint`, 64 hex, leads the stored value), {'conflict', receipt} for
-- another; nil for a new request.
local function direction_replay(receipt_key, fingerprint)
  local receipt = redis.call('GET', receipt_key)
  if not receipt then return nil end
  if string.sub(receipt, 1, 64) == fingerprint then
    return {'duplicate', string.sub(receipt, 65)}
  end
  return {'conflict', string.sub(receipt, 65)}
end

-- Why a direction takes no more votes at `now`: {'missing'} (no such direction) or
-- {'closed', deadline, 1 when a result is recorded else 0}; nil while voting is open.
local function direction_shut(direction_key, now)
  local deadline = redis.call('HGET', direction_key, 'deadlineMs')
  if not deadline then return {'missing'} end
  local recorded = redis.call('HEXISTS', direction_key, 'result')
  if recorded == 1 or tonumber(now) >= tonumber(deadline) then
    return {'closed', deadline, recorded}
  end
  return nil
end
