-- Journal an event and enqueue its first task in ONE step (the broker is this same Redis):
-- the entry and the Celery message land together, or neither does.
-- KEYS: 1 journal entry, 2 journal open index, 3 the task's queue (a kombu Redis list).
-- ARGV: 1 trackingId, 2 kind, 3 seatId, 4 payload, 5 nowMs, 6 deadlineMs, 7 fingerprint,
--       8 the Celery message (JSON, as kombu's Redis transport stores it) with "@body@"
--       where its body goes, 9 the body's trailing Celery `embed` object. The body is the
--       task's one argument, the payload: `[[payload], {}, embed]`, as a JSON string.
-- Returns {verb, state, storedFingerprint}; verb is
--   'new'       journalled and enqueued now;
--   'requeued'  journalled earlier but never enqueued (a publish that failed), or enqueued
--               longer than the deadline ago and still untouched (the message was lost on
--               the broker): enqueued now, under the same task id (every stage is idempotent);
--   'duplicate' already journalled and enqueued: nothing written but the delivery count;
--   'conflict'  already journalled with another fingerprint: nothing written at all.
local function message() return celery_message(ARGV[8], ARGV[4], ARGV[9]) end
local state = redis.call('HGET', KEYS[1], 'state')
if state then
  local stored = redis.call('HGET', KEYS[1], 'fingerprint') or ''
  if ARGV[7] ~= '' and stored ~= '' and stored ~= ARGV[7] then
    return {'conflict', state, stored}
  end
  redis.call('HINCRBY', KEYS[1], 'deliveries', 1)
  local enqueued = redis.call('HGET', KEYS[1], 'enqueuedAtMs')
  local overdue = enqueued and tonumber(ARGV[5]) - tonumber(enqueued) > tonumber(ARGV[6]) - tonumber(ARGV[5])
  if state == 'accepted' and (not enqueued or overdue) then
    redis.call('LPUSH', KEYS[3], message())
    redis.call('HSET', KEYS[1], 'enqueuedAtMs', ARGV[5])
    return {'requeued', state, stored}
  end
  return {'duplicate', state, stored}
end
redis.call('HSET', KEYS[1], 'trackingId', ARGV[1], 'kind', ARGV[2], 'seatId', ARGV[3],
  'payload', ARGV[4], 'state', 'accepted', 'acceptedAtMs', ARGV[5], 'updatedAtMs', ARGV[5],
  'fingerprint', ARGV[7], 'deliveries', 1, 'enqueuedAtMs', ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
redis.call('LPUSH', KEYS[3], message())
return {'new', 'accepted', ARGV[7]}
