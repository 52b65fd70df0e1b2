-- Refresh an issue's ownership after a restart: its owner re-asserts it at the generation it
-- holds (recorded as refreshedAtMs; the generation does not change). Anyone else is
-- 'not_owner' (the owner and the generation, nothing written). See issue_common.
-- Returns {'refreshed', receipt} | {'not_owner' | 'stale', owner, generation}
--   | {'replayed', receipt} | {'conflict', ''}
local k, a = issue_args()
local replay = issue_replay(k, a)
if replay then return replay end
local owner, generation, stale = issue_fence(k, a)
if stale then return stale end
if owner ~= a.seat then return {'not_owner', owner, tostring(generation)} end
redis.call('HSET', k.issue, 'refreshedAtMs', a.now)
return issue_done(k, a, 'refreshed', true, {owner = owner, generation = generation})
