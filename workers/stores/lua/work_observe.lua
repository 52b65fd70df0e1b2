-- Record one observed GitHub work summary for find_work (workers/stores/work.py), in one step:
-- the newest version by GitHub's own update time wins; at the same update time the later
-- arrival wins unless it is the same content (a redelivery). The item leaves every index it
-- was in (its stored `indexes`) and enters the new ones, so a state, label or milestone
-- change moves it atomically. A closed or removed item is dropped at its drop time (swept
-- here, a few at a time); beyond the caps the earliest to drop, and the lowest open numbers,
-- are dropped first.
-- KEYS: 1 the item's hash, 2 the kind's expiry zset (item key -> drop at ms),
--       3 the kind's open index
-- ARGV: 1 number, 2 sourceUpdatedAtMs, 3 fingerprint, 4 doc (JSON), 5 index keys (JSON list;
--       empty for a removed item), 6 draft, 7 merged (each '1', '0', or '' when the payload
--       did not say: the known value stays), 8 drop at ms ('' for an open item), 9 nowMs,
--       10 cap of closed and removed items, 11 cap of open items, 12 sweep batch
-- Returns {'observed'} (written) | {'older'} | {'duplicate'} (nothing written)
local known = redis.call('HGET', KEYS[1], 'sourceUpdatedAtMs')
if known then
  if tonumber(known) > tonumber(ARGV[2]) then return {'older'} end
  if tonumber(known) == tonumber(ARGV[2])
    and redis.call('HGET', KEYS[1], 'fingerprint') == ARGV[3] then
    return {'duplicate'}
  end
end

local function unindex(key)
  local raw = redis.call('HGET', key, 'indexes')
  if raw then
    for _, index in ipairs(cjson.decode(raw)) do redis.call('ZREM', index, key) end
  end
end

local function drop(key)
  unindex(key)
  redis.call('DEL', key)
  redis.call('ZREM', KEYS[2], key)
end

unindex(KEYS[1])
local number = tonumber(ARGV[1])
for _, index in ipairs(cjson.decode(ARGV[5])) do redis.call('ZADD', index, number, KEYS[1]) end
redis.call('HSET', KEYS[1], 'sourceUpdatedAtMs', ARGV[2], 'fingerprint', ARGV[3],
  'doc', ARGV[4], 'indexes', ARGV[5])
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'draft', ARGV[6]) end
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'merged', ARGV[7]) end
if ARGV[8] == '' then
  redis.call('ZREM', KEYS[2], KEYS[1])
else
  redis.call('ZADD', KEYS[2], ARGV[8], KEYS[1])
end

local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[9], 'LIMIT', 0,
  tonumber(ARGV[12]))
for _, key in ipairs(due) do drop(key) end
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[10])
if over > 0 then
  for _, key in ipairs(redis.call('ZRANGE', KEYS[2], 0, over - 1)) do drop(key) end
end
over = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[11])
if over > 0 then
  for _, key in ipairs(redis.call('ZRANGE', KEYS[3], 0, over)) do
    if over > 0 and key ~= KEYS[1] then
      drop(key)
      over = over - 1
    end
  end
end
return {'observed'}
