-- Write seats' controller records, each only if nobody wrote it since it was read: one
-- compare-and-set per seat on its revision, all in one step (the work controller's tick
-- commits every seat it changed in one call, a turn's start or outcome commits one).
-- KEYS: the seats' run hashes
-- ARGV: per key: the revision it was read at ('0' = absent), its doc (no TTL: one record per
--       seat of the org, and a seat's streak must outlive any quiet spell)
-- Returns one flag per key: 1 written (its revision is now one more), 0 conflict (unchanged)
local out = {}
for i, key in ipairs(KEYS) do
  local expected = ARGV[2 * i - 1]
  local current = redis.call('HGET', key, 'rev') or '0'
  if current == expected then
    redis.call('HSET', key, 'rev', tonumber(current) + 1, 'doc', ARGV[2 * i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
