-- Claim an issue: the caller becomes its one owner when it has none (a new generation, the
-- old work state cleared, the caller no longer a mere contributor), with a standing claim
-- that never lapses. Its owner claiming again is 'unchanged' (a lease it holds stays a
-- lease); another owner is 'owned' (that owner and the generation, nothing written), a
-- COLLABORATE lease too, lapsed or not: only a collaborator takes a lapsed lease over, through
-- the claims route (claim_take).
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
subject_own(k.issue, k.members, a.seat, generation, a.now, '', '', '')
return issue_done(k, a, 'claimed', true, {owner = a.seat, generation = generation})
