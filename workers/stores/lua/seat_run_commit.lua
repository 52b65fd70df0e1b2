-- Write seats' controller records, each only if nobody wrote it since it was read: one
-- compare-and-set per seat on its revision, all in one step (a turn's start or outcome, an
-- operator's control). Each record written wakes its seat for the work controller
-- (controller_wake.lua): what changed may change its next decision. The controller's own
-- tick writes with controller_commit.lua instead, which sets the seats' next due times.
-- KEYS: per record its run hash and its turns list, then the work controller's wake keys
--       (due, clock)
-- ARGV: 1 finished turns kept per seat, then per record: its seat id, then what
--       seat_run_write.lua reads (revision, doc, k new turns); no TTL: one record per seat
--       of the org, and a seat's streak must outlive any quiet spell
-- Returns one flag per record: 1 written (its revision is now one more), 0 conflict
local history = tonumber(ARGV[1])
local out = {}
local j = 2
for i = 1, (#KEYS - 2) / 2 do
  local seat = ARGV[j]
  local written
  written, j = seat_run_write(KEYS[2 * i - 1], KEYS[2 * i], history, j + 1)
  if written == 1 then controller_wake(KEYS[#KEYS - 1], KEYS[#KEYS], seat) end
  out[i] = written
end
return out
