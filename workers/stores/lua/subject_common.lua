-- The one owner record (workers/stores/claims.py): every script that changes who owns a claim
-- subject (an issue number's coordination, issue_*.lua; a COLLABORATE item's lease,
-- claim_take and claim_release) has this text in front of it, so both doors read and write
-- one hash with one set of rules. Redis has no script-to-script calls.
--
-- The subject hash: owner (the one seat that owns it, '' = nobody), generation (1 before any
-- owner, +1 on every change of owner: a take, a takeover, a release), sinceMs, refreshedAtMs,
-- and for a lease untilMs (when it lapses), item (the backlog item whose claim took it) and
-- ownerId (the seat whose backlog holds that item). No untilMs = a standing claim that never
-- lapses (an issue claimed with coordinate_issue). A hash written before the claim systems
-- were one names its owner `holder`: it is read as the owner and renamed on the next write.
-- The log stream: one entry per change, event, seatId, previous, atMs, untilMs, generation
-- and the change's receipt (JSON).

local function subject_owner(hash)
  local owner = redis.call('HGET', hash, 'owner')
  if owner and owner ~= '' then return owner end
  return redis.call('HGET', hash, 'holder') or ''
end

local function subject_generation(hash)
  return tonumber(redis.call('HGET', hash, 'generation') or '1')
end

-- A new owner `seat` from `now` (a new generation; the previous owner's work state cleared;
-- the seat no longer a mere contributor of the subject). untilMs '' = a standing claim.
local function subject_own(hash, members, seat, generation, now, untilMs, item, ownerId)
  redis.call('HSET', hash, 'owner', seat, 'generation', generation, 'sinceMs', now,
    'refreshedAtMs', now)
  redis.call('HDEL', hash, 'holder', 'workState', 'blocker', 'reportedBy', 'reportedAtMs')
  if untilMs ~= '' then
    redis.call('HSET', hash, 'untilMs', untilMs, 'item', item, 'ownerId', ownerId)
  else
    redis.call('HDEL', hash, 'untilMs', 'item')
  end
  local raw = redis.call('HGET', members, seat)
  if raw then
    local m = cjson.decode(raw)
    if m.contributor then
      m.contributor = nil
      m.workState, m.blocker, m.reportedAtMs = nil, nil, nil
      if m.follower then
        redis.call('HSET', members, seat, cjson.encode(m))
      else
        redis.call('HDEL', members, seat)
      end
    end
  end
end

-- Nobody owns the subject any more, at `generation`; `keep_owner_id` keeps ownerId (an
-- item's claim is found by its id alone after a release).
local function subject_drop(hash, generation, keep_owner_id)
  redis.call('HSET', hash, 'generation', generation)
  redis.call('HDEL', hash, 'owner', 'holder', 'sinceMs', 'refreshedAtMs', 'untilMs', 'item',
    'workState', 'blocker', 'reportedBy', 'reportedAtMs')
  if not keep_owner_id then redis.call('HDEL', hash, 'ownerId') end
end

-- One change logged (`previous` and `untilMs` '' = none), capped at `cap` entries.
local function subject_log(log, cap, event, seat, previous, now, untilMs, generation, body)
  local entry = {'event', event, 'seatId', seat, 'atMs', now, 'generation', generation,
    'receipt', body}
  if previous ~= '' then
    table.insert(entry, 'previous')
    table.insert(entry, previous)
  end
  if untilMs ~= '' then
    table.insert(entry, 'untilMs')
    table.insert(entry, untilMs)
  end
  redis.call('XADD', log, 'MAXLEN', cap, '*', unpack(entry))
end
