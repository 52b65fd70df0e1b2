-- A project-wide item (the project started, paused, resumed, an announcement) into every
-- seat's inbox at once, with the project's flags when it changes them: every seat hears of
-- it, or none does. Each inbox keeps the run of project items at its end (`projectSince`,
-- `projectEnd`): when the unacknowledged items are all in that run, the seat's news is
-- project-only (the work controller then waits its announcement jitter).
-- A seat whose inbox is full does not get the item (inbox_common.lua writes that down).
-- KEYS: 1 the project hash, 2 the stats hash, 3 the set of seats with a ledger, then 3 per
--       seat (inbox stream, inbox meta, seat ledger stream)
--       and last the work controller's wake keys (controller_wake.lua).
-- ARGV: 1 the project field to set ('' for none), 2 its value, 3 the item JSON (with
--       "position":0 for the script to fill in), 4 seat count, 5 '1' to do nothing at all
--       when the field already holds the value (a change announced once, however many
--       ticks see it), 6 inbox cap, 7 ledger retention ms, 8 ledger row cap, 9 the overflow
--       row's JSON, then 1 per seat: its seat id
-- Returns the seats whose inbox was full (the item is not in theirs).
if ARGV[5] == '1' and redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return {} end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
local room = inbox_room(ARGV[6], ARGV[7], ARGV[8], ARGV[9], KEYS[2], KEYS[3])
local full = {}
local k = 4
for i = 1, tonumber(ARGV[4]) do
  local position = inbox_put(KEYS[k], KEYS[k + 1], ARGV[3], nil, ARGV[9 + i], KEYS[k + 2], room)
  if position > 0 then
    if redis.call('HGET', KEYS[k + 1], 'projectEnd') ~= tostring(position - 1) then
      redis.call('HSET', KEYS[k + 1], 'projectSince', position)
    end
    redis.call('HSET', KEYS[k + 1], 'projectEnd', position)
  else
    full[#full + 1] = ARGV[9 + i]
  end
  k = k + 3
end
return full
