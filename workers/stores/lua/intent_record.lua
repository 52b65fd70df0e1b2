-- Record one write of a seat's work intent, all or nothing: the request's receipt (a replay
-- answers it again), the compare-and-set on the intent's revision, the fixed Issue link, the
-- intent's record, and the seat's intent counters.
-- KEYS: 1 the seat's intents hash (intent id -> record JSON), 2 the seat's intent counters
--       hash, 3 the request's receipt key (fingerprint, then the receipt JSON)
-- ARGV: 1 intent id, 2 expected revision (0 = create), 3 the input's fingerprint (64 hex),
--       4 the new record JSON (its revision already the expected one plus one), 5 the
--       receipt JSON, 6 the Issue number (empty for none), 7 the name of the runnable state,
--       8 1 when the new state is runnable (else 0), 9 how long a receipt is kept (ms),
--       10 the counters' field bumped on every write, 11 the field counting runnable
--       intents, 12 the field bumped on every write that leaves an intent runnable
-- Last among KEYS the work controller's wake keys, last among ARGV the seat id: a write
-- wakes the seat (controller_wake.lua).
-- Returns {'duplicate', receipt JSON} for a replay of the same input; {'conflict', kind,
-- current revision, current record JSON or receipt JSON} where kind is 1 the request id was
-- used for another input, 2 the revision is not the expected one, 3 the Issue link differs;
-- {'recorded', the seat's intent revision}. Only 'recorded' writes.
local receipt = redis.call('GET', KEYS[3])
if receipt then
  if string.sub(receipt, 1, 64) == ARGV[3] then
    return {'duplicate', string.sub(receipt, 65)}
  end
  return {'conflict', 1, 0, string.sub(receipt, 65)}
end
local stored = redis.call('HGET', KEYS[1], ARGV[1])
local current, was_runnable = 0, 0
if stored then
  local old = cjson.decode(stored)
  current = tonumber(old.revision)
  if old.state == ARGV[7] then
    was_runnable = 1
  end
  if current == tonumber(ARGV[2]) then
    local issue = old.issueNumber
    if issue == cjson.null then
      issue = nil
    end
    if issue ~= tonumber(ARGV[6]) then
      return {'conflict', 3, current, stored}
    end
  end
end
if current ~= tonumber(ARGV[2]) then
  return {'conflict', 2, current, stored or ''}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
local now_runnable = tonumber(ARGV[8])
if now_runnable ~= was_runnable then
  redis.call('HINCRBY', KEYS[2], ARGV[11], now_runnable - was_runnable)
end
if now_runnable == 1 then
  redis.call('HINCRBY', KEYS[2], ARGV[12], 1)
end
redis.call('SET', KEYS[3], ARGV[3] .. ARGV[5], 'PX', ARGV[9])
controller_wake(KEYS[#KEYS - 1], KEYS[#KEYS], ARGV[#ARGV])
return {'recorded', redis.call('HINCRBY', KEYS[2], ARGV[10], 1)}
