-- Record one turn cost frame for a seat, once: the frame's JSON under its id, the id in the
-- seat's zset scored by atMs, the seat in the index of seats with frames, and (for a frame
-- of an objective) `seat US id` in the objective's zset scored by atMs; then trim.
-- KEYS: 1 frames zset (id -> atMs), 2 ids hash (id -> frame JSON), 3 index set of seats,
--       4 the objective's zset (seat US id -> atMs)
-- ARGV: 1 frame id, 2 frame JSON, 3 atMs, 4 oldest atMs kept (older is trimmed),
--       5 most frames kept per seat, 6 seat id, 7 '1' when the frame names an objective,
--       8 its member in KEYS[4] (seat US frame id)
-- Returns {'recorded'} | {'duplicate'} | {'conflict', stored JSON} | {'expired'}; only
-- 'recorded' writes anything.
local stored = redis.call('HGET', KEYS[2], ARGV[1])
if stored then
  if stored == ARGV[2] then return {'duplicate'} end
  return {'conflict', stored}
end
if tonumber(ARGV[3]) < tonumber(ARGV[4]) then return {'expired'} end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[6])
if ARGV[7] == '1' then
  redis.call('ZADD', KEYS[4], ARGV[3], ARGV[8])
  local stale = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. ARGV[4])
  for i = 1, #stale, 1000 do
    redis.call('ZREM', KEYS[4], unpack(stale, i, math.min(i + 999, #stale)))
  end
end
-- Retention: frames older than the horizon, then the oldest beyond the per-seat cap.
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4])
local extra = redis.call('ZCARD', KEYS[1]) - #old - tonumber(ARGV[5])
if extra > 0 then
  local oldest = redis.call('ZRANGE', KEYS[1], #old, #old + extra - 1)
  for _, id in ipairs(oldest) do old[#old + 1] = id end
end
for i = 1, #old, 1000 do
  local chunk = {unpack(old, i, math.min(i + 999, #old))}
  redis.call('ZREM', KEYS[1], unpack(chunk))
  redis.call('HDEL', KEYS[2], unpack(chunk))
end
return {'recorded'}
