-- Release an issue: its owner lets go (a new generation, no owner, the work state cleared;
-- a COLLABORATE lease its owner held on it ends too).
-- Anyone else is 'not_owner' (the owner and the generation, nothing written). See
-- issue_common.
-- Returns {'released', receipt} | {'not_owner' | 'stale', owner, generation}
--   | {'replayed', receipt} | {'conflict', ''}
local k, a = issue_args()
local replay = issue_replay(k, a)
if replay then return replay end
local owner, generation, stale = issue_fence(k, a)
if stale then return stale end
if owner ~= a.seat then return {'not_owner', owner, tostring(generation)} end
generation = generation + 1
subject_drop(k.issue, generation, false)
return issue_done(k, a, 'released', true, {previousOwner = a.seat, generation = generation})
