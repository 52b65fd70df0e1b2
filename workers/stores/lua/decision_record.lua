-- Record the engagement stage's decision once; first writer wins, so a redelivered or
-- concurrent run reuses the decision that was already made. A decision that ends the entry
-- trims its payload (journal_common.lua).
-- An engaging decision recorded now pushes the guardrail stage's message with it, when one is
-- given (workers/stores/onward.py): a run that finds the decision made pushes nothing.
-- Given the stage's start (a first delivery's: workers/stages/base.py `Start`), it runs that
-- first (stage_start.lua) and records nothing unless the start is admitted.
-- KEYS: 1 entry, 2 open-index, 3 seat ledger stream, 4 ledger seats set, [5..11 the start's
--       7 keys, when one is given], [last: the guardrails queue, when a message is given].
-- ARGV: 1 decisionJson, 2 rowJson ('' when the decision engages), 3 finalState ('' when it
--       engages), 4 nowMs, 5 seatId, 6 trackingId, 7 retention ms of a final entry, 8 ledger
--       stream cap, 9 how long a ledger row is kept (ms: older rows are trimmed as a row is
--       added), 10 the guardrails message's template ('' = none), 11 its payload, 12 (unused:
--       no attempt), 13 its embed, 14 the start's arguments (a JSON array of strings; '' = no
--       start).
-- Returns the stored decision JSON, or {'start', verb, n} when a start was given and not
-- admitted (stage_start's {'dead', deliveries} or {'done', state}).
if ARGV[14] ~= '' then
  local K = {}
  for i = 1, 7 do K[i] = KEYS[4 + i] end
  local started = stage_start(K, cjson.decode(ARGV[14]))
  if started[1] ~= 'run' then return {'start', started[1], started[2]} end
end
local stored = redis.call('HGET', KEYS[1], 'decision')
if stored then return stored end
if not redis.call('HGET', KEYS[1], 'state') then
  return redis.error_reply('NOENTRY journal entry ' .. ARGV[6] .. ' does not exist')
end
redis.call('HSET', KEYS[1], 'decision', ARGV[1], 'updatedAtMs', ARGV[4])
if ARGV[2] ~= '' then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[8], '*', 'row', ARGV[2])
  ledger_trim(KEYS[3], ARGV[9])
  redis.call('SADD', KEYS[4], ARGV[5])
  redis.call('HSET', KEYS[1], 'state', ARGV[3], 'finalAtMs', ARGV[4])
  journal_trim(KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[6])
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
else
  redis.call('HSET', KEYS[1], 'state', 'decided')
  if ARGV[10] ~= '' then
    redis.call('LPUSH', KEYS[#KEYS], celery_message(ARGV[10], ARGV[11], ARGV[13]))
  end
end
return ARGV[1]
