-- Join or leave an issue as a contributor, follow or unfollow it: one role of the caller's
-- participant record set or cleared (leaving also drops the contributor's last report). The
-- generation does not change. The owner cannot join ('is_owner': it already does the work).
-- See issue_common; ARGV 10 the role (contributor or follower), 11 '1' to set it, '0' to clear
-- it, 12 '1' for the contributor role (the owner may not take it; clearing it drops the
-- report), 13 the outcome when it changes something.
-- Returns {outcome | 'unchanged', receipt} | {'is_owner' | 'stale', owner, generation}
--   | {'replayed', receipt} | {'conflict', ''}
local k, a = issue_args()
local role, on, working, outcome = ARGV[10], ARGV[11] == '1', ARGV[12] == '1', ARGV[13]
local replay = issue_replay(k, a)
if replay then return replay end
local owner, generation, stale = issue_fence(k, a)
if stale then return stale end
if working and on and owner == a.seat then return {'is_owner', owner, tostring(generation)} end
local m = issue_member(k, a.seat)
local r = {owner = owner ~= '' and owner or nil, generation = generation}
if (m[role] == true) == on then return issue_done(k, a, 'unchanged', false, r) end
if on then
  m[role] = true
  if not m.sinceMs then m.sinceMs = a.now end
else
  m[role] = nil
  if working then
    m.workState, m.blocker, m.reportedAtMs = nil, nil, nil
  end
end
issue_member_put(k, a.seat, m)
return issue_done(k, a, outcome, true, r)
