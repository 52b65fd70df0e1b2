-- A seat's ledger stream keeps its rows for the audit retention (besides its row cap): the
-- rows older than `keep_ms` go as a row is added, so each add removes the few that aged out
-- since the last. A row's stream id is the Redis time it was added at, so the bound is read
-- from the same clock. A stream no row is added to for the whole retention (a seat gone
-- from the org) holds only rows past it, so it expires then with them.
local function ledger_trim(stream, keep_ms)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('XTRIM', stream, 'MINID', now - tonumber(keep_ms))
  redis.call('PEXPIRE', stream, keep_ms)
end
