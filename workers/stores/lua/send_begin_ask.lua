-- Begin a send (send_begin_common.lua) and, when the begin says `go` or `reconcile` for the
-- attempt the ask was built for, record that ask (ask_create_common.lua) in the same step:
-- the send's intent and its ask are written together, before anything is posted. Any other
-- answer (busy, done, expired, missing, a start not admitted, the op at another attempt)
-- records no ask, and the begin's reply comes back alone.
-- KEYS: the begin's 3 keys and, when a start is given, its 7; then the ask's create keys.
-- ARGV: 1..5 the begin's (5: the start's arguments or ''), 6 the attempt the ask is for,
--       7..12 the ask's create arguments.
-- Returns the begin's reply, followed by the create's ({'new' or 'exists', doc, before})
-- when the ask was recorded.
local n = 3
if ARGV[5] ~= '' then n = 10 end
local B, C = {}, {}
for i = 1, #KEYS do
  if i <= n then B[i] = KEYS[i] else C[i - n] = KEYS[i] end
end
local begun = send_begin(B, {ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]})
if (begun[1] == 'go' or begun[1] == 'reconcile') and begun[3] == ARGV[6] then
  local made = ask_create(C, {ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12]})
  return {begun[1], begun[2], begun[3], made[1], made[2], made[3]}
end
return begun
