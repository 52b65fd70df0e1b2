-- Claim an issue: the caller becomes its one owner when it has none (a new generation, the
-- old work state cleared, the caller no longer a mere contributor). Its owner claiming again
-- is 'unchanged'; another owner is 'owned' (that owner and the generation, nothing written).
-- See issue_common for KEYS and ARGV.
-- Returns {'claimed' | 'unchanged', receipt} | {'owned' | 'stale', owner, generation}
--   | {'replayed', receipt} | {'conflict', ''}
local k, a = issue_args()
local replay = issue_replay(k, a)
if replay then return replay end
local owner, generation, stale = issue_fence(k, a)
if stale then return stale end
if owner == a.seat then
  return issue_done(k, a, 'unchanged', false, {owner = owner, generation = generation})
end
if owner ~= '' then return {'owned', owner, tostring(generation)} end
generation = generation + 1
redis.call('HSET', k.issue, 'owner', a.seat, 'generation', generation, 'sinceMs', a.now,
  'refreshedAtMs', a.now)
redis.call('HDEL', k.issue, 'workState', 'blocker', 'reportedBy', 'reportedAtMs')
local m = issue_member(k, a.seat)
if m.contributor then
  m.contributor = nil
  m.workState, m.blocker, m.reportedAtMs = nil, nil, nil
  issue_member_put(k, a.seat, m)
end
return issue_done(k, a, 'claimed', true, {owner = a.seat, generation = generation})
