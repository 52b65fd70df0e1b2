-- A stage gave up on a message (a permanent error, or its retries ran out): the entry ends
-- `failed` with where and why (listed in the failed index), and the message goes to the
-- dead-letter queue with its reason, so every give-up is one an operator can see and replay.
-- KEYS: 1 entry, 2 open index, 3 failed index, 4 dlq, 5 letter, 6 delivery counters.
-- ARGV: 1 trackingId, 2 stage, 3 task, 4 reason, 5 error, 6 nowMs, 7 dlqId, 8 message JSON,
--       9.. final states.
-- Returns 'dead' (written), 'missing' (no entry; the letter is kept) or the final state kept.
local n = tonumber(redis.call('HGET', KEYS[6], ARGV[2]) or '1')
return dead_letter(
  {entry = KEYS[1], open = KEYS[2], failed = KEYS[3], dlq = KEYS[4], record = KEYS[5]},
  {trackingId = ARGV[1], dlqId = ARGV[7], stage = ARGV[2], task = ARGV[3], reason = ARGV[4],
   error = ARGV[5], deliveries = n, now = ARGV[6], message = ARGV[8], closeAs = 'failed',
   finals = set_of(ARGV, 9)})
