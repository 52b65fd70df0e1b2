-- Write one change of an ask under compare-and-set (ask_commit_common.lua says how), alone.
-- KEYS: 1 the ask's hash, 2 open asks, 3 due asks, 4 consent doc, 5 the work's consents,
--   6 all consents, 7 the work's declines, 8 the seat's concluded asks, 9..14 the inbox
--   room's and the seat's inbox keys, 15 the pending asks, 16.. the message keys, then the
--   work controller's wake keys.
-- ARGV: 1..23 as ask_commit_common.lua's.
-- Returns {'ok', version, position} / {'again', version, 0} / {'conflict', version, 0} /
-- {'missing', -1, 0}.
return ask_commit(KEYS, ARGV)
