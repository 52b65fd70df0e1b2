-- Begin a send (send_begin_common.lua says how), alone.
-- KEYS: 1 op hash, 2 pending zset, 3 journal entry, [4..10 the start's 7 keys, when given].
-- ARGV: 1 nowMs ('' = Redis TIME), 2 fencing token, 3 lease ms, 4 opId, 5 the start's
--       arguments (a JSON array of strings; '' or absent = no start).
return send_begin(KEYS, ARGV)
