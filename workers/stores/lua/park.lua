-- Park a stage message until it is due (workers/stores/parking.py): beat re-enqueues it then
-- (workers/recovery/parking.py).
-- One parked message per task id: parking again replaces the message and its due time.
-- The journal entry's deadline moves past the due time, so the sweeper does not take a
-- parked message for a lost one (only an entry still open: a final one stays closed).
-- KEYS: 1 parked zset, 2 parked messages hash, 3 journal open index.
-- ARGV: 1 task id, 2 due ms, 3 record JSON, 4 trackingId, 5 the entry's new deadline ms.
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[3], 'XX', ARGV[5], ARGV[4])
return 1
