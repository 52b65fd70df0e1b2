-- Record what a GitHub webhook showed of one issue number (workers/stores/issues.py): the
-- newest version by GitHub's own update time wins. Observations that conflict (one number
-- seen as an Issue and as a pull request, or two different versions with the same update
-- time) set reconcile to '1'; a newer consistent version clears it.
-- KEYS: 1 the number's observation hash
-- ARGV: 1 kind (issue or pull_request), 2 open or closed, 3 title, 4 sourceUpdatedAtMs,
--       5 observedAtMs
-- Returns {'observed'} (written) | {'older'} | {'duplicate'} (nothing new; a conflict noted)
local known = redis.call('HGET', KEYS[1], 'sourceUpdatedAtMs')
local kind = redis.call('HGET', KEYS[1], 'kind')
local mixed = kind and kind ~= ARGV[1]
if known and tonumber(known) >= tonumber(ARGV[4]) then
  local same = not mixed and redis.call('HGET', KEYS[1], 'githubState') == ARGV[2]
    and redis.call('HGET', KEYS[1], 'title') == ARGV[3]
  if mixed or (tonumber(known) == tonumber(ARGV[4]) and not same) then
    redis.call('HSET', KEYS[1], 'reconcile', '1')
  end
  if tonumber(known) == tonumber(ARGV[4]) then return {'duplicate'} end
  return {'older'}
end
redis.call('HSET', KEYS[1], 'kind', ARGV[1], 'githubState', ARGV[2], 'title', ARGV[3],
  'sourceUpdatedAtMs', ARGV[4], 'observedAtMs', ARGV[5], 'reconcile', mixed and '1' or '0')
return {'observed'}
