-- Wake one seat for the work controller (workers/stores/seat_runs.py): its score in the due
-- index lowered to the clock of the controller's last tick, so the next tick decides it.
-- Every script that makes a seat's news (an inbox item, a work revision, a write of the
-- seat's record) calls it in the same step as the news, so a wake-up is never lost to a crash
-- between the two. LT: a seat already due sooner keeps its place (it is decided no later).
-- A script gets the two keys LAST among its KEYS (keys.CONTROLLER_WAKE): due, then clock.
local function controller_wake(due, clock, seat)
  redis.call('ZADD', due, 'LT', redis.call('GET', clock) or '0', seat)
end
