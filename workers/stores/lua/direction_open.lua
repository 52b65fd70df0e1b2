-- Open one project direction, all at once and only once: the opener's request receipt, the
-- direction (its fixed part, deadline and revision 1), its place in the index, the first
-- line of its audit log, and a directed item in each other seat's inbox with its notices.
-- With a post (ARGV 10), the same step journals the direction's post to the project's
-- channel as an entry already `decided` (its decision the direction's rules made), which the
-- guardrail and send stages then take as any other: the post is never lost between the open
-- and its publish, since the sweeper re-enqueues an entry whose message went missing.
-- KEYS: 1 the request's receipt key (fingerprint then receipt JSON), 2 the direction hash,
--       3 the index zset, 4 the direction's log stream, 5 the post's journal entry, 6 the
--       journal's open index, 7 the stats hash, 8 the set of seats with a ledger, then 4 per
--       seat notified (inbox stream, inbox meta, seat counters hash, seat ledger stream).
--       and last the work controller's wake keys (controller_wake.lua).
-- ARGV: 1 fingerprint (64 hex), 2 receipt JSON, 3 the direction's fixed part JSON,
--       4 deadline (Unix ms), 5 direction id, 6 log entry JSON, 7 inbox item JSON (with
--       "position":0 for the script to fill in), 8 seats notified, 9 receipt TTL ms,
--       10 the post's tracking id ('' = no post), 11 its seat, 12 its payload JSON, 13 its
--       decision JSON, 14 nowMs, 15 the post entry's deadline (Unix ms), 16 inbox cap,
--       17 ledger retention ms, 18 ledger row cap, 19 the overflow row's JSON, then 1 per seat notified: its seat id
--       (a seat whose inbox is full is not notified: inbox_common.lua writes that down).
-- Returns {'duplicate', receipt} (the same open again), {'conflict', receipt} (the request
-- id was used for another input) or {'recorded', receipt}. Only 'recorded' writes.
local replayed = direction_replay(KEYS[1], ARGV[1])
if replayed then return replayed end
local stored = redis.call('HGET', KEYS[2], 'fingerprint')
if stored then
  -- the receipt expired, the direction did not: the same answer from the direction
  local earlier = redis.call('HGET', KEYS[2], 'receipt')
  if stored == ARGV[1] then return {'duplicate', earlier} end
  return {'conflict', earlier}
end
redis.call('HSET', KEYS[2], 'doc', ARGV[3], 'fingerprint', ARGV[1], 'receipt', ARGV[2],
  'deadlineMs', ARGV[4], 'rev', 1)
redis.call('ZADD', KEYS[3], 0, ARGV[5])
redis.call('XADD', KEYS[4], '*', 'event', ARGV[6])
redis.call('SET', KEYS[1], ARGV[1] .. ARGV[2], 'PX', ARGV[9])
if ARGV[10] ~= '' and redis.call('EXISTS', KEYS[5]) == 0 then
  redis.call('HSET', KEYS[5], 'trackingId', ARGV[10], 'kind', 'work', 'seatId', ARGV[11],
    'payload', ARGV[12], 'state', 'decided', 'decision', ARGV[13], 'acceptedAtMs', ARGV[14],
    'updatedAtMs', ARGV[14], 'enqueuedAtMs', ARGV[14], 'fingerprint', '', 'deliveries', 1)
  redis.call('ZADD', KEYS[6], ARGV[15], ARGV[10])
end
local room = inbox_room(ARGV[16], ARGV[17], ARGV[18], ARGV[19], KEYS[7], KEYS[8])
local k = 9
for i = 1, tonumber(ARGV[8]) do
  inbox_put(KEYS[k], KEYS[k + 1], ARGV[7], KEYS[k + 2], ARGV[19 + i], KEYS[k + 3], room)
  k = k + 4
end
return {'recorded', ARGV[2]}
