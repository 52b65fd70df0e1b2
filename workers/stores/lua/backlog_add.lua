-- Add one item to a seat's backlog, once: its JSON under its id, the id in the seat's open
-- zset and in its objective's, scored by when it was added, the seat's work revision bumped
-- by one, and the item's seat in the org-wide owner index (the claim routes find an item by
-- its id alone there, in one lookup, however many seats the org has). The index keeps the
-- first seat an id was added to, as it keeps the item after its close: an item ends done on
-- its backlog, never removed, and a claim on a done item is still answered (`item_done`).
-- KEYS: 1 items hash (id -> item JSON, plus the revision field), 2 open zset (id -> addedAtMs),
--       3 the objective's open zset on this seat (id -> addedAtMs), 4 the owner index (hash:
--       item id -> seat id)
-- ARGV: 1 item id, 2 item JSON, 3 addedAtMs, 4 the revision's field name in KEYS[1], 5 seat id
-- Last among KEYS the work controller's wake keys, last among ARGV the seat id: a new item
-- wakes the seat (controller_wake.lua).
-- Returns {'added', revision} | {'duplicate', revision}; only 'added' writes anything.
if redis.call('HGET', KEYS[1], ARGV[1]) then
  return {'duplicate', tonumber(redis.call('HGET', KEYS[1], ARGV[4]) or 0)}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('HSETNX', KEYS[4], ARGV[1], ARGV[5])
controller_wake(KEYS[#KEYS - 1], KEYS[#KEYS], ARGV[#ARGV])
return {'added', redis.call('HINCRBY', KEYS[1], ARGV[4], 1)}
