-- A work entry that reached its final state keeps what its trace and the audit read (its
-- state, decision, times, fingerprint, deliveries) and gives up its payload, the report as
-- it came in: only a stage that has not yet run reads it (engagement, or the sweeper
-- re-enqueueing an open entry), and a repeat of the same report is answered from the
-- fingerprint. `payloadBytes` says how large it was.
local function journal_trim(entry)
  local size = redis.call('HSTRLEN', entry, 'payload')
  if size > 0 then
    redis.call('HSET', entry, 'payloadBytes', size)
    redis.call('HDEL', entry, 'payload')
  end
end
