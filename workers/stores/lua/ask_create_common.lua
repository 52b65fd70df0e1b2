-- Record an ask once, before its send posts anything: its document, and its place in every
-- index (all asks, its seat's, each target's, its work's, the open ones, the latest ask under
-- its dedupe key). An ask already recorded is returned as it stands (a redelivered send).
-- K: 1 the ask's hash, 2 all asks (zset), 3 the seat's (zset), 4 the work's (zset),
--   5 the open asks (zset), 6 the dedupe key's asks (zset by attempt), 7 the escalated ask's
--   escalations (set; written only for an escalation's own ask), 8.. each further index the
--   ask is listed in (zset): the pending asks, each target's, and the GitHub item's it is
--   about.
-- A: 1 the document (JSON), 2 created at ms, 3 the ask id, 4 its attempt, 5 '1' for an
--   escalation's own ask, 6 how long the work's and the dedupe key's indexes are kept (ms).
-- Returns {'new' or 'exists', doc, the ask of the latest earlier attempt under its dedupe key
-- or ''} (also when it exists: a redelivered send still ends the ask it supersedes).
local function ask_create(K, A)
  local before = redis.call('ZREVRANGEBYSCORE', K[6], '(' .. A[4], '-inf', 'LIMIT', 0, 1)[1]
    or ''
  local existing = redis.call('HGET', K[1], 'doc')
  if existing then return {'exists', existing, before} end
  redis.call('HSET', K[1], 'doc', A[1], 'v', 0, 'at', A[2])
  local at, id = A[2], A[3]
  for i = 2, 5 do redis.call('ZADD', K[i], at, id) end
  for i = 8, #K do redis.call('ZADD', K[i], at, id) end
  if A[5] == '1' then
    redis.call('SADD', K[7], id)
    redis.call('PEXPIRE', K[7], A[6])
  end
  -- The dedupe key's asks by attempt: the latest attempt is its highest score.
  redis.call('ZADD', K[6], A[4], id)
  -- An index of one work or one dedupe key lives as long as its newest ask could be kept.
  redis.call('PEXPIRE', K[4], A[6])
  redis.call('PEXPIRE', K[6], A[6])
  return {'new', A[1], before}
end
