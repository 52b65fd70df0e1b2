-- Record a send's final outcome (op_finish_common.lua) and, when that is recorded now or was
-- already (`ok` or `done`, never `stale`: another try holds the op), write what it makes of
-- the send's ask (ask_commit_common.lua: landed where it was posted, or closed) in the same
-- step, under the ask's compare-and-set.
-- KEYS: the finish's keys (ARGV[1] of them), then the commit's.
-- ARGV: 1 how many of KEYS are the finish's, 2..17 the finish's 16 arguments, 18.. the
--       commit's 23.
-- Returns the finish's reply, followed by the commit's ({verb, version, position}) when it
-- ran; an error from the finish as it is.
local n = tonumber(ARGV[1])
local F, C, FA, CA = {}, {}, {}, {}
for i = 1, #KEYS do
  if i <= n then F[i] = KEYS[i] else C[i - n] = KEYS[i] end
end
for i = 2, 17 do FA[i - 1] = ARGV[i] end
for i = 18, #ARGV do CA[i - 17] = ARGV[i] end
local finished = op_finish(F, FA)
if finished.err then return finished end
if finished[1] ~= 'ok' and finished[1] ~= 'done' then return finished end
local committed = ask_commit(C, CA)
return {finished[1], finished[2], committed[1], committed[2], committed[3]}
