-- Take one request from a source's rate budget: GCRA, the token bucket kept as ONE number per
-- source (its theoretical arrival time, TAT), so a bucket is one zset member, not a hash.
-- A source may run `burst` requests ahead of its steady rate; each request moves its TAT on by
-- one interval. Time is Redis's own (TIME), never an ingress process's clock.
-- KEYS: 1 the zset source -> TAT (microseconds). ARGV: 1 source, 2 interval us (1e6 / rate),
--       3 burst (requests).
-- Returns {'allowed', 0} (taken) or {'limited', retryAfterUs} (nothing written for it).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[2])
local tolerance = interval * (tonumber(ARGV[3]) - 1)
-- A TAT in the past is a full bucket, the same as none: dropping them bounds the zset by
-- the sources active within the last burst's worth of time.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local tat = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or now)
if tat < now then
  tat = now
end
if tat - now > tolerance then
  return {'limited', math.ceil(tat - now - tolerance)}
end
redis.call('ZADD', KEYS[1], tat + interval, ARGV[1])
return {'allowed', 0}
