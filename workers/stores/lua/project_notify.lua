-- A project-wide item (the project started, paused, resumed, an announcement) into every
-- seat's inbox at once, with the project's flags when it changes them: every seat hears of
-- it, or none does. Each inbox keeps the run of project items at its end (`projectSince`,
-- `projectEnd`): when the unacknowledged items are all in that run, the seat's news is
-- project-only (the work controller then waits its announcement jitter).
-- KEYS: 1 the project hash, then 2 per seat (inbox stream, inbox meta)
-- ARGV: 1 the project field to set ('' for none), 2 its value, 3 the item JSON (with
--       "position":0 for the script to fill in), 4 seat count, 5 '1' to do nothing at all
--       when the field already holds the value (a change announced once, however many
--       ticks see it)
-- Returns the number of seats the item was put in front of.
if ARGV[5] == '1' and redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return 0 end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
local k = 2
for _ = 1, tonumber(ARGV[4]) do
  local position = inbox_put(KEYS[k], KEYS[k + 1], ARGV[3])
  if redis.call('HGET', KEYS[k + 1], 'projectEnd') ~= tostring(position - 1) then
    redis.call('HSET', KEYS[k + 1], 'projectSince', position)
  end
  redis.call('HSET', KEYS[k + 1], 'projectEnd', position)
  k = k + 2
end
return tonumber(ARGV[4])
