-- The counts guard_reserve.lua would judge an ask on, read without reserving anything (the
-- engagement stage judges its plan on them once; the guardrail stage then reserves
-- atomically). Read-only: an expired reservation (its worker died before sending) is not
-- purged here but left out of every count, as guard_reserve.lua would purge it first.
-- K: 1 by-dedupe-key, 2 by-work, 3 by-seat, 4 rooms-of-seat, 5 pending zset,
--    6..5+n by-target (one per target, in target order).
-- A: 1 nowMs, 2 n targets.
-- Returns {sameKey, lastSameAtMs|-1, work, seat, rooms, targetCount1, ...}.
local function guard_count(K, A)
  local DAY, HOUR = 86400000, 3600000
  local now = tonumber(A[1])
  local n = tonumber(A[2])
  local floors = {now - DAY, now - HOUR, now - DAY}
  local windows = {K[2], K[3], K[4]}
  for i = 1, n do
    windows[3 + i] = K[5 + i]
    floors[3 + i] = now - DAY
  end
  local counts = {}
  for i, key in ipairs(windows) do
    counts[i] = redis.call('ZCOUNT', key, '(' .. floors[i], '+inf')
  end
  local expired = redis.call('ZRANGEBYSCORE', K[5], '-inf', now)
  local gone = {}
  if #expired > 0 then
    for _, e in ipairs(expired) do gone[e] = true end
    for i, key in ipairs(windows) do
      local scores = redis.call('ZMSCORE', key, unpack(expired))
      for _, sc in ipairs(scores) do
        if sc and tonumber(sc) > floors[i] then counts[i] = counts[i] - 1 end
      end
    end
  end
  local same, last = 0, -1
  local entries = redis.call('ZRANGE', K[1], 0, -1, 'WITHSCORES')
  for i = 1, #entries, 2 do
    if not gone[entries[i]] then
      same = same + 1
      local at = tonumber(entries[i + 1])
      if at > last then last = at end
    end
  end
  local reply = {same, last}
  for i = 1, #counts do reply[2 + i] = counts[i] end
  return reply
end
