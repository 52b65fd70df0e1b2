-- Record an ask once (ask_create_common.lua says how), alone.
-- KEYS: 1 the ask's hash, 2 all asks, 3 the seat's, 4 the work's, 5 the open asks, 6 the
--   dedupe key's asks, 7 the escalated ask's escalations, 8.. each further index.
-- ARGV: 1 the document, 2 created at ms, 3 the ask id, 4 its attempt, 5 '1' for an
--   escalation's own ask, 6 how long the work's and the dedupe key's indexes are kept (ms).
return ask_create(KEYS, ARGV)
