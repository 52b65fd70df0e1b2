-- Read what the work controller decides seats with (workers/stores/seat_runs.py `observe`),
-- in one step and one reply: the project's flags, then per seat its record, its last finished
-- turn and every news input. A script rather than a pipeline of eight commands per seat: the
-- commands are the same, but the client packs and parses one command and one flat reply,
-- which at 2,000 seats a tick is most of what a pipeline cost it. The seat's asks on their
-- way (its recent ops still `reserved` or `sending`) are counted here, so no second read is
-- needed.
-- KEYS: 1 the project hash, then 8 per seat: its record, its turns list, inbox meta,
--       counters, backlog hash, open backlog zset, intent counters, recent ops zset
-- ARGV: 1 the oldest op time still looked at (ms), 2 at most this many recent ops a seat,
--       3 the backlog's revision field, 4 the intents' runnable field, 5 their work field,
--       6 the op hashes' key prefix (their ids are read from the seat's zset)
-- Returns {started, paused, card, then 13 per seat: rev, doc, last turn, inbox last, acked,
-- project run since, its end, notices, backlog revision, open items, runnable intents,
-- intent work revision, asks on their way}; a missing value is false.
local project = redis.call('HMGET', KEYS[1], 'started', 'paused', 'card')
local out = {project[1], project[2], project[3]}
for k = 2, #KEYS, 8 do
  local run = redis.call('HMGET', KEYS[k], 'rev', 'doc')
  local inbox = redis.call('HMGET', KEYS[k + 2], 'last', 'acked', 'projectSince', 'projectEnd')
  local work = redis.call('HMGET', KEYS[k + 6], ARGV[4], ARGV[5])
  local ops = redis.call('ZREVRANGEBYSCORE', KEYS[k + 7], '+inf', ARGV[1], 'LIMIT', 0, ARGV[2])
  local flying = 0
  for _, op in ipairs(ops) do
    local state = redis.call('HGET', ARGV[6] .. op, 'state')
    if state == 'reserved' or state == 'sending' then flying = flying + 1 end
  end
  local n = #out
  out[n + 1] = run[1]
  out[n + 2] = run[2]
  out[n + 3] = redis.call('LINDEX', KEYS[k + 1], -1)
  out[n + 4] = inbox[1]
  out[n + 5] = inbox[2]
  out[n + 6] = inbox[3]
  out[n + 7] = inbox[4]
  out[n + 8] = redis.call('HGET', KEYS[k + 3], 'notices')
  out[n + 9] = redis.call('HGET', KEYS[k + 4], ARGV[3])
  out[n + 10] = redis.call('ZCARD', KEYS[k + 5])
  out[n + 11] = work[1]
  out[n + 12] = work[2]
  out[n + 13] = flying
end
return out
