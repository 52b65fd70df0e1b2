-- Record the directedness of one inbound event, all at once and only once: the verdict of
-- each seat it concerns (the audit row; every other seat's is derived on read from the event
-- and the org version named here), an inbox item for each seat it is directed to, the seats'
-- notices, the facts it taught, and the journal entry's final state with its org version.
-- The org version's snapshot (what the trace derives the other verdicts from) must exist:
-- without it nothing is written and the caller sends it (ARGV 10).
-- A directed seat whose inbox is full (inbox_common.lua) keeps its verdict, with no position
-- and `inboxFull`, and its position in the reply is 0.
-- KEYS: 1 journal entry, 2 journal open index, 3 journal failed index, 4 verdicts hash,
--       5 the org version's snapshot, 6 the stats hash, 7 the set of seats with a ledger,
--       then 4 per directed seat (inbox stream, inbox meta, seat counters hash, seat ledger
--       stream), then one per fact set a seat joins.
--       and last the work controller's wake keys (controller_wake.lua).
-- ARGV: 1 nowMs, 2 retention ms of the entry, 3 ttl ms of a fact, 4 final state
--       (directed|ambient), 5 summary JSON, 6 count of seats recorded, 7 fact count,
--       8 trackingId, 9 org version, 10 its snapshot JSON ('' when not sent), 11 inbox cap,
--       12 ledger retention ms, 13 ledger row cap, 14 the overflow row's JSON,
--       then 3 per seat recorded: seatId, verdict JSON, inbox item JSON ('' when not
--       directed; both carry "position":0 for the script to fill in),
--       then 1 per fact set: the seat id to add.
-- Returns {'ok'|'done', state, seatId, position, seatId, position, ...} (directed seats), or
-- {'snapshot'} when the org version's snapshot is missing and was not sent.
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  return redis.error_reply('NOENTRY journal entry ' .. KEYS[1] .. ' is missing')
end
if state ~= 'accepted' and state ~= 'failed' then
  return {'done', state}
end
if ARGV[10] ~= '' then
  redis.call('SET', KEYS[5], ARGV[10], 'PX', ARGV[2])
elseif redis.call('PEXPIRE', KEYS[5], ARGV[2]) == 0 then
  return {'snapshot'}
end
local seats, facts = tonumber(ARGV[6]), tonumber(ARGV[7])
local room = inbox_room(ARGV[11], ARGV[12], ARGV[13], ARGV[14], KEYS[6], KEYS[7])
local out = {'ok', ARGV[4]}
local k = 8
local fields = {}
for i = 0, seats - 1 do
  local seat, verdict, item = ARGV[15 + i * 3], ARGV[16 + i * 3], ARGV[17 + i * 3]
  if item ~= '' then
    local position = inbox_put(KEYS[k], KEYS[k + 1], item, KEYS[k + 2], seat, KEYS[k + 3], room)
    local placed = position > 0 and tostring(position) or 'null,"inboxFull":true'
    verdict = (string.gsub(verdict, '"position":0', '"position":' .. placed, 1))
    out[#out + 1] = seat
    out[#out + 1] = position
    k = k + 4
  end
  fields[#fields + 1] = seat
  fields[#fields + 1] = verdict
  if #fields >= 1000 then
    redis.call('HSET', KEYS[4], unpack(fields))
    fields = {}
  end
end
if #fields > 0 then redis.call('HSET', KEYS[4], unpack(fields)) end
local a = 15 + seats * 3
for j = 0, facts - 1 do
  redis.call('SADD', KEYS[k + j], ARGV[a + j])
  redis.call('PEXPIRE', KEYS[k + j], ARGV[3])
end
redis.call('HSET', KEYS[1], 'state', ARGV[4], 'summary', ARGV[5], 'resolvedAtMs', ARGV[1],
  'updatedAtMs', ARGV[1], 'orgVersion', ARGV[9])
redis.call('HDEL', KEYS[1], 'failedStage', 'error')
redis.call('ZREM', KEYS[2], ARGV[8])
redis.call('ZREM', KEYS[3], ARGV[8])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[4], ARGV[2])
return out
