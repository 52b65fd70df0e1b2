-- Record one KPI sample, once: its id hash entry and its place in the by-time zset together.
-- KEYS[1] the objective's samples zset (member: sample JSON, score: atMs)
-- KEYS[2] the objective's ids hash (id -> sample JSON)
-- ARGV[1] the sample id (`{atMs}:{source}`), ARGV[2] its JSON, ARGV[3] atMs, ARGV[4] how many
-- samples to keep. Returns {verb, stored JSON}: recorded, duplicate (same JSON) or conflict.
-- Trimming drops the oldest samples and their ids, so the hash never outgrows the zset.
local existing = redis.call('HGET', KEYS[2], ARGV[1])
if existing then
  if existing == ARGV[2] then
    return {'duplicate', existing}
  end
  return {'conflict', existing}
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[4])
if over > 0 then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, over - 1, 'WITHSCORES')
  for i = 1, #oldest, 2 do
    local source = cjson.decode(oldest[i]).source
    redis.call('HDEL', KEYS[2], string.format('%d:%s', tonumber(oldest[i + 1]), source))
  end
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, over - 1)
end
return {'recorded', ARGV[2]}
