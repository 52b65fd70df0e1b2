-- A beat-driven tick finished (workers/stores/ticks.py): KEYS[1] the ticks hash, ARGV[1] the
-- tick's name, ARGV[2] when it finished (ms). Kept only when newer than what is there: a slow
-- tick that ends after a newer one does not turn the clock back (HSET has no GT).
local old = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > old then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  return 1
end
return 0
