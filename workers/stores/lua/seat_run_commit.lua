-- Write seats' controller records, each only if nobody wrote it since it was read: one
-- compare-and-set per seat on its revision, all in one step (a turn's start or outcome, an
-- operator's control). Each record written wakes its seat for the work controller
-- (controller_wake.lua): what changed may change its next decision. The controller's own
-- tick writes with controller_commit.lua instead, which sets the seats' next due times.
-- KEYS: the seats' run hashes, then the work controller's wake keys (due, clock)
-- ARGV: per run hash: the revision it was read at ('0' = absent), its doc (no TTL: one record
--       per seat of the org, and a seat's streak must outlive any quiet spell), the seat id
-- Returns one flag per run hash: 1 written (its revision is now one more), 0 conflict
local out = {}
for i = 1, #KEYS - 2 do
  local key = KEYS[i]
  local expected = ARGV[3 * i - 2]
  local current = redis.call('HGET', key, 'rev') or '0'
  if current == expected then
    redis.call('HSET', key, 'rev', tonumber(current) + 1, 'doc', ARGV[3 * i - 1])
    controller_wake(KEYS[#KEYS - 1], KEYS[#KEYS], ARGV[3 * i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
