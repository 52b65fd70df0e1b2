-- What the ask record holds that bears on one engaging plan, read at once: the latest ask
-- under its dedupe key (its document and version), the work's newest 50 consents, its
-- declines, and the seat's brake. The latest ask's hash and the consents' documents are
-- named by the ids the indexes hold (their key prefixes are given).
-- K: 1 the dedupe key's asks (zset by attempt), 2 the work's consents (zset), 3 the work's
--    declines (hash), 4 the seat's brake (string).
-- A: 1 the prefix of an ask's hash key, 2 the prefix of a consent's key.
-- Returns {latest doc or '', its version or '', {consent docs}, {decline docs}, brake or ''}
-- (a consent id whose document has expired is left out).
local function ask_view(K, A)
  local doc, v = '', ''
  local latest = redis.call('ZREVRANGE', K[1], 0, 0)[1]
  if latest then
    local got = redis.call('HMGET', A[1] .. latest, 'doc', 'v')
    if got[1] then doc, v = got[1], got[2] or '0' end
  end
  local consents = {}
  for _, id in ipairs(redis.call('ZREVRANGE', K[2], 0, 49)) do
    local c = redis.call('GET', A[2] .. id)
    if c then consents[#consents + 1] = c end
  end
  return {doc, v, consents, redis.call('HVALS', K[3]), redis.call('GET', K[4]) or ''}
end
