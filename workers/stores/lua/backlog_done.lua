-- Close one open item of a seat's backlog, once: its JSON replaced by the closed one and its
-- id taken out of the seat's and its objective's open zsets. Leaving the seat's open zset is
-- what makes it done exactly once. The owner index (backlog_add) keeps the item: it stays on
-- the seat's backlog, done, and is still found by its id.
-- KEYS: 1 items hash (id -> item JSON), 2 open zset (id -> addedAtMs), 3 the objective's open
--       zset on this seat
-- ARGV: 1 item id, 2 the closed item's JSON
-- Last among KEYS the work controller's wake keys, last among ARGV the seat id: the seat's
-- durable work changed, so it is woken (controller_wake.lua).
-- Returns {'done'} | {'already_done'} | {'unknown'}; only 'done' writes anything.
if not redis.call('HGET', KEYS[1], ARGV[1]) then return {'unknown'} end
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return {'already_done'} end
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
controller_wake(KEYS[#KEYS - 1], KEYS[#KEYS], ARGV[#ARGV])
return {'done'}
