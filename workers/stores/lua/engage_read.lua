-- Everything the engagement stage reads for an engaging plan, in one round trip and one
-- snapshot: the ask record's view (ask_view_common.lua) and the ledger's tally
-- (guard_count.lua). Read-only.
-- KEYS: 1..4 the view's keys, 5.. the tally's (5 + its n targets).
-- ARGV: 1, 2 the view's key prefixes, 3 nowMs, 4 n targets.
-- Returns {view reply, tally reply}.
local view = ask_view({KEYS[1], KEYS[2], KEYS[3], KEYS[4]}, {ARGV[1], ARGV[2]})
local K = {}
for i = 5, #KEYS do K[#K + 1] = KEYS[i] end
return {view, guard_count(K, {ARGV[3], ARGV[4]})}
