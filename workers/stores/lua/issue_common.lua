-- Shared by the issue coordination scripts (workers/stores/issues.py): scripts.py puts this
-- text (after subject_common, the one owner record) in front of each of them (Redis has no
-- script-to-script calls). Every one of them is one call's whole step: replay check,
-- generation check, the write, the receipt, the log.
--
-- KEYS: 1 issue hash, 2 participants hash (seat -> JSON), 3 log stream, 4 the seat's request
-- ARGV: 1 seat, 2 issue number, 3 action, 4 client request id, 5 input fingerprint,
--       6 expected generation ('' = not given), 7 nowMs, 8 receipt retention ms,
--       9 log cap (entries), then the script's own
-- A refusal writes nothing; a replay (the same request id and input) answers the receipt it
-- kept. Generation is 1 for an issue nobody coordinated yet.
local function issue_args()
  local k = {issue = KEYS[1], members = KEYS[2], log = KEYS[3], req = KEYS[4]}
  local a = {seat = ARGV[1], number = tonumber(ARGV[2]), action = ARGV[3], id = ARGV[4],
    fingerprint = ARGV[5], expected = ARGV[6], now = tonumber(ARGV[7]),
    retention = tonumber(ARGV[8]), cap = tonumber(ARGV[9])}
  return k, a
end

-- nil for a request id not used yet; else the reply: {'replayed', receipt} for the same
-- input, {'conflict', ''} for other input under the same id.
local function issue_replay(k, a)
  local stored = redis.call('HGET', k.req, 'fingerprint')
  if not stored then return nil end
  if stored ~= a.fingerprint then return {'conflict', ''} end
  return {'replayed', redis.call('HGET', k.req, 'receipt')}
end

-- The owner ('' = none) and generation now, and the 'stale' reply when an expected
-- generation was given and is not the current one.
local function issue_fence(k, a)
  local owner = subject_owner(k.issue)
  local generation = subject_generation(k.issue)
  if a.expected ~= '' and tonumber(a.expected) ~= generation then
    return owner, generation, {'stale', owner, tostring(generation)}
  end
  return owner, generation, nil
end

-- One seat's participant record (a table; empty when it has none) and writing it back
-- (dropped when it holds no role).
local function issue_member(k, seat)
  local raw = redis.call('HGET', k.members, seat)
  if raw then return cjson.decode(raw) end
  return {}
end

local function issue_member_put(k, seat, m)
  if m.contributor or m.follower then
    redis.call('HSET', k.members, seat, cjson.encode(m))
  else
    redis.call('HDEL', k.members, seat)
  end
end

-- The call's receipt kept under its request id (for its replays) and, when it changed
-- anything, logged. `r` holds what the script did; the rest is the call's.
local function issue_done(k, a, outcome, changed, r)
  r.outcome = outcome
  r.action = a.action
  r.issueNumber = a.number
  r.seatId = a.seat
  r.clientRequestId = a.id
  r.atMs = a.now
  r.changed = changed
  if r.owner == nil then r.owner = cjson.null end
  local body = cjson.encode(r)
  redis.call('HSET', k.req, 'fingerprint', a.fingerprint, 'receipt', body)
  redis.call('PEXPIRE', k.req, a.retention)
  if changed then
    subject_log(k.log, a.cap, outcome, a.seat, r.previousOwner or '', a.now, '', r.generation,
      body)
  end
  return {outcome, body}
end
