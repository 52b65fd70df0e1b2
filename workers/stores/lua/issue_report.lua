-- Report the caller's work state on an issue: the owner's is the issue's, a contributor's is
-- kept on its participant record; anyone else is 'not_participant'. Every report takes the
-- issue's next report revision (the revision of the work report a blocked one becomes). The
-- generation does not change. See issue_common; ARGV 10 the work state, 11 the blocker
-- ('' = none).
-- Returns {'reported', receipt} | {'not_participant' | 'stale', owner, generation}
--   | {'replayed', receipt} | {'conflict', ''}
local k, a = issue_args()
local replay = issue_replay(k, a)
if replay then return replay end
local owner, generation, stale = issue_fence(k, a)
if stale then return stale end
local m = issue_member(k, a.seat)
if owner ~= a.seat and not m.contributor then
  return {'not_participant', owner, tostring(generation)}
end
local revision = redis.call('HINCRBY', k.issue, 'reports', 1)
if owner == a.seat then
  redis.call('HSET', k.issue, 'workState', ARGV[10], 'blocker', ARGV[11], 'reportedBy', a.seat,
    'reportedAtMs', a.now)
else
  m.workState, m.blocker, m.reportedAtMs = ARGV[10], ARGV[11], a.now
  issue_member_put(k, a.seat, m)
end
local r = {owner = owner ~= '' and owner or nil, generation = generation, workState = ARGV[10],
  blocker = ARGV[11] ~= '' and ARGV[11] or nil, reportRevision = revision}
return issue_done(k, a, 'reported', true, r)
